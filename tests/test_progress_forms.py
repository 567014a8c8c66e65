"""How scripts print their rank and their progress, read as a person reads them: the examples and
toolkits most jobs start from (pytorch/examples' MNIST, ImageNet and word language model, timm,
mmengine, detectron2), logging's default format, a rank in the first column ("rank 2 | step 1 |
..."), a bracketed date before the rank tag, and logfmt metrics lines without a message.

Each form is written as three ranks' console lines for three steps; the expected rank and step come
from the text. Also: an OOM event that kills a whole container names the largest process as the
failure, and a rank's own "rank 2 | pid 14087 | ..." line ties a kill report's pid to it.
"""

from __future__ import annotations

import pytest

from nccl_doctor.analysis import analyze

#: (form with {r} for the rank and {s} for the step, does the line name its rank)
FORMS = [
    ("rank {r} | step {s} | loss 2.0538 | maxrss 303 MB", True),
    ("rank{r} - step {s} loss 2.1016", True),
    ("rank={r} | step {s} | loss 2.1", True),
    ("rank {r} step {s} loss 2.1", True),
    ("rank={r} step={s} loss=2.1016", True),
    ("time=2026-11-28T08:00:0{s} level=info rank={r} step={s} loss=2.1", True),
    ("[2026-11-28 08:00:0{s}] [rank {r}] step {s} loss 2.1", True),
    ("[2026-11-28 08:00:0{s}] rank {r}: step {s} loss 2.1", True),
    ("2026-11-28 08:00:0{s} rank {r}: step {s} loss 2.1", True),
    ("2026-11-28 08:00:0{s} INFO rank {r} | step {s} | loss 2.1", True),
    ("INFO:root:rank {r} step {s} loss 2.1", True),
    ("INFO - rank {r} - step {s} - loss 2.1", True),
    ("[rank {r}] Train Epoch: 0 [{s}0/600 (2%)]\tLoss: 2.1", True),
    ("[rank {r}] epoch 0 batch {s} loss 2.1", True),
    ("Train Epoch: 1 [{s}0/60000 (1%)]\tLoss: 2.300000", False),
    ("| epoch   1 |   {s}00/ 2983 batches | lr 20.00 | ms/batch 45.21 | loss  7.63 | ppl  2063.04", False),
    ("Epoch: [0][  {s}0/5005]\tTime  0.512 ( 0.601)\tData  0.001 ( 0.093)\tLoss 6.9077e+00 (6.9168e+00)", False),
    ("Train: 0 [  {s}0/1251 (  4%)]  Loss: 6.9 (6.95)  Time: 0.512s", False),
    ("2026/11/28 08:00:0{s} - mmengine - INFO - Epoch(train)  [1][ {s}0/1000]  lr: 1.0000e-02  loss: 2.1", False),
    ("2026/11/28 08:00:0{s} - mmengine - INFO - Iter(train) [  {s}0/90000]  lr: 1.0000e-02  loss: 2.1", False),
    ("[11/28 08:00:0{s} d2.utils.events]:  eta: 0:12:00  iter: {s}9  total_loss: 2.1  loss_cls: 0.5", False),
    ("Epoch 0 Batch {s} Loss 2.1", False),
    ("epoch 0, batch {s}, loss 2.1", False),
    ("Iteration {s}: loss = 2.1", False),
]


@pytest.mark.parametrize(("form", "ranked"), FORMS)
def test_progress_form_is_read(tmp_path, form, ranked):
    lines = [form.format(r=r, s=s) for s in (1, 2, 3) for r in (0, 1, 2)]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n")
    events = analyze([str(tmp_path)], jobs=1).job.events
    steps = [e for e in events if e.kind == "train_step"]
    assert len(steps) == 9, [e.kind for e in events]
    if ranked:
        assert [e.rank for e in steps] == [r for _s in (1, 2, 3) for r in (0, 1, 2)]
    counters = [e.get("step") for e in steps]
    assert counters[0] < counters[3] < counters[6]  # each step's lines after the one before


def test_a_word_before_a_colon_on_every_line_is_no_host(tmp_path):
    """timm's "Train: 0 [...]" on every line is not pdsh's "host: " prefix."""
    (tmp_path / "console.log").write_text("".join(f"Train: 0 [  {s}0/1251 (  4%)]  Loss: 6.9\n" for s in range(1, 6)))
    events = analyze([str(tmp_path)], jobs=1).job.events
    assert [e.get("step") for e in events if e.kind == "train_step"] == [10, 20, 30, 40, 50]
    assert all(e.host is None for e in events)


_OOM = ("default  6s  Warning  OOMKilling  node/vm  Memory cgroup out of memory: Killed process {pid} ({name}) "
        "total-vm:1188840kB, anon-rss:{rss}kB, file-rss:94636kB, shmem-rss:0kB, UID:0 pgtables:1520kB oom_score_adj:0")


def _oom_job(tmp_path, first: tuple[int, str, int], others: list[tuple[int, str, int]]):
    (tmp_path / "worker-0.log").write_text(
        "rank 2 | pid 14087 | pod w-0 | local_rank 0 | world_size 4 | init_process_group gloo\n"
        "rank 3 | pid 14089 | pod w-0 | local_rank 1 | world_size 4 | init_process_group gloo\n"
        "rank 3 | step 1 | loss 2.1013 | maxrss 303 MB\n"
        "rank 2 | step 1 | loss 2.0538 | maxrss 688 MB\n")
    rows = [first, *others]
    (tmp_path / "events.txt").write_text("".join(_OOM.format(pid=p, name=n, rss=r) + "\n" for p, n, r in rows))
    return analyze([str(tmp_path)], jobs=1).verdict


def test_the_largest_process_of_one_oom_event_is_the_failure(tmp_path):
    """The container's group kill takes rank 3 (217 MB) and the agent too; rank 2 (512 MB) ran out."""
    verdict = _oom_job(tmp_path, (14087, "python3", 512080), [(14058, "pt_elastic", 148640), (14089, "python3", 217148)])
    assert verdict["summary"].startswith("rank 2 "), verdict["summary"]


def test_the_largest_wins_wherever_it_is_listed(tmp_path):
    verdict = _oom_job(tmp_path, (14089, "python3", 217148), [(14087, "python3", 512080)])
    assert verdict["summary"].startswith("rank 2 "), verdict["summary"]


def test_two_equal_kills_name_no_single_rank(tmp_path):
    """Two ranks of one size killed together: neither is singled out as the one that ran out."""
    verdict = _oom_job(tmp_path, (14087, "python3", 300000), [(14089, "python3", 300000)])
    assert not verdict["summary"].startswith("rank 2 failed first"), verdict["summary"]
    assert "2-3" in verdict["summary"], verdict["summary"]
