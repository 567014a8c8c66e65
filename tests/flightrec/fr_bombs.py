"""Hostile Flight Recorder dumps, built byte by byte: each is small on disk and would cost the run
everything if it were read naively (tests/flightrec/test_fr_budgets.py, benchmarks/hostile.py)."""

from __future__ import annotations

import gzip
import json
import pickle
import struct

PROTO = b"\x80\x02"


def _uni(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _put(i: int) -> bytes:
    return b"r" + struct.pack("<I", i)


def _get(i: int) -> bytes:
    return b"j" + struct.pack("<I", i)


def shared_reference_bomb(entries: int = 100_000, shapes: int = 4096, dims: int = 64) -> bytes:
    """One entry whose input/output sizes are one list of ``shapes`` references to one shape of
    ``dims`` ints, referenced ``entries`` times: a few hundred bytes gzipped, ``entries * shapes * dims``
    ints when each reference is copied. (gzip of the pickle.)"""
    shape = b"]" + _put(0) + b"(" + b"K\x01" * dims + b"e"
    sizes = b"]" + _put(1) + b"(" + _get(0) * shapes + b"e"
    entry = (b"}" + _put(2) + b"(" + _uni("profiling_name") + _uni("nccl:all_reduce") + _uni("pg_id") + b"K\x00"
             + _uni("collective_seq_id") + b"K\x01" + _uni("input_sizes") + _get(1) + _uni("output_sizes") + _get(1)
             + b"u")
    # Building the shape, sizes and entry leaves them on the stack: POP them, keep the memo.
    body = shape + b"0" + sizes + b"0" + entry + b"0"
    top = b"}(" + _uni("version") + _uni("2.10") + _uni("entries") + b"](" + _get(2) * entries + b"eu."
    return gzip.compress(PROTO + body + top, 9)


def huge_number(digits: int = 4301, field: str = "time_created_ns", encoding: str = "json") -> bytes:
    """A real-looking one-entry dump whose ``field`` is a number of ``digits`` digits."""
    number = "9" * digits
    if encoding == "json":
        return (f'{{"version": "2.10", "entries": [{{"profiling_name": "nccl:all_reduce", "pg_id": 0, '
                f'"collective_seq_id": 1, "{field}": {number}}}]}}').encode()
    # protocol 0 writes big ints as decimal text (LONG), which Python refuses beyond 4300 digits
    return pickle.dumps({"version": "2.10", "entries": [{"profiling_name": "nccl:all_reduce", "pg_id": 0,
                                                          "collective_seq_id": 1, field: int(number[:4000])}]},
                        protocol=0).replace(b"L" + number[:4000].encode(), b"L" + number.encode())


def far_timestamp(ns: int = 10**32) -> bytes:
    return pickle.dumps({"version": "2.10", "entries": [
        {"profiling_name": "nccl:all_reduce", "pg_id": 0, "collective_seq_id": 1, "time_created_ns": ns,
         "state": "started", "duration_ms": float("inf")}]}, protocol=2)


def deep_frame_name(depth: int = 200_000) -> bytes:
    """A frame whose ``name`` is a list nested ``depth`` levels (str() of it recurses)."""
    nested = b"]" * depth + b"a" * (depth - 1)
    frame = b"}(" + _uni("name") + nested + _uni("filename") + _uni("/job/train.py") + _uni("line") + b"K\x07u"
    entry = (b"}(" + _uni("profiling_name") + _uni("nccl:all_reduce") + _uni("pg_id") + b"K\x00"
             + _uni("collective_seq_id") + b"K\x01" + _uni("frames") + b"](" + frame + b"eu")
    return gzip.compress(PROTO + b"}(" + _uni("version") + _uni("2.10") + _uni("entries") + b"](" + entry + b"eu.", 9)


def deep_tuple_key(depth: int = 1_000_000) -> bytes:
    """A dict key that is a tuple nested ``depth`` levels: hashing it recurses in C."""
    return gzip.compress(PROTO + b"})" + b"\x85" * depth + b"Ns.", 9)


def memo_bomb(index: int = 0x7FFF_FFFF) -> bytes:
    """Five bytes that ask the unpickler for a memo table of ``index`` slots."""
    return PROTO + b"N" + _put(index) + b"."


def many_entries_json(entries: int = 20_000_000) -> bytes:
    """A gzipped JSON dump of ``entries`` empty entries (each an object when parsed)."""
    head = b'{"version": "2.10", "entries": ['
    return gzip.compress(head + b"{}," * (entries - 1) + b'{}]}', 9)


def long_ranks_json(world: int = 100_000) -> bytes:
    """A JSON dump whose default group claims ``world`` ranks."""
    return json.dumps({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                               "ranks": str(list(range(world)))}},
                       "entries": [{"profiling_name": "nccl:all_reduce", "pg_id": 0, "collective_seq_id": 1,
                                    "process_group": ["0", "default_pg"], "state": "started"}]}).encode()
