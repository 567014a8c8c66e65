"""The node a console was written on: the host its lines name, else the file's own name when it reads as
a host's (one console per node, named after it, as job scripts save them)."""

from __future__ import annotations

from ..model import JobModel
from ..model.hosts import reads_as_node
from ..model.identity import file_rank
from .facts import _stem, file_host


def node_name(job: JobModel, file: str) -> str | None:
    """The node a torchrun agent's console was written on: the host its lines name, else the file's
    own name when that reads as a host name (``ib-gpu-103.log``, ``hpc-a-03.out``: one console per
    node, named after it, as job scripts save them), not a rank's or a generic name."""
    host = file_host(job, file)
    if host:
        return host
    stem = _stem(file)
    return stem if reads_as_node(stem) and file_rank(file) is None else None
