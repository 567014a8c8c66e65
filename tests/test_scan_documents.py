"""Documents found by the scan (analysis.scan_documents) against documents found first
(analysis._flight_recorder, then scan_files): the same events, logs and skipped files, in the same
order, whether the scan runs in one process or in a pool.

The folder mixes what a job leaves: flight-recorder dumps named as torch names them and renamed,
an ncclras JSON report, a text log named like a dump, a file that merely starts like a pickle, a
JSON-lines log that is no RAS report, and the launcher's log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nccl_doctor import analysis
from nccl_doctor.discover import discover

ROOT = Path(__file__).resolve().parent.parent
DIES = ROOT / "fixtures" / "flightrec" / "rank_dies"
RAS = ROOT / "fixtures" / "formats" / "ras" / "ras-2.29-missing-and-behind.json"
SCAN_FIELDS = ("path", "lines", "bytes", "parsed", "last_lines", "modes", "skipped", "issue", "quiet")


@pytest.fixture
def job_folder(tmp_path: Path) -> Path:
    shutil.copy(DIES / "torchrun.log", tmp_path / "torchrun.log")
    shutil.copy(DIES / "nccl_trace_rank_0", tmp_path / "nccl_trace_rank_0")  # named as torch names it
    shutil.copy(DIES / "nccl_trace_rank_2", tmp_path / "rank2.dump")  # renamed: found by its pickle header
    shutil.copy(RAS, tmp_path / "ras-report.txt")  # found by its keys, whatever the name
    # named like a dump, but a text log: scanned as a log
    (tmp_path / "nccl_trace_rank_7.log").write_bytes((DIES / "torchrun.log").read_bytes()[:2000])
    # starts like a pickle and is none: the scanner says what it is (binary)
    (tmp_path / "garbage.bin").write_bytes(b"\x80\x04" + bytes(range(256)) * 4)
    # a JSON-lines log that is no RAS report
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.5}\n{"step": 2, "loss": 2.4}\n')
    return tmp_path


def _old(files, jobs):
    events, logs, skipped = analysis._flight_recorder(files)
    return events, analysis.scan_files(logs, jobs=jobs), skipped


@pytest.mark.parametrize("pool", [False, True])
def test_documents_found_by_the_scan_are_those_found_first(job_folder, monkeypatch, pool):
    if pool:
        monkeypatch.setattr(analysis, "PARALLEL_MIN_BYTES", 0)
    files, _ = discover([str(job_folder)])
    jobs = 2 if pool else 1
    old_events, old_scans, old_skipped = _old(files, jobs)
    new_events, new_scans, new_skipped = analysis.scan_documents(files, jobs=jobs)

    assert [e.to_dict() for e in new_events] == [e.to_dict() for e in old_events]
    assert [k.to_dict() for k in new_skipped] == [k.to_dict() for k in old_skipped]
    assert [[getattr(s, n) for n in SCAN_FIELDS] for s in new_scans] == \
        [[getattr(s, n) for n in SCAN_FIELDS] for s in old_scans]
    assert [[e.to_dict() for e in s.events] for s in new_scans] == [[e.to_dict() for e in s.events] for s in old_scans]

    # What the files are, by hand: the two dumps and the RAS report are documents, the rest logs.
    scanned = sorted(Path(s.path).name for s in new_scans)
    assert scanned == ["garbage.bin", "metrics.jsonl", "nccl_trace_rank_7.log", "torchrun.log"]
    assert not any(s.document for s in new_scans)
    assert next(s for s in new_scans if s.path.endswith("garbage.bin")).skipped == "binary data, not a text log"
    dumped = {e.rank for e in new_events if e.kind.startswith("fr_")}
    assert dumped == {0, 2}
    assert any(e.kind.startswith("ras_") and e.file.endswith("ras-report.txt") for e in new_events)


def test_a_compressed_pickle_is_a_log_to_both(tmp_path):
    """Documents are told by their raw first bytes, as _flight_recorder reads them: a gzipped
    pickle starts with gzip's magic, so both paths hand it to the scanner (binary once unpacked)."""
    import gzip

    (tmp_path / "d.gz").write_bytes(gzip.compress((DIES / "nccl_trace_rank_2").read_bytes()))
    files, _ = discover([str(tmp_path)])
    events, scans, skipped = analysis.scan_documents(files, jobs=1)
    assert events == [] and skipped == [] and [Path(s.path).name for s in scans] == ["d.gz"]
    assert scans[0].skipped == _old(files, 1)[1][0].skipped
