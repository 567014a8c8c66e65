"""torchrun's own lines for synthetic logs in tests, in the shape torch 2.13 prints them (as in
fixtures/realruns/*/console.log): the agent's glog lines and its ChildFailedError failure table."""

from __future__ import annotations


def failure_table(rows: list[tuple[int, int, str]], *, pid0: int = 4270, agent: int = 4260,
                  when: str = "2026-11-28_03:27:46", hms: str = "03:27:46") -> list[str]:
    """torchrun's report when it gives up: (rank, exit code, signal name or '') per row, the first
    the root cause. Single node: local rank = rank, pid = pid0 + rank."""
    rank, code, _sig = rows[0]
    out = [f"E1128 {hms}.640000 {agent} torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: "
           f"{code}) local_rank: {rank} (pid: {pid0 + rank}) of binary: /usr/bin/python3",
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 54, "train.py FAILED",
           "-" * 54, "Failures:"]
    for i, (r, c, sig) in enumerate(rows[1:], 1):
        out += [f"[{i}]:", f"  time      : {when}", "  host      : localhost", f"  rank      : {r} (local_rank: {r})",
                f"  exitcode  : {c} (pid: {pid0 + r})" + (f"  ({sig})" if sig else ""), "  error_file: <N/A>"]
    out += ["-" * 54, "Root Cause (first observed failure):", "[0]:", f"  time      : {when}", "  host      : localhost",
            f"  rank      : {rank} (local_rank: {rank})",
            f"  exitcode  : {code} (pid: {pid0 + rank})" + (f"  ({rows[0][2]})" if rows[0][2] else ""),
            "  error_file: <N/A>", "=" * 54]
    return out
