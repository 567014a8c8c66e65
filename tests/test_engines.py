"""Same answers whatever the speed path: --jobs 1 vs several processes, Hyperscan vs pure re."""

from __future__ import annotations

import pytest

import nccl_doctor.analysis as analysis
from nccl_doctor import analyze
from nccl_doctor.prefilter import Prefilter


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from generator import generate_job

    out = tmp_path_factory.mktemp("engines")
    generate_job(out / "mn3", "MN3", 64, layout="per-rank", seed=11)
    generate_job(out / "net1", "NET1", 32, layout="srun-interleaved", seed=12)
    return out


def test_jobs_1_equals_parallel(corpus, monkeypatch):
    one = analyze([str(corpus)], jobs=1).to_dict()
    monkeypatch.setattr(analysis, "PARALLEL_MIN_BYTES", 0)  # force the process pool on a small corpus
    many = analyze([str(corpus)], jobs=2).to_dict()
    assert one == many
    assert one["findings"], "the corpus holds failures: the comparison is not vacuous"


def test_hyperscan_equals_pure_re(corpus):
    try:
        Prefilter(["x"], engine="hyperscan")
    except RuntimeError:
        pytest.skip("the hyperscan wheel is not installed here: only the pure engine exists")
    fast = analyze([str(corpus)], jobs=1, engine="hyperscan").to_dict()
    pure = analyze([str(corpus)], jobs=1, engine="re").to_dict()
    assert fast == pure
