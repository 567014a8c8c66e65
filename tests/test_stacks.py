"""faulthandler's stack dumps (evidence/stacks.py): where a silent rank was stuck and where a rank
died of a signal, read from the frames of real recordings. Expected places come from the dumps'
own lines, read by hand (the line numbers are those faulthandler printed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor import analyze
from nccl_doctor.events import Event
from nccl_doctor.evidence import stacks

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def _report(case: str):
    run = RUNS / case
    return analyze([str(p) for p in run.rglob("*") if p.is_file() and p.name != "expected.json"], jobs=1)


def _rule(report, rule: str):
    return next(f for f in report.findings if f.rule == rule)


# (case, the silent rank, what RK2 says of where it was)
SILENT = [
    # --log-dir: rank 1's stderr.log holds its own dump ("Timeout (0:00:10)!", then its frames)
    ("t13_hang_r1_w4_fh_r0_logdirq", 1,
     "its own stack dump (faulthandler, after 0:00:10 without moving) shows it in before_reduce (train13.py:103), "
     "called from train (train13.py:155)"),
    # three dumps, no rank on them: two in all_reduce (distributed_c10d.py:3252), one blocked in queue.get
    # under before_reduce; the launcher stopped rank 1, which wrote no error
    ("t13_queue_r1_w3_fh_r0_redirect", 1,
     "of the 3 stack dumps in console.log (faulthandler; they name no rank), one process's were not waiting in a "
     "collective: it was in get (queue.py:171) → wait (threading.py:327), from before_reduce (train13.py:109), most "
     "likely this rank"),
    # the main thread joins two threads deadlocked on two locks
    ("t13_deadlock_r3_w4_fh_record_split", 3,
     "in join (threading.py:1119) → _wait_for_tstate_lock (threading.py:1139), from deadlock (train13.py:91); its "
     "other threads: metrics_flusher (train13.py:82), checkpoint_writer (train13.py:76)"),
    # three SIGUSR1 dumps back to back with no line between them (console.log:17-87): each ends with its main
    # thread (outermost frame <module>), the next thread is the next process's; the third's main thread waits
    # for the metrics lock in add, its flusher blocked in recv at line 201 holds it
    ("t318_lock_r2_w3_logging5_tee_usr1", 2,
     "of the 3 stack dumps in console.log (faulthandler; they name no rank), one process's were not waiting in a "
     "collective: it was in add (train318.py:190), called from main (train318.py:365); its other threads: run "
     "(train318.py:249), _flusher (train318.py:201)"),
    # two SIGUSR1 dumps: rank 0's main thread in autograd's engine (_engine_run_backward: DDP's gradient all_reduce
    # waits there), the other's in np.load under the DataLoader's __getitem__ (console.err:1-52)
    ("t330_dataload_r1_w2_split", 1,
     "of the 2 stack dumps in console.err (faulthandler; they name no rank), one process's were not waiting in a "
     "collective: it was in load (_npyio_impl.py:454), from _shard (train330.py:198)"),
    # two nodes, two SIGUSR1 dumps in each node's stderr (trn-node-04.err, trn-node-05.err): three in DDP's backward,
    # rank 0's main thread in renew, retrying its refused connection (the injected hang); counted over both files
    ("t366_retry_connect_r0_w4_n2_sigusr1_split", 0,
     "of the 4 stack dumps in 2 files (faulthandler; they name no rank), one process's, in trn-node-04.err, were not "
     "waiting in a collective: it was in renew (train366.py:237)"),
]


@pytest.mark.parametrize(("case", "rank", "said"), SILENT, ids=[c for c, _r, _s in SILENT])
def test_a_silent_ranks_dump_says_where_it_was(case, rank, said):
    rk2 = _rule(_report(case), "RK2")
    assert rk2.ranks == [rank]
    assert said in rk2.summary
    assert any(e.text.startswith(("Thread 0x", "Current thread 0x")) for e in rk2.evidence)


def test_a_segfault_is_placed_by_the_dump_of_the_thread_it_hit():
    # "Fatal Python error: Segmentation fault", a thread with no Python frame, then the current thread
    rk1 = _rule(_report("segv_r0_w3_faulthandler"), "RK1")
    assert rk1.ranks == [0]
    assert rk1.summary.endswith("Fatal Python error: Segmentation fault, in inject_before_step (train.py:210), "
                                "called from main (train.py:143)")


def test_a_late_ranks_dump_is_no_hang():
    report = _report("t13_slow_r1_w4_fh_healthy")
    assert report.verdict is None or not report.verdict.get("ranks")
    assert not [f for f in report.findings if f.rule in ("RK1", "RK2", "RK3")]


def _thread(line: int, frames: list[str], current: bool = False) -> Event:
    joined = " | ".join(f'File "{p}", line {n} in {f}' for p, n, f in (fr.split(":") for fr in frames))
    return Event("py_stack", "c.log", line, fields={"current": "Current thread" if current else "Thread",
                                                    "tid": f"0x{line:x}", "frames": joined})


def test_dumps_are_told_apart_by_their_headers_and_gaps():
    a = _thread(2, ["/x/lib/python3.11/threading.py:327:wait", "/job/train.py:9:fetch"])
    b = _thread(6, ["/job/train.py:30:worker"])  # after a blank line: the same dump
    c = _thread(20, ["/job/train.py:40:main", "/job/train.py:50:<module>"])  # far below: another dump
    timeout = Event("py_stack_timeout", "c.log", 21, fields={"after": "0:00:10"})
    d = _thread(22, ["/job/train.py:41:main", "/job/train.py:50:<module>"])
    assert stacks.dumps_of([a, b, c, timeout, d]) == [[a, b], [c], [d]]
    assert stacks.main_thread([a, b]) is b  # neither is current nor runs <module>: the last listed
    assert stacks.where([a, b]) == "in worker (train.py:30); its other threads: fetch (train.py:9)"
    assert stacks.where([b, a]) == "in wait (threading.py:327), from fetch (train.py:9); its other threads: " \
        "worker (train.py:30)"
    assert stacks.main_thread([a, _thread(9, ["/job/t.py:1:f"], current=True)]).line == 9
