"""The one rank that started with a setting every other rank has otherwise.

In a desync the receivers' errors say only that the ranks ran different collectives, never who
deviated; a rank built or configured differently often shows it only in its own start-up banner:
"comm hook: none (built-in all-reduce)" where every other rank prints "comm hook: powerSGD_hook",
"validation shard valid-00001-of-00003: 40 records" where the others have 64. What an expert does
then is line the ranks' banners up (the scan keeps each writer's first "key: value" lines, see
``startup``) and look for the one that differs. A hint, not a statement (DSY1 names the rank at
medium confidence).

Only a key that three ranks or more printed before they trained or failed, on which every rank but
one printed the same value; only when a single rank stands out so (two ranks each differing on some
key single out none). Keys that differ by nature (the rank, host, pid, device, seed, port, a time, a
per-rank statistic) are left out, as are values naming a host, and rank 0: the coordinator prints
its own role, paths and switches ("is main process: True") by design.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel, RankState
from .facts import _per_job

#: Key words of settings that differ from rank to rank by nature, or are errors and frames, not settings.
_NATURAL = re.compile(r"\b(?:ranks?|local|host(?:name)?|nodes?|pids?|devices?|gpus?|cuda|index|seed|port|addr(?:ess)?|"
                      r"ip|time|date|started|id|uuid|name|loss|acc(?:uracy)?|norm|grad|elapsed|took|duration|"
                      r"throughput|speed|mem(?:ory)?|rss|exitcode|error_file|traceback|what)\b|error|exception|warning|"
                      r"[()/]")
_DIGITS = re.compile(r"\d+")
#: Values compared: the first few a rank printed under one key.
_VALUES = 4


@dataclass(slots=True)
class OddSetting:
    rank: int
    event: Event  # its line
    usual: Event  # the line of a rank that has the common value


def _writers(job: JobModel) -> dict[int, list[tuple[str, tuple, RankState | None]]]:
    """rank -> the (file, writer key) whose settings are its own: its label in any file (a rank that
    wrote no event has its "[rank 2] ..." lines all the same), else a file only it wrote events to."""
    states = {st.rank: st for st in job.ranks if st.rank is not None}
    owners: dict[str, set[int]] = defaultdict(set)
    for st in states.values():
        for f in st.files:
            owners[f].add(st.rank)
    out: dict[int, list] = defaultdict(list)
    for f, per in job.startup.items():
        labelled = [k for k in per if k is not None and k[0] == "rank"]
        for k in labelled:
            out[k[1]].append((f, k, states.get(k[1])))
        if len(owners.get(f, ())) == 1 and not labelled:
            r = next(iter(owners[f]))
            out[r] += [(f, k, states[r]) for k in (None, ("local_rank", states[r].local_rank)) if k in per]
    return out


def _settings(job: JobModel, writers: list[tuple[str, tuple, RankState | None]]) -> dict[str, list]:
    """key (digits masked) -> [(file, line, value, key as written)] of one rank's own start-up
    settings, before it trained or failed."""
    out: dict[str, list] = defaultdict(list)
    for f, k, st in writers:
        stop = None
        if st is not None:
            lines = [e.line for e in st.events if e.file == f and e.kind in ("train_step", "train_epoch")]
            lines += [e.line for e in st.errors + st.timeouts if e.file == f]
            stop = min(lines, default=None)
        for line, written, value in job.startup[f].get(k, ()):
            key = _DIGITS.sub("#", written.lower())  # "shard valid-00001-of-00003": one key on every rank
            if (stop is None or line < stop) and len(out[key]) < _VALUES and not _NATURAL.search(key):
                out[key].append((f, line, value, written))
    return out


@_per_job
def odd_setting(job: JobModel) -> OddSetting | None:
    if not job.startup:
        return None
    writers = _writers(job)
    if len(writers) < 3:
        return None
    hosts = {h for h in job.rank_hosts.values() if h and h != "localhost"}
    per_rank = {rank: _settings(job, ws) for rank, ws in writers.items()}
    by_key: dict[str, dict[int, list]] = defaultdict(dict)
    for rank, settings in per_rank.items():
        for key, vals in settings.items():
            by_key[key][rank] = vals
    odd: dict[int, tuple[Event, Event]] = {}
    for vals in by_key.values():
        if len(vals) < 3:
            continue
        shapes = Counter(tuple(v[2] for v in vs) for vs in vals.values())
        (common, n), *rest = shapes.most_common()
        if n != len(vals) - 1 or len(rest) != 1:
            continue
        rank = next(r for r, vs in vals.items() if tuple(v[2] for v in vs) != common)
        mine = vals[rank]
        if rank == 0 or any(h in v[2] for v in mine for h in hosts):
            continue
        other = next(vs for r, vs in vals.items() if r != rank)
        i = next((i for i, (a, b) in enumerate(zip(mine, other, strict=False)) if a[2] != b[2]), min(len(mine), len(other)) - 1)
        odd.setdefault(rank, (_event(mine[i], rank), _event(other[i], None)))
    if len(odd) != 1:
        return None
    rank, (ev, usual) = next(iter(odd.items()))
    return OddSetting(rank, ev, usual)


def _event(setting: tuple[str, int, str, str], rank: int | None) -> Event:
    f, line, value, key = setting
    return Event("startup_setting", f, line, rank=rank, fields={"key": key, "value": value}, text=f"{key}: {value}")
