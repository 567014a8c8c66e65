"""Three launcher-side reports, read from real recordings (fixtures/realruns, t158/t160/t161): pdsh's
output sorted by dshbak (one block per host), torch's elastic timer server reaping a worker by pid,
and bash naming a rank's death by a resource-limit signal. Expected values are the logs' own lines."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor import analyze
from nccl_doctor.records import join_block

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def _lines(text: str):
    rest = text.split("\n")
    return (lambda: rest.pop(0) if rest else None), (lambda: rest[0] if rest else None)


def _rule(report, rule: str):
    return next(f for f in report.findings if f.rule == rule)


def test_dshbaks_three_line_header_is_one_record():
    take, peek = _lines("gpu-a01\n----------------\n[default0]:step 5/40 mean loss 1.3733")
    assert join_block("----------------", take, peek) == ["---------------- gpu-a01 ---------------- "[:-1]]
    assert peek() == "[default0]:step 5/40 mean loss 1.3733"
    # a rule of dashes with no host under it is left as it was (the next line kept at its own line)
    take, peek = _lines("step 5 done\n")
    assert join_block("----------------", take, peek) is None


def test_a_dshbak_block_names_the_host_of_its_lines_and_is_no_later_run():
    # console.txt:1-3 heads gpu-a01's block; its rank 0 ("[default0]:ERROR: cannot write checkpoint",
    # console.txt:7) failed; gpu-a02's block (console.txt:66-) follows the table of gpu-a01: another host's
    # lines, not a rerun appended after it
    report = analyze([str(RUNS / "t161_exit1_node1_dshbak_logdir")], jobs=1)
    assert report.verdict["ranks"] == [0] and report.verdict["hosts"] == ["gpu-a01"]
    assert "Disk quota exceeded" in _rule(report, "RK1").summary
    assert not any("more than one run" in n for n in report.notes)
    assert "MN5" not in {f.rule for f in report.findings}  # no restart: gpu-a02's step 5 is not step 10 going back


def test_the_elastic_timer_reaping_a_pid_names_the_rank_that_wrote_under_that_pid():
    # console.log:93 "Reaping worker_pid=[7451]. Expired timers: ['fetch_batch']"; rank 2's records carry
    # "[7451]" (logs/.../attempt_0/2/stdout.log)
    rk1 = _rule(analyze([str(RUNS / "t158_file_slow_r2_w4_pid_logdir")], jobs=1), "RK1")
    assert rk1.ranks == [2]
    assert "the elastic timer server killed it (SIGKILL): its expires() deadline passed ('fetch_batch')" in rk1.summary
    assert any("Reaping worker_pid=[7451]" in e.text for e in rk1.evidence)


def test_a_reaped_pid_no_line_ties_to_a_rank_leaves_the_rank_that_went_silent():
    # console.log:81 reaps pid 7124, which no other line names; rank 1 stopped writing, the others lost it
    report = analyze([str(RUNS / "t158_file_load_r1_w3_info_tee")], jobs=1)
    assert report.verdict["ranks"] == [1]
    assert not any(f.rule == "RK1" and not f.ranks for f in report.findings)


def test_bashs_word_for_a_resource_signal_and_the_scripts_pid_line_name_the_rank():
    # console.log:79 "job160: line 13:  7839 CPU time limit exceeded ..."; :81 "rank 1 (pid 7839) exited with status 152"
    rk1 = _rule(analyze([str(RUNS / "t160_xcpu_spin_r1_w3_loop_redirect")], jobs=1), "RK1")
    assert rk1.ranks == [1]
    assert rk1.summary.startswith("rank 1 failed first: CPU time limit exceeded (SIGXCPU; pid 7839")
    assert "the job script's own line gives that pid to rank 1" in rk1.summary


def test_a_kubectl_bundles_logs_sections_are_their_pods():
    # collect.out: "===== ... kubectl -n ml-training logs ctr-dnn-31-master-0" (:90) heads master-0's lines (ranks
    # 0-1 time out at :116, :129), "... logs ctr-dnn-31-worker-0" (:278) worker-0's; rank 3's last line is its
    # unfinished save (:286) and worker-0's table lists it SIGTERMed
    report = analyze([str(RUNS / "t172_hang_r3_2x2_bundle_split")], jobs=1)
    assert report.verdict["ranks"] == [3] and report.verdict["hosts"] == ["ctr-dnn-31-worker-0"]
    ranks = {r["rank"]: r for r in report.to_dict()["ranks"]}
    assert ranks[0]["host"] == "ctr-dnn-31-master-0" and ranks[1]["host"] == "ctr-dnn-31-master-0"
