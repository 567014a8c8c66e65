"""Bytes in, newline-terminated chunks out: decompression, streaming and overlong-line caps.

Memory is bounded by the chunk size plus one capped line, whatever the file size. Decoding and
cleaning (ANSI, NUL, ``\\r``) happen per candidate line in the scanner, not here, so the hot path
stays in C (``bytes.find``/``count``) and never touches uninteresting lines in Python.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import sys
from collections.abc import Iterator
from typing import BinaryIO

from .csvexport import CSV_MAX, export_header, export_records
from .errorfile import ERROR_FILE_MAX, error_lines
from .errorfile import looks_like as looks_like_error_file
from .htmlpage import HTML_MAX, page_lines
from .htmlpage import looks_like as looks_like_page
from .jsonexport import JSON_MAX
from .jsonexport import export_kind as json_export_kind
from .jsonexport import export_records as json_export_records
from .legacy_text import is_utf8
from .text_encoding import PROBE, as_utf8, decoder, encoding_of

CHUNK = 8 << 20
MAX_LINE = 64 << 10

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BZ2_MAGIC = b"BZh"
_XZ_MAGIC = b"\xfd7zXZ\x00"
#: CSI, OSC, APC, DCS and PM escape sequences (OSC 52 clipboard writes, titles, Buildkite's APC
#: "\x1b_bk;t=<ms>\x07" time stamps), other ESC pairs, C0 controls but tab.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]_P^][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")


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

        return _Zstd(raw, zstandard)
    if head.startswith(_BZ2_MAGIC) and head[3:4].isdigit() and head[3:4] != b"0":  # bzip2 (".log.bz2", a .tar.bz2)
        return bz2.BZ2File(raw, "rb")  # type: ignore[return-value]
    if raw.peek(6)[:6] == _XZ_MAGIC:  # xz ("rank3.log.xz", a .tar.xz)
        return lzma.LZMAFile(raw, "rb")  # type: ignore[return-value]
    return _UpTo(raw)


class _Wrapper:
    """A reader over a raw file that it owns: closing it closes the file; usable in ``with``."""

    _raw: BinaryIO

    def close(self) -> None:
        self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Zstd(_Wrapper):
    """zstd frames, one after another; a stream that ends inside a frame is reported as truncated
    (the library's stream reader ends silently there)."""

    def __init__(self, raw, zstandard) -> None:
        self._raw, self._z = raw, zstandard
        self._d = zstandard.ZstdDecompressor().decompressobj()
        self._in_frame = False

    def read1(self, n: int = 1 << 18) -> bytes:
        while True:
            data = self._raw.read(n)
            if not data:
                if self._in_frame:
                    raise EOFError("zstd stream ended inside a frame (truncated)")
                return b""
            out = []
            while data:
                self._in_frame = True
                out.append(self._d.decompress(data))
                if self._d.eof:
                    self._in_frame = False
                    data = self._d.unused_data
                    self._d = self._z.ZstdDecompressor().decompressobj()
                else:
                    data = b""
            chunk = b"".join(out)
            if chunk:
                return chunk

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all when negative), as a file's read does."""
        parts, got = [], 0
        while n < 0 or got < n:
            piece = self.read1(1 << 18 if n < 0 else min(1 << 18, n - got))
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        return b"".join(parts)



#: A UTF-16 file (its byte-order mark says so) or one in a legacy encoding (legacy_text) is read as the
#: text it holds, decoded as it is read (a piece at a time: memory stays bounded whatever its size).
_UTF16_PIECE = 1 << 20
#: A file whose lines run newest first (logcli's default order, a Grafana export) is read oldest first
#: when it is at most this large (it is read whole to be turned round); a larger one is read as it is.
REVERSE_MAX = 64 << 20
#: The ISO date-time a line starts with (what newest-first exports start every line with).
_ISO_LINE = re.compile(rb"^[ \t]{0,4}(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?)", re.M)


def newest_first(head: bytes, tail: bytes) -> bool:
    """A file's lines run newest first, judged on its first and last bytes: every line starts with an
    ISO date-time, none is later than the line above it (a forward log of several interleaved writers
    goes up most of the time), and the first is later than the last. (A sample may hold one second
    only: logcli prints whole seconds.)"""
    if _ISO_LINE.match(head) is None:
        return False  # (most logs: a cheap no)
    first = [m.group(1) + b" " + m.group(2) for m in _ISO_LINE.finditer(head)]
    last = [m.group(1) + b" " + m.group(2) for m in _ISO_LINE.finditer(tail)][1:]  # (the first may be cut)
    if len(first) < 10 or not last:
        return False
    up = sum(a < b for sample in (first, last) for a, b in zip(sample, sample[1:], strict=False))
    return up == 0 and first[0] > last[-1]


def oldest_first(data: bytes) -> tuple[bytes, int]:
    """A newest-first file's bytes with its lines in the other order, and its number of lines: line
    ``i`` of the result is line ``n + 1 - i`` of the file."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return b"\n".join(reversed(lines)) + b"\n", len(lines)


def oldest_first_stream(fp: BinaryIO, size: int, probe: int = PROBE) -> tuple[BinaryIO, int | list[int]]:
    """The stream to scan a plain file from, and 0 (its lines as they are); or, for a file read otherwise,
    that text and how its lines map onto the file's (see ``FileScan.flipped``): a UTF-16 console decoded
    line for line (0); a page, an error file or an export turned into lines (the file line of each, see
    ``_CONVERTED``); a newest-first file of at most REVERSE_MAX bytes turned round (its number of lines,
    see ``newest_first``)."""
    if not is_plain(fp):
        return fp, 0
    head = fp.peek(probe)
    encoding = encoding_of(head)
    if encoding is not None:
        # a UTF-16 console (Windows PowerShell) or one in a legacy encoding: read as the UTF-8 text it
        # holds, line for line (text_encoding)
        return Transcoded(fp, encoding), 0
    for most, looks_like, convert in _CONVERTED:
        if size <= most and looks_like(head):
            data = fp.read()
            lines = convert(data)  # (None: not such a file after all: read as it is)
            return (io.BytesIO(data), 0) if lines is None else (io.BytesIO(lines[0]), lines[1])
    if size > REVERSE_MAX or not newest_first(head, fp.tail(probe)):
        return fp, 0
    data, n = oldest_first(fp.read())
    return io.BytesIO(data), n


class Transcoded(io.RawIOBase):
    """A byte stream in another encoding, read as UTF-8 a piece at a time (an incremental decoder keeps
    a character cut between two pieces whole; what does not decode becomes a replacement mark)."""

    def __init__(self, raw: BinaryIO, encoding: str):
        self._raw = raw
        self._decoder = decoder(encoding)
        self._pending = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        while not self._done and (n < 0 or len(self._pending) < n):
            piece = self._raw.read(_UTF16_PIECE)
            text = self._decoder.decode(piece, final=not piece)
            self._pending += as_utf8(text)
            self._done = not piece
        if n < 0:
            out, self._pending = self._pending, b""
        else:
            out, self._pending = self._pending[:n], self._pending[n:]
        return out


#: Files read as the lines they show, in this order: (largest read, told by its first bytes, its lines and
#: the file line of each): a saved HTML page, torchelastic's error file, a JSON export, a CSV export.
_CONVERTED = (
    (HTML_MAX, looks_like_page, page_lines),
    (ERROR_FILE_MAX, looks_like_error_file, error_lines),
    (JSON_MAX, lambda head: json_export_kind(head) is not None, json_export_records),
    (CSV_MAX, lambda head: export_header(head) is not None, export_records),
)


class _UpTo(_Wrapper):
    """A plain file read only up to its size when opened: a log still being written (or a writer
    faster than us) must not keep the read going forever."""

    def __init__(self, raw: io.BufferedReader):
        self._raw = raw
        self._short = False
        try:
            self._left = os.fstat(raw.fileno()).st_size
        except OSError:
            self._left = None
        self._size = self._left

    def tail(self, n: int) -> bytes:
        """The last ``n`` bytes of the file as it was when opened, read apart (the stream does not move)."""
        if not self._size:
            return b""
        try:
            return os.pread(self._raw.fileno(), min(n, self._size), max(0, self._size - n))
        except OSError:
            return b""

    def peek(self, n: int) -> bytes:
        """Up to ``n`` of the next bytes (at most the reader's buffer), without reading them."""
        data = self._raw.peek(n)[:n]
        return data if self._left is None else data[:self._left]

    def read(self, n: int = -1) -> bytes:
        if self._left is None:
            return self._raw.read(n)
        if self._left <= 0:
            return b""
        want = self._left if n < 0 else min(n, self._left)
        data = b"" if self._short else self._raw.read(want)
        if not data:  # the end came before the size it had when opened: cut while we read it
            raise EOFError(f"the file shrank while it was read ({self._left:,} bytes fewer than when it was opened)")
        self._left -= len(data)
        self._short = len(data) < want  # said at the next read, after this piece is used
        return data



def is_plain(fp: BinaryIO) -> bool:
    """The reader gives a plain file's own bytes (not decompressed, not stdin)."""
    return isinstance(fp, _UpTo)


def iter_chunks(fp: BinaryIO, chunk_size: int = CHUNK, max_line: int = MAX_LINE) -> Iterator[bytes]:
    """Yield chunks that end on a newline (the last one may not), each line at most ``max_line`` bytes.

    Raises ReadIssue *after* yielding everything readable when the stream is truncated or fails.
    """
    carry = b""
    skipping = False  # inside an overlong line whose tail is being dropped
    issue: str | None = None
    # Decompressors are read in small pieces so that a truncated archive loses at most one piece.
    small = getattr(fp, "read1", None) if not isinstance(fp, (io.BufferedReader, _UpTo)) else None
    stop = False
    while not stop:
        parts: list[bytes] = []
        try:
            if small is not None:
                got = 0
                while got < chunk_size:
                    piece = small(256 << 10)
                    if not piece:
                        break
                    parts.append(piece)
                    got += len(piece)
            else:
                parts.append(fp.read(chunk_size))
        except Exception as exc:  # truncated gzip (EOFError), zstd errors, I/O errors
            issue = f"read stopped early: {type(exc).__name__}: {exc}"[:200]
            stop = True
        data = b"".join(parts)
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
        if cut == len(buf) - 1:  # the usual end of a whole file: no copy of the chunk
            body, carry = buf, b""
        else:
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
    if len(body) <= max_line or not _has_long_line(body, max_line):
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


def _has_long_line(body: bytes, max_line: int) -> bool:
    """Jump from the last newline of each window to the next: about len/max_line C-level steps."""
    n, pos = len(body), 0
    while n - pos > max_line:
        nl = body.rfind(b"\n", pos, pos + max_line + 1)
        if nl < 0:
            return True
        pos = nl + 1
    return False


def clean_line(raw: bytes) -> str:
    """Decode leniently and neutralise terminal control sequences and NULs in one line."""
    return clean_text(raw.decode("utf-8", "replace"))


def clean_text(text: str) -> str:
    """A decoded line with its terminal control sequences and NULs taken out (as the scanner reads it)."""
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
    return control > len(sample) * 0.1 or (nontext > len(sample) * 0.6 and not is_utf8(sample))


__all__ = ["ReadIssue", "clean_line", "iter_chunks", "looks_binary", "open_binary"]
