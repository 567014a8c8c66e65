"""Log records exported from a search UI as CSV (nccl_doctor/csvexport.py), read from the real Kibana
exports of t153 (fixtures/realruns/train153.py, collect153.py): the rows are read as the lines their pods
wrote, oldest first, and evidence quotes the file's own line numbers (read by hand in export.csv)."""

from __future__ import annotations

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
    # each line as Loki's logcli prints it: the record's time and its writer before what it wrote
    assert text.decode().splitlines() == [
        '2026-11-28T04:33:09.001000Z {host="w1"} [rank2]: step 9',
        '2026-11-28T04:33:10.169000Z {host="w1"} [rank2]: Traceback (most recent call last):',
        '2026-11-28T04:33:10.169000Z {host="w1"} [rank2]: IndexError: x']
    assert line_map == [4, 2, 3]  # the file's own lines


def test_a_kubernetes_log_stream_names_its_pod_and_each_pods_rows_stay_together():
    data = (b'@timestamp,@logStream,@message\n'
            b'2026-11-28 06:29:18.244,fluentbit-kube.var.log.containers.job-worker-0_ml_pytorch-58f1.log,b1\n'
            b'2026-11-28 06:29:18.244,fluentbit-kube.var.log.containers.job-master-0_ml_pytorch-c7a2.log,a1\n'
            b'2026-11-28 06:29:18.244,fluentbit-kube.var.log.containers.job-worker-0_ml_pytorch-58f1.log,b2\n')
    text, line_map = export_records(data)
    assert [ln.split(" ", 1)[1] for ln in text.decode().splitlines()] == [
        '{pod="job-worker-0"} b1', '{pod="job-worker-0"} b2', '{pod="job-master-0"} a1']
    assert line_map == [2, 4, 3]


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


def test_cloudwatch_filter_log_events_json_is_read_as_its_pods_lines():
    # filter-log-events.json: rank 1's "[rank1]: KeyError: 'input_ids'" in master-0's Container Insights record
    report = analyze([str(RUNS / "t166_keyerror_r1_2x2_cw_events_json")], jobs=1)
    assert report.verdict["ranks"] == [1] and report.verdict["hosts"] == ["llm-sft-9-master-0"]
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert any(e.file.endswith("filter-log-events.json") and "KeyError: 'input_ids'" in e.text for e in rk1.evidence)


def test_a_splunk_json_export_of_a_healthy_job_has_no_error():
    report = analyze([str(RUNS / "t166_healthy_2x2_splunk_json")], jobs=1)
    assert not [f for f in report.findings if f.severity.value == "error"]
    assert report.to_dict()["inputs"]["lines"] > 0
