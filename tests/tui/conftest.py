"""TUI tests drive the app with Pilot on hand-built reports (no parser involved)."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from fake_report import hang_report

from nccl_doctor.tui.app import DoctorApp
from nccl_doctor.tui.screens import MainScreen

SIZE = (160, 48)


async def until_main(pilot, timeout: float = 10.0) -> MainScreen:
    """Wait for the worker to finish loading and the main screen to show."""
    waited = 0.0
    while not isinstance(pilot.app.screen, MainScreen):
        await pilot.pause(0.02)
        waited += 0.02
        assert waited < timeout, "the main screen did not show"
    await pilot.pause()
    return pilot.app.screen


@pytest.fixture
def make_app():
    def make(**kwargs) -> DoctorApp:
        return DoctorApp(["logs/"], report=hang_report(**kwargs))

    return make


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run ``async def`` tests here with asyncio (no async plugin needed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True
