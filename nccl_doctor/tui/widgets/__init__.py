"""Widgets of the TUI, one per role; each owns its styles (DEFAULT_CSS)."""

from .detail import RankDetail
from .filter_bar import FilterBar, SearchBox
from .findings import FindingsList
from .rank_timeline import RankTimeline
from .verdict import VerdictPanel

__all__ = ["FilterBar", "FindingsList", "RankDetail", "RankTimeline", "SearchBox", "VerdictPanel"]
