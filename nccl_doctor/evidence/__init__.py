"""Derived evidence: facts computed from the job model that the rules and the verdict read.

Layers run one way: reading -> scan -> job model -> evidence -> rules -> verdict -> faces.
Nothing here imports the rules, the verdict or a face. ``facts`` is the entry point (cached
per job); the other modules hold one kind of fact each: failures and echoes (``failures``,
``causes``), timeouts, suspects (silent, lagging, desync), NCCL facts (``nccl_facts``,
``transport``, ``netsel``), launcher facts, Flight Recorder dump facts (``dumps``) and each
rank's status (``status``).
"""

# facts first, whatever submodule is imported: facts and causes import each other, and only that
# order works (facts imports causes at its end, once what causes needs from it is defined).
from . import facts  # noqa: E402, F401
