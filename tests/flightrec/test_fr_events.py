"""Dump entries become job events whose fields the job model and the rules already understand."""

from __future__ import annotations

import pickle

import pytest
from fr_builders import STEP, as_json, build

from nccl_doctor.flightrec import events as fr_events
from nccl_doctor.flightrec.events import KINDS, dump_events, op_of, op_type, user_frame
from nccl_doctor.flightrec.loader import load_dump
from nccl_doctor.model import pg_key


def _events(tmp_path, dump, name="nccl_trace_rank_2"):
    p = tmp_path / name
    p.write_bytes(dump if isinstance(dump, bytes) else pickle.dumps(dump, protocol=2))
    return dump_events(load_dump(str(p)))


def test_dump_pg_and_entry_events(tmp_path):
    evs = _events(tmp_path, build("2.10", 2, STEP * 3 + [("all_reduce", [[1024]], "Float")]))
    assert {e.kind for e in evs} <= set(KINDS)
    assert all(e.rank == 2 and e.file.endswith("nccl_trace_rank_2") for e in evs)
    dump = evs[0]
    assert dump.kind == "fr_dump" and dump.line == 0
    assert dump.get("version") == "2.10" and dump.get("world_size") == 4 and dump.get("backend") == "nccl"
    assert dump.get("entries") == dump.get("entries_kept") == 10
    pg = next(e for e in evs if e.kind == "fr_pg")
    assert pg_key(pg) == "default"
    assert (pg.get("enqueued"), pg.get("completed"), pg.get("last_seq"), pg.get("last_op")) == (10, 9, 10, "all_reduce")
    assert pg.get("ranks") == [0, 1, 2, 3] and pg.get("pg_rank") == 2 and pg.get("status_units") == "collective"
    colls = [e for e in evs if e.kind == "fr_collective"]
    assert [e.get("seq") for e in colls] == list(range(1, 11))
    assert [e.line for e in colls] == list(range(1, 11))  # position of the entry in the dump
    last = colls[-1]
    assert last.get("is_last") and last.get("completed") is False and colls[0].get("completed") is True
    assert (last.get("op"), last.get("op_type"), last.get("numel_in"), last.get("input_dtypes")) == \
        ("all_reduce", "ALLREDUCE", 1024, ["Float"])
    assert last.get("frame") == "train.py:19 (train_step)" and last.get("timeout_ms") == 600000
    assert last.ts == pytest.approx(1_724_779_239.936784, abs=1e-3)
    assert "#10 nccl:all_reduce" in last.text and "not completed" in last.text


def test_p2p_entries(tmp_path):
    evs = _events(tmp_path, build("2.4", 2, [("send", 3), ("recv", 1), ("all_reduce", [[4]], "Float")]))
    p2p = [e for e in evs if e.kind == "fr_p2p"]
    assert [(e.get("direction"), e.get("peer"), e.get("seq")) for e in p2p] == [("send", 3, 1), ("recv", 1, 2)]
    assert [e.get("seq") for e in evs if e.kind == "fr_collective"] == [1]


def test_gloo_status_counts_ops_and_is_translated_to_collective_seq(tmp_path):
    """gloo's pg_status counts every op (its op_id); collective_seq_id skips p2p ops."""
    dump = build("2.10", 0, [("all_reduce", [[4]], "Float"), ("send", 1), ("all_reduce", [[4]], "Float")],
                 pending_last=False, backend="gloo")
    for e in dump["entries"]:
        e["state"], e["time_discovered_completed_ns"] = "scheduled", None  # gloo never updates states
    dump["pg_status"] = {"0": {"last_enqueued_collective": 3, "last_started_collective": -1,
                               "last_completed_collective": 2}}
    evs = _events(tmp_path, dump, "nccl_trace_rank_0")
    pg = next(e for e in evs if e.kind == "fr_pg")
    assert (pg.get("status_units"), pg.get("enqueued"), pg.get("completed")) == ("op", 2, 1)
    colls = [e for e in evs if e.kind == "fr_collective"]
    assert [e.get("completed") for e in colls] == [None, False]  # the last counted one may have failed


def test_newest_entries_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(fr_events, "MAX_ENTRIES_PER_PG", 4)
    evs = _events(tmp_path, build("2.10", 1, STEP * 3))
    assert [e.get("seq") for e in evs if e.kind == "fr_collective"] == [6, 7, 8, 9]
    assert evs[0].get("entries") == 9 and evs[0].get("entries_kept") == 4
    assert next(e for e in evs if e.kind == "fr_pg").get("last_seq") == 9


def test_json_and_pickle_give_the_same_events(tmp_path):
    dump = build("2.10", 2, STEP)
    a = _events(tmp_path, dump)
    b = _events(tmp_path, as_json(dump), "nccl_trace_rank_2.json")
    strip = {"frame"}
    assert [(e.kind, {k: v for k, v in e.fields.items() if k not in strip}) for e in a[1:]] == \
        [(e.kind, {k: v for k, v in e.fields.items() if k not in strip}) for e in b[1:]]


@pytest.mark.parametrize("name, op, backend, kind", [
    ("nccl:all_reduce", "all_reduce", "nccl", "ALLREDUCE"), ("gloo:broadcast", "broadcast", "gloo", "BROADCAST"),
    ("nccl:_allgather_base", "_allgather_base", "nccl", "_ALLGATHER_BASE"), ("nccl:send 0->1", "send", "nccl", "SEND"),
    ("nccl:recv 1<-0", "recv", "nccl", "RECV"), ("all_reduce", "all_reduce", None, "ALLREDUCE"),
    ("nccl:foo_bar", "foo_bar", "nccl", "FOO_BAR"),
])
def test_op_names(name, op, backend, kind):
    assert op_of(name) == (op, backend)
    assert op_type(op) == kind


def test_user_frame_skips_torch():
    frames = [{"name": "all_reduce", "filename": "/v/site-packages/torch/distributed/distributed_c10d.py", "line": 1},
              {"name": "wrapper", "filename": "/v/site-packages/torch/distributed/c10d_logger.py", "line": 2},
              {"name": "step", "filename": "/job/model/train.py", "line": 42}]
    assert user_frame(frames) == "train.py:42 (step)"
    assert user_frame(frames[:2]) is None
