"""How lines that real torchrun jobs print are read (text copied from fixtures/realruns/ recordings).

Each test states what the text itself says; the expected values are read off the lines by hand.
"""

from __future__ import annotations

from nccl_doctor.incremental import parse_lines


def _kinds(lines: list[str]) -> list[tuple[str, int]]:
    return [(e.kind, e.line) for e in parse_lines(lines) if e.kind != "traceback_start"]


def test_a_traceback_quoted_source_line_is_code_not_an_event():
    # torchrun's own traceback quotes "raise RendezvousTimeoutError" above the exception line: only
    # the exception line (line 6) says what happened.
    lines = [
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py",'
        " line 1140, in _run",
        "    raise RendezvousTimeoutError",
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", line 90, in x',
        '    raise RuntimeError("CUDA error: an illegal memory access was encountered")',
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
    ]
    assert _kinds(lines) == [("torch_store_timeout", 6)]


def test_a_quoted_source_line_behind_a_rank_prefix_is_code_too():
    lines = [
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "/work/train.py", line 193, in inject_before_step',
        '[rank3]:     raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")',
        "[rank3]: KeyError: 'label_smoothing'",
    ]
    events = [e for e in parse_lines(lines) if e.kind not in ("traceback_start", "py_script_frame")]
    assert [(e.kind, e.line, e.rank) for e in events] == [("python_exception", 4, 3)]
    # (the frame line itself is an event: where in its script the rank was)
    assert [(e.get("srcline"), e.rank) for e in parse_lines(lines) if e.kind == "py_script_frame"] == [(193, 3)]
    assert events[0].get("exc_type") == "KeyError"


def test_terminate_is_read_with_its_what_line():
    # std::terminate prints what() on the next line; gloo's enforce there is a desync symptom.
    lines = [
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
        "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
        "op.preamble.length <= op.nbytes. 2180 vs 4. Received data size doesn't match expected size. "
        "Is there a distributed collective mismatch?",
    ]
    events = parse_lines(lines)
    assert [(e.kind, e.line) for e in events] == [("cpp_terminate", 1)]
    assert "Received data size doesn't match expected size" in events[0].text


def test_a_record_failure_table_row_keeps_the_workers_exception():
    # With @record, torchrun's table holds the worker's traceback; its last line is what it died of.
    lines = [
        "Failures:",
        "[1]:",
        "  time      : 2026-11-23_21:37:25",
        "  host      : localhost",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : -15 (pid: 7929)  (SIGTERM)",
        "  error_file: /tmp/torchelastic_skzwrd5u/none_izgu8co4/attempt_0/0/error.json",
        "  traceback : Traceback (most recent call last):",
        '    File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py",'
        " line 367, in wrapper",
        "      return f(*args, **kwargs)",
        "  RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
        "waiting 10000ms for recv operation to complete",
        "  ",
        "[2]:",
        "  time      : 2026-11-23_21:37:57",
        "  host      : localhost",
        "  rank      : 2 (local_rank: 2)",
        "  exitcode  : -9 (pid: 7931)  (SIGKILL)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 7931",
        "------------------------------------------------------------",
    ]
    rows = [e for e in parse_lines(lines) if e.kind == "elastic_cfe"]
    assert [(r.get("rank"), r.get("exitcode")) for r in rows] == [(0, -15), (2, -9)]
    assert rows[0].get("traceback").startswith("RuntimeError: [") and "Timed out waiting 10000ms" in rows[0].get(
        "traceback")
    assert not [e for e in parse_lines(lines) if e.kind == "gloo_timeout"]  # the row's, not a line of its own


def test_the_agents_forced_kill_names_the_pid():
    lines = ["W1123 21:37:57.098000 7924 torch/distributed/elastic/multiprocessing/api.py:1047] "
             "Unable to shutdown process 7931 via 15, forcefully exiting via 9"]
    (ev,) = parse_lines(lines)
    assert ev.kind == "elastic_forced_kill" and ev.get("pid") == 7931


def test_a_script_stating_its_rank_and_world():
    lines = ["[2026-11-23 21:38:23,020][trainer][INFO] - process group up: backend=gloo world_size=4 rank=3 "
             "local_rank=3", "initialized process group: rank 1 of 4 (gloo, timeout 10s, attempt 0)"]
    events = parse_lines(lines)
    assert [(e.kind, e.get("world_size")) for e in events] == [("rank_world", 4), ("rank_world", 4)]
    assert events[1].get("rank") == 1


def test_a_json_line_with_a_rank_key_is_that_ranks_line():
    # train4.py's structured logging: one object per line, the writer's rank under "rank"
    lines = ['{"time": "2026-11-23T23:53:03.300", "level": "INFO", "rank": 3, "msg": "step 8/24 loss 0.4639 '
             '(0.06 s/step)"}']
    events = parse_lines(lines)
    assert events and all(e.rank == 3 for e in events)


def test_a_log_of_step_colon_lines_is_not_pdsh_output_from_a_host_named_step(tmp_path):
    # 'step: N ...' on most lines looked like pdsh's "host: text" with a host called "step"
    from nccl_doctor import analyze

    lines = [f"step: {i} loss: 0.{i % 97:02d} lr: 3e-4" for i in range(1, 301)]
    (tmp_path / "rank0.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.to_dict()["inputs"]["unparsed_lines"] == 0
