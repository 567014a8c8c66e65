"""Two nodes each given --node-rank 0 under a static rendezvous: the node that is not the endpoint's host
started its store by mistake. Line shapes from fixtures/realruns/t112_dup_node_rank_n2_static (torchrun's
launch config at LOGLEVEL=INFO, the store's timeout), with other hosts, pids and ports."""

from __future__ import annotations

from nccl_doctor import analyze


def _console(pid: int, endpoint: str) -> list[str]:
    cfg = f"I1128 04:10:28.539000 {pid} torch/distributed/launcher/api.py:254]"
    return [f"{cfg} Starting elastic_operator with launch configs:", f"{cfg}   min_nodes                : 2",
            f"{cfg}   max_nodes                : 2", f"{cfg}   nproc_per_node           : 2",
            f"{cfg}   rdzv_backend             : static", f"{cfg}   rdzv_endpoint            : {endpoint}",
            "torch.distributed.DistStoreError: Timed out after 21 seconds waiting for clients. 1/2 clients joined."]


def test_the_node_whose_store_is_not_at_the_endpoint_was_given_the_wrong_node_rank(tmp_path):
    for host, pid in (("gpu-r2-11", 4411), ("gpu-r2-12", 4522)):
        (tmp_path / f"{host}.log").write_text("\n".join(_console(pid, "gpu-r2-11:29500")) + "\n", encoding="utf-8")
    assert analyze([str(tmp_path)], jobs=1).verdict.get("hosts") == ["gpu-r2-12"]


def test_an_endpoint_on_neither_node_tells_nothing(tmp_path):
    for host, pid in (("gpu-r2-11", 4411), ("gpu-r2-12", 4522)):
        (tmp_path / f"{host}.log").write_text("\n".join(_console(pid, "login-1:29500")) + "\n", encoding="utf-8")
    assert analyze([str(tmp_path)], jobs=1).verdict.get("hosts") == []
