"""NCX: any other NCCL error, classified with what its ncclResult_t means.

Evidence: ``NCCL WARN`` lines, ``Cuda failure`` lines the specific rules do not claim, torch's
``NCCL error in: file:line, <error>, NCCL version X`` and ``ncclSystemError: ...`` lines, and
``file.cc:NNN -> N`` return-code chains whose WARN line is missing. The first error in a chain is
the cause; later ``-> N`` frames (which may translate 6 into 3) and the torch exception are its echo.

Not reported: errors already explained by a more specific rule (MN1, MN2, NET1, NC1, NC2, CFG1, or a
CUDA error / OOM of a rank: NCCL's errors are then consequences), benign WARNs (missing
libibverbs, OFI provider and plugin notices, RAS notices) and anything after the process's own
``Destroy COMPLETE`` / ``Abort COMPLETE`` (clean shutdown).
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..evidence.facts import first_ts
from ..evidence.nccl_facts import (
    RESULT_NAMES,
    after_shutdown,
    benign_warn,
    bridge_connect_errors,
    chains,
    driver_too_old,
    in_causal_order,
    int_in,
    local_causes,
    low,
    on,
    ranks_hosts,
    transport_fault,
    who,
)
from ..model import JobModel
from .base import Rule

#: Phrase -> (ncclResult_t name, meaning), first match wins.
_MEANINGS = (
    (("unhandled cuda error", "ncclunhandledcudaerror", "cuda failure", "cuda error"),
     "ncclUnhandledCudaError", "a CUDA call inside NCCL failed (driver, GPU state, or a bad device binding)"),
    (("remote process exited", "ncclremoteerror", "network error"),
     "ncclRemoteError", "a peer process exited or the network between ranks failed"),
    (("unhandled system error", "ncclsystemerror", "system call"),
     "ncclSystemError", "a system call failed (sockets, shared memory, memory limits, ulimit -l)"),
    (("invalid usage", "ncclinvalidusage"),
     "ncclInvalidUsage", "the NCCL API was used wrongly (same GPU twice, mismatched calls, a broken communicator)"),
    (("invalid argument", "ncclinvalidargument"),
     "ncclInvalidArgument", "a bad argument reached NCCL (device/stream binding, buffer, count) or builds disagree"),
    (("internal error", "ncclinternalerror"),
     "ncclInternalError",
     "an internal check failed (often a peer or its proxy thread died first; else a resource limit or an NCCL bug)"),
    (("was aborted", "abort"),
     "aborted", "the communicator was aborted after an earlier error (an echo: look for the first error)"),
)
_ERROR_KINDS = ("nccl_warn", "nccl_proxy_fail", "nccl_cuda_fail", "torch_nccl_error", "torch_nccl_err_kind",
                "torch_comm_aborted")
#: Classes that only report that something else failed first.
_ECHO_CLASSES = ("ncclRemoteError", "aborted")
#: Frames that mean a chain reached an API call (an error the user saw), not an internal probe.
_API_FRAMES = ("init.cc", "group.cc", "enqueue.cc", "proxy.cc", "transport.cc", "bootstrap.cc", "collectives.cc")


def check(job: JobModel, rule: Rule) -> list:
    if _explained(job):
        return []  # a specific rule explains the failure; NCCL's generic errors are its echo
    all_chains = chains(job)
    # A WARN followed by a return-code chain is a real failure, and the chain's first code names it.
    chain_code = {id(ch.cause): ch.code for ch in all_chains if ch.cause is not None and ch.cause.kind in _ERROR_KINDS}
    groups: dict[str, list[Event]] = defaultdict(list)
    failing: set[int] = set(chain_code)
    for ev in job.by_kind(*_ERROR_KINDS):
        if benign_warn(job, ev):
            continue
        key = _classify(ev)
        code = chain_code.get(id(ev), int_in(ev.get("rc")))
        if key == "warn" and code in RESULT_NAMES:
            key = RESULT_NAMES[code]
        groups[key].append(ev)
        if ev.kind != "nccl_warn":
            failing.add(id(ev))
    for ch in all_chains:
        if groups or id(ch.cause) in chain_code or after_shutdown(job, ch.origin):
            continue
        last = ch.lines[-1]
        if ch.code in RESULT_NAMES and any(f in str(last.get("srcfile_msg") or last.text) for f in _API_FRAMES):
            groups[f"chain:{RESULT_NAMES[ch.code]}"].append(ch.origin)

    # A process's own error first; peers' "remote process exited" / aborts only when nothing else
    # is there (they are the echo of the first).
    origins = {k: v for k, v in groups.items() if k not in _ECHO_CLASSES}
    echoes = [e for k, v in groups.items() if k in _ECHO_CLASSES for e in v]
    if origins:
        return [_finding(job, rule, key, in_causal_order(evs), failing, echoes)
                for key, evs in sorted(origins.items(), key=lambda kv: _order(kv[1]))][:3]
    return [_finding(job, rule, key, in_causal_order(evs), failing, [])
            for key, evs in sorted(groups.items(), key=lambda kv: _order(kv[1]))][:3]


def _order(evs: list[Event]) -> tuple:
    first = in_causal_order(evs)[0]
    return (first.ts is None, first.ts or 0.0, first.file, first.line)


def _explained(job: JobModel) -> bool:
    """True when a specific rule (MN1, MN2, NET1, NC1, NC2, CFG1, NV1) or a rank's crash explains the job."""
    specific = local_causes(job) + job.by_kind("nccl_no_iface", "nccl_version_mismatch") + driver_too_old(job)
    specific += bridge_connect_errors(job)
    return transport_fault(job) is not None or any(not after_shutdown(job, e) for e in specific)


def _classify(ev: Event) -> str:
    t = low(ev)
    for phrases, name, _ in _MEANINGS:
        if any(p in t for p in phrases):
            return name
    return "warn"


def _meaning(key: str) -> tuple[str, str]:
    name = key.split(":", 1)[-1]
    for _, n, meaning in _MEANINGS:
        if n == name:
            return n, meaning
    return "NCCL WARN", "NCCL warned about a condition it could not handle"


def _finding(job: JobModel, rule: Rule, key: str, evs: list[Event], failing: set[int], echoes: list[Event]):
    # The NCCL line (WARN / Cuda failure) is the cause; torch's exception text is its echo.
    nccl = [e for e in evs if e.kind.startswith("nccl_")]
    first = (nccl or evs)[0]
    name, meaning = _meaning(key)
    ranks, hosts = ranks_hosts(job, evs)
    if key.startswith("chain:"):
        frame = f"{first.get('srcfile_msg')}:{first.get('srcline_msg')}" if first.get("srcfile_msg") else first.text[-60:]
        summary = (f"NCCL returned {name} up the call stack{on(job, evs)} (first frame {frame}) "
                   f"but no WARN line says why: {meaning}; rerun with NCCL_DEBUG=WARN at least")
        return rule.finding(summary, severity="warning", confidence="low", ranks=ranks, hosts=hosts,
                            evidence=evs[:6], first_seen=first_ts(evs))
    msg = _message(first)
    version = next((str(e.get("version")) for e in evs if e.get("version")), None)
    summary = f"{name}{on(job, evs)}: {msg.strip()} — {meaning}"
    if version:
        summary += f" (NCCL {version})"
    if echoes:
        summary += f"; {who(job, echoes) or 'other ranks'} then reported the peer/communicator failure (echoes)"
    is_failure = any(id(e) in failing for e in evs)
    severity = "error" if is_failure and name != "aborted" else "warning"
    confidence = "medium" if name in ("NCCL WARN", "aborted") else "high"
    evidence = nccl[:5] + [e for e in evs if e not in nccl][:3] + in_causal_order(echoes)[:1]
    return rule.finding(summary, severity=severity, confidence=confidence, ranks=ranks, hosts=hosts,
                        evidence=evidence, first_seen=first_ts(evidence))


def _message(ev: Event) -> str:
    """What the error line says, without its prefix: 'NCCL error in NCCLUtils.hpp:82: invalid argument'."""
    if ev.kind == "torch_nccl_error" and ev.get("srcfile_msg"):
        where = f"{str(ev.get('srcfile_msg')).rsplit('/', 1)[-1]}:{ev.get('srcline_msg')}"
        return f"NCCL error in {where}: {ev.get('err') or '?'}"[:160]
    if ev.kind == "torch_nccl_err_kind":
        return f"{ev.get('err_kind')}: {ev.get('detail') or ''}"[:160]
    text = str(ev.get("msg") or ev.get("err") or ev.text)
    return text.split("NCCL WARN", 1)[-1].strip()[:160]
