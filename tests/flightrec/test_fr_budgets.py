"""Dumps are data with budgets: a few hostile bytes cost bounded memory and time, are skipped or read
in part with the reason said, and never end the run (fr_bombs.py builds them)."""

from __future__ import annotations

import json
import pickle
import re
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import fr_bombs
import pytest
from fr_builders import STEP, build

from nccl_doctor.flightrec.decode import MAX_TUPLE_DEPTH
from nccl_doctor.flightrec.loader import MAX_ENTRIES_PER_PG, DumpError, load_dump

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "fixtures" / "real" / "019_mn3_timeout.log"
#: Peak of Python allocations while loading one hostile dump (tracemalloc; the process limit in the
#: subprocess test below is the real guard).
PEAK_BYTES = 128 << 20

#: name -> (bytes, what happens: "skip" + reason pattern, or "partial" + reason pattern)
BOMBS = {
    "nccl_trace_rank_1.gz": (fr_bombs.shared_reference_bomb(), "skip",
                             r"too large: reading it would look at more than 4,000,000 values \(shared references"),
    "nccl_trace_rank_2.json": (fr_bombs.huge_number(4301), "partial", r"1 value of the wrong type or out of range"),
    "nccl_trace_rank_3.pkl": (fr_bombs.huge_number(4301, encoding="pickle"), "skip",
                              r"too large: a number of 4,301 digits"),
    "nccl_trace_rank_4": (fr_bombs.far_timestamp(10**32), "partial", r"2 values of the wrong type or out of range"),
    "nccl_trace_rank_5.gz": (fr_bombs.deep_frame_name(), "partial", r"1 value of the wrong type or out of range"),
    "nccl_trace_rank_6.gz": (fr_bombs.deep_tuple_key(), "skip", rf"too deep: tuples nested more than {MAX_TUPLE_DEPTH}"),
    "nccl_trace_rank_7": (fr_bombs.memo_bomb(), "skip", r"memo index 2,147,483,647"),
    "nccl_trace_rank_8.json.gz": (fr_bombs.many_entries_json(20_000_000), "skip",
                                  r"too large: the JSON dump holds about 40,000,00\d values"),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_each_bomb_is_refused_or_read_in_part_within_a_memory_bound(tmp_path, name):
    data, outcome, reason = BOMBS[name]
    path = tmp_path / name
    path.write_bytes(data)
    tracemalloc.start()
    try:
        if outcome == "skip":
            with pytest.raises(DumpError, match=reason):
                load_dump(str(path))
        else:
            d = load_dump(str(path))
            assert any(re.search(reason, p) for p in d.partial), d.partial
            assert [e["profiling_name"] for e in d.entries] == ["nccl:all_reduce"]
            assert all(e["time_created_ns"] is None for e in d.entries)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"{peak >> 20} MiB"


def test_shared_entries_are_read_once_per_group_not_once_per_reference(tmp_path):
    """100,000 references to one small entry: the newest of its group are read, the rest counted."""
    path = tmp_path / "nccl_trace_rank_0.gz"
    path.write_bytes(fr_bombs.shared_reference_bomb(entries=100_000, shapes=2, dims=2))
    d = load_dump(str(path))
    assert d.total_entries == 100_000 and len(d.entries) == MAX_ENTRIES_PER_PG
    assert d.pg_entries == {0: 100_000}
    assert d.entries[-1]["input_sizes"] == [[1, 1], [1, 1]] and d.entries[-1]["pos"] == 99_999


def test_a_huge_world_claim_keeps_its_size_not_its_list(tmp_path):
    path = tmp_path / "nccl_trace_rank_8.json"
    path.write_bytes(fr_bombs.long_ranks_json(100_000))
    d = load_dump(str(path))
    assert d.pg_config["0"]["size"] == 100_000 and d.pg_config["0"]["pg_rank"] == 8
    assert d.pg_config["0"]["ranks"] is None  # too many to list
    assert d.partial == []


def test_wrong_types_are_ignored_and_counted_never_turned_into_text(tmp_path):
    dump = build("2.10", 0, STEP)
    e = dump["entries"][0]
    e["profiling_name"] = ["nccl:all_reduce"]  # a list where a name should be
    e["frames"] = [{"name": {"deep": [1, [2, [3]]]}, "filename": 7, "line": "x"}]
    e["input_sizes"] = [[1, 2 ** 70, "3"], "nope"]
    e["duration_ms"] = float("nan")
    dump["version"] = 10 ** 30
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(pickle.dumps(dump, protocol=2))
    d = load_dump(str(path))
    first = d.entries[0]
    assert first["profiling_name"] == "" and first["frames"] == [{"name": "", "filename": "", "line": None}]
    assert first["input_sizes"] == [[1]] and first["duration_ms"] is None and d.version == "0"
    # profiling_name, name, filename, line, 2**70, "3", duration, version: 8 values ignored
    assert d.partial == ["8 values of the wrong type or out of range (numbers beyond 64 bits, timestamps outside "
                         "2000-2100, durations not finite) ignored"]


def _limited(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def _analyze(folder: Path) -> tuple[int, dict, str]:
    r = subprocess.run([sys.executable, "-m", "nccl_doctor", "analyze", "--format", "json", str(folder)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, preexec_fn=_limited(2 << 30))
    return r.returncode, json.loads(r.stdout) if r.stdout else {}, r.stderr


def test_bombs_beside_a_good_log_under_2_gb(tmp_path):
    """Every bomb at once beside a good log, in a process limited to 2 GB of address space: the run
    ends normally, the good log's findings are all there, every dump is listed with its reason."""
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "train.log").write_bytes(GOOD.read_bytes())
    status, expected, err = _analyze(alone)
    assert status == 1 and expected["findings"], err
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "train.log").write_bytes(GOOD.read_bytes())
    for name, (data, _, _) in BOMBS.items():
        (mixed / name).write_bytes(data)
    status, got, err = _analyze(mixed)
    assert status == 1, err
    assert "Traceback" not in err
    assert {(f["rule"], f["severity"]) for f in expected["findings"]} <= {(f["rule"], f["severity"]) for f in got["findings"]}
    reasons = {Path(s["path"]).name: s["reason"] for s in got["inputs"]["skipped"]}
    for name, (_, outcome, reason) in BOMBS.items():
        want = "flight-recorder dump not read: " if outcome == "skip" else "flight-recorder dump partly read: "
        assert reasons[name].startswith(want), (name, reasons.get(name))
        assert re.search(reason, reasons[name]), (name, reasons[name])
