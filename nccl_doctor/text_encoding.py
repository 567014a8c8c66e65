"""Which encoding a log's text is in (UTF-8, UTF-16 with its byte-order mark, or a legacy one), told from its
first bytes, and the same decoding for a file that is still growing.

The batch reader (``reading.oldest_first_stream``) decides on the first ``PROBE`` bytes of a file and decodes
the whole file that way. ``watch`` sees those bytes arrive a piece at a time: ``LiveDecoder`` decides on the
bytes it has (as the batch reader would on a file of that size) until ``PROBE`` have come, then for good;
when a later piece changes the decision, what was given so far is void and the text is given again from its
start (at most ``PROBE`` bytes: a cheap restart, and nothing of it was committed yet).
"""

from __future__ import annotations

import codecs

from .legacy_text import legacy_encoding

#: The bytes the decision is made on (the batch reader's first buffered read of a file).
PROBE = 8192
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _utf16(head: bytes) -> bool:
    """UTF-16 text: a byte-order mark, then mostly characters whose high byte is zero (ASCII log text),
    not bytes that merely start like one (a log whose first bytes are garbage)."""
    if head[:2] not in _UTF16_BOMS:
        return False
    body = head[2:514]
    high = body[1::2] if head[:2] == b"\xff\xfe" else body[0::2]  # (little endian: every second byte)
    return len(high) >= 8 and high.count(0) >= 0.6 * len(high)


def encoding_of(head: bytes) -> str | None:
    """The codec a file whose first bytes are ``head`` is read with, or None: its bytes as they are (UTF-8).
    A console saved by Windows PowerShell ("> file", Tee-Object: UTF-16LE; Out-File -Encoding
    BigEndianUnicode) is "utf-16"; one in GBK, Shift-JIS, EUC-JP, cp1251, KOI8-R or cp1252 is that
    (legacy_text)."""
    return "utf-16" if _utf16(head) else legacy_encoding(head)


def decoder(encoding: str):
    """An incremental decoder of ``encoding`` (a character cut between two pieces kept whole; what does not
    decode becomes a replacement mark)."""
    return codecs.getincrementaldecoder(encoding)("replace")


def as_utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class LiveDecoder:
    """The bytes of one growing file as UTF-8, decided and decoded as the batch reader would."""

    def __init__(self) -> None:
        self.encoding: str | None = None
        self._decoder = None
        self._head: bytearray | None = bytearray()  # the first bytes, kept until the decision is final
        self._given = False

    def feed(self, data: bytes) -> tuple[bool, bytes]:
        """(restart, text): the UTF-8 bytes of ``data``; with ``restart`` the decision changed, and the
        text is that of every byte fed so far (what was given before is void)."""
        if self._head is None:
            return False, self._decode(data)
        self._head += data
        head = bytes(self._head[:PROBE])
        encoding = encoding_of(head)
        restart = encoding != self.encoding
        if restart:
            self.encoding = encoding
            self._decoder = decoder(encoding) if encoding else None
        text = self._decode(bytes(self._head) if restart else data)
        if len(self._head) >= PROBE:
            self._head = None  # the decision is final
        restart, self._given = restart and self._given, self._given or bool(data)
        return restart, text

    def _decode(self, data: bytes) -> bytes:
        return as_utf8(self._decoder.decode(data)) if self._decoder is not None else data


__all__ = ["PROBE", "LiveDecoder", "as_utf8", "decoder", "encoding_of"]
