"""Tests of the synthetic job generator (fixtures/generator): every scenario x layout, the expected.json
oracle, the line formats (reference regexes copied from shared/FORMATS.md) and determinism."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))

from generator import LAYOUTS, NCCL_ERAS, SCENARIOS, TORCH_ERAS, generate_job  # noqa: E402
from generator.api import ALL_RULES  # noqa: E402

# ---------------- reference regexes (FORMATS.md sections 1, 2, 4, 7) ----------------
NCCL_LINE = re.compile(
    r'^(?:(?P<ts>\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\]) )?'
    r'(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) '
    r'(?:\[(?P<dev>-?\d+)\] )?'
    r'(?:(?P<trace_ms>\d+\.\d+) (?P<tfunc>[^\s:]+):(?P<tline>\d+) )?'
    r'(?:(?P<file>[^\s:]+):(?P<line>\d+) (?:\((?P<func>[^)]*)\) )?)?'
    r'NCCL (?P<level>INFO|WARN|TRACE|CALL) (?P<msg>.*)$')
NCCL_INIT = re.compile(
    r'(?:\[Rank (?P<rk>\d+)\] )?(?:(?P<fn>ncclComm\w+) )?comm (?P<comm>0x[0-9a-f]+|\(nil\)) '
    r'rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cudaDev>\d+)(?: nvmlDev (?P<nvmlDev>\d+))? '
    r'busId (?P<busId>[0-9a-f]+)(?: parent (?P<parent>0x[0-9a-f]+|\(nil\)))?'
    r'(?: (?:splitCount|childCount) (?P<count>\d+))?(?: color (?P<color>-?\d+) key (?P<key>-?\d+))?'
    r'(?: commId (?P<commId>0x[0-9a-f]+))? ?- (?P<what>Init|Destroy|Abort) (?P<phase>START|COMPLETE)')
NCCL_TOPO = re.compile(
    r'comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) '
    r'localRanks (?P<localRanks>\d+) localRank (?P<localRank>\d+) MNNVL (?P<mnnvl>\d+)')
NCCL_VERSION = re.compile(r'NCCL version (?P<ver>\d+\.\d+\.\d+)(?P<suffix>[^+\s]*)\+cuda(?P<cuda>\d+\.\d+)')
NCCL_BOOTSTRAP = re.compile(r'Bootstrap ?: Using (?P<if>[^:\s]+):(?P<addr>\S+?)<(?P<port>\d+)>')
NCCL_NET_IB = re.compile(r'NET/IB : Using(?P<devs>.*?)(?: \[RO\])?; OOB (?P<oob_if>[^:\s]+):(?P<oob_addr>\S+?)<(?P<oob_port>\d+)>')
NCCL_ENV_SET = re.compile(r'(?P<var>NCCL_\w+) set by environment to (?P<val>.*?)\.?$')
NCCL_CHANNEL_CONN = re.compile(
    r'Channel (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)\[(?P<srcdev>[0-9a-f]+)\] -> (?P<dst>\d+)\[(?P<dstdev>[0-9a-f]+)\]'
    r'(?: \[(?P<dir>send|receive)\])? via (?P<transport>\S+)')
NCCL_TREES = re.compile(r'NCCL INFO Trees((?: \[\d+\] -?\d+/-?\d+/-?\d+->-?\d+->-?\d+)+)')
NCCL_PROPAGATE = re.compile(r'NCCL INFO (?P<file>[\w./-]+):(?P<line>\d+)(?: \((?P<func>[^)]*)\))? -> (?P<code>\d+)'
                            r'(?: \((?P<errstr>[^)]*)\))?(?: \[(?P<thread>[^\]]+)\])?\s*$')
NCCL_SOCK_CLOSED = re.compile(r'(?:socketProgress|Net) ?: ?Connection closed by remote peer (?P<peer>\S+?)<(?P<port>\d+)>')
NCCL_CONNECT_ERR = re.compile(r'(?:Net|socket\w+|ncclSocket\w+) ?: ?[Cc]onnect to (?P<peer>\S+?)<(?P<port>\d+)> '
                              r'(?:failed : (?P<err>.+)|returned (?P<err2>.+?)(?:, retrying| exceeded|, exceeded).*)')
NCCL_IB_CQE = re.compile(
    r'NET/IB ?: ?Got completion from peer (?P<peer>\S+?)<(?P<port>\d+)> with '
    r'(?:error (?P<err_old>\d+), opcode (?P<op_old>\d+), len (?P<len_old>\d+), vendor err (?P<verr_old>\d+)'
    r'|status=(?:(?P<status_name>IBV_WC_\w+|UNKNOWN_STATUS)\()?(?P<status>\d+)\)? '
    r'opcode=(?:(?P<opname>\w+)\()?(?P<opcode>\d+)\)?(?: len=(?P<len>\d+))? vendor[ _]err[ =](?P<verr>\d+))'
    r'(?: \((?P<reqtype>\w+)\))?')
NCCL_IB_CQE_OLD = re.compile(r'NET/IB : Got completion with error (?P<err>\d+), opcode (?P<op>\d+), len (?P<len>\d+), '
                             r'vendor err (?P<verr>\d+)')  # <= 2.11 form (FORMATS 1.10.3 table), no peer
NCCL_CUDA_FAIL = re.compile(r"Cuda failure (?:(?P<code>\d+) )?'(?P<err>[^']*)'")
TORCH_CPP_PREFIX = re.compile(
    r'^(?:\[rank(?P<grank>\d+)\]:)?\[(?P<sev>[IWEF])(?:(?P<mmdd>\d{3,4}) (?P<hms>\d{2}:\d{2}:\d{2})\.(?P<ns>\d{9}))? '
    r'(?P<src>[\w.]+):(?P<srcline>\d+)\] (?P<msg>.*)$')
TORCH_PG_PREFIX = re.compile(r'\[PG (?:ID )?(?P<pgid>\d+)(?: PG GUID (?P<guid>[^\s(\]]+)(?:\((?P<desc>[^)]*)\))?)? Rank (?P<pgrank>\d+)\]')
TORCH_WD_TIMEOUT = re.compile(
    r'\[Rank (?P<pgrank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\('
    r'(?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)(?:, TensorShape=(?P<shape>\[[^\]]*\]))?'
    r'(?:, NumelIn=(?P<nin>-?\d+), NumelOut=(?P<nout>-?\d+))?, Timeout\(ms\)=(?P<tmo>\d+)\) '
    r'ran for (?P<ran>\d+) milliseconds before timing out\.')
TORCH_WD_STATUS = re.compile(
    r'(?:Timeout at NCCL work: (?P<s1>-?\d+)|Exception \(either an error or timeout\) detected by watchdog at work: (?P<s2>-?\d+)),'
    r' last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<comp>-?\d+)')
TORCH_WD_STATUS_26 = re.compile(
    r'failure detected by watchdog at work sequence id: (?P<seq>-?\d+) PG status: '
    r'last enqueued work: (?P<enq>-?\d+), last completed work: (?P<comp>-?\d+)')
TORCH_DUMP_SIGNAL = re.compile(
    r'Received a dump signal (?:due to a collective timeout from (?P<src>this local rank| rank -?\d+)|from this local rank)'
    r' and (?:we )?will (?:try our best to dump|start to dump) the debug info\. '
    r'(?:Last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<comp>-?\d+)\.)?')
TORCH_HEARTBEAT = re.compile(r"ProcessGroupNCCL's watchdog got stuck for (?P<sec>\d+) seconds without making progress")
TORCH_NCCL_ERR = re.compile(r'NCCL error(?: in: (?P<file>[^\s,]+):(?P<line>\d+),|:) (?P<err>.+?), NCCL version (?P<ver>\d+\.\d+\.\d+)')
ELASTIC_RESTART = re.compile(r'\[(?P<role>[^\]]+)\] Worker group (?P<state>\w+)\. (?P<left>\d+)/(?P<max>\d+) attempts left; will restart worker group')
ELASTIC_RDZV_KV = re.compile(r'^\s+(?P<k>restart_count|master_addr|master_port|group_rank|group_world_size|local_ranks|role_ranks|global_ranks|role_world_sizes|global_world_sizes)=(?P<v>.*)$')
ELASTIC_FAILED = re.compile(r'failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lrank>\d+) \(pid: (?P<pid>\d+)\) of binary: (?P<bin>\S+)')
ELASTIC_SIGTERM = re.compile(r'Sending process (?P<pid>\d+) closing signal (?P<sig>\w+)')
TORCH_PY_GLOG = re.compile(r'^(?:\[rank(?P<grank>\d+)\]:)?(?P<sev>[VIWEC])(?P<mmdd>\d{4}) (?P<hms>\d{2}:\d{2}:\d{2}\.\d{6}) (?P<pid>\d+) (?P<path>\S+):(?P<line>\d+)\] (?P<msg>.*)$')
CFE_FIELD = re.compile(r'^\s+(?P<k>time|host|rank|exitcode|error_file|traceback)\s*: (?P<v>.*)$')
CFE_RANK = re.compile(r'^\s+rank\s+: (?P<rank>\d+) \(local_rank: (?P<lrank>\d+)\)$')
CFE_EXIT = re.compile(r'^\s+exitcode\s+: (?P<code>-?\d+) \(pid: (?P<pid>\d+)\)\s*(?:\((?P<sig>SIG\w+)\))?\s*$')
HVD_TIMEOUT = re.compile(r'Timed out waiting for (?P<activity>.+?)\. Please check that you have enough resources to run at least (?P<min>\d+) Horovod processes')
HVD_BLACKLIST = re.compile(r'blacklist failing host: (?P<host>\S+)')
HVD_STALL = re.compile(r'One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than (?P<sec>\d+) seconds')
DS_LOG = re.compile(r'^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3})\] \[(?P<lvl>[A-Z]+)\] \[(?P<file>[^:\]]+):(?P<line>\d+):(?P<func>[^\]]+)\] (?P<msg>.*)$')
SRUN_LABEL = re.compile(r'^(?:P(?P<het>\d+) )?\s*(?P<task>\d+): ')
K8S_TS = re.compile(r'^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})) ')
TORCHRUN_TEE = re.compile(r'^\[(?P<role>[A-Za-z_][\w.-]*?)(?P<lrank>\d+)\]:')
HVD_PREFIX = re.compile(r'^(?P<time>\w{3} \w{3} +\d+ \d{2}:\d{2}:\d{2} \d{4})?\[(?P<index>[^\]]+)\]<(?P<stream>stdout|stderr)>:')
RANK_HOOK = re.compile(r'^\[rank(?P<grank>\d+)\]: ?')
OMPI_TAG = re.compile(r'^\[1,(?P<rank>\d+)\]<(?P<stream>stdout|stderr)>: ?')
PDSH_HOST = re.compile(r'^(?P<host>[A-Za-z][\w.-]*): ')
RAY_ACTOR = re.compile(r'^\((?P<actor>RayTrainWorker|TorchTrainer)(?:\[rank=\d+\])? pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\d.]+))?\) ')

# (marker literal, regex that must then match with re.search) for lines after prefix stripping
MARKERS = [
    ("Init START", NCCL_INIT), ("Init COMPLETE", NCCL_INIT), ("Destroy COMPLETE", NCCL_INIT),
    ("Abort COMPLETE", NCCL_INIT), (" MNNVL ", NCCL_TOPO), ("+cuda", NCCL_VERSION),
    ("Bootstrap", NCCL_BOOTSTRAP), ("; OOB ", NCCL_NET_IB), ("set by environment to", NCCL_ENV_SET),
    (" via ", NCCL_CHANNEL_CONN), ("NCCL INFO Trees", NCCL_TREES), ("Connection closed by remote peer", NCCL_SOCK_CLOSED),
    ("Cuda failure", NCCL_CUDA_FAIL), ("Watchdog caught collective operation timeout", TORCH_WD_TIMEOUT),
    ("last enqueued NCCL work", None), ("failure detected by watchdog", TORCH_WD_STATUS_26),
    ("Received a dump signal", TORCH_DUMP_SIGNAL), ("watchdog got stuck for", TORCH_HEARTBEAT),
    ("NCCL error", TORCH_NCCL_ERR), ("attempts left; will restart", ELASTIC_RESTART),
    ("failed (exitcode:", ELASTIC_FAILED), ("closing signal", ELASTIC_SIGTERM), ("Horovod processes", HVD_TIMEOUT),
    ("blacklist failing host", HVD_BLACKLIST), ("One or more tensors were submitted", HVD_STALL),
    ("[PG ", TORCH_PG_PREFIX),
]


def strip_prefixes(line: str, layout: str) -> tuple[str, dict]:
    """Strip launcher prefixes (FORMATS 7) in the order they are written; returns (rest, fields)."""
    info: dict = {}
    if layout == "kubectl":
        m = K8S_TS.match(line)
        assert m, f"kubectl line without RFC3339 timestamp: {line!r}"
        line = line[m.end():]
    if layout == "srun-interleaved":
        m = SRUN_LABEL.match(line)
        if m:
            info["task"] = int(m.group("task"))
            line = line[m.end():]
    if layout == "openmpi":
        m = OMPI_TAG.match(line)
        if m:
            info["task"] = int(m.group("rank"))
            line = line[m.end():]
    if layout == "pdsh":
        m = PDSH_HOST.match(line)
        if m:
            info["host"] = m.group("host")
            line = line[m.end():]
    if layout == "ray":
        m = RAY_ACTOR.match(line)
        if m:
            info.update(actor=m.group("actor"), pid=int(m.group("pid")), ip=m.group("ip"))
            line = line[m.end():]
    m = TORCHRUN_TEE.match(line) or HVD_PREFIX.match(line)
    if m and layout in ("kubectl", "nccl-debug-file"):
        info["tee"] = m.group(0)
        line = line[m.end():]
    return line, info


def check_line(text: str, layout: str, gpn: int) -> dict:
    """Assert one (prefix-stripped) line against the reference regexes; returns parsed NCCL fields or {}."""
    if " NCCL INFO " in text or " NCCL WARN " in text or " NCCL TRACE " in text:
        m = NCCL_LINE.match(text)
        assert m, f"NCCL-looking line does not match NCCL_LINE: {text!r}"
        assert 0 <= int(m.group("dev")) < gpn, f"cudaDev out of range: {text!r}"
        if m.group("level") == "WARN":
            assert m.group("file") and m.group("line"), text
        return m.groupdict()
    if text.startswith(("[rank", "[E ", "[I ", "[W ", "[F ")) and not RANK_HOOK.match(text):
        assert TORCH_CPP_PREFIX.match(text), f"c10 line does not match TORCH_CPP_PREFIX: {text!r}"
    for lit, rx in MARKERS:
        if lit in text:
            if rx is None:
                assert TORCH_WD_STATUS.search(text) or "Work update" in text or "dump signal" in text, text
            elif lit == " via " and "NCCL INFO" not in text:
                continue
            elif lit == "Bootstrap" and "Bootstrap timings" in text:
                continue
            else:
                assert rx.search(text), f"line with {lit!r} does not match its regex: {text!r}"
    if "Got completion" in text:
        assert NCCL_IB_CQE.search(text) or NCCL_IB_CQE_OLD.search(text), text
    if "onnect to" in text and "NCCL WARN" in text:
        assert NCCL_CONNECT_ERR.search(text), text
    return {}


def read_lines(path: Path) -> list[str]:
    data = path.read_text(encoding="utf-8")
    if not data:  # a rank that wrote nothing (RK2)
        return []
    assert data.endswith("\n"), path
    return [seg for ln in data.split("\n")[:-1] for seg in ln.split("\r")]


def check_job(d: Path, exp: dict) -> None:
    layout, gpn, ranks = exp["layout"], exp["gpus_per_node"], exp["ranks_expected"]
    files = sorted(p for p in d.iterdir() if p.name != "expected.json")
    assert len(files) == exp["files"], (len(files), exp["files"])
    assert len(exp["hosts"]) == math.ceil(ranks / gpn) == len(set(exp["hosts"]))
    assert exp["hosts"] == sorted(exp["hosts"])
    cul = exp["culprit"]
    assert cul["level"] in ("rank", "host", "none")
    assert all(0 <= r < ranks for r in cul["ranks"]) and set(cul["hosts"]) <= set(exp["hosts"])
    if cul["level"] != "none":
        assert cul["hosts"], exp
    else:
        assert not cul["ranks"] and not cul["hosts"]
    assert not set(exp["rules"]) & set(exp["rules_not"])
    assert set(exp["rules"]) | set(exp["rules_not"]) | set(exp["rules_may"]) == set(ALL_RULES)
    assert exp["scenario"] == "healthy" or exp["scenario"] in exp["rules"]
    assert set(exp["timed_out_ranks"]) <= set(range(ranks))
    for pg, d2 in exp["last_seq"].items():
        assert pg in exp["process_groups"], pg
        assert all(0 <= int(r) < ranks for r in d2)
    rank_map = exp["rank_map"]
    seen_ranks: set = set()
    hosts_in_lines: set = set()
    for p in files:
        for raw in read_lines(p):
            text, info = strip_prefixes(raw, layout)
            f = check_line(text, layout, gpn)
            if f:
                hosts_in_lines.add(f["host"])
            if layout in ("srun-interleaved", "openmpi") and "task" in info:
                seen_ranks.add(info["task"])
            if f and layout == "pdsh":
                assert f["host"] == info.get("host"), raw
            if f and layout == "ray":
                assert info.get("actor") == "RayTrainWorker" and int(f["pid"]) == info["pid"], raw
            if f and layout in ("per-rank", "srun-interleaved", "openmpi"):
                r = (int(p.name[5:-4]) if layout == "per-rank" else info.get("task"))
                if r is not None:
                    host, _lr, dev, *pids = rank_map[r]
                    assert f["host"] == host and int(f["pid"]) in pids, (r, raw)
                    assert int(f["dev"]) == dev, (r, raw)
                    if r >= gpn:
                        assert int(f["dev"]) != r
        if layout == "per-rank" and p.name.startswith("rank-") and p.stat().st_size:
            seen_ranks.add(int(p.name[5:-4]))
        if layout == "nccl-debug-file" and p.name.startswith("nccl."):
            _, host, pid, _ = p.name.split(".")
            for raw in read_lines(p):
                if raw:
                    m = NCCL_LINE.match(raw)
                    assert m and m.group("host") == host and m.group("pid") == pid, (p.name, raw)
        if layout == "srun-interleaved":
            for raw in read_lines(p):
                if not SRUN_LABEL.match(raw):  # launcher lines are not labelled
                    assert raw.startswith("srun: error:") or "elastic" in raw or ":root:" in raw or raw.startswith(
                        ("  ", "Traceback", "horovod.", "Job has been", "Process ")) or raw == "", raw
    assert hosts_in_lines <= set(exp["hosts"]), hosts_in_lines - set(exp["hosts"])
    if layout in ("per-rank", "srun-interleaved", "openmpi"):
        assert len(seen_ranks) == exp["ranks_seen"], (sorted(seen_ranks), exp["ranks_seen"])


def dir_digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.iterdir()):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


ERAS = [(n, t) for n in NCCL_ERAS for t in TORCH_ERAS]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_and_layout(tmp_path, scenario):
    for i, layout in enumerate(LAYOUTS):
        ne, te = ERAS[(list(SCENARIOS).index(scenario) * 4 + i) % len(ERAS)]
        d = tmp_path / layout
        exp = generate_job(d, scenario, 16, layout, ne, te, seed=7 + i, steps=8, info_lines=(i % 2 == 0))
        assert json.loads((d / "expected.json").read_text()) == exp
        assert exp["ranks_expected"] == 16 and exp["layout"] == layout
        check_job(d, exp)


@pytest.mark.parametrize("nccl_era", list(NCCL_ERAS))
def test_eras_info_lines(tmp_path, nccl_era):
    for te in TORCH_ERAS:
        d = tmp_path / te
        exp = generate_job(d, "MN3", 24, "per-rank", nccl_era, te, seed=3, steps=6, comms_per_rank=3)
        check_job(d, exp)
        assert len(exp["hosts"]) == 3 and exp["timed_out_ranks"]


def test_deterministic(tmp_path):
    a = generate_job(tmp_path / "a", "RK1", 16, "kubectl", seed=11, steps=6)
    b = generate_job(tmp_path / "b", "RK1", 16, "kubectl", seed=11, steps=6)
    generate_job(tmp_path / "c", "RK1", 16, "kubectl", seed=12, steps=6)
    assert a == b and dir_digest(tmp_path / "a") == dir_digest(tmp_path / "b")
    assert dir_digest(tmp_path / "a") != dir_digest(tmp_path / "c")


def test_workers_do_not_change_output(tmp_path):
    import generator.layouts as lay
    generate_job(tmp_path / "a", "NET1", 32, "per-rank", seed=2, steps=4, workers=1)
    generate_job(tmp_path / "b", "NET1", 32, "per-rank", seed=2, steps=4, workers=2)
    assert dir_digest(tmp_path / "a") == dir_digest(tmp_path / "b")
    generate_job(tmp_path / "c", "RK3", 32, "srun-interleaved", seed=2, steps=4)
    old = lay.SRUN_INMEM_MAX
    try:
        lay.SRUN_INMEM_MAX = 0  # force the external merge path
        generate_job(tmp_path / "d", "RK3", 32, "srun-interleaved", seed=2, steps=4, workers=2)
    finally:
        lay.SRUN_INMEM_MAX = old
    assert dir_digest(tmp_path / "c") == dir_digest(tmp_path / "d")
    assert not [p for p in os.listdir(tmp_path / "d") if p.endswith(".tmp")]


def test_culprit_evidence(tmp_path):
    """The injected failure is visible where the oracle says it is."""
    e = generate_job(tmp_path / "mn3", "MN3", 16, "per-rank", "2.21", "2.6", seed=1, steps=6)
    c = e["culprit"]["ranks"][0]
    assert c not in e["timed_out_ranks"] and len(e["timed_out_ranks"]) == 15
    seqs = e["timeout_seq"]["0"]
    assert len(set(seqs.values())) == 1 and e["last_seq"]["0"][str(c)] < next(iter(seqs.values()))
    e = generate_job(tmp_path / "rk3", "RK3", 16, "per-rank", "2.21", "2.4", seed=1, steps=6)
    c = e["culprit"]["ranks"][0]
    tp = next(g for g, v in e["timeout_seq"].items() if e["process_groups"][g]["type"] == "tp")
    s = next(iter(e["timeout_seq"][tp].values()))
    assert e["last_seq"][tp][str(c)] < s
    assert {v["type"] for g, v in e["process_groups"].items() if g in e["timeout_seq"]} == {"default", "tp"}
    e = generate_job(tmp_path / "rk2", "RK2", 16, "per-rank", seed=4, steps=6)
    c = e["culprit"]["ranks"][0]
    text = (tmp_path / "rk2" / f"rank-{c:05d}.log").read_text()
    assert "Watchdog caught" not in text
    e = generate_job(tmp_path / "rk1", "RK1", 16, "kubectl", "2.21", "2.4", seed=5, steps=6)
    c = e["culprit"]["ranks"][0]
    roots = []
    for p in (tmp_path / "rk1").glob("pod-*.log"):
        lines = p.read_text().split("\n")
        for i, ln in enumerate(lines):
            if ln.endswith("Root Cause (first observed failure):"):
                roots.append(int(CFE_RANK.match(K8S_TS.sub("", lines[i + 4])).group("rank")))
    assert c in roots and any(r != c for r in roots)
    e = generate_job(tmp_path / "mn2", "MN2", 16, "srun-interleaved", seed=1, steps=4)
    text = next((tmp_path / "mn2").glob("slurm-*.out")).read_text()
    assert "docker0:172.17.0.1<0>" in text and "172.17.0.1<" in text.split("NCCL WARN", 1)[1]


def test_more_layout_prefixes(tmp_path):
    """openmpi / pdsh / ray: every worker line carries its launcher's prefix (values written by hand for seed 5:
    hosts gpu-node-015/016, culprit rank 11 = local rank 3 on gpu-node-016, pid 2074476, ip 10.4.80.23)."""
    def lines(layout, nccl_era="2.21"):
        d = tmp_path / f"{layout}-{nccl_era}"
        e = generate_job(d, "RK1", 16, layout, nccl_era, "2.4", seed=5, steps=4)
        assert e["culprit"]["ranks"] == [11] and e["hosts"] == ["gpu-node-015", "gpu-node-016"] and e["files"] == 1
        check_job(d, e)
        return next(p for p in d.iterdir() if p.name != "expected.json").read_text().split("\n")[:-1]

    ompi = lines("openmpi")  # Open MPI 5 style: "]<stdout>: "
    assert all(OMPI_TAG.match(ln) for ln in ompi)
    assert "[1,11]<stdout>: gpu-node-016:2074476:2074476 [0] NCCL INFO Bootstrap : Using bond0:10.4.80.23<0>" in ompi
    assert "[1,11]<stderr>: [rank11]: Traceback (most recent call last):" in ompi
    assert not [ln for ln in ompi if re.search(r" NCCL (?:INFO|WARN) ", ln) and "<stderr>" in ln]  # NCCL_DEBUG: stdout
    assert any(ln.startswith("[1,0]<stdout>:  [") and " iteration " in ln for ln in ompi)  # Megatron prints
    ompi4 = lines("openmpi", "2.18")  # older era: Open MPI 4 style, no space after the colon
    assert "[1,11]<stderr>:[rank11]: Traceback (most recent call last):" in ompi4

    pdsh = lines("pdsh")
    runner = [ln for ln in pdsh if not ln.startswith(("gpu-node-015: ", "gpu-node-016: "))]
    assert len(runner) == 6 and runner[3].startswith("[") and " cmd = pdsh -S -f 1024 -w gpu-node-015,gpu-node-016 " in runner[3]
    assert [ln for ln in runner if ln.startswith("pdsh@")] == ["pdsh@gpu-node-015: gpu-node-016: ssh exited with exit code 1",
                                                               "pdsh@gpu-node-015: gpu-node-015: ssh exited with exit code 250"]
    text = "\n".join(pdsh)
    assert ("gpu-node-016: [2024-07-09 04:47:12,357] [INFO] [launch.py:256:main] process 2074476 spawned with command: "
            "['/opt/conda/bin/python', '-u', '/opt/megatron/pretrain_gpt.py', '--local_rank=3', '--deepspeed', "
            "'--deepspeed_config', 'ds_config.json']") in text
    assert "gpu-node-016: [2024-07-09 04:47:12,227] [INFO] [launch.py:163:main] global_rank_mapping=defaultdict(<class " \
           "'list'>, {'gpu-node-015': [0, 1, 2, 3, 4, 5, 6, 7], 'gpu-node-016': [8, 9, 10, 11, 12, 13, 14, 15]})" in text
    assert "gpu-node-016: gpu-node-016:2074476:2074476 [3] NCCL INFO Bootstrap : Using bond0:10.4.80.23<0>" in text
    assert "gpu-node-016: [2024-07-09 04:47:56,867] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 2074476" in text
    # launch.py names the command of its last spawned child (local rank 7), whichever child died
    assert "gpu-node-016: [2024-07-09 04:47:57,117] [ERROR] [launch.py:325:sigkill_handler] ['/opt/conda/bin/python', " \
           "'-u', '/opt/megatron/pretrain_gpt.py', '--local_rank=7', '--deepspeed', '--deepspeed_config', " \
           "'ds_config.json'] exits with return code = 1" in text
    assert "gpu-node-016: [rank11]: Traceback (most recent call last):" in text

    ray = lines("ray")
    workers = [ln for ln in ray if ln.startswith("(RayTrainWorker ")]
    assert all(RAY_ACTOR.match(ln) for ln in workers) and len(workers) > 0.9 * len(ray)
    assert "(RayTrainWorker pid=2074476, ip=10.4.80.23) Setting up process group for: env:// [rank=11, world_size=16]" in ray
    assert "(RayTrainWorker pid=2074476, ip=10.4.80.23) gpu-node-016:2074476:2074476 [3] NCCL INFO Bootstrap : Using " \
           "bond0:10.4.80.23<0>" in ray
    assert "(RayTrainWorker pid=2074476, ip=10.4.80.23) [rank11]: Traceback (most recent call last):" in ray
    assert any(ln.startswith("(RayTrainWorker pid=2190794) ") for ln in ray)  # rank 0, on the driver's node: no ip
    assert not any(ln.startswith("(RayTrainWorker pid=2190794, ip=") for ln in ray)
    assert ray[0].endswith("INFO worker.py:1603 -- Connecting to existing Ray cluster at address: 10.4.80.22:6379...")


def test_container_pids_collide(tmp_path):
    e = generate_job(tmp_path / "k", "healthy", 32, "kubectl", seed=9, steps=2, info_lines=False)
    pids = {h: sorted(m[3] for m in e["rank_map"] if m[0] == h) for h in e["hosts"]}
    assert len({tuple(v) for v in pids.values()}) == 1 and max(pids[e["hosts"][0]]) < 1000
    e = generate_job(tmp_path / "s", "healthy", 32, "srun-interleaved", seed=9, steps=2, info_lines=False)
    assert {m[2] for m in e["rank_map"]} == {0}  # one visible GPU per task


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        generate_job(tmp_path / "x", "NOPE", 16)
    with pytest.raises(ValueError):
        generate_job(tmp_path / "x", "MN3", 16, layout="nope")


def test_cli_list(capsys):
    from generator.cli import main
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "MN3" in out and "kubectl" in out and "2.29" in out and "1.13" in out


def test_committed_fixtures_match_readme():
    gen = FIXTURES / "generated"
    dirs = [p for p in gen.iterdir() if p.is_dir()]
    assert (gen / "hang-mn3-16" / "expected.json").exists()
    total = sum(f.stat().st_size for d in dirs for f in d.iterdir())
    assert total < 2_500_000
    readme = (gen / "README.md").read_text()
    for d in dirs:
        exp = json.loads((d / "expected.json").read_text())
        assert d.name in readme and exp["ranks_expected"] <= 16
        check_job(d, exp)
