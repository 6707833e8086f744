"""``headwatch report``: the report's figures, a CSV and a JSON summary, from what is on disk.

Reads each panel model's records without measuring anything (published files for ``reference``
models, ``--reference-dir DIR`` for the models that folder holds, the measurement cache for the
others; see
:meth:`headwatch.fixtures.provider.Provider.cached_records`), judges them with the judge the claim
tests use, and writes into ``--out DIR``::

    DIR/summary.csv              one row per (model, claim): status, key number, judge's message
    DIR/summary.json             the same plus every verdict dict and the missing revisions, and each
                                 population's claims over its members and candidates' places
    DIR/<model>/<figure>.png     bos_fraction, induction_heads, pr_lead, label_grid, ablation
    DIR/population-<name>/*.png  population_induction, population_bos: every member on one figure
    DIR/report.html              the verdict table and figures as one self-contained page

The models are :mod:`headwatch.selection`'s (the options pytest and ``judge`` take), and so is the
policy for what is missing (:data:`~headwatch.selection.MISSING_OPTIONS`): an organism that is not
trained is trained first with ``--train`` (the training step, which measures each checkpoint as it
saves it; else it is listed with that step's command); ``--offline`` asks the Hub nothing (its
branch lists). Nothing else is measured or downloaded: revisions not yet measured are listed with
the command that measures them, and the command exits 2. Exit codes: :data:`headwatch.cli.EXIT_CODES`.
"""
from __future__ import annotations

import argparse
import csv
import io
import logging
import shlex
import sys
from pathlib import Path
from typing import Any

from headwatch import selection
from headwatch.cli import jobs
from headwatch.cli.judge import Judging, chosen_claims, get_organisms
from headwatch.files import check_output_dir, write_atomic, write_json_atomic
from headwatch.formatting import terminal_text

log = logging.getLogger("headwatch.report")

EXAMPLES = """examples:
  headwatch report --panel published --out reports/published          figures, CSV, JSON and report.html
  headwatch report --panel organisms --train --out reports/organisms  train the organisms first if missing
  headwatch report --panel paper --cache-dir /shared/hw --out reports/paper   what measure-panel measured
  headwatch report --panel polypythia --offline --jobs 4 --out reports/pp   a seed suite, four models at a time
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the figures, CSV and JSON")
    selection.add_options(parser.add_argument, selection.PANEL_OPTIONS + selection.MISSING_OPTIONS
                          + selection.CLAIM_OPTIONS)
    parser.add_argument("--no-figures", action="store_true", help="only the CSV and JSON (default: figures too)")
    jobs.add_option(parser)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else ["model", "claim", "status"])
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, text.getvalue())


def report_one(judging: Judging, task: tuple[Any, bool]) -> Any:
    """One model's report (read, judge, its figures when asked, records dropped): the work ``--jobs`` spreads."""
    from headwatch.claims.report_data import model_report  # deferred: numpy, scipy, matplotlib

    model, figures = task
    return model_report(model, judging.provider, figures=figures, release=True, claims=judging.claims)


def run(args: argparse.Namespace) -> int:
    """Write the report files; 1 if a claim fails that a panel did not declare (as judge), 2 on bad
    input or when measurements are missing (listed with the command that measures them)."""
    # Deferred: figures import matplotlib, the claims numpy and scipy, the organisms package torch;
    # `headwatch report --help` need not.
    from headwatch.claims.judge import surprises
    from headwatch.claims.population import population_table
    from headwatch.claims.report_data import (draws_member_figures, population_parts, population_reports,
                                              summary_rows, verdict_cell)
    from headwatch.claims.report_render import fragment, standalone_page, versions

    out = check_output_dir(args.out, "--out")
    claims = chosen_claims(args)
    choices = selection.choices_from_args(args)
    picked = selection.select(choices, progress=False, resolve=False)
    models = picked.resolve(list_branches=not choices.offline)  # branch lists ({ log_spaced = n }): never organisms'
    reader, cache_dir = picked.provider, picked.options.cache_dir
    try:
        untrained = get_organisms(picked)  # --train: the training step measures as it trains
    except Exception as e:
        if not selection.training_failed(e):
            raise
        print(terminal_text(f"headwatch report: {e}", newlines=True), file=sys.stderr)
        return 1

    # one model at a time per process: read, judge, draw, drop its records; --jobs spreads
    # the models over processes, their reports come back here in the panel's order
    draw_members = draws_member_figures(models)
    reports, errors = [], []
    tasks = [(m, not args.no_figures and (m.member is None or draw_members)) for m in models]
    here, there = Judging.of(args, reader, claims)
    with jobs.InOrder(report_one, tasks, jobs.jobs_for(args.jobs, models), context=here, worker_context=there,
                      label=lambda t: t[0].id, progress=jobs.Progress(len(models), log, "reported")) as done:
        for r in done:
            reports.append(r)
            status = " ".join(f"{c}={verdict_cell(c, r).status}" for c in r.verdicts) or (r.error or "no measurements on disk")
            print(terminal_text(f"{r.id}: {len(r.revisions)} revisions; {status}"))
            if r.missing:
                print(terminal_text(f"  not measured yet: {', '.join(r.missing)}"), file=sys.stderr)
            if r.figure_error:
                errors.append(r.figure_error)
            for f in r.figures:
                write_atomic(out / r.id / f"{f.name}.png", f.png)

    pops, pop_figs = population_parts(models, reports, errors) if not args.no_figures else (
        population_reports(models, reports), {})
    for p in pops:
        print(terminal_text(population_table(p), newlines=True))
        for f in pop_figs.get(p.name, []):
            write_atomic(out / f"population-{p.name}" / f"{f.name}.png", f.png)
    rows = summary_rows(reports)
    write_csv(out / "summary.csv", rows)
    write_json_atomic(out / "summary.json", {
        "panels": sorted({m.panel for m in models}), "cache_dir": str(cache_dir), "versions": versions(),
        "rows": rows,
        "models": {r.id: {"repo": r.repo, "panel": r.panel, "revisions": r.revisions,
                          "missing": r.missing, "error": r.error,
                          "verdicts": {c: v.to_dict() for c, v in r.verdicts.items()},
                          "figures": [f"{r.id}/{f.name}.png" for f in r.figures]} for r in reports},
        "populations": {p.name: p.to_dict() for p in pops},
    })
    env = {"panels": sorted({m.panel for m in models}), "cache_dir": str(cache_dir), "device": "none (read from disk)",
           "models": {m.id: {"repo": m.repo, "panel": m.panel, "source": m.source, "revisions": list(m.sorted_revisions)}
                      for m in models}}
    page = standalone_page("headwatch report", fragment(reports, None, env, test_list=False, errors=errors,
                                                        populations=pops, population_figs=pop_figs))
    write_atomic(out / "report.html", page)
    print(f"wrote {out / 'summary.csv'}, {out / 'summary.json'}, {out / 'report.html'}"
          + (f" and {sum(len(r.figures) for r in reports)} figures" if any(r.figures for r in reports) else ""))
    missing = [r for r in reports if r.missing or not r.revisions]
    if missing:
        again = selection.as_argv(choices)
        print(f"{len(missing)} model(s) lack measurements (nothing was measured)", file=sys.stderr)
        if untrained:
            print(f"to train the organisms (measured as they train): {shlex.join(untrained)} (or rerun with --train)",
                  file=sys.stderr)
        print("to measure the rest: " + shlex.join(["headwatch", "judge", *again])
              + f" (or run the claim tests: {shlex.join(['pytest', 'claims', *again])}), then write the report again",
              file=sys.stderr)
        return 2
    crashed = [f"{r.id}: {v.message}" for r in reports for v in r.verdicts.values() if v.status.value == "crashed"]
    if crashed:  # a crash is not a finding: exit 3, after every other claim was judged
        print(f"{len(crashed)} verdict(s) crashed (a claim's judge raised): " + "; ".join(crashed), file=sys.stderr)
        return 3
    return 1 if sum(surprises(r.verdicts) for r in reports) else 0
