"""``headwatch`` answers --help and --version at once, and every option says what it does and its default."""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

import pytest

from headwatch import __version__
from headwatch.cli import SUBCOMMANDS, build_parser


def test_help_and_version_are_fast_and_import_no_torch():
    code = ("import sys, time; t0 = time.perf_counter(); from headwatch.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('seconds', time.perf_counter() - t0); print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "False False", out.stdout  # nothing heavy is imported to print help
    assert float(lines[-2].split()[1]) < 1.0
    t0 = time.perf_counter()
    version = subprocess.run([sys.executable, "-P", "-m", "headwatch", "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == f"headwatch {__version__}" and time.perf_counter() - t0 < 5


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_option_has_help_and_shows_its_default(command):
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        assert action.help, f"{command} {action.option_strings} has no help text"
        rendered = sub.formatter_class(prog="x")._get_help_string(action)
        assert action.required or "default" in rendered, f"{command} {action.option_strings}: {rendered!r}"
