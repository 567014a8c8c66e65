"""``python -m nccl_doctor.evidence.dumps_cli PATH...``: print the dump facts (``evidence.dumps``) of
the flight-recorder dumps among PATHs, a debugging aid beside the rules, which are the product."""

from __future__ import annotations

from .dumps import describe, facts_from_events, ranks_text


def main(argv: list[str] | None = None) -> int:
    """Print the dump facts of the dumps among PATHs (a debugging aid; the rules are the product)."""
    import sys

    from ..discover import discover
    from ..flightrec import split_dumps

    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m nccl_doctor.evidence.dumps_cli PATH...", file=sys.stderr)
        return 2
    files, skipped = discover(paths)
    events, _logs, bad = split_dumps(files)
    for s in bad:
        print(f"skipped  {s.path}: {s.reason}")
    facts = facts_from_events(events)
    print(f"dumps    {ranks_text(sorted(facts.dumps)) if facts.dumps else 'none'}"
          + (f" of world {facts.world}" if facts.world else ""))
    for rank, ps in sorted(facts.positions.items()):
        for p in ps:
            print(f"rank {rank:<4} {p.pg_label}: last {describe(p.event) if p.event is not None else p.what}")
    for m in facts.mismatches:
        print(f"mismatch {m.summary} [{m.confidence}]")
    for lg in facts.lags:
        print(f"lag      {lg.summary} [{lg.confidence}]")
    if facts.missing:
        print(f"missing  {facts.missing.summary} [{facts.missing.confidence}]")
    print(f"culprit  {ranks_text(facts.culprits) + ': ' + (facts.summary or '') if facts.culprits else 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
