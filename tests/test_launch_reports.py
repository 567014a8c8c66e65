"""Launch reports read for their rank: a one-agent job's local ranks, a function entrypoint's relayed
child, a service that ran the whole job, a worker killed after the stop's grace period. Line shapes
from fixtures/realruns/t120_*, t121_hang_burst_r3_w4_journal_rank and t122_save_hang_r1_w3_rank_redirect,
with other pids, ports and times. Expected ranks are read from the lines by hand."""

from __future__ import annotations

from nccl_doctor import analyze

_ELASTIC = "torch/distributed/elastic/multiprocessing/api.py"
_CLOSED = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
           "by peer [127.0.0.1]:41311. This is typically caused by a remote worker crashing.")


def _verdict(tmp_path, lines: list[str]) -> dict:
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(tmp_path)], jobs=1).verdict or {}


def test_one_agent_that_ran_every_rank_names_its_failed_local_rank_the_rank(tmp_path):
    # a driver caught ChildFailedError: no failure table, only the agent's own lines
    lines = [f"2026-11-28 02:07:0{r},100 INFO train: rank {r}/4 joined" for r in range(4)]
    lines += [f"[rank{r}]: {_CLOSED}" for r in (1, 3)]
    lines += [f"W1128 02:07:16.528000 31803 {_ELASTIC}:1028] Sending process {pid} closing signal SIGTERM"
              for pid in (31828, 31829, 31831)]
    lines += [f"E1128 02:07:16.619000 31803 {_ELASTIC}:1002] failed (exitcode: -9) local_rank: 2 (pid: 31830) of "
              "binary: /usr/bin/python3", "2026-11-28 02:07:16,622 ERROR driver: job FAILED: 4 of 4 workers failed"]
    assert _verdict(tmp_path, lines).get("ranks") == [2]


def test_a_service_that_ran_the_whole_job_exiting_1_is_no_rank_s_failure(tmp_path):
    # journalctl's shape: the unit's own exit line after torchrun's; rank 3 hung, 0-2 timed out
    lines = [f"Nov 28 02:09:5{r} vm ddp-train[700]: [rank{r}] step 11 loss 0.{r}1" for r in range(4)]
    lines += [f"Nov 28 02:10:0{r} vm ddp-train[700]: [rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/"
              f"gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete"
              for r in range(3)]
    lines += ["Nov 28 02:10:09 vm systemd[1]: ddp-train.service: Main process exited, code=exited, status=1/FAILURE",
              "Nov 28 02:10:09 vm systemd[1]: ddp-train.service: Failed with result 'exit-code'."]
    verdict = _verdict(tmp_path, lines)
    assert verdict.get("ranks") == [3]


def test_the_worker_killed_after_the_stops_grace_period_was_stuck(tmp_path):
    lines = [f"W1128 02:07:34.263000 31898 {_ELASTIC}:1028] Sending process {31906 + r} closing signal SIGTERM"
             for r in range(3)]
    lines.insert(0, "W1128 02:07:34.262000 31898 torch/distributed/elastic/agent/server/api.py:753] Received 15 "
                    "death signal, shutting down workers")
    for r in range(3):
        lines += [f"[rank {r}] preempted (SIGTERM) at step 40", f"[rank {r}] saving checkpoint of step 40 to /ckpt/r{r}.pt"]
        if r != 1:
            lines += [f"[rank {r}] checkpoint saved in 0.21 s", f"[rank {r}] exiting for preemption"]
    lines += [f"W1128 02:08:04.263000 31898 {_ELASTIC}:1047] Unable to shutdown process 31907 via 15, forcefully "
              "exiting via 9"]
    assert _verdict(tmp_path, lines).get("ranks") == [1]


def test_a_pssh_block_names_the_host_of_the_lines_under_its_header(tmp_path):
    """t139_nodekill_n2_pssh_tee's shape: pssh -i prints each host's output as a block under "[N] time
    [FAILURE] host ..."; node02's block holds only its ranks' start-up lines (exit 255: ssh lost it)."""
    lines = ["[1] 03:45:21 [FAILURE] node02 Exited with error code 255",
             "rank 3/4 (local 1) ready, pid 11611", "rank 2/4 (local 0) ready, pid 11609",
             "[2] 03:45:22 [FAILURE] node01 Exited with error code 1",
             "rank 0/4 (local 0) ready, pid 11610", "rank 1/4 (local 1) ready, pid 11612", "step 10/400 loss 1.2168"]
    lines += [f"[rank{r}]: {_CLOSED}" for r in (1, 0)]
    v = _verdict(tmp_path, lines)
    assert v.get("hosts") == ["node02"] and v.get("ranks") == [2, 3]


def test_of_two_nodes_the_one_told_another_node_count_than_the_nodes_that_started_is_named(tmp_path):
    """t146_nnodes3_n1_2x2_info_redirect's shape: two torchrun agents' launch configs, one given --nnodes 3;
    two agents started, so the one that says 3 was started wrong."""
    api = "torch/distributed/launcher/api.py:254]"
    for host, pid, nodes in (("p5-west-17", 17466, 2), ("p5-west-18", 17465, 3)):
        lines = [f"I1128 04:00:17.458000 {pid} {api} Starting elastic_operator with launch configs:",
                 f"I1128 04:00:17.458000 {pid} {api}   min_nodes                : {nodes}",
                 f"I1128 04:00:17.458000 {pid} {api}   max_nodes                : {nodes}",
                 f"I1128 04:00:17.458000 {pid} {api}   run_id                   : job-7",
                 f"I1128 04:00:17.458000 {pid} {api}   rdzv_endpoint            : p5-west-17:35950",
                 "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"]
        (tmp_path / f"{host}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    v = analyze([str(tmp_path)], jobs=1).verdict or {}
    assert v.get("hosts") == ["p5-west-18"]


def test_a_node_the_logs_only_name_fully_qualified_keeps_its_full_name():
    """Findings cut host names at the first dot (NCCL's short names and torchrun's FQDNs are one node);
    a node no line names short (t145_hang_n1_2x2_fqdn_split: gpu-a100-80gb-04.cluster.internal in every
    line) is shown as written; one that is also named short, and IP addresses, are not."""
    from nccl_doctor.model.hosts import as_written

    hosts = ["gpu-a100-80gb-04.cluster.internal", "node-7", "node-7.rack-2.dc1", "10.0.3.17", "localhost"]
    assert as_written(hosts) == {"gpu-a100-80gb-04": "gpu-a100-80gb-04.cluster.internal"}


def test_a_node_only_its_console_s_name_names_keeps_the_job_s_domain():
    """t427_nodekill_3p1: the killed node's console, gpu059.cluster.internal.log, is all that names it, beside
    gpu058.cluster.internal (torchrun's table): shown as its file writes it. A file name with another domain,
    or words after the dot that are no domain of the job's, is not a host's full name."""
    from nccl_doctor.model.hosts import as_written

    hosts = ["gpu058.cluster.internal"]
    files = ["logs/gpu058.cluster.internal.log", "logs/gpu059.cluster.internal.log", "logs/gpu061.errors.txt",
             "logs/gpu062.example.com.log"]
    assert as_written(hosts, files) == {"gpu058": "gpu058.cluster.internal", "gpu059": "gpu059.cluster.internal"}
    assert as_written(["gpu058"], files) == {}
