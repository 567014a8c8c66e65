"""Consoles saved in a legacy 8-bit or double-byte encoding: which one, told from the text itself.

A Chinese Windows console saves GBK (``PYTHONIOENCODING=gbk``, ``chcp 936``), a Japanese one Shift-JIS
(cp932), older Japanese Linux terminals EUC-JP, Russian ones cp1251 or KOI8-R (``iconv`` in a job
script), Western European ones cp1252. Their bytes are not UTF-8, so read as UTF-8 every character
outside ASCII becomes a replacement mark: the job's own messages (an exception's text, a localised
error line) are lost from the evidence, though the ASCII parts (torch's and torchrun's lines) read
the same either way.

Only a file whose first bytes are not UTF-8 is looked at. Each candidate must decode those bytes
without an error; of those that do, the one whose non-ASCII characters look most like text of its
script wins: CJK ideographs, kana and full-width punctuation for the CJK encodings (kana count for
the Japanese ones, half-width katakana against Shift-JIS: GBK text read as cp932 is full of them),
Cyrillic words for cp1251 and KOI8-R (lower case letters in runs: KOI8-R text read as cp1251, and the
other way round, comes out mostly upper case), accented letters inside Latin words for cp1252. When no
candidate reads as text (binary noise, a file cut in two), None: the file is read as UTF-8, as before.
"""

from __future__ import annotations

#: Tried in this order; a tie keeps the earlier one.
CANDIDATES = ("gb18030", "euc_jp", "cp932", "cp1251", "koi8_r", "cp1252")
#: What a candidate's non-ASCII characters must score at least (share of them that look like text).
MIN_SHARE = 0.85
_SAMPLE = 64 << 10


def is_utf8(sample: bytes) -> bool:
    """The bytes decode as UTF-8 (a character cut at their end aside)."""
    try:
        sample.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        return exc.start > len(sample) - 4  # (cut inside the last character)


def _decode(sample: bytes, encoding: str) -> str | None:
    """The sample decoded strictly, a character cut at its end left out."""
    for cut in range(4):
        try:
            return sample[:len(sample) - cut].decode(encoding)
        except UnicodeDecodeError:
            continue
    return None


def _cjk(c: int) -> bool:
    return 0x4E00 <= c <= 0x9FFF or 0x3000 <= c <= 0x303F or 0xFF01 <= c <= 0xFF5E or 0x3400 <= c <= 0x4DBF


def _kana(c: int) -> bool:
    return 0x3040 <= c <= 0x30FF


def _common_gbk(c: int) -> bool:
    """A character of GB2312 (both its bytes 0xA1 or above), which everyday Chinese text is written in.
    GBK's extensions take an ASCII byte as their second one: Latin-1 text read as GBK ("donn\xe9es", a
    high byte then a letter) is full of them, Chinese text hardly has any."""
    try:
        return min(chr(c).encode("gb18030")) >= 0xA1
    except UnicodeEncodeError:
        return False


def _score(text: str, encoding: str) -> float:
    """The share of the text's non-ASCII characters that look like text of the encoding's script."""
    high = [(i, ord(ch)) for i, ch in enumerate(text) if ord(ch) > 0x7F]
    if not high:
        return 0.0
    if encoding in ("gb18030", "euc_jp", "cp932"):
        good = sum(1 for _i, c in high if (_cjk(c) or _kana(c)) and (encoding != "gb18030" or _common_gbk(c)))
        kana = sum(1 for _i, c in high if _kana(c))
        halfwidth = sum(1 for _i, c in high if 0xFF61 <= c <= 0xFF9F)
        share = (good - 3 * halfwidth) / len(high)
        if encoding != "gb18030" and kana:
            share += min(kana / len(high), 0.1)  # Japanese text writes kana; Chinese text hardly any
        return share
    if encoding in ("cp1251", "koi8_r"):
        letters = [(i, c) for i, c in high if 0x0410 <= c <= 0x044F or c in (0x0401, 0x0451)]
        lower = sum(1 for _i, c in letters if c >= 0x0430)
        # a word of Cyrillic letters: most letters have a Cyrillic neighbour (not one in a Latin word)
        inside = sum(1 for i, _c in letters if _cyrillic_at(text, i - 1) or _cyrillic_at(text, i + 1))
        if not letters:
            return 0.0
        return (len(letters) / len(high)) * (inside / len(letters)) * (0.5 + 0.5 * lower / len(letters))
    # cp1252: accented Latin letters beside ASCII letters, inside Latin words ("café", "étape")
    latin = sum(1 for i, c in high if 0xC0 <= c <= 0xFF and c not in (0xD7, 0xF7)
                and (_alpha_at(text, i - 1) or _alpha_at(text, i + 1)))
    return latin / len(high)


def _cyrillic_at(text: str, i: int) -> bool:
    return 0 <= i < len(text) and (0x0410 <= ord(text[i]) <= 0x044F or ord(text[i]) in (0x0401, 0x0451))


def _alpha_at(text: str, i: int) -> bool:
    return 0 <= i < len(text) and text[i].isascii() and text[i].isalpha()


def legacy_encoding(head: bytes) -> str | None:
    """The legacy encoding the file's first bytes are in, or None (UTF-8, ASCII, or none of them)."""
    sample = head[:_SAMPLE]
    if sample.isascii() or is_utf8(sample):
        return None
    best, best_score = None, MIN_SHARE
    for encoding in CANDIDATES:
        text = _decode(sample, encoding)
        if text is None:
            continue
        score = _score(text, encoding)
        if score > best_score:
            best, best_score = encoding, score
    return best


__all__ = ["CANDIDATES", "is_utf8", "legacy_encoding"]
