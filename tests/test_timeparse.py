"""Times read from the formats' timestamp fields (nccl_doctor.timeparse.event_time): expected
values are the calendar times written in the lines, as UTC epoch seconds computed by hand with
calendar.timegm."""

from __future__ import annotations

import calendar

from nccl_doctor.timeparse import event_time


def test_python_logging_time_with_milliseconds():
    assert event_time({"ts": "2026-11-27 06:04:30,440"}, 2026) == calendar.timegm((2026, 11, 27, 6, 4, 30)) + 0.44


def test_transformers_month_day_year():
    assert event_time({"mdyts": "11/27/2026 06:04:30"}, 1999) == calendar.timegm((2026, 11, 27, 6, 4, 30))


def test_an_impossible_date_has_no_time():
    assert event_time({"mdyts": "27/11/2026 06:04:30"}, 2026) is None  # day and month the other way round
