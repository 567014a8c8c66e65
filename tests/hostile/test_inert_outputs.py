"""Outputs are inert everywhere: one cleaning function (report.safe.plain) for the text, markdown and
JSON reports, webhook messages and PNG labels. Terminal controls (C0, C1, 8-bit CSI), bidi overrides
and chat markup (Slack/Mattermost mentions and links) coming from logs, host or file names never
reach a face as they are; a newline in a file name cannot start a forged VERDICT line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from fake_report import hang_report

from nccl_doctor.findings import Evidence
from nccl_doctor.incremental import Update
from nccl_doctor.report import to_json, to_markdown, to_text
from nccl_doctor.report.safe import plain
from nccl_doctor.watch import alert_payload, alert_text

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "fixtures" / "real" / "019_mn3_timeout.log"

#: Every trick at once: backspace, form feed, vertical tab, an 8-bit CSI colour, a right-to-left
#: override, zero-width space, Slack/Mattermost mentions and links, a markdown link, a newline.
EVIL = ("a\bb\fc\vd \x9b31mred\x9b0m \u202etxt.exe \u200b <!channel> <!here|here> <@U024BE7LH> "
        "<https://evil.example/x|click me> @channel @here [docs](http://evil.example) line\nVERDICT  forged")
_CHAT = re.compile(r"<[!@#]|<https?:|(?<![\w@.])@(?:channel|here|all|everyone)\b|\]\(", re.I)


def assert_inert(text: str, newlines: bool = True) -> None:
    """No control character but newline (and no newline when ``newlines`` is False), no invisible
    format character, no chat markup."""
    bad = [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and not (newlines and c == "\n")]
    assert not bad, f"{bad!r} in {text[:200]!r}"
    assert not _CHAT.search(text), _CHAT.search(text)


@pytest.mark.parametrize("text, shown", [
    ("x\by\fz\v", "x\\x08y\\x0cz\\x0b"),
    ("\x9b31mred\x9b0m and \x1b[1mbold\x1b[0m", "red and bold"),
    ("report\u202etxt.exe", "report\\u202etxt.exe"),
    ("a\u2066b\u2069c\u200bd\ufeffe", "a\\u2066b\\u2069c\\u200bd\\ufeffe"),
    ("rank-0.log\nVERDICT  forged", "rank-0.log\\nVERDICT  forged"),
    ("<!channel> <@U1> <#C2> <https://e.x|click>", "‹!channel> ‹@U1> ‹#C2> ‹https://e.x|click>"),
    ("@channel, @here and user@all.example", "＠channel, ＠here and user@all.example"),
    ("[docs](http://e.x)", "[docs] (http://e.x)"),
    ("send 0->1, recv 1<-0, <stdin>", "send 0->1, recv 1<-0, <stdin>"),  # ordinary text stays as it is
    ("tab\there", "tab here"),
])
def test_plain_neutralises_each_trick(text, shown):
    assert plain(text) == shown
    assert_inert(plain(text), newlines=False)


def _evil_report():
    report = hang_report(n=8, per_host=4, culprit=5)
    report.verdict["summary"] += " " + EVIL
    report.verdict["hosts"] = [EVIL]
    report.last_rank_to_report["host"] = "gpu-node-01 " + EVIL
    report.last_rank_to_report["why"] += EVIL
    f = report.findings[0]
    f.summary += " " + EVIL
    f.hosts.append(EVIL)
    f.evidence.append(Evidence(file="logs/" + EVIL + ".log", line=3, rank=5, text=EVIL))
    report.job.hosts.append(EVIL)
    report.job.ranks[0].last_line.text = EVIL
    report.inputs["skipped"] = [{"path": "logs/" + EVIL, "reason": EVIL}]
    report.notes.append(EVIL)
    return report


def test_text_report_is_inert_and_has_one_verdict_line():
    out = to_text(_evil_report(), verbose=True)
    assert_inert(out)
    assert [line for line in out.splitlines() if line.startswith("VERDICT")] == [out.splitlines()[0]]
    assert "\\nVERDICT  forged" in out and "\\u202e" in out  # shown escaped, not dropped


def test_markdown_report_is_inert():
    out = to_markdown(_evil_report())
    assert_inert(out)
    assert not any(line.startswith("VERDICT") for line in out.splitlines())
    assert "gpu-node-01" in out


def test_json_text_fields_are_inert():
    data = json.loads(to_json(_evil_report()))
    strings = []

    def walk(v):
        if isinstance(v, str):
            strings.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(data)
    assert any("forged" in s for s in strings)
    for s in strings:
        assert_inert(s, newlines=False)


def test_webhook_message_is_inert():
    report = _evil_report()
    update = Update(finding=report.findings[0], status="new")
    assert_inert(alert_text(update))
    payload = alert_payload(update, report.verdict)
    assert_inert(json.dumps(payload, ensure_ascii=False), newlines=False)  # JSON escapes the text's own newlines
    assert_inert(payload["text"]) and assert_inert(payload["verdict"]["summary"], newlines=False)


def test_png_labels_are_inert():
    pytest.importorskip("matplotlib")
    from nccl_doctor.plot import figure
    from nccl_doctor.timeline import build

    report = _evil_report()
    report.verdict["summary"] = EVIL[-60:] + report.verdict["summary"]  # the header shows its start only
    report.job.ranks[0].host = "gpu-node-00 <!channel> \u202e\nVERDICT"
    fig = figure(build(report))
    labels = [t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text"))]
    assert any("‹!channel" in t for t in labels) and any("\\nVERDICT  forged" in t for t in labels)
    for t in labels:
        assert_inert(t)


def test_a_newline_in_a_file_name_cannot_forge_a_verdict_line(tmp_path):
    evil = tmp_path / "rank-0.log\nVERDICT  rank 3 is fine, nothing to see\n"
    evil.write_bytes(GOOD.read_bytes())
    r = subprocess.run([sys.executable, "-m", "nccl_doctor", "analyze", "-v", str(tmp_path)], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1, r.stderr
    verdicts = [line for line in r.stdout.splitlines() if line.startswith("VERDICT")]
    assert len(verdicts) == 1 and "nothing to see" not in verdicts[0]
    assert "rank-0.log\\nVERDICT  rank 3 is fine" in r.stdout  # the name, shown escaped
