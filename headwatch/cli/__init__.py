"""``headwatch`` command line: one subcommand per module of this package.

Each subcommand's module (``measure``, ``measure_panel``, ``organisms``, ``judge``, ``report``,
``panels``) exposes ``add_arguments(parser)``, ``run(args) -> int`` and ``EXAMPLES`` (its --help
epilog); this file only wires them, so adding a subcommand is one module and one line in
:data:`SUBCOMMANDS` (``jobs`` is none: the ``--jobs`` pool ``judge`` and ``report`` share). Only the
chosen subcommand's module is imported, and those modules import torch and transformers inside
``run``, so ``headwatch --help`` and ``--version`` answer at once. The options that pick panels, models, revisions and where
measurements live are :mod:`headwatch.selection`'s, shared with the pytest plugin.

Exit codes: :data:`EXIT_CODES`, the one table (printed once, by ``headwatch --help``; a command's
``--help`` points there). A subcommand returns
0, 1 or 2; bad input anywhere (argparse, a :class:`headwatch.validation.InputError` from any layer,
or the machine refusing: a full disk, a permission, out of memory, as
``headwatch.validation.input_error_from`` classes them) is 2 with one message; any other exception
is 3 with its traceback: a crash is never a failed claim.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
import textwrap
import traceback

from headwatch import __version__
from headwatch.formatting import terminal_text
from headwatch.validation import input_error_from

#: What each exit status means, for every subcommand (the one table: --help prints it, the docs are written from it).
EXIT_CODES = {
    0: "done: claims hold as the panels declare (judge, report), the record written (measure), everything "
       "measured (measure-panel), the organisms trained (organisms)",
    1: "a finding or a failed job: a claim fails that a panel did not declare, or a declared deviation did not "
       "occur (judge, report); a task failed, listed with its reason (measure-panel); training failed (organisms)",
    2: "bad input or usage, nothing computed (the user's input, files or machine: a full disk, a permission, an "
       "environment variable; the message says what was wrong and what to do); or something to judge is "
       "missing: listed with the command that fills it (judge, report)",
    3: "internal error: headwatch crashed (traceback printed), or a claim's judge raised (judge, report: that "
       "verdict is 'crashed', the other claims judged all the same); please report it to the claim's author",
    130: "interrupted: finished measurements are kept; run the same command again to resume",
}
EPILOG = "exit codes:\n" + "\n".join(textwrap.fill(f"{code:>3}  {text}", 100, subsequent_indent=" " * 5)
                                       for code, text in EXIT_CODES.items())
#: A command's --help ends with its examples and this line: the table is printed once, by ``headwatch --help``.
COMMAND_EPILOG = "exit codes: " + ", ".join(f"{code}" for code in EXIT_CODES) + " (what each means: headwatch --help)"
#: What ``headwatch --help`` shows first; each subcommand's module has its own ``EXAMPLES``.
EXAMPLES = """examples:
  headwatch judge --panel published                       verdicts from the author's own measurements (seconds)
  headwatch organisms train                               the training step the organisms panel needs (about 10 min)
  headwatch panels                                        the shipped panels: their models, what they cost
  headwatch COMMAND --help                                a command's options and examples
"""

#: subcommand -> (module, one-line help). "organisms" takes a further verb (train).
SUBCOMMANDS = {
    "measure": ("headwatch.cli.measure", "probe one checkpoint and write its measurement record (JSON)"),
    "measure-panel": ("headwatch.cli.measure_panel", "measure what a panel lacks as parallel tasks (local pool, Ray, Slurm)"),
    "organisms": ("headwatch.cli.organisms", "train the tiny model organisms into the local Hub cache"),
    "judge": ("headwatch.cli.judge", "judge the claims (F1-F5, causal, your own); print and write verdicts"),
    "report": ("headwatch.cli.report", "judge a panel and write its figures, a CSV/JSON summary and report.html"),
    "panels": ("headwatch.cli.panels", "list the shipped panels (models, what a run costs); check a panel file"),
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows every option's default: appends ``(default: X)`` where the help text does not say it; the
    description and the epilog (examples, exit codes) keep their lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default is argparse.SUPPRESS or not action.option_strings:
            return text
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return f"{text} (default: {'on' if action.default else 'off'})"
        if action.default is None or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            return text
        return f"{text} (default: %(default)s)"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported and wired (None: none, for ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="headwatch", formatter_class=HelpFormatter, epilog=EXAMPLES + "\n" + EPILOG,
        description="Hypothesis tests for when attention circuits form during training (arXiv 2606.02378). "
                    "Run `headwatch COMMAND --help` for a command's options; the claim tests run under pytest.")
    parser.add_argument("--version", action="version", version=f"headwatch {__version__}",
                        help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more log lines (-vv: debug); default: progress and results")
    parser.add_argument("-q", "--quiet", action="count", default=0,
                        help="fewer log lines (warnings and errors only); default: progress and results")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = {}  # name -> its subparser: a command's own usage for an argument it does not take
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter,
                           epilog=COMMAND_EPILOG)
        parser.commands[name] = p
        if name != command:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:  # one broken subcommand must not take the others down
            p.set_defaults(_run=lambda _args, e=e, name=name: _unavailable(name, e))
            continue
        module.add_arguments(p)
        p.epilog = getattr(module, "EXAMPLES", "") + "\n" + COMMAND_EPILOG
        p.set_defaults(_run=module.run)
    return parser


def _unavailable(name: str, error: ImportError) -> int:
    print(f"headwatch {name} is unavailable here: {error}", file=sys.stderr)
    return 2


def _command(argv: list[str]) -> str | None:
    """The subcommand named on the command line (the first word that is one; top-level options take no values)."""
    return next((a for a in argv if a in SUBCOMMANDS), None)


class _TerminalFormatter(logging.Formatter):
    """Log lines with control characters escaped (a file's text among them: never raw on a terminal)."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_text(super().format(record), newlines=True)


def setup_logging(verbose: int, quiet: int) -> None:
    """headwatch's log lines on stderr, plain text: INFO by default, DEBUG with -v, WARNING with -q."""
    level = logging.INFO - 10 * verbose + 10 * quiet
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_TerminalFormatter("%(message)s" if level >= logging.INFO else "%(name)s: %(message)s"))
    root = logging.getLogger("headwatch")
    root.handlers[:] = [handler]
    root.setLevel(max(logging.DEBUG, min(level, logging.CRITICAL)))
    root.propagate = False


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command(argv))
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # argparse leaves these to the top-level parser, whose usage is not the command's
        parser.commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    setup_logging(args.verbose, args.quiet)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(EXIT_CODES[130], file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - bad input (2), or a bug in headwatch (3): never a finding
        problem = input_error_from(e)  # InputError, or the user's machine (a full disk, a permission)
        if problem is not None:
            print(terminal_text(f"headwatch {args.command}: error: {problem}", newlines=True), file=sys.stderr)
            return 2
        traceback.print_exc()
        print(f"headwatch {args.command}: internal error (exit 3): this is a bug in headwatch, not a finding "
              f"about the model. Please report it with the command line and the traceback above "
              f"(headwatch {__version__}).", file=sys.stderr)
        return 3
