"""What one rank did last: identity, progress, last line(s), its errors and the findings' evidence."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...report.reach import stage_label
from ...timeline import STATUSES, Timeline
from ..text import SEVERITY_STYLE, STATUS_STYLE, join, literal

_GLYPH = {"error": ("✖", "bold red"), "timeout": ("◆", "bold dark_orange"), "warning": ("▲", "yellow"),
          "collective": ("•", "bright_blue"), "stage": ("·", "grey50"), "last": ("┃", "bold")}


def where(file: object, line: object) -> Text:
    return literal(f"{file}:{line}", "underline", 200) if file else Text("", end="")


class RankDetail(VerticalScroll):
    DEFAULT_CSS = """
    RankDetail {
        height: 12;
        border: round $primary 50%;
        border-title-color: $text-muted;
        padding: 0 1;
    }
    RankDetail:focus { border: round $accent; }
    RankDetail > Static { width: 1fr; }
    """
    can_focus = True

    def __init__(self, tl: Timeline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tl = tl
        self.row: int | None = None
        self.host: str | None = None
        self._body = Static(Text("move the cursor over a rank to see its last lines and evidence", style="dim"))
        self._tail: list[tuple[int, str]] = []

    def compose(self):
        yield self._body

    def show_rank(self, row: int | None, host: str | None = None) -> None:
        self.row, self.host, self._tail = row, host, []
        self._refresh()

    def show_tail(self, row: int, lines: list[tuple[int, str]]) -> None:
        if row == self.row:
            self._tail = lines
            self._refresh()

    def show_finding(self, f: dict) -> None:
        """A finding in full: title, summary, evidence lines and the fix (until the cursor moves)."""
        self.row, self.host, self._tail = None, None, []
        self.border_title = f"finding · {f['rule']}"
        out = join((f"{f['rule']} ", "bold"), (f"{f['severity']} ", SEVERITY_STYLE.get(f["severity"], "")),
                   literal(f["title"], "bold", 200), "\n", literal(f["summary"], "", 2000))
        for e in f["evidence"]:
            out.append_text(join("\n  ", where(e.file, e.line), "  ", literal(e.text, "", 300)))
        if f.get("remedy"):
            out.append("\nFIX  ", style="bold green")
            out.append_text(literal(" ".join(f["remedy"].split()), "green", 1200))
        self._body.update(out)

    def _refresh(self) -> None:
        if self.row is not None:
            self.border_title = f"rank detail · {self.tl.ranks.at[self.row, 'label']}"
            self._body.update(self.rank_text(self.row))
        elif self.host is not None:
            self.border_title = "host detail"
            self._body.update(self.host_text(self.host))

    def rank_text(self, row: int) -> Text:
        tl = self.tl
        r = tl.info(row)
        who = f"rank {r['rank']}" if r["rank"] is not None else str(r["label"])
        bits = [b for b in (r["host"], f"pid {r['pid']}" if r["pid"] is not None else None,
                            f"cuda {r['cuda_dev']}" if r["cuda_dev"] is not None else None) if b]
        out = join((who, "bold"), " · ", *([literal(" · ".join(map(str, bits)), "", 200), " · "] if bits else []),
                   (str(r["status"]), STATUS_STYLE.get(str(r["status"]), "")), " · ", stage_label(str(r["stage"])))
        if r["reached_text"]:
            out.append_text(join("\nREACHED  ", literal(r["reached_text"], "", 300)))
        if r["is_last"]:
            out.append("\n★ last to report: ", style="bold magenta")
            out.append_text(literal((tl.last or {}).get("reason", ""), "magenta", 400))
        if r["missing"]:
            out.append("\nexpected in the job but no line from this rank was found", style="bold magenta")
            return out
        out.append("\nLAST LINE  ", style="bold")
        out.append_text(join(where(r["last_file"], r["last_line"]), "  ", literal(r["last_text"], "", 400)))
        if self._tail:
            out.append("\nLAST LINES", style="bold")
            shared = int((tl.ranks["last_file"] == r["last_file"]).sum()) - 1
            if shared > 0:
                out.append(f"  (its own, picked from a file {shared} other ranks write to)", style="dim")
            for no, text in self._tail:
                out.append_text(join("\n  ", (f"{no:>7} ", "dim"), literal(text, "", 400)))
        marks = tl.marks_of(row)
        shown = marks[marks["mark"].isin(["error", "timeout", "warning"])]
        if len(shown):
            out.append("\nERRORS, TIMEOUTS, WARNINGS", style="bold")
            for m in shown.itertuples():
                g, style = _GLYPH[m.mark]
                out.append_text(join("\n  ", (g + " ", style), where(m.file, m.line), "  ", literal(m.text, "", 300)))
        ev = self.evidence(row)
        if ev:
            out.append("\nEVIDENCE", style="bold")
            for f, e in ev:
                out.append_text(join("\n  ", (f"{f['rule']:<5}", SEVERITY_STYLE.get(f["severity"], "")),
                                     where(e.file, e.line), "  ", literal(e.text, "", 300)))
        return out

    def evidence(self, row: int) -> list:
        r = self.tl.info(row)
        rank = r["rank"]
        out = []
        for f in self.tl.findings:
            if row not in f["rows"]:
                continue
            mine = [e for e in f["evidence"] if (rank is not None and e.rank == rank) or e.file == r["last_file"]]
            out.extend((f, e) for e in mine[:4])
        return out

    def host_text(self, host: str) -> Text:
        df = self.tl.ranks
        sub = df[df["host"].fillna("(no host)") == host]
        out = join(("host ", "bold"), literal(host, "bold", 200), f" · {len(sub)} ranks")
        for s in STATUSES:
            grp = sub[sub["status"] == s]
            if len(grp):
                out.append(f"\n{s:<10} {len(grp):>5}  ", style=STATUS_STYLE[s])
                out.append_text(literal(", ".join(grp["label"].astype(str).head(24)) + (" …" if len(grp) > 24 else "")))
        return out
