"""Bytes of a Flight Recorder dump -> plain Python objects, safely and within budgets.

A dump left by a crashed job is untrusted input, and a few bytes can describe a lot: gzip/zstd
multiply them, and a pickle can reuse one object any number of times. So:

* **Nothing runs.** Pickles are checked opcode by opcode before anything is built: only plain
  containers and scalars (dict, list, tuple, str, bytes, int, float, bool, None) may appear; any
  opcode that imports or calls (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*,
  persistent ids, ...) refuses the whole file with a one-line reason. The unpickler that then builds
  the objects refuses ``find_class`` and persistent ids as well, so either check alone stops it.
* **What is built is bounded.** The same walk counts opcodes (each builds at most one object or
  reference, so ``MAX_OPS`` bounds the memory of what the unpickler builds), refuses memo indices
  beyond the opcode budget (the unpickler sizes its memo table to the largest index: a 5-byte
  ``LONG_BINPUT`` would ask for gigabytes), refuses tuples nested deeper than ``MAX_TUPLE_DEPTH``
  (hashing a dict key walks nested tuples recursively in C: a million-deep key crashes the
  interpreter) and numbers of more than 4300 digits. Lists and dicts may nest and share as they
  like: nothing here or in the normalisation walks them recursively. JSON is counted before it is
  parsed (``MAX_VALUES``); integers beyond 20 digits read as out of range (``TOO_LONG``).
* Decompressed dumps are refused beyond ``MAX_DUMP_BYTES``.
"""

from __future__ import annotations

import io
import json
import pickle
import pickletools
from typing import Any

#: A dump is a few MB at most (2000 entries with stacks); anything far larger is not one.
MAX_DUMP_BYTES = 256 << 20
#: Opcodes of one pickle (a 2000-entry dump with stacks has well under a million): each builds at
#: most one object or reference, so this bounds the unpickled objects to a few hundred MB.
MAX_OPS = 6_000_000
#: Values (numbers, strings, containers) of one JSON dump, counted before parsing.
MAX_VALUES = 6_000_000
#: Nesting of tuples (dumps hold 2-tuples like ``process_group``; keys may be tuples).
MAX_TUPLE_DEPTH = 64
#: Python refuses to convert longer decimal numbers (sys.int_info.default_max_str_digits).
MAX_DIGITS = 4300

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

#: The only pickle opcodes a dump needs: protocol/framing, stack and memo bookkeeping, scalars,
#: str/bytes, and list/tuple/dict building. Everything else (imports, calls, object building,
#: persistent ids, extension registry, sets, bytearrays, out-of-band buffers) is refused.
SAFE_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
    "PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET", "MEMOIZE",
    "NONE", "NEWTRUE", "NEWFALSE",
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
    "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
    "EMPTY_LIST", "APPEND", "APPENDS", "LIST",
    "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
    "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
})


class DumpError(Exception):
    """A dump that cannot be read; ``str(exc)`` is a one-line reason for the report."""


def sniff(head: bytes) -> str | None:
    """What the first bytes of a file look like: ``pickle``, ``json``, ``gzip``, ``zstd`` or None."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith(_ZSTD_MAGIC):
        return "zstd"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "json"
    return None


# ------------------------------------------------------------------------------------- pickle
class _PlainUnpickler(pickle.Unpickler):
    """Builds only what the opcode check let through; imports and persistent ids are refused again."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        raise DumpError(f"refused: the pickle asks to import {module}.{name} (a dump holds only plain data)")

    def persistent_load(self, pid):
        raise DumpError("refused: the pickle uses a persistent id (a dump holds only plain data)")


# What an opcode does, and how its argument is laid out (one code per combination: one dispatch per
# opcode in the walk below, which runs over every opcode of every dump).
(_PUSH_FIXED, _PUSH_LEN, _PUSH_LEN4S, _PUSH_LINE, _NUMBER_LINE, _PUT_FIXED, _PUT_LINE, _GET_FIXED, _GET_LINE,
 _MEMOIZE, _MARK, _POP, _POP_MARK, _DUP, _APPEND, _TO_MARK, _SETITEM, _BUILD_MARK, _TUPLE_MARK, _TUPLE_N,
 _SKIP_FIXED, _STOP, _UNSAFE) = range(23)
_EFFECT = {
    "PROTO": _SKIP_FIXED, "FRAME": _SKIP_FIXED, "STOP": _STOP, "MARK": _MARK, "POP": _POP, "POP_MARK": _POP_MARK,
    "DUP": _DUP, "PUT": _PUT_LINE, "BINPUT": _PUT_FIXED, "LONG_BINPUT": _PUT_FIXED, "MEMOIZE": _MEMOIZE,
    "GET": _GET_LINE, "BINGET": _GET_FIXED, "LONG_BINGET": _GET_FIXED, "INT": _NUMBER_LINE, "LONG": _NUMBER_LINE,
    "APPEND": _APPEND, "APPENDS": _TO_MARK, "SETITEM": _SETITEM, "SETITEMS": _TO_MARK,
    "LIST": _BUILD_MARK, "DICT": _BUILD_MARK, "TUPLE": _TUPLE_MARK,
    "TUPLE1": _TUPLE_N, "TUPLE2": _TUPLE_N, "TUPLE3": _TUPLE_N,
}
_TUPLE_ARITY = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}


def _opcode_table() -> tuple[list[tuple[int, int, int] | None], dict[int, str]]:
    """byte -> (what it does, argument size, tuple arity), and byte -> opcode name."""
    table: list[tuple[int, int, int] | None] = [None] * 256
    names: dict[int, str] = {}
    for op in pickletools.opcodes:
        arg = op.arg
        n = arg.n if arg is not None else 0
        code = op.code.encode("latin-1")[0]
        names[code] = op.name
        effect = _EFFECT.get(op.name)
        if op.name not in SAFE_OPCODES:
            table[code] = (_UNSAFE, 0, 0)
            continue
        if effect is None:  # a scalar, string or empty container: pushed
            effect = (_PUSH_FIXED if n >= 0 else _PUSH_LINE if n == pickletools.UP_TO_NEWLINE
                      else _PUSH_LEN4S if n == pickletools.TAKEN_FROM_ARGUMENT4 else _PUSH_LEN)
        size = (n if n >= 0 else 1 if n == pickletools.TAKEN_FROM_ARGUMENT1 else 4
                if n in (pickletools.TAKEN_FROM_ARGUMENT4, pickletools.TAKEN_FROM_ARGUMENT4U) else
                8 if n == pickletools.TAKEN_FROM_ARGUMENT8U else 0)
        table[code] = (effect, size, _TUPLE_ARITY.get(op.name, 0))
    return table, names


_OPCODES, _NAMES = _opcode_table()


def _refused(name: str, data: bytes, i: int) -> DumpError:
    what = ""
    if name in ("GLOBAL", "INST"):
        parts = data[i + 1:i + 200].split(b"\n", 2)[:2]
        what = " " + ".".join(p.decode("latin-1") for p in parts)
    return DumpError(f"refused: pickle opcode {name}{what} at byte {i} could run code; "
                     "a flight-recorder dump holds only plain containers and scalars")


def check_pickle(data: bytes | bytearray, max_ops: int = MAX_OPS) -> int:
    """Walk the opcodes without executing (or even decoding) any; raise DumpError on a disallowed,
    unknown or truncated one, or on a budget passed (see the module docstring). Returns the number
    of opcodes. Only tuple depths are simulated on the stack: they alone are walked recursively."""
    i, n, table = 0, len(data), _OPCODES
    frombytes = int.from_bytes
    stack: list[int] = []  # tuple depth of each stack item (0: not a tuple)
    push = stack.append
    marks: list[int] = []
    memo: dict[int, int] = {}
    ops = 0
    try:
        while i < n:
            spec = table[data[i]]
            if spec is None:
                raise DumpError(f"corrupt pickle: unknown opcode {data[i]:#04x} at byte {i}")
            effect, size, arity = spec
            ops += 1
            start = i
            i += 1
            if effect == _PUSH_FIXED:
                i += size
                push(0)
            elif effect == _PUSH_LEN:
                i += size + frombytes(data[i:i + size], "little")
                push(0)
            elif effect == _PUT_FIXED:
                idx = frombytes(data[i:i + size], "little")
                i += size
                if idx > max_ops:
                    raise _memo_error(idx, start, max_ops)
                memo[idx] = stack[-1]
            elif effect == _MEMOIZE:
                memo[len(memo)] = stack[-1]
            elif effect == _MARK:
                marks.append(len(stack))
            elif effect == _TO_MARK:
                del stack[marks.pop():]
            elif effect == _GET_FIXED:
                push(memo.get(frombytes(data[i:i + size], "little"), 0))
                i += size
            elif effect == _SETITEM:
                del stack[-2:]
            elif effect == _APPEND:
                stack.pop()
            elif effect == _TUPLE_MARK or effect == _TUPLE_N:
                at = marks.pop() if effect == _TUPLE_MARK else len(stack) - arity
                if at < 0:
                    raise IndexError
                depth = 1 + max(stack[at:], default=0)
                if depth > MAX_TUPLE_DEPTH:
                    raise DumpError(f"too deep: tuples nested more than {MAX_TUPLE_DEPTH} levels at byte {start}")
                del stack[at:]
                push(depth)
            elif effect == _BUILD_MARK:
                del stack[marks.pop():]
                push(0)
            elif effect == _SKIP_FIXED:
                i += size
            elif effect == _DUP:
                push(stack[-1])
            elif effect == _POP:  # an empty stack above a mark: POP drops the mark (as pickle does)
                if marks and marks[-1] == len(stack):
                    marks.pop()
                else:
                    stack.pop()
            elif effect == _POP_MARK:
                del stack[marks.pop():]
            elif effect == _STOP:
                if ops > max_ops:
                    raise _too_many(max_ops)
                return ops
            elif effect == _UNSAFE:
                raise _refused(_NAMES[data[start]], data, start)
            elif effect == _PUSH_LEN4S:
                length = frombytes(data[i:i + 4], "little", signed=True)
                if length < 0:
                    raise DumpError(f"corrupt pickle: negative length at byte {start}")
                i += 4 + length
                push(0)
            else:  # an argument up to a newline: PUT, GET, INT, LONG, STRING, UNICODE, FLOAT
                j = data.find(b"\n", i)
                if j < 0:
                    break
                arg, i = data[i:j], j + 1
                if effect == _PUT_LINE:
                    idx = int(arg)
                    if idx > max_ops:
                        raise _memo_error(idx, start, max_ops)
                    memo[idx] = stack[-1]
                elif effect == _GET_LINE:
                    push(memo.get(int(arg), 0))
                else:
                    if effect == _NUMBER_LINE and len(arg.strip(b" +-Ll")) > MAX_DIGITS:
                        raise DumpError(f"too large: a number of {len(arg.strip(b' +-Ll')):,} digits at byte {start}")
                    push(0)
            if ops > max_ops:
                raise _too_many(max_ops)
    except (IndexError, ValueError):
        raise DumpError(f"corrupt pickle: stack or memo misuse near byte {i}") from None
    raise DumpError(f"truncated: the pickle ends at byte {n} before its STOP opcode "
                    "(the process was probably killed while writing the dump)")


def _memo_error(idx: int, at: int, max_ops: int) -> DumpError:
    return DumpError(f"corrupt pickle: memo index {idx:,} at byte {at} (more than the {max_ops:,} objects "
                     "a dump may hold)")


def _too_many(max_ops: int) -> DumpError:
    return DumpError(f"too large: the pickle has more than {max_ops:,} opcodes "
                     "(a flight-recorder dump has well under a million)")


def loads_pickle(data: bytes | bytearray) -> Any:
    """Unpickle plain data only, within budgets (see module docstring)."""
    check_pickle(data)
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except DumpError:
        raise
    except RecursionError:
        raise DumpError("corrupt pickle: nested too deeply") from None
    except MemoryError:
        raise DumpError("too large: the pickle's objects do not fit in memory") from None
    except Exception as exc:  # stack underflow, bad memo index, APPEND on a non-list, ...
        raise DumpError(f"corrupt pickle: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}") from None


# --------------------------------------------------------------------------------------- JSON
#: What a JSON integer of more than 20 digits reads as: out of the 64-bit range, so the normalisation
#: ignores and counts it (converting thousands of digits is slow, beyond 4300 refused by Python).
TOO_LONG = 1 << 64


def _json_int(text: str) -> int:
    return int(text) if len(text) <= 21 else TOO_LONG


def loads_json(data: bytes | bytearray) -> Any:
    values = data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{") + 1
    if values > MAX_VALUES:
        raise DumpError(f"too large: the JSON dump holds about {values:,} values (more than {MAX_VALUES:,}; "
                        "a flight-recorder dump has well under a million)")
    try:
        return json.loads(data.decode("utf-8"), parse_int=_json_int)  # NaN/Infinity: range-checked where used
    except UnicodeDecodeError:
        raise DumpError("corrupt JSON dump: not UTF-8") from None
    except RecursionError:
        raise DumpError("corrupt JSON dump: nested too deeply") from None
    except MemoryError:
        raise DumpError("too large: the JSON dump's objects do not fit in memory") from None
    except json.JSONDecodeError as exc:
        if exc.pos >= len(data.rstrip()) - 1 or exc.msg.startswith("Unterminated string"):
            raise DumpError(f"truncated JSON dump: it ends at byte {len(data)} mid-document") from None
        raise DumpError(f"corrupt JSON dump: {exc.msg} at byte {exc.pos}") from None
    except ValueError as exc:
        raise DumpError(f"corrupt JSON dump: {str(exc)[:160]}") from None


def decode(data: bytes | bytearray) -> tuple[Any, str]:
    """Bytes of a dump (pickle or JSON) -> (plain Python object, encoding)."""
    if not data:
        raise DumpError("empty file (the process was probably killed before it wrote its dump)")
    kind = sniff(data[:64])
    if kind == "pickle":
        return loads_pickle(data), "pickle"
    if kind == "json":
        return loads_json(data), "json"
    try:  # no protocol header: a protocol 0/1 pickle (torch writes 2), or no dump at all
        return loads_pickle(data), "pickle"
    except DumpError as exc:
        if str(exc).startswith(("refused", "too ")) or data[:1] == b"\x80":
            raise
    raise DumpError(f"not a flight-recorder dump: neither a pickle nor JSON (starts with {bytes(data[:8])!r})")


def read_bytes(path: str, limit: int = MAX_DUMP_BYTES) -> bytearray:
    """The file's bytes, gzip/zstd transparently decompressed, refusing more than ``limit`` bytes."""
    from ..reading import open_binary

    try:
        fp = open_binary(path)
    except OSError as exc:
        raise DumpError(f"cannot open: {exc.strerror or exc}") from None
    data = bytearray()  # grown in pieces: read(limit) sets the whole limit aside, joining pieces doubles them
    try:
        while len(data) <= limit:
            piece = fp.read(min(1 << 20, limit + 1 - len(data)))
            if not piece:
                break
            data += piece
    except OSError as exc:  # truncated gzip, I/O error
        raise DumpError(f"read failed: {exc.strerror or exc}") from None
    except MemoryError:
        raise DumpError("too large: the decompressed dump does not fit in memory") from None
    except Exception as exc:  # zstandard.ZstdError, EOFError of a cut gzip stream
        raise DumpError(f"read failed: {type(exc).__name__}: {exc}"[:200]) from None
    finally:
        fp.close()
    if len(data) > limit:
        raise DumpError(f"too large for a flight-recorder dump (over {limit >> 20} MiB)")
    return data
