"""The format files (parsers/*.toml) and the matching engine (nccl_doctor/formats.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from linear import assert_linear

from nccl_doctor.filescan import UNKEPT_KINDS
from nccl_doctor.formats import FormatError, load_formats
from nccl_doctor.kinds import KINDS

ROOT = Path(__file__).resolve().parent.parent
PARSERS = ROOT / "parsers"
REAL = ROOT / "fixtures" / "real"
FORMATS = load_formats()

SAMPLES = [
    pytest.param(p, s, id=f"{p.format}:{p.kind}:{i}:{j}")
    for i, p in enumerate(FORMATS.patterns)
    for j, s in enumerate(p.samples)
]
COUNTER = [pytest.param(p, line, id=f"{p.format}:{p.kind}:{i}") for i, (p, line) in enumerate(FORMATS.counter_samples)]


def severity_of(line: str) -> str | None:
    """Severity of the pattern that produced the event for ``line`` (None: no event)."""
    got = FORMATS.match(line)
    if got is None:
        return None
    for idx in FORMATS.candidates(line):
        p = FORMATS.patterns[idx]
        if p.kind == got[0] and p.regex.search(line) is not None:
            return p.severity
    return None


# ---- (1) every sample gives its pattern's kind and fields --------------------------------------


@pytest.mark.parametrize(("pattern", "sample"), SAMPLES)
def test_sample_matches(pattern, sample):
    got = FORMATS.match(sample["line"])
    assert got is not None, f"no pattern matched: {sample['line']!r}"
    kind, fields = got
    assert kind == pattern.kind, f"{sample['line']!r} gave {kind} {fields}"
    for name, want in sample.get("fields", {}).items():
        assert name in fields, f"field {name!r} missing in {fields}"
        assert fields[name] == want and type(fields[name]) is type(want), f"{name}: {fields[name]!r} != {want!r}"


@pytest.mark.parametrize(("pattern", "line"), COUNTER)
def test_counter_sample_does_not_give_kind(pattern, line):
    got = FORMATS.match(line)
    assert got is None or got[0] != pattern.kind, f"{line!r} gave {got}"


def test_a_local_rank_of_the_nodes_count_is_no_rank_of_the_world():
    # t386: "local rank 0 of 1, world size 4" on the second node of 3 + 1 ranks (its global rank is 3)
    kind, fields = FORMATS.match("[2026-11-29 07:01:17,657] [INFO] [node31/rank3] worker starting: local rank 0 of 1, "
                                 "world size 4")
    assert kind == "rank_world" and fields.get("world_size") == 4 and "rank" not in fields
    got = FORMATS.match("Local rank 2 of 4 ready")
    assert got is None or "rank" not in got[1]


# ---- (2), (3) every pattern is well formed ------------------------------------------------------


def test_every_kind_is_known():
    unknown = {p.kind for p in FORMATS.patterns} - set(KINDS)
    assert not unknown


def test_every_pattern_has_samples_and_literals():
    for p in FORMATS.patterns:
        assert p.samples, f"{p.format}:{p.kind} has no sample"
        assert p.contains and all(p.contains), f"{p.format}:{p.kind} has no literal"
        for s in p.samples:
            assert any(lit in s["line"] for lit in p.contains), f"{p.kind}: sample lacks a literal: {s['line']!r}"


def test_literals_are_every_contains():
    assert set(FORMATS.literals) == {lit for p in FORMATS.patterns for lit in p.contains}
    assert len(FORMATS.literals) == len(set(FORMATS.literals))


def test_regexes_are_plain_re_compatible():
    for p in FORMATS.patterns:
        re.compile(p.regex.pattern)


def test_packaged_regexes_also_compile_with_regex():
    """The README promises both engines accept every format regex; the packaged files are checked
    here rather than on every start (a user's folder is checked when loaded)."""
    import regex

    for p in FORMATS.patterns:
        regex.compile(p.regex.pattern)
    for fmt in FORMATS._formats.values():
        for prefix in fmt.prefixes:
            regex.compile(prefix.pattern)


def test_partners_equal_the_naive_definition():
    from nccl_doctor.formats import _partners

    lits = sorted(set(FORMATS.literals) | {"abcd", "cdef", "bc", "defg", "xyz"}, key=lambda s: (-len(s), s))
    naive = {lit: tuple(o for o in lits if o not in lit and any(o.startswith(lit[k:]) for k in range(1, len(lit))))
             for lit in lits}
    assert _partners(lits) == naive
    assert "cdef" in _partners(lits)["abcd"] and "bc" not in _partners(lits)["abcd"]


def test_patterns_in_trial_order_and_fallback_last():
    prios = [p.priority for p in FORMATS.patterns]
    assert prios == sorted(prios)
    assert FORMATS.patterns[-1].kind == "nccl_warn"


def test_all_families_are_loaded():
    formats = {p.format for p in FORMATS.patterns}
    assert formats == {"nccl", "torch", "elastic", "horovod", "deepspeed", "slurm", "errors", "training", "wandb",
                       "ncclras", "frtrace", "ray"}


def test_packaged_and_directory_loads_agree():
    assert load_formats() is load_formats()
    from_dir = load_formats(PARSERS)
    assert from_dir is load_formats(str(PARSERS))
    assert [(p.kind, p.regex.pattern) for p in from_dir.patterns] == [(p.kind, p.regex.pattern) for p in FORMATS.patterns]


# ---- (4) broken format files ----------------------------------------------------------------------

GOOD_PATTERN = """
[[pattern]]
kind = "nccl_warn"
contains = ["NCCL WARN"]
regex = '''NCCL WARN (?P<msg>.*)'''
[[pattern.samples]]
line = "x NCCL WARN y"
"""


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[format\nname = "x"', "bad TOML"),
        ('[format]\nname = "x"\n' + GOOD_PATTERN.replace("(?P<msg>.*)", "(?P<msg>.*"), "bad regex"),
        ('[format]\nname = "x"\n' + GOOD_PATTERN.replace('"nccl_warn"', '"no_such_kind"'), "unknown kind"),
        ('[format]\nname = "x"\n' + GOOD_PATTERN.replace('["NCCL WARN"]', "[]"), "contains"),
        ('[format]\nname = "x"\n' + GOOD_PATTERN.replace("regex =", "rgx ="), "unknown keys"),
        ('[format]\nname = "x"\n' + GOOD_PATTERN.replace("(?P<msg>", "{{nope}}(?P<msg>"), "unknown fragment"),
        ('[format]\nname = "x"\n' + GOOD_PATTERN.replace("[[pattern.samples]]", 'ints = ["count"]\n[[pattern.samples]]'),
         "names no group"),
        ('[format]\nname = "x"\n' + GOOD_PATTERN + 'field = { a = 1 }\n', "sample keys"),
        ('[format]\nname = "x"\nprefixes = ["(unclosed"]\n' + GOOD_PATTERN, "prefix #1"),
        ('[format]\nname = "x"\n' + GOOD_PATTERN.replace("[[pattern.samples]]", 'severity = "fatal"\n[[pattern.samples]]'), "severity"),
        ("[[pattern]]\nkind = 'nccl_warn'\n", "[format]"),
        # a regex that `regex` accepts but `re` does not (duplicate group names)
        ('[format]\nname = "x"\n' + GOOD_PATTERN.replace("(?P<msg>.*)", "(?:(?P<msg>a)|(?P<msg>b))"), "bad regex"),
    ],
)
def test_bad_format_file_raises(tmp_path, text, needle):
    (tmp_path / "broken.toml").write_text(text)
    with pytest.raises(FormatError) as info:
        load_formats(tmp_path)
    message = str(info.value)
    assert "broken.toml" in message and needle in message
    assert "\n" not in message


def test_duplicate_format_name(tmp_path):
    body = '[format]\nname = "same"\n' + GOOD_PATTERN
    (tmp_path / "a.toml").write_text(body)
    (tmp_path / "b.toml").write_text(body)
    with pytest.raises(FormatError, match=r"b\.toml.*duplicate format name 'same'.*a\.toml"):
        load_formats(tmp_path)


def test_launcher_files_are_skipped(tmp_path):
    (tmp_path / "launchers.toml").write_text("this is not even TOML [[[")
    (tmp_path / "other.toml").write_text('[format]\nname = "l"\nkind = "launcher"\n[[launcher]]\nname = "x"\n')
    (tmp_path / "ok.toml").write_text('[format]\nname = "x"\n' + GOOD_PATTERN)
    fs = load_formats(tmp_path)
    assert [p.kind for p in fs.patterns] == ["nccl_warn"]


# ---- engine semantics ---------------------------------------------------------------------------

ENGINE = """
[format]
name = "demo"
priority = 5
prefixes = ['''(?P<host>[a-z]+):(?P<pid>\\d+) ''']
ints = ["pid"]

[format.fragments]
num = '''-?\\d+'''

[[pattern]]
kind = "nccl_warn"
contains = ["abcdef", "WARN NET"]
regex = '''(?:abc(?P<rest>def)|WARN NET(?P<tail>.*))'''
[[pattern.samples]]
line = "abcdef"

[[pattern]]
kind = "nccl_ras"
contains = ["abc", "NCCL WARN"]
regex = '''(?:abc|NCCL WARN)(?P<msg>.*)'''
[[pattern.samples]]
line = "abc"

[[pattern]]
kind = "elastic_cfe"
contains = ["code "]
regex = '''(?P<root_cause>ROOT )?code (?P<code>{{num}}) (?P<big>\\d+)(?: opt (?P<opt>\\w+))?'''
ints = ["code", "big"]
bools = ["root_cause"]
const = { what = "exit", code = "shadowed" }
[[pattern.samples]]
line = "code 1 2"
[[pattern.counter_samples]]
line = "nothing"
"""

STRICT = """
[format]
name = "strict"
priority = 1
prefixes = ['''\\[(?P<tag>\\w+)\\] ''']
prefix_required = true

[[pattern]]
kind = "nccl_env"
contains = ["set to "]
regex = '''(?P<var>\\w+) set to (?P<val>.*)'''
[[pattern.samples]]
line = "[x] A set to b"
"""


@pytest.fixture()
def demo(tmp_path):
    (tmp_path / "demo.toml").write_text(ENGINE)
    (tmp_path / "strict.toml").write_text(STRICT)
    return load_formats(tmp_path)


def test_prefix_header_fields_and_ints(demo):
    assert demo.match("node:42 code -6 18446744073709551615") == (
        "elastic_cfe",
        {"host": "node", "pid": 42, "code": -6, "big": None, "root_cause": False, "what": "exit"},
    )


def test_no_prefix_searches_whole_record(demo):
    kind, fields = demo.match("junk ROOT code 7 123456789012345678 opt  x")
    assert kind == "elastic_cfe"
    assert fields["root_cause"] is True and fields["big"] == 123456789012345678 and "host" not in fields
    assert "opt" not in fields  # a group that did not participate is omitted


def test_prefix_required(demo):
    assert demo.match("[t] A set to  b  ") == ("nccl_env", {"tag": "t", "var": "A", "val": "b"})
    assert demo.match("A set to b") is None


def test_overlapping_literals_are_all_found(demo):
    # "abcdef" is the longest literal at position 0, "abc" is inside it
    assert {demo.patterns[i].kind for i in demo.candidates("abcdef")} == {"nccl_warn", "nccl_ras"}
    # "NCCL WARN" and "WARN NET" overlap: both patterns are candidates, the first in order wins
    kind, fields = demo.match("NCCL WARN NET/IB : x")
    assert kind == "nccl_warn" and fields == {"tail": "/IB : x"}
    kind, fields = demo.match("xxabc")
    assert (kind, fields) == ("nccl_ras", {"msg": ""})


def test_counter_samples_are_exposed(demo):
    assert [(p.kind, line) for p, line in demo.counter_samples] == [("elastic_cfe", "nothing")]


def test_trial_order_by_priority(demo):
    assert [p.format for p in demo.patterns] == ["strict", "demo", "demo", "demo"]


# ---- (5) lines that must not give a specific meaning ----------------------------------------------

ERROR_KINDS = {
    "nccl_ib_cqe", "nccl_sock_closed", "nccl_connect_err", "nccl_socket_err", "nccl_cuda_fail", "nccl_shm",
    "nccl_alloc_fail", "nccl_dup_gpu", "nccl_ofi_error", "nccl_svc_closed", "nccl_proxy_fail", "nccl_warn",
    "torch_wd_timeout", "torch_wd_exception", "torch_nccl_error", "python_exception", "cuda_error", "signal",
}

NEGATIVE = [
    # (line, kinds it must not give; empty tuple = must give no event at all)
    ("node1:4711:4711 [0] NCCL INFO comm 0x55d5c7f7e0b0 rank 0 nranks 8 cudaDev 0 busId 1b000 - Init COMPLETE", ERROR_KINDS),
    ("r7i4n1:63122:63194 [2] NCCL INFO Channel 00 : 2[88000] -> 3[8a000] via P2P/IPC", ()),
    ("node1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read", ()),
    ("c6ad99331184:117291:117389 [0] NCCL INFO Ring 00 : 2[0] -> 3[0] via direct shared memory", ()),
    ("r7i4n1:63122:63194 [2] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 8/8/64", ()),
    ("r7i4n1:63120:63120 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation", ()),
    ("r7i4n1:63122:63194 [2] NCCL INFO Setting affinity for GPU 2 to ffff,f00000ff,fff00000", ()),
    ("r7i4n1:63120:63191 [0] NCCL INFO Channel 00/12 :    0   1   2   3", ()),
    ("node0:23440:23664 [0] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels", ()),
    ("nmyjs-202-75:24502:24684 [3] INFO Using NCCL Low-latency algorithm for sizes below 16384", ()),
    ("/x/torch/distributed/launch.py:178: FutureWarning: The module torch.distributed.launch is deprecated", ()),
    ("  warnings.warn(", ()),
    ("INFO: Started server process", ()),
    ("UserWarning: TypedStorage is deprecated", ()),
    ("    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)", ()),
    ("  File \"/opt/conda/lib/python3.7/site-packages/torch/multiprocessing/spawn.py\", line 20, in _wrap", ()),
    ("Killing subprocess 8189", ()),
    # the launcher stopped from outside (a stop, read as launcher_signalled): never an error of the job's
    ("Main process received SIGTERM, exiting", ERROR_KINDS),
    ("# nThread 1 nGpus 1 minBytes 1 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 100", ()),
    ("[2022-05-01 03:56:11] PULSE: tr11-176B-ml is waiting to be scheduled (1528874_[1-3%1] on 'gpu_p5' partition)", ()),
    ("RuntimeError: NCCL error in: /x/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8", {"nccl_version"}),
    ("[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] "
     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=GATHER, Timeout(ms)=600000) ran for "
     "600027 milliseconds before timing out.", {"torch_wd_timeout"}),
    ("slurmstepd: error: *** JOB 1999616 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***", ERROR_KINDS),
    ("[W ProcessGroupNCCL.cpp:1569] Rank 0 using best-guess GPU 0 to perform barrier as devices used by this process "
     "are currently unknown.", ERROR_KINDS),
    ("success count == 4 -> stop running", ERROR_KINDS),
    ("Loading checkpoint shards: 100%|##########| 4/4 [00:05<00:00,  1.30s/it]", {"checkpoint_load"}),
]


@pytest.mark.parametrize(("line", "forbidden"), NEGATIVE)
def test_negative_lines(line, forbidden):
    got = FORMATS.match(line)
    if not forbidden:  # (a kind the scanner reads but never keeps gives no event either)
        assert got is None or got[0] in UNKEPT_KINDS, f"{line!r} gave {got}"
    else:
        assert got is None or got[0] not in forbidden, f"{line!r} gave {got}"


def test_unsigned_minus_one_is_not_a_count():
    line = ("[E1103 07:34:57.460 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1, OpType=COALESCED, NumelIn=18446744073709551615, NumelOut=18446744073709551615, "
            "Timeout(ms)=1800000) ran for 1800014 milliseconds before timing out.")
    kind, fields = FORMATS.match(line)
    assert kind == "torch_wd_timeout"
    assert fields["numel_in"] is None and fields["numel_out"] is None and fields["seq"] == 1


def test_wrapped_ib_completion_still_gives_status():
    kind, fields = FORMATS.match(
        "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.2.0.5<33092> "
        "with error 12, opcode 0, len")
    assert kind == "nccl_ib_cqe" and fields["status"] == 12 and fields["peer"] == "10.2.0.5"


def test_ordinary_info_lines_are_not_candidates():
    for line in [
        "r7i4n1:63122:63194 [2] NCCL INFO Channel 00 : 2[88000] -> 3[8a000] via P2P/IPC",
        "c6ad99331184:117291:117389 [0] NCCL INFO Ring 00 : 2[0] -> 3[0] via direct shared memory",
        "r7i4n1:63122:63194 [2] NCCL INFO threadThresholds 8/8/64 | 32/8/64 | 8/8/64",
        "r7i4n1:63120:63120 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
        "r7i4n1:63120:63191 [0] NCCL INFO Channel 00/12 :    0   1   2   3",
        "r7i4n1:63122:63194 [2] NCCL INFO Setting affinity for GPU 2 to ffff,f00000ff,fff00000",
        "r7i4n1:63122:63194 [2] NCCL INFO 2 coll channels, 2 collnet channels, type float op sum",
        "dtype: float, steps: 1000, loss: sum",
    ]:
        assert FORMATS.candidates(line) == (), line


# ---- kinds added for nccl-tests, COLL traces, gloo, stack dumps ----------------------------------


def test_nccltests_row_after_the_mpirun_tag_is_stripped():
    from nccl_doctor.launchers import LauncherStripper

    line = "[1,0]<stdout>:           4             1     float     sum      -1    65.70    0.00    0.00      0"
    _, record = LauncherStripper().strip(line)
    kind, fields = FORMATS.match(record)
    assert kind == "nccltests_row"
    assert (fields["size"], fields["count"], fields["type"], fields["redop"], fields["root"]) == (4, 1, "float", "sum", -1)
    assert fields["oop_time"] == "65.70" and fields["oop_wrong"] == 0 and "ip_time" not in fields


def test_nccltests_row_wrong_na_is_none():
    kind, fields = FORMATS.match(
        "           8             2     float     sum      -1    29.84    0.00    0.00    N/A    29.41    0.00    0.00    N/A")
    assert kind == "nccltests_row"
    assert fields["oop_wrong"] is None and fields["ip_wrong"] is None and fields["ip_time"] == "29.41"


@pytest.mark.parametrize("line", [
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    "# Avg bus bandwidth    : 33.3921",
    "  dtype          float     torch.float32",
    "Epoch 3     float     sum      -1    loss",
])
def test_nccltests_header_and_lookalikes_are_not_rows(line):
    got = FORMATS.match(line)
    assert got is None or got[0] != "nccltests_row", got


def test_gloo_timeout_is_not_a_store_timeout():
    for line in [
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
        "Timed out waiting 5000ms for recv operation to complete",
        "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation "
        "to complete",
    ]:
        kind, fields = FORMATS.match(line)
        assert kind == "gloo_timeout" and fields["op"] == "recv" and isinstance(fields["timeout_ms"], int)
    kind, _ = FORMATS.match("torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /default_pg/0//cuda//0")
    assert kind == "torch_store_timeout"


def test_connect_retry_is_a_warning_and_exhaustion_an_error():
    retry = ("node1:1:2 [0] NCCL INFO socketPollConnect: connect to 10.0.0.2<36795> returned Connection refused, "
             "retrying (2/34) after sleep for 200 msec")
    final = ("node1:1:2 [0] misc/socket.cc:580 NCCL WARN socketPollConnect: connect to 10.0.0.2<36795> returned "
             "Connection refused, exceeded error retry count after 35 attempts")
    assert FORMATS.match(retry)[1]["state"] == "retrying" and severity_of(retry) == "warning"
    assert FORMATS.match(final)[1]["state"] == "exceeded" and severity_of(final) == "error"


def test_py_spy_dump_of_deepspeed_zero_init():
    dump = """Thread 474480 (idle): "MainThread"
    broadcast (torch/distributed/distributed_c10d.py:2772)
    wrapper (torch/distributed/c10d_logger.py:81)
    broadcast (deepspeed/comm/torch.py:216)
    broadcast (deepspeed/comm/comm.py:224)
    log_wrapper (deepspeed/comm/comm.py:117)
    _zero_init_param (deepspeed/runtime/zero/partition_parameters.py:1054)
    _post_init_method (deepspeed/runtime/zero/partition_parameters.py:1099)
    __init__ (transformers/models/llama/modeling_llama.py:1185)"""
    got = [FORMATS.match(line) for line in dump.splitlines()]
    frames = [(f["func"], f["file"]) for k, f in (g for g in got if g) if k == "stack_frame_collective"]
    assert frames == [
        ("broadcast", "torch/distributed/distributed_c10d.py"),
        ("broadcast", "deepspeed/comm/torch.py"),
        ("broadcast", "deepspeed/comm/comm.py"),
        ("log_wrapper", "deepspeed/comm/comm.py"),
        ("_zero_init_param", "deepspeed/runtime/zero/partition_parameters.py"),
        ("_post_init_method", "deepspeed/runtime/zero/partition_parameters.py"),
    ]


def test_traceback_frames_are_not_stack_frames():
    for line in [
        '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 2810, in all_reduce',
        '  File "/x/deepspeed/comm/comm.py", line 224, in broadcast',
        '  File "/x/deepspeed/runtime/zero/partition_parameters.py", line 1054, in _zero_init_param',
        "    get_world_size (torch/distributed/distributed_c10d.py:1768)",
    ]:
        got = FORMATS.match(line)
        assert got is None or got[0] != "stack_frame_collective", (line, got)


def test_dated_megatron_iteration_has_a_timestamp():
    kind, fields = FORMATS.match(
        " [2024-06-23 15:04:30] iteration        1/  500000 | consumed samples:          128 | elapsed time per "
        "iteration (ms): 1756.5 | learning rate: 1.500000E-07 | global batch size:   128 | lm loss: 1.067702E+01 |")
    assert kind == "train_step" and (fields["step"], fields["total"], fields["ts"]) == (1, 500000, "2024-06-23 15:04:30")


STRIP = re.compile(
    r"^(?:\s*[A-Z][a-z]{2} [A-Z][a-z]{2} {1,2}\d{1,2} \d{2}:\d{2}:\d{2} \d{4}\[\d+\]<std(?:out|err)>:"
    r"|\[\d+,\d+\]<std(?:out|err)>: ?|\[default\d+\]:|\[rank\d+\]: ?)+"
)


@pytest.mark.parametrize("name", ["007", "008", "011", "012", "013", "052", "055", "058", "059", "069"])
def test_healthy_excerpts_have_no_error_events(name):
    files = sorted(REAL.glob(f"{name}_*.log"))
    if not files:
        pytest.skip("real excerpts not present")
    errors = []
    for line in files[0].read_text(encoding="utf-8", errors="replace").splitlines():
        record = STRIP.sub("", line)
        if severity_of(record) == "error":
            errors.append((record, FORMATS.match(record)))
    assert not errors


# ---- hostile input: the whole match path stays fast on 1 MB lines ---------------------------------


def hostile_lines():
    """(head, repeated unit, tail): a hostile line is head + unit * k + tail, k chosen by its length."""
    yield "", "comm 0x1 rank ", ""
    yield "", "NCCL WARN ", ""
    yield "", "a", " NCCL WARN x"
    yield "", "[PG 1 Rank 0] ", "Heartbeat monitor timed out!"
    yield "", "NET/IB : Got completion from peer ", ""
    yield "host:1:2 [0] NCCL INFO ", "x:1 -> ", ""
    yield "", "Rendezvous complete for workers. Result: restart_count=1 ", ""
    yield "", "srun: error: h: tasks 1-2: ", ""
    yield "Traceback (most recent call last):", " ", "x"
    yield "", "exitcode  : ", ""
    yield "", "Error", ""
    for p in FORMATS.patterns:
        line = p.samples[0]["line"]
        yield "", line[:-1] + " ", ""


def test_match_is_linear_on_hostile_lines():
    """A hostile line four times as long costs at most 10x the CPU (tests/linear.py), up to 400 k characters."""
    for head, unit, tail in hostile_lines():
        assert_linear(lambda n, h=head, u=unit, t=tail: h + u * max(1, n // len(u)) + t, FORMATS.match, 100_000,
                      repeat=2)
