"""Log bundles handed over as tar archives: read as the folder they were packed from, bounded, and
never trusted (member names are no paths; links, devices and nested archives are skipped with a
reason; a damaged archive keeps what was read before the damage)."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from nccl_doctor import archives
from nccl_doctor.analysis import analyze
from nccl_doctor.discover import InputError, discover

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"
#: A real run whose logs are a folder per rank (torchrun --log-dir) and a console: rank 2 raised.
RUN = RUNS / "t63_loader_timeout_r2_w3_pid_split"


def _pack(dest: Path, folder: Path, mode: str = "w:gz") -> Path:
    with tarfile.open(dest, mode) as tar:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and p.name != "expected.json":
                tar.add(p, arcname=f"bundle/{p.relative_to(folder)}")
    return dest


def _verdict(report) -> tuple:
    v = report.verdict or {}
    return v.get("rule"), tuple(v.get("ranks") or ())


def test_a_bundle_reads_as_its_folder(tmp_path):
    expected = json.loads((RUN / "expected.json").read_text())["culprit"]["ranks"]
    bundle = _pack(tmp_path / "support-bundle.tar.gz", RUN)
    packed = analyze([str(bundle)])
    assert _verdict(packed)[1] == tuple(expected) == (2,)
    assert _verdict(packed) == _verdict(analyze([str(p) for p in RUN.iterdir() if p.name != "expected.json"]))
    quoted = [e["file"] for f in packed.to_dict()["findings"] for e in f["evidence"]]
    assert quoted and all(q.startswith(f"{bundle}!/bundle/") for q in quoted)


def test_a_plain_tar_too(tmp_path):
    bundle = _pack(tmp_path / "logs.tar", RUN, "w")
    assert _verdict(analyze([str(bundle)]))[1] == (2,)


def _member(tar: tarfile.TarFile, name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE,
            link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, len(data) if kind == tarfile.REGTYPE else 0, link
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def test_hostile_members_are_skipped_or_kept_inert(tmp_path):
    bundle = tmp_path / "hostile.tar"
    line = b"[rank1]: RuntimeError: boom\n"
    with tarfile.open(bundle, "w") as tar:
        _member(tar, "../../escape.log", line)
        _member(tar, "/abs/rank1.log", line)
        _member(tar, "link.log", kind=tarfile.SYMTYPE, link="/etc/passwd")
        _member(tar, "dev.log", kind=tarfile.CHRTYPE)
        _member(tar, "inner.tar.gz", gzip.compress(b"x"))
        _member(tar, "model.pt", b"\x00" * 10)
    files, skipped = discover([str(bundle)])
    names = sorted(f.path for f in files)
    assert names == [f"{bundle}!/../../escape.log", f"{bundle}!/abs/rank1.log"]
    tmp = os.path.realpath(archives._tmpdir())
    assert all(os.path.realpath(f.real).startswith(tmp + os.sep) for f in files)
    assert not (tmp_path.parent / "escape.log").exists()
    reasons = {s.path.rsplit("!/", 1)[-1]: s.reason for s in skipped}
    assert "link or device" in reasons["link.log"] and "link or device" in reasons["dev.log"]
    # an archive inside the archive is unpacked in turn (one level): this one is no tar at all
    assert "not a readable archive" in reasons["inner.tar.gz"]
    assert "not a log file" in reasons["model.pt"]


def test_a_truncated_bundle_keeps_what_was_read(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(8):  # (random bytes: gzip cannot shrink them, so the cut falls among the members)
            _member(tar, f"rank{i}.log", os.urandom(64 << 10).hex().encode())
    packed = gzip.compress(buf.getvalue())
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    files, skipped = discover([str(cut)])
    assert files, "the members before the damage are read"
    assert any(s.path == str(cut) and "truncated or corrupt" in s.reason for s in skipped)


def test_not_a_tar_is_one_reason_and_nothing_else(tmp_path):
    fake = tmp_path / "notes.tar.gz"
    fake.write_bytes(gzip.compress(b"just some text\n"))
    files, skipped = discover([str(fake)])
    assert files == [] and [s.reason.split(":")[0] for s in skipped] == ["not a readable archive"]
    with pytest.raises(InputError):
        analyze([str(fake)])


def test_members_past_the_cap_are_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "MAX_MEMBERS", 2)
    bundle = tmp_path / "many.tar"
    with tarfile.open(bundle, "w") as tar:
        for i in range(4):
            _member(tar, f"rank{i}.log", b"hello\n")
    files, skipped = discover([str(bundle)])
    assert len(files) == 2 and any("more than 2 members" in s.reason for s in skipped)


def test_a_full_disk_skips_members_instead_of_filling_it(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "HEADROOM", 1 << 62)  # (no disk has that much free)
    bundle = _pack(tmp_path / "bundle.tar", RUN, "w")
    files, skipped = discover([str(bundle)])
    assert files == [] and skipped and all("not enough free space" in s.reason for s in skipped)


def test_a_nodes_tar_gz_inside_the_jobs_zip_is_read_as_its_folder(tmp_path):
    # t171_raise_r3_2x2_nodezip_nested's shape: job.zip holding dgx-a02/logs.tar.gz
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as tar:
        _member(tar, "logs/attempt_0/1/stderr.log", b"[rank3]: ValueError: bad length prefix\n")
    bundle = tmp_path / "job.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("dgx-a02/logs.tar.gz", inner.getvalue())
        z.writestr("dgx-a02/console.log", b"[rank3]: ValueError: bad length prefix\n")
    files, skipped = discover([str(bundle)])
    assert sorted(f.path for f in files) == [f"{bundle}!/dgx-a02/console.log",
                                             f"{bundle}!/dgx-a02/logs.tar.gz!/logs/attempt_0/1/stderr.log"]
    assert not skipped


def test_a_bundle_cut_inside_a_member_keeps_every_whole_member_and_that_members_start(tmp_path):
    # A copy cut short by a full disk ends inside a member: the members before it are read whole (a buffered
    # read of the decompressor used to drop the last block it had gathered, and with it the members in that
    # block), and the member it ends inside is kept as far as it goes, reported as partly read.
    texts = {f"rank{r}.log": "".join(f"[rank{r}]: step {s} loss 0.{s:04d}\n" for s in range(80)).encode()
             for r in range(3)}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in texts.items():
            _member(tar, name, data)
    raw = buf.getvalue()
    start = raw.index(texts["rank2.log"])  # (where the last member's data begins in the tar stream)
    packed = gzip.compress(raw, compresslevel=0)  # stored blocks: the stream's bytes in order, after a header
    header = len(gzip.compress(b"", compresslevel=0)) - 8 - 5  # (gzip header; 5 bytes before each stored block)
    cut = tmp_path / "run.tar.gz"
    cut.write_bytes(packed[: header + 5 + start + 1000])
    files, skipped = discover([str(cut)])
    got = {f.path.rsplit("!/", 1)[-1]: Path(f.real).read_bytes() for f in files}
    assert got["rank0.log"] == texts["rank0.log"] and got["rank1.log"] == texts["rank1.log"]
    assert got["rank2.log"] == texts["rank2.log"][:1000]
    assert {f.path.rsplit("!/", 1)[-1]: f.cut for f in files}["rank2.log"].startswith("cut short")
    assert any(s.path == str(cut) and "truncated or corrupt" in s.reason for s in skipped)
    report = analyze([str(cut)]).to_dict()
    partly = [s for s in report["inputs"]["skipped"] if s["path"].endswith("!/rank2.log")]
    assert partly and "cut short: the archive ends inside it (1,000 of" in partly[0]["reason"]
