"""Launcher prefixes: recognise and strip them, keeping what they tell (rank, host, pid, time).

The prefixes are data (``parsers/launchers.toml``). Unambiguous ones (``[rank3]:``, ``[1,3]<stdout>:``,
kubectl timestamps) are stripped everywhere; ambiguous ones (``srun --label``'s ``3: ``, pdsh's
``host: ``) look like application text (an app's own ``0: INFO``), so they are applied only in files
where most lines carry them.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .jsonlog import LOGFMT_START, decode_logfmt
from .jsonlog import decode as decode_json
from .reading import clean_text
from .resources import parsers_dir
from .timeparse import _MONTHS

_RAY_RANK = re.compile(r"\[rank=(\d{1,7})\]")
#: Words that end with ": " at a line start but are not hosts (pdsh detection must ignore them).
_NOT_HOSTS = {"INFO", "WARNING", "ERROR", "DEBUG", "CRITICAL", "srun", "slurmstepd", "wandb", "Traceback",
              "RuntimeError", "Exception", "warnings", "NOTE", "Note", "usage", "error", "warning",
              # a training script's progress words ("step: 12 loss: 0.31"), not pdsh host names
              "step", "Step", "STEP", "epoch", "Epoch", "iter", "Iter", "iteration", "Iteration", "loss", "Loss",
              "Train", "train", "Test", "test", "Eval", "eval", "Valid", "valid", "Validation", "val"}
#: Prefixes added by log collectors outside every launcher: ambiguous launcher prefixes may follow them.
_COLLECTORS = frozenset({"k8s_timestamp", "kubectl_prefix", "ansi_remnant", "stern_pod", "journald", "compose_service",
                         "bracket_iso_time", "loki_labels", "shell_time", "shell_datetime", "bracket_node"})
_DIGITS = re.compile(r"\d+")
_COORD = re.compile(r"[a-z]{2}[=: ]\d{1,5}")  # ("pp 1/2": index and size, the size left out)
#: A Loki stream label ('pod="job-3-worker-0"'), and the labels that name a line's node, in order.
_LABEL = re.compile(r'(\w{1,64})="([^"\n]{0,253})"')
_NODE_LABELS = ("pod", "pod_name", "k8s_pod_name", "host", "hostname", "instance", "node_name", "node")
_LOGFMT = re.compile(LOGFMT_START)
#: An unlabelled NCCL line proves that the stream is not labelled by the launcher.
_BARE_NCCL = re.compile(r"^[\w.-]{1,253}:\d{1,10}:\d{1,10} \[\d{1,4}\] (?:NCCL )?(?:INFO|WARN)")


@dataclass(frozen=True, slots=True)
class Detect:
    """When an ambiguous prefix applies to a file (launchers.toml's ``detect``; see detect_modes)."""
    min_share: float
    value: str | int = 1
    not_hosts: bool = False
    value_has: str = ""
    few_shapes: bool = False
    min_names: int = 0
    max_names: int | None = None
    max_containers: int | None = None
    raw_lines: bool = False
    check: str = ""
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Launcher:
    name: str
    regex: re.Pattern[str]
    ambiguous: bool
    samples: tuple[dict, ...]
    #: Put by a launcher or relay on every line a process writes (its tracebacks too), unlike a
    #: script's own rank tag, which only its log records carry.
    relay: bool = False
    detect: Detect | None = None


@lru_cache(maxsize=4)
def load_launchers(directory: str | None = None) -> tuple[Launcher, ...]:
    path = Path(directory or parsers_dir()) / "launchers.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for item in data.get("launcher", []):
        det = item.get("detect")
        if det is not None:
            det = Detect(**{**det, "overrides": tuple(det.get("overrides", ()))})
            if det.check and det.check not in _CHECKS:
                raise ValueError(f"launchers.toml: {item['name']}: no check named {det.check!r}")
        elif item.get("ambiguous"):
            raise ValueError(f"launchers.toml: {item['name']} is ambiguous but says nothing of when it applies")
        out.append(Launcher(item["name"], re.compile(item["regex"]), bool(item.get("ambiguous", False)),
                            tuple(item.get("samples", ())), bool(item.get("relay", False)), det))
    return tuple(out)


_NAMED = re.compile(r"\(\?P<\w+>")


def _gate(launchers: tuple[Launcher, ...]) -> re.Pattern[str] | None:
    """One anchored alternation of every active prefix (group names removed): a single C-level
    ``match`` tells that a line has no launcher prefix, which is most lines."""
    # (a JSON record's brace too: see jsonlog, decoded before any prefix inside it is looked for)
    return re.compile("|".join([*(f"(?:{_NAMED.sub('(?:', lc.regex.pattern)})" for lc in launchers), r"\{",
                                LOGFMT_START]))


class LauncherStripper:
    """Strips prefixes from records of one file; ``modes`` are the ambiguous launchers enabled there."""

    def __init__(self, modes: frozenset[str] = frozenset(), launchers: tuple[Launcher, ...] | None = None):
        all_l = launchers or load_launchers()
        self.modes = modes
        self.active = tuple(lc for lc in all_l if not lc.ambiguous or lc.name in modes)
        self.relays = frozenset(lc.name for lc in all_l if lc.relay)
        self._gate = _gate(self.active)

    def strip(self, text: str, nested: bool = False) -> tuple[dict, str]:
        """Return (fields, rest). Fields: rank, local_rank, host, pid, ts, launcher names applied.

        ``nested``: ``text`` is a record inside a line whose own prefix was already stripped (a glued
        record): the ambiguous line-level prefixes (pdsh host, srun label) cannot start it."""
        fields: dict = {}
        rest = text
        gate = self._gate
        applied: set[str] = set()
        outer = not nested  # only collectors (timestamps, pod names) stripped so far
        for _ in range(8):  # bounded: at most a few nested prefixes exist in practice
            record = decode_json(rest) if rest.startswith("{") else \
                decode_logfmt(rest) if _LOGFMT.match(rest) else None
            if record is not None:  # a structured record: its writer, and the text it holds
                inner, rest = record
                fields = self.within(fields, inner) if fields else inner
                break
            if gate is None or gate.match(rest) is None:
                break
            for lc in self.active:
                # Each prefix once, and the ambiguous ones (pdsh's "host: ", srun's "3: ") only outside
                # the others: after "[rank3]: " a "ValueError: " is the message, not a host.
                if lc.name in applied or (lc.ambiguous and not outer):
                    continue
                m = lc.regex.match(rest)
                if m is None or m.end() == 0:
                    continue
                tag = m.group(0)
                rest = rest[m.end():]
                if "warn" in lc.regex.groupindex and m.group("warn"):
                    # a logging record at warning level reads as a printed "WARNING: <its message>", as a JSON
                    # record's does (jsonlog): the one rank that warned before a desync is told by it
                    rest = "WARNING: " + rest
                applied.add(lc.name)
                outer = outer and lc.name in _COLLECTORS
                self._merge(lc, m, fields)
                if lc.name == "ray_actor" and "x across cluster]" in rest:
                    # Ray's deduplication: "... [repeated 41x across cluster]" stands for that many
                    # workers' lines; the pid shown is only one of them (any of them)
                    fields.pop("pid", None)
                if lc.name == "openmpi_tag" and tag in rest:
                    # Open MPI injects its tag mid-record where stderr writes were split.
                    rest = rest.replace(tag, "")
                break
            else:
                break
        return fields, rest

    @staticmethod
    def within(outer: dict, inner: dict) -> dict:
        """Fields of a record cut from a longer line: the line's prefix (``outer``: an srun label,
        a kubectl timestamp) applies to every record in it, the record's own prefix (``inner``:
        a glued ``[rank5]:``) is nested inside it. As when both prefix one record: the inner
        rank wins, the outer timestamp, host and pid stay."""
        if not inner:
            return outer
        if not outer:
            return inner
        out = dict(outer)
        for key, value in inner.items():
            if key == "launchers":
                out[key] = outer.get(key, []) + value
            elif key in ("rank", "local_rank") or key not in out:
                out[key] = value
        return out

    @staticmethod
    def _merge(lc: Launcher, m: re.Match[str], fields: dict) -> None:
        g = m.groupdict()
        fields.setdefault("launchers", []).append(lc.name)
        if g.get("ts"):
            fields.setdefault("ts", g["ts"])
        if g.get("mdyts"):
            fields.setdefault("mdyts", g["mdyts"])
        if g.get("rank") is not None:
            # The innermost global rank wins ([rank12]: inside srun's label), so assign, don't setdefault.
            fields["rank"] = int(g["rank"])
        if g.get("mp_n") is not None and int(g["mp_n"]) > 0:  # multiprocessing's 1-based counter of spawn's workers
            fields["rank"] = int(g["mp_n"]) - 1
        for key in ("rank_kv", "rank_sp", "rank_nc", "rank_lg"):  # (other spellings of the rank in one prefix: "rank=2", "rank 2:")
            if g.get(key) is not None:
                fields["rank"] = int(g[key])
        for key in ("local_rank", "lr_pipe", "lr_frac", "lr_host"):  # (one group per spelling of a label)
            if g.get(key) is not None:
                fields["local_rank"] = int(g[key])
        if g.get("host") or g.get("host_b"):  # (host_b: another spelling's host in one prefix, "[dgx-b07:rank0]")
            if _names_itself(lc, g, fields):
                # A record that names its host beside its rank or pid is the writer's own word on its node
                # (socket.gethostname()); a collector's label before it ("trainer-1  | ", the same
                # container name on every node's compose console) only says who relayed the line.
                fields["host"] = g.get("host") or g["host_b"]
            else:
                fields.setdefault("host", g.get("host") or g["host_b"])
        if g.get("pod"):
            fields.setdefault("pod", g["pod"])
        if g.get("pid") or g.get("pid_b"):
            fields.setdefault("pid", int(g.get("pid") or g["pid_b"]))
        if g.get("srcfile"):  # (grep's file name, kept as excerpt_of: "srcfile" is a log statement's own)
            fields.setdefault("excerpt_of", g["srcfile"])
        if g.get("jpid"):
            fields.setdefault("stream_pid", int(g["jpid"]))
        if g.get("sysmon"):  # syslog's "Nov 27 15:03:57": as c10's MMDD time, the year from the file
            fields.setdefault("mmdd", f"{_MONTHS[g['sysmon']]}{int(g['sysday']):02d}")
            fields.setdefault("hms", g["syshms"])
        if g.get("ip"):
            fields.setdefault("ip", g["ip"])
        if g.get("coords"):  # a place in the parallel groups ("tp=1 dp=0"), sorted: "dp=0 tp=1" (model/links reads it)
            fields.setdefault("coords", " ".join(sorted(c[:2] + "=" + c[3:] for c in _COORD.findall(g["coords"].lower()))))
        if g.get("labels"):  # Loki's stream labels: the pod, else the host, is the line's node
            labels = dict(_LABEL.findall(g["labels"]))
            node = next((labels[k] for k in _NODE_LABELS if labels.get(k)), None)
            if node:
                fields.setdefault("host", node[:253])
        if lc.name == "ray_actor":
            r = _RAY_RANK.search(g.get("actor") or "")
            if r:
                fields["rank"] = int(r.group(1))


def _names_itself(lc: Launcher, g: dict, fields: dict) -> bool:
    """Whether a record's own prefix (not a collector's) names the writer's host together with its rank or pid,
    where the host so far is only a collector's label (every prefix before it a collector's)."""
    if lc.name in _COLLECTORS or "host" not in fields:
        return False
    if all(g.get(k) is None for k in ("rank", "rank_kv", "rank_sp", "rank_nc", "rank_lg", "pid", "pid_b")):
        return False
    return all(name in _COLLECTORS for name in fields["launchers"][:-1])


def detect_modes(sample_lines: list[str], launchers: tuple[Launcher, ...] | None = None) -> frozenset[str]:
    """Which ambiguous launchers apply to a file, judged on its first non-blank lines."""
    # as the scanner reads them: a colour code before a prefix (docker compose's coloured "trainer-1  | ") hides it
    lines = [clean_text(ln) for ln in sample_lines[:600] if ln.strip()][:200]
    if len(lines) < 3:
        return frozenset()
    all_l = launchers or load_launchers()
    base = LauncherStripper(frozenset(), all_l)
    stripped = []
    # the lines as written but for a collector's own stamp before them (a kubelet's time before a shell's date): what
    # a detect that reads the raw lines judges; stripped again only where the base strip took a collector's
    written = []
    collectors = None
    for ln in lines:  # one bare NCCL line vetoes every ambiguous prefix: stop at the first
        fields, rest = base.strip(ln)
        if _BARE_NCCL.match(rest):
            return frozenset()
        stripped.append(rest)
        if _COLLECTORS.isdisjoint(fields.get("launchers", ())):
            written.append(ln)
            continue
        if collectors is None:
            collectors = LauncherStripper(frozenset(), tuple(lc for lc in all_l if lc.name in _COLLECTORS and not lc.ambiguous))
        written.append(collectors.strip(ln)[1])
    modes: set[str] = set()
    for lc in all_l:
        if lc.ambiguous and _carries(lc, lc.detect, written, stripped):
            modes.add(lc.name)
    for lc in all_l:
        if lc.name in modes:
            modes.difference_update(lc.detect.overrides)
    return frozenset(modes)


def _carries(lc: Launcher, det: Detect, lines: list[str], stripped: list[str]) -> bool:
    """Whether enough of a file's first lines carry the prefix, with values of the shape its ``detect`` asks."""
    hits = 0
    values: set[str] = set()
    names: set[str] = set()
    containers: set[str] = set()
    for raw, ln in zip(lines, stripped, strict=False):
        # (a shell's time before every line is judged on the lines as written: a time-and-rank
        # prefix that a line starts with takes its time along when stripped)
        m = lc.regex.match(raw if det.raw_lines else ln)
        if not m:
            continue
        val = m.group(det.value) or ""
        if det.not_hosts and val in _NOT_HOSTS:
            continue
        if det.value_has not in val:
            continue  # a pod's name has a dash ("<job>-worker-0"); "step 10 ..." is no pod
        if det.max_containers is not None:
            containers.add(m.group("container"))
        hits += 1
        # pdsh's host names share a shape (dgx-h100-43, dgx-h100-50: "dgx-h0-0"); a
        # 128-node job shows 128 hosts in its first lines, words before a colon do not.
        values.add(_DIGITS.sub("0", val))
        names.add(val)
    return hits >= det.min_share * len(stripped) and \
        (not det.few_shapes or len(values) <= max(1, hits // 3)) and \
        (det.max_names is None or len(names) <= det.max_names) and len(names) >= det.min_names and \
        (det.max_containers is None or len(containers) <= det.max_containers) and \
        (not det.check or _CHECKS[det.check](lc, lines, stripped))


#: What follows a shell's date on lines no logger dates: a date of the record's own, a traceback, torch's or
#: torchrun's own lines, a launcher's label, an indented row of a failure table.
_UNDATED = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|Traceback \(most|\s|\[rank\d|\[default\d|[IWEF]\d{4} \d\d:|-{20}|"
                      r"Root Cause|Failures:")


def _dated_by_a_shell(lc: Launcher, lines: list[str], _stripped: list[str]) -> bool:
    """A date before lines that no logger dates (see _UNDATED): two of them at least."""
    return sum(1 for ln in lines if (m := lc.regex.match(ln)) and _UNDATED.match(ln, m.end())) >= 2


def _ranks_of_one_world(lc: Launcher, _lines: list[str], stripped: list[str]) -> bool:
    """"[r/w]" tags that are ranks, not a counter: six at least, one world size, every rank below it, and in an
    order no counter keeps (several ranks interleaved) or one rank only (its own file)."""
    tags = [(int(m.group("rank")), int(m.group("world"))) for ln in stripped if (m := lc.regex.match(ln))]
    worlds = {w for _r, w in tags}
    ranks = [r for r, _w in tags]
    if len(tags) < 6 or len(worlds) != 1 or not 1 < next(iter(worlds)) <= 65536 or max(ranks) >= next(iter(worlds)):
        return False
    return len(set(ranks)) == 1 or any(b < a for a, b in zip(ranks, ranks[1:], strict=False))


def _counts_lines(lc: Launcher, lines: list[str], _stripped: list[str]) -> bool:
    """Numbers that count the lines, not ranks: nearly each one more than the one before (blank lines, numbered too,
    are not in the sample: a gap of a few is allowed), twenty at least; or, in a short file, six or more from 1 on,
    each one more (srun's labels start at rank 0, and repeat)."""
    nums = [int(m.group("num")) for ln in lines if (m := lc.regex.match(ln))]
    steps = [b - a for a, b in zip(nums, nums[1:], strict=False)]
    counted = sum(1 for d in steps if 1 <= d <= 3)
    return (len(nums) >= 20 and counted >= 0.9 * len(steps)) or (len(nums) >= 6 and nums[0] == 1 and counted == len(steps))


#: The tests of their own that a ``detect`` may name (one world's "[r/w]" ranks, a shell's dates, line numbers).
_CHECKS = {"ranks_of_one_world": _ranks_of_one_world, "dated_by_a_shell": _dated_by_a_shell,
           "counts_lines": _counts_lines}


def head_lines(chunk: bytes, want: int = 600, limit: int = 256 << 10) -> list[str]:
    """The first ``want`` lines of a file (at most ``limit`` bytes), decoded: what launcher
    detection looks at (it keeps the first 200 non-blank ones). A small window is decoded first
    and is enough when it holds those 200 lines; a large chunk is never decoded whole."""
    for size in (32 << 10, limit):
        window = chunk[:size]
        lines = window.decode("utf-8", "replace").splitlines()
        if len(window) < len(chunk) and not window.endswith(b"\n"):
            lines = lines[:-1]  # cut mid-line: the next window has it whole
        lines = lines[:want]
        if len(window) == len(chunk) or size == limit or len(lines) == want \
                or sum(1 for ln in lines if ln.strip()) >= 200:
            return lines
    return lines
