"""The Textual app: a loading screen that reads the logs in a worker, then the main screen."""

from __future__ import annotations

from textual.app import App
from textual.binding import Binding

from ..report.safe import plain
from .screens import HelpScreen, LoadingScreen, MainScreen


class DoctorApp(App):
    """``DoctorApp(paths)`` reads logs; ``DoctorApp(report=...)`` shows a report already made."""

    TITLE = "nccl-doctor"
    BINDINGS = [Binding("q", "quit", "quit"), Binding("question_mark", "help", "help", show=False)]
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, paths: list[str] | None = None, report=None) -> None:
        super().__init__()
        self.paths = list(paths or [])
        self.report = report
        self.timeline = None
        self.load_seconds: float | None = None
        self.exit_status = 0

    def on_mount(self) -> None:
        self.sub_title = plain(" ".join(self.paths), 80)
        self.push_screen(LoadingScreen(self.paths, self.report))

    def on_loading_screen_loaded(self, msg: LoadingScreen.Loaded) -> None:
        self.report, self.timeline, self.load_seconds = msg.report, msg.timeline, msg.seconds
        self.switch_screen(MainScreen(msg.report, msg.timeline))

    async def action_quit(self) -> None:
        self.exit(return_code=self.exit_status)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())
