"""One rank's failure as the evidence tells it (the record ``failures`` builds and the rules read)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import Event
from ..model import RankState
from .facts import first_ts


@dataclass(slots=True, eq=False)
class Failure:
    """One rank's first non-consequential error, with its echoes as extra evidence."""

    rank: int | None
    state: RankState | None
    host: str | None
    category: str  # cuda | oom | nccl | exception | host | signal | network | exit
    what: str
    events: list[Event] = field(default_factory=list)
    recovered: bool = False  # the rank (or job) went on training afterwards
    label: str | None = None  # who failed, when it is not a rank's process (a node's torchrun agent)
    #: What the rank did, when not "failed first": a rank the others' failures accuse, itself unfailed.
    doing: str | None = None

    @property
    def crash(self) -> bool:
        """A process-level failure (not a transport error between two hosts)."""
        return self.category != "network"

    @property
    def ts(self) -> float | None:
        return first_ts(self.events)

    @property
    def exit_only(self) -> bool:
        return self.category == "exit"

    @property
    def who(self) -> str:
        if self.label:
            return self.label
        if self.rank is not None:
            return f"rank {self.rank}" + (f" on {self.host}" if self.host else "")
        st = self.state
        if st is not None and st.local_rank is not None:
            return f"local rank {st.local_rank} (global rank unknown)" + (f" on {self.host}" if self.host else "")
        if self.host:
            pid = f", pid {st.pid}" if st is not None and st.pid is not None else ""
            return f"a process on {self.host}{pid} (rank unknown)"
        return "a process (rank not in the log)"
