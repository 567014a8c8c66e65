"""World size is a claim, not an allocation: one line claiming millions of ranks beside 16 rank logs
costs what the 16 logs cost, and the report says the logs are partial instead of naming millions
of missing ranks."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor.model.job import PARTIAL_MIN_MISSING, JobModel, RankState

ROOT = Path(__file__).resolve().parents[2]
HANG = ROOT / "fixtures" / "generated" / "hang-mn3-16"  # 16 per-rank logs; rank 12 went silent
CLAIM = ("dgx-h100-43:1522247:1522320 [0] NCCL INFO ncclCommInitRank comm 0x554da7913099 rank 0 nranks {n} "
         "cudaDev 0 nvmlDev 0 busId 18000 commId 0x98e19065240d2b99 - Init START\n")


def _job(tmp_path: Path, claim: int | None = None) -> Path:
    job = tmp_path / "job"
    shutil.copytree(HANG, job, ignore=shutil.ignore_patterns("*.json"))
    if claim is not None:
        (job / "extra.log").write_text(CLAIM.format(n=claim))
    return job


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nccl_doctor", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, preexec_fn=_limit)


def test_a_claim_of_ten_million_ranks_beside_16_logs(tmp_path):
    base = json.loads(_run("analyze", "--format", "json", str(_job(tmp_path / "a"))).stdout)
    r = _run("analyze", "--format", "json", str(_job(tmp_path / "b", 9_999_999)))
    assert r.returncode == 1, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["job"]["ranks_expected"] == 9_999_999 and got["job"]["ranks_seen"] == 16
    assert got["notes"][0].startswith("the logs cover 16 of 9,999,999 ranks: they are partial")
    # the culprit of the 16 logs is still named, and only it: no list of millions of "missing" ranks
    assert got["verdict"]["ranks"] == base["verdict"]["ranks"] == [12]
    assert all(len(f["ranks"]) <= 16 for f in got["findings"])
    assert {f["rule"] for f in got["findings"]} == {f["rule"] for f in base["findings"]}
    text = _run("analyze", str(_job(tmp_path / "c", 9_999_999))).stdout
    assert "NOTE     the logs cover 16 of 9,999,999 ranks" in text
    assert "reported no timeout here" not in text and "cannot be named" in text  # MN3 says why it names none


def test_a_dump_claiming_100000_ranks_beside_16_logs(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "flightrec"))
    import fr_bombs

    job = _job(tmp_path)
    (job / "nccl_trace_rank_3.json").write_bytes(fr_bombs.long_ranks_json(100_000))
    r = _run("analyze", "--format", "json", str(job))
    assert r.returncode == 1, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["job"]["ranks_expected"] == 100_000
    assert got["notes"][0].startswith("the logs cover 16 of 100,000 ranks")
    assert all(len(f["ranks"]) <= 16 for f in got["findings"])


def _model(seen: int, world: int) -> JobModel:
    ranks = [RankState(rank=r, host="h", pid=r, cuda_dev=0, local_rank=0, rank_source="file", files=[],
                       events=[]) for r in range(seen)]
    return JobModel(ranks=ranks, events=[], ranks_expected=world, hosts=["h"], files=[], last_lines={})


@pytest.mark.parametrize("seen, world, partial", [
    (16, 16 + PARTIAL_MIN_MISSING, False),  # 64 absent: still named one by one
    (16, 16 + PARTIAL_MIN_MISSING + 1, True),
    (200, 399, False),  # 199 absent of 399: the logs cover more than half
    (200, 401, True),
])
def test_partial_logs_boundaries(seen, world, partial):
    job = _model(seen, world)
    assert job.partial_logs is partial
    assert job.coverage() == (seen, world)
    assert job.missing_ranks() == ([] if partial else list(range(seen, world)))
