"""``nccl-doctor tui``: browse ranks on a timeline (Textual, imported only here)."""

from __future__ import annotations


def run_tui(paths: list[str] | None = None, report=None) -> int:
    """Run the TUI on a finished report (the CLI reads the logs first, so that bad paths and empty
    input fail before the screen opens) or on log paths (read in a worker behind a progress bar).
    Returns the process exit status (2 when nothing could be read)."""
    from .app import DoctorApp

    app = DoctorApp(paths, report=report)
    app.run()
    return app.return_code or 0


__all__ = ["run_tui"]
