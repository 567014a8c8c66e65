"""Where in its own script a rank was when it gave up: the innermost frame of the job's code (not
Python's or a package's) in the traceback of its last echo (a timeout, a lost peer)."""

from __future__ import annotations

import re

from ..events import Event
from ..model import RankState
from .causes import _CONSEQUENCE, _TIMEOUT_ECHOES
from .tracebacks import frames_above, script_name

#: A launcher's console entry point ("/venv/bin/torchrun", "deepspeed"): its own traceback (an agent that lost
#: the store) is no rank's place in its script.
_ENTRY_POINT = re.compile(r"(?:^|[/\\])bin[/\\][^/\\.]+$")
#: Exception lines that may end a rank's wait (their message says it was an echo).
_EXC_KINDS = frozenset((*_TIMEOUT_ECHOES, "python_exception"))


def script_site(st: RankState) -> tuple[tuple[str, int], Event, Event, bool] | None:
    """((script name, line), its frame, the exception, whether its traceback goes through
    torch.distributed) of the last echo the process raised."""
    evs = st.events
    copy_of = None  # the text of a frameless exception line: a logger's one-record copy of the traceback below
    for i in range(len(evs) - 1, -1, -1):
        exc = evs[i]
        if exc.kind not in _EXC_KINDS:
            continue
        text = exc_text(exc)
        if copy_of is not None and text != copy_of:
            continue
        if exc.kind == "python_exception" and not _CONSEQUENCE.search(text):
            return None  # its own error: a cause, told elsewhere
        frames = list(frames_above(evs, i, _EXC_KINDS))
        f = next((f for f in frames if f.kind == "py_script_frame" and not _ENTRY_POINT.search(str(f.get("path")))), None)
        if f is None and copy_of is None and not any(fr.kind.endswith("_frame") for fr in frames):
            # a JSON or one-line record holding the whole traceback in one field ("training failed" with the
            # exception embedded), written to another stream or read after the traceback itself: the same
            # exception with its frames, earlier, says where the rank was
            copy_of = text
            continue
        if any(fr.kind == "py_signal_frame" for fr in frames):
            # raised in a signal handler that ran a collective (Lightning's broadcast of a SIGTERM): where the
            # stop found the rank, not where it waited (t476_trainer_fetchstall; evidence.endings tells the stop)
            return None
        in_c10d = any(f.kind == "torch_c10d_frame" for f in frames)
        return ((script_name(f), int(f.get("srcline") or 0)), f, exc, in_c10d) if f is not None else None
    return None


def exc_text(exc: Event) -> str:
    """What an exception line says: its message (and gloo's error text), else the line."""
    return " ".join(str(v) for v in (exc.get("msg"), exc.get("err")) if v) or exc.text
