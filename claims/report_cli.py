"""``headwatch report``: the report's figures, a CSV and a JSON summary, from what is on disk.

Reads each panel model's records without measuring anything (published files for ``reference``
models, ``--reference-dir DIR`` for the models that folder holds, the measurement cache for the
others; see
:meth:`headwatch.fixtures.provider.Provider.cached_records`), judges them with the judge the claim
tests use, and writes into ``--out DIR``::

    DIR/summary.csv              one row per (model, claim): status, key number, judge's message
    DIR/summary.json             the same plus every verdict dict and the missing revisions, and each
                                 population's claims over its members and candidates' places (issue 24)
    DIR/<model>/<figure>.png     bos_fraction, induction_heads, pr_lead, label_grid, ablation
    DIR/population-<name>/*.png  population_induction, population_bos: every member on one figure
    DIR/report.html              the verdict table and figures as one self-contained page

Revisions not yet measured are listed with the command that measures them, and the command exits
2; nothing is trained, downloaded or measured unless ``--train-missing`` says so (then what is
missing is measured first, training organisms and downloading checkpoints as needed).
Exit: 0 written, 2 bad input or measurements missing, 3 internal error (headwatch.cli).
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

from headwatch.files import check_output_dir, write_atomic, write_json_atomic
from headwatch.fixtures.panels import load_panel, select_seeds
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch.names import split_list
from headwatch.paths import default_cache_dir
from headwatch.validation import InputError, argtype, seed_list

log = logging.getLogger("headwatch.report")

DEFAULT_PANEL = "published"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--panel", action="append", default=None, metavar="NAME|FILE",
                        help=f"panel(s) to report (repeatable or comma list; default: {DEFAULT_PANEL})")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the figures, CSV and JSON")
    parser.add_argument("--models", nargs="+", default=None, metavar="M",
                        help="only these models (short names or repo ids; default: every model of the panels)")
    parser.add_argument("--seeds", default=None, metavar="SEEDS", type=argtype(seed_list, "--seeds"),
                        help="only the population members with these seeds, e.g. 1-3,1234 (docs/populations.md; default: every member)")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="headwatch cache to read (default: $HEADWATCH_CACHE_DIR, else .cache/headwatch in a "
                             "checkout, else ~/.cache/headwatch)")
    parser.add_argument("--reference-dir", default=None, metavar="DIR",
                        help="read the records of the models DIR holds from DIR (<model>/<revision>.json, converted "
                             "or written by `headwatch measure --out`) instead of the cache; records without tokens "
                             "take them from the panel (default: none)")
    parser.add_argument("--n-examples", type=argtype("n_examples", "--n-examples"), default=None, metavar="N",
                        help="read measurements made with this many examples, as given to pytest --n-examples "
                             "(default: each panel's own)")
    parser.add_argument("--dtype", default=None, choices=["float32", "float16", "bfloat16"],
                        help="read measurements made in this dtype, as given to pytest --dtype (default: each "
                             "panel model's own)")
    parser.add_argument("--no-figures", action="store_true", help="only the CSV and JSON (default: figures too)")
    parser.add_argument("--train-missing", action="store_true",
                        help="measure what the cache lacks first, training organisms and downloading checkpoints "
                             "as needed (default: list it with the command that fills it, exit 2)")


def _models(args: argparse.Namespace) -> list[Any]:
    models = [m for n in split_list(args.panel or [DEFAULT_PANEL]) for m in load_panel(n).models]
    wanted = split_list(args.models)
    return select_seeds([m for m in models if any(m.matches(w) for w in wanted)] if wanted else models, args.seeds)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else ["model", "claim", "status"])
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, text.getvalue())


def fill_command(args: argparse.Namespace) -> str:
    """This command again with --train-missing: what measures everything it found missing."""
    words = ["headwatch", "report", "--out", args.out]
    for p in args.panel or []:
        words += ["--panel", p]
    if args.models:
        words += ["--models", *args.models]
    if args.seeds:
        words += ["--seeds", ",".join(map(str, args.seeds))]
    for flag, value in (("--cache-dir", args.cache_dir), ("--n-examples", args.n_examples), ("--dtype", args.dtype)):
        if value is not None:
            words += [flag, str(value)]
    return shlex.join([*words, "--train-missing"])


def run(args: argparse.Namespace) -> int:
    """Write the report files; 2 on bad input, 1 when no model has a single measurement on disk."""
    # Deferred: figures and the judge import matplotlib and torch; `headwatch report --help` need not.
    from .figures import model_figures
    from .population import population_table
    from .report_data import model_report, population_parts, population_reports, summary_rows, verdict_cell
    from .report_render import fragment, standalone_page, versions

    out = check_output_dir(args.out, "--out")
    models = _models(args)
    if not models:
        raise InputError(f"none of {args.models} is in the panel(s)")
    cache_dir = Path(args.cache_dir).expanduser().resolve() if args.cache_dir else default_cache_dir()
    if args.reference_dir and not Path(args.reference_dir).is_dir():
        raise InputError(f"--reference-dir {args.reference_dir} is not a folder")
    reader = Provider(ProviderOptions(cache_dir=cache_dir, n_examples=args.n_examples, dtype=args.dtype, progress=False,
                                      reference_dir=args.reference_dir))
    if args.train_missing:  # measure what the cache lacks (training and downloading as needed) first
        for m in models:
            reader.model_records(m)

    reports = [model_report(m, reader) for m in models]
    figures = {}
    for r in reports:
        status = " ".join(f"{c}={verdict_cell(c, r).status}" for c in r.verdicts) or (r.error or "no measurements on disk")
        print(f"{r.id}: {len(r.records)} revisions; {status}")
        if r.missing:
            print(f"  not measured yet: {', '.join(r.missing)}", file=sys.stderr)
        if r.records and not args.no_figures:
            figures[r.id] = model_figures(r.records, r.verdicts, r.id)
            for f in figures[r.id]:
                write_atomic(out / r.id / f"{f.name}.png", f.png)

    errors: list[str] = []
    pops, pop_figs = population_parts(models, reports, errors) if not args.no_figures else (
        population_reports(models, reports), {})
    for p in pops:
        print(population_table(p))
        for f in pop_figs.get(p.name, []):
            write_atomic(out / f"population-{p.name}" / f"{f.name}.png", f.png)
    rows = summary_rows(reports)
    write_csv(out / "summary.csv", rows)
    write_json_atomic(out / "summary.json", {
        "panels": sorted({m.panel for m in models}), "cache_dir": str(cache_dir), "versions": versions(),
        "rows": rows,
        "models": {r.id: {"repo": r.repo, "panel": r.panel, "revisions": [x.revision for x in r.records],
                          "missing": r.missing, "error": r.error,
                          "verdicts": {c: v.to_dict() for c, v in r.verdicts.items()},
                          "figures": [f"{r.id}/{f.name}.png" for f in figures.get(r.id, [])]} for r in reports},
        "populations": {p.name: p.to_dict() for p in pops},
    })
    env = {"panels": sorted({m.panel for m in models}), "cache_dir": str(cache_dir), "device": "none (read from disk)",
           "models": {m.id: {"repo": m.repo, "panel": m.panel, "source": m.source, "revisions": list(m.sorted_revisions)}
                      for m in models}}
    page = standalone_page("headwatch report", fragment(reports, figures, env, test_list=False, errors=errors,
                                                        populations=pops, population_figs=pop_figs))
    write_atomic(out / "report.html", page)
    print(f"wrote {out / 'summary.csv'}, {out / 'summary.json'}, {out / 'report.html'}"
          + (f" and {sum(len(v) for v in figures.values())} figures" if figures else ""))
    missing = [r for r in reports if r.missing or not r.records]
    if missing:
        print(f"{len(missing)} model(s) lack measurements (nothing was trained, downloaded or measured); to measure "
              f"them and write the report again: {fill_command(args)} (or run the claim tests: "
              f"pytest claims {' '.join('--panel ' + shlex.quote(p) for p in split_list(args.panel or [DEFAULT_PANEL]))})",
              file=sys.stderr)
        return 2
    return 0
