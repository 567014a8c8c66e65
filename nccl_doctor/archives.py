"""Log bundles: a tar archive (plain, gzip, zstd, bzip2 or xz) or a zip handed over whole ("support-bundle.tar.gz", the job's
``logs.tar.zst``) is read member by member, as the folder it was packed from.

Members are copied once, in archive order (a compressed tar can only be read from the start), into a
private temporary folder that is removed when the process exits; the archive itself is never
modified. Each member is reported as ``<archive>!/<member name>`` (its name is untrusted: the faces
show it inert; it never becomes a path on disk, where members are numbered). Bounded whatever the
archive claims: at most ``MAX_MEMBERS`` members and ``MAX_BYTES`` bytes are copied, and never into the
last ``HEADROOM`` bytes of free space; anything past that is reported as skipped; links, devices and archives inside the archive are skipped with a
reason; a truncated or corrupt archive keeps the members read before the damage.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from typing import BinaryIO

from .events import Skipped
from .reading import open_binary

#: Names of tar archives, plain or compressed (compression is recognised by its magic bytes), and zips.
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd", ".tzst", ".tar.bz2", ".tbz2", ".tbz", ".tar.xz",
                    ".txz", ".zip")
#: Archives inside an archive unpacked (a node's tar.gz inside the job's zip): this deep at most.
MAX_DEPTH = 2
MAX_MEMBERS = 100_000
MAX_BYTES = 32 << 30
#: Free space left in the temporary folder after a member is copied: a bundle never fills the disk.
HEADROOM = 1 << 30
_COPY_CHUNK = 1 << 20
#: (path, size, mtime_ns) -> what it unpacked to: a poll that finds the archive unchanged reuses it.
_UNPACKED: dict[tuple[str, int, int], tuple[list, list[Skipped]]] = {}
_TMP: list[str] = []


def is_archive(path: str) -> bool:
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def _tmpdir() -> str:
    if not _TMP:
        _TMP.append(tempfile.mkdtemp(prefix="nccl-doctor-bundle-"))
        atexit.register(shutil.rmtree, _TMP[0], True)
    return _TMP[0]


def unpack(path: str, size: int, mtime_ns: int, keep, shown: str | None = None,
           depth: int = 0) -> tuple[list, list[Skipped]]:
    """(InputFile-like members, skipped) of the archive at ``path`` (``shown``: its name in the report,
    the path itself by default). ``keep(name)``: None when a member of that name is to be read, else why
    not (the rules a folder's files follow). An archive member is unpacked too, ``MAX_DEPTH`` deep."""
    shown = shown or path
    key = (path, size, mtime_ns)
    if key in _UNPACKED:
        return _UNPACKED[key]
    from .discover import InputFile  # (discover imports this module)

    files: list[InputFile] = []
    skipped: list[Skipped] = []
    total = 0
    try:
        for n, (name, msize, regular, opener, salvage) in enumerate(_members(path)):
            member_shown = f"{shown}!/{name.lstrip('/')}"
            if n >= MAX_MEMBERS:
                skipped.append(Skipped(shown, f"archive has more than {MAX_MEMBERS} members: the rest not read"))
                break
            if regular is None:
                continue  # a folder
            if not regular:
                skipped.append(Skipped(member_shown, "not a regular file in the archive (a link or device)"))
                continue
            inner = is_archive(name)
            why = ("an archive inside the archive, too deep (unpack it first)" if depth + 1 >= MAX_DEPTH else None) \
                if inner else keep(name)
            if why is not None:
                skipped.append(Skipped(member_shown, why))
                continue
            if total + msize > MAX_BYTES:
                skipped.append(Skipped(member_shown, f"archive members past {MAX_BYTES >> 30} GiB not read"))
                continue
            if shutil.disk_usage(_tmpdir()).free < msize + HEADROOM:
                skipped.append(Skipped(member_shown, "not enough free space in the temporary folder to unpack it"))
                continue
            src = opener()
            if src is None:
                continue
            dest = os.path.join(_tmpdir(), f"{len(_UNPACKED):05d}-{depth}-{n:06d}" + (_suffix(name) if inner else ""))
            try:
                with src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out, _COPY_CHUNK)
            except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError):
                # the archive ends inside this member (a copy cut short by a full disk): keep what it still holds
                got = _salvaged(salvage, dest) if salvage is not None and not inner else 0
                if got:
                    files.append(InputFile(member_shown, dest, got,
                                           f"cut short: the archive ends inside it ({got:,} of {msize:,} bytes)"))
                raise
            total += msize
            if inner:  # (a node's tar.gz inside the job's zip: its members, named under both)
                got, why_not = unpack(dest, msize, 0, keep, member_shown, depth + 1)
                files += got
                skipped += why_not
                continue
            files.append(InputFile(member_shown, dest, msize))
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        what = "truncated or corrupt" if files else "not a readable archive"
        skipped.append(Skipped(shown, f"{what}: {str(exc)[:120] or type(exc).__name__}"
                                      + (f" ({len(files)} members read before it)" if files else "")))
    _UNPACKED[key] = (files, skipped)
    return files, skipped


def _suffix(name: str) -> str:
    """The archive suffix of a member's name, kept on its copy (is_archive reads names)."""
    low = name.lower()
    return next((sfx for sfx in sorted(ARCHIVE_SUFFIXES, key=len, reverse=True) if low.endswith(sfx)), "")


def _members(path: str) -> Iterator[tuple[str, int, bool | None, Callable[[], BinaryIO | None],
                                        Callable[[], bytes] | None]]:
    """(name, size, regular file: True, a link or device: False, a folder: None, how to open it, how to read what a
    damaged archive still holds of it) of each member, in archive order: a zip's from its directory, a tar's as the
    stream goes (a compressed tar can only be read from the start). A compressed tar that ends early (cut short, or
    damaged) yields every member whole before the damage, then raises."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                yield info.filename, info.file_size, None if info.is_dir() else True, \
                    (lambda info=info: z.open(info)), None
        return
    with open_binary(path) as raw:
        fp = _UntilDamage(raw)
        with tarfile.open(fileobj=fp, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                yield member.name, member.size, None if member.isdir() else member.isreg(), \
                    (lambda member=member: tar.extractfile(member)), \
                    (lambda start=member.offset_data, size=member.size: _member_bytes(path, start, size))
        if fp.damage is not None:
            raise fp.damage


class _UntilDamage:
    """A decompressor's stream read in pieces, that gives every byte decoded before a damage (a gzip cut short
    loses its last block otherwise: a buffered read drops what it had gathered when the decoder fails), then
    ends; ``damage`` says why it ended."""

    def __init__(self, fp: BinaryIO) -> None:
        self._fp = fp
        self._piece = getattr(fp, "read1", None) or fp.read
        self.damage: Exception | None = None

    def read(self, n: int = -1) -> bytes:
        parts, got = [], 0
        while self.damage is None and (n < 0 or got < n):
            try:
                piece = self._piece(1 << 16 if n < 0 else min(1 << 16, n - got))
            except (EOFError, OSError, ValueError) as exc:
                self.damage = exc
                break
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        return b"".join(parts)


def _member_bytes(path: str, start: int, size: int) -> bytes:
    """What a damaged archive still holds of the member whose data starts at ``start`` (at most ``size`` bytes):
    read again from the start (a compressed stream cannot seek), up to the damage."""
    with open_binary(path) as raw:
        fp = _UntilDamage(raw)
        while start > 0 and (skip := fp.read(min(start, _COPY_CHUNK))):
            start -= len(skip)
        return fp.read(size) if start == 0 else b""


def _salvaged(salvage: Callable[[], bytes], dest: str) -> int:
    """Write what is left of a member into ``dest``; the number of bytes."""
    try:
        data = salvage()
    except (EOFError, OSError, ValueError):
        return 0
    with open(dest, "wb") as out:
        out.write(data)
    return len(data)
