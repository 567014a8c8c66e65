"""Screens of the TUI: loading (worker + progress), main (verdict, findings, timeline), help."""

from .help import HelpScreen
from .loading import LoadingScreen
from .main import MainScreen

__all__ = ["HelpScreen", "LoadingScreen", "MainScreen"]
