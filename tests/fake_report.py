"""Hand-built reports for timeline, plot and TUI tests: no parser involved, so they stay stable.

``hang_report`` is a job of ``n`` ranks on hosts of ``per_host`` ranks where every rank timed out in
ALLREDUCE SeqNum ``seq`` of the default group, except the culprit, which hit CUDA OOM one collective
earlier and stopped. One rank's last line carries hostile markup and an OSC 52 clipboard write.
"""

from __future__ import annotations

from nccl_doctor.analysis import Report
from nccl_doctor.events import Event, LastLine
from nccl_doctor.findings import Evidence, Finding, Severity
from nccl_doctor.model.job import JobModel, RankState

HOSTILE = "boom [bold red]x[/] and [link=http://e]y[/link] \x1b]52;c;aGk=\x07 end"
T0 = 1_700_000_000.0


def _ev(kind: str, path: str, line: int, r: int, host: str, ts: float | None, text: str, **fields) -> Event:
    return Event(kind=kind, file=path, line=line, host=host, pid=1000 + r, cuda_dev=r % 8, rank=r, ts=ts,
                 fields=fields, text=text)


def rank_state(r: int, host: str, *, culprit: bool, seq: int, timed: bool, hostile: bool = False) -> RankState:
    path = f"logs/rank-{r:05d}.log"
    ts = (lambda s: T0 + s) if timed else (lambda s: None)
    evs = [
        _ev("nccl_version", path, 1, r, host, ts(0), "NCCL version 2.21.5+cuda12.4", version="2.21.5"),
        _ev("nccl_init", path, 2, r, host, ts(1), f"ncclCommInitRank comm 0xa rank {r} Init START",
            what="Init", phase="START", rank=r),
        _ev("nccl_init", path, 3, r, host, ts(2), f"ncclCommInitRank comm 0xa rank {r} Init COMPLETE",
            what="Init", phase="COMPLETE", rank=r),
        _ev("torch_work_update", path, 4, r, host, ts(10), "NCCL Work update periodically",
            pg_id=0, enqueued=seq - 1, completed=seq - 2),
    ]
    st = RankState(rank=r, host=host, pid=1000 + r, cuda_dev=r % 8, local_rank=r % 8, rank_source="file",
                   files=[path], events=evs, stage="running")
    if culprit:
        oom = _ev("cuda_oom", path, 5, r, host, ts(20), "torch.OutOfMemoryError: CUDA out of memory.",
                  detail="Tried to allocate 2.00 GiB")
        evs.append(oom)
        st.errors.append(oom)
        st.last_line = LastLine(path, 6, "Traceback ends here", ts(21))
    else:
        to = _ev("torch_wd_timeout", path, 5, r, host, ts(1820),
                 f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
                 "OpType=ALLREDUCE) ran for 1800000 milliseconds before timing out.",
                 seq=seq, op="ALLREDUCE", pg_rank=r)
        evs.append(to)
        st.timeouts.append(to)
        st.last_seq["default"] = seq
        text = HOSTILE if hostile else f"[Rank {r}] exiting after watchdog timeout"
        st.last_line = LastLine(path, 7, text, ts(1821))
    return st


def hang_report(n: int = 16, per_host: int = 4, culprit: int = 5, seq: int = 4521, timed: bool = True,
                verdict: bool = True, hostile_rank: int | None = 2, missing: tuple[int, ...] = ()) -> Report:
    ranks = [rank_state(r, f"gpu-node-{r // per_host:02d}", culprit=r == culprit, seq=seq, timed=timed,
                        hostile=r == hostile_rank) for r in range(n) if r not in missing]
    events = [e for st in ranks for e in st.events]
    hosts = sorted({st.host for st in ranks})
    job = JobModel(ranks=ranks, events=events, ranks_expected=n, hosts=hosts,
                   files=[st.files[0] for st in ranks], last_lines={})
    chost = f"gpu-node-{culprit // per_host:02d}"
    waiters = [r for r in range(n) if r != culprit and r not in missing]
    oom = [e for e in events if e.kind == "cuda_oom"]
    timeouts = [e for e in events if e.kind == "torch_wd_timeout"]
    findings = [
        Finding("RK1", "First rank to fail", Severity.ERROR, "high",
                f"rank {culprit} ({chost}) failed first: CUDA out of memory", ranks=[culprit], hosts=[chost],
                evidence=[Evidence.of(e) for e in oom], remedy="Reduce the batch size."),
        Finding("MN3", "Collective timeout", Severity.ERROR, "high",
                f"{len(waiters)} ranks waited 30 min in ALLREDUCE SeqNum {seq} of the default group",
                ranks=waiters, hosts=sorted({st.host for st in ranks if st.rank in waiters}),
                evidence=[Evidence.of(e) for e in timeouts[:3]], remedy="init_process_group(timeout=...)"),
        Finding("NV1", "Hostile evidence", Severity.WARNING, "low", "evidence with markup " + HOSTILE,
                ranks=[hostile_rank] if hostile_rank is not None else [], evidence=[]),
    ]
    if not oom:
        findings.pop(0)
    v = last = None
    if verdict and oom:
        v = {"headline": f"rank {culprit} ({chost}) failed first: CUDA out of memory; {len(waiters)} ranks "
                         f"then timed out in ALLREDUCE #{seq} [RK1, MN3]", "rules": ["RK1", "MN3"],
             "summary": f"rank {culprit} ({chost}) failed first: CUDA out of memory; {len(waiters)} ranks "
                        f"then waited 30 min in ALLREDUCE SeqNum {seq}", "rule": "RK1",
             "ranks": [culprit], "hosts": [chost]}
        last = {"rank": culprit, "ranks": [culprit], "host": chost, "why": "RK1: CUDA out of memory"}
    return Report(job=job, findings=findings, verdict=v, last_rank_to_report=last,
                  inputs={"files": n, "lines": 7 * n, "bytes": 700 * n, "unparsed_lines": 0, "skipped": []})
