"""Property-based: whatever a Flight Recorder dump (pickle or JSON) or a log line holds — shared
references, huge and negative numbers, NaN, deep nesting, wrong types, chat markup, controls — the
run finishes, the good log beside it keeps all its findings, the dump is read or listed with a
reason, memory stays under a bound, and every face shows the result inert."""

from __future__ import annotations

import json
import pickle
import shutil
import sys
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nccl_doctor
from nccl_doctor.report import to_json, to_markdown, to_text

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "flightrec"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import fr_bombs  # noqa: E402
from test_inert_outputs import assert_inert  # noqa: E402

GOOD = ROOT / "fixtures" / "real" / "019_mn3_timeout.log"
GOOD_RULES = {f.rule for f in nccl_doctor.analyze(str(GOOD)).findings}
#: Peak of Python allocations of one analysis of the good log and one hostile input (tracemalloc).
PEAK_BYTES = 160 << 20
SETTINGS = settings(max_examples=25, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

KEYS = ["profiling_name", "pg_id", "collective_seq_id", "p2p_seq_id", "seq_id", "op_id", "record_id",
        "process_group", "input_sizes", "output_sizes", "input_dtypes", "state", "retired", "is_p2p",
        "time_created_ns", "time_created_us", "time_discovered_completed_ns", "duration_ms", "timeout_ms",
        "thread_name", "frames", "name", "filename", "line", "ranks"]
numbers = st.one_of(st.integers(-(10 ** 30), 10 ** 30), st.integers(-5, 5),
                    st.sampled_from([2 ** 63, -(2 ** 63) - 1, 10 ** 32, 10 ** 400, 1_724_779_239_936_775_119]),
                    st.floats(allow_nan=True, allow_infinity=True))
texts = st.one_of(st.text(max_size=30), st.sampled_from(["nccl:all_reduce", "nccl:send 0->1", "gloo:broadcast",
                                                         "<!channel>", "\u202e\x9b31m\n", "started", "completed"]))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts, st.binary(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
                      max_leaves=30)


@st.composite
def dumps(draw, shared: int) -> object:
    """A dump-shaped object whose values are anything, with shared references (one entry and one
    sizes list used up to ``shared`` times: a pickle writes each once, JSON writes every copy) and
    nesting as deep as pickle writes it."""
    entry = draw(st.dictionaries(st.sampled_from(KEYS), values, max_size=12))
    shape = draw(st.lists(numbers, max_size=8))
    if draw(st.booleans()):
        entry["input_sizes"] = entry["output_sizes"] = [shape] * draw(st.integers(0, shared))
    deep = draw(st.integers(0, 400))
    nested: object = draw(texts)
    for _ in range(deep):
        nested = [nested]
    entry.setdefault("frames", [{"name": nested, "filename": draw(values), "line": draw(numbers)}])
    entries = [entry] * draw(st.integers(0, shared)) + draw(st.lists(values, max_size=4))
    top = {"version": draw(values), "entries": entries, "pg_config": draw(values), "pg_status": draw(values)}
    return entries if draw(st.booleans()) else top


def _run(folder: Path) -> nccl_doctor.Report:
    tracemalloc.start()
    try:
        report = nccl_doctor.analyze(str(folder))
        for face in (to_text(report, verbose=True), to_markdown(report)):
            assert_inert(face)
        json.loads(to_json(report))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"{peak >> 20} MiB"
    assert GOOD_RULES <= {f.rule for f in report.findings}
    return report


def _fresh(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "train.log").write_bytes(GOOD.read_bytes())
    return folder


def _accounted(report: nccl_doctor.Report, name: str) -> bool:
    """The dump was read (its events are in the job) or is listed as skipped or partly read."""
    read = any(e.file.endswith(name) for e in report.job.events if e.kind == "fr_dump")
    listed = any(s["path"].endswith(name) for s in report.inputs["skipped"])
    return read or listed


@SETTINGS
@given(dumps(shared=1000), st.integers(0, 5))
def test_any_pickled_dump_beside_a_good_log(tmp_path, obj, protocol):
    folder = _fresh(tmp_path)
    try:
        data = pickle.dumps(obj, protocol=protocol)
    except RecursionError:  # nested deeper than the pickler goes: crafted instead
        data = fr_bombs.deep_frame_name(50_000)
    (folder / "nccl_trace_rank_3").write_bytes(data)
    assert _accounted(_run(folder), "nccl_trace_rank_3")


@SETTINGS
@given(dumps(shared=40))
def test_any_json_dump_beside_a_good_log(tmp_path, obj):
    folder = _fresh(tmp_path)
    (folder / "nccl_trace_rank_3.json").write_bytes(json.dumps(obj, default=lambda b: b.decode("latin-1")).encode())
    assert _accounted(_run(folder), "nccl_trace_rank_3.json")


@settings(SETTINGS, max_examples=12)
@given(st.sampled_from(["shared_reference_bomb", "deep_frame_name", "deep_tuple_key", "memo_bomb", "far_timestamp"]),
       st.integers(1, 50_000))
def test_crafted_dumps_of_any_size(tmp_path, kind, n):
    folder = _fresh(tmp_path)
    build = getattr(fr_bombs, kind)
    data = {"shared_reference_bomb": lambda: build(entries=n, shapes=1 + n % 4096, dims=1 + n % 64),
            "deep_frame_name": lambda: build(depth=n), "deep_tuple_key": lambda: build(depth=n),
            "memo_bomb": lambda: build(index=n * 10_000), "far_timestamp": lambda: build(ns=-n * 10 ** 25)}[kind]()
    (folder / "nccl_trace_rank_5").write_bytes(data)
    assert _accounted(_run(folder), "nccl_trace_rank_5")


LINE_BITS = ["NCCL INFO ncclCommInitRank comm 0x1 rank ", " nranks ", "[Rank ", "] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=", ", OpType=ALLREDUCE", "host-1:12:34 [0] ", "9" * 40, "-1",
             "<!channel>", "\x1b]52;c;aGk=\x07", "\u202e", "\x9b2J", "[bold]", "\r", "\x00", "@here"]


@SETTINGS
@given(st.lists(st.lists(st.one_of(st.sampled_from(LINE_BITS), st.integers(-(10 ** 25), 10 ** 25).map(str),
                                   st.text(max_size=20)), max_size=12).map("".join), min_size=1, max_size=40))
def test_any_log_lines_beside_a_good_log(tmp_path, lines):
    folder = _fresh(tmp_path)
    (folder / "other.log").write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    report = _run(folder)
    assert report.job.ranks_expected is None or report.job.ranks_expected < 10_000_000
