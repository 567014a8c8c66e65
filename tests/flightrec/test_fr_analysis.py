"""What only dumps show: the collective each rank is in, mismatches, lagging ranks, missing dumps."""

from __future__ import annotations

import pickle

import pytest
from fr_builders import STEP, VERSIONS, build, write_job

from nccl_doctor.discover import discover
from nccl_doctor.evidence.dumps import facts_from_events
from nccl_doctor.flightrec import split_dumps

AR = ("all_reduce", [[1024]], "Float")
BC = ("broadcast", [[256]], "Float")


def facts(tmp_path, version="2.10", **kw):
    ops_by_rank = kw.pop("ops")
    write_job(tmp_path / "dumps", version, ops_by_rank, **kw)
    files, _ = discover([str(tmp_path / "dumps")])
    events, logs, skipped = split_dumps(files)
    assert not logs and not skipped
    return facts_from_events(events)


@pytest.mark.parametrize("version", VERSIONS)
def test_skipped_collective_names_the_rank_and_the_collective(tmp_path, version):
    ops = {r: STEP * 3 + [AR] for r in (0, 1, 3)}
    ops[2] = STEP * 3 + [BC]  # rank 2 skipped the gradient all_reduce and went on to the broadcast
    f = facts(tmp_path, version, ops=ops)
    assert f.culprits == [2]
    m = f.mismatches[0]
    assert (m.seq, m.what, m.majority, sorted(m.odd), m.skipped, m.expected_op) == (10, "op", [0, 1, 3], [2], True,
                                                                                  "all_reduce")
    dt = "" if version in ("2.2", "1.4") else " Float"  # dtypes are recorded from torch 2.4 on
    assert f.summary.startswith(f"rank 2 skipped all_reduce #10 ([1024]{dt}, at train.py:19 (train_step)) of the "
                                "default group: rank 2 issued broadcast #10")
    assert [e.rank for e in m.evidence] == [2, 0]
    assert f.position(0).what == "all_reduce #10" and f.position(2).what == "broadcast #10"
    assert f.waiting() == {"all_reduce #10": [0, 1, 3], "broadcast #10": [2]}
    assert not f.lags and f.missing is None


def test_size_and_dtype_mismatches(tmp_path):
    ops = {r: STEP + [AR] for r in range(4)}
    ops[1] = STEP + [("all_reduce", [[512]], "Float")]
    f = facts(tmp_path / "a", ops=ops)
    assert (f.mismatches[0].what, f.culprits) == ("size", [1])
    assert "different tensor sizes at #4" in f.summary and "[512]" in f.summary
    ops[1] = STEP + [("all_reduce", [[1024]], "BFloat16")]
    f = facts(tmp_path / "b", ops=ops)
    assert (f.mismatches[0].what, f.culprits) == ("dtype", [1])


def test_gather_sizes_may_differ(tmp_path):
    ops = {r: [("gather", [[8]] if r else [[8], [8]], "Float")] for r in range(3)}
    assert not facts(tmp_path, ops=ops).mismatches


def test_two_ranks_that_disagree_without_a_majority(tmp_path):
    f = facts(tmp_path, ops={0: STEP[:1], 1: STEP[1:2]})
    assert f.mismatches[0].majority == [] and f.culprits == [0, 1]
    assert f.summary.startswith("ranks disagree on collective #1")


def test_lagging_rank_never_entered_the_collective(tmp_path):
    ops = {r: STEP * 3 + [AR] for r in (0, 1, 2)}
    ops[3] = STEP * 3  # rank 3 stopped issuing collectives after step 3
    f = facts(tmp_path, ops=ops, world=4)
    lag = f.lags[0]
    assert (lag.seq, lag.op, lag.behind, lag.entered, lag.confidence) == (10, "all_reduce", [3], [0, 1, 2], "high")
    assert f.culprits == [3]
    assert f.summary.startswith("rank 3 never entered all_reduce #10 ([1024] Float, at train.py:19 (train_step)) "
                                "of the default group that ranks 0, 1, 2 entered")


def test_lag_among_completed_collectives_is_low_confidence(tmp_path):
    """Dumps taken at different moments of a healthy job: the ranks ahead completed everything."""
    ops = {0: STEP * 2 + [AR], 1: STEP * 2}
    f = facts(tmp_path, ops=ops, pending_last=False)
    assert f.lags[0].confidence == "low" and f.culprits == []


def test_missing_dump_names_the_dead_rank(tmp_path):
    ops = {r: STEP * 3 + [AR] for r in (0, 2, 3)}
    f = facts(tmp_path, ops=ops, world=4)
    assert f.missing.ranks == [1] and f.culprits == [1] and f.missing.confidence == "medium"
    assert f.summary == ("rank 1 left no flight-recorder dump (world of 4) while ranks 0, 2, 3 did (ranks 0, 2, 3 "
                         "wait in all_reduce #10): a rank that died (killed, crashed, OOM) writes none")


def test_many_missing_dumps_look_like_an_incomplete_collection(tmp_path):
    f = facts(tmp_path, ops={0: STEP, 1: STEP}, world=16)
    assert f.missing.confidence == "low" and f.culprits == []
    assert "were all dumps collected" in f.missing.summary


def test_healthy_dumps_have_no_facts(tmp_path):
    f = facts(tmp_path, ops={r: STEP * 2 for r in range(4)}, pending_last=False)
    assert not f.mismatches and not f.lags and f.missing is None and f.culprits == [] and f.summary is None
    assert sorted(f.dumps) == [0, 1, 2, 3] and f.world == 4


def test_groups_are_compared_separately(tmp_path):
    """A sub-group's sequence numbers never mix with the default group's."""
    (tmp_path / "d").mkdir()
    for r in range(2):
        dump = build("2.10", r, STEP, world=2, pending_last=False)
        sub = build("2.10", r, [AR] * (3 if r == 0 else 2), world=2)["entries"]
        for i, e in enumerate(sub):
            e.update(pg_id=1, process_group=("7", "tp"), record_id=100 + i)
        dump["entries"] += sub
        dump["pg_config"]["7"] = {"name": "7", "desc": "tp", "ranks": "[0, 1]"}
        (tmp_path / "d" / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump, protocol=2))
    files, _ = discover([str(tmp_path / "d")])
    f = facts_from_events(split_dumps(files)[0])
    assert not f.mismatches
    assert [(lg.pg, lg.seq, lg.behind) for lg in f.lags] == [("7", 3, [1])]
    assert "group 7 (tp)" in f.lags[0].summary
