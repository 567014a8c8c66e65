"""The job model on real excerpts and generated jobs: ranks, hosts, CUDA devices, SeqNums.

Expected values are read off the log text (and the excerpts' sidecars), not from the code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_doctor import analyze

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"


def job_of(name: str):
    return analyze([str(next(REAL.glob(f"{name}_*.log")))], jobs=1).job


def test_008_interleaved_32_ranks_on_4_hosts():
    job = job_of("008")
    assert job.ranks_expected == 32
    assert job.hosts == ["jean-zay-iam37", "jean-zay-iam40", "jean-zay-iam41", "jean-zay-iam52"]
    ranks = job.known_ranks()
    assert sorted(ranks) == list(range(32))
    for r, st in ranks.items():  # 8 GPUs a node: [N] is the local CUDA device, never the global rank
        assert st.cuda_dev == r % 8
        assert st.stage == "init_complete"
    # "jean-zay-iam40:289967:290091 [0] NCCL INFO comm 0x14aa40002fb0 rank 8 nranks 32 ..."
    assert ranks[8].host == "jean-zay-iam40" and ranks[8].pid == 289967


def test_007_single_node_4_ranks():
    job = job_of("007")
    assert job.ranks_expected == 4 and job.hosts == ["r7i4n1"]
    assert sorted(job.known_ranks()) == [0, 1, 2, 3]


def test_069_openmpi_tags_give_ranks_on_two_hosts():
    job = job_of("069")
    assert job.ranks_expected == 2
    assert job.hosts == ["test-nccl-efa-worker-0", "test-nccl-efa-worker-1"]
    assert sorted(job.known_ranks()) == [0, 1]
    assert {r.stage for r in job.known_ranks().values()} == {"finished"}  # Destroy COMPLETE on both


def test_043_every_process_sees_device_0_and_ranks_come_from_the_mpi_tag():
    job = job_of("043")
    ranks = job.known_ranks()
    assert sorted(ranks) == [0, 2, 3, 4, 5]  # [1,R]<stdout>: tags present in the excerpt
    assert {st.cuda_dev for st in ranks.values()} == {0}
    assert {st.host for st in ranks.values()} == {"smc-gpu-03"}


def test_015_old_torch_rank_in_default_group():
    job = job_of("015")
    assert sorted(job.known_ranks()) == [1, 2, 3, 6, 7]
    assert job.ranks_expected is None  # the world size is not in the excerpt: never guessed
    assert {r.last_seq.get("default") for r in job.ranks} == {469508}


def test_019_seqnum_compared_in_its_process_group():
    job = job_of("019")
    ranks = job.known_ranks()
    assert sorted(ranks) == [0, 2, 3, 4, 6]
    # "[PG 1 Rank 0] ... at work: 7753, last enqueued NCCL work: 7755"; rank 3 shows only the
    # watchdog line (no PG) and is attached to the same group by its SeqNum.
    assert all(r.last_seq == {"pg1": 7753} for r in ranks.values())
    assert ranks[0].enqueued == {"pg1": 7755} and ranks[0].completed == {"pg1": 7752}


def test_036_partial_excerpt_world_known_ranks_partly_known():
    job = job_of("036")
    assert job.ranks_expected == 16
    assert {10, 11, 12, 13} <= set(job.known_ranks())
    assert set(job.hosts) == {"26a46eb2b1d3", "c6ad99331184"}


def test_011_four_rank_groups_on_three_hosts_are_not_the_world():
    job = job_of("011")
    assert job.ranks_expected is None  # rank 0 of a 4-rank comm appears on three hosts
    assert job.known_ranks() == {}


def test_059_app_rank_prefix_is_not_an_srun_label():
    job = job_of("059")
    assert job.ranks_expected == 2 and job.hosts == ["node0"]
    assert sorted(job.known_ranks()) == [0, 1]


def test_glued_records_are_split(tmp_path):
    p = tmp_path / "rank-0.log"
    p.write_text("Epoch 10/10: 240it [05:55,  1.47s/it][rank0]:[E709 01:02:03.000000000 ProcessGroupNCCL.cpp:632] "
                 "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, "
                 "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
                 "node1:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4 node1:1:2 [0] NCCL INFO Using network IB\n")
    job = analyze([str(p)], jobs=1).job
    kinds = sorted(e.kind for e in job.events)
    assert kinds == ["nccl_using_net", "nccl_version", "torch_wd_timeout", "train_epoch"]
    assert job.known_ranks()[0].last_seq == {"default": 7}


GEN_CASES = [(layout, n) for layout in ("per-rank", "srun-interleaved", "nccl-debug-file", "kubectl") for n in (16, 64)]


@pytest.mark.parametrize(("layout", "ranks"), GEN_CASES, ids=[f"{a}-{b}" for a, b in GEN_CASES])
def test_generated_job_model(tmp_path, layout, ranks):
    from generator import generate_job

    expected = generate_job(tmp_path / "job", "MN3", ranks, layout=layout, seed=3)
    report = analyze([str(tmp_path / "job")], jobs=1)
    job = report.job
    assert job.ranks_expected == expected["ranks_expected"]
    assert job.ranks_seen == expected["ranks_seen"]
    assert job.hosts == expected["hosts"]
    known = job.known_ranks()
    gpn = expected["gpus_per_node"]
    for pg, per_rank in expected["last_seq"].items():
        for rank, seq in per_rank.items():
            st = known[int(rank)]
            name = "default" if pg in ("0", "default_pg") else pg
            assert seq in (st.enqueued.get(name), st.last_seq.get(name)), (rank, st.enqueued, st.last_seq)
    for r, st in known.items():
        host, local, dev = expected["rank_map"][r][:3]
        assert st.host == host and (st.cuda_dev is None or st.cuda_dev == dev)
        assert r < gpn or st.cuda_dev != r


@pytest.mark.parametrize("layout", ["per-rank", "srun-interleaved", "nccl-debug-file", "kubectl"])
def test_generated_1024_ranks(tmp_path, layout):
    from generator import generate_job

    expected = generate_job(tmp_path / "job", "RK3", 1024, layout=layout, seed=5, info_lines=False)
    d = analyze([str(tmp_path / "job")]).to_dict()
    assert d["job"]["ranks_expected"] == 1024 and d["job"]["ranks_seen"] == expected["ranks_seen"]
    assert d["job"]["hosts"] == expected["hosts"]
    assert set(expected["culprit"]["ranks"]) <= set(d["verdict"]["ranks"])
    json.dumps(d)


def test_only_a_traceback_ending_in_torchruns_own_exception_is_the_agents():
    # A rank's own traceback (unlabelled, ending in its ValueError) and, later, an agent's exception line whose
    # "Traceback" head was not kept: the rank's traceback is not taken into the agent's (it ended; no chain followed).
    from nccl_doctor.events import Event
    from nccl_doctor.model.relays import agent_tracebacks

    def ev(kind, line, **fields):
        return Event(kind, "console.log", line, None, None, None, None, None, None, fields, "")

    own = [ev("traceback_start", 1), ev("py_script_frame", 2), ev("python_exception", 3, exc_type="ValueError")]
    agent = [ev("python_exception", 9, exc_type="torch.distributed.elastic.multiprocessing.errors.ChildFailedError")]
    agent_tracebacks(own + agent)
    assert not any(e.get("by_agent") for e in own)
    # chained to torchrun's own exception ("The above exception was the direct cause ..."): the whole chain is its
    chain = [ev("traceback_start", 1), ev("python_exception", 3, exc_type="torch.distributed.DistNetworkError"),
             ev("py_chain", 5), ev("traceback_start", 7),
             ev("python_exception", 9, exc_type="torch.distributed.elastic.rendezvous.api.RendezvousConnectionError")]
    agent_tracebacks(chain)
    assert all(e.get("by_agent") for e in chain)
