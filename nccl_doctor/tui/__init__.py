"""``nccl-doctor tui``: browse ranks on a timeline (Textual, imported only here)."""

from __future__ import annotations


def run_tui(paths: list[str]) -> int:
    """Run the TUI on log paths; returns the process exit status (2 when nothing could be read)."""
    from .app import DoctorApp

    app = DoctorApp(paths)
    app.run()
    return app.return_code or 0


__all__ = ["run_tui"]
