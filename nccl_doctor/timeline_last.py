"""The timeline across ranks: statuses when the model gave none, and the last rank to report.

The last rank to report is the report's (the rules' verdict) when there is one; otherwise the
rank that fell furthest behind, else the one that failed while the others waited, else the one
that stopped writing first. When nothing singles a rank out, there is none: we never guess.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .timeline import SILENT_AFTER_S, UNSINGLED, Timeline, row_dict


def _statuses(ranks: pd.DataFrame) -> None:
    """When the model gave no statuses and something went wrong: ranks still ok are silent if they
    stopped writing long before the others, lagging if behind most ranks' progress."""
    free = ranks["status"] == "ok"
    if not free.any():
        return
    present = ranks[~ranks["missing"]]
    if present["last_ts"].notna().sum() >= 2:
        med = float(present["last_ts"].median())
        span = float(present["last_ts"].max() - present["last_ts"].min())
        quiet = ranks["last_ts"] < med - max(SILENT_AFTER_S, 0.25 * span)
        ranks.loc[free & quiet, "status"] = "silent"
        free &= ~quiet
    if len(present) >= 2:
        behind = ranks["progress"] < float(present["progress"].median())
        ranks.loc[free & behind & ~ranks["missing"], "status"] = "lagging"


def _last_rank(tl: Timeline, given: dict | None) -> dict[str, Any] | None:
    ranks = tl.ranks
    if given:
        want = [given["rank"]] if given.get("rank") is not None else list(given.get("ranks") or [])
        rows = ranks.index[ranks["rank"].isin(want)].tolist() if want else []
        if not rows and given.get("host"):
            rows = ranks.index[ranks["host"] == given["host"]].tolist()
        return {"rows": rows, "ranks": want, "host": given.get("host"), "why": given.get("why", ""),
                "source": "verdict"}
    present = ranks[~ranks["missing"]]
    if len(present) < 2 or ranks["status"].isin(UNSINGLED).all():  # nothing singles a rank out: nobody to name
        return None
    lo, hi = present["progress"].min(), present["progress"].max()
    behind = present[present["progress"] == lo]
    if tl.counter is not None and lo < hi and len(behind) * 2 < len(present):
        ahead = int((present["progress"] == hi).sum())
        return _pick(behind, f"fell furthest behind: {tl.progress_label(lo)} while {ahead} "
                             f"rank{'s' if ahead != 1 else ''} reached {tl.progress_label(hi)}")
    failed = present[present["status"] == "failed"]
    if len(failed) and len(failed) * 2 < len(present):
        return _pick(failed, f"failed while {len(present) - len(failed)} others kept going or waited")
    quiet = present[present["status"] == "silent"]
    if len(quiet):
        return _pick(quiet, "stopped writing first")
    gone = ranks[ranks["missing"]]
    if len(gone) and len(gone) * 2 < len(ranks):
        return _pick(gone, "wrote no line at all")
    return None


def _pick(cands: pd.DataFrame, why: str) -> dict[str, Any]:
    order = cands.assign(_t=cands["last_ts"].fillna(np.inf)).sort_values(["_t", "rank"], na_position="last")
    row = int(order.index[0])
    first = row_dict(order.iloc[0])
    rank = first["rank"]
    if len(cands) > 1:
        why += f" ({len(cands) - 1} other{'s' if len(cands) > 2 else ''} with it)"
    return {"rows": [row], "ranks": [rank] if rank is not None else [], "host": first["host"], "why": why,
            "source": "timeline"}


def describe_last(tl: Timeline) -> str:
    """One line naming the last rank to report: who, where it stopped, and why."""
    last = tl.last
    if not last:
        return "no single rank stands out"
    rows = last["rows"]
    if rows:
        r = tl.info(rows[0])
        who = f"rank {r['rank']}" if r["rank"] is not None else r["label"]
        if len(rows) > 1:
            who = "ranks " + ", ".join(str(tl.ranks.loc[i, "label"]).lstrip("r") for i in rows[:6]) + (
                "…" if len(rows) > 6 else "")
        where = f" on {r['host']}" if r["host"] else ""
        label = tl.progress_label(float(r["progress"]))
        at = f", stopped {'' if label.startswith('before') else 'at '}{label}" \
            if last["source"] == "verdict" and not r["missing"] else ""
    else:
        who = "ranks " + ", ".join(map(str, last["ranks"])) if last["ranks"] else "host"
        where, at = (f" on {last['host']}" if last.get("host") else ""), ""
    why = last.get("why") or ""
    rule, _, said = why.partition(": ")
    if said and tl.verdict and said.rstrip(".") in tl.verdict.get("summary", ""):  # no need to say it twice
        why = f"named by {rule}"
    last["who"], last["reason"] = f"{who}{where}", why
    why = f": {why}" if why else ""
    return f"{who}{where}{at}{why}"
