"""Where a process stood, read from faulthandler's dumps of its threads (``py_stack`` events).

A rank that hangs writes nothing, but ``faulthandler.dump_traceback_later`` (or a dump on SIGUSR1)
prints every thread's stack: the main thread's innermost frame is where it was stuck (``queue.get``
in a prefetch helper, ``join`` of two threads deadlocked on two locks, a ``sleep`` in a checkpoint
save), and the ranks that only waited for it are in a collective (``all_reduce`` in
``distributed_c10d.py``). In a per-rank file the dump is that rank's. In a console that several ranks
share, a dump names no rank (and dumps written at the same moment interleave byte by byte: those
are not read); there, the one dump not waiting in a collective, beside dumps that are, is most
likely the silent rank's.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel, RankState
from .facts import _per_job, int_in

_FRAME = re.compile(r'File "(?P<path>[^"\n]{1,4096})", line (?P<line>\d{1,9}) in (?P<func>\S{1,256})')
#: py-spy's frame: "push_metrics (train.py:213)" (its path shortened to the module's place on sys.path);
#: a native one (--native: "clock_nanosleep (libc.so.6)", "sock_accept (socketmodule.c:2759)") is no Python frame.
_SPY_FRAME = re.compile(r"(?:^| \| )(?P<func>[^\s|]{1,256}) \((?P<path>[^\s():|]{1,4096}\.py):(?P<line>\d{1,9})\)")
_LIBRARY = re.compile(r"/(?:site|dist)-packages/|/lib/python\d\.\d{1,2}/|^<")
#: Top-level packages of a py-spy path that are libraries, not the job's code (py-spy prints
#: "torch/distributed/distributed_c10d.py", "threading.py": no site-packages to tell them by).
_LIBRARIES = frozenset(sys.stdlib_module_names) | frozenset((
    "torch", "numpy", "deepspeed", "transformers", "accelerate", "lightning", "pytorch_lightning", "lightning_fabric",
    "megatron", "apex", "tqdm", "ray", "triton", "datasets", "safetensors", "fairscale", "timm", "mmengine", "hydra",
    "omegaconf", "loguru", "rich", "urllib3", "requests", "wandb", "tensorboard", "fsspec", "filelock", "torchvision",
    "torchaudio", "torchtitan", "horovod", "pandas", "scipy", "sklearn", "h5py", "pyarrow", "zmq", "grpc", "google",
    "absl", "psutil", "setuptools", "pkg_resources", "vllm", "submitit", "fairseq", "webdataset", "boto3", "botocore"))
#: torch's collectives live here: a thread in it waits for its peers.
_COLLECTIVES = "/torch/distributed/"
#: autograd's engine entry, where a DDP rank's main thread waits for the gradient all_reduce.
_AUTOGRAD = "/torch/autograd/"
_BACKWARD = frozenset(("_engine_run_backward", "run_backward", "backward"))
#: Threads named in a description besides the main one, at most.
OTHER_THREADS = 3


@dataclass(frozen=True, slots=True)
class Frame:
    path: str
    line: int
    func: str

    @property
    def library(self) -> bool:
        path = self.path.replace("\\", "/")
        if _LIBRARY.search(path) is not None:
            return True
        # py-spy's path relative to sys.path: its first part is the module's top-level package
        return not path.startswith("/") and path.split("/", 1)[0].removesuffix(".py") in _LIBRARIES

    def __str__(self) -> str:
        return f"{self.func} ({os.path.basename(self.path)}:{self.line})"


def frames(ev: Event) -> list[Frame]:
    """The frames of one ``py_stack`` event (faulthandler's or py-spy's), innermost first."""
    rx = _SPY_FRAME if ev.get("state") is not None else _FRAME
    return [Frame(m.group("path"), int(m.group("line")), m.group("func"))
            for m in rx.finditer(str(ev.get("frames") or ""))]


def tool(dump: list[Event]) -> str:
    """Which tool took the dump, for the reader: py-spy (from outside) or faulthandler (the process itself)."""
    return "py-spy" if dump and dump[0].get("state") is not None else "faulthandler"


def dumps_of(events: list[Event]) -> list[list[Event]]:
    """The dumps among a writer's events, in order: each the ``py_stack`` events of one dump (a
    ``Timeout (...)!`` line starts one; a thread whose header does not follow the previous thread's
    frames does too, and so does a thread listed after a main thread: faulthandler lists the newest
    thread first and the main thread, whose outermost frame is ``<module>``, last)."""
    out: list[list[Event]] = []
    end = None  # (file, line) where the current dump's last thread ended
    ended = False  # the current dump listed its process's main thread: faulthandler lists that one last
    for ev in events:
        if ev.kind in ("py_stack_timeout", "pyspy_process"):
            end, ended = None, False
            out.append([])
        elif ev.kind == "py_stack":
            # (a blank line between threads; py-spy's threads follow each other, --locals lines between frames)
            spy = ev.get("state") is not None and out and out[-1] and out[-1][-1].get("state") is not None
            if end is None or end[0] != ev.file or (ev.line > end[1] + 2 and not spy) or (ended and not spy):
                if not out or out[-1]:
                    out.append([])
            out[-1].append(ev)
            joined = str(ev.get("frames") or "")
            end = (ev.file, ev.line + (joined.count(" | ") + 1 if joined else 0))
            # (dumps of several processes one after another, SIGUSR1 sent to each: the next thread is the next one's)
            ended = ev.get("state") is None and bool(fs := frames(ev)) and fs[-1].func == "<module>"
    return [d for d in out if d]


def dump_after(job: JobModel, ev: Event) -> list[Event] | None:
    """The dump right below a line (``Fatal Python error: Segmentation fault``, then a blank line
    and the threads), or None."""
    near = [e for e in job.by_kind("py_stack") if e.file == ev.file and ev.line < e.line <= ev.line + 4]
    if not near:
        return None
    found = dumps_of([e for e in job.by_kind("py_stack_timeout", "py_stack")
                      if e.file == ev.file and e.line >= near[0].line])
    return found[0] if found else None


def main_thread(dump: list[Event]) -> Event:
    """The thread the dump is about: the one faulthandler calls current (the thread a fatal signal
    hit, or the one a SIGUSR1 dump ran in), else the one that runs the script (its outermost frame
    is ``<module>``), else the last listed (faulthandler lists the newest thread first)."""
    return next((t for t in dump if t.get("current") == "Current thread" and frames(t)), None) \
        or next((t for t in dump if (fs := frames(t)) and fs[-1].func == "<module>"), None) \
        or next((t for t in dump if t.get("thread") == "MainThread"), dump[-1])


def in_collective(dump: list[Event]) -> bool:
    """Its main thread waits in torch's collectives, or in autograd's engine (DDP's gradient all_reduce runs in
    backward: a rank that waits there for a peer is seen in ``_engine_run_backward``)."""
    top = [("/" + f.path.replace("\\", "/"), f.func) for f in frames(main_thread(dump))[:3]]
    return any(_COLLECTIVES in path or (_AUTOGRAD in path and func in _BACKWARD) for path, func in top)


def where(dump: list[Event], others_too: bool = True) -> str:
    """'in get (queue.py:171) → wait (threading.py:327), from before_reduce (train.py:109)'; its
    other threads after it (``others_too``)."""
    main = main_thread(dump)
    fs = frames(main)
    if not fs:
        return "in no Python frame"
    inner = fs[0]
    own = [f for f in fs if not f.library]
    if inner.library and own:
        entry = fs[fs.index(own[0]) - 1]  # the library call the script made (queue.get, Thread.join)
        text = f"in {entry}" + (f" → {inner}" if entry is not inner else "") + f", from {own[0]}"
    else:
        text = f"in {inner}" + (f", called from {own[1]}" if not inner.library and len(own) > 1 else "")
    others = []
    for t in dump if others_too else ():
        if t is main:
            continue
        tf = frames(t)
        shown = next((f for f in tf if not f.library), tf[0] if tf else None)
        if shown is not None:
            others.append(str(shown))
    if others:
        text += f"; its other threads: {', '.join(others[:OTHER_THREADS])}" + \
            (f" and {len(others) - OTHER_THREADS} more" if len(others) > OTHER_THREADS else "")
    return text


def own_dump(st: RankState | None) -> list[Event] | None:
    """The last dump in a rank's own lines, or None."""
    found = dumps_of(st.events) if st is not None else []
    return found[-1] if found else None


@_per_job
def loose_dumps(job: JobModel) -> list[list[Event]]:
    """Dumps in lines no rank owns (a console several ranks share), in order."""
    loose = [e for e in job.by_kind("py_stack_timeout", "py_stack") if job.rank_of(e) is None and e.rank is None]
    return dumps_of(loose)


def odd_loose_dump(job: JobModel) -> list[Event] | None:
    """Of the dumps no rank owns, the one whose process was not in a collective while every other
    one was (at least one): the process the others waited for. None unless exactly one."""
    dumps = loose_dumps(job)
    odd = [d for d in dumps if not in_collective(d)]
    # (two dumps of one process: a SIGUSR1 dump, then the timeout's; its main thread's id and place)
    who = {(main_thread(d).get("tid"), str(next(iter(frames(main_thread(d))), ""))) for d in odd}
    return odd[-1] if len(who) == 1 and len(dumps) > len(odd) else None


#: How far below a launcher's SIGTERM line a dump's first thread may start: right below it, or after one thread
#: whose header another process's line cut in two ("Thread 0xW1128 ... Sending process 25481 ...").
_SIGTERM_GAP = 40


@_per_job
def dumps_on_sigterm(job: JobModel) -> list[tuple[str, frozenset[int], list[Event]]]:
    """(file, the pids stopped, the dump) for each dump no rank owns written right below a launcher's
    SIGTERMs ("Sending process 25746 closing signal SIGTERM", one line per worker left, then
    faulthandler's threads): a process that dumps its stacks on SIGTERM (``faulthandler.register``)
    writes no rank with them, so only the launcher's lines say whose they may be."""
    stops = [e for e in job.by_kind("elastic_sigterm") if int_in(e.get("pid")) is not None]
    out = []
    for dump in loose_dumps(job):
        head = dump[0]
        above = [e for e in stops if e.file == head.file and e.line < head.line]
        if not above or head.line - above[-1].line > _SIGTERM_GAP:
            continue
        run = [above[-1]]
        for e in reversed(above[:-1]):
            if e.line < run[-1].line - 1:
                break
            run.append(e)
        out.append((head.file, frozenset(int_in(e.get("pid")) for e in run), dump))
    return out
