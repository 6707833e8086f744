"""Both readings of the causal check, side by side, computed from measurement records.

Each record (one ``headwatch measure`` output, or a cache entry) is judged twice by the causal claim,
once with SPEC's query-position reading deciding and once with the copyable-position reading
(``causal_reading = "copyable"``), and one markdown row is printed per record: what each reading
measured, its test's p-values and its own verdict. Nothing is asserted: docs/real-models.md shows
the table this prints.

    headwatch measure --model DIR --revision REV --n-examples 256 --out smollm2.json
    python benchmarks/causal_readings.py smollm2-135m=smollm2.json gemma3-270m=gemma.json
"""
from __future__ import annotations

import argparse
import sys

from headwatch.claims.builtin.causal_ablation import judge_causal
from headwatch.formatting import fmt_pct
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import Expectations

HEADER = ("| model | N (query) | query: baseline / circuit / matched random (top-1 counts) | query: bar p, control p "
          "| query verdict | copyable positions | copyable: baseline / circuit / matched random | circuit share "
          "[95% interval] | copyable: bar p, control p | copyable verdict |")


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def row(name: str, record: MeasurementRecord) -> str:
    """One markdown row: the record judged with each reading deciding."""
    if record.tokens_seen is None:  # one revision: its place on the token axis does not matter here
        record.tokens_seen = 0.0
    query = judge_causal([record], Expectations())
    copyable = judge_causal([record], Expectations(causal_reading="copyable"))
    d = query.details
    counts = " / ".join(f"{c[0]}/{c[1]}" if c else "-" for c in (d.baseline_count, d.circuit_count, d.random_count))
    c = copyable.details.copyable
    if c is None:
        copy_cells = ["not measured"] * 4
    else:
        interval = "" if c.share_interval is None else f" [{fmt_pct(c.share_interval[0], '.1f')}, {fmt_pct(c.share_interval[1], '.1f')}]"
        copy_cells = [f"{c.positions} ({c.n_sequences} sequences)",
                      " / ".join(fmt_pct(x, ".1f") if x is not None else "-"
                                 for x in (c.baseline_top1, c.circuit_top1, c.random_top1)),
                      f"{fmt_pct(c.share_of_baseline, '.1f')}{interval}", f"{_p(c.p_vs_bar)}, {_p(c.p_vs_random)}"]
    n = record.settings.n_examples if record.settings else "-"
    return "| " + " | ".join([
        f"{name} ({', '.join(d.circuit_heads) or 'no circuit'})", str(n), counts, f"{_p(d.p_vs_bar)}, {_p(d.p_vs_random)}",
        query.status.words, *copy_cells[:3], copy_cells[3], copyable.status.words]) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", metavar="NAME=RECORD.json", help="a label and a measurement record")
    args = parser.parse_args(argv)
    print(HEADER)
    print("|" + " --- |" * HEADER.count(" | ") + " --- |")
    for item in args.records:
        name, sep, path = item.partition("=")
        if not sep:
            parser.error(f"{item!r}: expected NAME=RECORD.json")
        print(row(name, MeasurementRecord.from_json(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
