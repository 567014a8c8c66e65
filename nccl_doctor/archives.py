"""Log bundles: a tar archive (plain, gzip or zstd) handed over whole ("support-bundle.tar.gz", the job's
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

from .events import Skipped
from .reading import open_binary

#: Names of tar archives, plain or compressed (compression is recognised by its magic bytes).
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd", ".tzst")
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


def unpack(path: str, size: int, mtime_ns: int, keep) -> tuple[list, list[Skipped]]:
    """(InputFile-like members, skipped) of the archive at ``path``. ``keep(name)``: None when a member of
    that name is to be read, else why not (the rules a folder's files follow)."""
    key = (path, size, mtime_ns)
    if key in _UNPACKED:
        return _UNPACKED[key]
    from .discover import InputFile  # (discover imports this module)

    files: list[InputFile] = []
    skipped: list[Skipped] = []
    total = 0
    try:
        with open_binary(path) as fp, tarfile.open(fileobj=fp, mode="r|") as tar:
            for n, member in enumerate(tar):
                shown = f"{path}!/{member.name.lstrip('/')}"
                if n >= MAX_MEMBERS:
                    skipped.append(Skipped(path, f"archive has more than {MAX_MEMBERS} members: the rest not read"))
                    break
                if member.isdir():
                    continue
                if not member.isreg():
                    skipped.append(Skipped(shown, "not a regular file in the archive (a link or device)"))
                    continue
                why = "an archive inside the archive (unpack it first)" if is_archive(member.name) else keep(member.name)
                if why is not None:
                    skipped.append(Skipped(shown, why))
                    continue
                if total + member.size > MAX_BYTES:
                    skipped.append(Skipped(shown, f"archive members past {MAX_BYTES >> 30} GiB not read"))
                    continue
                if shutil.disk_usage(_tmpdir()).free < member.size + HEADROOM:
                    skipped.append(Skipped(shown, "not enough free space in the temporary folder to unpack it"))
                    continue
                src = tar.extractfile(member)
                if src is None:
                    continue
                dest = os.path.join(_tmpdir(), f"{len(_UNPACKED):05d}-{n:06d}")
                with open(dest, "wb") as out:
                    shutil.copyfileobj(src, out, _COPY_CHUNK)
                total += member.size
                files.append(InputFile(shown, dest, member.size))
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        what = "truncated or corrupt" if files else "not a readable tar archive"
        skipped.append(Skipped(path, f"{what}: {str(exc)[:120] or type(exc).__name__}"
                                     + (f" ({len(files)} members read before it)" if files else "")))
    _UNPACKED[key] = (files, skipped)
    return files, skipped
