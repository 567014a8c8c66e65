"""Timestamps of the many formats, as epoch seconds (local wall time treated as UTC: only
differences within a job matter). Formats without a year (c10 ``MMDD``) take the year given.
"""

from __future__ import annotations

import calendar
import re

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T _](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?")
_ASCTIME = re.compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})")
_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None = None) -> float | None:
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 61 and 1970 <= y < 2200):
        return None
    try:
        t = calendar.timegm((y, mo, d, h, mi, min(s, 59), 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    return t + (float("0." + frac) if frac else 0.0)


def parse_iso(text: str) -> float | None:
    """``2024-01-02T03:04:05.123Z``, ``[2025-05-10 23:09:41]``, ``2021-05-27 21:32:12,091``."""
    m = _ISO.search(text)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    return _epoch(y, mo, d, h, mi, s, m.group(7))


def parse_mmdd(mmdd: str, hms: str, year: int) -> float | None:
    """c10 prefix ``E1218 20:27:21`` (``hms`` may carry its fraction, ``20:27:21.485000``): month*100+day without
    zero padding, no year."""
    secs, _, frac = hms.partition(".")
    try:
        v = int(mmdd)
        h, mi, s = (int(x) for x in secs.split(":")[:3])
    except ValueError:
        return None
    return _epoch(year, v // 100, v % 100, h, mi, s, frac if frac.isdigit() and len(frac) <= 9 else None)


def hms_of(fields: dict) -> str:
    """A record's time of day with the fraction its format gave apart (glog's ``.485000``): events a few
    milliseconds apart are ordered by it, across files."""
    hms, frac = str(fields["hms"]), fields.get("frac")
    return f"{hms}.{frac}" if frac and "." not in hms else hms


def parse_asctime(text: str) -> float | None:
    m = _ASCTIME.search(text)
    if not m:
        return None
    mon = _MONTHS.get(m.group(1))
    if mon is None:
        return None
    return _epoch(int(m.group(6)), mon, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)))


def event_time(fields: dict, year: int) -> float | None:
    """The time of a record from whichever timestamp fields its format and launchers gave."""
    ts = fields.get("ts")
    if isinstance(ts, str):
        t = parse_iso(ts)
        if t is not None:
            return t
    mmdd, hms = fields.get("mmdd"), fields.get("hms")
    if mmdd and hms:
        return parse_mmdd(str(mmdd), hms_of(fields), year)
    hvd = fields.get("hvdtime")
    if isinstance(hvd, str):
        return parse_asctime(hvd)
    mdy = fields.get("mdyts")
    if isinstance(mdy, str):
        return parse_mdy(mdy)
    return None


_MDY = re.compile(r"(\d{2})/(\d{2})/(\d{4}) (\d{2}):(\d{2}):(\d{2})")


def parse_mdy(text: str) -> float | None:
    """``11/27/2026 06:04:30``: the transformers example scripts' logging date (``%m/%d/%Y``)."""
    m = _MDY.search(text)
    if not m:
        return None
    mo, d, y, h, mi, s = (int(x) for x in m.groups())
    return _epoch(y, mo, d, h, mi, s)
