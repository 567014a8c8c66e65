"""A dump from a crashed job is untrusted: a pickle that would run code is refused and nothing runs."""

from __future__ import annotations

import io
import json
import os
import pickle
import pickletools
import subprocess
import sys
from pathlib import Path

import pytest
from fr_builders import STEP, build

from nccl_doctor.discover import discover
from nccl_doctor.flightrec import split_dumps
from nccl_doctor.flightrec.loader import DumpError, _PlainUnpickler, load_dump, loads_pickle

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "fixtures" / "flightrec" / "skip_collective" / "torchrun.log"
CODE = {op.name: op.code.encode("latin-1") for op in pickletools.opcodes}


class Evil:
    """Unpickling calls os.system, which creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class EvilBuild:
    """Unpickling rebuilds an object of this class (GLOBAL + NEWOBJ/REDUCE + BUILD)."""

    def __init__(self) -> None:
        self.x = 1


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_code_running_pickle_is_refused_and_nothing_runs(tmp_path, protocol):
    marker = tmp_path / "pwned"
    dump = build("2.10", 0, STEP)
    dump["entries"][1]["frames"].append(Evil(marker))  # hidden deep inside an otherwise real dump
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(pickle.dumps(dump, protocol=protocol))
    pickle.loads(pickle.dumps(Evil(tmp_path / "control")))  # the payload really works when unpickled naively
    assert (tmp_path / "control").exists()
    with pytest.raises(DumpError, match=r"^refused: pickle opcode (GLOBAL posix\.system|STACK_GLOBAL)"):
        load_dump(str(path))
    assert not marker.exists()


def test_unpickler_alone_refuses_imports(tmp_path):
    """Defence in depth: even without the opcode check, find_class is refused."""
    marker = tmp_path / "pwned"
    with pytest.raises(DumpError, match="asks to import"):
        _PlainUnpickler(io.BytesIO(pickle.dumps(Evil(marker), protocol=2))).load()
    with pytest.raises(DumpError, match="persistent id"):
        _PlainUnpickler(io.BytesIO(b"\x80\x02(X\x01\x00\x00\x00xtQ.")).load()
    assert not marker.exists()


def _stream(*names: str, arg: bytes = b"") -> bytes:
    return b"\x80\x02" + b"".join(CODE[n] for n in names) + arg


@pytest.mark.parametrize("data, opcode", [
    (_stream("GLOBAL") + b"os\nsystem\n" + b"X\x02\x00\x00\x00id\x85R.", "GLOBAL os.system"),
    (b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94.", "STACK_GLOBAL"),
    (_stream("EMPTY_LIST", "EMPTY_TUPLE", "REDUCE", "STOP"), "REDUCE"),
    (_stream("EMPTY_LIST", "NONE", "BUILD", "STOP"), "BUILD"),  # harmless here, refused all the same
    (_stream("MARK", "INST") + b"os\nsystem\n.", "INST os.system"),
    (_stream("MARK", "EMPTY_LIST", "OBJ", "STOP"), "OBJ"),
    (_stream("EMPTY_LIST", "EMPTY_TUPLE", "NEWOBJ", "STOP"), "NEWOBJ"),
    (_stream("EMPTY_LIST", "EMPTY_TUPLE", "EMPTY_DICT", "NEWOBJ_EX", "STOP"), "NEWOBJ_EX"),
    (_stream("EXT1") + b"\x01.", "EXT1"),
    (_stream("PERSID") + b"x\n.", "PERSID"),
    (_stream("NONE", "BINPERSID", "STOP"), "BINPERSID"),
    (_stream("EMPTY_SET", "STOP"), "EMPTY_SET"),
    (_stream("MARK", "FROZENSET", "STOP"), "FROZENSET"),
    (_stream("BYTEARRAY8") + b"\x00" * 8 + b".", "BYTEARRAY8"),
    (_stream("NEXT_BUFFER", "STOP"), "NEXT_BUFFER"),
])
def test_every_object_building_opcode_is_refused(data, opcode):
    with pytest.raises(DumpError, match=rf"^refused: pickle opcode {opcode}\b"):
        loads_pickle(data)


def test_objects_of_any_class_are_refused():
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(DumpError, match="^refused"):
            loads_pickle(pickle.dumps({"entries": [EvilBuild()]}, protocol=protocol))


def test_split_dumps_skips_the_hostile_dump_and_keeps_the_logs(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(Evil(marker), protocol=2))
    (tmp_path / "trace_1").write_bytes(pickle.dumps(Evil(marker), protocol=4))  # custom prefix: found by content
    (tmp_path / "train.log").write_bytes(LOG.read_bytes())
    files, _ = discover([str(tmp_path)])
    events, logs, skipped = split_dumps(files)
    assert events == [] and [Path(f.path).name for f in logs] == ["train.log"]
    reasons = {Path(s.path).name: s.reason for s in skipped}
    assert reasons["nccl_trace_rank_0"].startswith("flight-recorder dump not read: refused: pickle opcode GLOBAL")
    assert "refused: pickle opcode STACK_GLOBAL" in reasons["trace_1"]
    assert not marker.exists()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nccl_doctor", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_cli_on_a_hostile_dump_alone_says_why_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "nccl_trace_rank_0.pkl").write_bytes(pickle.dumps(Evil(marker), protocol=2))
    r = _cli("analyze", str(tmp_path))
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused: pickle opcode GLOBAL posix.system" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not marker.exists()


def test_cli_reports_the_refused_dump_among_good_inputs(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps(Evil(marker), protocol=2))
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(build("2.10", 0, STEP), protocol=2))
    (tmp_path / "torchrun.log").write_bytes(LOG.read_bytes())
    r = _cli("analyze", "--format", "json", str(tmp_path))
    assert r.returncode in (0, 1), r.stderr
    skipped = {Path(s["path"]).name: s["reason"] for s in json.loads(r.stdout)["inputs"]["skipped"]}
    assert "refused" in skipped["nccl_trace_rank_1"]
    assert not marker.exists()
