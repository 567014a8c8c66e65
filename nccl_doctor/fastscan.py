"""The fast scan path: Hyperscan's literal hits decide, per candidate line, whether the line needs
the general path at all; plain lines are matched through a memo of their message.

Most candidate lines of a large job are *plain*: printable ASCII, no launcher prefix, one record,
not the head of a multi-line block. For those, everything the general path does besides matching
(cleaning, stripping prefixes, splitting glued records, joining blocks) is the identity, so the
event is ``make_event(*match(line, hits), {}, ...)``. Matching is memoised on what it depends on:
the literals the line holds (they fix the candidate patterns, all of one format) and the text
after that format's line prefix (``host:pid:tid [dev] `` for NCCL, the c10 prefix for torch). The
prefix's own fields are converted once per distinct prefix already (``FormatSet._head_fields``).
Thousands of ranks print the same messages ("NCCL INFO Connected all rings", the IB device list,
the environment), so most lines are a dictionary lookup instead of a regex search.

Every other line (non-ASCII, control characters, a launcher label, glued records, block heads,
lines no pattern matches, which may be hard-wrapped) takes the general path, line by line, in
order: the two paths give identical scans (``tests/test_fast_scan.py`` compares them).
"""

from __future__ import annotations

import re

from .eventcap import _COUNTER
from .events import Event
from .formats import _MAX_INT_DIGITS, field_dict, progress_in_error
from .jsonlog import RECORD_LAUNCHERS
from .launchers import LauncherStripper
from .records import _GLUE, _NCCL_AT_START, BLOCK_LITERALS
from .regex_facts import DIGIT_SHAPE, digit_blind
from .scan_events import make_event
from .scanner import REPEAT_CAPS, FileScan, Scanner

_RECORDS = frozenset(RECORD_LAUNCHERS)  # structured records: their text is not their line

#: Bytes that send a line to the general path: anything but printable ASCII and tab.
_NOT_PLAIN = re.compile(rb"[^\t\x20-\x7e]")
_BLOCKS = frozenset(BLOCK_LITERALS)
_NO_PREFIX: dict = {}  # the launcher fields of a line without a launcher prefix (never modified)
#: Memo entries kept per process before a memo starts afresh (bounded whatever the input): lines
#: keyed on their digit shape repeat across ranks; lines keyed on their exact text (patterns that
#: read digits, such as a communicator's hex address) repeat less, so that memo is smaller.
MEMO_MAX = 100_000
EXACT_MEMO_MAX = 20_000
#: Lines one shape run takes at most (its counters are held in a list meanwhile); the next line
#: then starts a new run.
RUN_MAX = 1 << 16
#: Run plans kept per process (each holds a compiled regex): bounded whatever the input.
RUN_PLANS_MAX = 4096
#: Records whose match is memoised (their text at most this long), and how many are kept per process.
RECORD_MEMO_TEXT = 1024
RECORD_MEMO_MAX = 20_000
_UNSEEN = object()
#: The fields a record's time is read from (timeparse.event_time): a shape run's lines have none.
_TIME_FIELDS = frozenset(("ts", "mmdd", "hms", "hvdtime", "mdyts"))


class FastScanner(Scanner):
    """A Scanner whose candidate lines skip the general path when they are plain (see module doc).

    Needs a prefilter that reports every literal of a line (Hyperscan): with the pure-``re``
    prefilter the general path is taken for every line, which is the plain Scanner."""

    def __init__(self, formats=None, engine: str | None = None):
        super().__init__(formats, engine)
        fs = self.formats
        self._match = fs.match
        self._memo: dict = {}  # digit shape -> match spans
        self._records: dict = {}  # record text -> match_record's answer (see _match_record)
        self._multi: dict = {}  # hits of candidates of several formats -> all digit-blind (_fast_match_formats)
        self._exact: dict = {}  # exact text -> match fields
        # hits -> (format, every candidate needs its prefix, every candidate digit-blind) when all
        # candidates of those literals are of one format, else False (matched without the memo)
        self._plans: dict = {}
        self._blind = tuple(digit_blind(p.regex) for p in fs.patterns)
        # pattern index -> (name, is_int, group number) of its named groups, in group order
        self._groups = tuple(tuple(zip(pl.names, pl.is_int, pl.gidx, strict=True)) for pl in fs._plans)
        # shape runs (see _run_after): (literals, digit shape) -> plan or False; facts per gate, per format
        self._runs: dict = {}
        self._gates: dict = {}
        self._blind_heads = {name: all(digit_blind(rx) for rx, _g in heads) for name, heads in fs._heads.items()}
        if self.prefilter.engine == "hyperscan":
            self.match_record = self._match_record
        self._repeat_literals = tuple(lit.decode() for lit in REPEAT_CAPS)
        self._digit_literals = tuple(lit.translate(DIGIT_SHAPE) for lit in self.prefilter.literals
                                     if any(0x30 <= c <= 0x39 for c in lit))

    def _match_record(self, record: str, hits: frozenset | None = None) -> tuple[str, dict] | None:
        """``FormatSet.match`` of a record whose literals the caller does not know (a block or
        wrapped record joined from several lines, a head line): they are found by one Hyperscan
        call over the record instead of a literal scan over its digit shape (two regex passes,
        the costliest part of a long C++ stack line). The answer is the same: FormatSet.match
        checks every candidate's literal in the record either way."""
        if hits is not None:
            return self._match(record, hits)
        # The answer depends on the text alone: records repeat across a job's files (a C++ frame line,
        # a failure table's rows, the lines a hard-wrap check looks at around them), so it is memoised.
        known = self._records.get(record, _UNSEEN)
        if known is _UNSEEN:
            hits = self.prefilter.literals_in(record.encode("utf-8", "surrogatepass"))
            repeat = [lit for lit in self._repeat_literals if lit in record]
            if repeat:  # (not in the prefilter: see Scanner.__init__)
                hits = hits.union(repeat)
            known = self._match(record, hits)
            if len(record) <= RECORD_MEMO_TEXT:
                if len(self._records) >= RECORD_MEMO_MAX:
                    self._records.clear()
                self._records[record] = known
        return None if known is None else (known[0], dict(known[1]))  # (a copy: events take fields out)

    def _candidate_spans(self, chunk: bytes, base_line: int, out: FileScan) -> list:
        """As the general path's, but the lines of the repetitive families get their literal sets
        too (the prefilter's literals in the line plus the family literals it holds: every format
        literal of the line), so that they can take the fast path; and with Hyperscan the lines are
        grouped lazily (``HitLines``)."""
        extra = self._repeat_spans(chunk, base_line, out)
        # (sorted: _repeat_spans lists one family after the other)
        lazy = self.prefilter.hit_lines(chunk, [(s, e, frozenset(lit.decode() for lit in REPEAT_CAPS if lit in chunk[s:e]))
                                                for s, e in sorted(extra)])
        if lazy is not None:
            return lazy  # grouped as the scan reaches them: the lines a shape run took are passed over
        spans = self.prefilter.lines(chunk)
        if not extra:
            return spans
        merged = {(s, e): hits for s, e, hits in spans}
        merged.update(((s, e), None) for s, e in extra)
        return sorted((s, e, hits) for (s, e), hits in merged.items())

    def _plain_line(self, raw: bytes, hits: frozenset, line_no: int, stripper: LauncherStripper, year: int,
                    out: FileScan, capped: list) -> Event | None:
        if not _BLOCKS.isdisjoint(hits) or _NOT_PLAIN.search(raw) is not None:
            return None
        body = raw.decode("ascii")
        lf = _NO_PREFIX
        gate = stripper._gate
        if gate is not None and gate.match(body) is not None:
            # A launcher prefix (``[rank3]:``, a kubectl time): stripped as the general path does;
            # the record is then a suffix of the line, holding the line's literals that lie in it.
            # Open MPI's tag (removed mid-record too) and a second prefix inside take the general path.
            lf, body = stripper.strip(body)
            applied = lf.get("launchers", ())
            if "openmpi_tag" in applied or not _RECORDS.isdisjoint(applied) or gate.match(body) is not None:
                return None  # (a JSON record's text holds literals its line did not: the general path)
            hits = frozenset(lit for lit in hits if lit in body)
        if not body or body.isspace() or body.startswith("    "):
            return None  # (an indented line may be a traceback's quoted source, which is skipped)
        if (body.find("[rank", 1) >= 0 or body.find("[R", 1) >= 0
                or ("NCCL " in body and (body.count("NCCL ") > 1 or _NCCL_AT_START.match(body) is None))) \
                and _GLUE.search(body, 1) is not None:
            # A glued record may start mid-line: split_glued cuts there. Where _GLUE finds no start,
            # it cuts nowhere (torch's "[Rank 3]", NCCL's "[RO]" are no record starts).
            return None
        m = self._fast_match(body, raw, hits)
        if m is None:
            return None  # no match: maybe a hard-wrapped record, which the general path joins
        if m[0] == "python_exception" and not str(m[1].get("msg") or "").strip():
            return None  # its message is on the next lines (records.join_block joins them)
        kind = m[0]
        if kind in _REPEAT_KINDS:
            self._count_repeat(kind, out, capped)
        else:
            out.parsed += 1
        ev = make_event(kind, m[1], lf, out.path, line_no, body, year)
        out.add(ev)
        return ev

    def _run_after(self, chunk: bytes, s: int, e: int, ev: Event, hits: frozenset, line_no: int,
                   stripper: LauncherStripper, year: int, out: FileScan, capped: list) -> int:
        """A *shape run*: the lines right after a plain step/epoch line that have its digit shape.

        Such a line gives the same decisions all the way (see ``_run_plan``: same literals, no
        launcher prefix, same pattern at the same spans), so it is the same kind of event of the
        same writer, with no time, whose only value the cap reads is its counter. A compiled regex
        finds the run in one call; the counters are read at their fixed offsets. Only the lines the
        cap could keep become events, as ``_plain_line`` makes them (the same pattern, its groups at
        the same spans): the stream's first ones,
        both sides of a counter going down, and the run's last ``last`` ones (whatever follows may
        pin or pop those). The others are counted (``EventCap.pass_over``), which leaves the cap as
        adding each of them would have: it would drop them when they left the window. Returns the
        newline ending the run's last line, -1 when there is no run."""
        cap = out.capper
        if cap is None or ev.kind not in _COUNTER:
            return -1
        raw = chunk[s:e]
        shape = raw.translate(DIGIT_SHAPE)
        width = e - s + 1
        if chunk[e + 1:e + width].translate(DIGIT_SHAPE) != shape:
            return -1  # the next line is not of this shape: no run (and no plan made for one)
        plan = self._memoised(self._runs, RUN_PLANS_MAX, (hits, shape), self._run_plan, raw, shape, hits, ev)
        gate = stripper._gate
        if plan is False or (gate is not None and (not self._blind_gate(gate) or gate.match(raw.decode()))):
            return -1
        rx, counter, idx, spans = plan
        m = rx.match(chunk, e)
        if m is None:
            return -1
        starts = range(e + 1, m.end(), width)
        if isinstance(counter, tuple):
            a, b = counter
            values: list | None = [int(chunk[p + a:p + b]) for p in starts]
        else:
            values = None
        keeps = cap.run_keeps(ev, len(starts), values)
        if keeps is None:
            return -1
        pos = e
        over = 0
        for i, p in enumerate(starts):
            if keeps[i]:
                if over:
                    cap.pass_over(ev, over, values[i - 1] if values is not None else None)
                    out.parsed += over
                    over = 0
                # What _plain_line would give (same shape, same decisions), from the run's plan.
                text = chunk[p:p + width - 1].decode("ascii")
                kind, fields = self._fields(idx, field_dict((name, text[a:b], is_int) for name, is_int, a, b in spans))
                out.parsed += 1
                out.add(make_event(kind, fields, _NO_PREFIX, out.path, line_no + 1 + i, text, year))
            else:
                over += 1
            pos = p + width - 1
        return pos

    def _run_plan(self, raw: bytes, shape: bytes, hits: frozenset, ev: Event):
        """(regex of the lines after one of this shape that have it too, the counter: its (start,
        end) in the line, or its value when no group gives it; the pattern index and its groups'
        (name, is_int, start, end)) when every line of ``shape`` takes
        the decisions ``raw`` took (see ``_run_after``), else False. Every step that reads the line
        must then be blind to digits: the literals found (none holds a digit that could occur
        here), the launcher gate (checked per file), the format's line prefix (none), the
        candidate patterns (digit-blind, memoised on the shape), and its fields hold no time."""
        if ev.host is not None or ev.pid is not None or ev.rank is not None or ev.local_rank is not None \
                or ev.ts is not None or not _TIME_FIELDS.isdisjoint(ev.fields) or b"NCCL " in raw \
                or any(lit in shape for lit in self._digit_literals) or any(lit in raw for lit in REPEAT_CAPS):
            return False
        plan = self._plans.get(hits)
        if not plan or not plan[2] or not self._blind_heads[plan[0]] or \
                self.formats._header(plan[0], raw.decode()) is not None:
            return False
        text = raw.decode()
        hit = self._memoised(self._memo, MEMO_MAX, (hits, True, shape), self._spans_of, text, hits, True)
        if hit is False:
            return False
        name = _COUNTER[ev.kind]
        value = ev.fields.get(name)
        counter = value if isinstance(value, int) else None
        for gname, is_int, a, b in hit[1]:
            if gname == name:
                if is_int and (not raw[a:b].isdigit() or b - a > _MAX_INT_DIGITS):
                    return False  # (a counter of digits only is read as int() reads it: see field_dict)
                counter = (a, b) if is_int else None
        line = b"".join(b"[0-9]" if c == 0x30 else re.escape(bytes((c,))) for c in shape)
        return re.compile(rb"(?:\n" + line + rb"){1,%d}(?![^\n])" % RUN_MAX), counter, hit[0], hit[1]

    def _blind_gate(self, gate: re.Pattern) -> bool:
        blind = self._gates.get(gate)
        if blind is None:
            blind = self._gates[gate] = digit_blind(gate)
        return blind

    def _fast_match(self, text: str, raw: bytes, hits: frozenset) -> tuple[str, dict] | None:
        """``FormatSet.match(text, hits)`` for a plain record (``text`` ends ``raw``), memoised."""
        plan = self._plans.get(hits)
        if plan is None:
            plan = self._plans[hits] = self._plan(hits)
        if plan is False:
            return self._fast_match_formats(text, raw, hits)
        fs = self.formats
        fmt, prefix_required, blind = plan
        head = fs._header(fmt, text)
        if head is None:
            if prefix_required:
                return None  # every candidate needs its format's prefix, and the line has none
            start, hnames, hvalues = 0, (), ()
        else:
            start, hnames, hvalues = head
        rest = text[start:] if start else text
        if blind:
            # Keyed on the digit shape: the spans found on one line hold for every line of that shape.
            hit = self._memoised(self._memo, MEMO_MAX,
                                 (hits, head is None, raw[len(raw) - len(rest):].translate(DIGIT_SHAPE)),
                                 self._spans_of, rest, hits, head is None)
            if hit is False:
                return None
            idx, spans = hit
            groups = field_dict((name, rest[a:b], is_int) for name, is_int, a, b in spans)
        else:
            hit = self._memoised(self._exact, EXACT_MEMO_MAX, (hits, head is None, rest), self._match_rest, rest,
                                 hits, head is None)
            if hit is False:
                return None
            idx, groups = hit
        return self._fields(idx, groups, hnames, hvalues)

    def _fast_match_formats(self, text: str, raw: bytes, hits: frozenset) -> tuple[str, dict] | None:
        """``FormatSet.match(text, hits)`` where the candidates belong to several formats (NCCL's and
        torch's patterns of one literal): memoised on the record's digit shape when every candidate and
        every line prefix of their formats is digit-blind (then the pattern that wins, its prefix's end
        and its groups' spans are the same for every record of that shape), else matched as is."""
        blind = self._multi.get(hits)
        if blind is None:
            fs = self.formats
            cand = fs._hit_candidates(hits)
            blind = self._multi[hits] = all(self._blind[i] and self._blind_heads[fs.patterns[i].format] for i in cand)
        if not blind:
            return self._match(text, hits)
        hit = self._memoised(self._memo, MEMO_MAX, (hits, None, raw[len(raw) - len(text):].translate(DIGIT_SHAPE)),
                             self._spans_across, text, hits)
        if hit is False:
            return None
        idx, headed, spans = hit
        hnames: tuple = ()
        hvalues: tuple = ()
        start = 0
        if headed:
            start, hnames, hvalues = self.formats._header(self.formats.patterns[idx].format, text)
        rest = text[start:] if start else text
        return self._fields(idx, field_dict((name, rest[a:b], is_int) for name, is_int, a, b in spans), hnames, hvalues)

    def _spans_across(self, text: str, hits: frozenset):
        """(pattern index, whether its format's prefix was read, (name, is_int, start, end) of its groups
        in the text after the prefix) of the pattern FormatSet.match would take, or False: its loop."""
        fs = self.formats
        headers: dict = {}
        for idx in fs._hit_candidates(hits):
            pat = fs.patterns[idx]
            if not any(lit in text for lit in pat.contains):
                continue
            name = pat.format
            head = headers[name] if name in headers else headers.setdefault(name, fs._header(name, text))
            if head is None and fs._plans[idx].prefix_required:
                continue
            start = head[0] if head is not None else 0
            m = pat.regex.search(text[start:] if start else text)
            if m is None or progress_in_error(pat.kind, text):
                continue
            return idx, head is not None, tuple((gname, is_int, *m.span(g)) for gname, is_int, g in self._groups[idx]
                                                if m.start(g) >= 0)
        return False

    def _fields(self, idx: int, groups: dict, hnames: tuple = (), hvalues: tuple = ()) -> tuple[str, dict]:
        """The kind and fields of a record matched by pattern ``idx``, as FormatSet.match builds them:
        constants, then the line prefix's fields, then the groups, then the booleans."""
        fs = self.formats
        p = fs._plans[idx]
        fields = dict(p.consts) if p.consts else {}
        if hnames:
            fields.update(fs._head_fields(p.ints, hnames, hvalues))
        fields.update(groups)
        for name in p.bools:
            value = fields.get(name)
            fields[name] = bool(value.strip()) if isinstance(value, str) else bool(value)
        return fs.patterns[idx].kind, fields

    @staticmethod
    def _memoised(memo: dict, size: int, key: tuple, compute, *args):
        hit = memo.get(key)
        if hit is None:
            hit = compute(*args)
            if len(memo) >= size:
                memo.clear()
            memo[key] = hit
        return hit

    def _plan(self, hits: frozenset):
        """(format, all candidates need its prefix, all are digit-blind) when every candidate
        pattern of ``hits`` belongs to one format (the usual case), else False: such lines go
        through FormatSet.match as is."""
        fs = self.formats
        cand = fs._hit_candidates(hits)
        formats = {fs.patterns[i].format for i in cand}
        if len(formats) != 1:
            return False
        return (next(iter(formats)), all(fs._plans[i].prefix_required for i in cand),
                all(self._blind[i] for i in cand))

    def _first_match(self, rest: str, hits: frozenset, headless: bool):
        """(pattern index, match) of the first candidate matching ``rest``, or (None, None).

        As FormatSet.match: candidates in priority order, a candidate that needs its format's prefix
        skipped when the line has none. Every candidate's literal is in the record (``hits`` are the
        literals of the line that lie in the record), so the literal check always passes."""
        fs = self.formats
        for idx in fs._hit_candidates(hits):
            if headless and fs._plans[idx].prefix_required:
                continue
            m = fs.patterns[idx].regex.search(rest)
            if m is not None and not progress_in_error(fs.patterns[idx].kind, rest):
                return idx, m
        return None, None

    def _match_rest(self, rest: str, hits: frozenset, headless: bool):
        idx, m = self._first_match(rest, hits, headless)
        return False if m is None else (idx, self.formats._plans[idx].group_fields(m))

    def _spans_of(self, rest: str, hits: frozenset, headless: bool):
        """(pattern index, ((name, is_int, start, end) of each group that took part)) or False."""
        idx, m = self._first_match(rest, hits, headless)
        if m is None:
            return False
        return idx, tuple((name, is_int, *m.span(g)) for name, is_int, g in self._groups[idx] if m.start(g) >= 0)


_REPEAT_KINDS = frozenset(kind for _cap, kind in REPEAT_CAPS.values())
