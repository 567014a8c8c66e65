"""The event record: one meaningful log line, typed and small.

This module imports nothing heavy (no pandas, Textual or matplotlib): it is the vocabulary shared by
the scanner, the job model, the rules and the library's users.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

#: The sort key of events in file and line order (a C call, not a Python lambda per event).
by_place = attrgetter("file", "line")

#: Evidence text is capped: enough to read, never a megabyte of hostile input.
MAX_TEXT = 400


@dataclass(slots=True)
class Event:
    """One parsed log record.

    ``rank`` is the *global* rank when the line or its launcher prefix says so (``[rank12]:``,
    ``srun --label``, Open MPI tag); it is never the CUDA device ``[N]`` of an NCCL prefix, which is
    ``cuda_dev``. The job model fills ``rank`` later for lines whose process it identified.
    """

    kind: str
    file: str
    line: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    rank: int | None = None
    local_rank: int | None = None
    ts: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    text: str = ""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def __reduce__(self) -> tuple:
        # Events cross process boundaries by the hundred thousand (scan workers -> the parent):
        # a plain constructor call pickles about twice as fast as the slots state protocol.
        return (Event, (self.kind, self.file, self.line, self.host, self.pid, self.cuda_dev, self.rank,
                        self.local_rank, self.ts, self.fields, self.text))

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "file": self.file,
            "line": self.line,
            "host": self.host,
            "pid": self.pid,
            "cuda_dev": self.cuda_dev,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "ts": self.ts,
            "fields": dict(self.fields),
            "text": self.text,
        }


@dataclass(slots=True)
class LastLine:
    """The last non-blank line seen for one writer (file, or launcher label inside a file)."""

    file: str
    line: int
    text: str
    ts: float | None = None
    #: The line carried a relay's label (``Launcher.relay``: on every line its process wrote).
    relayed: bool = False


@dataclass(slots=True)
class Skipped:
    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}
