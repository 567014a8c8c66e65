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
