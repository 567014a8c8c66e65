"""Hostile and broken input: never crash, never lie, lose nothing (see README.md here)."""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import zstandard
from linear import assert_linear

from nccl_doctor import analyze
from nccl_doctor.discover import InputError

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "real"
GOOD = REAL / "077_other_nccl_errors.log"  # a log with a known NC1 finding


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nccl_doctor", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def rules_of(report) -> set[str]:
    return {f.rule for f in report.findings}


def test_random_binary_next_to_a_good_log_is_skipped_with_reason(tmp_path):
    (tmp_path / "core.1234").write_bytes(os.urandom(200_000))
    (tmp_path / "good.log").write_bytes(GOOD.read_bytes())
    report = analyze([str(tmp_path)], jobs=1)
    assert "NC1" in rules_of(report)
    skipped = {Path(s["path"]).name: s["reason"] for s in report.inputs["skipped"]}
    assert "binary" in skipped["core.1234"]


def test_empty_file_and_empty_folder(tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "sub").mkdir()
    report = analyze([str(tmp_path)], jobs=1)  # nothing read is never a healthy verdict
    assert report.exit_status == 2 and "no log line" in report.nothing_found and report.findings == []
    r = cli("analyze", str(tmp_path / "sub"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_nothing_analysable_exits_2_with_one_line(tmp_path):
    (tmp_path / "only.bin").write_bytes(bytes(range(256)) * 100)
    r = cli("analyze", str(tmp_path))
    assert r.returncode == 2 and r.stdout == "" and r.stderr.startswith("nccl-doctor: ") and r.stderr.count("\n") == 1
    r = cli("analyze", str(tmp_path / "missing"))
    assert r.returncode == 2 and "no such file" in r.stderr


def test_30mb_single_line(tmp_path):
    p = tmp_path / "huge.log"
    p.write_bytes(b"x" * (30 << 20) + b"\n" + GOOD.read_bytes())
    report = analyze([str(p)], jobs=1)  # "seconds, not hours": linearity is checked below and in test_regex_linear
    assert "NC1" in rules_of(report)
    assert report.inputs["lines"] == 1 + GOOD.read_bytes().count(b"\n")


@pytest.mark.parametrize("fragment", [b"comm 0x1 rank ", b"NCCL WARN ", b"[rank1]:", b"Watchdog caught collective operation timeout: WorkNCCL(",
                                      b"host:1:1 [0] NCCL INFO ", b"[PG ID 0 PG GUID ", b"Got completion from peer "])
def test_adversarial_repetitions_stay_fast(tmp_path, fragment):
    def make(n: int) -> str:
        p = tmp_path / f"adv-{n}.log"
        p.write_bytes(fragment * (n // len(fragment)) + b"\n")
        return str(p)

    assert_linear(make, lambda path: analyze([path], jobs=1), 250_000, repeat=2)  # CPU time, not wall time


def test_huge_numbers_are_bounded(tmp_path):
    digits = "9" * 100_000
    p = tmp_path / "rank-0.log"
    p.write_text(f"node1:1:2 [0] NCCL INFO comm 0x55d5c7f7e0b0 rank {digits} nranks {digits} cudaDev 0 busId 1b000 - Init COMPLETE\n"
                 f"[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation "
                 f"timeout: WorkNCCL(SeqNum={digits}, OpType=ALLREDUCE, Timeout(ms)=600000) ran for {digits} milliseconds before timing out.\n")
    report = analyze([str(p)], jobs=1)
    assert report.job.ranks_expected is None or report.job.ranks_expected < 10**7
    for r in report.job.ranks:
        assert all(v is None or abs(v) < 10**19 for v in r.last_seq.values())


def test_non_utf8_nul_crlf_and_carriage_returns(tmp_path):
    text = GOOD.read_bytes().replace(b"\n", b"\r\n")
    p = tmp_path / "mixed.log"
    p.write_bytes(b"\xff\xfe garbage \x00\x00\r\n" + b"10%|#|\r50%|##|\r" + text)
    report = analyze([str(p)], jobs=1)
    assert "NC1" in rules_of(report)
    ev = next(e for e in report.job.events if e.kind == "nccl_shm")
    assert "\r" not in ev.text and "\x00" not in ev.text


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_truncated_archives_yield_what_they_can(tmp_path, kind):
    body = b"".join(b"filler line %06d\n" % i for i in range(50_000)) + GOOD.read_bytes() * 50
    data = gzip.compress(body) if kind == "gz" else zstandard.ZstdCompressor().compress(body)
    p = tmp_path / f"cut.log.{kind}"
    p.write_bytes(data[: int(len(data) * 0.9)])
    report = analyze([str(p)], jobs=1)
    assert report.inputs["lines"] > 40_000
    assert any("partly read" in s["reason"] for s in report.inputs["skipped"])


def test_symlink_loop_and_same_file_twice(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "good.log").write_bytes(GOOD.read_bytes())
    os.symlink(d, d / "loop")
    os.symlink(d / "good.log", d / "alias.log")
    report = analyze([str(d), str(d / "good.log")], jobs=1)
    assert report.inputs["files"] == 1


def _analyze_as_nobody(path: str) -> dict:
    """Root reads any file; to meet a real EACCES, analyse in a forked child that dropped to nobody."""
    import json
    import multiprocessing as mp

    def child(conn):
        os.setgid(65534)
        os.setuid(65534)
        report = analyze([path], jobs=1)
        conn.send(json.dumps({"skipped": report.inputs["skipped"], "rules": sorted(rules_of(report))}))

    ctx = mp.get_context("fork")
    parent, kid = ctx.Pipe()
    proc = ctx.Process(target=child, args=(kid,))
    proc.start()
    proc.join(60)
    return json.loads(parent.recv())


def test_unreadable_file_is_skipped_not_fatal():
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="nccl-doctor-perm-", dir="/tmp"))
    try:
        d.chmod(0o755)
        (d / "good.log").write_bytes(GOOD.read_bytes())
        secret = d / "secret.log"
        secret.write_bytes(b"x\n")
        secret.chmod(0)
        got = _analyze_as_nobody(str(d)) if os.geteuid() == 0 else {
            "skipped": analyze([str(d)], jobs=1).inputs["skipped"], "rules": ["NC1"]}
        reasons = {Path(s["path"]).name: s["reason"] for s in got["skipped"]}
        assert reasons.get("secret.log") == "permission denied"
        assert "NC1" in got["rules"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_many_tiny_files(tmp_path):
    d = tmp_path / "many"
    d.mkdir()
    for i in range(20_000):
        (d / f"r{i}.log").write_bytes(b"hello %d\n" % i)
    (d / "good.log").write_bytes(GOOD.read_bytes())
    report = analyze([str(d)])
    assert report.inputs["files"] == 20_001 and "NC1" in rules_of(report)


def test_file_growing_while_read(tmp_path):
    p = tmp_path / "grow.log"
    p.write_bytes(GOOD.read_bytes())
    stop = threading.Event()

    def writer():  # bounded: at most ~20 MB, even if the reader were slow
        with open(p, "ab") as fh:
            for _ in range(1200):
                if stop.is_set():
                    break
                fh.write(b"more output line\n" * 1000)
                fh.flush()

    t = threading.Thread(target=writer)
    t.start()
    try:
        report = analyze([str(p)], jobs=1)
    finally:
        stop.set()
        t.join()
    assert "NC1" in rules_of(report)


def test_input_files_are_never_modified(tmp_path):
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in REAL.glob("*.log")}
    mtimes = {p: p.stat().st_mtime_ns for p in before}
    analyze([str(REAL)], jobs=1)
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in before} == before
    assert {p: p.stat().st_mtime_ns for p in before} == mtimes


def test_markup_and_escapes_never_reach_the_terminal(tmp_path):
    p = tmp_path / "evil.log"
    p.write_bytes(b"gpu1:1:2 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-X to 9 bytes "
                  b"[bold red]x[/] [link=http://e]y[/link] \x1b]52;c;aGk=\x07 \x07bell \x1b[2J\n")
    r = cli("analyze", str(p))
    assert r.returncode == 1
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "[bold red]x[/]" in r.stdout and "[link=http://e]y[/link]" in r.stdout  # shown literally


def test_no_input_gives_clean_error():
    r = cli("analyze")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    with pytest.raises(InputError):
        analyze([])
