"""Per-rank files named by a bare number (model.numbered): a series of sibling files numbered exactly
0..N-1 is one file per rank; the failing rank's own traceback in "worker-2.log" names rank 2. Numbers
that count something else are no ranks: one console per node holding several ranks, the same series
in one folder per node (local ranks), a sweep's trials, pids or dates, a series that starts at 1."""

from __future__ import annotations

import pytest

from nccl_doctor.analysis import analyze
from nccl_doctor.model.numbered import numbered_ranks

_ECHO = ("Traceback (most recent call last):\n  File \"/app/train.py\", line 88, in <module>\n    loss.backward()\n"
         "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
         "by peer [127.0.0.1]:4{r}123. This is typically caused by a remote worker crashing.\n")
_OWN = ("Traceback (most recent call last):\n  File \"/app/train.py\", line 77, in <module>\n    batch = next(it)\n"
        "ValueError: corrupt record 2053 in shard {r}\n")


@pytest.mark.parametrize("name", ["worker-{r}.log", "train_{r}.log", "{r}.log", "gpu{r}.log", "out.{r}",
                                  "slurm-1234.{r}.out", "logs/{r}/stderr.log", "node-{r}/train.log"])
def test_the_failing_rank_s_file_names_it(tmp_path, name):
    for r in range(4):
        path = tmp_path / name.format(r=r)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"step {s} loss 2.1\n" for s in range(1, 6)) + (_OWN if r == 2 else _ECHO).format(r=r))
    summary = analyze([str(tmp_path)], jobs=1).verdict["summary"]
    assert summary.startswith("rank 2 failed first: ValueError: corrupt record 2053"), summary


@pytest.mark.parametrize(("paths", "labels"), [
    ([f"job/node{n}.log" for n in range(3)], {"job/node1.log": {("rank", 2), ("rank", 3)}}),  # per-node consoles
    ([f"job/{h}/{n}.log" for h in ("gpu-a", "gpu-b") for n in range(2)], {}),  # one series per node: local ranks
    ([f"job/sweep/trial_{n}/train.log" for n in range(3)], {}),  # a sweep's trials
    ([f"job/train_{pid}.log" for pid in (31207, 31208, 31209)], {}),  # pids
    ([f"job/worker-{n}.log" for n in (1, 2, 3)], {}),  # counted from 1
    ([f"job/2026-11-{d:02d}.log" for d in range(3)], {}),  # zero-padded: a date's
    (["job/worker-0.log"], {}),  # one file is no series
])
def test_numbers_that_count_something_else_are_no_ranks(paths, labels):
    assert numbered_ranks(paths, labels) == {}


def test_a_series_with_its_own_rank_labels_agreeing_is_kept():
    paths = [f"job/out.{n}" for n in range(3)]
    assert numbered_ranks(paths, {"job/out.1": {("rank", 1)}}) == {p: n for n, p in enumerate(paths)}


def test_a_rank_file_name_repeated_in_each_node_s_folder_is_a_local_rank():
    from nccl_doctor.model.identity import file_rank
    from nccl_doctor.model.numbered import local_named

    paths = [f"logs/{h}/rank{n}.log" for h in ("dgx-17", "dgx-18") for n in range(2)]
    assert local_named(paths, file_rank) == set(paths)
    # Open MPI's --output-filename: the rank is the folder's ("rank.1/stderr"), each folder's own
    ompi = [f"out/1/rank.{n}/{s}" for n in range(3) for s in ("stdout", "stderr")]
    assert local_named(ompi, file_rank) == set()
    assert local_named(["logs/rank0.log", "logs/rank1.log"], file_rank) == set()


@pytest.mark.parametrize(("name", "node"), [
    ("cw-q-11.log", "cw-q-11"), ("ib-gpu-103.log", "ib-gpu-103"), ("hpc-a-03.out", "hpc-a-03"),
    ("MLINFRA-2291.md", None),  # a ticket's key
    ("slurm-48213.out", None),  # Slurm's output file: the job's console, no node's
    ("console.log", None), ("rank3.log", None), ("train-7.log", None),
])
def test_a_console_named_after_its_node(tmp_path, name, node):
    from nccl_doctor.evidence.rendezvous import node_name

    (tmp_path / name).write_text("step 1 loss 2.1\n")
    job = analyze([str(tmp_path)], jobs=1).job
    assert node_name(job, str(tmp_path / name)) == node

