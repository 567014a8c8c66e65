"""The candidate-line prefilter: both engines (Hyperscan, pure re trie) equal the naive definition
"every line that contains at least one literal"."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nccl_doctor.formats import trie_regex
from nccl_doctor.prefilter import Prefilter

LITS = ["NCCL WARN", "NCCL version", "Init COMPLETE", "Init", "Watchdog caught", "-> ", "abc", "abcd", "b"]


def naive(buf: bytes, lits: list[str]) -> list[tuple[int, int]]:
    out, pos = [], 0
    for line in buf.split(b"\n"):
        if any(lit.encode() in line for lit in lits):
            out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def engines(lits: list[str]) -> list[Prefilter]:
    out = [Prefilter(lits, engine="re")]
    try:
        out.append(Prefilter(lits, engine="hyperscan"))
    except RuntimeError:
        pass  # the pure engine alone is tested where the hyperscan wheel is absent
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["x", "NCCL ", "WARN", "Init", " COMPLETE", "ab", "c", "d", "-> ", "\n", "é", "\x00"]),
                max_size=60))
def test_engines_equal_naive(parts):
    buf = "".join(parts).encode()
    expect = naive(buf, LITS)
    for pf in engines(LITS):
        assert pf.spans(buf) == expect, pf.engine


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["x", "NCCL ", "WARN", "Init", " COMPLETE", "ab", "c", "d", "-> ", "\n", "é"]),
                max_size=60))
def test_reported_literals_are_exactly_those_in_the_line(parts):
    """Where the engine reports literals per line, they are every literal the line holds, overlaps
    and literals inside others included: the formats pick candidate patterns from them."""
    buf = "".join(parts).encode()
    for pf in engines(LITS):
        for s, e, hits in pf.lines(buf):
            if hits is not None:
                assert hits == {lit for lit in LITS if lit.encode() in buf[s:e]}, pf.engine


def test_trie_regex_matches_exactly_the_literals():
    import re

    rx = re.compile(trie_regex(["abc", "abd", "x.y"]).encode())
    assert rx.search(b"__abd__") and rx.search(b"x.y") and not rx.search(b"xzy") and not rx.search(b"ab")


def test_empty_literal_set_is_refused():
    with pytest.raises(ValueError):
        Prefilter([])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["x", "NCCL ", "WARN", "Init", " COMPLETE", "ab", "c", "d", "-> ", "\n", "Q"]),
                max_size=60),
       st.lists(st.integers(0, 80), max_size=6))
def test_lazy_hit_lines_are_the_lines_merged_with_the_extra_ones(parts, floors):
    """HitLines yields what ``lines`` gives merged with the extra lines (a line in both with the union
    of its literals), in order; with the floor moved while iterating, the same but for lines
    starting at or before the floor (the caller skips those)."""
    try:
        pf = Prefilter(LITS, engine="hyperscan")
    except RuntimeError:
        pytest.skip("no hyperscan wheel here")
    buf = "".join(parts).encode()
    starts = [0] + [i + 1 for i, b in enumerate(buf) if b == 10]
    extra = []
    for s in starts:  # lines holding "Q" stand for the repetitive families found apart
        e = buf.find(b"\n", s)
        e = len(buf) if e < 0 else e
        if b"Q" in buf[s:e]:
            extra.append((s, e, frozenset({"Q"})))
    merged = {(s, e): hits for s, e, hits in pf.lines(buf)}
    for s, e, own in extra:
        merged[(s, e)] = merged.get((s, e), frozenset()) | own
    expect = sorted((s, e, hits) for (s, e), hits in merged.items())
    assert list(pf.hit_lines(buf, extra)) == expect
    lazy = pf.hit_lines(buf, extra)
    assert walk(lazy, floors, lambda f: setattr(lazy, "floor", f)) == walk(expect, floors, lambda f: None)


def walk(lines, floors: list[int], set_floor) -> list:
    """The scan's loop: skip what it consumed, then move the floor past the line by ``floors``."""
    got, floor, moves = [], -1, list(floors)
    for s, e, hits in lines:
        if s <= floor:
            continue
        got.append((s, e, hits))
        if moves:
            floor = max(floor, e + moves.pop(0))
            set_floor(floor)
    return got


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["x", "NCCL ", "WARN", "Init", " COMPLETE", "ab", "c", "d", "-> ", "\n", "Q"]),
                max_size=80),
       st.lists(st.integers(0, 80), max_size=6), st.integers(1, 24))
def test_hit_lines_scanned_a_window_at_a_time_are_the_same(parts, floors, window):
    """Hyperscan scans a chunk a window of whole lines at a time (prefilter.WINDOW_MIN, doubling to
    WINDOW_MAX), from the floor on when the caller took lines past the window: windows of a few
    bytes give the lines and literals of the naive definition, and with the floor moved, the same
    but for the lines the caller took."""
    import nccl_doctor.prefilter as prefilter

    try:
        pf = Prefilter(LITS, engine="hyperscan")
    except RuntimeError:
        pytest.skip("no hyperscan wheel here")
    buf = "".join(parts).encode()
    expect = [(s, e, frozenset(lit for lit in LITS if lit.encode() in buf[s:e])) for s, e in naive(buf, LITS)]
    old = prefilter.WINDOW_MIN, prefilter.WINDOW_MAX
    prefilter.WINDOW_MIN, prefilter.WINDOW_MAX = window, window * 4
    try:
        assert list(pf.hit_lines(buf)) == expect
        assert bool(pf.hit_lines(buf)) == bool(expect)
        lazy = pf.hit_lines(buf)
        got = walk(lazy, floors, lambda f: setattr(lazy, "floor", f))
    finally:
        prefilter.WINDOW_MIN, prefilter.WINDOW_MAX = old
    assert got == walk(expect, floors, lambda f: None)


@given(st.lists(st.sampled_from(["x", "NCCL ", "WARN", "Init", " COMPLETE", "ab", "c", "-> ", "é", "\n"]), max_size=40))
def test_literals_in_a_record_are_exactly_those_it_holds(parts):
    try:
        pf = Prefilter(LITS, engine="hyperscan")
    except RuntimeError:
        pytest.skip("no hyperscan wheel here")
    record = "".join(parts).encode()
    assert pf.literals_in(record) == {lit for lit in LITS if lit.encode() in record}
    assert Prefilter(LITS, engine="re").literals_in(record) is None  # the trie finds one per line only
