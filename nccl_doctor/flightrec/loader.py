"""Read one Flight Recorder dump safely and normalise it across format versions.

A dump left by a crashed job is untrusted input. Pickles are checked opcode by opcode before
anything is built: only plain containers and scalars (dict, list, tuple, str, bytes, int, float,
bool, None) may appear; any opcode that imports or calls (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST,
OBJ, NEWOBJ, EXT*, persistent ids, ...) refuses the whole file with a one-line reason. The
unpickler that then builds the objects refuses ``find_class`` and persistent ids as well, so the
check and the loader would each stop a hostile file alone. JSON dumps (``_dump_nccl_trace_json``,
``_dump_fr_trace_json``) are read too; gzip/zstd-compressed dumps are decompressed first.

Versions (``version`` key; ../shared/FORMATS.md section 3): a bare list (torch 2.2), "1.4" (2.3),
"2.1" (2.4), "2.4" (2.5-2.7), "2.9" (2.8), "2.10" (2.9+). Fields are read by presence, not by the
version string, so forks and future minors load too.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import pickletools
import re
from dataclasses import dataclass, field
from typing import Any

#: A dump is a few MB at most (2000 entries with stacks); anything far larger is not one.
MAX_DUMP_BYTES = 256 << 20

#: Default file-name prefixes of torch's DebugInfoWriter (TORCH_NCCL_DEBUG_INFO_TEMP_FILE /
#: TORCH_FR_DUMP_TEMP_FILE): ``/tmp/nccl_trace_rank_`` (2.2-2.6), ``~/.cache/torch/nccl_trace_rank_`` (2.7+).
DEFAULT_PREFIXES = ("nccl_trace_rank_",)
#: ``nccl_trace_rank_<N>`` with any extension (``.json``, ``.pkl``, ``.gz``, ...).
DUMP_NAME = re.compile("^(?:" + "|".join(map(re.escape, DEFAULT_PREFIXES)) + r")(\d{1,7})(?:\.[A-Za-z0-9]{1,10}){0,3}$")
_RANK_AT_END = re.compile(r"(\d{1,7})(?:\.(?:json|pkl|pickle|bin|gz|zst|zstd|dump)){0,3}$", re.I)

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


@dataclass(slots=True)
class Dump:
    """One dump, normalised: entries use the current (2.10) field names; see ``normalise_entry``."""

    path: str
    rank: int
    version: str
    encoding: str  # "pickle" | "json"
    entries: list[dict[str, Any]]
    pg_config: dict[str, dict[str, Any]] = field(default_factory=dict)  # group name -> name, desc, ranks
    pg_status: dict[int, dict[str, int]] = field(default_factory=dict)  # pg_id -> enqueued, started, completed
    comm_lib_version: str | None = None
    keys: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def backend(self) -> str | None:
        """``nccl``/``gloo``/... from the entries' profiling names (``gloo:all_reduce``)."""
        for e in self.entries:
            name = e.get("profiling_name") or ""
            if ":" in name:
                return name.split(":", 1)[0]
        return None


def is_dump_name(name: str) -> bool:
    """True for file names of the default dump prefix (``nccl_trace_rank_<N>``, any extension)."""
    return DUMP_NAME.match(os.path.basename(name)) is not None


def rank_from_name(name: str) -> int | None:
    """The global rank at the end of a dump's file name (``<prefix><rank>[.ext]``), as torch's analyzer does."""
    m = _RANK_AT_END.search(os.path.basename(name))
    return int(m.group(1)) if m else None


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


# ------------------------------------------------------------------------------------ decoding
class _PlainUnpickler(pickle.Unpickler):
    """Builds only what the opcode check let through; imports and persistent ids are refused again."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        raise DumpError(f"refused: the pickle asks to import {module}.{name} (a dump holds only plain data)")

    def persistent_load(self, pid):
        raise DumpError("refused: the pickle uses a persistent id (a dump holds only plain data)")


def _opcode_table() -> list[tuple[str, int, int] | None]:
    """byte -> (name, how its argument is laid out, size): 0 fixed size, 1 unsigned length prefix of
    ``size`` bytes, 2 up to a newline, 3 signed 4-byte length prefix."""
    table: list[tuple[str, int, int] | None] = [None] * 256
    for op in pickletools.opcodes:
        arg = op.arg
        n = arg.n if arg is not None else 0
        if n >= 0:
            spec = (op.name, 0, n)
        elif n == pickletools.UP_TO_NEWLINE:
            spec = (op.name, 2, 0)
        elif n == pickletools.TAKEN_FROM_ARGUMENT1:
            spec = (op.name, 1, 1)
        elif n == pickletools.TAKEN_FROM_ARGUMENT4:
            spec = (op.name, 3, 4)
        elif n == pickletools.TAKEN_FROM_ARGUMENT4U:
            spec = (op.name, 1, 4)
        else:  # TAKEN_FROM_ARGUMENT8U
            spec = (op.name, 1, 8)
        table[op.code.encode("latin-1")[0]] = spec
    return table


_OPCODES = _opcode_table()


def check_pickle(data: bytes) -> None:
    """Walk the opcodes without executing (or even decoding) any; raise DumpError on a disallowed,
    unknown or truncated one. Twice as fast as ``pickletools.genops``, which builds every argument."""
    i, n, table, safe = 0, len(data), _OPCODES, SAFE_OPCODES
    frombytes = int.from_bytes
    while i < n:
        spec = table[data[i]]
        if spec is None:
            raise DumpError(f"corrupt pickle: unknown opcode {data[i]:#04x} at byte {i}")
        name, layout, size = spec
        if name not in safe:
            what = ""
            if name in ("GLOBAL", "INST"):
                parts = data[i + 1:i + 200].split(b"\n", 2)[:2]
                what = " " + ".".join(p.decode("latin-1") for p in parts)
            raise DumpError(f"refused: pickle opcode {name}{what} at byte {i} could run code; "
                            "a flight-recorder dump holds only plain containers and scalars")
        start = i
        i += 1
        if layout == 0:
            i += size
        elif layout == 1:
            i += size + frombytes(data[i:i + size], "little")
        elif layout == 2:
            j = data.find(b"\n", i)
            if j < 0:
                break
            i = j + 1
        else:
            length = frombytes(data[i:i + 4], "little", signed=True)
            if length < 0:
                raise DumpError(f"corrupt pickle: negative length at byte {start}")
            i += 4 + length
        if i > n:
            break
        if name == "STOP":
            return
    raise DumpError(f"truncated: the pickle ends at byte {n} before its STOP opcode "
                    "(the process was probably killed while writing the dump)")


def loads_pickle(data: bytes) -> Any:
    """Unpickle plain data only (see module docstring)."""
    check_pickle(data)
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except DumpError:
        raise
    except RecursionError:
        raise DumpError("corrupt pickle: nested too deeply") from None
    except Exception as exc:  # stack underflow, bad memo index, APPEND on a non-list, ...
        raise DumpError(f"corrupt pickle: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}") from None


def loads_json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise DumpError("corrupt JSON dump: not UTF-8") from None
    except RecursionError:
        raise DumpError("corrupt JSON dump: nested too deeply") from None
    except json.JSONDecodeError as exc:
        if exc.pos >= len(data.rstrip()) - 1 or exc.msg.startswith("Unterminated string"):
            raise DumpError(f"truncated JSON dump: it ends at byte {len(data)} mid-document") from None
        raise DumpError(f"corrupt JSON dump: {exc.msg} at byte {exc.pos}") from None


def decode(data: bytes) -> tuple[Any, str]:
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
        if str(exc).startswith("refused") or data[:1] == b"\x80":
            raise
    raise DumpError(f"not a flight-recorder dump: neither a pickle nor JSON (starts with {data[:8]!r})")


def read_bytes(path: str, limit: int = MAX_DUMP_BYTES) -> bytes:
    """The file's bytes, gzip/zstd transparently decompressed, refusing more than ``limit`` bytes."""
    from ..reading import open_binary

    try:
        fp = open_binary(path)
    except OSError as exc:
        raise DumpError(f"cannot open: {exc.strerror or exc}") from None
    try:
        data = fp.read(limit + 1)
    except OSError as exc:  # truncated gzip, I/O error
        raise DumpError(f"read failed: {exc.strerror or exc}") from None
    except Exception as exc:  # zstandard.ZstdError, EOFError of a cut gzip stream
        raise DumpError(f"read failed: {type(exc).__name__}: {exc}"[:200]) from None
    finally:
        fp.close()
    if len(data) > limit:
        raise DumpError(f"too large for a flight-recorder dump (over {limit >> 20} MiB)")
    return data


# ------------------------------------------------------------------------------- normalisation
def _int(v: Any) -> int | None:
    """An int from an int, or from a numeric string (JSON dumps write pg_status values as strings)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,20}", v.strip()):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _ns(v: Any) -> int | None:
    """A timestamp in ns; None for absent (pickle) and 0 (JSON writes unset times as 0)."""
    n = _int(v)
    return n if n else None


def _sizes(v: Any) -> list[list[int]]:
    """``[[3, 4], [5]]``: a list of shapes, each a list of ints; anything else is dropped (never recursed)."""
    out: list[list[int]] = []
    if not isinstance(v, (list, tuple)):
        return out
    for shape in v[:4096]:
        if isinstance(shape, (list, tuple)):
            out.append([d for d in shape[:64] if isinstance(d, int) and not isinstance(d, bool)])
    return out


def _strs(v: Any) -> list[str]:
    return [s for s in v[:4096] if isinstance(s, str)] if isinstance(v, (list, tuple)) else []


def _frames(v: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(v, (list, tuple)):
        for fr in v[:64]:
            if isinstance(fr, dict):
                out.append({"name": str(fr.get("name", ""))[:200], "filename": str(fr.get("filename", ""))[:400],
                            "line": _int(fr.get("line"))})
    return out


def _str(v: Any, cap: int = 400) -> str | None:
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return v[:cap] if isinstance(v, str) else None


_P2P_NAME = re.compile(r"(?:^|:)(?:send|recv)\b")


def normalise_entry(e: dict[str, Any]) -> dict[str, Any]:
    """One entry of any version -> the 2.10 field names (``seq``/``p2p_seq`` short names added).

    2.2/2.3 had ``seq_id`` (one counter for every op) and no ``is_p2p``/``process_group``/dtypes;
    2.2 had ``time_created_us``. JSON dumps write tuples as lists, unset times as 0.
    """
    name = _str(e.get("profiling_name"), 200) or ""
    pg = e.get("process_group")
    guid = desc = None
    if isinstance(pg, (list, tuple)) and pg:
        guid = _str(pg[0], 200)
        desc = _str(pg[1], 200) if len(pg) > 1 else None
    is_p2p = e.get("is_p2p")
    if not isinstance(is_p2p, bool):
        is_p2p = bool(_P2P_NAME.search(name))
    coll = _int(e.get("collective_seq_id"))
    p2p = _int(e.get("p2p_seq_id"))
    legacy = _int(e.get("seq_id"))
    if coll is None and p2p is None and legacy is not None:  # torch 2.2/2.3: one counter
        if is_p2p:
            p2p = legacy
        else:
            coll = legacy
    created = _int(e.get("time_created_ns"))
    if created is None and _int(e.get("time_created_us")) is not None:
        created = _int(e.get("time_created_us")) * 1000
    duration = e.get("duration_ms")
    return {
        "record_id": _int(e.get("record_id")),
        "pg_id": _int(e.get("pg_id")),
        "pg_guid": guid,
        "pg_desc": desc,
        "collective_seq_id": coll,
        "p2p_seq_id": p2p,
        "op_id": _int(e.get("op_id")),
        "profiling_name": name,
        "is_p2p": is_p2p,
        "input_sizes": _sizes(e.get("input_sizes")),
        "output_sizes": _sizes(e.get("output_sizes")),
        "input_dtypes": _strs(e.get("input_dtypes")),
        "output_dtypes": _strs(e.get("output_dtypes")),
        "state": _str(e.get("state"), 40),
        "retired": e.get("retired") if isinstance(e.get("retired"), bool) else None,
        "time_created_ns": created or None,
        "time_discovered_started_ns": _ns(e.get("time_discovered_started_ns")),
        "time_discovered_completed_ns": _ns(e.get("time_discovered_completed_ns")),
        "duration_ms": float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None,
        "timeout_ms": _int(e.get("timeout_ms")),
        "thread_name": _str(e.get("thread_name"), 200),
        "frames": _frames(e.get("frames")),
    }


def _ranks(v: Any) -> list[int] | None:
    """pg_config ``ranks``: a string ``"[0, 1, 2]"`` in real dumps (a list tolerated)."""
    if isinstance(v, str):
        body = v.strip().strip("[]").strip()
        if not body:
            return []
        try:
            return [int(x) for x in body.split(",")]
        except ValueError:
            return None
    if isinstance(v, (list, tuple)):
        out = [_int(x) for x in v]
        return None if any(x is None for x in out) else out  # type: ignore[misc]
    return None


def normalise(obj: Any, path: str, rank: int, encoding: str) -> Dump:
    """A decoded dump of any version -> Dump. Raises DumpError when it is not a dump at all."""
    notes: list[str] = []
    if isinstance(obj, list):  # torch 2.2: the entries themselves
        top: dict[str, Any] = {"entries": obj, "version": "0"}
    elif isinstance(obj, dict):
        top = obj
    else:
        raise DumpError(f"not a flight-recorder dump: the top level is {type(obj).__name__}, not a dict or list")
    entries = top.get("entries")
    if not isinstance(entries, list):
        raise DumpError("not a flight-recorder dump: no list of entries")
    version = top.get("version")
    version = str(version) if isinstance(version, (str, int, float)) else "0"
    good = [e for e in entries if isinstance(e, dict)]
    if len(good) < len(entries):
        notes.append(f"{len(entries) - len(good)} malformed entries ignored")
    norm = [normalise_entry(e) for e in good]
    if good and not any(n["profiling_name"] or n["collective_seq_id"] is not None or n["p2p_seq_id"] is not None
                        for n in norm):
        raise DumpError("not a flight-recorder dump: its entries have no op names or sequence ids")
    pg_config: dict[str, dict[str, Any]] = {}
    cfg = top.get("pg_config")
    if isinstance(cfg, dict):
        for name, c in cfg.items():
            if isinstance(c, dict):
                pg_config[str(name)] = {"name": _str(c.get("name"), 200), "desc": _str(c.get("desc"), 200),
                                        "ranks": _ranks(c.get("ranks"))}
    pg_status: dict[int, dict[str, int]] = {}
    st = top.get("pg_status")
    if isinstance(st, dict):
        for pgid, s in st.items():
            pid = _int(pgid)
            if pid is None or not isinstance(s, dict):
                continue
            pg_status[pid] = {k: v for k, v in (("enqueued", _int(s.get("last_enqueued_collective"))),
                                                ("started", _int(s.get("last_started_collective"))),
                                                ("completed", _int(s.get("last_completed_collective"))))
                              if v is not None}
    lib = top.get("comm_lib_version", top.get("nccl_version"))
    return Dump(path=path, rank=rank, version=version, encoding=encoding, entries=norm, pg_config=pg_config,
                pg_status=pg_status, comm_lib_version=_str(lib, 100) or None,
                keys=tuple(str(k) for k in top) if isinstance(obj, dict) else (), notes=notes)


def load_dump(path: str, rank: int | None = None, data: bytes | None = None) -> Dump:
    """Read, check and normalise one dump. Raises DumpError with a one-line reason."""
    if rank is None:
        rank = rank_from_name(path)
    if data is None:
        data = read_bytes(path)
    obj, encoding = decode(data)
    if rank is None:
        raise DumpError("cannot tell the rank: the file name does not end in a rank number (<prefix><rank>)")
    return normalise(obj, path, rank, encoding)
