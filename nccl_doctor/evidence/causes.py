"""Causes, not consequences: which single error line is a failure of its own.

``classify(ev, job_timed_out, rank_timed_out)`` says whether an event is a cause (with a category
and a one-line description) or a consequence: the echo of someone else's failure (peer closed the
socket, flushed IB work, a watchdog or gloo timeout, SIGTERM from the launcher, ``ncclRemoteError``)
or no error at all. ``CAUSE_KINDS`` lists every kind it may call a cause. ``failures.py`` builds
each rank's first failure from these lines; every public name here is importable from ``facts``.
"""

from __future__ import annotations

import re
import signal

from ..events import Event
from .facts import int_in

# ---- failures: causes, not consequences ---------------------------------------------------------

#: Error text that is the echo of someone else's failure, never a cause by itself.
_CONSEQUENCE = re.compile(
    r"Watchdog caught collective operation timeout|Connection closed by remote peer|remote process exited"
    r"|ncclRemoteError|communicator was aborted|ChildFailedError|SignalException|got signal: ?15\b|SIGTERM"
    r"|Connection reset by peer|Broken pipe|WR_FLUSH_ERR|status=5\b|with error 5\b|KeyboardInterrupt"
    r"|Socket recv failed|Connection closed by localRank|DistStoreError|[Tt]imed out|[Tt]imeout"
    # gloo's transport and the TCPStore client, when the process at the other end went away
    r"|Connection closed by peer|caused by a remote worker|pair closure|recv, got 0 bytes|Connection was likely closed"
    r"|received errors while waiting for send/recv from rank"
    # TensorPipe (torch.distributed.rpc) on a worker whose connection closed: the worker at the other end went
    # away ("RuntimeError: eof (this error originated at tensorpipe/transport/shm/connection_impl.cc:259)")
    r"|encountered error when reading incoming|^eof \(this error originated at tensorpipe"
    # torch.distributed.rpc relaying another worker's exception (its traceback below is that worker's own)
    r"|On WorkerInfo\(id=\d{1,7}, name="
    # gloo's transport receiving another collective's data: the symptom of a desync (DSY1)
    r"|collective mismatch|data size doesn't match expected size"
    # TORCH_DISTRIBUTED_DEBUG=DETAIL's check: every rank reports the mismatch, one of them caused it
    r"|Detected mismatch between collectives"
    # torch's Join(throw_on_early_termination=True): the ranks that still had inputs learn that another
    # ran out (that rank raises "Rank N exhausted all inputs.", its own)
    r"|Detected at least one rank that exhausted inputs",
)
#: Exception types that only report that a child/peer failed.
_ECHO_TYPES = ("ChildFailedError", "CalledProcessError", "ProcessExitedException", "ProcessRaisedException",
               "SignalException", "WorkerGroupError", "TrainingFailedError", "RayTaskError",
               "ActorDiedError",
               # submitit's driver reporting a task that failed or never finished (it quotes the task's error)
               "FailedJobError", "UncompletedJobError",
               "KeyboardInterrupt", "SystemExit", "DistNetworkError", "DistStoreError",
               # an agent finding its rendezvous closed: another node's agent ended the job
               "RendezvousClosedError",
               # a notebook runner reporting the cell that failed or ran out of time (papermill, nbclient)
               "PapermillExecutionError", "CellExecutionError", "CellTimeoutError", "DeadKernelError",
               # an experiment tracker's client torn down with the process (wandb's mailbox at exit)
               "HandleAbandonedError")
#: The TCPStore server failing to bind its port (c10d's socket.cpp): not an echo of a peer, a port that
#: another process holds ("...failed to listen on any local network address. port: 29500, ..., name:
#: EADDRINUSE, message: address already in use").
_CANNOT_LISTEN = re.compile(r"failed to listen on any local network address\.? port: (?P<port>\d{1,5})|EADDRINUSE"
                            r"|[Aa]ddress already in use")


#: What a wrapper prints about the job it ran, its exit status and nothing else (GitLab's "ERROR: Job
#: failed: exit code 1", Jenkins' "ERROR: script returned exit code 1", a script's "command exited with
#: status 1"): the job's failure seen from outside, not a process's own words.
_WRAPPER_EXIT = re.compile(r"(?:^|\W)(?:[Jj]ob failed|script returned|[Pp]rocess completed with|[Cc]ommand failed|"
                           r"exited with|returned|failed with)[^\n]{0,40}?\bexit (?:code|status):? ?-?\d{1,4}\.?\s{0,4}$")


#: ECONNABORTED: the local TCP stack aborted an established connection (a link or interface going
#: down under it, an administrator killing sockets); the peers then see a reset, which is the echo.
_LOCAL_ABORT = re.compile(r"Software caused connection abort")


def get_port(msg: str) -> str:
    m = _CANNOT_LISTEN.search(msg)
    return m.group("port") if m and m.group("port") else "(its port)"


_CUDA_RX = re.compile(r"CUDA error|CUDA out of memory|illegal memory access|out of memory|ECC error|Xid", re.I)


def _cuda_text(text: str) -> bool:
    """A CUDA failure named in the text. Every alternative holds one of four words: a lower-cased
    substring test first spares the case-insensitive regex on the many texts that hold none."""
    low = text.lower()
    if "cuda" not in low and "memory" not in low and "ecc" not in low and "xid" not in low:
        return False
    return _CUDA_RX.search(text) is not None


NETWORK_KINDS = ("nccl_ib_cqe", "nccl_connect_err", "nccl_ofi_error", "nccl_no_iface")
#: Every kind ``classify`` may call a cause.
CAUSE_KINDS = ("python_exception", "log_error", "cpp_terminate", "cuda_error", "cuda_oom", "signal", "xid", "oom_killer",
               "nccl_cuda_fail", "nccl_alloc_fail", "nccl_shm", "nccl_dup_gpu", "torch_nccl_error",
               "torch_nccl_err_kind", "torch_wd_exception", *NETWORK_KINDS, "elastic_cfe", "elastic_failed",
               "slurm_task_exit", "mp_spawn_failed", "ds_exit", "mpi_abort", "slurm_node_fail", "ray_worker_died",
               "shell_job_died", "worker_exit", "worker_mem_kill", "unit_exit", "timer_reaped")
#: Echo text of a peer that went away (not a timeout: the waiter did not wait the full window).
_PEER_GONE = re.compile(r"Connection (?:closed|reset) by (?:remote )?peer|Broken pipe|remote process exited"
                        r"|Connection was likely closed|got 0 bytes|^eof \(this error originated at tensorpipe")
#: A rank waiting for a peer that never came (gloo's transport, the TCPStore): always a consequence.
_TIMEOUT_ECHOES = ("gloo_timeout", "torch_store_timeout", "torch_barrier_missing")
#: A rank's own error lines that may be no more than the echo of another rank's failure.
_OWN_ERRORS = ("python_exception", "cpp_terminate", "torch_wd_exception", "torch_nccl_error", "torch_nccl_err_kind",
               *_TIMEOUT_ECHOES)
#: Launcher/host reports about a process (not the process's own words).
_REPORTS = ("elastic_cfe", "elastic_failed", "slurm_task_exit", "mp_spawn_failed", "ds_exit", "mpi_abort",
            "slurm_node_fail", "ray_worker_died", "shell_job_died", "worker_exit", "worker_mem_kill", "unit_exit",
            "timer_reaped")


#: An exit report that names the process by pid after what it is, and that is none of the job's
#: workers: "log writer pid 20270 exited with code -9", "uploader pid 88 died".
_HELPER_PID = re.compile(r"\b(?:writer|logger|uploader|listener|monitor|watcher|helper|daemon|collector|shipper|exporter"
                         r"|prefetcher|server|janitor|cleaner|reaper)(?: process)? (?:pid|PID)[ #=:]?\d")
#: A failure table's traceback field that holds an exception (torchrun @record), not a signal note.
_TABLE_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w{0,64}\.){0,8}[A-Za-z_]\w{0,64}(?:Error|Exception|Exit|Interrupt)\b")


def _exit_is_consequence(code: int | None, sig: str | None, job_timed_out: bool) -> bool | None:
    """None: not a failure at all (exit 0); True: killed because of someone else."""
    if code == 0 and not sig:
        return None
    if code in (-15, 143, 15) or (sig and "TERM" in sig.upper()):
        return True
    if code in (-6, 134) or (sig and "ABRT" in sig.upper()):
        return job_timed_out  # the watchdog's teardown after a timeout
    return False


#: The echo words other than the bare "timed out" / "timeout".
_ECHO_WORDS = re.compile(_CONSEQUENCE.pattern.replace("|[Tt]imed out|[Tt]imeout", ""))


#: What a shell's report of a pid says of its rank (failures and orphans replace it once a line ties the pid to one).
PID_UNNAMED = "; which rank it does not say"

#: A print that says the rank stops on what it found ("ERROR: ...", "FATAL: ...").
_STOPS = re.compile(r"\[?(?:ERROR|CRITICAL|FATAL)\]?:? ")

#: A timeout of the process's own machinery, which no peer takes part in: the DataLoader's ``timeout=``
#: firing because its own worker processes stalled (a hung mount, a blocked read).
_LOCAL_TIMEOUT = re.compile(r"DataLoader timed out after")


#: A script's own monitor that found another rank's heartbeat stale ("heartbeat of rank 1 is 9 s old (limit 8 s);
#: aborting instead of waiting for the collective timeout"): its check, not an echo, whatever timeout it mentions;
#: evidence.accused names the rank it names.
STALE_PEER = re.compile(r"\bheartbeats? (?:of|from) (?:[Rr]ank|RANK) ?\d{1,7}\b")


def _own_timeout(etype: str, msg: str) -> bool:
    """An exception that timed out on its own: of another package (wandb's ServiceStartTimeoutError,
    an HTTP client's ReadTimeout: a type with a module path outside torch), or of the process's own
    machinery (``_LOCAL_TIMEOUT``); a cause, although "timed out" usually echoes a peer's failure.
    Never with another echo word in the message."""
    module = etype.rpartition(".")[0]
    local = bool(module) and not module.startswith("torch") or _LOCAL_TIMEOUT.search(msg) is not None
    return local and _ECHO_WORDS.search(msg) is None


def classify(ev: Event, job_timed_out: bool, rank_timed_out: bool) -> tuple[str, str] | None:
    """(category, description) when ``ev`` is a cause, None when it is a consequence or no error."""
    k, get = ev.kind, ev.get
    text = ev.text
    if k in _TIMEOUT_ECHOES:
        return None
    if k == "python_exception":
        etype, msg = str(get("exc_type") or ""), str(get("msg") or "")
        if _LOCAL_ABORT.search(msg):  # its own host's network stack dropped the connection: not a peer's doing
            return "host", (f"{etype.rsplit('.', 1)[-1]}: its own host aborted the connection (ECONNABORTED, "
                               "'Software caused connection abort'): that host's network or TCP stack failed")[:200]
        if _CANNOT_LISTEN.search(msg):  # the store's own port is taken: this process could not host it
            return "config", (f"its store could not listen on port {get_port(msg)}: the address is already in use "
                              "(another job, or a leftover process of an earlier run, holds it)")
        if etype.rsplit(".", 1)[-1] in _ECHO_TYPES or (etype == "Exception" and not msg.strip()):
            return None
        if etype == "BrokenPipeError":  # Python's own, on a write to a closed pipe (its stdout's reader, a
            # queue): gloo's lost peers are RuntimeErrors, never this type
            return "exception", (f"BrokenPipeError: {msg}: a pipe it wrote to was closed (the reader of its "
                                 "output, or a queue's other end, went away)")[:200]
        if etype == "ConnectionResetError" or (etype == "TimeoutError" and msg.startswith("[Errno ")):
            # Python's own socket error in the script's code (a storage or service fetch, a helper process; an OS
            # timeout, "[Errno 110] Connection timed out"): torch's lost peers and collective timeouts are
            # RuntimeErrors (gloo), DistNetworkErrors or DistBackendErrors
            return "exception", f"{etype}: {msg}"[:200]
        if _CONSEQUENCE.search(msg) and not _cuda_text(msg) and not _own_timeout(etype, msg) \
                and not STALE_PEER.search(msg):
            return None
        cat = "oom" if "OutOfMemory" in etype or "out of memory" in msg else \
            "cuda" if _cuda_text(msg) else "exception"
        return cat, f"{etype}: {msg}".strip(": ")[:200]
    if k == "numeric_warning":
        # a rank's own print that its numbers went bad and it stops ("[rank0] ERROR: non-finite loss nan at step
        # 11; stopping this run", then sys.exit(1)): its last word, as a logged error is; a warning it went on from
        # is no cause (a rankless one is nobody's: a shared console's)
        m = _STOPS.match(text) if ev.rank is not None else None
        return ("exception", f"logged error: {text[m.end():m.end() + 180]}") if m is not None else None
    if k == "log_error":
        msg = str(get("msg") or "")
        if _CONSEQUENCE.search(msg) and not _cuda_text(msg) and not _own_timeout("", msg):
            return None  # it logged what its peers' loss did to it
        if _WRAPPER_EXIT.search(msg) and ev.rank is None:
            return None  # a CI runner or job script reporting the job's exit ("Job failed: exit code 1")
        return "exception", f"logged {str(get('level') or 'ERROR').lower()}: {msg}"[:200]
    if k == "cpp_terminate":
        etype = str(get("exc_type") or "an exception")
        # DistBackendError is the watchdog re-throwing a timeout or NCCL error (quoted elsewhere)
        if "DistBackendError" in etype or ((rank_timed_out or job_timed_out) and "CUDA" not in etype):
            return None
        if _CONSEQUENCE.search(text) and not _cuda_text(text):
            return None  # its what() (joined to the record) is an echo: a lost peer, a desync
        if get("how"):  # "terminate called without an active exception" / "recursively": say it as it was
            return "exception", f"terminate called {get('how')}"
        return "exception", f"terminate called after throwing {etype}"  # its what() line says more
    if k == "cuda_error":
        return "cuda", f"CUDA error: {get('err') or text}"[:200]
    if k == "cuda_oom":
        detail = str(get("detail") or "").strip()
        return "oom", (detail if detail.startswith("CUDA out of memory") else
                       f"CUDA out of memory{': ' + detail if detail else ''}")[:200]
    if k == "signal":
        name = str(get("sig") or get("signal") or text)  # (its name, "SIGTERM", says more than 15)
        if _exit_is_consequence(None, name, job_timed_out or rank_timed_out):
            return None
        number = get("signal")
        if isinstance(number, int) and get("sig"):  # a bare number says little: "SIGKILL (signal 9)"
            return "signal", f"{get('sig')} (signal {number})"
        return "signal", str(number or text)[:200]
    if k == "xid":
        return "host", f"GPU Xid {get('code')}: {get('msg') or text}"[:200]
    if k == "slurm_node_fail":
        return "host", f"Slurm node failure on {get('host') or get('on_host') or 'a node'}"
    if k == "oom_killer":
        return "host", f"kernel OOM killer killed {get('process') or 'a process'} (pid {get('pid')})"
    if k in ("nccl_cuda_fail", "nccl_alloc_fail", "nccl_shm", "nccl_dup_gpu"):
        return "nccl", f"NCCL: {text.split('NCCL WARN', 1)[-1].strip()}"[:200]
    if k == "torch_nccl_error":
        err = str(get("err") or "")
        if _CONSEQUENCE.search(err):
            return None
        etype = str(get("exc_type") or "").rsplit(".", 1)[-1]
        return "nccl", f"{etype + ': ' if etype else ''}NCCL error: {err}"[:200]
    if k == "torch_nccl_err_kind":
        return None if get("err_kind") == "ncclRemoteError" else ("nccl", f"{get('err_kind')}: {get('detail')}")
    if k == "torch_wd_exception":
        exc = str(get("exc") or text)
        if _CONSEQUENCE.search(exc) and not _cuda_text(exc):
            return None
        return ("cuda" if _cuda_text(exc) else "exception"), f"watchdog thread terminated with: {exc}"[:200]
    if k in NETWORK_KINDS:
        status = int_in(get("status"))
        if k == "nccl_ib_cqe" and (status == 5 or "FLUSH" in str(get("status_name") or "")):
            return None
        return "network", text.split("NCCL WARN", 1)[-1].strip()[:200]
    return _classify_exit(ev, job_timed_out)


def _classify_exit(ev: Event, job_timed_out: bool) -> tuple[str, str] | None:
    k, get = ev.kind, ev.get
    if k == "elastic_cfe":
        code, sig = int_in(get("exitcode")), get("sig")
        if _exit_is_consequence(code, sig, job_timed_out) is not False:
            return None
        said = str(get("traceback") or "")
        if _TABLE_EXCEPTION.match(said):  # @record: the row holds the worker's exception
            if _CONSEQUENCE.search(said) and not _cuda_text(said):
                return None
            return ("cuda" if _cuda_text(said) else "exception"), said[:200]
        return "exit", f"exit code {code}" + (f" ({sig})" if sig else "") + " in torchrun's failure table"
    if k == "elastic_failed":
        code = int_in(get("code"))
        if _exit_is_consequence(code, None, job_timed_out) is not False:
            return None
        sig = _signal_of(code)
        return "exit", f"exit code {code} ({sig + '; ' if sig else ''}local rank {get('local_rank')}, pid {get('pid')})"
    if k == "slurm_task_exit":
        code, how = int_in(get("code")), str(get("how") or "").strip()
        if how in ("Killed", "Terminated") or (how == "Aborted" and job_timed_out):
            return None  # srun stopping the other tasks after a failure, or the watchdog's teardown
        if "Exited" in how and _exit_is_consequence(code, None, job_timed_out) is not False:
            return None
        what = f"exited with code {code}" if "Exited" in how else f"ended with: {how}"
        tasks = str(get("tasks") or "?")
        word = "task" if tasks.isdigit() else "tasks"
        return "exit", f"srun: {word} {tasks} on {get('host') or '?'} {what}"
    if k == "mp_spawn_failed":
        code, sig = int_in(get("exitcode")), get("sig")
        if (code is not None or sig) and _exit_is_consequence(code, sig, job_timed_out) is not False:
            return None
        how = f" with signal {sig}" if sig else f" with exit code {code}" if code is not None else ""
        return "exit", f"process {get('proc')} terminated{how} (torch.multiprocessing.spawn)"
    # Horovod worker exits are MN6's story (elastic Horovod drops and re-adds workers by design).
    if k == "ds_exit":
        code = int_in(get("code"))
        if _exit_is_consequence(code, None, job_timed_out) is not False:
            return None
        # The launcher prints the command it spawned last, not the one of the child that died
        # (deepspeed/launcher/launch.py: `cmd` is left over from its spawn loop): no rank from it.
        sig = _signal_of(code)
        return "exit", f"exit code {code}{f' ({sig})' if sig else ''} of a child of the DeepSpeed launcher (which one it does not say)"
    if k == "timer_reaped":
        timers = str(get("timers") or "").strip()
        return "signal", "the elastic timer server killed it (SIGKILL): its expires() deadline passed" + \
            (f" ({timers[:120]})" if timers else "")
    if k == "worker_mem_kill":
        return "oom", f"its launcher killed it for its memory: {ev.text.strip()}"[:200]
    if k == "worker_exit":
        if _HELPER_PID.search(ev.text) is not None:
            return None  # a helper process of the job's own (its log writer, an uploader), not a rank
        code = worker_exit_code(ev)
        if _exit_is_consequence(code, None, job_timed_out) is not False:
            return None
        sig = _signal_of(code)
        return "exit", f"exit code {code}{f' ({sig})' if sig else ''}, as its launcher reports"
    if k == "unit_exit":
        code = worker_exit_code(ev)
        if _exit_is_consequence(code, None, job_timed_out) is not False:
            return None
        sig = _signal_of(code)
        who = get("container") or (f"{get('unit')}@{get('instance')}.service" if get("instance") else f"{get('unit')}.service")
        by = "docker" if get("container") else "systemd"
        return "exit", f"exit code {code}{f' ({sig})' if sig else ''}, as {by} reports for {who}"
    if k == "shell_job_died":
        signum = int_in(get("signum"))
        what, sig = (get("what"), get("sig")) if signum is None else (f"terminated by signal {signum}", _signal_of(-signum))
        pid = f"; pid {get('pid')}" if get("pid") is not None else ""
        return "exit", f"{what} ({sig}{pid}, as the shell that started it reports{PID_UNNAMED})"
    if k == "ray_worker_died":
        how = str(get("exit_type") or "").strip()
        return "exit", f"its worker process died (Ray{': ' + how if how else ''}; which one Ray's line does not say)"
    if k == "mpi_abort":
        if ev.text.lstrip().startswith("Process name:") and get("code") is not None:
            return "exit", f"exit code {get('code')} (mpirun: the first process to exit with a non-zero status)"
        return "exit", ev.text.strip()[:200]
    return None


def worker_exit_code(ev: Event) -> int | None:
    """A home-grown launcher's report (``worker_exit``) as an exit code: its status, or minus the
    signal it names ("terminated by signal 11": -11, as torchrun reports a signal); a service's or
    container's (``unit_exit``) likewise: systemd's code=killed/dumped status is a signal, a
    container's status above 128 is 128 + the signal."""
    if ev.kind == "unit_exit":
        if ev.get("container") is not None:
            code = int_in(ev.get("ccode"))
            return code if code is None or code <= 128 or code > 128 + 64 else -(code - 128)
        status = int_in(ev.get("status"))
        return status if status is None or ev.get("how") == "exited" else -status
    code = int_in(ev.get("code"))
    if code is not None:
        return code
    sig = str(ev.get("sig") or "")
    if sig.isdigit():
        return -int(sig)
    try:
        return -signal.Signals[sig].value
    except KeyError:
        return None


def _signal_of(code: int | None) -> str | None:
    """-9 -> 'SIGKILL': a launcher's negative exit code is the signal that ended the child."""
    return _signal_name(-code) if code is not None and code < 0 else None


def _signal_name(num: int) -> str | None:
    """9 -> 'SIGKILL' (torchrun reports a worker killed by a signal as exit code -N)."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return None
