"""Event kinds: the contract between the format files (parsers/*.toml), the job model and the rules.

Each kind maps to the fields its patterns are expected to provide (beyond the header fields of
its format, such as host/pid/tid/cuda_dev for NCCL lines). A pattern may provide a subset; a rule
must tolerate a missing field. Tests check that every pattern's kind is listed here.
"""

from __future__ import annotations

KINDS: dict[str, str] = {
    # ---- NCCL (header: host, pid, tid, cuda_dev, level, srcfile, srcline, func, ts) ----
    "nccl_version": "version, cuda: 'NCCL version 2.21.5+cuda12.4' (bare or INFO)",
    "nccl_cuda_driver": "driver (int): 'cudaDriverVersion 12020' (2.22+ INIT line; 12020 = CUDA 12.2 driver)",
    "nccl_init": "fn, comm, rank, nranks, cuda_dev_msg, nvml_dev, bus_id, parent, split_count (splitCount/childCount), "
    "color, key, comm_id, what (Init|Destroy|Abort), phase (START|COMPLETE; absent on pre-2.4 'comm .. rank .. nranks' "
    "lines, which give what=Init)",
    "nccl_topo": "comm, rank, nranks, nnodes, local_ranks, local_rank (2.20+ nRanks/nNodes line)",
    "nccl_trees": "trees: 'Trees [0] ...' (init reached topology/graph search)",
    "nccl_connected": "what: 'Connected all rings' / 'Connected all trees' (init reached connection setup)",
    "nccl_bootstrap": "iface, addr: 'Bootstrap : Using eth0:10.0.0.1<0>' (first interface of a list)",
    "nccl_net_socket": "iface, addr, ifaces: 'NET/Socket : Using [0]eth0:10.0.0.1<0> [1]...'",
    "nccl_net_ib": "devs, oob_iface, oob_addr: 'NET/IB : Using [0]mlx5_0:1/IB ... ; OOB eth0:...'",
    "nccl_net_iface": "iface, addr: old 'NET : Using interface eth0:10.0.0.1<0>' / 'NET/IB : Using interface eth0 for "
    "sideband'; provider: 'NET/OFI Selected Provider is efa'",
    "nccl_ib_none": "'NET/IB : No device found.' (no fields)",
    "nccl_using_net": "net: 'Using network IB|Socket|IBext|AWS Libfabric' (also 'Using internal Network IB')",
    "nccl_env": "var, val: 'NCCL_SOCKET_IFNAME set by environment to eth0'",
    "nccl_channel_net": "channel, src, dst, dir (send|receive), transport: inter-node channel "
    "'Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0'",
    "nccl_coll": "op (collective name: AllReduce, Broadcast, Send, ...), opcount (hex digits as printed, text), count, "
    "datatype, redop (ncclRedOp_t number), root, comm, nranks, stream: COLL trace 'AllReduce: opCount 2 sendbuff .. "
    "count 131072000 datatype 7 op 0 root 0 comm 0x.. [nranks=16] stream 0x..'",
    "nccl_propagate": "srcfile_msg, srcline_msg, func_msg (2.30.7+), code, errstr (SYSCHECK strerror), thread: "
    "'transport/net.cc:1298 -> 6 [Progress Thread]'",
    "nccl_ib_cqe": "peer, port, status, status_name (2.29+), opcode, opname (2.29+), len, vendor_err, reqtype: "
    "IB completion error",
    "nccl_ib_async": "event, dev, ib_port (text), where: IB async event (port error, fatal event)",
    "nccl_ib_qp_error": "err (errno, int), errstr, dev, ib_port, curr_state, next_state, gid_index, local_gid, remote_gid: "
    "'ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT, next state RTR, ...' "
    "(<= 2.18: 'failed with error <errstr> errno <err>')",
    "nccl_sock_closed": "peer, port: 'Connection closed by remote peer host<port>'",
    "nccl_connect_err": "peer, port, err, state (failed|exceeded|retrying): 'Connect to 10.0.0.2<45678> failed : "
    "Connection refused' (failed), '... returned 113(No route to host), exceeded error retry count after 35 attempts' "
    "(exceeded; attempts), 2.24+ INFO '... returned Connection refused, retrying (1/34) after sleep for 100 msec' and "
    "2.16-2.23 'Call to connect returned X, retrying' (retrying, severity warning; attempt, max_attempts, sleep_ms)",
    "nccl_connect_retry": "peer, port, err, state (retrying), attempt, max_attempts, sleep_ms: 'connect to X returned Connection refused, retrying (1/34)' / 'Call to connect returned ..., retrying' (INFO: normal while a peer's listener is not up; the failure is nccl_connect_err)",
    "nccl_socket_err": "err: other socket failures ('Socket recv failed', 'Call to recv from .. failed')",
    "nccl_cuda_fail": "code, err: \"Cuda failure 802 'system not yet initialized'\" (also unquoted old form); nccl-tests "
    "\"dgx-07: Test CUDA failure common.cu:893 'system not yet initialized'\" gives host (the writer), srcfile, srcline, err",
    "nccl_shm": "path, bytes, err: '/dev/shm' exhaustion ('failed to extend', 'Error while creating shared memory')",
    "nccl_alloc_fail": "what (calloc|malloc|host alloc|cuMem*), bytes: 'Failed to CUDA calloc 6291456 bytes'",
    "nccl_dup_gpu": "rank_a, rank_b, device: 'Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000'",
    "nccl_ofi_error": "request, rc, err: 'NET/OFI Request 0x.. completed with error. RC: 113. Error: 2 (UNDELIVERABLE)'",
    "nccl_svc_closed": "local_rank: '[Service thread] Connection closed by localRank 3'",
    "nccl_proxy_fail": "tp_rank, op, rank, rc: '[Proxy Service N] Failed to execute operation X from rank R, retcode C' "
    "(also 'Error encountered progressing operation', 'ncclProxyCallBlockingUDS call to tpRank' with "
    "op=ProxyCallBlockingUDS); err: '[Proxy Service] Poll failed: ...' / '[Proxy Progress] Failed to set CUDA device'",
    "nccl_no_iface": "what, iface: 'Bootstrap : no socket interface found' / 'No usable listening interface found' / "
    "'no device found matching ib9'",
    "nccl_version_mismatch": "rank_a, ver_a, rank_b, ver_b: 'Mismatched NCCL version detected'",
    "nccl_ras": "msg: RAS timeout/keep-alive lines; what=listen with addr, port ('RAS network listening socket at "
    "ip<port>': this process's RAS address), what=dead with addr, port ('RAS declaring peer ip<port> as DEAD'), "
    "what=peer with peer_addr, peer_port, peer_pid, gpus (the 'RAS peer N: socket ..' table)",
    "nccl_advice": "msg: an advisory WARN about the node's configuration, not a failure (RCCL's 'Missing \"iommu=pt\" "
    "from kernel command line', 'NUMA auto balancing enabled', 'Missing \"HSA_FORCE_FINE_GRAIN_PCIE=1\"')",
    "rccl_banner": "key (version|HIP version|ROCm version|Hostname|Librccl path), value; version, hip, git: RCCL's version "
    "banner (one line up to ROCm 6.2, five 'Key : value' lines later); the Hostname line is the full host name",
    # ---- NCCL RAS client report (ncclras; FORMATS-2 section 1). Node = IP of the RAS interface, rank = communicator
    # rank, pid = in the process's namespace. A report is read back in line order by evidence/ras.py ----
    "ras_banner": "version, cuda: 'NCCL version 2.27.5 compiled with CUDA 12.9' (first line of a report); runtime, "
    "driver: 'CUDA runtime version 12090, driver version 12080'",
    "ras_section": "what (job_summary|communicators|errors|warnings|no_data|outliers|outlier_node), secs (communicators: "
    "collection time), node, pids (outlier_node: 'Node 10.1.2.20 running processes 50120,50121')",
    "ras_comm": "group, ncomms, nodes, ranks_per_node (text, 'N' or 'min-max'), size, ranks, status "
    "(INIT|RUNNING|FINALIZE|ABORT|NOCOMM|UNKNOWN), errors (OK or a comma list): one row of the communicators table",
    "ras_block": "block (INCOMPLETE|DEAD|TIMEOUT|ERROR|MISMATCH), group, index, comm_hash (per-communicator blocks "
    "'#0-0 (3fa1c2d4e5b60718) INCOMPLETE'; global blocks have none)",
    "ras_detail": "what (missing|dead|timeouts|opcounts|status|errors|missing_list|unknown_list|no_info), n, unit "
    "(rank|process), coll (opcounts: AllReduce, .. or 'collective' before 2.26), ranks (missing_list/unknown_list: "
    "'1,5'), err_what (errors: Asynchronous|Initialization): the body line that says what a block is about",
    "ras_process": "pid, node, gpus (CUDA indices '0,1'), nvml: '  Process 48213 on node 10.1.2.17 managing GPU 3'",
    "ras_rank": "rank, gpu, nvml, pid, node (absent with '[process information not found]'), op (launched up to "
    "operation N), none (True: not launched any operations), status, err: one rank line, singular ('Rank 4 has "
    "launched up to operation 5120 -- GPU ..') or under a grouped line ('Rank 4 -- GPU 4 managed by ..')",
    "ras_ranks": "n, op, none, status, err: a grouped line ('29 ranks have launched up to operation 5121'); the rank "
    "lines after it belong to it",
    "ras_event": "ts, event (PEER_DEAD, PEER_UNRESPONSIVE, ..), pid, node, gpus, addr (raw ip<port>), details: one "
    "line of 'ncclras -m' monitor mode",
    "ras_client": "what (connect_failed|timeout|closed|version_mismatch), detail: the ncclras client's own messages "
    "(no report was obtained)",
    # ---- PyTorch Flight Recorder analyzer (torchfrtrace / fr_trace; FORMATS-2 section 2). One block per collective
    # with a problem: a header line, then 'key: value' lines; read back in line order by evidence/frtrace.py ----
    "frtrace_header": "what (not_joining|io_mismatch|errors), seq (the group's collective_seq_id), record_id (older "
    "'at entry N' wordings), pg, name, missing (older one-line form 'Missing ranks are {3}')",
    "frtrace_field": "key (internal record id|group info|collective|missing ranks|total input numel|total output "
    "numel|input sizes|output sizes|world size|expected ranks|collective state|error msg|error message), value",
    "frtrace_note": "what (no_dumps|no_errors|too_many|missing_dumps|empty_ops), ranks ('{3}' as printed), pg, desc: "
    "the analyzer's single-line messages and its fatal 'Missing dump files from ranks {3}'",
    # ---- torchrun's dynamic rendezvous (FORMATS-2 3.8; INFO unless said) ----
    "elastic_rdzv_node": "what (join_attempt|joined|keepalive_failed|shutdown_failed|store_host), node (descriptor "
    "fqdn_agentpid_n), run_id, round, node_rank, world (node ranks, not worker ranks), error (failures), pid "
    "(store_host: the agent hosting the TCP store)",
    "nccl_warn": "msg: any other NCCL WARN line (generic fallback, lowest priority)",
    # ---- nccl-tests (all_reduce_perf & co.; 'Test CUDA failure' is nccl_cuda_fail) ----
    "nccltests_failure": "host, what (NCCL|test), srcfile, srcline, err, last_err: \"dgx-07: Test NCCL failure "
    "common.cu:1234 'unhandled system error / <ncclGetLastError>'\"; what=test: ' .. dgx-07 pid 4242: Test failure "
    "common.cu:401' (with pid, no err)",
    "nccltests_row": "size, count, root, oop_wrong, ip_wrong (ints; #wrong 'N/A' gives None), type, redop, oop_time, "
    "oop_algbw, oop_busbw, ip_time, ip_algbw, ip_busbw (text, us and GB/s as printed): one result row "
    "'134217728  33554432  float  sum  -1  7536.0  17.81  33.39  0  7489.6 ...' (in-place columns may be absent)",
    # ---- PyTorch c10d (header: grank?, sev, mmdd, hms, srcfile, srcline) ----
    # Patterns after the ProcessGroupNCCL log prefix also give pg_id, pg_guid, pg_desc, pg_rank when the line has
    # '[PG 1 Rank 0]' / '[PG ID 0 PG GUID 0(default_pg) Rank 3]' / '[Rank 1]' (pg_rank = rank inside that PG).
    "torch_wd_timeout": "pg_rank, seq, op, shape (old TensorShape), numel_in, numel_out, timeout_ms, ran_ms: "
    "'Watchdog caught collective operation timeout'",
    "torch_wd_status": "pg_id, pg_guid, pg_desc, pg_rank, seq, enqueued, completed: 'Timeout at NCCL work: S, last enqueued ...' (all eras)",
    "torch_work_update": "pg_id, pg_guid, pg_desc, pg_rank, enqueued, completed: 'NCCL Work update periodically'",
    "torch_wd_exception": "pg_id, pg_guid, pg_desc, pg_rank, exc: 'watchdog thread terminated with exception: ...'",
    "torch_exception_hit": "pg_id, pg_rank, seq: 'Exception hit in NCCL work: 2' (2.3 era)",
    "torch_teardown": "pg_rank, what (failed_or_timed_out|taking_process_down|terminating), reason (terminating only): "
    "'Some NCCL operations have failed or timed out' / 'taking the entire process down' / 'Terminating the process "
    "after attempting to dump debug info, due to <reason>'",
    "torch_heartbeat_timeout": "pg_id, pg_guid, pg_desc, pg_rank, work_meta_size: 'Heartbeat monitor timed out!'",
    "torch_watchdog_stuck": "seconds: \"ProcessGroupNCCL's watchdog got stuck for N seconds\"",
    "torch_monitor_timeout": "pg_rank, what: 'NCCL monitor thread timeout' / 'monitoring thread detects no heartbeat' (2.2)",
    "torch_dump": "what (signal|first_pg|preparing|dumping|finished|dump_timeout|fr_disabled|remote_error), src "
    "('this local rank', 'rank 1', 'another rank', or the remote rank number), path, enqueued, completed (dump "
    "signal with 'Last enqueued NCCL work'), wait_ms (dump_timeout): flight-recorder dump messages",
    "torch_desync_timeout": "pg_rank, op, count: ' - [0] Timeout at collective: ALLREDUCE, #3' (desync report)",
    "torch_desync_rank": "rank (the first of the list), more (', 3, 7': the rest of a rank list), state "
    "(not_joined|not_finished|never_joined|inconsistent), finished, missing, detail (inconsistent): "
    "\"[1] finished collective #2, but didn't join collective #3\", 'ranks [1, 3] are the lagging ranks that caused "
    "this timeout. They never joined any collectives'",
    "torch_pg_options": "pg_id, pg_guid, pg_desc, pg_rank, size, global_rank, timeout_ms, pg_name, split_from, "
    "nccl_version: 'ProcessGroupNCCL initialization options'",
    "torch_pg_env": "async_error_handling, blocking_wait, desync_debug, dump_on_timeout, trace_buffer_size, "
    "enable_monitoring, heartbeat_timeout_sec, nccl_version: 'ProcessGroupNCCL environments' / 'HeartbeatMonitor "
    "environments'; timeout_ms from a torch <= 2.1 options line carrying the environment; one-per-line torch 1.x "
    "'NCCL_ASYNC_ERROR_HANDLING: 1'",
    "torch_pg_created": "pg_id, pg_guid, pg_desc, pg_rank, comm, device: 'ProcessGroupNCCL created ncclComm_ ..'",
    "torch_nccl_error": "exc_type (when the line is the raised exception), srcfile_msg, srcline_msg, err, version: "
    "'NCCL error in: file:line, <err>, NCCL version X'",
    "torch_nccl_err_kind": "err_kind, detail: 'ncclSystemError: ...' / 'ncclRemoteError: ...'",
    "torch_comm_aborted": "rank: 'NCCL communicator was aborted on rank N'; err: 'NCCL communicator encountered error "
    "set by ProcessGroupNCCL: ...'",
    "torch_barrier_device_unknown": "pg_rank, gpu: 'using GPU N to perform barrier as devices used by this process are currently unknown'",
    "torch_gil": "ms: 'Could not acquire GIL within 300 ms on exit'",
    "torch_version": "version: 'torch 2.4.1' / 'PyTorch version: 2.4.1' / 'torch.__version__ = 2.4.1'",
    "rank_world": "rank (optional), world_size: a script's own print of its rank and the world size ('rank 3 of 8', "
    "'world_size=8')",
    "torch_store_timeout": "exc_type, err, store_err: TCPStore / rendezvous / store get timeouts ('Timed out after N "
    "seconds waiting for clients', 'wait timeout', 'Socket Timeout', a ncclUniqueId store get that 'got error: "
    "<store_err>' with a timeout); what=init_barrier with rank, key, world_size, joined, timeout (store-based barrier "
    "after init); what=store_closed ('Failed to recv, got 0 bytes': the store server died); what=store_unreachable "
    "with store_host, store_port ('client socket has failed to connect', RendezvousConnectionError)",
    "torch_barrier_missing": "reporter (rank 0), ranks (text: '5' or '1, 2'), timeout_ms, exc_type: monitored_barrier "
    "'[Rank 0]: Rank(s) R failed to pass monitoredBarrier in N ms' (the ranks that did not arrive)",
    "gloo_timeout": "timeout_ms, op (recv|send), exc_type, srcfile_msg, srcline_msg: gloo transport timeout of a "
    "collective '[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv "
    "operation to complete'",
    # ---- errors of any process (Python, CUDA, C++, signals) ----
    "torch_not_in_group": "op, rank: distributed_c10d's 'Running all_reduce on global rank 2 which does not belong to "
                          "the given group': a no-op for that rank, so the group's members wait for it",
    "py_thread_exception": "thread: Python's 'Exception in thread NAME:' heading a thread's traceback (info)",
    "traceback_start": "'Traceback (most recent call last):'",
    "rpc_remote": "worker_id, worker_name: torch.distributed.rpc's 'On WorkerInfo(id=2, name=trainer2):' heading "
                  "the traceback of an exception raised on that worker, relayed to its caller",
    "signal_received": "sig: a process's own word that a signal reached it ('[rank: 1] Received SIGTERM: 15')",
    "self_pid": "self_pid: a rank's start-up line naming its own pid ('started on vm pid 13022')",
    "stall_report": "stale, stale_from, stale_adj: the job's own hang monitor naming the rank it saw stop ('rank 2 "
                    "heartbeat stale for 8.5 s', 'no progress from rank 1 since ...'); never the writer's rank",
    "dtype_note": "what: a rank's own word that it switched a tensor's dtype ('accumulating ... in float64', 'enabling "
                  "bf16 autocast'): one rank alone saying so before a size mismatch deviated",
    "shape_note": "what: a rank's own word that it padded, truncated or cut short its data ('padded to 24 with pad "
    "id 64', 'using a partial batch'), before anything failed",
    "numeric_warning": "what: a rank's own word that a value of its went non-finite or overflowed ('non-finite local "
    "loss (nan)', numpy's 'invalid value encountered'), before anything failed",
    "py_chain": "cause (set for 'from'): a chained exception's separator ('The above exception was the direct cause "
    "of the following exception:', 'During handling of the above exception, another exception occurred:')",
    "torch_c10d_frame": "srcline, op: a traceback frame in torch.distributed's distributed_c10d.py ('File \".../"
    "distributed_c10d.py\", line 2753, in send'): the torch.distributed call the process raised in",
    "python_exception": "exc_type, msg: last line of a traceback 'RuntimeError: ...' (exc_type is dotted name)",
    "log_error": "level (ERROR|CRITICAL), rank, msg: a logging record at error level that names its writer's rank "
    "(Accelerate's '[RANK n]'): that rank's own words, a cause only as its last word",
    "ray_worker_rank": "ip, pid, rank, local_rank, node_rank: Ray Train's table of its worker group ('- (ip=A, pid=P) "
    "world_rank=1, local_rank=1, node_rank=0'): maps a '(RayTrainWorker pid=P)' prefix to its rank",
    "ray_worker_died": "exit_type, detail: Ray's 'The actor is dead because its worker process has died' (which worker: "
    "the one rank that wrote no error while the others lost it)",
    "ray_worker_context": "rank, world_size, local_rank: the worker a Ray Train controller's health-check report is about",
    "ray_error_snippet": "ranks (text: '0,3'): a Ray Train controller's '[Rank 0,3 Error Snippet]:' header: those ranks "
    "reported an error (shown after it)",
    "slurm_step_stop": "by_srun | forced | aborted: srun ending its job step itself (kill-on-bad-exit, after a task's death) "
    "or an outside cancel reaching it: tasks reported after it were stopped",
    "py_stack_timeout": "after: faulthandler's 'Timeout (0:00:10)!' heading a dump of the process's stacks (info)",
    "shell_job_died": "script, pid, what, code, sig: bash's report of a background job dead of a signal ('launch.sh: "
                      "line 43: 18886 Killed  RANK=$i python train.py') (error)",
    "worker_exit": "word, who, pid, code, sig: a home-grown launcher's report of a worker's end ('worker 3 (pid 3794) "
                   "exited with code -6', 'FATAL: rank 2 terminated by signal 11', 'child 3887 exited with status -9'): "
                   "who is the worker's index (worker, rank, gpu, proc) or its pid (child, pid) (error)",
    "launcher_signalled": "sig: the deepspeed launcher signalled from outside ('Main process received SIGTERM, exiting')",
    "unit_exit": "unit, instance, how, status, signame / container, ccode: a service's or container's end as systemd "
                 "('train@2.service: Main process exited, code=killed, status=9/KILL') or docker compose "
                 "('trainer1-1 exited with code 137') reports it",
    "worker_mem_kill": "word, who: that launcher killing a worker for its memory ('memory watchdog: worker 2 rss 1.07 "
                       "GiB > limit 0.98 GiB, killing') (error)",
    "worker_started": "who | who2, pid: that launcher naming the pid it started a worker as ('started rank 3 as pid "
                      "3887', 'worker 0 started (pid 3788)') (info)",
    "loguru_caught": "func, process, caught_pid: loguru's 'An error has been caught in function ..., process ... (PID)', "
                     "heading its own copy of the traceback (info)",
    "py_stack": "current, tid, frames: one thread of a faulthandler dump, its frame lines joined ('File \"x.py\", "
                "line 3 in f | ...', innermost first); tid, state, thread, frames: one thread of a py-spy dump "
                "('f (x.py:3) | ...') (info)",
    "pyspy_process": "dumped_pid, cmd: py-spy's 'Process 604: python train.py' heading the dump of that process (info)",
    "cpp_terminate": "exc_type, how: \"terminate called after throwing an instance of 'c10::DistBackendError'\" / "
    "'terminate called without an active exception' (how)",
    "cuda_error": "err, exc_type (when the line is the raised exception): 'CUDA error: an illegal memory access was "
    "encountered' / 'unknown error' / 'ECC'",
    "cuda_oom": "detail, exc_type (when the line is the raised exception): 'CUDA out of memory. Tried to allocate ...' / "
    "torch.OutOfMemoryError",
    "dataloader_shm": "(no fields) 'ERROR: Unexpected bus error encountered in worker. This might be caused by "
    "insufficient shared memory (shm).'",
    "signal": "signal (number), sig (SIGABRT, 'Segmentation fault', 'Fatal Python error', ...), pid, detail (Fatal Python "
    "error text): 'Signal 6 (SIGABRT) received by PID 1234', '*** SIGSEGV ... received by PID', 'Segmentation fault'",
    "xid": "pci, code, msg: 'NVRM: Xid (PCI:0000:..): 79, ...' / 'NVRM: GPU at PCI:.. has fallen off the bus' (captured dmesg)",
    "oom_killer": "pid, process, rss_kb: 'Out of memory: Killed process 1234 (python) ... anon-rss:1000kB' / "
    "'oom-kill:...task=python,pid=1234'; "
    "count, step: slurmstepd 'Detected 1 oom-kill event(s) in StepId=4242.0'",
    "fabric_manager": "msg: nvidia-fabricmanager messages / 'fabric manager' state lines",
    # ---- torchrun / torch.distributed.elastic ----
    "elastic_restart": "role, state, left, max: 'Worker group FAILED. 3/3 attempts left; will restart worker group'; "
    "state=NEW_NODES with new_nodes, group_rank: 'Detected 1 new nodes from group_rank=2; will restart worker group'",
    "elastic_group_failed": "role: '[default] Worker group failed' (pre-torchrun torchelastic)",
    "elastic_rdzv": "role, restart_count, master_addr, master_port, group_rank, group_world_size, local_ranks, role_ranks, "
    "global_ranks, role_world_sizes, global_world_sizes: rendezvous result block",
    "elastic_failed": "code, local_rank, pid, binary: 'failed (exitcode: -6) local_rank: 6 (pid: 1246013) of binary: ...'",
    "timer_reaped": "pid, timers: torch.distributed.elastic.timer's server killing a worker whose expires() "
                            "deadline passed ('Reaping worker_pid=[7451]. Expired timers: [...]') (error)",
    "elastic_forced_kill": "pid, sig, force: 'Unable to shutdown process N via 15, forcefully exiting via 9' (the agent "
    "SIGKILLs a worker that ignored its SIGTERM)",
    "elastic_sigterm": "pid, sig: 'Sending process 1234 closing signal SIGTERM'; DeepSpeed's launcher 'Killing subprocess 1234' (sig SIGKILL)",
    "elastic_death_signal": "sig: 'Received Signals.SIGTERM death signal, shutting down workers' (torch 2.13: "
    "'Received 15 death signal'; the torchrun agent itself was signalled: a preemption, a time limit, scancel)",
    "elastic_cfe": "root_cause (bool), idx, time, host, rank, local_rank, exitcode, pid, sig, error_file, traceback: "
    "one ChildFailedError entry",
    "elastic_attempt": "attempt, local_rank: reply file / log paths with 'attempt_N/<local_rank>/'",
    "torchrun_command": "node_rank, nproc: a node's echoed 'torchrun --nnodes N --nproc-per-node P --node-rank K' (fixed "
    "node count): its agent's local rank L is global rank K * P + L",
    "elastic_launch_config": "max_restarts, nproc_per_node, min_nodes, max_nodes: 'Starting elastic_operator with launch configs'",
    "spawn_sigterm": "pid, sig: torch.multiprocessing.spawn's 'Terminating process 1234 via signal SIGTERM' (the "
                     "processes still running when one failed)",
    "mp_spawn_failed": "proc, exitcode, sig: '-- Process 0 terminated with the following error:' / 'process N "
    "terminated with exit code' / 'with signal SIGKILL'",
    # ---- Horovod ----
    "hvd_stall": "seconds: 'One or more tensors were submitted ... for more than 60 seconds'",
    "hvd_missing_ranks": "tensor, ranks: 'HorovodBroadcast_x [missing ranks: 1]' or 'Missing ranks:'/'Stalled ranks:' "
    "list line; shutdown ('!' when the stalled rank will be shut down)",
    "hvd_blacklist": "host: 'blacklist failing host: X' / 'host X has been blacklisted'",
    "hvd_timeout": "activity, min_np: 'Timed out waiting for minimum number of slots ...'",
    "hvd_stop": "what, count, limit: 'failure count == N -> stop running' / 'reset count N has exceeded limit M'",
    "hvd_worker_exit": "index, code: 'Process 3 exit with status code 134.'",
    "hvd_reset": "size: 'reset workers: N'",
    "hvd_shutdown": "'Job has been shutdown, see above error messages for details.'",
    # ---- DeepSpeed ----
    "ds_init_backend": "backend: 'Initializing TorchBackend in DeepSpeed with backend nccl'",
    "ds_version": "version: 'DeepSpeed info: version=0.17.3' / 'deepspeed version 0.17.3' / 'DeepSpeed 0.17.3'",
    "ds_mpi": "rank, local_rank, world_size, master_addr, master_port: 'Discovered MPI settings of world_rank=5, "
    "local_rank=1, world_size=8, ...'; world_size alone from the launcher's 'dist_world_size=8'",
    "ds_rank_map": "map: 'global_rank_mapping=defaultdict(...)'",
    "ds_spawn": "pid, local_rank, cmd: 'process 12345 spawned with command: [...--local_rank=0...]'",
    "ds_exit": "code: '[cmd] exits with return code = -6' (cmd is the child spawned last, not the one that failed)",
    "second_pg": "name: a second NCCL group for weight sync / custom PG ('weight update group', 'init_process_group for weight', 'stateless_init_process_group')",
    "stack_frame_collective": "func, file, line: py-spy / faulthandler frame in a torch collective "
    "('broadcast (torch/distributed/distributed_c10d.py:2772)', only all_reduce/broadcast/barrier/all_gather*/"
    "reduce_scatter*/... entry points) or in DeepSpeed comm/ZeRO code ('broadcast (deepspeed/comm/torch.py:216)', "
    "'_zero_init_param (deepspeed/runtime/zero/partition_parameters.py:1054)', faulthandler '  File \"..\", line N in f'; "
    "not traceback frames); native c10d::ProcessGroupNCCL::broadcastUniqueNCCLID / c10d::TCPStore:: frames (func only)",
    # ---- Slurm and other launchers ----
    "slurm_task_exit": "host, tasks, code, how: 'srun: error: node: tasks 8-13,15: Exited with exit code 1' (also Killed/Terminated)",
    "slurm_cancel": "what, jobid, host, time, reason: 'slurmstepd: error: *** JOB 1 ON node CANCELLED AT ... DUE TO TIME LIMIT ***'",
    "slurm_node_fail": "host: 'srun: error: Node failure on node'; on_host: '*** JOB 1 ON node CANCELLED AT .. DUE TO NODE "
    "FAILURE'; state: 'NODE_FAIL'",
    "mpi_abort": "rank, code: 'MPI_ABORT was invoked on rank 3'; rank, pid, host, signal, sig: 'mpirun noticed that "
    "process rank 3 with PID 0 on node n exited on signal 9 (Killed)' / 'has exited due to process rank 5 with PID ..'",
    # ---- training progress and start-up work ----
    "py_lib_frame": "a traceback frame in Python's own modules or a package: read, never kept (no event)",
    "py_signal_frame": "path, srcline, func: a traceback frame of a signal handler ('in _sigterm_notifier_fn'): the frames "
                       "above it are where the signal found the process",
    "py_script_frame": "path, srcline, func: a traceback frame in the job's own code (not Python's or a package's)",
    "kubectl_section": "host | verb: a debug bundle's heading of a kubectl command ('===== ... kubectl logs job-worker-0'): "
                       "the lines under a logs heading are that pod's (info)",
    "dshbak_header": "host: dshbak's '----------------' / host / '----------------' heading one host's block (a range "
                     "'node[1-2]' with -c; 'pdsh@login' for pdsh's own lines) (info)",
    "pssh_header": "idx, status (SUCCESS|FAILURE), host, code: pssh -i's '[1] 03:45:21 [FAILURE] node02 Exited with error "
                   "code 255' heading that host's lines",
    "file_header": "path: head's or tail's '==> path <==' before each file's lines: the lines after it are that file's",
    "log_warning": "level, msg: a record at warning level in the job's own words (no other pattern's): what one "
                   "rank alone said before a desync",
    "log_carry_on": "carry: a handler's message that it caught something and goes on ('..., skipping', 'retrying in 1.0s'):"
                    " the traceback right below it was handled",
    "train_step": "step, total: a training progress line (Megatron 'iteration N/ M' with ts when dated "
    "'[2024-06-23 15:04:30] iteration ...', 'step: N', 'Iter #N', 'global_step=N', 'Step N/M'); phase=valid: 'valid "
    "loss at iteration N'; loss, epoch (text): HF Trainer \"{'loss': .., 'epoch': 0.5}\" (no step)",
    "train_epoch": "epoch, total: 'Epoch 3/10' progress (total absent on Lightning bars)",
    "train_phase": "phase (checkpoint|eval|data|training), state (start|end), detail: a phase of training that is not a step: "
    "'saving checkpoint to ...' / 'checkpoint saved in 18.0 s', 'Running Evaluation' / 'Evaluation finished', "
    "'loading training shard 2' / 'waiting for the next batch'; phase=training state=end: 'training done', "
    "'Training completed' (the live progress model: a rank in a phase the others "
    "did not enter)",
    "checkpoint_load": "path, step, epoch: 'loading checkpoint' / 'resuming from' / 'Loaded checkpoint' / 'Continuing "
    "training from global step N'",
    "job_role": "role, role_rank: a job config naming a role's rank ('\"cache_rank\": 1', 'snapshot_rank=1'); the "
    "text holds every role the line gives (evidence.artifact: who owns what a reader failed on)",
    "artifact_write": "verb, path: a record that a rank wrote, saved or copied a file for others ('stats written to "
    "/run/stats.json', 'async EMA save to /run/ema/epoch-001.pt started'): evidence.artifact",
    "nonfinite_value": "value: a record holding a metric that is not a number ('recall bare nan', 'validation from "
    "rank 2: ... nan'): where a non-finite value showed first, and from which rank (evidence.numerics)",
    "artifact_read": "verb, path: a record that a rank waits for, reads or checks a file ('waiting for "
    "/run/ckpt/.sync.lock', 'lease /run/ckpt/LEASE is held'): the file a reader's next traceback failed on "
    "(evidence.artifact)",
    "checkpoint_none": "path (when printed): no checkpoint to resume from, the run starts from scratch (Megatron "
    "'WARNING: could not find the metadata file <path>' / 'will not load any checkpoints and will start from random', "
    "'No checkpoint found [in <path>]')",
    "startup_work": "what (model_load|download|data), detail: data preprocessing / downloading / model loading lines "
    "before the first step (TO2)",
    # ---- W&B ----
    "wandb_timeout": "msg: 'wandb: ERROR Run initialization has timed out' / ServiceStartTimeoutError or "
    "WandbServiceConnectionError exception line (not the 'raise ...(' source line) / 'Timed out waiting for wandb service'",
    # ---- Flight Recorder dumps (nccl_doctor/flightrec; line 0 = dump/group level, else entry position) ----
    "fr_dump": "version, encoding, backend, entries, entries_kept, world_size, pgs, comm_lib_version, keys, notes: one dump read",
    "fr_pg": "pg_id, pg_guid, pg_desc, ranks, size, pg_rank, enqueued, started, completed, last_seq, last_op, status_units, entries: one process group of a dump (SeqNum units)",
    "fr_collective": "pg_id, pg_guid, pg_desc, pg_rank, seq, p2p_seq, op_id, record_id, op, op_type, profiling_name, backend, numel_in, numel_out, input_sizes, output_sizes, input_dtypes, output_dtypes, state, retired, completed, timeout_ms, started_ns, completed_ns, duration_ms, frame, thread_name, is_last: one collective entry",
    "fr_p2p": "fields of fr_collective + peer, direction; seq = p2p_seq_id: one send/recv entry",
}
