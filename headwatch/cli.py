"""``headwatch`` command line: one subcommand per job, each owned by the module that does it.

Each owning module exposes ``add_arguments(parser)`` and ``run(args) -> int``; this file only
wires them, so adding a subcommand touches one line here.
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> (module, one-line help). "organisms" takes a further verb (train).
SUBCOMMANDS = {
    "measure": ("headwatch.measure_cli", "probe one checkpoint and write its measurement record (JSON)"),
    "organisms": ("fixtures.organisms.cli", "train the tiny model organisms into the local Hub cache"),
    "judge": ("claims.judge_cli", "judge claims F1-F5 and the causal check; print and write verdicts"),
    "report": ("claims.report_cli", "build the figures and a CSV/JSON summary from cached measurements"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headwatch", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:  # one broken subcommand must not take the others down
            p.set_defaults(_run=lambda _args, e=e, name=name: _unavailable(name, e))
            continue
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _unavailable(name: str, error: ImportError) -> int:
    print(f"headwatch {name} is unavailable here: {error}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted: finished measurements are kept; run the same command again to resume",
              file=sys.stderr)
        return 130
