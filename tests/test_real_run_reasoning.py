"""Causal reasoning on real torchrun output (line shapes copied from fixtures/realruns/ recordings of
train4.py, with other host names, pids and ports), checked end to end on small hand-made folders.

Expected values come from what the text says, read by hand: which rank the launcher's table leaves
out, which rank died of which signal, who had already timed out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nccl_doctor import analyze
from nccl_doctor.evidence.facts import count_ranks
from nccl_doctor.model.links import _host_in_path

_ECHO = ("[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
         "Connection closed by peer [10.0.0.7]:4{r}11. This is typically caused by a remote worker crashing.")
_TIMEOUT = ("[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78]"
            " Timed out waiting 12000ms for recv operation to complete")


def _row(idx: int, host: str, rank: int, local: int, code: int, pid: int) -> list[str]:
    sig = {-15: "  (SIGTERM)", -6: "  (SIGABRT)"}.get(code, " ")
    tb = (f"Signal {-code} ({sig.strip(' ()')}) received by PID {pid}" if code < 0
          else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
    return [f"[{idx}]:", "  time      : 2026-11-23_23:51:22", f"  host      : {host}",
            f"  rank      : {rank} (local_rank: {local})", f"  exitcode  : {code} (pid: {pid}){sig}",
            "  error_file: <N/A>", f"  traceback : {tb}"]


def _table(host: str, others: list[tuple], root: tuple) -> list[str]:
    out = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
           "============================================================", "/job/train.py FAILED",
           "------------------------------------------------------------", "Failures:"]
    for i, (rank, local, code, pid) in enumerate(others, 1):
        out += _row(i, host, rank, local, code, pid)
    if not others:
        out.append("  <NO_OTHER_FAILURES>")
    out += ["------------------------------------------------------------", "Root Cause (first observed failure):"]
    out += _row(0, host, *root)
    return out + ["============================================================"]


def _write(tmp_path, name: str, lines: list[str]):
    (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_rank_that_left_with_status_0_is_the_one_its_peers_lost(tmp_path):
    # Ranks 0, 2 and 3 lose a peer; the table lists them (two SIGTERMed, rank 2 exit 1) and leaves
    # rank 1 out: torchrun stops every worker still running, so rank 1 had already exited, status 0.
    lines = ["2026-11-23 23:51:19,892 | INFO | world 4, 24 steps, 577 parameters"]
    lines += [_ECHO.format(r=r) for r in (0, 2, 3)]
    lines += _table("node-a", [(0, 0, -15, 811), (3, 3, -15, 814)], (2, 2, 1, 813))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    rk2 = [f for f in report.findings if f.rule == "RK2"]
    assert rk2 and "exited with status 0" in rk2[0].summary
    assert not [f for f in report.findings if f.rule == "RK1"]


def test_the_last_rank_listed_bounds_a_lone_table(tmp_path):
    # Only ranks 0-2 are in the one table and nothing says the job has one node: rank 3 may live on
    # a node whose log is not here, so nothing says that it left.
    lines = [_ECHO.format(r=r) for r in (0, 1, 2)]
    lines += _table("node-a", [(0, 0, -15, 811), (1, 1, -15, 812)], (2, 2, 1, 813))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert 3 not in (report.verdict or {}).get("ranks", [])


def test_an_abort_after_its_own_timeout_is_teardown_not_the_cause(tmp_path):
    # Rank 1 timed out (its traceback), then aborted while exiting: Python's dump "Fatal Python error:
    # Aborted" carries no rank, and the table says rank 1 died of SIGABRT. Rank 2 wrote nothing and
    # was stopped with SIGTERM: the hung one.
    lines = [_TIMEOUT.format(r=0), _TIMEOUT.format(r=1), "terminate called without an active exception",
             "Fatal Python error: Aborted", "", "Thread 0x00007fb3fd835b80 (most recent call first):",
             "  <no Python frame>", _TIMEOUT.format(r=3)]
    lines += _table("node-a", [(0, 0, -15, 845), (2, 2, -15, 847), (3, 3, -15, 848)], (1, 1, -6, 846))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [2]
    assert not [f for f in report.findings if f.rule == "RK1"]


def test_a_signal_dump_goes_to_the_rank_that_died_of_that_signal(tmp_path):
    lines = ["Fatal Python error: Segmentation fault", "", "Current thread 0x00007f00 (most recent call first):",
             '  File "/job/train.py", line 171 in strike', _ECHO.format(r=0), _ECHO.format(r=1)]
    lines += _table("node-a", [(0, 0, -15, 901), (1, 1, 1, 902)], (3, 3, -11, 904))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [3]


def test_a_host_is_found_between_separators_of_a_log_folder():
    hosts = {"gpu-c7-1": 1, "gpu-c7-12": 1, "p5": 1}
    assert _host_in_path("/runs/logs-gpu-c7-12/job-x_1", hosts) == "gpu-c7-12"
    assert _host_in_path("/runs/logs-gpu-c7-1/job-x_1", hosts) == "gpu-c7-1"
    assert _host_in_path("/runs/gpu-c7-123/job", hosts) is None
    assert _host_in_path("/runs/logs/job", hosts) is None


def test_a_count_with_processes_of_unknown_rank_says_so():
    assert count_ranks([3, None], 2) == "2 processes (rank 3 and 1 of unknown rank)"
    assert count_ranks([0, 1, 2], 3) == "3 ranks (0-2)"


def test_peers_lost_with_nobody_to_blame_is_a_failure_naming_no_rank(tmp_path):
    # Every rank in the table is accounted for (three lost a peer, rank 1 was stopped by the
    # launcher while still running): the process that went away left nothing here. The job failed,
    # and the verdict says so without naming a rank.
    lines = [_ECHO.format(r=r) for r in (0, 2, 3)]
    lines += _table("node-a", [(0, 0, -15, 811), (3, 3, -15, 814), (1, 1, -15, 812)], (2, 2, 1, 813))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict is not None and report.verdict["ranks"] == []
    assert "lost the connection to a peer" in report.verdict["headline"]
    assert [f.rule for f in report.findings if f.severity.value == "error"] == ["RK2"]


def _late_case(tmp_path, order: list[str]):
    lines = [_TIMEOUT.format(r=r) if kind == "t" else _ECHO.format(r=r) for kind, r in
             ((k[0], int(k[1])) for k in order)]
    lines += _table("node-a", [(0, 0, -15, 811), (1, 1, -15, 812), (3, 3, -15, 814)], (2, 2, 1, 813))
    _write(tmp_path, "console.log", lines)
    return analyze([str(tmp_path)], jobs=1)


def test_a_rank_that_lost_its_peer_after_every_timeout_arrived_late(tmp_path):
    # Ranks 0, 2, 3 timed out; rank 1's only error, written after all of theirs, is a closed peer:
    # it reached the collective after they had given up.
    report = _late_case(tmp_path, ["t0", "t2", "t3", "e1"])
    assert report.verdict["ranks"] == [1]


def test_a_closed_peer_written_before_a_timeout_is_one_more_waiter(tmp_path):
    # Rank 0's closed peer comes before ranks 1-3's timeouts: it was waiting too, and lost a peer that
    # was exiting from its own timeout. Nothing singles out a rank.
    report = _late_case(tmp_path, ["e0", "t1", "t2", "t3"])
    assert report.verdict["ranks"] == []


def _json_steps(ranks, step: int) -> list[str]:
    return [f'{{"time": "2026-11-27T05:56:5{step % 10}.261", "level": "INFO", "rank": {r}, '
            f'"msg": "step {step}/24 loss 0.7854 (0.06 s/step)"}}' for r in ranks]


_CAUGHT = ["2026-11-27 05:56:54,036 | ERROR | sample 72 of shard 3 is malformed; skipping it",
           "Traceback (most recent call last):",
           '  File "/srv/train.py", line 221, in strike',
           '    _ = {"input_ids": 1}["attention_mask"]',
           "KeyError: 'attention_mask'"]


def test_a_traceback_of_nobody_that_every_rank_trains_past_was_handled(tmp_path):
    # Shapes of fixtures/realruns/t4_caught_r3_w4_json: JSON lines name each rank; a logged,
    # caught exception has no rank on it; all four ranks print steps after it: it stopped nobody.
    lines = _json_steps(range(4), 8) + _CAUGHT + _json_steps(range(4), 12) + _json_steps(range(4), 16)
    p = tmp_path / "console.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = analyze([str(p)])
    assert not [f for f in r.findings if f.severity.value == "error"]


def test_a_traceback_a_handler_skipped_is_no_cause_even_when_a_rank_stops_after(tmp_path):
    # The same, but rank 3 prints nothing after it. The line above the traceback says the handler went on
    # ("...; skipping it": log.exception in an except block that continues), so the KeyError ended nobody:
    # whatever stopped rank 3 is not that exception (t37_kill_r1_w3: such tracebacks on one rank, another
    # rank SIGKILLed).
    lines = _json_steps(range(4), 8) + _CAUGHT + _json_steps(range(3), 12) + _json_steps(range(3), 16)
    p = tmp_path / "console.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = analyze([str(p)])
    assert not [f for f in r.findings if f.severity.value == "error" and "KeyError" in f.summary]
    # without the handler's words, the traceback may be rank 3's own end
    plain = [ln for ln in lines if "skipping it" not in ln]
    p.write_text("\n".join(plain) + "\n", encoding="utf-8")
    r = analyze([str(p)])
    assert "RK1" in {f.rule for f in r.findings if f.severity.value == "error"}


def test_a_job_whose_every_agent_was_signalled_was_stopped_not_failed(tmp_path):
    # Shapes of fixtures/realruns/t4_job_sigint_w4: the operator's Ctrl-C reaches torchrun, which
    # stops its workers; each rank's KeyboardInterrupt is an echo of that. No rank failed.
    lines = ["W1127 05:59:58.781000 12412 torch/distributed/elastic/agent/server/api.py:753] Received 2 death "
             "signal, shutting down workers"]
    for r in range(4):
        lines += [f"[rank{r}]: Traceback (most recent call last):",
                  f'[rank{r}]:   File "/srv/train.py", line 160, in main', f"[rank{r}]: KeyboardInterrupt"]
    lines += ["torch.distributed.elastic.multiprocessing.api.SignalException: Process 12412 got signal: 2"]
    p = tmp_path / "console.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = analyze([str(p)])
    assert not [f for f in r.findings if f.severity.value == "error"]
    assert any("stopped from outside" in n and "signal 2" in n for n in r.notes)



def test_gloo_timeouts_before_any_step_while_one_rank_preprocesses_is_a_start_up_timeout(tmp_path):
    # Shapes of fixtures/realruns/t4_prep_r2_w4_json: gloo's timeouts carry no SeqNum; no rank has
    # printed a training step; rank 2's last line says it is preprocessing: the timeout is too short
    # for start-up (TO2), and rank 2 is the one the others waited for.
    lines = ['{"time": "2026-11-27T06:34:32.308", "level": "INFO", "rank": 2, "msg": "Preprocessing the dataset '
             '(tokenizing 1.2M documents into the shard cache) ..."}']
    lines += [_TIMEOUT.format(r=r) for r in (0, 1, 3)]
    p = tmp_path / "console.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = analyze([str(p)])
    to2 = next(f for f in r.findings if f.rule == "TO2")
    assert to2.severity.value == "error" and to2.ranks == [2]
    assert "before any training step" in to2.summary


def test_one_exception_raised_by_every_rank_before_any_prefix_is_each_reported_exit(tmp_path):
    # Shapes of fixtures/realruns/t4_nccl_nogpu_w4: every rank raised the same RuntimeError before
    # torch's rank prefixes existed; torchrun reports ranks 1 and 2 as failed (0 and 3 got its SIGTERM).
    lines = []
    for _ in range(4):
        lines += ["Traceback (most recent call last):", '  File "/srv/train.py", line 137, in main',
                  '    raise RuntimeError("Distributed package doesn\'t have NCCL built in")',
                  "RuntimeError: Distributed package doesn't have NCCL built in"]
    lines += _table("node-3", [(2, 2, 1, 4402), (0, 0, -15, 4400), (3, 3, -15, 4403)], (1, 1, 1, 4401))
    p = tmp_path / "console.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = analyze([str(p)])
    assert r.verdict["ranks"] and set(r.verdict["ranks"]) <= {1, 2}
    assert "NCCL built in" in r.verdict["headline"]


def test_a_per_node_console_named_like_its_sibling_host_is_that_host(tmp_path):
    # The real run of a node SIGKILLed under --nnodes 1:2 and --max-restarts 0, with the script's own
    # "host=..." words taken out: only the file names (c5-train-a.log, whose torchrun table names
    # host c5-train-a, and c5-train-b.log) can tell where ranks 2 and 3, silent since start-up, ran.
    import nccl_doctor
    from nccl_doctor.evidence.facts import _shape

    assert _shape("c5-train-a") == _shape("c5-train-b") != _shape("c5-train")
    run = Path(__file__).resolve().parent.parent / "fixtures" / "realruns" / "t12_nodeloss_norestart"
    for name in ("c5-train-a.log", "c5-train-b.log"):
        text = (run / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(re.sub(r"host=c5-train-[ab] ", "", text), encoding="utf-8")
    report = nccl_doctor.analyze(str(tmp_path), jobs=1)
    assert report.verdict["ranks"] == [2, 3] and report.verdict["hosts"] == ["c5-train-b"], report.verdict


def test_a_rendezvous_round_that_never_came_together_is_said_so_not_missing():
    """torch 2.13's shared rendezvous store: a node joining under --nnodes 1:2 leaves both agents
    waiting for keys (role_info, MASTER_ADDR) that the other was to write, and both die of the wait.
    No rank failed and nobody is missing: the round itself never came together."""
    run = Path(__file__).resolve().parent.parent / "fixtures" / "realruns" / "t12_scaleup_deadlock"
    report = analyze([str(p) for p in run.rglob("*") if p.is_file() and p.name != "expected.json"], jobs=1)
    rk2 = [f for f in report.findings if f.rule == "RK2"]
    assert len(rk2) == 1 and rk2[0].ranks == [] and rk2[0].subject == "the next rendezvous round"
    assert rk2[0].summary.startswith("the next rendezvous round never came together: ")
    assert "missing" not in rk2[0].summary
    assert report.verdict["headline"].startswith("the next rendezvous round never came together")


def test_a_rank_of_the_agents_own_console_missing_from_its_lone_table_left_early(tmp_path):
    # One node, two ranks, one console: rank 1 says it finished and returns (status 0); rank 0 then
    # loses its peer, and torchrun's table lists rank 0 alone (<NO_OTHER_FAILURES>). Rank 1's lines
    # are in this agent's console, so it was this agent's worker; not listed, it had exited with 0.
    lines = [f"2026-11-27 11:00:41,{369 + r} INFO trainer [pid {1785 + r}]: [rank {r}] initialized process group: "
             f"backend=gloo world_size=2 local_rank={r}" for r in (0, 1)]
    lines += [f"2026-11-27 11:00:42,{700 + r} INFO trainer [pid {1785 + r}]: [rank {r}] step 10 loss 2.18"
              for r in (0, 1)]
    lines.append("2026-11-27 11:00:42,952 INFO trainer [pid 1786]: [rank 1] finished training at step 11")
    lines.append(_ECHO.format(r=0))
    lines += _table("localhost", [], (0, 0, 1, 1785))
    _write(tmp_path, "train.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    rk2 = [f for f in report.findings if f.rule == "RK2"]
    assert rk2 and "exited with status 0" in rk2[0].summary


def test_an_exception_reraised_from_a_dataloader_worker_is_quoted_as_raised(tmp_path):
    # torch raises a DataLoader worker's exception again in the rank ("Caught ValueError in DataLoader
    # worker process 0."), then quotes the original traceback, which ends in the error itself.
    tb = ["[rank1]: Traceback (most recent call last):",
          '[rank1]:   File "/job/train.py", line 120, in <module>',
          "[rank1]:     for batch in loader:",
          "[rank1]: ValueError: Caught ValueError in DataLoader worker process 0.",
          "[rank1]: Original Traceback (most recent call last):",
          '[rank1]:   File "/job/train.py", line 77, in __getitem__',
          '[rank1]:     raise ValueError(f"record {i} of shard {RANK:05d}.jsonl: expected 64 tokens")',
          "[rank1]: ValueError: record 8 of shard 00001.jsonl: expected 64 tokens, got 0 (truncated line)"]
    lines = tb + [_ECHO.format(r=r) for r in (0, 2, 3)]
    lines += _table("node-a", [(0, 0, -15, 811), (2, 2, -15, 813), (3, 3, -15, 814)], (1, 1, 1, 812))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert "record 8 of shard 00001.jsonl" in rk1.summary and "Caught" not in rk1.summary


def _run(case: str):
    run = Path(__file__).resolve().parent.parent / "fixtures" / "realruns" / case
    return analyze([str(p) for p in run.rglob("*") if p.is_file() and p.name != "expected.json"], jobs=1)


def test_logurus_own_copy_of_an_exception_is_the_ranks_its_pid_names():
    # loguru's logger.catch() prints "An error has been caught in function '<module>', process
    # 'MainProcess' (5401)" and its own copy of the traceback, unprefixed; torchrun's table says pid
    # 5401 is rank 1 (5402: rank 2, 5400: rank 0). Three ranks timed out, not four; rank 3 hung.
    report = _run("t17_dp_hang_r3_w4_logurubind_redirect")
    assert report.verdict["ranks"] == [3]
    assert "; 3 ranks then timed out" in report.verdict["headline"]
    caught = {e.get("caught_pid"): e.rank for e in report.job.by_kind("loguru_caught")}
    assert caught == {5401: 1, 5402: 2, 5400: 0}
    mn3 = next(f for f in report.findings if f.rule == "MN3")
    assert mn3.ranks == [0, 1, 2]
    # gloo's "Timed out waiting 15000ms for recv" never names the group (here a data-parallel subgroup);
    # the ranks' tracebacks stop in torch.distributed's all_reduce (console.log: "..., in all_reduce")
    assert "waited 15 s in all_reduce;" in mn3.summary and "default group" not in mn3.summary


def test_a_loguru_record_with_a_rank_tag_is_that_ranks_step():
    # "2026-11-27 11:08:52.563 | INFO     | __main__:main:212 - [rank 0/4 tp 0 dp 0] step 10/30 loss ..."
    report = _run("t17_raise_r2_w4_loguru_tee")
    assert {r.rank: r.last_step for r in report.job.ranks} == {0: 10, 1: 10, 2: 10, 3: 10}
    assert report.verdict["ranks"] == [2]


def test_rich_records_give_their_rank_and_each_rank_its_own_last_line():
    # RichHandler into a file: "[11:10:13] INFO     [rank 0/4 tp 0 dp 0] step 10/30 loss 2.2271 world
    # train17.py:212", its message wrapped onto lines indented to the message column. Every rank
    # wrote to this one file: the file's last line (a wrapped piece of rank 1's record) is no one's.
    report = _run("t17_kill_r0_w4_rich_split")
    assert report.verdict["ranks"] == [0]
    last = {r.rank: r.last_line for r in report.job.ranks}
    assert {r.rank: r.last_step for r in report.job.ranks} == {0: 10, 1: 10, 2: 10, 3: 10}
    assert last[0].file.endswith("console.out") and last[0].line == 37
    assert last[0].text.startswith("step 10/30 loss 2.2271")
    assert len({(ll.file, ll.line) for ll in last.values()}) == 4


def test_in_a_console_every_rank_wrote_to_each_ranks_last_line_is_its_own():
    # torchrun --tee 3: "[default2]:[2026-11-23 21:48:08,336][trainer][INFO] - done: 3 epochs, ..."
    # (lines 50-53, one per local rank); the console's last line is rank 3's, not every rank's.
    report = _run("t2_healthy_w4_tee3")
    assert {r.rank: r.last_line.line for r in report.job.ranks} == {0: 50, 1: 52, 2: 51, 3: 53}


def test_a_ranks_own_file_named_by_host_and_pid_makes_its_absence_a_hint_only():
    # mp.spawn, each rank logs to logs/<host>-<pid>.log (no rank in the name or the lines): ranks 0
    # and 2 wrote their own "Connection closed by peer" there. Nothing ties those files to a rank,
    # but they are not missing: RK2 may only hint, never say they wrote no line.
    report = _run("t18_raise_r1_w3_spawn_hostpid_redirect")
    assert report.verdict["ranks"] == [1]
    rk2 = [f for f in report.findings if f.rule == "RK2"]
    assert all(f.severity.value == "warning" and "hint" in f.summary for f in rk2)
    assert not any("wrote no line" in f.summary for f in rk2)
    # logs/vm-11724.log raised the ValueError spawn's parent quotes as process 1's: one failure, not two
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert rk1.summary.startswith("rank 1 failed first: ValueError: sample 197") and "unknown rank" not in rk1.summary
    assert any(e.file.endswith("vm-11724.log") for e in rk1.evidence)


def test_rank_kv_after_a_bracketed_level_gives_the_step_its_rank():
    # out/worker-1.txt: "2026-11-27 11:23:34,001 [INFO] rank=1 step 2/30 loss 2.3826 ..."; every rank
    # logged step 10 last; rank 1 then slept for ever before the loss all_reduce
    report = _run("t18_hang_r1_w3_workertxt_rank_redirect")
    assert report.verdict["ranks"] == [1]
    assert {r.rank: r.last_step for r in report.job.ranks} == {0: 10, 1: 10, 2: 10}


def test_a_job_with_no_nccl_line_is_not_said_to_have_seen_no_nccl_init():
    from nccl_doctor.report import to_text

    text = to_text(_run("t18_raise_r1_w3_spawn_hostpid_redirect"), color=False)  # gloo on CPU
    last = next(line for line in text.splitlines() if line.startswith("LAST"))
    assert "NCCL" not in last and "last line" in last


def test_a_file_named_after_a_pid_is_the_rank_torchruns_table_gives_that_pid():
    # logs/vm-10997.log (no rank in its name or its lines); torchrun: "failed (exitcode: 2) local_rank: 1
    # (pid: 10997)" and its table's rows name pids 10996-10999 with their ranks
    report = _run("t18_exit2_r1_w4_hostpid_tee")
    assert report.verdict["ranks"] == [1]
    files = {r.rank: {p.rsplit("/", 1)[-1] for p in r.files} for r in report.job.ranks}
    assert {0, 1, 2, 3} <= files.keys()
    assert "vm-10997.log" in files[1] and "vm-10996.log" in files[0]


def test_a_node_killed_with_its_processes_is_named_by_the_host_its_lines_give():
    # "%(asctime)s %(levelname)s [%(hostname)s:%(process)d] ..." on 2 nodes; spot-g5-32's agent and
    # workers are SIGKILLed: its console ends with step lines and no launcher report, while the two
    # ranks of spot-g5-31 lose their peer ("Connection reset by peer") and its table lists them.
    report = _run("t19_nodekill_n2_2x2_redirect")
    assert report.verdict["hosts"] == ["spot-g5-32"] and not report.verdict["ranks"]
    by_pid = {r.pid: r.rank for r in report.job.ranks}
    assert by_pid[15775] is not None and by_pid[15777] is not None  # node 1's processes: the table's ranks
    rk2 = next(f for f in report.findings if f.rule == "RK2")
    assert "the node itself stopped" in rk2.summary and rk2.hosts == ["spot-g5-32"]


# (case, culprit rank, words its RK1/RK2 finding must hold): ranks started by a shell loop, no launcher
SHELL_LOOP = [
    # bash: "launch20.sh: line 43: 18886 Killed   RANK=$i ..." -- a pid, no rank; ranks 0-2 lost rank 3
    ("t20_kill_r3_w4_nodeproc", 3, "RK1", "Killed (SIGKILL; pid 18886"),
    ("t20_segv_r2_w3_outlog", 2, "RK1", "Segmentation fault (SIGSEGV; pid 19007"),
    # rank 1's last line: "[1] ERROR: step 12: label 12 out of range for 10 classes in batch 49"
    ("t20_exit1_r1_w4_rankout", 1, "RK1", "label 12 out of range for 10 classes"),
    # rank 0 hosts the store ("Timed out after 16 seconds waiting for clients. 3/4 clients joined"):
    # ranks 1-2 waited for its key because rank 3 never started
    ("t20_notstarted_r3_w4_rankout", 3, "RK2", "rank 3"),
]


@pytest.mark.parametrize(("case", "rank", "rule", "words"), SHELL_LOOP, ids=[c for c, *_ in SHELL_LOOP])
def test_ranks_a_shell_loop_started_are_judged_from_their_own_files_and_the_shell(case, rank, rule, words):
    report = _run(case)
    assert report.verdict["ranks"] == [rank]
    finding = next(f for f in report.findings if f.rule == rule and rank in f.ranks)
    assert words in finding.summary


def test_a_point_to_point_message_of_another_size_is_the_senders():
    # Pipeline stages (train21.py): rank 2 aborts in gloo on 1152 bytes where its recv posted 1024
    # ("Received data size doesn't match expected size", console.err:188, no rank prefix); rank 3's
    # traceback stops in recv, rank 1's in send ("distributed_c10d.py", line 2753, in send,
    # console.err:261): rank 1 sent it (the fault struck rank 1).
    report = _run("t21_shape_s1_w4_pp_split")
    assert report.verdict["ranks"] == [1] and report.verdict["rule"] == "DSY1"
    dsy = next(f for f in report.findings if f.rule == "DSY1")
    assert "rank 1 is the one rank that was sending point-to-point" in dsy.summary
    assert any(e.line == 261 and e.rank == 1 and e.text.endswith(", in send") for e in dsy.evidence)


def test_a_scripts_own_line_about_the_timeout_it_reraises_is_no_third_process():
    # 3 stages; stage 0 hangs. "[pp 2/3] ERROR pipeline step failed: RuntimeError: ... Timed out
    # waiting 15000ms for recv" (console.log:139, no rank) comes right before torch's "[rank2]:"
    # traceback of the same timeout (:154); the same for rank 1 (:155, :170). Two ranks timed out.
    report = _run("t21_hang_s0_w3_pp_tee")
    assert report.verdict["ranks"] == [0]
    assert "; 2 ranks then timed out" in report.verdict["headline"]
    mn3 = next(f for f in report.findings if f.rule == "MN3")
    assert mn3.summary.startswith("2 ranks (1-2) waited 15 s")


def test_timeouts_whose_tracebacks_stop_in_send_or_recv_are_point_to_point():
    # 4 stages; stage 2 sleeps before its recv. Ranks 0 and 1 time out in distributed_c10d's send
    # ("Timed out waiting 15000ms for send operation"), rank 3 in its recv: not a collective.
    report = _run("t21_hang_s2_w4_bare_redirect")
    assert report.verdict["ranks"] == [2]
    assert "3 ranks then timed out in point-to-point recv/send" in report.verdict["headline"]


def test_a_node_that_went_away_is_named_and_its_processes_are_silent():
    # 2 nodes x 2; spot-g5-32 (agent and workers) SIGKILLed from outside: its two processes
    # (pids in "[spot-g5-32:PID]" records, no rank) just stop; ranks 0-1 lose the connection.
    report = _run("t19_nodekill_n2_2x2_redirect")
    assert report.verdict["hosts"] == ["spot-g5-32"] and not report.verdict["ranks"]
    assert report.verdict["headline"].startswith("the node spot-g5-32 (2 processes) went silent")
    statuses = [(r.host, r.rank, r.status) for r in report.job.ranks]
    assert [s for h, _r, s in statuses if h == "spot-g5-32"] == ["silent", "silent"]
    assert sorted(r for h, r, s in statuses if h == "spot-g5-31" and s != "silent") == [0, 1]


def test_a_home_grown_launchers_labels_and_reports_name_the_rank():
    # launch23.py relays each worker's pipes as "3/4: ..." and reports pids only: "started rank 3
    # as pid 3887" (job.out:4), "child 3887 exited with status -9" (the first exit it saw); the
    # others print "Connection closed by peer" behind their labels.
    report = _run("t23_kill_r3_w4_frac_pids_redirect")
    assert report.verdict["ranks"] == [3] and report.verdict["rule"] == "RK1"
    assert "exit code -9 (SIGKILL), as its launcher reports" in report.verdict["headline"]
    # "FATAL: rank 2 terminated by signal 11" (and no traceback of its own): SIGSEGV
    report = _run("t23_segv_r2_w3_host_fatal_tee")
    assert report.verdict["ranks"] == [2] and "exit code -11 (SIGSEGV)" in report.verdict["headline"]
    # "memory watchdog: worker 2 rss 1.07 GiB > limit 0.98 GiB, killing" says why it got SIGKILL
    report = _run("t23_oom_r2_w4_bracket_fatal_redirect")
    assert report.verdict["ranks"] == [2] and "killed it for its memory" in report.verdict["headline"]


def test_a_workers_label_seen_with_its_rank_elsewhere_names_the_one_that_never_said_it():
    # "w0| [rank0]: ..." and "w2| [rank2]: ..." (job.err) show the label is the rank; "w1| step
    # 10/30" (job.out:19) is worker 1's last line before it hung: rank 1 went silent, not missing.
    report = _run("t23_hang_r1_w3_pipe_terse_split")
    assert report.verdict["ranks"] == [1]
    assert report.verdict["headline"].startswith("rank 1 went silent")
    # logs/worker-1.log's "error: corrupt sample in shard 00001: ..." is worker 1's own word (one
    # file per worker; the other workers' files show [rankN] beside their labels).
    report = _run("t23_exit1_r1_w4_ts_files")
    assert report.verdict["ranks"] == [1]
    assert "logged error: corrupt sample in shard 00001" in report.verdict["headline"]


def test_checkpoint_and_input_failures_quote_what_went_wrong():
    # numpy's own error in a DataLoader worker, quoted under torch's "Caught ValueError in DataLoader
    # worker process 0. Original Traceback" (stderr.log:34, :56): the original is what failed.
    report = _run("t24_bad_sample_r2_w3_logdirq")
    assert report.verdict["ranks"] == [2]
    assert "ValueError: Failed to read all data for array" in report.verdict["headline"]
    # load_state_dict's message goes on over tab-indented lines (console.err:16-19)
    report = _run("t24_ckpt_mismatch_r1_w2_split")
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert report.verdict["ranks"] == [1] and "Sequential: size mismatch for 0.weight" in rk1.summary
    # "2026-11-27 12:40:56,362 [INFO] train24: rank 1: process group ready" (console.log:5) is rank 1's
    report = _run("t24_slow_io_r1_w3_redirect")
    assert report.verdict["ranks"] == [1] and report.verdict["headline"].startswith("rank 1 (localhost) went silent")
    assert report.job.ranks_expected == 3 and sorted(r.rank for r in report.job.ranks) == [0, 1, 2]


def test_pods_followed_by_stern_are_the_nodes():
    # stern.log: every line behind "<pod> pytorch "; the worker pod's torchrun table names rank 2
    # (local rank 0) SIGKILLed on pytorchjob-xyz-worker-0 (stern.log:112-117).
    report = _run("t25_kill_r2_2x2_stern")
    assert report.verdict["ranks"] == [2] and report.verdict["hosts"] == ["pytorchjob-xyz-worker-0"]
    # the pod killed from outside: its two ranks just stop ("[rank 2] step 106/400", stern.log:432)
    report = _run("t25_podkill_worker_2x2_sternts")
    assert report.verdict["hosts"] == ["mistral-sft-worker-0"] and report.verdict["ranks"] == [2, 3]


def test_a_nobodys_error_line_is_the_one_failed_worker_its_agent_reports_there():
    # The worker pod's log (plain kubectl, two ranks, no prefix): "ERROR: shard data-00003-of-00004.arrow
    # exhausted ..." (qwen-lora-a1b2-worker-0.log:14) and its agent's one failed exit, rank 3 (exit 1).
    report = _run("t25_exit1_r3_2x2_kubectl_buffered")
    assert report.verdict["ranks"] == [3]
    assert "logged error: shard data-00003-of-00004.arrow exhausted" in report.verdict["headline"]


def test_launch_mistakes_name_the_rank_started_wrong():
    # rank 1 (logs/rank_1.log:1) states "world_size 3" while ranks 0, 2, 3 state 4: CFG2
    report = _run("t26_wrong_world_r1_w4_ranklog")
    assert report.verdict["ranks"] == [1] and report.verdict["rule"] == "CFG2"
    # out/1.txt:2: its client "timed out ... while trying to connect to (127.0.0.1, 33001)" while the
    # store's host (out/0.txt:23) waited: "2/3 clients joined". Not rank 0, whose key the others wait for.
    report = _run("t26_wrong_port_r1_w3_outtxt")
    assert report.verdict["ranks"] == [1] and "could not reach the store at 127.0.0.1:33001" in report.verdict["headline"]
    # a shared console: "... pid 15192 local_rank 3 ... master 192.0.2.77:33010" (job.out:5) and
    # "launched rank 3 pid 15192" (job.out:4) tie the unreachable store address to rank 3
    report = _run("t26_wrong_addr_r3_w4_console")
    assert report.verdict["ranks"] == [3]
    # rank 2 alone timed out (5000ms, train.log:37); ranks 0, 1, 3 only lost the connection afterwards
    report = _run("t26_timeout_mismatch_r2_w4_console")
    assert report.verdict["ranks"] == [2] and "it alone timed out after 5 s" in report.verdict["headline"]


def _one_file(case: str, pattern: str):
    run = Path(__file__).resolve().parent.parent / "fixtures" / "realruns" / case
    return analyze([str(next(run.glob(pattern)))], jobs=1)


def test_one_ranks_own_log_alone_blames_no_rank_it_does_not_show():
    # attempt_0/2/stderr.log of a 6-rank --log-dir run: rank 2's own timeout only. The other ranks'
    # logs were not given; their absence says nothing (the hung rank was rank 1).
    report = _one_file("hang_r1_w6_logdir", "logs/*/attempt_0/2/stderr.log")
    assert not report.verdict["ranks"]
    # one node's console alone (gpu-l40s-3: ranks 0-1 of 4, its torchrun table lists local ranks
    # 0-1, its whole worker group): ranks 2-3 are on the other node, not "missing"
    report = _one_file("buf_mn2_hang", "gpu-l40s-3.log")
    assert not report.verdict["ranks"]
    # DETAIL's fingerprint report of one rank ("Rank 0 is running ... but Rank 2 is running ...")
    # alone: nothing says which side deviated
    report = _one_file("desync_shape_detail_r2_w3", "logs/*/attempt_0/0/stderr.log")
    assert not report.verdict["ranks"]


def test_a_collective_on_a_group_the_rank_is_not_in_is_that_ranks_desync():
    # "UserWarning: Running all_reduce on global rank 2 which does not belong to the given group."
    # (console.log:39): a no-op for rank 2, so its pair partner rank 3 waited (and looks like the laggard)
    report = _run("t27_wrong_group_r2_w4_tee")
    assert report.verdict["ranks"] == [2] and report.verdict["rule"] == "DSY1"


def test_node_level_faults_of_a_multi_node_job():
    # --max-restarts 2: rank 3 on p5-west-202 raises the same ValueError in each attempt
    # (p5-west-202.log:26, :70, :115); p5-west-201's agent then finds the rendezvous closed
    # (RendezvousClosedError, p5-west-201.log:189): an echo of the other agent giving up.
    report = _run("t28_crashloop_n2_restarts2")
    assert report.verdict["ranks"] == [3] and report.verdict["hosts"] == ["p5-west-202"]
    # trn1-rack2-06 frozen 25 s: ranks 0-1 on trn1-rack2-05 time out (recv 15000ms), ranks 2-3 only
    # lose the connection after (trn1-rack2-06.log:26, :40): that node stalled
    report = _run("t28_node_sigstop_n2_redirect")
    assert report.verdict["ranks"] == [2, 3] and report.verdict["hosts"] == ["trn1-rack2-06"]


def test_the_rank_in_a_loggers_name():
    # "[r1.data] batch 12: 3 of 16 labels outside [0, 10) (max 17); aborting" (attempt_0/1/stdout.log:13)
    # is rank 1's last word; the others only lost a peer.
    report = _run("t29_exit1_r1_w4_prefix_bracket_logdirq")
    assert report.verdict["ranks"] == [1] and "labels outside [0, 10)" in report.verdict["headline"]
    # "2026-11-27 13:50:17,290 trainer.rank0 ERROR: training failed" heads log.exception's traceback of
    # a timeout: an echo, not rank 0's own failure; rank 3 (trainer.rank3.log) hung
    report = _run("t29_hang_r3_w4_dotted_files_split")
    assert report.verdict["ranks"] == [3]
    assert sorted(r.rank for r in report.job.ranks) == [0, 1, 2, 3]  # one process per rank, not two


def test_any_torchrun_prefix_template_before_torchs_rank_prefix():
    # TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='$rank|': "0|[rank0]: RuntimeError: ... Timed out ..."
    # (console.log:33), "2|[rank2]: ..." (:45); rank 1 never timed out and torchrun SIGTERMed it (:79-82)
    report = _run("t31_hang_r1_w3_tee2_prefix_rank")
    assert report.verdict["ranks"] == [1]
    assert "2 ranks then timed out" in report.verdict["headline"]


def test_a_cpu_job_gets_no_gpu_advice():
    # gloo only (t20: "Timed out waiting 15000ms for recv operation", no NCCL line): no nvidia-smi
    report = _run("t20_hang_r1_w3_outlog")
    assert all("nvidia-smi" not in f.remedy for f in report.findings)
    # a GPU job (NCCL lines) keeps it
    gpu = analyze([str(Path(__file__).resolve().parent.parent / "fixtures" / "generated" / "hang-mn3-16")], jobs=1)
    assert any("nvidia-smi" in f.remedy for f in gpu.findings if f.rule == "RK2")


def test_a_thread_that_died_is_why_its_rank_stopped():
    # "Exception in thread prefetch:" + "ValueError: bad record header ..." (console.log:16, :24); rank 1's
    # main loop went on a few steps, then starved on its empty queue: the others timed out, it did not
    report = _run("t30_prefetch_dies_r1_w3_thread_tee")
    assert report.verdict["ranks"] == [1] and report.verdict["rule"] == "RK1"
    assert "ValueError: bad record header" in report.verdict["headline"]


def test_rich_tracebacks_carry_their_message_on_the_next_lines():
    # rich's box ends "[rank0]: RuntimeError: " then "[rank0]: [/__w/.../unbound_buffer.cc:78] " and
    # "[rank0]: Timed out waiting 15000ms for recv operation to complete" (console.err:62-64): a timeout,
    # an echo; rank 3 hung (torchrun's table: -15 SIGTERM, console.err:233-234)
    report = _run("t33_hang_r3_w4_rankzero_rich_split")
    assert report.verdict["ranks"] == [3]
    assert any("Timed out waiting 15000ms" in e.text for e in report.job.by_kind("gloo_timeout", "python_exception"))
    # torchrun's table line "traceback : Signal 15 (SIGTERM) received by PID 11073" is its clean-up,
    # not a failure: rank 2 logged its error and exited 1 first (console.log:46, :209)
    report = _run("t33_exit1_r2_w4_rankall_rich_tee3")
    assert report.verdict["ranks"] == [2]


def test_a_node_launched_with_other_settings_is_named_by_its_console():
    # static rendezvous, 3 nodes: ib-gpu-101.log:40 "waiting for clients. 2/3 clients joined" and ib-gpu-103.log:41
    # "1/3 clients joined": two stores, two nodes given --node-rank 0; nobody but itself joined 103's. No line
    # names a host: the per-node consoles' names do
    report = _run("t28_dup_node_rank_n3_static")
    assert report.verdict["rule"] == "CFG3" and report.verdict["hosts"] == ["ib-gpu-103"]
    assert not [f for f in report.findings if f.rule == "RK2"]  # not "a node is missing": it came, wrongly
    # c10d, 3 nodes: hpc-a-03.out:4-5 "min_nodes : 2", "max_nodes : 2" where hpc-a-01/02.out:4-5 say 3
    report = _run("t28_nnodes_mismatch_n3_c10d")
    assert report.verdict["rule"] == "CFG3" and report.verdict["hosts"] == ["hpc-a-03"]
    assert "min_nodes 2" in report.verdict["summary"]


def test_logurus_copy_of_a_timeout_is_its_ranks_past_the_c10d_frames():
    # only rank 0 logs (loguru); its logger.catch copy of the timeout (console.out:10 "process 'MainProcess'
    # (19495)", frames with distributed_c10d.py at :34, "RuntimeError: ... Timed out waiting 15000ms" at :39)
    # is rank 0's (torchrun: "local_rank: 0 (pid: 19495)"): 3 ranks timed out, not 4; rank 3 slept
    report = _run("t34_hang_r3_w4_zero_catch_split")
    assert report.verdict["ranks"] == [3]
    assert "3 ranks then timed out" in report.verdict["headline"]


def test_container_and_journal_collectors():
    # docker compose logs -t: "trainer1-1  | 2026-...Z ..." (compose.log), then compose's own "trainer1-1 exited
    # with code 137" (:29, 128 + SIGKILL) before any traceback: rank 1 (its lines carry trainer1-1) was killed
    report = _run("t35_kill_r1_w4_compose_ts")
    assert report.verdict["ranks"] == [1] and "SIGKILL" in report.verdict["headline"]
    # journalctl -o short-iso, one unit per rank: "systemd[1]: train@2.service: Main process exited,
    # code=killed, status=9/KILL" (journal.log:25); the journal stream of pid 21717 said "rank 2 of 3"
    report = _run("t35_kill_r2_w3_units_iso")
    assert report.verdict["ranks"] == [2] and report.verdict["hosts"] == ["gpu-node-07"]
    # one torchrun unit per node (-o short): every rank of a node is in the agent's stream (torchrun[21839]),
    # which therefore names no writer; rank 3's own RuntimeError (journal-ml-trn-02.log:26) is first
    report = _run("t35_raise_r3_2x2_torchrun_unit_short")
    assert report.verdict["ranks"] == [3] and report.verdict["hosts"] == ["ml-trn-02"]
    # no prefix at all (--no-log-prefix): the containers' names state their ranks ("ddp-rank3-1 exited with
    # code 143": docker stopped the hung rank 3; the others' exit 1 echo their timeouts)
    report = _run("t35_hang_r3_w4_compose_noprefix")
    assert report.verdict["ranks"] == [3] and report.verdict["rule"] == "RK2"


def test_a_logged_error_after_the_loggers_name_is_the_ranks_last_word():
    # docker logs -t: "... ERROR train: [rank 0] checkpoint shard ... refusing to continue" (ddp-rank0.log:8) is
    # rank 0's last line; rank 1 loses it 0.6 s later (ddp-rank1.log:19): rank 0 failed, it did not hang
    report = _run("t35_exit1_r0_w2_dockerts_files")
    assert report.verdict["ranks"] == [0] and report.verdict["rule"] == "RK1"
    assert "sha256 check" in report.verdict["summary"]


def test_a_store_port_held_by_another_process_is_the_cause():
    # dgx-a-01.log:41 "DistNetworkError: The server socket has failed to listen on any local network address.
    # port: 33740, ... EADDRINUSE": node 0's agent could not host the static store (a leftover process holds
    # the port); dgx-a-02.log:46 "wait timeout after 20000ms, keys: .../assigned_ranks/1" is its echo. No
    # line names a host: the consoles are named after their nodes
    report = _run("t36_port_in_use_n2_leftover_tee")
    assert report.verdict["rule"] == "RK1" and report.verdict["hosts"] == ["dgx-a-01"]
    assert "address is already in use" in report.verdict["summary"]


def test_a_traceback_a_handler_logged_before_going_on_is_no_cause():
    # rank 2's stderr.log: "ERROR: failed to decode sample 2053 of shard-00002.jsonl, skipping" above each
    # JSONDecodeError traceback (:7-42), and it trained on (stdout.log: steps 12, 14); rank 1 was SIGKILLed
    # (torchrun's table, console.log:40-45)
    report = _run("t37_kill_r1_w3_errors_r2_print_logdirq")
    assert report.verdict["ranks"] == [1] and "SIGKILL" in report.verdict["summary"]
    # one console, no rank on the lines: rank 2's skipped records (console.log:11-38) are not rank 1's cause;
    # rank 1 printed nothing and was SIGKILLed
    report = _run("t37_kill_r1_w4_silent_zero_tee")
    assert report.verdict["ranks"] == [1] and "JSONDecodeError" not in report.verdict["summary"]
    # rank 0's own last word is "ERROR: cannot write checkpoint ... disk quota exceeded, aborting"
    # (console.err:59), not rank 1's "..., skipping"
    report = _run("t37_exit1_r0_w2_errors_r1_print_split")
    assert report.verdict["ranks"] == [0] and "disk quota exceeded" in report.verdict["summary"]
    # a healthy job full of such noise has no error finding
    report = _run("t37_healthy_w4_allnoise_tee3")
    assert report.verdict is None or not report.verdict.get("ranks")


def test_where_each_rank_waited_in_its_script_names_the_stray_rank():
    # rank 2 all_reduces two values where the others reduce one: its traceback stops at train27.py:101
    # (in collective, called from :215) and says "Timed out waiting 15000ms" (train.log:96-103); the
    # others' stop at train27.py:199 (step 13's backward)
    report = _run("t27_numel_r2_w4_redirect")
    assert report.verdict["rule"] == "DSY1" and report.verdict["ranks"] == [2]
    # rank 2 logs "... skipping eval" and calls dist.barrier() (train39.py:252, console.log:140-153) while the
    # others wait in the eval all_reduce (train39.py:260)
    report = _run("t39_skipeval_r2_w4_logrank_redirect")
    assert report.verdict["ranks"] == [2]
    assert "train39.py:252" in next(f.summary for f in report.findings if f.rule == "DSY1")
    # two ranks that each wait where the other is not: no majority, nobody named
    report = _run("t39_evalorder_r1_w2_plain_split")
    assert not report.verdict.get("ranks")


def test_a_node_lost_whole_or_cut_off_from_the_network():
    # logfmt records ("ts=... level=info host=lrdn0733 rank=4 ... msg=step step=98"): lrdn0733.out ends at
    # step 98 with no error and no table while ranks 0-3 lose a peer (lrdn0731.out:101,113): the node went
    # away; the tables list ranks 0-3 only, the records name ranks 4-5 (a world of 6)
    report = _run("t38_agentkill_n3of3_logfmt_redirect")
    assert report.verdict["hosts"] == ["lrdn0733"] and report.job.ranks_expected == 6
    # a100-r07-n5.err:11,22 "Read error ...: Software caused connection abort" on both of its ranks first
    # (ECONNABORTED: its own stack aborted the connections); the others' resets are echoes
    report = _run("t38_netbreak_n3of3_logfmt_norank_split")
    assert report.verdict["hosts"] == ["a100-r07-n5"] and report.verdict["rule"] == "RK1"
    # "15:29:32.714 hpc4042 [r2] worker up ...": a time, the host and the rank; hpc4042 froze (SIGSTOP)
    report = _run("t38_sigstop_n2of3_plain_tee")
    assert report.verdict["hosts"] == ["hpc4042"]


def test_ci_runner_and_terminal_captures():
    # GitLab's own "ERROR: Job failed: exit code 1" (job-7781.log:114) is the runner's report of the job's exit,
    # not a rank's words: rank 1's exitcode -9 in torchrun's table (:67) is what happened
    report = _run("t40_kill_r1_w3_gitlab")
    assert report.verdict["ranks"] == [1] and "SIGKILL" in report.verdict["summary"]
    # Jenkins' Timestamper "[2026-11-27T15:52:11.766Z] [rank0]: ..." before torch's rank prefix: ranks 0-2 time
    # out (consoleText.txt:76, 88, 100), rank 3 wrote nothing after its start and was SIGTERMed (:143-144)
    report = _run("t40_hang_r3_w4_jenkins_ts")
    assert report.verdict["ranks"] == [3]
    # tmux's 120-column wrap cuts "...Timed out waiting" / " 15000ms for recv ..." (pane.txt:53-54): joined,
    # the two pieces are gloo's timeout, so the others' wait is read (MN3)
    report = _run("t40_hang_r2_w4_tmux")
    assert report.verdict["ranks"] == [2] and "MN3" in report.verdict["rules"]


def test_a_stalled_job_stopped_from_outside_names_who_was_stuck():
    # timeout -s TERM 40 torchrun: "Received 15 death signal" (console.log:68); rank 2's last step is 14
    # (console.log:62), ranks 0, 1, 3 printed step 15 (:65-67); no timeout ever fired (600 s)
    report = _run("t42_sleep_r2_w4_timeout_tee")
    assert report.verdict["ranks"] == [2] and report.verdict["rule"] == "RK3"
    # faulthandler on SIGTERM: rank 2's stack is in update (train42.py:174), the others' in all_reduce
    report = _run("t42_sleep_r2_w4_fh_term_logdir")
    assert report.verdict["ranks"] == [2]
    # a healthy job preempted (SIGTERM to torchrun after 25 s): no rank named
    report = _run("t42_preempt_w4_term_redirect")
    assert not (report.verdict or {}).get("ranks")
    # healthy 2x2 TP/DP jobs preempted: faulthandler finds rank 2 in a slow loader read (not a collective) and
    # Ctrl-C finds it in its loader's sleep, the others losing it: a snapshot, not a stall; nobody named
    for case in ("t45_preempt_w4_fh_term27_plain_logdir", "t45_preempt_w4_ctrlc33_time_split"):
        report = _run(case)
        assert not [f for f in report.findings if f.severity.value == "error"], case


def test_a_folder_holding_an_earlier_run_is_judged_on_its_latest_run():
    # logs/20261127-155440.{out,err}: run 1, rank 2's KeyError; logs/20261127-155452.*: run 2, rank 0 says
    # nothing while ranks 1 and 2 time out (job.out: "run 2 exited with status 1")
    report = _run("t41_prev_raise_r2_hang_r0_w3_split")
    assert report.verdict["ranks"] == [0]
    assert any("more than one run" in n for n in report.notes)
    # train.20261127-155405.log: rank 1 SIGKILLed; train.20261127-155416.log, the latest, trained to the end
    report = _run("t41_prev_crash_healthy_w3_dated")
    assert not [f for f in report.findings if f.severity.value == "error"]
    # one torchrun job that restarted (--max-restarts 1): attempt 0's NaN on rank 0 (console.log:30) started it;
    # the restart's OSError on rank 2 (:96) came 10 s later, after torchrun's "failed ... local_rank: 0" (:62)
    report = _run("t41_elastic_r0_then_r2_w4_logdir")
    assert report.verdict["ranks"] == [0]


def test_frameworks_stopped_from_outside_and_logs_not_clean_ascii():
    # accelerate launch, Ctrl-C: rank 2's KeyboardInterrupt ends in its own spin loop (train43.py:213,
    # console.err:62-82), ranks 0 and 1 lost it in DDP's backward all-reduce (:87, :111)
    report = _run("t43_accel_spin_r2_w3_ctrlc_split")
    assert report.verdict["ranks"] == [2]
    # the deepspeed launcher's "Main process received SIGTERM, exiting" (console.log:216) is a stop from outside
    report = _run("t43_ds_ckptsleep_r0_w3_timeout_redirect")
    assert any("stopped from outside" in n and "the launcher received signal SIGTERM" in n for n in report.notes)
    # a non-ASCII message of the rank's own exception is quoted as it is (console.log, rank 2)
    report = _run("t44_raise_r2_w4_zh_tee")
    assert report.verdict["ranks"] == [2] and "数据分片损坏" in report.verdict["summary"]


def test_excerpts_made_with_grep_and_tail():
    # grep -n -A20 over the rank files: "logs/rank2.log:20:ValueError: ..." is rank 2's own error (its file's
    # name), "logs/rank1.log-..." lines hold rank 1's lost peer
    report = _run("t46_grep_a20_raise_r2_w4_rankfiles")
    assert report.verdict["ranks"] == [2]
    # tail -n 60 logs/*.log: the lines after "==> logs/rank1.log <==" are rank 1's; it stops at step 79 while the
    # others time out
    report = _run("t46_tail60_hang_r1_w4_rankfiles")
    assert report.verdict["ranks"] == [1]


def test_a_rotated_log_s_undated_last_line_is_newer_than_the_older_rotation_s(tmp_path):
    # logrotate's copies: x.log holds the newest lines, x.log.1 the older. The current log ends on a
    # traceback's exception line, which carries no time; the rotated copy ends on a dated step line
    # written before it. The rank's last line is the current log's (its lines' times say so).
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train_rank1.log.1").write_text(
        "2026-11-27 20:33:22,037 INFO [rank 1] trainer: step 18/40 loss 2.2277\n"
        "2026-11-27 20:33:22,462 INFO [rank 1] trainer: step 19/40 loss 2.2655\n")
    (logs / "train_rank1.log").write_text(
        "2026-11-27 20:33:22,680 INFO [rank 1] trainer: step 20/40 loss 2.2091\n"
        "2026-11-27 20:33:23,310 ERROR [rank 1] trainer: training failed at step 21\n"
        "Traceback (most recent call last):\n"
        '  File "/job/train.py", line 160, in main\n'
        "    strike(step)\n"
        "ValueError: could not decode sample 48213\n")
    (logs / "train_rank0.log").write_text("2026-11-27 20:33:22,680 INFO [rank 0] trainer: step 20/40 loss 2.2091\n")
    rep = analyze(str(tmp_path))
    last = rep.job.ranks[1].last_line
    assert (Path(last.file).name, last.line) == ("train_rank1.log", 6)


REALRUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def test_a_rank_s_last_line_in_a_console_is_its_own_not_the_launcher_table_after_it():
    # abort_r1_w2's console: rank 0's last "[rank0]:" line is line 16 (its RuntimeError); torchrun's
    # own lines follow (its closing signal, its ChildFailedError table ending on a "====" line).
    rep = analyze(str(REALRUNS / "abort_r1_w2"))
    last = rep.job.ranks[0].last_line
    assert (Path(last.file).name, last.line) == ("console.log", 16)
    assert last.text.startswith("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo")


def test_an_unlabelled_line_a_rank_s_own_file_ends_on_is_still_its_own():
    # t53's --log-dir stderr.log of rank 3 (no launcher writes there): its "[rank3]:" traceback is
    # followed by the C++ runtime's "terminate called without an active exception", which torch's
    # label does not reach: that line, the file's last, is the rank's last.
    rep = analyze(str(REALRUNS / "t53_resume_stale_config_r3_w4_logdirq"))
    last = next(r for r in rep.job.ranks if r.rank == 3).last_line
    assert last.text == "terminate called without an active exception"
    assert Path(last.file).name == "stderr.log"


_DDP_CHECK = ("[rank{me}]: RuntimeError: DDP expects same model across all ranks, but Rank {me} has {mine} params, "
              "while rank {other} has inconsistent {theirs} params.")


def _ddp_console(tmp_path, sizes: dict[int, int], other_of: dict[int, int]) -> list[int]:
    # Shapes of t82_oldrev_n2_3x1_ddp_tee: every rank raises DDP's construction check, naming a peer.
    lines = [f"[rank{r}]: Setting up distributed: backend=gloo world_size={len(sizes)} rank={r}" for r in sizes]
    for me, other in other_of.items():
        lines += [f"[rank{me}]: Traceback (most recent call last):",
                  f'[rank{me}]:   File "/job/train.py", line 88, in main',
                  f"[rank{me}]:     model = DDP(model)",
                  _DDP_CHECK.format(me=me, mine=sizes[me], other=other, theirs=sizes[other])]
    _write(tmp_path, "console.log", lines)
    return (analyze([str(tmp_path)], jobs=1).verdict or {}).get("ranks") or []


def test_the_rank_every_other_rank_s_ddp_check_names_is_the_odd_model(tmp_path):
    # ranks 0 and 1 (4 params) both name rank 2 (6 params); rank 2 names rank 0: rank 2's model is the odd one
    assert _ddp_console(tmp_path, {0: 4, 1: 4, 2: 6}, {0: 2, 1: 2, 2: 0}) == [2]


def test_two_ranks_naming_each_other_single_out_neither(tmp_path):
    assert _ddp_console(tmp_path, {0: 4, 1: 6}, {0: 1, 1: 0}) == [0, 1]


def test_a_traceback_a_library_says_is_safe_to_ignore_is_no_failure(tmp_path):
    # Shapes of t80_poll_r2_w4_plain_redirect: Ray Train's controller logs a GetTimeoutError at start-up
    # under "it's safe to ignore this error", then starts the workers; nothing else failed.
    _write(tmp_path, "console.log", [
        "(TrainController pid=23473) Failed to send resource request for train-96cc. If this only happens transiently "
        "during network partition or CPU being overloaded, it's safe to ignore this error.",
        "(TrainController pid=23473) Traceback (most recent call last):",
        '(TrainController pid=23473)   File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 3009, in get',
        "(TrainController pid=23473)     values, debugger_breakpoint = worker.get_objects(",
        "(TrainController pid=23473) ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
        "(TrainController pid=23473) Attempting to start training worker group of size 4",
    ])
    # (RK1 may still say, as information, that it was caught and the job went on)
    assert [str(f.severity) for f in analyze([str(tmp_path)], jobs=1).findings if f.rule == "RK1"] in ([], ["info"])


def test_a_json_record_whose_message_holds_a_traceback_reads_as_its_exception_line():
    from nccl_doctor.incremental import parse_lines

    # Ray Train's worker log (ray-train-app-worker-*.log): the formatted traceback inside "message"
    record = ('{"asctime": "2026-11-27 22:09:11,881", "levelname": "ERROR", "message": "Error in training function:\\n'
              'Traceback (most recent call last):\\n  File \\"/job/train.py\\", line 171, in loop\\n    loss.backward()\\n'
              'RuntimeError: [../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 20000ms for recv operation '
              'to complete", "world_rank": 1}')
    events = parse_lines([record])
    assert [(e.kind, e.get("exc_type"), e.get("timeout_ms")) for e in events] == [("gloo_timeout", "RuntimeError", 20000)]


def _desync_console(tmp_path, warn_ranks: dict[int, str]) -> list[int]:
    # Shapes of t59_shape_r1_w4_manual_plain_tee3 (torch's rank labels here): every rank logs its steps; gloo aborts one rank on a
    # size mismatch (no rank label on the terminate line), the others lose it.
    lines = []
    for r in range(4):
        lines += [f"[rank{r}]:step 11 loss 2.{r}1"]
    for r, text in warn_ranks.items():
        lines += [f"[rank{r}]:warning: {text}"]
    lines += ["terminate called after throwing an instance of 'gloo::EnforceNotMet'",
              "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
              "op.preamble.length <= op.nbytes. 1024 vs 960. Received data size doesn't match expected size. Is there "
              "a distributed collective mismatch?"]
    for r in (0, 2, 3):
        lines += [f"[rank{r}]:RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
                  f"Connection closed by peer [127.0.0.1]:4{r}11"]
    _write(tmp_path, "console.log", lines)
    return next(f.ranks for f in analyze([str(tmp_path)], jobs=1).findings if f.rule == "DSY1")


def test_the_one_rank_that_warned_right_before_a_desync_is_named(tmp_path):
    assert _desync_console(tmp_path, {1: "short record in shard 7 at step 12: 15 of 16 samples, using a partial batch"}) \
        == [1]


def test_a_warning_every_rank_printed_names_no_one_as_the_desync_s(tmp_path):
    text = "record with missing features in batch 12, filled with zeros"
    assert _desync_console(tmp_path, dict.fromkeys(range(4), text)) == []


_SIZE_CHECK = ("[rank{me}]: RuntimeError: [{me}]: params[0] in this process with sizes [512, 128] appears not to "
               "match sizes of the same param in process 0.")


def _ddp_sizes_console(tmp_path, world: int, raisers: list[int]) -> list[int]:
    # Shapes of t84_sameport_rdzv_r23_tee: the ranks whose parameter sizes differ from rank 0's raise.
    lines = [f"[rank{r}]: Setting up distributed: backend=gloo world_size={world} rank={r}" for r in range(world)]
    lines += [_SIZE_CHECK.format(me=r) for r in raisers]
    _write(tmp_path, "console.log", lines)
    return (analyze([str(tmp_path)], jobs=1).verdict or {}).get("ranks") or []


def test_the_ranks_whose_sizes_differ_from_the_reference_s_hold_the_odd_model(tmp_path):
    assert _ddp_sizes_console(tmp_path, 4, [2, 3]) == [2, 3]


def test_when_every_rank_but_the_reference_differs_the_reference_is_odd(tmp_path):
    assert _ddp_sizes_console(tmp_path, 3, [1, 2]) == [0]


def test_a_lost_node_the_restarted_job_went_on_without_is_said_so():
    """t190_nodeloss_finish: gpu-st-02 was SIGKILLed, torchrun re-formed the group on gpu-st-01 alone, it
    resumed from step 59 and trained to step 110 with no failure (gpu-st-01.log): the verdict names the
    node and says the job got over it."""
    run = Path(__file__).resolve().parent.parent / "fixtures" / "realruns" / "t190_nodeloss_finish_tee"
    summary = analyze([str(run)], jobs=1).verdict["summary"]
    assert "gpu-st-02" in summary and summary.endswith("the job got over it"), summary
    assert "step 110/120" in summary, summary


def test_a_loose_fatal_python_error_is_the_one_rank_that_did_not_lose_a_peer(tmp_path):
    """faulthandler writes "Fatal Python error: Segmentation fault" straight to stderr, past the script's
    "[rank N]" tag; ranks 0 and 2 only lost a peer: the dump is rank 1's, the one rank with no echo."""
    lines = [f"[rank {r}] step {s} loss 2.1" for s in (1, 2, 3) for r in (0, 1, 2)]
    lines += ["Fatal Python error: Segmentation fault", "",
              "Thread 0x00007f3a (most recent call first):", '  File "/app/train.py", line 60 in forward']
    for r in (0, 2):
        lines += [f"[rank{r}]: Traceback (most recent call last):", f'[rank{r}]:   File "/app/train.py", line 88, in <module>',
                  _ECHO.format(r=r)]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n")
    summary = analyze([str(tmp_path)], jobs=1).verdict["summary"]
    assert summary.startswith("rank 1 failed first: Fatal Python error: Segmentation fault"), summary


_SIGTERM_DUMP = [
    "W1128 21:15:34.158000 700 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 901 closing "
    "signal SIGTERM",
    "Thread 0x00007f8cab0fe6c0 (most recent call first):",
    '  File "/job/train.py", line 301 in _flusher',
    '  File "/usr/lib/python3.11/threading.py", line 982 in run',
    "",
    "Current thread 0x00007f8cd37bfb80 (most recent call first):",
    '  File "{inner}", line 315 in {func}',
    '  File "/job/train.py", line 366 in main',
    '  File "/job/train.py", line 374 in <module>',
    "E1128 21:15:34.193000 700 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
    "local_rank: 1 (pid: 902) of binary: /venv/bin/python3",
]


@pytest.mark.parametrize("inner,func,cited", [("/job/train.py", "record", True),
                                              ("/venv/lib/python3.11/site-packages/torch/distributed/"
                                               "distributed_c10d.py", "all_reduce", False)])
def test_a_stack_dump_below_the_launchers_sigterm_of_a_pid_is_that_ranks(tmp_path, inner, func, cited):
    # The shape of fixtures/realruns/t294_deadlock_r0: rank 1 times out; torchrun SIGTERMs pid 901 and a dump with no
    # rank follows (faulthandler registered for SIGTERM); its table gives pid 901 to rank 0. The dump is rank 0's
    # and says where it hung; a dump waiting in a collective says nothing of a hang outside one.
    lines = [_TIMEOUT.format(r=1), *(ln.format(inner=inner, func=func) for ln in _SIGTERM_DUMP),
             *_table("node-1", [(0, 0, -15, 901)], (1, 1, 1, 902))]
    (tmp_path / "console.err").write_text("\n".join(lines) + "\n")
    rep = analyze([str(tmp_path)])
    assert rep.verdict is not None and rep.verdict["ranks"] == [0], rep.verdict
    said = "its stack dump when the launcher stopped it" in rep.verdict["summary"]
    assert said == cited, rep.verdict["summary"]
    if cited:
        assert "in record (train.py:315), called from main (train.py:366)" in rep.verdict["summary"]


def _json_rank(tmp_path, rank: int, steps: int, said: str | None, site: tuple[int, str, str], error: str):
    """A torchrun --log-dir rank folder: its traceback on stderr, JSON records on stdout ending with the
    logger's own "training failed" record that embeds the same traceback in one field."""
    line, func, call = site
    tb = ["Traceback (most recent call last):", '  File "/job/train.py", line 300, in <module>', "    main()",
          f'  File "/job/train.py", line {line}, in {func}', f"    dist.{call}()",
          '  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 5356, in '
          f"{call}", "    work.wait()", error]
    folder = tmp_path / "logs" / "none_x" / "attempt_0" / str(rank)
    folder.mkdir(parents=True)
    _write(folder, "stderr.log", [f"[rank{rank}]: {t}" for t in tb])
    def rec(s: int, level: str, message: str, **extra) -> str:
        return json.dumps({"time": f"2026-11-29T01:00:{s:02d}.122", "level": level, "logger": "finetune",
                           "rank": rank, "message": message, **extra})

    out = [rec(i, "INFO", f"epoch 0 step {i} loss 1.38{i:02d}") for i in range(steps)]
    if said:
        out.append(rec(steps, "INFO", said))
    out.append(rec(59, "ERROR", "training failed", exception="\n".join(tb)))
    _write(folder, "stdout.log", out)


def test_a_json_records_copy_of_the_traceback_does_not_hide_where_the_rank_waited(tmp_path):
    # t333_barrier_upload: rank 0 waits in a barrier only it reaches ("waiting for the other ranks"), rank 1
    # goes on to the next step's all_reduce; each rank's logger writes its own one-line copy of the traceback
    # after it, with no frame lines: the frames of the traceback say where each waited.
    _json_rank(tmp_path, 0, 18, "uploaded predictions of step 17, waiting for the other ranks before pruning",
               (216, "upload_predictions", "barrier"),
               "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
               "Timed out waiting 30000ms for recv operation to complete")
    _json_rank(tmp_path, 1, 19, None, (151, "sync_grads", "all_reduce"),
               "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
               "closed by peer [127.0.0.1]:3997. This is typically caused by a remote worker crashing.")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [0]
    assert "train.py:216 (in upload_predictions)" in report.verdict["summary"]


def test_a_label_two_nodes_share_that_their_tables_split_is_no_host(tmp_path):
    # Each node's console under its compose service's "trainer-1  | ": the label is the same on both nodes,
    # torchrun's tables put ranks 0-1 on one container and 2-3 on another. Rank 2 hung (SIGTERMed, no error of
    # its own): it is on its table's host, not on "trainer-1".
    def node(host: str, ranks: tuple[int, int], hung: int | None) -> list[str]:
        out = [f"trainer-1  | [default{r % 2}]:[rank {r}] step {s} loss 2.0" for s in range(6) for r in ranks]
        for r in ranks:
            if r != hung:
                out.append(f"trainer-1  | [default{r % 2}]:" + _TIMEOUT.format(r=r))
        rows = [(r, r % 2, -15 if r == hung else 1, 15800 + r) for r in ranks]
        return out + [f"trainer-1  | {t}" for t in _table(host, rows[1:], rows[0])]

    _write(tmp_path, "a7c3e91f02b4.log", node("a7c3e91f02b4", (0, 1), None))
    _write(tmp_path, "5d18b0c6e3f7.log", node("5d18b0c6e3f7", (2, 3), 2))
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [2]
    assert report.verdict["hosts"] == ["5d18b0c6e3f7"]


def _node_a(restart: bool) -> list[str]:
    out = ["[02:22:26] INFO: starting on a100-p-3 pid 22884: rank 0 local_rank 0 group_rank 0 world_size 2 "
           "restart_count 0/2"]
    out += [f"[02:22:{27 + s // 8}] INFO: step {s}/40 | loss 6.41 | 0.16 s/step" for s in range(0, 24, 4)]
    out += ["[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read "
            "error [127.0.0.1]:37575: Connection reset by peer",
            "W1129 02:22:31.891000 22878 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process "
            "22884 closing signal SIGTERM"]
    if restart:  # the same rank again, a new pid, counting from step 0 (a membership change: restart_count 0)
        out += ["[02:22:34] INFO: starting on a100-p-3 pid 22896: rank 0 local_rank 0 group_rank 0 world_size 2 "
                "restart_count 0/2", "[02:22:36] INFO: resume disabled: starting from step 0"]
        out += [f"[02:22:{36 + s // 8}] INFO: step {s}/40 | loss 6.41 | 0.16 s/step" for s in range(0, 40, 4)]
    return out


@pytest.mark.parametrize("restart", [True, False])
def test_a_killed_rank_only_its_agent_reports_is_the_one_rank_no_line_accounts_for(tmp_path, restart):
    # Two nodes of one rank each: rank 0 on a100-p-3 says so; a100-p-4's console holds only its agent's "failed
    # (exitcode: -9) local_rank: 0": the one rank of the world no line accounts for, rank 1. When rank 0 then
    # starts again under a new pid after its agent stopped the old one, torchrun restarted the group (MN5).
    _write(tmp_path, "a100-p-3.log", _node_a(restart))
    _write(tmp_path, "a100-p-4.log", [
        "E1129 02:22:31.604000 22879 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) "
        "local_rank: 0 (pid: 22883) of binary: /venv/bin/python3"])
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1] and report.verdict["hosts"] == ["a100-p-4"]
    assert ("MN5" in {f.rule for f in report.findings}) is restart


def test_the_same_rank_number_started_by_another_job_in_one_file_is_no_restart(tmp_path):
    # Two jobs appending to one log file: job B's rank 0 starts under another pid while job A's rank 0 trains on,
    # and nothing stopped job A's process: no restart.
    lines = ["2026-11-27 23:12:45,891 INFO [rank 0] starting on vm pid 31248 (local rank 0) world_size 3"]
    lines += [f"2026-11-27 23:12:4{6 + s // 10},000 INFO [rank 0] step {s} loss 1.2" for s in range(0, 30, 5)]
    lines += ["2026-11-27 23:12:51,472 INFO [rank 0] starting on vm pid 31263 (local rank 0) world_size 2"]
    lines += [f"2026-11-27 23:12:5{2 + s // 10},000 INFO [rank 0] step {s} loss 1.2" for s in range(0, 20, 5)]
    lines += ["E1127 23:12:56.734000 31260 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: "
              "-9) local_rank: 1 (pid: 31264) of binary: /venv/bin/python3"]
    _write(tmp_path, "train.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert "MN5" not in {f.rule for f in report.findings}


def test_the_node_a_rank_that_wrote_nothing_was_probably_on_is_said_of_that_rank():
    # t342_file_r1_2x1_plain_usr1_redirect: trn-04's console holds rank 0's timeout, trn-05's no rank's lines (rank 1
    # wrote nothing before it hung): rank 1 was probably on trn-05, said of rank 1, not of rank 0 that timed out.
    report = analyze([str(REALRUNS / "t342_file_r1_2x1_plain_usr1_redirect")], jobs=1)
    rk2 = next(f for f in report.findings if f.rule == "RK2")
    assert report.verdict["ranks"] == [1]
    assert "timed out waiting; it was probably on trn-05, the one node" in rk2.summary


def test_a_lone_aborted_rank_whose_peers_logged_past_it_is_the_odd_one_though_tracebacks_end_their_output():
    # t345_dtype_bcast: rank 0 broadcasts 6 float32 weights, rank 2 receives into a float16 buffer: gloo aborts it
    # ("24 vs 12", no Python traceback) while ranks 0, 1, 3 log the weights they received and go on, losing it in
    # the next all_reduce. Each rank's output ends in its error; the last dated lines say who stopped short.
    report = analyze([str(REALRUNS / "t345_dtype_bcast_r2_w4_norank_logdir")], jobs=1)
    assert report.verdict["ranks"] == [2]
    assert "every other rank went on past the point where it stopped" in report.verdict["summary"]


def test_a_ranks_own_error_print_before_its_exit_1_is_quoted_and_a_peers_abort_does_not_hide_it(tmp_path):
    # t352_nanexit: rank 2 prints "rank 2: ERROR: non-finite loss (nan) ...; stopping this run" and exits 1; rank 3
    # loses it, then aborts ("terminate called without an active exception", a line of nobody's): that abort is
    # rank 3's teardown (-6), not what rank 2's exit 1 echoed.
    lines = [f"rank {r}: step 5/40 loss 2.07 (107 ms)" for r in range(4)]
    lines += ["rank 2: ERROR: non-finite loss (nan) at step 6; stopping this run", _ECHO.format(r=3),
              "terminate called without an active exception", _ECHO.format(r=1)]
    lines += _table("localhost", [(3, 3, -6, 11143), (0, 0, -15, 11140), (1, 1, -15, 11141)], (2, 2, 1, 11142))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [2]
    assert "logged error: non-finite loss (nan) at step 6; stopping this run" in report.verdict["summary"]


def test_a_teardown_terminate_right_below_a_ranks_echo_is_that_ranks_not_a_failure():
    # t356_kill_r0: rank 1's "Connection reset by peer", then "terminate called without an active exception" (its
    # teardown, no prefix), then the agent's "failed (exitcode: -9) local_rank: 0": rank 0 was killed first.
    report = analyze([str(REALRUNS / "t356_kill_r0_w4_n2_mr1_resume_split")], jobs=1)
    assert report.verdict["ranks"] == [0]
    assert report.verdict["summary"].startswith("rank 0 on a100-rack3-11 failed first: exit code -9 (SIGKILL")


def test_two_receivers_aborting_alike_in_a_broadcast_name_its_root():
    # t357_bcastdtype: rank 0 broadcasts an int64 seed, ranks 1-3 receive into int32: ranks 1 and 2 abort ("8 vs 4"),
    # rank 3 loses them in the same broadcast, rank 0 alone went on: the root sent them all more than they posted.
    report = analyze([str(REALRUNS / "t357_bcastdtype_r0_w4_logdir")], jobs=1)
    assert report.verdict["ranks"] == [0]
    assert "gloo aborted ranks 1-2" in report.verdict["summary"]
    assert "rank 3 lost them in the same broadcast" in report.verdict["summary"]


def _alike(tmp_path, trained: bool):
    lines = [f"[rank {r}] step {s} loss 1.{r}" for s in (range(0, 20, 5) if trained else ()) for r in range(3)]
    for r, idx in ((0, 1099511627799), (2, 1099511627804)):
        lines += [f"[rank{r}]: Traceback (most recent call last):",
                  f"[rank{r}]:   File \"/job/train.py\", line 212, in plan_shards",
                  f"[rank{r}]: IndexError: index {idx} is out of bounds for dimension 0 with size 64"]
    lines += [_ECHO.format(r=1)]
    lines += _table("node-a", [(0, 0, 1, 101), (1, 1, -15, 102)], (2, 2, 1, 103))
    _write(tmp_path, "console.log", lines)
    return analyze([str(tmp_path)], jobs=1)


def test_every_rank_but_one_failing_alike_after_training_points_to_what_they_had_from_it(tmp_path):
    # t359_bcast: the coordinator broadcast a corrupt shard plan; every other rank raises one IndexError (its own slice:
    # other numbers), the coordinator only loses them. Mid-run, the one rank they have in common is named.
    report = _alike(tmp_path, trained=True)
    assert report.verdict["ranks"] == [1]
    assert "rank 1 on node-a is the likeliest cause: ranks 0, 2 raised IndexError alike after training" in report.verdict["summary"]


def test_every_rank_but_one_failing_alike_at_start_up_is_left_as_it_is(tmp_path):
    # The same before any step (one rank creates what the others read: a bug of theirs as likely): not accused.
    report = _alike(tmp_path, trained=False)
    assert report.verdict["ranks"] != [1]


def test_torchruns_own_traceback_is_not_the_error_of_the_rank_whose_lines_are_unlabelled(tmp_path):
    # t364_hang_r0_w4_rank0log_tee: only rank 0 logs, without a label (its start-up line names its pid, which the
    # table gives rank 0); ranks 1-3 time out; torchrun's ChildFailedError traceback below is the agent's, not rank
    # 0's error: rank 0 is the silent one, and its last line is its own step, not the table's.
    timeout = ("[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
               "Timed out waiting 20000ms for recv operation to complete")
    lines = ["2026-11-29 04:40:15,287 | INFO     | host vm pid 16127 local_rank 0 world_size 4 backend gloo timeout 20s",
             "2026-11-29 04:40:19,603 | INFO     | step 10/60 loss 2.4838 lr 0.0467 (0.09 s/step)"]
    lines += [timeout.format(r=r) for r in (1, 2, 3)]
    lines += ["Traceback (most recent call last):", '  File "/venv/bin/torchrun", line 8, in <module>',
              "    sys.exit(main())"]
    lines += _table("vm", [(2, 2, 1, 16129), (0, 0, -15, 16127), (3, 3, 1, 16130)], (1, 1, 1, 16128))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [0]
    assert "rank 0 on vm is missing or went silent" in report.verdict["summary"]


def test_the_agents_chained_traceback_in_a_pods_stderr_is_not_its_ranks_store_timeout(tmp_path):
    # t365_hang_r1_mn2_k8s_crlf_split: rank 1 hangs on the worker pod; rank 0 times out on the master pod and its
    # torchrun exits; the worker's torchrun then loses the store (a DistNetworkError chained to its own
    # RendezvousConnectionError) in the pod's stderr, whose other lines are rank 1's: an agent's, not rank 1's wait.
    _write(tmp_path, "pod-master-0.out", [f"[2026-11-29 04:49:3{s},888][INFO][rank 0] step {s}/40 loss 1.4" for s in range(1, 6)])
    _write(tmp_path, "pod-master-0.err", [
        "[rank0]: Traceback (most recent call last):", '[rank0]:   File "/job/train.py", line 286, in main',
        "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
        "Timed out waiting 30000ms for recv operation to complete"])
    _write(tmp_path, "pod-worker-0.out", [f"[2026-11-29 04:49:3{s},888][INFO][rank 1] step {s}/40 loss 1.4" for s in range(1, 6)])
    _write(tmp_path, "pod-worker-0.err", [
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", '
        "line 114, in _call_store",
        "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote "
        "server shutdown or crash?", "",
        "The above exception was the direct cause of the following exception:", "",
        "Traceback (most recent call last):", '  File "/venv/bin/torchrun", line 8, in <module>',
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
        "failed. See inner exception for details."])
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    assert "rank 1 on pod-worker-0 is missing or went silent" in report.verdict["summary"]


def test_the_rank_whose_broadcast_batch_the_only_failing_rank_checked_is_accused(tmp_path):
    # t371_badbcast_r0_w2_split: rank 0 reads the records and broadcasts each batch; rank 1's own check of the ids
    # raises, naming where the batch came from; rank 0 only loses it. The sender is the likeliest cause.
    lines = ["[rank 0] step 13 loss 2.1", "[rank 1] step 13 loss 2.1",
             "[rank1]: Traceback (most recent call last):", '[rank1]:   File "/job/train.py", line 131, in next_batch',
             "[rank1]: ValueError: batch 14: token id 138768572270772729 outside the vocabulary [0, 512) in the (16, 24) "
             "batch received from rank 0", _ECHO.format(r=0)]
    lines += _table("node-a", [(0, 0, -15, 101)], (1, 1, 1, 102))
    _write(tmp_path, "console.log", lines)
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [0]
    assert "rank 1's own check of what it received from it failed" in report.verdict["summary"]


def _ddp_mirror(tmp_path, override: int | None):
    lines = [f"2026-11-29 05:29:42,1{r}4 [rank{r}] INFO lmtrain: host vm pid 2574{r} local_rank {r} world_size 2"
             for r in (0, 1)]
    if override is not None:
        lines.append(f"2026-11-29 05:29:43,727 [rank{override}] INFO lmtrain: applying local overrides: "
                     "model.tie_word_embeddings=False")
    for me, other, mine, theirs in ((1, 0, 29, 28), (0, 1, 28, 29)):
        lines += [f"[rank{me}]: Traceback (most recent call last):",
                  f'[rank{me}]:   File "/job/train.py", line 232, in main',
                  f"[rank{me}]: RuntimeError: DDP expects same model across all ranks, but Rank {me} has {mine} params, "
                  f"while rank {other} has inconsistent {theirs} params."]
    lines += _table("vm", [(0, 0, -15, 25747)], (1, 1, 1, 25748))
    _write(tmp_path, "console.log", lines)
    return analyze([str(tmp_path)], jobs=1)


def test_of_two_ranks_whose_models_mirror_each_other_the_one_that_overrode_a_setting_is_named(tmp_path):
    # t375_ddp_untied_r1_w2_logrank_tee: each rank's DDP check names the other (29 params against 28); only rank 1's
    # start-up line says it applied a local override (tie_word_embeddings=False): its model is the one that departs.
    report = _ddp_mirror(tmp_path, override=1)
    assert report.verdict["ranks"] == [1]
    assert "its own start-up line says it overrode a setting" in report.verdict["summary"]


def test_of_two_mirrored_models_with_no_override_said_both_ranks_stay_named(tmp_path):
    report = _ddp_mirror(tmp_path, override=None)
    assert report.verdict["ranks"] == [0, 1]


def _json_rec(rank: int, host: str, pid: int, t: str, msg: str) -> str:
    return (f'[default0]:{{"time": "2026-11-29T05:33:{t}", "level": "INFO", "logger": "train", "rank": {rank}, '
            f'"world_size": 2, "host": "{host}", "pid": {pid}, "message": "{msg}"}}')


def test_lines_torchruns_relay_did_not_label_are_not_its_workers_own(tmp_path):
    # t376_exit0_r1_n2_json_logdir: rank 1's shard runs out ("training done") and it exits 0; rank 0 loses it. On rank
    # 1's node the agent, losing the store rank 0's node hosted, writes TCPStore warnings with no "[default0]:": they
    # are the agent's, not a store timeout of rank 1 (the one process whose records the file holds).
    _write(tmp_path, "node-41.log", [
        _json_rec(0, "ip-10-0-3-41", 28414, "02.259", "initialized process group: rank 0/2, local_rank 0"),
        _json_rec(0, "ip-10-0-3-41", 28414, "05.726", "step 25/45 loss 1.7808"),
        "[default0]:[rank0]: Traceback (most recent call last):",
        '[default0]:[rank0]:   File "/job/train.py", line 200, in main',
        "[default0]:" + _ECHO.format(r=0)])
    _write(tmp_path, "node-42.log", [
        _json_rec(1, "ip-10-0-3-42", 28415, "02.259", "initialized process group: rank 1/2, local_rank 0"),
        _json_rec(1, "ip-10-0-3-42", 28415, "05.726", "step 25/45 loss 1.7808"),
        _json_rec(1, "ip-10-0-3-42", 28415, "05.895", "epoch 0 finished: shard exhausted after 27 steps"),
        _json_rec(1, "ip-10-0-3-42", 28415, "05.895", "training done in 2.3s"),
        "[W1129 05:33:07.654203019 TCPStore.cpp:138] [c10d] recvValueWithTimeout failed on SocketImpl(fd=4, "
        "addr=[::ffff:127.0.0.1]:45088, remote=[::ffff:127.0.1.1]:15660): Failed to recv, got 0 bytes. Connection was "
        "likely closed. Did the remote server shutdown or crash?"])
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    assert "left the job early" in report.verdict["summary"]
