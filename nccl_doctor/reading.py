"""Bytes in, newline-terminated chunks out: decompression, streaming and overlong-line caps.

Memory is bounded by the chunk size plus one capped line, whatever the file size. Decoding and
cleaning (ANSI, NUL, ``\\r``) happen per candidate line in the scanner, not here, so the hot path
stays in C (``bytes.find``/``count``) and never touches uninteresting lines in Python.
"""

from __future__ import annotations

import gzip
import re
import sys
from collections.abc import Iterator
from typing import BinaryIO

CHUNK = 8 << 20
MAX_LINE = 64 << 10

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: CSI and OSC escape sequences (OSC 52 clipboard writes, titles), other ESC pairs, C0 controls but tab.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")


class ReadIssue(Exception):
    """The file could be read only in part (truncated archive, I/O error); what was read is kept."""


def open_binary(real: str) -> BinaryIO:
    """Open a file (or stdin for ``-``), transparently decompressing gzip and zstd by magic bytes."""
    if real == "-":
        return sys.stdin.buffer
    raw = open(real, "rb")  # noqa: SIM115 - closed by the caller
    head = raw.peek(4)[:4] if hasattr(raw, "peek") else b""
    if head.startswith(_GZIP_MAGIC):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if head.startswith(_ZSTD_MAGIC):
        import zstandard  # imported lazily: short runs on plain text never pay for it

        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)
    return raw


def iter_chunks(fp: BinaryIO, chunk_size: int = CHUNK, max_line: int = MAX_LINE) -> Iterator[bytes]:
    """Yield chunks that end on a newline (the last one may not), each line at most ``max_line`` bytes.

    Raises ReadIssue *after* yielding everything readable when the stream is truncated or fails.
    """
    carry = b""
    skipping = False  # inside an overlong line whose tail is being dropped
    issue: str | None = None
    while True:
        try:
            data = fp.read(chunk_size)
        except (EOFError, OSError, ValueError) as exc:  # truncated gzip, zstd error, I/O error
            issue = f"read stopped early: {type(exc).__name__}: {exc}"[:200]
            data = b""
        except Exception as exc:  # zstandard.ZstdError does not derive from OSError
            issue = f"read stopped early: {type(exc).__name__}: {exc}"[:200]
            data = b""
        if not data:
            break
        if skipping:
            nl = data.find(b"\n")
            if nl < 0:
                continue
            data = data[nl + 1 :]  # the capped line was already emitted with its newline
            skipping = False
            if not data:
                continue
        buf = carry + data if carry else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            if len(buf) > max_line:
                yield buf[:max_line] + b"\n"
                carry, skipping = b"", True
            else:
                carry = buf
            continue
        body, carry = buf[: cut + 1], buf[cut + 1 :]
        if len(carry) > max_line:
            body += carry[:max_line] + b"\n"
            carry, skipping = b"", True
        yield _cap_lines(body, max_line)
    if carry:
        yield carry[:max_line]
    if issue:
        raise ReadIssue(issue)


def _cap_lines(body: bytes, max_line: int) -> bytes:
    """Cut lines longer than ``max_line`` inside a chunk (rare: checked with one C-level scan)."""
    if len(body) <= max_line:
        return body
    out: list[bytes] = []
    start = 0
    n = len(body)
    while start < n:
        nl = body.find(b"\n", start, start + max_line + 1)
        if nl < 0:
            nl = body.find(b"\n", start)
            if nl < 0:
                nl = n - 1
            out.append(body[start : start + max_line] + b"\n")
        else:
            out.append(body[start : nl + 1])
        start = nl + 1
    return b"".join(out) if len(out) > 1 else out[0]


def clean_line(raw: bytes) -> str:
    """Decode leniently and neutralise terminal control sequences and NULs in one line."""
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text or "\x00" in text or "\r" in text or "\x07" in text or "\x7f" in text:
        text = _ANSI.sub(_keep_cr, text)
    return text


def _keep_cr(m: re.Match[str]) -> str:
    # A bare carriage return separates records (progress bars); keep it for the record splitter.
    return "\r" if m.group(0) == "\r" else ""


def looks_binary(head: bytes) -> bool:
    """True for data that is clearly not a text log (core files, pickles, images)."""
    if not head:
        return False
    sample = head[:8192]
    nul = sample.count(0)
    if nul > len(sample) // 10:
        return True
    text_chars = bytes(range(32, 127)) + b"\n\r\t\x1b"
    nontext = len(sample.translate(None, text_chars))
    # UTF-8 text (non-ASCII) has high bytes too: count only C0 controls as non-text.
    control = len(sample.translate(None, text_chars + bytes(range(128, 256))))
    return control > len(sample) * 0.1 or (nontext > len(sample) * 0.6 and not _is_utf8(sample))


def _is_utf8(sample: bytes) -> bool:
    try:
        sample.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        return exc.start > len(sample) - 4  # cut inside the last character


__all__ = ["ReadIssue", "clean_line", "iter_chunks", "looks_binary", "open_binary"]
