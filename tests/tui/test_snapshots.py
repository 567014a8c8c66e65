"""Snapshots pin the main screens (update with ``pytest --snapshot-update`` after a deliberate change)."""

from __future__ import annotations

from conftest import SIZE, until_main
from fake_report import hang_report

from nccl_doctor.tui.app import DoctorApp


def _app(**kwargs) -> DoctorApp:
    return DoctorApp(["logs/"], report=hang_report(**kwargs))


def test_main_screen(snap_compare):
    async def ready(pilot):
        await until_main(pilot)

    assert snap_compare(_app(n=64, per_host=8, culprit=37), terminal_size=SIZE, run_before=ready)


def test_finding_marks_ranks_and_hostile_detail(snap_compare):
    async def steps(pilot):
        await until_main(pilot)
        await pilot.press("f", "down", "m", "tab")
        await pilot.press("home", "down", "down", "down")
        await pilot.pause()

    assert snap_compare(_app(n=16, per_host=4, culprit=5, hostile_rank=2), terminal_size=SIZE, run_before=steps)


def test_progress_axis_without_verdict(snap_compare):
    async def ready(pilot):
        await until_main(pilot)

    assert snap_compare(_app(n=24, per_host=8, culprit=11, timed=False, verdict=False, missing=(3,)),
                        terminal_size=SIZE, run_before=ready)


def test_help_screen(snap_compare):
    async def steps(pilot):
        await until_main(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=SIZE, run_before=steps)


def test_main_screen_at_80x24(snap_compare):
    async def ready(pilot):
        await until_main(pilot)

    assert snap_compare(_app(n=64, per_host=8, culprit=37), terminal_size=(80, 24), run_before=ready)
