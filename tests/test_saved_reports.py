"""What operators save beside the logs: ncclras reports (text and JSON), the Flight Recorder analyzer's
output, torch's own checks, RCCL lines and terminal-wrapped consoles (fixtures/formats/).

Expected values are read off the fixture text (each folder's SOURCES.json says where a fixture comes from): the report's
own rank, pid and node lines, the analyzer's `missing ranks` / `Culprit rank`, the injected fault.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nccl_doctor import analyze, rasjson
from nccl_doctor.evidence import frtrace, ras
from nccl_doctor.evidence.statements import named_by_torch
from nccl_doctor.evidence.torchchecks import desync_ranks
from nccl_doctor.formats import load_formats
from nccl_doctor.incremental import parse_lines
from nccl_doctor.wrapped import detect_width

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "formats"
#: Lines of a RAS report no pattern needs: blank lines, section underlines, the job summary's numbers.
_LAYOUT = re.compile(r"^[\s=\d]*$")


def _job(*paths: Path):
    return analyze([str(p) for p in paths], jobs=1).job


# ---- every fixture has a sidecar that says where it comes from --------------------------------------


def _fixtures() -> list[Path]:
    return sorted(p for p in FIX.rglob("*") if p.is_file() and p.suffix in (".log", ".json") and p.name != "SOURCES.json")


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: str(p.relative_to(FIX)))
def test_every_fixture_says_where_it_comes_from(path: Path):
    side = path.parent / "SOURCES.json"  # the folder's sidecar: an entry per file, or "*" for all
    about = json.loads(side.read_text(encoding="utf-8")) if side.is_file() else {}
    entry = about.get(path.name) or about.get("*")
    assert entry and entry.get("source"), f"{path} is not described in {side}"


# ---- ncclras text: every line of every version's report is read --------------------------------------


@pytest.mark.parametrize("path", sorted((FIX / "ras").glob("*.log")), ids=lambda p: p.name)
def test_every_ras_report_line_is_recognised(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    events = parse_lines(lines, source=path.name)
    read = {e.line for e in events}
    missed = [(i, ln) for i, ln in enumerate(lines, 1) if i not in read and not _LAYOUT.match(ln)]
    assert not missed, missed


def test_ras_report_structure_2_26():
    job = _job(FIX / "ras" / "ras-2.26-incomplete.log")
    (rep,) = ras.reports(job)
    assert rep.version == "2.26.5"
    assert [(b.kind, b.group) for b in rep.blocks] == [("INCOMPLETE", None), ("INCOMPLETE", 0), ("INCOMPLETE", 2),
                                                        ("TIMEOUT", None)]
    assert [int(e.get("size")) for e in rep.comms] == [32, 8, 8]
    assert rep.spans_job(0) and not rep.spans_job(2)
    (gone,) = ras.missing(job)
    assert (gone.rank, gone.pid, gone.node) == (11, 48213, "10.1.2.17")


def test_ras_ranks_under_a_grouped_line_belong_to_it():
    (rep,) = ras.reports(_job(FIX / "ras" / "ras-2.27-opcounts.log"))
    (block,) = rep.blocks
    assert [(c.what, c.coll) for c in block.checks] == [("opcounts", "AllReduce"), ("opcounts", "ReduceScatter")]
    first = block.checks[0]
    assert [(g.n, g.count, [r.rank for r in g.ranks]) for g in first.groups] == [(30, 5121, []), (2, 5120, [4, 27])]


def test_ras_behind_is_below_the_majority_and_says_by_how_much():
    job = _job(FIX / "ras" / "ras-2.27-opcounts.log")
    behind = ras.behind(job)
    assert sorted({b.rank for b in behind}) == [4, 27]
    assert {(b.count, b.majority) for b in behind} == {(2559, 2560)}  # the later block, ReduceScatter
    # off by one with no hang in sight, in one snapshot: the report may have raced the collectives
    assert not any(b.confident for b in behind)


def test_ras_dead_processes_resolve_through_the_communicator_block():
    named = ras.missing(_job(FIX / "ras" / "ras-2.27-dead.log"))
    assert sorted((n.rank, n.pid) for n in named) == [(8, 51877), (15, 51884)]
    assert all("dead" in n.reason for n in named)


def test_ras_healthy_report():
    job = _job(FIX / "ras" / "ras-2.28-healthy.log")
    assert ras.healthy(job) is not None and not ras.missing(job) and not ras.behind(job)
    assert ras.symmetric_hang(job) == ""  # no timeout beside it: nothing to say


def test_ras_outlier_node_and_no_data():
    (rep,) = ras.reports(_job(FIX / "ras" / "ras-2.25-outlier.log"))
    assert rep.no_data and not rep.healthy
    node = next(e for e in rep.events if e.get("what") == "outlier_node")
    assert node.get("node") == "10.1.2.20"


def test_ras_monitor_dead_peer():
    (gone,) = ras.missing(_job(FIX / "ras" / "ras-2.29-monitor.log"))
    assert (gone.pid, gone.node, gone.rank) == (48213, "10.1.2.17", None)


# ---- ncclras JSON (parsers/ras_json.toml samples) ----------------------------------------------------


@pytest.mark.parametrize("sample", rasjson.spec()["sample"], ids=lambda s: s["name"])
def test_ras_json_samples(sample: dict):
    events = sorted(rasjson.read("sample.json", sample["document"].encode()), key=lambda e: e.line)
    want = [dict(w) for w in sample["events"]]
    got = iter(events)
    for w in want:  # each wanted event, in order, with at least these fields
        kind = w.pop("kind")
        assert any(e.kind == kind and all(e.get(k) == v for k, v in w.items()) for e in got), (kind, w)


def test_ras_json_is_found_among_json_files(tmp_path: Path):
    (tmp_path / "ras.json").write_bytes((FIX / "ras" / "ras-2.29-missing-and-behind.json").read_bytes())
    (tmp_path / "meta.json").write_text('{"nccl_version": null, "notes": "a sidecar"}', encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert {f.rule for f in report.findings} >= {"RK2", "RK3"}
    assert any(s["path"].endswith("meta.json") for s in report.inputs["skipped"])


def test_ras_json_that_is_not_json_is_skipped_with_a_reason(tmp_path: Path):
    (tmp_path / "ras.json").write_text('{"communicators": [ {"hash": ', encoding="utf-8")
    (tmp_path / "rank-0.log").write_text("hello\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    (skip,) = [s for s in report.inputs["skipped"] if s["path"].endswith("ras.json")]
    assert "not valid JSON" in skip["reason"]


# ---- the Flight Recorder analyzer ---------------------------------------------------------------------


def test_analyzer_blocks_and_the_first_mismatch_of_a_group():
    job = _job(FIX / "frtrace" / "rank_stalls.frtrace.log")
    blocks = frtrace.blocks(job)
    assert [(b.what, b.seq, b.missing) for b in blocks] == [("not_joining", 11, [2]), ("not_joining", 12, [0, 2])]
    assert [b.seq for b in frtrace.first_blocks(job)] == [11]
    assert [m.ranks for m in frtrace.missing(job)] == [[2]]


def test_analyzer_culprits():
    (c,) = frtrace.culprits(_job(FIX / "frtrace" / "skip_collective.frtrace.log"))
    assert c.ranks == [2] and c.majority
    (odd,) = frtrace.culprits(_job(FIX / "frtrace" / "constructed-2.14-first-rank-odd.frtrace.log"))
    assert odd.ranks == [0] and odd.majority


def test_analyzer_missing_dumps():
    for name in ("rank_dies.frtrace.log", "rank_dies-allow-incomplete.frtrace.log"):
        (m,) = frtrace.missing(_job(FIX / "frtrace" / name))
        assert m.ranks == [1] and m.confidence == "medium"


def test_analyzer_traceback_is_not_a_failure_of_the_job():
    report = analyze([str(FIX / "frtrace" / "rank_dies.frtrace.log")], jobs=1)
    assert "RK1" not in {f.rule for f in report.findings}


# ---- torch's own statements (real torch 2.13 output) --------------------------------------------------


def test_monitored_barrier_names_the_ranks_that_did_not_arrive():
    gloo = FIX / "torch" / "torch-2.13-gloo"
    assert [s.ranks for s in named_by_torch(_job(gloo / "mbarrier.log"))] == [[2]]
    assert sorted({r for s in named_by_torch(_job(gloo / "mbarrier_all.log")) for r in s.ranks}) == [1, 2]


def test_desync_rank_lists():
    events = parse_lines(["\t     [3, 7] finished collective #5120, but didn't join collective #5121 (count from 1)",
                          "\t - To our best knowledge, ranks [1] are the lagging ranks that caused this timeout."])
    assert [desync_ranks(e) for e in events] == [[3, 7], [1]]


# ---- terminal wrapping --------------------------------------------------------------------------------


def test_width_is_found_only_where_a_cut_record_joins_back():
    formats = load_formats()

    def strip(text: str) -> tuple[dict, str]:
        return {}, text

    record = ("[E0304 11:20:07.512395120 ProcessGroupNCCL.cpp:2410] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure "
              "detected by watchdog at work sequence id: 5121 PG status: last enqueued work: 5121, last completed work: 5120")
    assert detect_width([record[:90], record[90:180], record[180:], "short"], strip, formats.match) == 90
    assert detect_width(["x" * 90, "y" * 10], strip, formats.match, small=False) is None  # nothing joins
    # a whole record followed by a print: not a cut; a long print followed by one: a cut, in a small file only
    assert detect_width([record, "> initializing torch distributed ..."], strip, formats.match) is None
    assert detect_width(["p" * 90, "> initializing torch distributed ...", "x"], strip, formats.match) == 90
    assert detect_width(["p" * 90, "> initializing torch distributed ...", "x"], strip, formats.match, small=False) is None
    assert detect_width([record[i:i + 40] for i in range(0, len(record), 40)], strip, formats.match) is None  # narrow


def _records(events) -> list[tuple]:
    return sorted((e.kind, tuple(sorted((k, v) for k, v in e.fields.items() if k not in ("grank", "frac")))) for e in events)


def test_wrapped_console_reads_as_the_unwrapped_logs():
    """The console is the four per-rank logs, one after the other, cut at 120 columns: the same records."""
    wrapped = parse_lines((FIX / "wrapped" / "torchrun-console-120.log").read_text().splitlines())
    whole = [e for r in range(4) for e in parse_lines(
        (FIX / "torch" / "torch-2.14-desync" / f"rank-{r}.log").read_text().splitlines())]
    assert _records(wrapped) == _records(whole)
    assert any(e.kind == "torch_wd_timeout" and e.get("seq") == 5121 and e.get("ran_ms") for e in wrapped)


def test_a_long_line_that_is_a_record_is_not_joined():
    """The longest line is followed by more text, but it is a whole record: the next line stays apart."""
    record = ("[E0304 11:20:07.512330418 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 1] Process "
              "group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered")
    events = parse_lines([record, "CUDA kernel errors might be asynchronously reported at some other API call"])
    (ev,) = [e for e in events if e.kind == "torch_wd_exception"]
    assert ev.line == 1 and ev.get("exc") == "CUDA error: an illegal memory access was encountered"


def test_wrapped_lines_with_a_launcher_label_on_every_piece():
    rec = ("[W1123 20:47:46.748976827 ProcessGroupGloo.cpp:67] [Rank 0]: Ranks 1, 2 failed to pass monitoredBarrier "
           "in 3000 ms")
    pieces = [rec[i:i + 70] for i in range(0, len(rec), 70)]
    events = parse_lines([f"[rank0]:{p}" for p in pieces])
    (ev,) = [e for e in events if e.kind == "torch_barrier_missing"]
    assert ev.rank == 0 and ev.get("ranks") == "1, 2"


# ---- the one-line verdict says which report named the rank ---------------------------------------------


@pytest.mark.parametrize(("path", "want"), [
    ("ras/ras-2.26-incomplete.log", "rank 11 (10.1.2.17) is missing (ncclras names it) [RK2]"),
    ("ras/ras-2.27-dead.log", "ranks 8, 15 (10.1.2.18) are missing (ncclras names them) [RK2]"),
    ("frtrace/rank_stalls.frtrace.log", "rank 2 is missing (torchfrtrace names it) [RK2]"),
    ("ras/ras-2.27-opcounts.log", "ranks 4, 27 (10.1.2.16, 10.1.2.19) lagged behind [RK3]"),
])
def test_headline_names_the_report(path: str, want: str):
    assert analyze([str(FIX / path)], jobs=1).verdict["headline"] == want


def test_headline_of_a_symmetric_hang(tmp_path: Path):
    timeout = ("[rank{r}]:[E0304 11:20:07.51233041{r} ProcessGroupNCCL.cpp:760] [PG GUID 0(default_pg) Rank {r}] Watchdog "
               "caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
               "Timeout(ms)=600000) ran for 600043 milliseconds before timing out.\n")
    for r in range(2):
        (tmp_path / f"rank-{r}.log").write_text(timeout.format(r=r), encoding="utf-8")
    (tmp_path / "ncclras.txt").write_text((FIX / "ras" / "ras-2.28-healthy.log").read_text(), encoding="utf-8")
    head = analyze([str(tmp_path)], jobs=1).verdict["headline"]
    assert head == "2 ranks timed out in ALLREDUCE #812; a symmetric hang: ncclras saw every rank launch it [MN3]"
    assert "healthy" not in head
