"""Print docs/statistics.md's measured tables (Markdown) from what is on disk; measures nothing.

    .venv/bin/python tools/verdict_tables.py [--panel published] [--panel organisms --cache-dir DIR]

Per model: every verdict in the shared vocabulary with its key figure, bar, interval and method;
F4 under both readings against the paper's table; the sensitivity grid; and, for records with
intervals, the final revision's induction heads and top-1 with their 95% intervals and widths.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from headwatch.claims.builtin.f4_early_convergence import NAME as F4
from headwatch.claims.report_data import model_report, rows_of
from headwatch.formatting import GRID, fmt_interval
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch.names import split_list
from headwatch.paths import default_cache_dir


def verdict_rows(report) -> list[str]:
    out = ["| verdict | status | key | figure, interval | bar | method |", "| --- | --- | --- | --- | --- | --- |"]
    for claim in rows_of([report]):
        v = report.verdicts.get(claim)
        if v is None:
            continue
        f = v.figure
        value = "" if f is None or f.value is None else f"{f.value:.4g} {f.interval_text()}".strip()
        p = f" p = {f.p_value:.3g}" if f is not None and f.p_value is not None else ""
        out.append(f"| {claim} | {v.status.words} | {v.key} | {value}{p} | {'' if f is None or f.bar is None else f'{f.bar:g}'} "
                   f"| {'' if f is None else f.method} |")
    return out


def f4_rows(report) -> list[str]:
    d = report.verdicts[F4].details
    out = ["| reading | recall point | fraction of training (grid) | paper table |", "| --- | --- | --- | --- |"]
    for name, c in (("uniform 50x (decides)", d.computed), ("intermediate 30x, final 50x", d.intermediate)):
        paper = ""
        if d.paper_table is not None:
            reading = "uniform 50x" if c is d.computed else "intermediate 30x"
            paper = ("reproduced" if reading in d.paper_table.reproduced_by else "not reproduced") + \
                f" ({d.paper_table.tokens / 1e9:g}B = {d.paper_table.revision or 'no revision'})"
        if c is None:
            out.append(f"| {name} | never | | {paper} |")
        else:
            out.append(f"| {name} | {c.revision} ({c.tokens / 1e9:.3g}B) | {100 * c.fraction_of_total:.3g}% "
                       f"{fmt_interval(tuple(100 * x for x in c.fraction_interval), ends=GRID)} | {paper} |")
    return out


def grid_rows(report) -> list[str]:
    g = report.grid
    claims = list(g.rows[0].statuses)
    out = ["| setting | " + " | ".join(claims) + " |", "| --- |" + " --- |" * len(claims)]
    for r in g.rows:
        out.append(f"| {r.label} | " + " | ".join(r.statuses[c].replace("_", " ") for c in claims) + " |")
    out.append("| **robust** | " + " | ".join("yes" if g.robust[c] else "**no**" for c in claims) + " |")
    return out


def interval_rows(report) -> list[str]:
    final = report.records[-1]
    if final.intervals is None or not final.intervals.selectivity:
        return [f"({final.no_interval_reason()})"]
    out = ["| head | induction selectivity | 95% interval | width |", "| --- | --- | --- | --- |"]
    for h, sel in final.all_head_selectivity.items():
        if sel["induction"] >= 30:
            lo, hi = final.intervals.selectivity[h]["induction"]
            out.append(f"| {h} | {sel['induction']:.2f} | [{lo:.2f}, {hi:.2f}] | {hi - lo:.2f} |")
    lo, hi = final.intervals.task_top1
    out.append(f"| top-1 | {final.task.top1:.4f} ({final.task.top1_count}/{final.task.n}) | [{lo:.4f}, {hi:.4f}] | {hi - lo:.4f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panel", action="append", default=None)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()
    cache = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    reader = Provider(ProviderOptions(cache_dir=cache, progress=False))
    for m in [m for n in split_list(args.panel or ["published"]) for m in load_panel(n).models]:
        report = model_report(m, reader)
        print(f"\n### {m.id} ({m.repo}, panel {m.panel}, {len(report.records)} revisions)\n")
        if report.error or not report.records:
            print(report.error or f"not measured: {', '.join(report.missing)}")
            continue
        for block in (verdict_rows(report), [""], f4_rows(report), [""], grid_rows(report), [""], interval_rows(report)):
            print("\n".join(block))


if __name__ == "__main__":
    main()
