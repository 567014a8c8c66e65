"""Where a silent rank stood when the others waited for it, said beside its suspicion: its own stack dump
(faulthandler, py-spy), the dump written right below the launcher's SIGTERM of its pid, the one dump of a
shared console not waiting in a collective, or the traceback its signal handler raised when it was stopped
(the frames above the handler are where the signal found it)."""

from __future__ import annotations

import os
from typing import Any

from ..model import JobModel
from . import stacks, tracebacks
from .pids import state_for_pid, table_rank
from .suspects import Suspect


def point_at_stacks(s: Suspect, suspects: int, job: JobModel) -> None:
    """Where faulthandler saw a silent rank: in its own dump, or (the only suspect, with no dump of
    its own) in the one dump of a shared console that was not waiting in a collective."""
    heads = [e for e in s.state.events if e.kind == "py_stack_timeout"] if s.state is not None else []
    after = f", after {heads[-1].get('after')} without moving" if heads else ""
    dump = stacks.own_dump(s.state)
    if dump is not None:
        main = stacks.main_thread(dump)
        s.reason += f"; its own stack dump ({stacks.tool(dump)}{after}) shows it {stacks.where(dump)}"
        s.events = [main, *[e for e in s.events if e is not main]]
    elif suspects == 1 and (stopped := _dump_on_sigterm(job, s)) is not None:
        main = stacks.main_thread(stopped)
        s.reason += (f"; its stack dump when the launcher stopped it ({stacks.tool(stopped)}, "
                     f"{os.path.basename(main.file)}: right below the SIGTERM of its pid) shows it {stacks.where(stopped)}")
        s.events = [*s.events, main]
    elif (found := _signal_found(job, s)) is not None:
        frames, exc = found
        inner = f"{frames[0].get('func')} ({tracebacks.script_name(frames[0])}:{frames[0].get('srcline')})"
        outer = f", called from {frames[1].get('func')} (:{frames[1].get('srcline')})" if len(frames) > 1 else ""
        s.reason += f"; its traceback, raised in its signal handler when it was stopped, shows it in {inner}{outer}"
        s.events = [*s.events, frames[0], exc]
    elif heads:  # the header alone: the frames were not read (interleaved with another dump)
        s.reason += f"; its own stack dump (faulthandler{after}) shows where it was stuck"
        s.events = [heads[-1], *[e for e in s.events if e is not heads[-1]]]
    elif suspects == 1 and (odd := stacks.odd_loose_dump(job)) is not None:
        main = stacks.main_thread(odd)
        dumps = stacks.loose_dumps(job)
        files = {d[0].file for d in dumps if d}
        name = os.path.basename(main.file)
        where, its = (name, "") if len(files) == 1 else (f"{len(files)} files", f", in {name},")
        s.reason += (f"; of the {len(dumps)} stack dumps in {where} ({stacks.tool(odd)}; they name no rank), "
                     f"one process's{its} were not waiting in a collective: it was {stacks.where(odd)}, most likely "
                     "this rank")
        s.events = [*s.events, main]


def _signal_found(job: JobModel, s: Suspect) -> tuple[list, Any] | None:
    """(the script frames where the stop found it, innermost first; its exception) from the one traceback of
    this rank raised inside its signal handler (tracebacks.where_signal_found), when its script had a frame."""
    if s.state is None:
        return None
    found = [(frames, e) for e in s.state.events if e.kind == "python_exception"
             and (frames := tracebacks.where_signal_found(job, e))]
    return found[-1] if found else None


def _dump_on_sigterm(job: JobModel, s: Suspect) -> list | None:
    """The one dump written right below the launcher's SIGTERM of this rank's process (stacks.dumps_on_sigterm;
    the pid tied to the rank by the launcher's failure table or the rank's own lines), not waiting in a collective:
    the other processes stopped with it had given up on their own (their timeouts), it was the one still stuck."""
    if s.rank is None:
        return None
    found = []
    for file, pids, dump in stacks.dumps_on_sigterm(job):
        ranks = {st.rank if (st := state_for_pid(job, pid)) is not None else table_rank(job, file, pid) for pid in pids}
        if s.rank in ranks and not stacks.in_collective(dump):
            found.append(dump)
    return found[0] if len(found) == 1 else None
