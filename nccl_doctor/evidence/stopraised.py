"""What stopping a rank raised in it, which is no ending of its own: a handler's ``SystemExit(128 + signum)``,
torch's SignalException, a KeyboardInterrupt; an echo (a lost peer) raised inside its signal handler or after
its own word that a SIGTERM reached it; an error line that says no more than that it was stopped."""

from __future__ import annotations

import re

from ..events import Event
from ..model import JobModel, RankState
from .causes import _OWN_ERRORS, _REPORTS, CAUSE_KINDS, classify
from .facts import owner, record_text
from .tracebacks import chain_root, where_signal_found

#: (a logged error record is a rank's own word only as a failure: otherwise it is its own story)
_OWN = (frozenset(_OWN_ERRORS) | frozenset(CAUSE_KINDS)) - frozenset(_REPORTS) - {"log_error"}


#: A process's own words that a SIGTERM or SIGINT ended it: a handler's ``SystemExit(128 + signum)``,
#: torch's SignalException ("Process 4242 got signal: 15"), Python's KeyboardInterrupt.
_STOP_EXIT = re.compile(r"^(?:143|-15|15|130)$")
_SIGTERM_WORDS = re.compile(r"got signal: ?15\b|\bSIGTERM\b")


def terminated(job: JobModel, ev: Event) -> bool:
    """An exception a SIGTERM raised, or one raised while handling it (its chain begins there)."""
    root = chain_root(job, ev) if ev.kind == "python_exception" else ev
    if root.kind != "python_exception":
        return False
    etype, msg = str(root.get("exc_type") or "").rsplit(".", 1)[-1], str(root.get("msg") or "").strip()
    return (etype == "SystemExit" and _STOP_EXIT.match(msg) is not None) or etype == "KeyboardInterrupt" \
        or (etype == "SignalException" and _SIGTERM_WORDS.search(msg) is not None)


#: Signals a process's stop raises in it: a launcher's SIGTERM, an interrupt.
_STOP_SIGNALS = frozenset(("SIGTERM", "SIGINT"))


def after_signal(job: JobModel, st: RankState | None, ev: Event) -> bool:
    """An echo (a lost peer, a wait that ended) a rank reported after its own line said a SIGTERM or an
    interrupt reached it ("[rank: 1] Received SIGTERM: 15"), or raised inside its signal handler (its
    traceback says so): what stopping it raised (its handler ran a collective, as Lightning's signal
    connector broadcasts the signal to the other ranks), not the rank reaching a collective late. Its
    own error (classify names one) still is its own."""
    if st is None or classify(ev, True, False) is not None:
        return False
    said = any(e.kind == "signal_received" and e.get("sig") in _STOP_SIGNALS and e.file == ev.file and e.line < ev.line
               for e in st.events)
    return said or where_signal_found(job, ev) is not None


def stop_words(job: JobModel, ev: Event) -> bool:
    """An error line of a rank the launcher stopped that says no more than that: what the SIGTERM
    raised, or its echo logged ("received SIGTERM at step 12, training failed on this rank")."""
    return terminated(job, ev) or after_signal(job, owner(job, ev), ev) \
        or (ev.kind in ("log_error", *_OWN) and classify(ev, True, False) is None
                and _SIGTERM_WORDS.search(record_text(ev)) is not None)
