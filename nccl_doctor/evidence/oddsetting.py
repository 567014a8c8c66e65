"""The one rank that started with a setting every other rank has otherwise.

In a desync the receivers' errors say only that the ranks ran different collectives, never who
deviated; a rank built or configured differently often shows it only in its own start-up banner:
"comm hook: none (built-in all-reduce)" where every other rank prints "comm hook: powerSGD_hook",
"validation shard valid-00001-of-00003: 40 records" where the others have 64, "loaded model.pt,
76810 parameters" where the others loaded 22026. What an expert does then is line the ranks'
banners up (the scan keeps each writer's first lines with a value, see ``startup``) and look for the
one that differs: in the value of a "key: value" line, or in one number of a line every rank prints
in the same words. A hint, not a statement (DSY1 names the rank at
medium confidence).

Only a value that three ranks or more printed before they trained or failed, and every rank but one
printed alike; only when a single rank stands out so (two ranks each differing somewhere single out
none). Lines about what differs by nature (the rank, host, pid, device, seed, port, a time, a
per-rank statistic) are left out, as are clock times, values naming a host, a number that is the
rank's own rank or local rank, and rank 0: the coordinator prints its own role, paths and switches
("is main process: True") by design.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel, RankState
from ..startup import setting_of
from .facts import _per_job
from .failure_record import Failure

#: Key words of settings that differ from rank to rank by nature, or are errors and frames, not settings.
_WORDS = (r"\b(?:ranks?|local|host(?:name)?|nodes?|pids?|devices?|gpus?|cuda|index|seed|port|addr(?:ess)?|"
          r"ip|time|date|started|id|uuid|name|loss|acc(?:uracy)?|norm|grad|elapsed|took|duration|"
          r"throughput|speed|mem(?:ory)?|rss|exitcode|error_file|traceback|what)\b|error|exception|warning")
_NATURAL = re.compile(_WORDS)
#: A "key: value" line's key: neither those words nor a frame or a path ("powerSGD_hook.py(615)").
_NATURAL_KEY = re.compile(_WORDS + r"|[()/]")
_DIGITS = re.compile(r"\d+")


@dataclass(slots=True)
class OddSetting:
    rank: int
    event: Event  # its line
    usual: Event  # the line of a rank that has the common value

    def said(self) -> str:
        """'"its line" (its value where the others have theirs)', as findings quote it."""
        return (f"\"{self.event.text[:120]}\" ({self.event.get('value', '')[:80]} where the others have "
                f"{self.usual.get('value', '')[:80]})")


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


#: Clock times and dates inside a line: no setting, and they differ from rank to rank.
_CLOCK = re.compile(r"\d{4}-\d\d-\d\d|\d{1,2}:\d\d(?::\d\d)?(?:[.,]\d{1,9})?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: One "key=value" of a call or a record that lists several ("backend=gloo, init_method=file:///x").
_KV_PAIR = re.compile(r"(?:^|[\s(,])([A-Za-z_][\w.]{0,40})=([^\s,()'\"]{1,200})")

#: Lines compared under one key: the first few a rank printed with it.
_VALUES = 4

#: What one rank printed as it started: item -> (value, file, line, text). Items: ("kv", key, j) for
#: the j-th "key: value" line with that key (digits of the key masked: "shard valid-00001-of-00003" is one key on every
#: rank), ("num", shape, i) for the i-th number of a line of that shape (numbers masked).
Items = dict[tuple, tuple[str, str, int, str]]


def _items(job: JobModel, writers: list[tuple[str, tuple, RankState | None]]) -> Items:
    """The first value of each item a rank printed before it trained or failed."""
    out: Items = {}
    seen: dict[str, int] = {}
    for f, k, st in writers:
        stop = None
        if st is not None:
            lines = [e.line for e in st.events if e.file == f and e.kind in ("train_step", "train_epoch")]
            lines += [e.line for e in st.errors + st.timeouts if e.file == f]
            stop = min(lines, default=None)
        for line, text in job.startup[f].get(k, ()):
            if stop is not None and line >= stop:
                continue
            kv = setting_of(text)
            if kv is not None and " " not in kv[0] and (inner := setting_of(kv[1])) is not None:
                kv = (f"{kv[0]}: {inner[0]}", inner[1])  # a logger's name before the setting ("train: sync order: ...")
            if kv is not None:
                key = _DIGITS.sub("#", kv[0].lower())
                seen[key] = j = seen.get(key, -1) + 1  # a logger's "name: ..." heads many lines: the j-th
                if not _NATURAL_KEY.search(key) and j < _VALUES:
                    out.setdefault(("kv", key, j), (kv[1], f, line, text))
            for m in _KV_PAIR.finditer(text):  # "init_process_group(backend=gloo, init_method=file:///x, ...)"
                key = _DIGITS.sub("#", m.group(1).lower())
                if not _NATURAL_KEY.search(key) and (kv is None or m.group(1) not in kv[0]):
                    out.setdefault(("kv", key, 0), (m.group(2), f, line, text))
            bare = _CLOCK.sub(" ", text)
            shape = _NUMBER.sub("#", bare)
            if "#" in shape:
                for i, m in enumerate(_NUMBER.finditer(bare)):
                    if not _natural_number(bare, m):
                        out.setdefault(("num", shape, i), (m.group(0), f, line, text))
    return out


_BEFORE = re.compile(r"([A-Za-z][A-Za-z_.-]{0,40})[^A-Za-z\d]{0,3}$")
_AFTER = re.compile(r" ?([A-Za-z/%][\w/]{0,20})")  # right after it: a unit, what it counts
#: Units after a number that make it a duration or a rate: it differs between ranks by nature.
_UNIT = re.compile(r"(?:s|sec|secs|seconds?|ms|us|min|mins|minutes?|h|hours?|it/s|s/it|samples/s|tokens/s|%)$")


def _natural_number(text: str, m: re.Match) -> bool:
    """A number whose label says it differs from rank to rank by nature: the word before it
    ("seed=0", "pid 1573", "rank 2") or after it ("12 ms", "0.8s"), not the line as a whole (an
    argparse Namespace holds the seed beside the batch size)."""
    before = _BEFORE.search(text, 0, m.start())
    after = _AFTER.match(text, m.end())
    words = " ".join(w.group(1).lower() for w in (before, after) if w is not None)
    return bool(_NATURAL.search(words)) or (after is not None and _UNIT.match(after.group(1).lower()) is not None)


@_per_job
def odd_setting(job: JobModel) -> OddSetting | None:
    if not job.startup:
        return None
    writers = _writers(job)
    if len(writers) < 3:
        return None
    hosts = {h for h in job.rank_hosts.values() if h and h != "localhost"}
    states = job.known_ranks()
    by_item: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for rank, ws in writers.items():
        for item, got in _items(job, ws).items():
            by_item[item][rank] = got
    odd: dict[int, tuple[Event, Event]] = {}
    for item, vals in by_item.items():
        if len(vals) < 3:
            continue
        common, n = Counter(v[0] for v in vals.values()).most_common(1)[0]
        if n != len(vals) - 1:
            continue
        rank = next(r for r, v in vals.items() if v[0] != common)
        value = vals[rank][0]
        if rank == 0 or any(h in value for h in hosts):
            continue
        st = states.get(rank)
        if item[0] == "num" and value in (str(rank), str(st.local_rank if st else None)):
            continue  # its own rank or local rank in a line every rank prints
        other = next(v for r, v in vals.items() if r != rank)
        odd.setdefault(rank, (_event(vals[rank], rank), _event(other, None)))
    if len(odd) != 1:
        return None
    rank, (ev, usual) = next(iter(odd.items()))
    return OddSetting(rank, ev, usual)


def _event(got: tuple[str, str, int, str], rank: int | None) -> Event:
    value, f, line, text = got
    return Event("startup_setting", f, line, rank=rank, fields={"value": value}, text=text)


def set_otherwise(job: JobModel) -> list[Failure]:
    """A failure for the one rank set otherwise, when every rank failed alike and nothing else singles
    one out (failures.py asks only then): a config failure at medium weight, its line as evidence."""
    odd = odd_setting(job)
    if odd is None:
        return []
    st = job.known_ranks().get(odd.rank)
    return [Failure(rank=odd.rank, state=st, host=(st.host if st else None) or job.rank_hosts.get(odd.rank),
                    category="config", events=[odd.event, odd.usual],
                    what=f"it alone started with {odd.said()}; every rank then failed alike")]


#: A rank's own word that it departs from the job's configuration ("applying local overrides: model.x=False").
_OVERRIDE = re.compile(r"\boverrid(?:e|es|ing|den)\b", re.IGNORECASE)


def overridden(job: JobModel, ranks: set[int]) -> tuple[int, str] | None:
    """Of these ranks, the one alone whose start-up lines say it overrode a setting, and that line: where a check
    cannot say which side differs (two ranks' models, each the other's mirror), the one that changed its own."""
    said = {r: text for r in ranks for f, k, _st in _writers(job).get(r, ())
            for _line, text in job.startup[f].get(k, ()) if _OVERRIDE.search(text)}
    return next(iter(said.items())) if len(said) == 1 else None

