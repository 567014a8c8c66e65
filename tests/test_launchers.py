"""Launcher prefixes: every sample in parsers/launchers.toml strips to its declared rest and fields,
and the ambiguous ones are enabled only where most lines carry them (real excerpts 059, 008)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_doctor.jsonlog import load_keys
from nccl_doctor.launchers import LauncherStripper, detect_modes, load_launchers
from nccl_doctor.records import split_glued

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
SAMPLES = [pytest.param(lc, s, id=f"{lc.name}-{i}") for lc in load_launchers() for i, s in enumerate(lc.samples)]


@pytest.mark.parametrize(("launcher", "sample"), SAMPLES)
def test_launcher_sample(launcher, sample):
    stripper = LauncherStripper(frozenset({launcher.name}), launchers=(launcher,))
    fields, rest = stripper.strip(sample["line"])
    if sample.get("nomatch"):  # a line of the same shape the pattern must leave alone
        assert launcher.name not in fields.get("launchers", ())
        return
    assert launcher.name in fields["launchers"]
    assert rest == sample["rest"]
    for key, value in sample.get("fields", {}).items():
        assert fields[key] == value


def _lines(name: str) -> list[str]:
    return next(REAL.glob(f"{name}_*.log")).read_text(encoding="utf-8").splitlines()


def test_app_rank_prefix_is_not_srun_label():
    # 059: the app prints "0: INFO ..." on some lines, but most lines are plain NCCL lines.
    assert "srun_label" not in detect_modes(_lines("059"))
    # 008: bare "28:" lines printed by the benchmark, no space after the colon.
    assert detect_modes(_lines("008")) == frozenset()


def test_srun_labelled_file_is_detected():
    lines = [f"{r:>2}: gpu-1:{100 + r}:{100 + r} [{r % 8}] NCCL INFO x" for r in range(16)]
    assert "srun_label" in detect_modes(lines)
    fields, rest = LauncherStripper(frozenset({"srun_label"})).strip(lines[3])
    assert fields["rank"] == 3 and rest.startswith("gpu-1:103:103 [3] NCCL INFO")


def test_nested_prefixes_and_innermost_rank():
    line = "2024-01-02T03:04:05.123456789Z [default3]:[rank11]:[E0709 01:02:03.000000000 ProcessGroupNCCL.cpp:1] x"
    fields, rest = LauncherStripper().strip(line)
    assert fields["local_rank"] == 3 and fields["rank"] == 11
    assert fields["ts"] == "2024-01-02T03:04:05.123456789Z"
    assert rest.startswith("[E0709")


def test_openmpi_tag_injected_mid_record_is_removed():
    # 066: Open MPI split a stderr write and re-tagged the second half.
    line = "[1,0]<stderr>:[2019-04-13 13:53:31.[1,0]<stderr>:851588: W horovod/common/operations.cc:588] x"
    fields, rest = LauncherStripper().strip(line)
    assert fields["rank"] == 0
    assert rest == "[2019-04-13 13:53:31.851588: W horovod/common/operations.cc:588] x"


def test_glued_records_are_split():
    line = "Epoch 10/10: 240it [05:55,  1.47s/it][rank0]:[E709 01:02:03.000000000 ProcessGroupNCCL.cpp:1] boom"
    assert split_glued(line) == ["Epoch 10/10: 240it [05:55,  1.47s/it]",
                                 "[rank0]:[E709 01:02:03.000000000 ProcessGroupNCCL.cpp:1] boom"]
    two = "node1:1:2 [0] NCCL INFO a node1:3:4 [1] NCCL WARN b"
    assert split_glued(two) == ["node1:1:2 [0] NCCL INFO a ", "node1:3:4 [1] NCCL WARN b"]
    assert split_glued("10%|#  |\r50%|#####|\rdone") == ["10%|#  |", "50%|#####|", "done"]


def test_timestamped_nccl_record_with_two_nccl_words_is_one_record():
    # NCCL_DEBUG_TIMESTAMP_FORMAT prefix: the header after the timestamp is this record's own.
    line = "[2025-05-10 23:09:41] node1:4711:4711 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"
    assert split_glued(line) == [line]
    assert split_glued("noise node1:1:2 [0] NCCL INFO NCCL version 2.21.5") == \
        ["noise ", "node1:1:2 [0] NCCL INFO NCCL version 2.21.5"]


def test_line_prefix_belongs_to_every_record_glued_on_the_line():
    outer = {"rank": 3, "ts": "2024-01-02T03:04:05Z", "launchers": ["srun_label"]}
    inner = {"rank": 11, "ts": "2024-09-09T00:00:00Z", "launchers": ["torch_rank"]}
    assert LauncherStripper.within(outer, inner) == \
        {"rank": 11, "ts": "2024-01-02T03:04:05Z", "launchers": ["srun_label", "torch_rank"]}
    assert LauncherStripper.within(outer, {}) == outer and LauncherStripper.within({}, inner) == inner


def test_srun_labelled_nccl_lines_keep_their_task_rank(tmp_path):
    """' 3: node1:...' is one record of task 3 (its NCCL header is not a glued record start), and a
    line with two records keeps the label on both."""
    from nccl_doctor.analysis import scan_files
    from nccl_doctor.discover import discover

    lines = [f"{r}: node{r // 2}:{1000 + r}:{1000 + r} [{r % 2}] NCCL INFO comm 0x55d5c7f7e0b{r} rank {r} nranks 4 "
             f"cudaDev {r % 2} busId 18000 commId 0x1234 - Init COMPLETE" for r in range(4)]
    lines.append("2: epoch 1 done node1:1002:1002 [0] NCCL INFO NCCL version 2.21.5+cuda12.4")
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    files, _ = discover([str(tmp_path / "job.log")])
    events = scan_files(files)[0].events
    assert [(e.kind, e.rank, e.host, e.pid) for e in events] == [
        ("nccl_init", 0, "node0", 1000), ("nccl_init", 1, "node0", 1001), ("nccl_init", 2, "node1", 1002),
        ("nccl_init", 3, "node1", 1003), ("nccl_version", 2, "node1", 1002)]


def test_torchrun_prefix_template_is_removed_without_naming_a_rank():
    """TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${rank}]:" gives "[12]:"; the template may hold a
    local rank as well, so the number names no rank: the NCCL header behind it does."""
    lines = [f"[{r}]:node{r // 8}:{100 + r}:{100 + r} [{r % 8}] NCCL INFO x" for r in range(16)]
    modes = detect_modes(lines)
    assert "torchrun_template" in modes
    fields, rest = LauncherStripper(modes).strip(lines[12])
    assert rest == "node1:112:112 [4] NCCL INFO x" and "rank" not in fields and "local_rank" not in fields
    # torchrun's ChildFailedError index lines ("  [1]:" alone) do not turn it on
    table = ["  [1]:", "    time      : 2024-01-01_00:00:00", "    host      : node1", "    rank      : 1"] * 10
    assert "torchrun_template" not in detect_modes(table)


def test_ambiguous_prefix_applies_only_outside_the_others():
    """pdsh's "host: " starts a line; after "[rank166]: " the words "ValueError: " are the message."""
    stripper = LauncherStripper(frozenset({"pdsh_host"}))
    line = "dgx-h100-63: [rank166]: ValueError: Expected input batch_size (8)"
    fields, rest = stripper.strip(line)
    assert fields["host"] == "dgx-h100-63" and fields["rank"] == 166
    assert rest == "ValueError: Expected input batch_size (8)"
    # after a collector's timestamp it still applies; a glued record (nested) never starts with it
    line = "2024-01-02T03:04:05Z worker-1: [rank3]: KeyError: x"
    fields, rest = stripper.strip(line)
    assert fields["host"] == "worker-1" and rest == "KeyError: x"
    record = "KeyError: x"
    assert stripper.strip(record, nested=True) == ({}, "KeyError: x")


def test_pdsh_output_of_many_nodes_is_detected():
    """A 128-node DeepSpeed job through pdsh shows a different host on nearly every first line; the
    names share one shape (digits aside), unlike many different words before a colon."""
    lines = [f"dgx-h100-{n}: [2024-06-08 09:05:50,000] [INFO] [launch.py:164:main] dist_world_size=1024"
             for n in range(200)]
    assert "pdsh_host" in detect_modes(lines)
    letters = "abcdefghijklmnopqrst"
    words = [f"{a}{b}key: value" for a in letters for b in letters][:200]  # 200 distinct words
    assert "pdsh_host" not in detect_modes(words)


JSON_SAMPLES = [pytest.param(s, id=f"json_record-{i}") for i, s in enumerate(load_keys()["samples"])]


@pytest.mark.parametrize("sample", JSON_SAMPLES)
def test_json_record_sample(sample):
    fields, rest = LauncherStripper().strip(sample["line"])
    assert "json_record" in fields["launchers"]
    assert rest == sample["rest"]
    for key, value in sample.get("fields", {}).items():
        assert fields[key] == value


@pytest.mark.parametrize("line", [
    '{"step": 10, "loss": 2.1}',  # metrics, no message: not a record
    '{"level": "ERROR", "msg": "cut mid-record',  # truncated
    '[{"msg": "an array"}]',
    '{' * 5000 + '}' * 5000,  # nested too deep to be a log record
])
def test_what_is_no_json_record_stays_the_line_it_is(line):
    fields, rest = LauncherStripper().strip(line)
    assert "json_record" not in fields.get("launchers", ())


def test_a_json_record_behind_a_torchrun_prefix_keeps_both():
    line = "[default1]:" + json.dumps({"level": "INFO", "rank": 5, "msg": "step 3"})
    fields, rest = LauncherStripper().strip(line)
    assert rest == "step 3" and fields["rank"] == 5 and fields["local_rank"] == 1


def test_stern_pod_prefix_is_detected_only_for_pod_names():
    pods = ["llama-ft-master-0", "llama-ft-worker-0"]
    lines = [f"{pods[i % 2]} pytorch step {i} loss 2.1" for i in range(40)]
    assert "stern_pod" in detect_modes(lines)
    fields, rest = LauncherStripper(detect_modes(lines)).strip(lines[1])
    assert fields["host"] == "llama-ft-worker-0" and rest == "step 1 loss 2.1"
    # a training script's own "step 10 loss 2.1" lines: two lower-case words, but no pod
    assert "stern_pod" not in detect_modes([f"step {i} loss 2.1 lr 0.1" for i in range(40)])
    # many different "containers" (second words) are prose, not one container of a few pods
    prose = [f"data-loader-{i % 2} {w} ready" for i, w in enumerate(["fetched", "prepared", "cached", "shuffled"] * 10)]
    assert "stern_pod" not in detect_modes(prose)


def test_a_label_with_an_underscore_is_no_node():
    # t62: "[trainer_1] step 3 loss 2.29" is a process's label (a host name has no underscore, RFC 1123),
    # "[node1] ..." a node's tag that a job script put before every line
    bracket = next(lc for lc in load_launchers() if lc.name == "bracket_node")
    stripper = LauncherStripper(frozenset({"bracket_node"}), launchers=(bracket,))
    assert stripper.strip("[trainer_1] step 3 loss 2.2907")[1] == "[trainer_1] step 3 loss 2.2907"  # noqa: B005
    fields, rest = stripper.strip("[node1] step 3 loss 2.2907")  # noqa: B005
    assert (fields.get("host"), rest) == ("node1", "step 3 loss 2.2907")


def test_a_coloured_compose_prefix_is_detected_as_the_scanner_reads_it():
    # docker compose colours each container's name: "ESC[36mtrainer-1  | ESC[0m..." on every line
    lines = [f"\x1b[36mtrainer-1  | \x1b[0m[default{i % 2}]:2026-11-29 02:05:03,802 \x1b[32mINFO\x1b[0m "
             f"[rank {2 + i % 2}] train: step {i} loss 2.09" for i in range(12)]
    assert "compose_service" in detect_modes(lines)
    assert "compose_service" not in detect_modes([ln.replace("trainer-1  | ", "") for ln in lines])


def test_line_numbers_that_count_the_lines_are_not_srun_labels():
    # A gist's "copy with line numbers" (t178_hang_r3_w4_gist_logdir): "97: " is line 97, not rank 97; the
    # torchrun prefix behind it names the rank.
    numbered = [f"{i}: [default{i % 4}]:step {i}/40 loss 2.3" for i in range(1, 8)]
    modes = detect_modes(numbered)
    assert "line_numbers_colon" in modes and "srun_label" not in modes
    assert LauncherStripper(modes).strip(numbered[2])[0].get("local_rank") == 3
    # srun's labels start at rank 0 and interleave: still labels
    labelled = [f"{r}: step {s} loss 2.3" for s in range(3) for r in (0, 1, 2, 3)]
    assert "srun_label" in detect_modes(labelled) and "line_numbers_colon" not in detect_modes(labelled)


def test_a_shells_date_behind_a_kubelets_stamp_is_detected():
    # t365_kill_r1_w3_k8s_awk_split: awk's "[date]" inside the container, the kubelet's RFC3339 stamp outside it; the
    # failure table's rows behind both are read (its "rank : 1" joined to its "exitcode : -9").
    rows = ["Root Cause (first observed failure):", "[0]:", "  time      : 2026-11-29_04:49:12", "  host      : localhost",
            "  rank      : 1 (local_rank: 1)", "  exitcode  : -9 (pid: 20596)", "  traceback : Signal 9 (SIGKILL) received by PID 20596"]
    lines = [f"2026-11-29T04:49:12.{i:09d}Z [2026-11-29 04:49:12] {r}" for i, r in enumerate(rows * 3)]
    assert "shell_datetime" in detect_modes(lines)


def test_a_word_before_the_rank_is_a_host_only_with_its_domain():
    # "[gpu020.cluster.internal rank 2]" (a node's number and its domain) names the writer's host;
    # "[trainer-2 rank 4]", "[cpu-d-02 rank 4]" may be a role's name as well as a node's: the tag's, no host.
    strip = LauncherStripper().strip  # (a record's prefix stripper, not str.strip)
    fqdn, _ = strip("[2026-11-29 12:51:03,689][INFO][gpu020.cluster.internal rank 2] wafer: shard 2/4")
    assert (fqdn["rank"], fqdn["host"]) == (2, "gpu020.cluster.internal")
    for line in ("2026-11-28 01:05:34,378 INFO [trainer-2 rank 4] step 128 loss 0.1787",
                 "2026-11-28 01:05:34,378 INFO [cpu-d-02 rank 4] step 128 loss 0.1787",
                 "2026-11-28 01:05:34,378 INFO [train.v2 rank 4] step 128 loss 0.1787"):
        fields, _ = strip(line)
        assert fields["rank"] == 4 and "host" not in fields, line
