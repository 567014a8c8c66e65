"""Per-rank files named by a bare number: ``0.log`` .. ``3.log``, ``worker-0.log`` .. ``worker-3.log``,
``train_2.out``, ``logs/2/stderr.log``, ``node-2/train.log``. A number alone says nothing (a pid, a
date, a node's index, a retry), but a set of sibling files whose names differ only in that number,
and whose numbers are exactly 0, 1, ..., N-1, is how a job script names one file per rank
(``> "logs/worker-$RANK.log"``). Files whose name states ``rank`` are ``identity.file_rank``'s; files
that hold several processes say nothing about one rank (identity leaves them out), and a series found
in several folders alike (one per node: ``node-a/0.log``, ``node-b/0.log``) numbers local ranks.
"""

from __future__ import annotations

import re
from collections import defaultdict

_RUN = re.compile(r"\d{1,7}")
#: Words before a number that count something else than ranks: a sweep's trials, a job's attempts and
#: runs, checkpoints, epochs, shards, data splits ("trial_2/train.log" is a whole job of its own).
_NOT_RANKS = re.compile(r"(?:trial|run|attempt|exp|experiment|version|seed|epoch|step|iter|ckpt|checkpoint|job|sweep"
                        r"|fold|split|shard|part|chunk|retry|restart|day|week|v)[-_.]?$", re.I)
#: Parts of a path a number is looked for in: the file's name and its folder's.
_PARTS = 2


def numbered_ranks(paths: set[str] | list[str], labels: dict[str, set] | None = None) -> dict[str, int]:
    """path -> its number, for the paths of a numbered series 0..N-1 (N >= 2) of sibling files.

    ``labels``: path -> the rank labels its lines carry (("rank", R), ("local", L)). A series one of
    whose files carries another rank than its number, or two local ranks, is a series of something
    else (one console per node, "node1.log" holding ranks 2 and 3): none of its numbers is a rank."""
    labels = labels or {}
    series: dict[tuple, dict[int, str]] = defaultdict(dict)
    spoiled: set[tuple] = set()
    for path in paths:
        if "/attempt_" in path:
            continue  # torchrun's --log-dir: the folder is the local rank (identity's logdir slot)
        parts = path.replace("\\", "/").split("/")
        head, tail = "/".join(parts[:-_PARTS]), parts[-_PARTS:]
        rel = "/".join(tail)
        for m in _RUN.finditer(rel):
            if _NOT_RANKS.search(rel, 0, m.start()):
                continue
            key = (head, rel[:m.start()], rel[m.end():])
            n = int(m.group(0))
            if n in series[key] or m.group(0) != str(n):
                spoiled.add(key)  # the same number twice, or zero-padded ("07": a date's, a node's)
            series[key][n] = path
    out: dict[str, int] = {}
    claimed: dict[str, int] = defaultdict(int)
    found = []
    folders: dict[tuple, int] = defaultdict(int)
    complete = {key: by_n for key, by_n in series.items()
                if key not in spoiled and len(by_n) >= 2 and set(by_n) == set(range(len(by_n)))}  # 0..N-1
    for key in complete:
        folders[_name_template(key)] += 1
    for key, by_n in complete.items():
        if folders[_name_template(key)] > 1:
            continue  # the same series in several folders (one per node): local ranks, not the job's
        if any(_other_writers(labels.get(path, ()), n) for n, path in by_n.items()):
            continue
        found.append(by_n)
        for path in by_n.values():
            claimed[path] += 1
    for by_n in found:
        for n, path in by_n.items():
            if claimed[path] == 1:  # (one series only: two numbers in one name that both count say nothing)
                out[path] = n
    return out


def local_named(paths: set[str] | list[str], rank_of) -> set[str]:
    """Files whose name states a rank (``rank_of``: identity.file_rank) that files of the same name in
    other folders beside theirs state too ("logs/dgx-17/rank1.log", "logs/dgx-18/rank1.log": one
    folder per node): the number is the rank on that node, not in the job."""
    seen: dict[tuple, set[str]] = defaultdict(set)
    split: dict[str, list[str]] = {}
    for path in paths:
        parts = path.replace("\\", "/").rsplit("/", 2)
        if len(parts) == 3 and rank_of(parts[2]) is not None:  # (the name itself states it, not its folder)
            split[path] = parts
            seen[(parts[0], parts[2])].add(parts[1])
    return {p for p, parts in split.items() if len(seen[(parts[0], parts[2])]) > 1}


def _name_template(key: tuple) -> tuple:
    """A series' file names without their folder ("gpu-a/0.log" and "gpu-b/0.log" alike)."""
    _head, before, after = key
    return (before.rsplit("/", 1)[-1], after) if "/" not in after else (before, after)


def _other_writers(labels, n: int) -> bool:
    """The file's lines name another rank than ``n``, or several local ranks: not rank n's own file."""
    return any(kind == "rank" and value != n for kind, value in labels) \
        or len({value for kind, value in labels if kind == "local"}) > 1


__all__ = ["local_named", "numbered_ranks"]
