"""The rank timeline as a PNG (matplotlib, Agg; imported only when a plot is asked for).

Up to ``RANK_ROWS`` ranks get one row each, grouped by host. Beyond that the picture would be a
smear, so ranks are aggregated: one band per host (or per block of neighbouring hosts) spanning
its ranks, and the ranks that matter drawn on their own rows on top: the last rank to report,
ranks whose status differs from the job's usual one, and ranks that stopped far from the others.
``plot_rows`` returns exactly what is drawn, so tests check the data, not pixels.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any

import numpy as np
import pandas as pd

from .report.safe import plain
from .timeline import RUNNING_X, STATUSES, Timeline, build, fmt_duration, nice_step

RANK_ROWS = 128
GROUP_ROWS = 48
OUTLIERS = 24
STATUS_COLOR = {"failed": "#d62728", "timed_out": "#ff7f0e", "silent": "#9467bd", "lagging": "#17becf",
                "echo": "#bcbd22", "ok": "#2ca02c"}
MARK_STYLE = {  # marker, colour, size, label
    "stage": ("|", "#9a9a9a", 40, "init stage"),
    "collective": (".", "#1f5fbf", 40, "collective (SeqNum)"),
    "last": ("|", "#000000", 90, "last line"),
    "warning": ("^", "#d4b000", 45, "warning"),
    "timeout": ("D", "#ff7f0e", 40, "watchdog timeout"),
    "error": ("X", "#d62728", 70, "error"),
}


def write_png(report: Any, path: str) -> tuple[int, int]:
    """Write the report's rank timeline to ``path`` (PNG); returns its size in pixels."""
    import io

    from .output import write_file

    fig = figure(build(report))
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)  # never by name: matplotlib would add ".png" to it
    write_file(path, png.getvalue())
    w, h = fig.get_size_inches() * 100
    return int(round(w)), int(round(h))


# ---- what is drawn ------------------------------------------------------------------------------


def plot_rows(tl: Timeline) -> pd.DataFrame:
    """One line per drawn row, top to bottom: kind (rank|group), label, host, status, start, end,
    n (ranks in the row), rows (timeline rows), is_last, counts (status -> n, for groups)."""
    xcol = tl.xcol
    span = tl.marks.groupby("row")[xcol].agg(["min", "max"])
    df = tl.ranks.join(span.rename(columns={"min": "start", "max": "end"}))
    if tl.n <= RANK_ROWS:
        return pd.DataFrame([_rank_row(df, i) for i in df.index], columns=_COLUMNS)
    out_rows = set(_outliers(df))
    rows: list[dict] = [_rank_row(df, i) for i in sorted(out_rows, key=lambda i: (not df.at[i, "is_last"], i))]
    rest = df.drop(index=list(out_rows))
    hosts = list(dict.fromkeys(rest["host"].fillna("(no host)")))
    per = 1
    while len(hosts) > per * GROUP_ROWS:  # hosts per band: 1, 2, 4, 8, ...
        per *= 2
    block = {h: i // per for i, h in enumerate(hosts)}
    for _, g in rest.groupby(rest["host"].fillna("(no host)").map(block), sort=True):
        hs = [plain(h, 60) for h in dict.fromkeys(g["host"].fillna("(no host)"))]
        name = hs[0] if len(hs) == 1 else _host_range(hs[0], hs[-1])
        counts = {s: int(n) for s, n in g["status"].value_counts().items()}
        rows.append({"kind": "group", "label": f"{name} ({len(g)})", "host": name,
                     "status": max(counts, key=lambda s: (counts[s], -STATUSES.index(s))),
                     "start": g["start"].min(), "end": g["end"].max(), "median_end": g["end"].median(),
                     "n": len(g), "rows": g.index.tolist(), "is_last": False, "counts": counts})
    return pd.DataFrame(rows, columns=_COLUMNS)


_COLUMNS = ["kind", "label", "host", "status", "start", "end", "median_end", "n", "rows", "is_last", "counts"]


def _rank_row(df: pd.DataFrame, i: int) -> dict[str, Any]:
    r = df.loc[i]
    host = plain(r["host"], 60) if not pd.isna(r["host"]) else "(no host)"
    return {"kind": "rank", "label": f"{r['label']}", "host": host, "status": r["status"], "start": r["start"],
            "end": r["end"], "median_end": r["end"], "n": 1, "rows": [i], "is_last": bool(r["is_last"]),
            "counts": {r["status"]: 1}}


def _outliers(df: pd.DataFrame) -> list[int]:
    """Ranks worth a row of their own, most telling first, at most OUTLIERS."""
    usual = df["status"].mode().iloc[0]
    med = df["end"].median()
    spread = (df["end"].max() - df["end"].min()) or 1.0
    far = (df["end"] - med).abs() > 0.05 * spread
    score = pd.Series(0.0, index=df.index)
    score += df["is_last"] * 100
    score += (df["status"] != usual) * (10 - df["status"].map(STATUSES.index).fillna(len(STATUSES) - 1))
    score += far * (1 + (df["end"] - med).abs() / spread)
    picked = score[score > 0].sort_values(ascending=False, kind="stable")
    return picked.index[:OUTLIERS].tolist()


# ---- drawing ------------------------------------------------------------------------------------


def figure(tl: Timeline):
    """The matplotlib Figure of a timeline (no pyplot: no global state, no display needed)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    rows = plot_rows(tl)
    n = max(1, len(rows))
    header = _header_lines(tl)
    height = min(60.0, 2.6 + 0.24 * n + 0.22 * len(header))
    fig = Figure(figsize=(15, height), dpi=100)
    top = 1 - (0.45 + 0.2 * len(header)) / height
    labels = [_ylabel(r, tl.n > RANK_ROWS) for r in rows.itertuples()]
    left = min(0.3, 0.03 + max(map(len, labels), default=4) * _label_size(n) * 0.62 / 72 / 15)
    ax = fig.add_axes((left, 1.6 / height, 0.86 - left, top - 1.6 / height))
    fig.text(0.01, 1 - 0.15 / height, "\n".join(header), va="top", ha="left", fontsize=10, family="monospace",
             parse_math=False)
    ys = np.arange(n)
    xcol = tl.xcol
    for i, r in enumerate(rows.itertuples()):
        if pd.isna(r.start):
            ax.text(0, i, "  no timestamps" if tl.axis == "time" else "  no lines", va="center", fontsize=7,
                    color="#777777", parse_math=False)
            continue
        color = STATUS_COLOR.get(r.status, "#777777")
        if r.kind == "group":
            ax.barh(i, r.end - r.start, left=r.start, height=0.7, color=color, alpha=0.35, gid=f"group:{i}")
            ax.plot([r.median_end, r.median_end], [i - 0.35, i + 0.35], color=color, lw=2)
            txt = ", ".join(f"{s} {c}" for s, c in sorted(r.counts.items(), key=lambda kv: STATUSES.index(kv[0])))
            ax.text(1.005, i, f"{r.n} ranks: {txt}", va="center", fontsize=7, color="#333333", parse_math=False,
                    transform=ax.get_yaxis_transform())
        else:
            ax.plot([r.start, r.end], [i, i], color=color, lw=2.2, solid_capstyle="butt", gid=f"rank:{r.rows[0]}")
        if r.is_last:
            ax.axhspan(i - 0.5, i + 0.5, color="#c000c0", alpha=0.12, lw=0)
    drawn = _draw_marks(ax, tl, rows, xcol)
    _host_separators(ax, rows)
    ax.set_yticks(ys, labels, fontsize=_label_size(n))
    for lab, r in zip(ax.get_yticklabels(), rows.itertuples(), strict=False):
        lab.set_color("#a000a0" if r.is_last else STATUS_COLOR.get(r.status, "#333333"))
        lab.set_fontweight("bold" if r.is_last else "normal")
    ax.set_ylim(n - 0.5, -0.5)
    _xaxis(ax, tl)
    _annotate(ax, tl, rows)
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    # The legend names what is drawn, nothing else.
    present = {st for r in rows.itertuples() if not pd.isna(r.start) for st in (r.counts or {r.status: 1})}
    handles = [Line2D([], [], color=c, lw=3, label=s) for s, c in STATUS_COLOR.items() if s in present]
    handles += [Line2D([], [], ls="", marker=m, color=c, markersize=7, label=_mark_label(kind, tl))
                for kind, (m, c, _, _lab) in MARK_STYLE.items() if kind in drawn]
    if rows["is_last"].any():
        handles.append(Line2D([], [], color="#c000c0", alpha=0.3, lw=8, label="last rank to report"))
    fig.legend(handles=handles, loc="lower center", ncol=7, fontsize=8, frameon=False)
    return fig


def _mark_label(kind: str, tl: Timeline) -> str:
    if kind == "collective" and tl.counter:
        return "collective (" + ("step" if tl.counter == "step" else "opCount" if tl.counter.startswith("coll:")
                                 else "SeqNum") + ")"
    return MARK_STYLE[kind][3]


def _draw_marks(ax, tl: Timeline, rows: pd.DataFrame, xcol: str) -> set[str]:
    """Every mark of every rank row; for group rows, the median place of each kind of mark.
    Returns the kinds of mark drawn (for the legend)."""
    md = tl.marks
    ypos = {}
    group_of = {}
    for i, r in enumerate(rows.itertuples()):
        if r.kind == "rank":
            ypos[r.rows[0]] = i
        else:
            group_of.update(dict.fromkeys(r.rows, i))
    drawn: set[str] = set()
    single = md[md["row"].isin(ypos.keys())]
    grouped = md[md["row"].isin(group_of.keys())]
    if len(grouped):  # where each rank's last mark of a kind is, median over the group's ranks
        last = grouped.groupby(["row", "mark"], as_index=False)[xcol].max()
        grouped = last.assign(y=last["row"].map(group_of)).groupby(["y", "mark"], as_index=False)[xcol].median()
    for kind, (marker, color, size, _label) in MARK_STYLE.items():
        a = single[single["mark"] == kind]
        xs, yv = a[xcol].to_numpy(dtype=float), a["row"].map(ypos).to_numpy(dtype=float)
        if len(grouped):
            b = grouped[grouped["mark"] == kind]
            xs = np.concatenate([xs, b[xcol].to_numpy(dtype=float)])
            yv = np.concatenate([yv, b["y"].to_numpy(dtype=float)])
        ok = ~np.isnan(xs)
        if ok.any():
            drawn.add(kind)
            ax.scatter(xs[ok], yv[ok], marker=marker, c=color, s=size if len(rows) < 80 else size * 0.6,
                       zorder=3 + list(MARK_STYLE).index(kind), linewidths=1.2 if marker == "|" else 0.4,
                       gid=f"mark:{kind}")
    return drawn


def _annotate(ax, tl: Timeline, rows: pd.DataFrame) -> None:
    """The last rank to report, with why; rule ids beside the few rows a finding names."""
    y_of = {r.rows[0]: i for i, r in enumerate(rows.itertuples()) if r.kind == "rank"}
    if tl.last and tl.last.get("rows"):
        row = tl.last["rows"][0]
        if row in y_of:
            i = y_of[row]
            end = rows.iloc[i]["end"]
            x = 0.0 if pd.isna(end) else float(end)
            lo, hi = ax.get_xlim()
            right = x > lo + 0.75 * (hi - lo)
            ax.annotate(f"last to report: {tl.last.get('who', '')}", xy=(x, i),
                        xytext=(-14 if right else 14, -14 if i else 14), ha="right" if right else "left",
                        textcoords="offset points", fontsize=9, color="#a000a0", fontweight="bold",
                        arrowprops={"arrowstyle": "->", "color": "#a000a0"}, parse_math=False,
                        bbox={"boxstyle": "round", "fc": "white", "ec": "#a000a0", "alpha": 0.9}, zorder=10)
    tags: dict[int, list[str]] = {}
    for f in tl.findings:
        if f["severity"] in ("error", "warning") and 0 < len(f["rows"]) <= 3:
            for row in f["rows"]:
                if row in y_of:
                    tags.setdefault(y_of[row], []).append(f["rule"])
    for i, rules in tags.items():
        start = rows.iloc[i]["start"]
        ax.text(0 if pd.isna(start) else start, i - 0.45, " ".join(rules), fontsize=7, color="#444444",
                va="bottom", parse_math=False, zorder=9)


def _host_separators(ax, rows: pd.DataFrame) -> None:
    hosts = rows["host"].tolist()
    kinds = rows["kind"].tolist()
    start = 0
    for i in range(1, len(hosts) + 1):
        if i == len(hosts) or hosts[i] != hosts[start] or kinds[i] != kinds[start]:
            if kinds[start] == "rank" and i - start > 1 and len(rows) <= RANK_ROWS:
                ax.text(1.005, (start + i - 1) / 2, str(hosts[start]), transform=ax.get_yaxis_transform(),
                        va="center", fontsize=8, color="#555555", parse_math=False)
            if i < len(hosts):
                ax.axhline(i - 0.5, color="#bbbbbb", lw=0.6)
            start = i


def _ylabel(r, aggregated: bool) -> str:
    if r.kind == "group" or not aggregated:  # hosts are named on the right
        return r.label
    return f"{r.label} {r.host}" if r.host and r.host != "(no host)" else r.label


def _label_size(n: int) -> float:
    return 9 if n <= 40 else (7 if n <= 80 else 5.5)


def _xaxis(ax, tl: Timeline) -> None:
    if tl.axis == "time":
        t = tl.marks["t"]
        hi = float(t.max()) if t.notna().any() else 1.0
        from matplotlib.ticker import FuncFormatter, MultipleLocator

        ax.xaxis.set_major_locator(MultipleLocator(nice_step(hi / 10)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: "+" + fmt_duration(v)))
        when = _dt.datetime.fromtimestamp(tl.t0 or 0, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        ax.set_xlabel(f"time since the first timestamp ({when}, as logged)")
        return
    ticks = [(1.0, "started"), (3.0, "init"), (6.0, "init done"), (RUNNING_X, "running")]
    hi = float(tl.marks["x"].max()) if len(tl.marks) else RUNNING_X
    lo = float(tl.marks["x"].min()) if len(tl.marks) else 1.0
    if lo < 0.5:  # a rank that failed before any init stage: its marks sit at 0, in view
        ticks.insert(0, (0.0, "before init"))
    if tl.counter is not None and hi > RUNNING_X:
        k = int(hi - RUNNING_X)
        for v in sorted({1, k, *range(1, k + 1, max(1, k // 6))}):
            ticks.append((RUNNING_X + v, tl.progress_label(RUNNING_X + v).replace(" (", "\n(")))
    ax.set_xticks([x for x, _ in ticks], [lab for _, lab in ticks], fontsize=8)
    ax.set_xlim(-0.6 if lo < 0.5 else 0.5, max(hi, RUNNING_X) + 0.8)
    ax.set_xlabel("logical progress (init stages, then the main counter; no timestamps in these logs)")


#: Characters of one header line (15 in of 10 pt monospace).
HEADER_WIDTH = 170


def _header_lines(tl: Timeline) -> list[str]:
    """The verdict's headline, the last rank and the findings, wrapped at words (never cut inside
    one), two lines at most for each finding."""
    import textwrap

    hosts = int(tl.ranks["host"].nunique())
    counts = ", ".join(f"{s} {n}" for s, n in tl.status_counts().items() if n)
    where = f"{hosts} host{'s' if hosts != 1 else ''}" if hosts else "hosts not in the logs"
    lines = [f"nccl-doctor timeline: {tl.n} rank{'s' if tl.n != 1 else ''} on {where} ({counts})"]
    v = tl.verdict
    lines.append("VERDICT  " + (plain(v.get("headline") or v["summary"], 400) if v else "no verdict from the rules"))
    lines.append("LAST     " + plain((tl.last or {}).get("label", "no single rank stands out"), 400))
    for f in [f for f in tl.findings if f["severity"] in ("error", "warning")][:5]:
        n = len(f["rows"])
        text = plain(f"{f['title']}: {f['summary']} [{n} rank{'s' if n != 1 else ''}]", 2000)
        lines += textwrap.wrap(text, HEADER_WIDTH - 9, initial_indent=f"{f['rule']:<9}", subsequent_indent=" " * 9,
                               max_lines=2, placeholder=" …")
    return [ln if len(ln) <= HEADER_WIDTH else textwrap.shorten(ln, HEADER_WIDTH, placeholder=" …") for ln in lines]


def _host_range(first: str, last: str) -> str:
    """``node-043 … 058``: the second name without the prefix both share (up to its number)."""
    common = os.path.commonprefix([first, last]).rstrip("0123456789")
    return f"{first} … {last[len(common):]}"
