"""Reading the logs in a worker thread; progress and the result come back as messages."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Center, Middle
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Label, ProgressBar

from ..text import literal


class LoadingScreen(Screen):
    DEFAULT_CSS = """
    LoadingScreen { align: center middle; }
    LoadingScreen Label { width: auto; margin: 1 0; }
    LoadingScreen ProgressBar { width: auto; }
    LoadingScreen .-error { color: $error; text-style: bold; }
    """

    class Progress(Message):
        def __init__(self, done: int, total: int, path: str) -> None:
            super().__init__()
            self.done, self.total, self.path = done, total, path

    class Loaded(Message):
        def __init__(self, report, timeline, seconds: float) -> None:
            super().__init__()
            self.report, self.timeline, self.seconds = report, timeline, seconds

    class Failed(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, paths: list[str] | None, report=None) -> None:
        super().__init__()
        self.paths = list(paths or [])
        self.report = report
        self._last_post = 0.0

    def compose(self) -> ComposeResult:
        with Middle():
            with Center():
                yield Label(literal("reading " + " ".join(self.paths[:3]) + (" …" if len(self.paths) > 3 else ""),
                                    "bold", 200), id="what")
            with Center():
                yield ProgressBar(total=None, id="bar")
            with Center():
                yield Label(Text("finding files…", style="dim"), id="file")

    def on_mount(self) -> None:
        self.run_worker(self._load, thread=True, exclusive=True, name="load")

    def _progress(self, done: int, total: int, path: str) -> None:
        now = time.monotonic()
        if done == total or now - self._last_post > 0.05:
            self._last_post = now
            self.post_message(self.Progress(done, total, path))

    def _load(self) -> None:
        from ...analysis import analyze
        from ...timeline import build

        start = time.perf_counter()
        try:
            report = self.report or analyze(self.paths, progress=self._progress)
            self.post_message(self.Progress(1, 1, "building the rank timeline…"))
            tl = build(report)
        except Exception as exc:  # shown on screen; the app exits with status 2 on q
            self.post_message(self.Failed(f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)))
            return
        self.post_message(self.Loaded(report, tl, time.perf_counter() - start))

    def on_loading_screen_progress(self, msg: Progress) -> None:
        self.query_one(ProgressBar).update(total=msg.total, progress=msg.done)
        self.query_one("#file", Label).update(literal(f"{msg.done}/{msg.total}  {msg.path}", "dim", 160))

    def on_loading_screen_failed(self, msg: Failed) -> None:
        self.app.exit_status = 2
        label = self.query_one("#file", Label)
        label.update(literal(f"nothing to show: {msg.error}   (q quits)", "", 400))
        label.add_class("-error")
        self.query_one(ProgressBar).display = False
