"""py-spy's dumps saved beside the logs (``py-spy dump --pid N > pyspy-rank2.txt``): where each rank
stood when the engineer looked. Read from the real t157 recordings (fixtures/realruns/train157.py took
them with the real py-spy 0.4.3); expected places are the dumps' own lines, read by hand."""

from __future__ import annotations

import shutil
from pathlib import Path

from nccl_doctor import analyze
from nccl_doctor.events import Event
from nccl_doctor.evidence import stacks
from nccl_doctor.records import join_block

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"
REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _rule(report, rule: str):
    return next(f for f in report.findings if f.rule == rule)


def _lines(text: str):
    rest = text.split("\n")

    def take():
        return rest.pop(0) if rest else None

    def peek():
        return rest[0] if rest else None
    return take, peek


def test_a_thread_and_its_frames_are_one_record_and_each_frame_keeps_its_own_line():
    take, peek = _lines('    wait_for_shard (train157.py:221)\n        Arguments:\n            path: "/data/x"\n'
                        '    main (train157.py:260)\n    clock_nanosleep (libc.so.6)\nThread 1352 (idle): "prefetch"')
    records = join_block('Thread 1273 (idle): "MainThread"', take, peek)
    assert records[0] == ('Thread 1273 (idle): "MainThread" wait_for_shard (train157.py:221) | main (train157.py:260)'
                          ' | clock_nanosleep (libc.so.6)')
    # --locals' lines under a frame are passed over; the frames are records again at their own offsets
    assert records[1:] == [(1, "wait_for_shard (train157.py:221)"), (4, "main (train157.py:260)"),
                           (5, "clock_nanosleep (libc.so.6)")]
    assert peek() == 'Thread 1352 (idle): "prefetch"'


def test_python_frames_of_a_native_dump_and_which_are_the_jobs_own():
    ev = Event("py_stack", "d.txt", 4, fields={
        "state": "idle", "thread": "MainThread",
        "frames": "clock_nanosleep (libc.so.6) | time_sleep (libpython3.11.so.1.0) | wait_for_shard (train157.py:221)"
                  " | sock_accept (socketmodule.c:2759) | Condition.wait (threading.py:327)"
                  " | all_reduce (torch/distributed/distributed_c10d.py:3252) | <module> (train157.py:269)"})
    fs = stacks.frames(ev)
    assert [(f.func, f.line) for f in fs] == [("wait_for_shard", 221), ("Condition.wait", 327), ("all_reduce", 3252),
                                             ("<module>", 269)]
    assert [f.library for f in fs] == [False, True, True, False]
    assert stacks.tool([ev]) == "py-spy"


def test_a_job_stopped_from_outside_is_placed_by_the_dumps_taken_during_the_hang():
    # timeout -s TERM stopped torchrun before any collective timeout; pyspy-rank0.txt:4-7 has rank 0's main
    # thread in push_metrics (a socket recv that never returns), ranks 1-2's dumps show all_reduce
    report = analyze([str(RUNS / "t157_socket_r0_w3_pyspy_term_split")], jobs=1)
    assert report.verdict["ranks"] == [0]
    assert "in push_metrics (train157.py:213)" in report.verdict["summary"]


def test_one_file_of_every_ranks_dumps_is_tied_to_ranks_by_their_pids(tmp_path):
    # "for p in $(pgrep -f train); do py-spy dump --pid $p; done > stacks.txt": the dumps name pids only;
    # torchrun's failure table (console.log:93) gives pid 1273 to rank 2, whose dump is in wait_for_shard
    run = RUNS / "t157_sleep_r2_w3_native_logdir"
    shutil.copy(run / "console.log", tmp_path / "console.log")
    with open(tmp_path / "stacks.txt", "wb") as out:
        for r in range(3):
            out.write((run / f"pyspy-rank{r}.txt").read_bytes())
    rk2 = _rule(analyze([str(tmp_path)], jobs=1), "RK2")
    assert rk2.ranks == [2]
    assert "its own stack dump (py-spy) shows it in wait_for_shard (train157.py:221)" in rk2.summary
    assert any(e.file.endswith("stacks.txt") and e.text.startswith("Thread 1273 (idle)") for e in rk2.evidence)


def test_a_dump_file_is_not_the_ranks_last_line():
    # rank 1's own output ends in the console; pyspy-rank1.txt is what py-spy saw, not what rank 1 wrote
    report = analyze([str(RUNS / "t157_lock_r1_w3_pyspy_tee")], jobs=1)
    assert report.verdict["ranks"] == [1]
    rank1 = next(r for r in report.to_dict()["ranks"] if r["rank"] == 1)
    assert rank1["last_line"]["file"].endswith("console.log")
    assert rank1["last_line"]["text"] == "step 9 loss 2.2966"  # console.log:29, its last step before the lock


def test_a_collective_frame_of_a_pyspy_dump_is_still_an_event_at_its_own_line():
    # 049: "Thread 474480 (idle)" at line 2, "broadcast (torch/distributed/distributed_c10d.py:2772)" at line 3
    report = analyze([str(REAL / "049_deepspeed_device_id.log")], jobs=1)
    places = {(e.line, e.text.strip()) for f in report.findings for e in f.evidence}
    assert (3, "broadcast (torch/distributed/distributed_c10d.py:2772)") in places
