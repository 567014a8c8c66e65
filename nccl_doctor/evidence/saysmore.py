"""Which of one failure's lines says what failed: a rank's errors are often one failure told several
times (a re-raise quoting the original, a checkpoint's gathered report of every rank's error, a bare
reset the next exception explains), and the most specific line is the one to quote."""

from __future__ import annotations

import re

from ..events import Event

#: Which of a rank's error lines describes its failure best (lower is more specific).
_SPECIFIC = {"cuda_oom": 0, "cuda_error": 0, "nccl_cuda_fail": 0, "nccl_alloc_fail": 0, "nccl_shm": 0,
             "nccl_dup_gpu": 0, "xid": 0, "oom_killer": 0, "worker_mem_kill": 0, "timer_reaped": 0, "python_exception": 1, "torch_wd_exception": 1,
             "log_error": 2, "numeric_warning": 2,
             "torch_nccl_err_kind": 2, "torch_nccl_error": 2, "cpp_terminate": 3, "signal": 3}


#: torch's ExceptionWrapper.reraise: an exception raised in a DataLoader worker (or a pin-memory
#: thread, a DataParallel replica) is raised again in the rank as "<Type>: Caught <Type> in DataLoader
#: worker process 1.", followed by "Original Traceback (most recent call last):" and the original
#: traceback, which ends in the exception itself ("ValueError: corrupt sample 481 ...").
_RERAISED = re.compile(r"^Caught (\w{1,64}) (?:in|on) ")


def _gathered(first: Event, ev: Event) -> bool:
    """``first`` is torch.distributed.checkpoint's CheckpointException (the ranks that failed, said on
    every rank) and ``ev`` the failing rank's own exception it carries: the latter says what failed."""
    return first.kind == ev.kind == "python_exception" and str(first.get("exc_type") or "").endswith(
        "CheckpointException") and not str(ev.get("exc_type") or "").endswith("CheckpointException")


def _bare_reset(first: Event, ev: Event) -> bool:
    """A bare ConnectionResetError the rank's next exception says more about ("During handling of the
    above exception ... DataLoader worker (pid 10177) is killed by signal: Killed.")."""
    return first.get("exc_type") == "ConnectionResetError" and ev.kind == "python_exception" \
        and ev.get("exc_type") != "ConnectionResetError"


def _original_of(wrapper: Event, ev: Event) -> bool:
    """``ev`` is the original exception that torch's re-raise ``wrapper`` quotes below it."""
    if wrapper.kind != "python_exception" or ev.kind != "python_exception" or ev.file != wrapper.file \
            or not 0 < ev.line - wrapper.line <= 200:
        return False
    m = _RERAISED.match(str(wrapper.get("msg") or ""))
    return m is not None and m.group(1) == str(ev.get("exc_type") or "").rsplit(".", 1)[-1] \
        and _RERAISED.match(str(ev.get("msg") or "")) is None


def says_more(told: list[Event], ev: Event) -> bool:
    """``ev`` says what failed better than the failure's lines so far (``told``, the first one first): a more
    specific kind, the original exception a re-raise quotes, the rank's own error a gathered report carries,
    or what a bare reset was."""
    return _SPECIFIC.get(ev.kind, 4) < min(_SPECIFIC.get(e.kind, 4) for e in told) \
        or any(_original_of(w, ev) for w in told) or _gathered(told[0], ev) or _bare_reset(told[0], ev)
