"""Turn the user's paths (files, folders, globs, ``-``) into the list of inputs to read.

Folders are walked recursively; symlinked folders are followed once (no loops); the same file
reached twice is read once. What is not read is reported with a reason, never dropped silently.
"""

from __future__ import annotations

import glob
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .archives import is_archive, unpack
from .errorfile import looks_like as looks_like_error_file
from .events import Skipped
from .flightrec.loader import is_dump_name
from .jsonexport import export_kind
from .rasjson import looks_like as looks_like_ras

#: Files that are never logs. Flight-recorder dumps (``nccl_trace_rank_<N>``, any extension) are kept:
#: ``flightrec.split_dumps`` reads them.
_NOT_LOG_SUFFIXES = (".json", ".png", ".jpg", ".jpeg", ".gif", ".pdf", ".svg", ".pt", ".pth",
                     ".safetensors", ".so", ".whl", ".zip", ".tar", ".npy", ".npz", ".pyc", ".pickle", ".pkl")
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True, slots=True)
class InputFile:
    """One input: ``path`` is what the report shows, ``real`` what is opened (``-`` = stdin)."""

    path: str
    real: str
    size: int
    #: why only part of it could be had (an archive that ends inside it): its lines stop at the cut, not where
    #: their writer stopped
    cut: str | None = None


class InputError(Exception):
    """Nothing analysable was given (exit status 2, one-line message)."""


def discover(paths: list[str], folders: dict[str, int] | None = None) -> tuple[list[InputFile], list[Skipped]]:
    """The inputs under ``paths`` and what is skipped. ``folders``: filled with each folder walked
    (and the folder of each file given), with its mtime before it was listed."""
    files: list[InputFile] = []
    skipped: list[Skipped] = []
    seen: set[tuple[int, int]] = set()
    walked: set[tuple[int, int]] = set()  # (device, inode) of the folders listed
    if not paths:
        raise InputError("no input paths given")

    def add_file(display: str) -> None:
        try:
            st = os.stat(display)
        except OSError as exc:
            skipped.append(Skipped(display, f"cannot stat: {exc.strerror or exc}"))
            return
        if not stat.S_ISREG(st.st_mode):
            skipped.append(Skipped(display, "not a regular file"))
            return
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return  # the same file reached twice (symlink, overlapping arguments): read once
        seen.add(key)
        archive = is_archive(display)  # a support bundle: its members, as the folder it was packed from
        if not archive and _excluded_by_name(display) is not None and \
                not (display.lower().endswith(".json") and _json_read(display)):
            skipped.append(Skipped(display, "not a log file (by its extension)"))
            return
        if not os.access(display, os.R_OK):
            skipped.append(Skipped(display, "permission denied"))
            return
        if archive:
            got, why = unpack(display, st.st_size, st.st_mtime_ns, _excluded_by_name)
            files.extend(got)
            skipped.extend(why)
            return
        files.append(InputFile(display, display, st.st_size))

    def listing(folder: str) -> Iterator[os.DirEntry] | None:
        """The folder's entries in name order; None when it was walked already (a symlink loop) or
        cannot be listed (said in ``skipped``)."""
        try:
            st = os.stat(folder)
            key = (st.st_dev, st.st_ino)
            if key in walked:
                return None
            walked.add(key)
            if folders is not None:
                folders[folder] = st.st_mtime_ns
            return iter(sorted(os.scandir(folder), key=lambda e: e.name))
        except OSError as exc:
            skipped.append(Skipped(folder, f"cannot list folder: {exc.strerror or exc}"))
            return None

    def walk(top: str) -> None:
        """Depth-first in name order, with a stack of listings instead of recursion: a folder
        thousands of levels deep is read like any other."""
        first = listing(top)
        stack = [first] if first is not None else []
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
                continue
            if entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                continue  # .git, .cache: never logs
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if not is_dir:
                add_file(entry.path)
            elif (sub := listing(entry.path)) is not None:
                stack.append(sub)

    for p in paths:
        if p == "-":
            files.append(InputFile("<stdin>", "-", 0))
        elif os.path.isdir(p):
            walk(p)
        elif os.path.lexists(p):
            if folders is not None:
                parent = os.path.dirname(p) or "."
                try:
                    folders[parent] = os.stat(parent).st_mtime_ns
                except OSError:
                    pass
            add_file(p)
        elif _GLOB_CHARS & set(p):
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                skipped.append(Skipped(p, "glob matched nothing"))
            for m in matches:
                walk(m) if os.path.isdir(m) else add_file(m)
        else:
            skipped.append(Skipped(p, "no such file or folder"))
    return files, skipped


def _json_read(path: str) -> bool:
    """A .json file that is read all the same, told by its first bytes (read once): an ncclras report
    (``ncclras -f json``), torchelastic's error.json of a worker, a search UI's or a cloud CLI's export."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8192)
    except OSError:
        return False
    return looks_like_ras(head[:4096]) or looks_like_error_file(head) or export_kind(head) is not None


def _excluded_by_name(name: str) -> str | None:
    """Why a file (or an archive member) of this name is not read, or None: by its extension, unless
    it names a flight-recorder dump."""
    if name.lower().endswith(_NOT_LOG_SUFFIXES) and not is_dump_name(name):
        return "not a log file (by its extension)"
    return None


class Rediscovery:
    """``discover(paths)`` for a caller that asks again and again (``watch`` polls every second):
    walked again only when a folder under the paths changed (a file created, removed or renamed
    changes its folder's mtime), so that following a thousand files costs a few folder ``stat``s
    per poll, not a walk. Globs and ``-`` are resolved at every call; so is everything when a
    folder changed less than ``FRESH`` seconds ago (mtime granularity), or cannot be read.
    """

    FRESH = 2.0

    def __init__(self, paths: list[str]):
        self.paths = list(paths)
        self._folders: dict[str, int] = {}  # folder -> mtime_ns at the last walk
        self._found: tuple[list[InputFile], list[Skipped]] | None = None
        self.cacheable = all(p != "-" and not (_GLOB_CHARS & set(p)) for p in self.paths)

    def __call__(self) -> tuple[list[InputFile], list[Skipped]]:
        if self._found is not None and self._unchanged():
            return self._found
        folders: dict[str, int] = {}
        self._found = discover(self.paths, folders)
        self._folders = folders
        return self._found

    def _unchanged(self) -> bool:
        if not self.cacheable or not self._folders:
            return False
        now = time.time_ns()
        for folder, mtime in self._folders.items():
            try:
                current = os.stat(folder).st_mtime_ns
            except OSError:
                return False
            if current != mtime or now - current < self.FRESH * 1e9:
                return False
        return True
