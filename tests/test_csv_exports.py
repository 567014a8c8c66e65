"""Log records exported from a search UI as CSV (nccl_doctor/csvexport.py), read from the real Kibana
exports of t153 (fixtures/realruns/train153.py, collect153.py): the rows are read as the lines their pods
wrote, oldest first, and evidence quotes the file's own line numbers (read by hand in export.csv)."""

from __future__ import annotations

import json
from pathlib import Path

from nccl_doctor import analyze
from nccl_doctor.csvexport import export_header, export_records, iso_time

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def test_an_export_is_told_by_its_header():
    assert export_header(b"@timestamp,kubernetes.pod_name,stream,message\n\"Nov 28, 2026 @ 04:32:11.972\",a,b,c\n")
    assert export_header(b"_time,host,source,_raw\n2026-11-28T04:32:11.972+00:00,gpu1,/var/log/x,hello\n")
    # a metrics file (no message column), a log line with commas: read as they are
    assert export_header(b"step,loss,lr,time\n1,2.3,0.1,0.2\n") is None
    assert export_header(b"2026-11-28 04:32:11 INFO step 1, loss 2.3, lr 0.1\n") is None


def test_kibanas_display_time_is_read_as_iso():
    assert iso_time("Nov 28, 2026 @ 04:32:11.972") == "2026-11-28T04:32:11.972"
    assert iso_time("2026-11-28T04:32:11.972Z") == "2026-11-28T04:32:11.972Z"


def test_rows_newest_first_are_read_oldest_first_each_traceback_in_order():
    data = (b'@timestamp,pod,message\n'
            b'"Nov 28, 2026 @ 04:33:10.169",w1,"[rank2]: Traceback (most recent call last):\n[rank2]: IndexError: x"\n'
            b'"Nov 28, 2026 @ 04:33:09.001",w1,[rank2]: step 9\n')
    text, line_map = export_records(data)
    records = [json.loads(ln) for ln in text.decode().splitlines()]
    assert [r["message"] for r in records] == ["[rank2]: step 9", "[rank2]: Traceback (most recent call last):",
                                                "[rank2]: IndexError: x"]
    assert line_map == [4, 2, 3]  # the file's own lines
    assert records[0]["pod"] == "w1" and records[0]["timestamp"] == "2026-11-28T04:33:09.001"


def test_a_kibana_export_names_the_rank_that_raised_and_quotes_its_line():
    # export.csv:37 (inside a row that holds rank 0's whole traceback, newest first)
    report = analyze([str(RUNS / "t153_raise_r0_w3_kibana_csv_multiline")], jobs=1)
    assert report.verdict["ranks"] == [0]
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert any(e.file.endswith("export.csv") and e.line == 37 and "IndexError: Target 9" in e.text
               for e in rk1.evidence)
    assert any("CSV export of log records" in n for n in report.notes)


def test_a_kibana_export_of_one_row_per_line():
    # export.csv:41 "[rank2]: IndexError: Target 9 is out of bounds." from the worker-1 pod
    report = analyze([str(RUNS / "t153_raise_r2_w4_kibana_csv_rows")], jobs=1)
    assert report.verdict["ranks"] == [2]
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert any(e.line == 41 for e in rk1.evidence)
