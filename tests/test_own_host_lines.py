"""A script's own start-up line naming its host ("process group ready: backend gloo, world size 3, rank 0, local
rank 0, host gpu-ws-14, pid 29254", what socket.gethostname() gives) is where the rank ran, over a launcher's label
that names no node (a docker compose service's "trainer-1  | " before every line, the same on each node). Expected
hosts are read from the recorded lines (family t229) by hand."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor.analysis import analyze

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def test_a_one_node_job_s_host_comes_from_the_ranks_own_start_up_lines():
    # logs/train-20261128-141815.log:1 "... world size 3, rank 0, local rank 0, host gpu-ws-14, pid 29254"; the
    # launcher's table, which would name the host too, was lost when the disk filled
    report = analyze([str(RUNS / "t229_raise_r0_w3_prevrun_diskfull_tee")], jobs=1)
    assert report.verdict["ranks"] == [0] and report.verdict["hosts"] == ["gpu-ws-14"]


def test_a_compose_service_label_shared_by_two_nodes_is_no_host():
    # dgx-a07.compose.log:34 "trainer-1  | [rank1] ... rank 1, local rank 1, host dgx-a07, pid 29822"; dgx-a08's
    # console carries the same "trainer-1  | " label before ranks 2-3, whose own lines say host dgx-a08
    report = analyze([str(RUNS / "t229_kill_r1_n2x2_compose_diskfull_logdir")], jobs=1)
    assert report.verdict["ranks"] == [1] and report.verdict["hosts"] == ["dgx-a07"]
    assert sorted(report.job.hosts) == ["dgx-a07", "dgx-a08"]


def test_a_host_glued_to_another_rank_s_print_is_not_taken():
    # t207_errexit3 console.log:1: rank 0's "... host=vm" and rank 1's "R1 | ..." on one line ("host=vmR1 | ...")
    report = analyze([str(RUNS / "t207_errexit3_r1_w3_print_tee")], jobs=1)
    assert "vmR1" not in report.job.hosts


def test_a_script_s_print_tag_is_no_host_when_its_start_up_line_names_host_and_pid():
    # gpu-worker-2.out:1 "R1: rank 1 of 2 starting on gpu-worker-2 (local rank 0, pid 17564)": every line of that
    # node's console is tagged "R1: " (the script's own print tag, read like pdsh's "host: "); rank 1 hung there
    report = analyze([str(RUNS / "t316_hang_r1_n2_allreduce_split")], jobs=1)
    assert report.verdict["ranks"] == [1] and report.verdict["hosts"] == ["gpu-worker-2"]
    assert sorted(report.job.hosts) == ["gpu-worker-1", "gpu-worker-2"]


def test_a_record_s_own_host_column_is_its_host_under_a_compose_label():
    # trn-node-b.compose.log:2 "trainer-1  | 2026-11-29 08:35:54,069 | trn-node-b | rank 1 | INFO | ...": the same
    # "trainer-1" label is on trn-node-a's console; rank 1 hung on trn-node-b (t401's injected fault)
    report = analyze([str(RUNS / "t401_hang_r1_2x1_compose")], jobs=1)
    assert report.verdict["ranks"] == [1] and report.verdict["hosts"] == ["trn-node-b"]


def test_per_node_extracts_named_after_their_node_give_their_ranks_host():
    # dgx-a08.errors.txt (grep -n of that node's console) holds rank 1's traceback and its torchrun's
    # ChildFailedError, dgx-a07.errors.txt rank 0's and its own; no line names a host
    report = analyze([str(RUNS / "t407_raise_r1_2x1_grepn")], jobs=1)
    assert report.verdict["ranks"] == [1] and report.verdict["hosts"] == ["dgx-a08"]


def test_consoles_named_after_the_job_or_its_attempts_are_no_hosts(tmp_path):
    # two consoles of one node, each with its own torchrun's lines: "train-7730.log", "train-7731.log" name runs
    table = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
             "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-29_08:29:47\n  host      : localhost\n"
             "  rank      : {r} (local_rank: {r})\n  exitcode  : 1 (pid: 1{r}00)\n  error_file: <N/A>\n")
    for run, r in (("7730", 0), ("7731", 1)):
        (tmp_path / f"train-{run}.log").write_text(f"[rank{r}]: RuntimeError: boom {run}\n" + table.format(r=r))
    report = analyze([str(tmp_path)], jobs=1)
    assert not {"train-7730", "train-7731"} & set(report.job.hosts)
