"""The node a console was written on: the host its lines name, else the file's own name when it reads as
a host's (one console per node, named after it, as job scripts save them)."""

from __future__ import annotations

import re

from ..model import JobModel
from ..model.identity import file_rank
from .facts import _stem, file_host

#: File names that say what a file holds rather than where it was written: never a node's name.
_GENERIC_STEM = re.compile(r"(?i)^(?:rank|worker|proc|process|local|attempt|stdout|stderr|std|out|err|log|logs|"
                           r"train|training|console|output|job|run|task|trainer|main|agent|launcher|torchrun|slurm)(?![a-z])")
_HOST_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,62}$")
#: An issue tracker's key ("MLINFRA-2291.md", a ticket's pasted console): no node's name.
_TICKET = re.compile(r"^[A-Z][A-Z0-9]{1,9}-\d{1,7}$")


def node_name(job: JobModel, file: str) -> str | None:
    """The node a torchrun agent's console was written on: the host its lines name, else the file's
    own name when that reads as a host name (``ib-gpu-103.log``, ``hpc-a-03.out``: one console per
    node, named after it, as job scripts save them), not a rank's or a generic name."""
    host = file_host(job, file)
    if host:
        return host
    stem = _stem(file)
    if (_HOST_NAME.match(stem) and re.search(r"\d", stem) and re.search(r"[A-Za-z]{2}", stem)
            and not _GENERIC_STEM.match(stem) and not _TICKET.match(stem) and file_rank(file) is None):
        return stem
    return None
