"""From physical lines to records: split glued records, join known multi-line blocks.

* Glued: several records on one physical line (tqdm's ``\\r``; an NCCL prefix or a torch
  ``[rankN]:[E`` found mid-line because two processes wrote to one stream).
* Blocks: the torchrun rendezvous ``Result:`` block, ChildFailedError entries, Horovod stall lists
  and hard-wrapped records are joined into one record so that one pattern can read them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .reading import clean_line

#: Where a second record starts inside a line. Bounded repetitions keep it linear on hostile text.
_GLUE = re.compile(r"\[rank\d{1,7}\]:\[[IWEF]|(?<![\w.:-])[\w.-]{1,120}:\d{1,10}:\d{1,10} \[\d{1,4}\] NCCL (?:INFO|WARN) "
                   # a script's rank tag (two ranks' prints on one line when their writes interleave)
                   r"|\[(?:[Rr]ank[_=:-]|rank |RANK[ _=:-]?)\d{1,7}\] ")


#: The end of a progress bar's last segment ("[00:02<00:01, 8.06it/s, loss=1.8052]") with a dated error record glued on
#: (only an error's: a step record cut out of a bar would give its file a time the rest of its lines lack).
_AFTER_BAR = re.compile(r"(?:it/s|s/it)[^\]\n]{0,200}\](?=(?:\d{4}-\d{2}-\d{2}|\d{2}/\d{2}/\d{4})[ T]\d{2}:\d{2}:\d{2}"
                        r"[^\n]{0,80}?\b(?:ERROR|CRITICAL)\b)")
_TS_ONLY = re.compile(r"\s{0,8}\[[\d: .,T-]{10,40}\] ?")
#: A Python logging record's own prefix (time, level, logger name): a rank tag after it is the
#: record's ("... - ERROR - __main__ - [RANK 2] ...", Accelerate's logger; loguru's "... | ERROR    |
#: __main__:train:99 - [rank 1] ..."; "... - train - ERROR - [RANK 0] ...", the logger's name first), not a
#: second record.
_LOG_PREFIX_ONLY = re.compile(r"\s{0,8}(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?|\d{2}/\d{2}/\d{4} "
                              r"\d{2}:\d{2}:\d{2})(?: {1,2}[|-])? {1,2}"
                              r"(?:(?!DEBUG|INFO|WARN|ERROR|CRITICAL|SUCCESS)[\w.<>-]{1,64} {1,2}[|-] {1,2})?"  # (a logger name first)
                              r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|SUCCESS)"
                              r"(?: {1,8}[|:-])? {1,2}(?:[\w.<>]{1,64}:[\w.<>]{1,64}:\d{1,7} - |[\w.<>]{1,64} {1,2}[|:-] {1,2}"
                              r"|[\w.<>]{1,64}: )?")
_NCCL_AT_START = re.compile(r"\s{0,8}(?:\[[\d: .-]{10,40}\] )?[\w.-]{1,120}:\d{1,10}:\d{1,10} (?:\[\d{1,4}\] )?")


def split_glued(text: str) -> list[str]:
    """Split one cleaned physical line into records (``\\r`` and mid-line record starts)."""
    if "\r" not in text and text.find("[rank", 1) < 0 and text.find("[R", 1) < 0:  # the common case, no copies
        n_nccl = text.count("NCCL ")
        if n_nccl == 0 or (n_nccl == 1 and _NCCL_AT_START.match(text)):
            return [text] if text and not text.isspace() else []
    parts = text.split("\r") if "\r" in text else [text]
    if len(parts) > 1 and (m := _AFTER_BAR.search(parts[-1])) is not None:
        # a progress bar that never ended its line, and a record written after it ("... 8.06it/s, loss=1.8]11/28/2026
        # 19:38:24 - ERROR - ..."): the record starts a line of its own
        parts[-1:] = [parts[-1][:m.end()], parts[-1][m.end():]]
    out: list[str] = []
    for part in parts:
        n_nccl = part.count("NCCL ")
        glued_rank = "[rank" in part[1:] or "[Rank" in part[1:] or "[RANK" in part[1:]
        if not glued_rank and (n_nccl == 0 or (n_nccl == 1 and _NCCL_AT_START.match(part))):
            if part.strip():  # the common case: one record, no mid-line start to look for
                out.append(part)
            continue
        # A record start after nothing but a timestamp ("[2025-05-10 23:09:41] host:pid:tid [0] NCCL
        # INFO NCCL version ...": two "NCCL " in one record) is that record's own prefix, not a glue.
        cuts = [m.start() for m in _GLUE.finditer(part) if m.start() > 0 and not _TS_ONLY.fullmatch(part, 0, m.start())
                and not _LOG_PREFIX_ONLY.fullmatch(part, 0, m.start())]
        start = 0
        for c in cuts:
            if part[start:c].strip():
                out.append(part[start:c])
            start = c
        if part[start:].strip():
            out.append(part[start:])
    return out


# ---- multi-line blocks -------------------------------------------------------------------------

_KV = re.compile(r"^\s+(\w{1,40})=(.{0,2000})$")
_CFE_IDX = re.compile(r"^\s{0,4}\[(\d{1,7})\]:\s*$")
_CFE_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.{0,2000})$")
_STALL_RANK = re.compile(r"^\s{0,8}\d{1,7}!?: \[")
_CFE_ROOT = "Root Cause (first observed failure):"
_CFE_FAIL = "Failures:"

NextLine = Callable[[], "str | None"]


def join_block(record: str, next_line: NextLine, peek_line: NextLine) -> list[str] | None:
    """If ``record`` heads a known block, consume its continuation lines and return the records.

    ``peek_line`` returns the following line (launcher prefix stripped) without consuming it;
    ``next_line`` consumes it. Returns None when the record is not a block header.
    """
    stripped = record.strip()
    if stripped.endswith("Result:") and "Rendezvous complete" in record:
        parts = [stripped]
        for _ in range(40):
            nxt = peek_line()
            if nxt is None or not _KV.match(nxt):
                break
            next_line()
            parts.append(nxt.strip())
        return [" ".join(parts)]
    if stripped in (_CFE_ROOT, _CFE_FAIL):
        return _join_cfe(stripped, next_line, peek_line)
    for head, tail in _TWO_LINE:
        if stripped.startswith(head):
            nxt = peek_line()
            if head == _TERMINATE and nxt is not None and 0 < len(nxt.strip()) <= 2:
                # two processes aborting into one stream at once: the other's closing quote, on a line of its own
                next_line()
                nxt = peek_line()
            if nxt is not None and nxt.strip().startswith(tail):
                next_line()
                return [f"{stripped} {nxt.strip()}"]
            return [stripped]
    if stripped.endswith(_FH_THREAD) and _FH_HEAD.match(stripped):
        frames = []
        for _ in range(_FH_MAX_FRAMES):
            nxt = peek_line()
            if nxt is None or not _FH_FRAME.match(nxt):
                break
            next_line()
            frames.append(nxt.strip())
        return [f"{stripped} {' | '.join(frames)}" if frames else stripped]
    if stripped == _DSHBAK_RULE:
        return _join_dshbak(stripped, next_line, peek_line)
    if stripped.startswith("Thread ") and _PYSPY_HEAD.match(stripped):
        return _join_pyspy(stripped, next_line, peek_line)
    if _BARE_EXCEPTION.match(stripped):
        # rich's traceback (and a long message wrapped by a terminal) puts the message on the lines
        # below "RuntimeError:": they are its message, up to a blank line or another record.
        parts: list[str] = []
        for _ in range(4):
            nxt = peek_line()
            if nxt is None or not nxt.strip() or (_NEW_RECORD.match(nxt) and not nxt.lstrip().startswith("[/")) \
                    or nxt.lstrip().startswith(("===", "---", "/")) or nxt.strip() in (_CFE_ROOT, _CFE_FAIL, "Failures:"):
                break  # (torchrun's "ChildFailedError:" heads its failure table: not a message)
            next_line()
            parts.append(nxt.strip())
        return [f"{stripped} {' '.join(parts)}" if parts else stripped]
    if stripped.endswith(("Stalled ranks:", "Missing ranks:")):
        out = []
        for _ in range(10000):
            nxt = peek_line()
            if nxt is None or not _STALL_RANK.match(nxt):
                break
            next_line()
            out.append(f"{stripped} {nxt.strip()}")
        return out or [stripped]
    return None


def _join_cfe(header: str, next_line: NextLine, peek_line: NextLine) -> list[str]:
    out: list[str] = []
    current: list[str] | None = None
    for _ in range(100000):
        nxt = peek_line()
        if nxt is None:
            break
        if _CFE_IDX.match(nxt):
            if current:
                out.append(" ".join(current))
            current = [nxt.strip()]
            next_line()
            continue
        field = _CFE_FIELD.match(nxt) if current is not None else None
        if field is not None:
            next_line()
            if field.group(1) == "traceback" and field.group(2).startswith("Traceback (most recent call last)"):
                # @record puts the worker's whole traceback in the table: keep its last line, the
                # exception (what the worker died of), as the field's value.
                current.append(f"traceback : {_table_traceback(next_line, peek_line) or field.group(2)}")
            else:
                current.append(nxt.strip())
            continue
        if nxt.strip() == "<NO_OTHER_FAILURES>":
            next_line()
            continue
        break
    if current:
        out.append(" ".join(current))
    prefix = _CFE_ROOT + " " if header == _CFE_ROOT else ""
    return [prefix + rec for rec in out] or [header]


_TERMINATE = "terminate called after throwing an instance of"
_CFE_END = re.compile(r"^\s{0,4}(?:\[\d{1,7}\]:\s*$|[-=]{8,}\s*$|Root Cause \(first observed failure\))")


def _table_traceback(next_line: NextLine, peek_line: NextLine) -> str:
    """Consume a failure-table traceback's indented lines; return its last one (the exception)."""
    last = ""
    for _ in range(2000):
        nxt = peek_line()
        if nxt is None or _CFE_END.match(nxt) or not nxt[:1].isspace():
            break
        next_line()
        if nxt.strip():
            last = nxt.strip()
    return last


#: faulthandler's dump of one thread: its header, then one line per frame, innermost first (it
#: prints at most 100; "  ..." says it cut the rest).
_FH_THREAD = "(most recent call first):"
_FH_HEAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]{1,16}(?: \[[^\]]{0,64}\])? \(most recent call first\):$")
_FH_FRAME = re.compile(r'^\s{2}(?:File "[^"\n]{1,4096}", line \d{1,9} in \S{1,256}|<no Python frame>|\.\.\.)\s{0,8}$')
_FH_MAX_FRAMES = 101

#: py-spy's dump of one thread (``py-spy dump --pid N``): ``Thread 604 (idle): "MainThread"``, then one
#: line per frame, innermost first, four spaces in: ``    push_metrics (train.py:213)``, a native one
#: ``    clock_nanosleep (libc.so.6)`` (``--native``); ``--locals`` adds deeper lines under a frame.
_PYSPY_STATES = ("(idle)", "(active)", "(active+gil)", "(gil)")
_PYSPY_HEAD = re.compile(r'^Thread (?:0x[0-9a-fA-F]{1,16}|\d{1,10}) \((?:active\+gil|active|idle|gil)\)(?:: "[^"\n]{0,128}")?$')
_PYSPY_MAX_LINES = 2000


def _pyspy_frame(line: str) -> str | None:
    """The frame of a py-spy frame line (``func (file:line)``, ``func (lib.so)``), else None. String
    operations, not a regex: a function name may hold spaces and parentheses (C++), and hostile lines
    must stay linear."""
    if not line.startswith("    ") or line.startswith("     "):
        return None
    text = line.strip()
    cut = text.rfind(" (")
    if cut <= 0 or not text.endswith(")") or len(text) > 4096 or " " in text[cut + 2:-1]:
        return None
    return text


def _join_pyspy(header: str, next_line: NextLine, peek_line: NextLine) -> list:
    """One record for the thread (``header frame | frame | ...``), then each frame again as a record of its
    own at its own line (``(offset, text)``): a frame in a collective is an event of its own too."""
    frames: list[str] = []
    out: list = []
    for offset in range(1, _PYSPY_MAX_LINES):
        nxt = peek_line()
        if nxt is None:
            break
        frame = _pyspy_frame(nxt)
        if frame is None and not (nxt.startswith("        ") and nxt.strip()):
            break  # (a deeper line is --locals' "Arguments:" / "name: value" under a frame: passed over)
        next_line()
        if frame is not None and len(frames) < _FH_MAX_FRAMES:
            frames.append(frame)
            out.append((offset, frame))
    return [f"{header} {' | '.join(frames)}" if frames else header, *out]


#: dshbak's header of a host's block: a rule of 16 dashes, the host (or a range, with -c), the rule again.
_DSHBAK_RULE = "-" * 16
_DSHBAK_NAME = re.compile(r"^[A-Za-z0-9][\w.@\[\],-]{0,252}$")


def _join_dshbak(rule: str, next_line: NextLine, peek_line: NextLine) -> list | None:
    """``rule host rule`` when the rule heads dshbak's three-line header, else None (a rule of dashes)."""
    name = peek_line()
    if name is None or not _DSHBAK_NAME.match(name):
        return None
    next_line()
    closing = peek_line()
    if closing is None or closing.strip() != _DSHBAK_RULE:
        return [rule, (1, name)]  # (not a header after all: both lines as they are, each at its own line)
    next_line()
    return [f"{rule} {name} {rule}"]


_MPI_PROC = "Process name: [["
#: Records whose next line completes them: std::terminate prints the exception's what() on the next
#: line; Open MPI's "The first process to do so was:" block gives the process name, then its exit code.
#: torch's load_state_dict error, whose message goes on over tab-indented lines (what did not match).
_STATE_DICT = "Error(s) in loading state_dict for"
_TWO_LINE = ((_TERMINATE, "what():"), (_MPI_PROC, "Exit code:"),
             (f"RuntimeError: {_STATE_DICT}", ("size mismatch for", "Missing key(s) in", "Unexpected key(s) in")))
BLOCK_LITERALS = ("Rendezvous complete", _CFE_ROOT, _CFE_FAIL, "Stalled ranks:", "Missing ranks:", _TERMINATE, _MPI_PROC,
                  _FH_THREAD, _STATE_DICT, *_PYSPY_STATES, _DSHBAK_RULE)

#: An exception line whose message is on the lines below it ("RuntimeError:" from rich's traceback).
_BARE_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w{0,64}\.){0,8}[A-Za-z_]\w{0,64}(?:Error|Exception|Exit|Interrupt):$")

#: A wrapped continuation: not blank, and not the start of a new prefixed record.
_NEW_RECORD = re.compile(
    r"^\s*(?:\[|\(|[\w.-]{1,120}:\d{1,10}:\d{1,10} |[A-Z][a-z]{2} [A-Z][a-z]{2} |Traceback|\d{4}-\d{2}-\d{2}"
    r"|\d{1,7}: |[IWEFV]\d{4} \d{2}:\d{2}|[A-Z]{3,}[:\s]|[A-Za-z_][\w.]{0,80}(?:Error|Exception|Warning):)")


def is_continuation(line: str) -> bool:
    return bool(line.strip()) and not _NEW_RECORD.match(line)


#: A Python traceback's frame line: the line after it quotes the source, indented by four spaces.
_FRAME_LINE = re.compile(r'^\s{2}File "[^"\n]{1,4096}", line \d{1,9}')


def quotes_source(chunk: bytes, s: int, stripper) -> bool:
    """The line starting at ``s`` follows a traceback frame line (same launcher prefix stripped): it
    is the quoted source line ("    raise RendezvousTimeoutError"), whatever words it holds."""
    if s <= 0:
        return False
    p_start = chunk.rfind(b"\n", 0, s - 1) + 1
    prev = stripper.strip(clean_line(chunk[p_start:s - 1]))[1]
    return _FRAME_LINE.match(prev) is not None
