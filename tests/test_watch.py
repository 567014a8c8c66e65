"""`nccl-doctor watch` and the incremental Analyzer: followed files, rotation, truncation, webhook.

The end-to-end test starts a real HTTP server on 127.0.0.1, runs `watch` as a subprocess and appends
a generated hang line by line; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import local_http_server

import nccl_doctor
import nccl_doctor.growing as growing
from nccl_doctor import Analyzer
from nccl_doctor.discover import discover
from nccl_doctor.watch import Watcher, WebhookSender

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"
REAL_LOGS = sorted(REAL.glob("*.log"))


# ---- helpers -------------------------------------------------------------------------------------

class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server API
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        srv = self.server
        srv.gate.wait(20)  # a slow chat service: the test clears the gate
        with srv.lock:
            srv.attempts += 1
            fail = srv.fail_next > 0
            if fail:
                srv.fail_next -= 1
            else:
                srv.received.append(json.loads(body))
        self.send_response(503 if fail else 200)
        if fail:
            self.send_header("Retry-After", "0.1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def webhook():
    with local_http_server(_Hook, received=[], attempts=0, fail_next=0, gate=threading.Event()) as server:
        server.gate.set()
        yield server
        server.gate.set()


def _wait(cond, timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


def _dicts(findings) -> list[dict]:
    return [f.to_dict() for f in findings]


def _material(d: dict) -> tuple:
    return (d["rule"], tuple(d["ranks"]), tuple(d["hosts"]), d["severity"], d["confidence"])


def _feed_tree(analyzer: Analyzer, top: Path, rng: random.Random | None = None) -> None:
    """Feed every file of a tree as discover finds it: line by line, or in random byte pieces."""
    files, skipped = discover([str(top)])
    for f in files:
        data = Path(f.real).read_bytes()
        if rng is None:
            for line in _split(data):
                if line.endswith(b"\n"):
                    analyzer.feed(f.path, line)
                else:  # an unterminated last line: `feed` would terminate it
                    analyzer.feed_bytes(f.path, line)
        else:
            i = 0
            while i < len(data):
                n = rng.randint(1, 400)
                analyzer.feed_bytes(f.path, data[i:i + n])
                i += n
    analyzer.set_context(skipped=skipped)


def _split(data: bytes) -> list[bytes]:
    """Lines as the reader sees them: ended by ``\\n`` only (``bytes.splitlines`` also cuts at ``\\r``)."""
    lines = data.split(b"\n")
    return [ln + b"\n" for ln in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _generate(tmp_path: Path, scenario: str = "MN3", ranks: int = 16, layout: str = "per-rank") -> Path:
    generator = pytest.importorskip("generator", reason="fixtures/generator not available")
    if not hasattr(generator, "generate_job"):
        pytest.skip("fixtures/generator has no generate_job yet")
    out = tmp_path / f"{scenario}-{layout}"
    generator.generate_job(out, scenario, ranks, layout=layout, seed=1)
    return out


# ---- the incremental analyzer equals analyze() ---------------------------------------------------

@pytest.mark.parametrize("commit_bytes", [growing.COMMIT_BYTES, 64], ids=["default", "tiny-commits"])
def test_analyzer_equals_analyze_on_real_excerpts(monkeypatch, commit_bytes):
    monkeypatch.setattr(growing, "COMMIT_BYTES", commit_bytes)
    live = Analyzer()
    _feed_tree(live, REAL, random.Random(7))
    assert live.report().to_dict() == nccl_doctor.analyze(str(REAL)).to_dict()


@pytest.mark.parametrize("log", REAL_LOGS, ids=[p.stem for p in REAL_LOGS])
def test_analyzer_line_by_line_equals_analyze_per_file(monkeypatch, log):
    monkeypatch.setattr(growing, "COMMIT_BYTES", 256)
    live = Analyzer()
    _feed_tree(live, log)
    assert live.report().to_dict() == nccl_doctor.analyze(str(log)).to_dict()


def _newest_first(run: Path) -> bool:
    """A run handed over as a newest-first export (logcli's default): a static file, which the batch
    reader turns round; watch reads files as they grow, oldest line first, and never sees one."""
    from nccl_doctor.reading import newest_first

    return any(newest_first(p.read_bytes()[:8192], p.read_bytes()[-8192:])
               for p in run.rglob("*") if p.is_file() and p.name != "expected.json")


def _packed(run: Path) -> bool:
    """A run handed over compressed or bundled (gzip, zstd, bzip2, xz, tar, zip: t71, t164, t171): static files, which watch,
    following plain logs as they grow, does not unpack."""
    return any(p.read_bytes()[:6].startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"BZh", b"\xfd7zXZ"))
               or p.name.endswith((".tar", ".zip"))
               for p in run.rglob("*") if p.is_file() and p.name != "expected.json")


def _csv_export(run: Path) -> bool:
    """A run handed over as a search UI's or a cloud CLI's export (CSV, Splunk or CloudWatch JSON): a
    static file, which the batch reader reads as records (csvexport, jsonexport); watch follows logs as
    they are written, never such an export."""
    from nccl_doctor.csvexport import export_header
    from nccl_doctor.jsonexport import export_kind

    return any(export_header(p.read_bytes()[:8192]) is not None or export_kind(p.read_bytes()[:8192]) is not None
               for p in run.rglob("*") if p.is_file() and p.name != "expected.json")


def _encoded(run: Path) -> set[str]:
    """The encodings of a run's files that are not read as their bytes (text_encoding): UTF-16 (Windows
    PowerShell) or a legacy one (GBK, Shift-JIS, EUC-JP, cp1251, KOI8-R, cp1252)."""
    from nccl_doctor.text_encoding import encoding_of

    return {encoding_of(p.read_bytes()[:8192]) for p in run.rglob("*")
            if p.is_file() and p.name != "expected.json"} - {None}


def _error_files(run: Path) -> bool:
    """A run whose --log-dir (or TORCHELASTIC_ERROR_FILE) holds torchelastic's error.json of a worker: a
    document analyze reads whole (errorfile); watch follows logs and lists such a file as not followed."""
    from nccl_doctor.errorfile import looks_like_file

    return any(p.name == "error.json" and looks_like_file(str(p)) for p in run.rglob("error.json"))


def _page_or_links(run: Path) -> bool:
    """A run handed over as a saved HTML page (t174: read whole by htmlpage), or holding the same file under
    two names (wandb's latest-run and debug.log links, t176: which name a reader keeps is its own)."""
    from nccl_doctor.htmlpage import looks_like

    return any(p.is_symlink() or (p.is_file() and looks_like(p.read_bytes()[:4096]))
               for p in run.rglob("*") if p.name != "expected.json")


ALL_RUNS = sorted(p.parent for p in (Path(__file__).resolve().parent.parent / "fixtures" / "realruns").glob(
    "*/expected.json"))
REAL_RUNS = [p for p in ALL_RUNS if not _newest_first(p) and not _packed(p) and not _csv_export(p) and not _error_files(p)
             and not _page_or_links(p)]


def test_the_pages_and_linked_runs_left_out_of_the_live_comparison_are_t174s_and_t176s():
    assert {p.name.split("_", 1)[0] for p in ALL_RUNS if _page_or_links(p)} == {"t174", "t176"}


def test_the_consoles_in_other_encodings_are_in_the_live_comparison():
    # t140: a latin-1 console; t167: UTF-16 (PowerShell) and cp1252 consoles; t184: a GBK console; t185: GBK,
    # GB18030, Shift-JIS, EUC-JP, cp1251 and KOI8-R consoles: watch decodes them as analyze does
    encoded = [p for p in REAL_RUNS if _encoded(p)]
    assert {p.name.split("_", 1)[0] for p in encoded} == {"t140", "t167", "t184", "t185"}
    assert set().union(*map(_encoded, encoded)) >= {"utf-16", "gb18030", "cp932", "euc_jp", "cp1251", "koi8_r",
                                                      "cp1252"}


def test_some_real_runs_are_newest_first_exports_and_left_out_of_the_live_comparison():
    assert 0 < len([p for p in ALL_RUNS if _newest_first(p)]) <= 4  # (t49's two logcli exports)


def test_the_packed_runs_left_out_of_the_live_comparison_are_t71s_and_t164s():
    # t71: logs handed over as archives; t164: logs written compressed (gzip.open, gzip -c, zstd -c);
    # t171: zip, bzip2, xz and zstd archives and files
    # t177: a GitHub Actions log archive (a zip)
    # t209, t211: a tar.gz of the log folder, each node's logs zipped; t236: per-node log folders as tar.gz and zip;
    # t245: a --log-dir folder as logs.tar.gz, and as logs.zip after grep -v; t254: a log folder zipped by the job script;
    # t263: each node's per-rank files (tail -n 200) packed as logs-<host>.tar.gz; t268: a --log-dir folder and its
    # console by zip -l (CRLF) and by tar czf after sed's CRLF; t277: tail -n 200 of each rank's own file, zipped;
    # t293: two nodes' consoles as job-logs.tar.gz and logs.zip, a --log-dir tree as logs.tar.gz, a split console zipped;
    # t305: each node's log folder by zip -rm, a --log-dir tree by tar czf --remove-files; t317: each rank's own log
    # file only inside logs.tar.gz; t341: a --log-dir tree and its console, renamed, as logs.tar.gz; t353: per-process
    # files packed as logs.tar.gz; t365: each rank's log records as logs.tar.gz, a --log-dir folder as run-logs.tar.gz;
    # t377: per-rank logs by zip -r -l -m (CRLF inside); t389: a console zipped, and two nodes' gzipped consoles in a
    # zip; t401: a zipped --log-dir tree, a tar.gz cut short on a full disk; t407: a renamed zip; t414: a gzipped console;
    # t418: two nodes' run folders zipped, a gzipped console beside a tar.gz; t430: a --log-dir tree by tar czf; t439: a
    # console by gzip -9 and its --log-dir tree by zip -r -m, a gzipped console, a --log-dir tree by tar czf; t449: a
    # --log-dir folder by zip -r -m, two nodes' consoles by gzip -9 -c; t486: a --log-dir tree by tar czf (CR LF inside)
    assert {p.name.split("_", 1)[0] for p in ALL_RUNS if _packed(p)} == {"t71", "t164", "t171", "t177", "t209", "t211",
                                                                         "t236", "t245", "t254", "t263", "t268",
                                                                         "t277", "t293", "t305", "t317", "t341",
                                                                         "t353", "t365", "t377", "t389",
                                                                         "t401", "t407", "t414", "t418", "t430",
                                                                         "t439", "t449", "t486", "t498"}


def test_the_exports_left_out_of_the_live_comparison_are_t153s_kibana_ones_and_t166s():
    assert {p.name for p in ALL_RUNS if _csv_export(p) and not p.name.startswith(("t166_", "t170_", "t175_"))} == {
        "t153_raise_r0_w3_kibana_csv_multiline", "t153_raise_r2_w4_kibana_csv_rows"}
    # t175's two asciinema recordings
    assert {p.name for p in ALL_RUNS if _csv_export(p) and p.name.startswith("t175_")} == {
        "t175_kill_r2_w4_cast_tee", "t175_hang_r2_w3_cast_ctrlc_tee"}
    # t170's two Slack exports
    assert {p.name for p in ALL_RUNS if _csv_export(p) and p.name.startswith("t170_")} == {
        "t170_hang_r3_w4_slack_split", "t170_healthy_w3_slack_tee"}
    assert {p.name for p in ALL_RUNS if p.name.startswith("t166_") and not _csv_export(p)} == set()


@pytest.mark.parametrize("run", REAL_RUNS, ids=[p.name for p in REAL_RUNS])
def test_analyzer_equals_analyze_on_real_runs(monkeypatch, run):
    """Recorded torchrun jobs fed in small commits: tables with @record tracebacks, terminate and
    what() pairs, tracebacks' quoted source lines must come out as the batch reader reads them."""
    from nccl_doctor.analysis import _flight_recorder

    monkeypatch.setattr(growing, "COMMIT_BYTES", 256)
    live = Analyzer()
    files, skipped = discover([str(run)])
    events, logs, dump_skipped = _flight_recorder(files)  # as watch does: dumps are not lines
    rng = random.Random(3)
    for f in logs:
        data = Path(f.real).read_bytes()
        live.feed_bytes(f.path, b"")  # an empty file is an input too
        i = 0
        while i < len(data):
            n = rng.randint(1, 400)
            live.feed_bytes(f.path, data[i:i + n])
            i += n
    live.set_context(skipped=skipped + dump_skipped, events=events)
    assert live.report().to_dict() == nccl_doctor.analyze(str(run)).to_dict()


@pytest.mark.parametrize("scenario,layout", [("MN3", "srun-interleaved"), ("RK1", "kubectl"),
                                             ("NET1", "nccl-debug-file"), ("MN5", "per-rank")])
def test_analyzer_equals_analyze_on_generated_jobs(tmp_path, monkeypatch, scenario, layout):
    monkeypatch.setattr(growing, "COMMIT_BYTES", 4096)
    job = _generate(tmp_path, scenario, 8, layout)
    live = Analyzer()
    _feed_tree(live, job)
    assert live.report().to_dict() == nccl_doctor.analyze(str(job)).to_dict()


def test_analyzer_settles_and_reports_changes_once():
    now = [0.0]
    live = Analyzer(settle=2.0, clock=lambda: now[0])
    lines = _lines("019_mn3_timeout.log")
    for line in lines:
        live.feed("logs/rank-0.log", line)
    assert live.findings() and live.updates() == []  # not settled yet
    now[0] = 1.0
    assert live.updates() == []
    now[0] = 2.5
    first = live.updates()
    assert first and {u.status for u in first} == {"new"}
    now[0] = 10.0
    assert live.updates() == []
    live.forget("logs/rank-0.log")  # a rotated file read again gives the same findings: no new alert
    for line in lines:
        live.feed("logs/rank-0.log", line)
    now[0] = 20.0
    assert live.updates() == []
    assert live.updates(final=True) == []


def test_analyzer_large_file_overlong_and_partial_lines_match_the_batch_reader(tmp_path):
    text = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in REAL_LOGS[:12]) * 8  # > COMMIT_BYTES
    data = b"x" * 200_000 + b"\n" + text + b"y" * 70_000  # an overlong line, and no final newline
    (tmp_path / "rank-0.log").write_bytes(data)
    live = Analyzer()
    _feed_tree(live, tmp_path, random.Random(3))
    assert live.report().to_dict() == nccl_doctor.analyze(str(tmp_path)).to_dict()


# ---- following files -----------------------------------------------------------------------------

def _lines(name: str) -> list[bytes]:
    return _split((REAL / name).read_bytes())


def _check(watcher: Watcher, top: Path) -> None:
    watcher.poll()
    assert watcher.analyzer.report().to_dict() == nccl_doctor.analyze(str(top)).to_dict()


def test_watcher_follows_growth_new_files_rotation_and_truncation(tmp_path):
    log = tmp_path / "rank-0.log"
    a, b = _lines("019_mn3_timeout.log"), _lines("036_mn2_wrong_nic.log")
    watcher = Watcher([str(tmp_path)], Analyzer())
    log.write_bytes(b"".join(a[:3]))
    _check(watcher, tmp_path)
    with open(log, "ab") as fh:  # growth, ending in a partial line
        fh.write(b"".join(a[3:]) + b"partial")
    _check(watcher, tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "rank-1.log").write_bytes(b"".join(b))  # a file created later
    _check(watcher, tmp_path)
    os.rename(log, tmp_path / "rank-0.log.1")  # rotation by rename: a new inode under the old name
    log.write_bytes(b"".join(b[:4]))
    _check(watcher, tmp_path)
    log.write_bytes(b"".join(a[:2]))  # truncated and rewritten (shorter)
    _check(watcher, tmp_path)
    with open(log, "r+b") as fh:  # rewritten in place, longer than what was read: the head differs
        fh.write(b"".join(b))
    _check(watcher, tmp_path)
    (tmp_path / "rank-0.log.1").unlink()  # removed
    _check(watcher, tmp_path)


def test_watcher_reads_compressed_logs(tmp_path):
    import gzip

    with gzip.open(tmp_path / "rank-0.log.gz", "wb") as fh:
        fh.write((REAL / "019_mn3_timeout.log").read_bytes())
    watcher = Watcher([str(tmp_path)], Analyzer())
    _check(watcher, tmp_path)
    _check(watcher, tmp_path)  # unchanged: not read again


# ---- the command ---------------------------------------------------------------------------------

def _watch(*args: str, stdin=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nccl_doctor", "watch", *args], cwd=ROOT, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_watch_once_prints_one_json_line_per_finding(tmp_path):
    for name in ("019_mn3_timeout.log", "036_mn2_wrong_nic.log"):
        shutil.copy(REAL / name, tmp_path / name)
    proc = _watch(str(tmp_path), "--once")
    out, err = proc.communicate(timeout=60)
    expected = nccl_doctor.analyze(str(tmp_path))
    assert proc.returncode == expected.exit_status, err
    lines = [json.loads(ln) for ln in out.splitlines()]
    assert [d["finding"] for d in lines] == expected.to_dict()["findings"]
    assert all(d["status"] == "new" and d["text"].startswith("nccl-doctor: ") for d in lines)


def test_watch_stdin_ends_with_the_stream():
    data = (REAL / "019_mn3_timeout.log").read_text()
    proc = _watch("-", "--interval", "0.1", stdin=subprocess.PIPE)
    out, err = proc.communicate(data, timeout=60)
    assert proc.returncode == 1, err
    rules = [json.loads(ln)["finding"]["rule"] for ln in out.splitlines()]
    assert "MN3" in rules and len(rules) == len(set(rules))


def test_webhook_retries_with_backoff_and_delivers_once(tmp_path, webhook):
    shutil.copy(REAL / "019_mn3_timeout.log", tmp_path / "rank-0.log")
    webhook.fail_next = 2
    proc = _watch(str(tmp_path), "--once", "--webhook", webhook.url)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert out == ""
    expected = nccl_doctor.analyze(str(tmp_path)).to_dict()["findings"]
    assert [d["finding"] for d in webhook.received] == expected
    assert webhook.attempts == len(expected) + 2
    assert all(isinstance(d["text"], str) and d["text"] for d in webhook.received)


def test_webhook_sender_never_blocks_the_caller(webhook):
    webhook.gate.clear()
    sender = WebhookSender(webhook.url, timeout=5)
    for i in range(50):  # the server holds every request until the gate opens: a blocking send
        sender.send({"text": f"alert {i}"})  # would time out (5 s) and lose the alert
    assert webhook.received == []
    webhook.gate.set()
    assert sender.close(wait=20) and sender.delivered == 50
    assert [d["text"] for d in webhook.received] == [f"alert {i}" for i in range(50)]
    with pytest.raises(ValueError):
        WebhookSender("ftp://example.org/")


def _replay_order(src: Path) -> list[tuple[str, bytes]]:
    """The lines of a generated job in the order a real job writes them: every file's lines up to
    its first timestamped line interleaved in proportion (all ranks run side by side), then the
    timestamped lines and those after them by time (the timeout cascade, then the launcher's report).
    """
    stamps = {(e.file, e.line): e.ts for e in nccl_doctor.parse(str(src)) if e.ts is not None}
    order = []
    for path in sorted(p for p in src.iterdir() if p.is_file() and p.suffix != ".json"):
        lines = _split(path.read_bytes())
        first = next((i for i in range(len(lines)) if (str(path), i + 1) in stamps), len(lines))
        t = 0.0
        for i, line in enumerate(lines):
            t = stamps.get((str(path), i + 1), t)
            order.append(((0, i / first, 0) if i < first else (1, t, i), path.name, line))
    order.sort(key=lambda item: item[0])
    return [(name, line) for _, name, line in order]


def test_watch_generated_hang_line_by_line_reaches_webhook_once(tmp_path, webhook):
    # A hang: rank 12 falls behind, the 15 others time out in the collective it never joins (MN3),
    # then torchrun tears the job down; the lagging rank is named by an RK rule.
    src = _generate(tmp_path, "RK3", 16)
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    proc = _watch(str(live_dir), "--webhook", webhook.url, "--interval", "0.2")
    live = Analyzer()  # the library, fed the same lines as they are written
    handles: dict = {}
    try:
        time.sleep(0.5)
        for n, (name, line) in enumerate(_replay_order(src)):  # files appear as their first line is written
            fh = handles.get(name) or handles.setdefault(name, open(live_dir / name, "ab"))  # noqa: SIM115
            fh.write(line)
            fh.flush()
            live.feed(str(live_dir / name), line)
            if n % 10 == 0:
                time.sleep(0.005)
        for fh in handles.values():
            fh.close()
        expected = nccl_doctor.analyze(str(live_dir))
        wanted = {f.rule for f in expected.findings if f.rule == "MN3" or f.rule.startswith("RK")}
        assert "MN3" in wanted and any(r.startswith("RK") for r in wanted), [f.rule for f in expected.findings]

        def delivered() -> set[str]:
            with webhook.lock:
                return {d["finding"]["rule"] for d in webhook.received}

        assert _wait(lambda: wanted <= delivered(), timeout=60), (delivered(), proc.poll())
        time.sleep(2.5)  # longer than the settle time: a second alert would arrive now
    finally:
        for fh in handles.values():
            fh.close()
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err
    with webhook.lock:
        received = list(webhook.received)
    assert {d["finding"]["rule"] for d in received if d["finding"]["rule"] in wanted or
            d["finding"]["rule"].startswith("RK")} == wanted  # no transient RK alert on partial logs
    for rule in wanted:
        got = [d for d in received if d["finding"]["rule"] == rule]
        assert len(got) == 1, (rule, [d["finding"]["summary"] for d in got])
        assert got[0]["status"] == "new" and got[0]["text"]
        final = [_material(f) for f in expected.to_dict()["findings"] if f["rule"] == rule]
        assert _material(got[0]["finding"]) in final
    assert _dicts(live.findings()) == _dicts(expected.findings)
    live.set_context(skipped=discover([str(live_dir)])[1])
    assert live.report().to_dict() == expected.to_dict()


def test_a_long_run_of_lines_with_no_safe_cut_is_checked_once_per_line(monkeypatch):
    """A script's tagged step lines ("[rank 3] step 17/3500 ...": after the tag, continuation-like text
    next to candidate lines) give no safe cut; each commit attempt must look at the new lines only,
    not at all of them again (t85's long runs: 31 s of CPU to follow 1 MB before)."""
    calls = []
    real = growing.is_continuation
    monkeypatch.setattr(growing, "is_continuation", lambda text: calls.append(1) or real(text))
    monkeypatch.setattr(growing, "COMMIT_BYTES", 256)
    live = Analyzer()
    n = 4000
    for i in range(n):
        live.feed_bytes("console.log", f"[rank {i % 4}] step {i // 4}/3500 loss 1.{i:04d} lr 3.00e-03\n".encode())
    assert len(calls) <= 2 * n
