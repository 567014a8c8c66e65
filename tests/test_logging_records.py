"""Python logging's own shapes in real recordings (fixtures/realruns t162, t164, t165): two ranks'
"--- Logging error ---" reports written at once, a helper process's exit report, structlog's
KeyValueRenderer (Python-repr quoting), and a level padded by "%(levelname)-8s". Expected values come
from the logs' own lines, read by hand."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor import analyze
from nccl_doctor.jsonlog import decode_logfmt

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def _rule(report, rule: str):
    return next((f for f in report.findings if f.rule == rule), None)


def test_logging_errors_two_ranks_wrote_at_once_are_both_handled():
    # console.log:1216-1217 "--- Logging error ---" twice, then two tracebacks interleaved, each ending in
    # BrokenPipeError (1248, 1249): logging reported a failed emit and went on; every rank trained to the
    # end; console.log:1816 "WARNING: log writer pid 20270 exited with code -9" is the job's helper, no rank
    report = analyze([str(RUNS / "t162_writerkill_node_w3_redirect")], jobs=1)
    assert not [f for f in report.findings if f.severity.value == "error"]


def test_structlogs_key_value_records_are_read_with_their_rank_and_traceback():
    line = ("timestamp='2026-11-28T06:01:41.518712Z' level='error' event='training failed' rank=2 step=12 "
            "exception='Traceback (most recent call last):\\n  File \"x.py\", line 3, in f\\n"
            "RuntimeError: Timed out waiting 20000ms for recv operation to complete'")
    fields, text = decode_logfmt(line)
    assert fields["rank"] == 2
    assert text == "RuntimeError: Timed out waiting 20000ms for recv operation to complete"


def test_three_ranks_timed_out_in_structlog_and_in_pythons_copy_are_three():
    # console.out:33-35 (structlog's copies, rank=2/0/1) and console.err:15/30/45 ([rank2]/[rank0]/[rank1]):
    # one timeout each of ranks 0-2; rank 3 never reported
    report = analyze([str(RUNS / "t165_hang_r3_w4_kv_split")], jobs=1)
    mn3 = _rule(report, "MN3")
    assert mn3.summary.startswith("3 ranks (0-2) waited 20 s")
    assert report.verdict["ranks"] == [3]


def test_a_level_padded_to_eight_columns_is_still_an_error_record():
    # logs/rank2.log.gz:122 "... ERROR    trainer pid=21046 shard-00002.bin: checksum mismatch ...; aborting"
    report = analyze([str(RUNS / "t164_exit1_r2_w3_zstdpipe_tee")], jobs=1)
    rk1 = _rule(report, "RK1")
    assert rk1.ranks == [2]
    assert "checksum mismatch at record 967" in rk1.summary
