"""Reading dumps of every format version (pickle and JSON), and clear reasons for unreadable ones."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import pytest
from fr_builders import STEP, VERSIONS, as_json, build

from nccl_doctor.flightrec.loader import DumpError, is_dump_name, load_dump, rank_from_name

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "flightrec"
OPS = STEP + [("send", 1), ("all_reduce", [[1024]], "BFloat16")]


def write(tmp_path: Path, obj, name: str = "nccl_trace_rank_3", protocol: int = 2) -> Path:
    p = tmp_path / name
    p.write_bytes(obj if isinstance(obj, bytes) else pickle.dumps(obj, protocol=protocol))
    return p


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_normalises_to_the_same_entries(tmp_path, version):
    d = load_dump(str(write(tmp_path, build(version, 3, OPS))))
    assert d.rank == 3 and d.encoding == "pickle"
    assert d.version == ("0" if version == "2.2" else version)
    names = [e["profiling_name"] for e in d.entries]
    assert names == ["nccl:all_reduce", "nccl:broadcast", "nccl:all_reduce", "nccl:send 3->1", "nccl:all_reduce"]
    colls = [e for e in d.entries if not e["is_p2p"]]
    p2p = [e for e in d.entries if e["is_p2p"]]
    assert len(p2p) == 1 and p2p[0]["profiling_name"].startswith("nccl:send")
    if version in ("2.2", "1.4"):  # one seq_id counter for every op
        assert [e["collective_seq_id"] for e in colls] == [1, 2, 3, 5]
        assert p2p[0]["p2p_seq_id"] == 4
        assert d.entries[0]["input_dtypes"] == [] and d.entries[0]["pg_guid"] is None
    else:
        assert [e["collective_seq_id"] for e in colls] == [1, 2, 3, 4]
        assert p2p[0]["p2p_seq_id"] == 1
        assert d.entries[-1]["input_dtypes"] == ["BFloat16"]
        assert (d.entries[0]["pg_guid"], d.entries[0]["pg_desc"]) == ("0", "default_pg")
    assert d.entries[0]["input_sizes"] == [[1024]]
    assert d.entries[-1]["state"] == "started" and d.entries[0]["state"] == "completed"
    assert d.entries[0]["time_created_ns"] // 1000 == 1_724_779_239_936_775  # 2.2's microseconds scaled
    assert d.entries[0]["frames"][-1] == {"name": "train_step", "filename": "/job/train.py", "line": 10}
    if version != "2.2":
        assert d.pg_config["0"]["ranks"] == [0, 1, 2, 3]  # the "[0, 1, 2, 3]" string parsed
    if version in ("2.4", "2.9", "2.10"):
        assert d.pg_status == {0: {"enqueued": 4, "started": 4, "completed": 3}}
        assert d.entries[0]["timeout_ms"] == 600000
    else:
        assert d.pg_status == {}
    assert d.comm_lib_version == ("2.21.5" if version in ("2.9", "2.10") else None)
    assert d.backend == "nccl"


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_pickle_protocol(tmp_path, protocol):
    d = load_dump(str(write(tmp_path, build("2.10", 0, STEP), protocol=protocol)))
    assert [e["collective_seq_id"] for e in d.entries] == [1, 2, 3]


def test_json_dump_reads_like_the_pickle(tmp_path):
    dump = build("2.10", 1, OPS)
    pk = load_dump(str(write(tmp_path, dump, "nccl_trace_rank_1")))
    js = load_dump(str(write(tmp_path, as_json(dump), "nccl_trace_rank_1.json")))
    assert js.encoding == "json" and js.rank == 1
    assert js.pg_status == pk.pg_status  # "4" strings become ints
    for a, b in zip(js.entries, pk.entries, strict=True):
        assert a["pg_guid"] == b["pg_guid"] == "0"  # ["0", "default_pg"] list -> same as the tuple
        assert a["time_discovered_started_ns"] is None  # JSON writes 0 for unset
        assert {k: v for k, v in a.items() if k != "frames"} == {k: v for k, v in b.items() if k != "frames"}


def test_compressed_dump(tmp_path):
    p = write(tmp_path, gzip.compress(pickle.dumps(build("2.4", 2, STEP), protocol=2)), "nccl_trace_rank_2.gz")
    assert load_dump(str(p)).rank == 2


def test_real_dump_keys_and_version():
    d = load_dump(str(REAL / "skip_collective" / "nccl_trace_rank_2"))
    assert d.version == "2.10" and d.backend == "gloo"
    assert set(d.keys) == {"version", "pg_config", "comm_lib_version", "pg_status", "entries"}
    assert d.pg_config[""]["ranks"] == [0, 1, 2, 3]  # gloo writes one unnamed config


@pytest.mark.parametrize("name, rank, is_dump", [
    ("nccl_trace_rank_12", 12, True), ("nccl_trace_rank_0.json", 0, True), ("nccl_trace_rank_7.pkl", 7, True),
    ("/tmp/x/nccl_trace_rank_3.gz", 3, True), ("my_fr_5", 5, False), ("rank-3.log", None, False),
    ("nccl_trace_rank_.json", None, False),
])
def test_dump_names(name, rank, is_dump):
    assert is_dump_name(name) is is_dump
    if rank is not None:
        assert rank_from_name(name) == rank


def _reason(path: Path) -> str:
    with pytest.raises(DumpError) as exc:
        load_dump(str(path))
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_unreadable_dumps_say_why_in_one_line(tmp_path):
    good = (REAL / "skip_collective" / "nccl_trace_rank_0").read_bytes()
    assert "empty file" in _reason(write(tmp_path, b"", "nccl_trace_rank_0"))
    for cut in (1, 2, 50, len(good) // 2, len(good) - 1):
        assert _reason(write(tmp_path, good[:cut], "nccl_trace_rank_1")).startswith("truncated")
    zeros = good[:300] + b"\x00" * 20 + good[320:]
    assert "corrupt pickle" in _reason(write(tmp_path, zeros, "nccl_trace_rank_2"))
    flipped = bytearray(good)
    flipped[500] = 0xFF
    assert "corrupt pickle" in _reason(write(tmp_path, bytes(flipped), "nccl_trace_rank_2"))
    assert "neither a pickle nor JSON" in _reason(write(tmp_path, b"\x00\x01\x02binary", "nccl_trace_rank_3"))
    assert "not a flight-recorder dump" in _reason(write(tmp_path, 42, "nccl_trace_rank_4"))
    assert "no list of entries" in _reason(write(tmp_path, {"version": "2.10"}, "nccl_trace_rank_5"))
    assert "truncated JSON" in _reason(write(tmp_path, as_json(build("2.10", 6, STEP))[:-40], "nccl_trace_rank_6.json"))
    assert "cannot tell the rank" in _reason(write(tmp_path, build("2.10", 0, STEP), "trace.pkl"))
    gz = gzip.compress(good)[:-30]
    assert "read failed" in _reason(write(tmp_path, gz, "nccl_trace_rank_7.gz"))
