"""Writing what the user asked for, and only that, or saying in one line why it could not be done.

* ``write_file(path, data)``: a regular file (or a new one) is written to a temporary file beside it,
  flushed to disk, then renamed over it: a full disk or a killed run never leaves a truncated report
  where the last good one was. A device or pipe (``/dev/stdout``, ``/dev/full``, a FIFO) is written
  in place (it cannot be replaced). A folder is refused: nothing is ever written next to it under
  another name (matplotlib would have written ``/tmp.png`` for ``--plot /tmp``).
* ``check_target(path)``: the same refusals before the analysis runs, so a typo costs nothing.
* ``to_stdout(text)``: standard output may be closed (``>&-``): that is an OutputError too.
* ``say(message)``: one line on stderr when stderr is open; nothing (and no exception) when not.
"""

from __future__ import annotations

import os
import stat
import sys

from .report.safe import plain


class OutputError(Exception):
    """The report (or the PNG) could not be written; ``str(exc)`` is the one line to show."""


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_target(path: str) -> None:
    """Refuse, before any work, an output path that is a folder or whose folder does not exist."""
    shown = plain(path, 300)
    if os.path.isdir(path):
        raise OutputError(f"cannot write {shown}: it is a folder (give a file name)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OutputError(f"cannot write {shown}: no such folder {plain(parent, 300)}")


def write_file(path: str, data: bytes | str) -> None:
    """Write ``data`` to ``path`` (see the module docstring); raise OutputError with the reason."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    check_target(path)
    shown = plain(path, 300)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"cannot write {shown}: {_why(exc)}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):  # a device or a pipe: written in place
        try:
            with open(path, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise OutputError(f"cannot write {shown}: {_why(exc)}") from None
        return
    folder, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666  # a new file: the umask applies
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)  # a full disk may only say so here
        finally:
            os.close(fd)
        if st is not None:
            os.chmod(tmp, mode)  # O_CREAT applied the umask; an existing file keeps its own mode
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OutputError(f"cannot write {shown}: {_why(exc)}") from None


def to_stdout(text: str) -> None:
    """Write to standard output and flush; OutputError when it is closed or cannot take it."""
    out = sys.stdout
    if out is None:
        raise OutputError("cannot write the report: standard output is closed")
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # a full disk, a closed file
        raise OutputError(f"cannot write the report: {_why(exc) if isinstance(exc, OSError) else exc}") from None


def say(message: str) -> None:
    """``nccl-doctor: <message>`` on stderr, when there is a stderr to write to."""
    err = sys.stderr
    if err is None:
        return
    try:
        err.write(f"nccl-doctor: {message}\n")
        err.flush()
    except (OSError, ValueError):
        pass
