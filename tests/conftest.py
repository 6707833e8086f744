"""Fixtures shared by the unit tests (the claim tests' fixtures come from the headwatch plugin)."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def headwatch_cli(capsys):
    """``headwatch ARGV`` in this process, as a user runs it: (exit code, stdout, stderr), argparse's
    own exits included."""
    from headwatch.cli import main

    def run(*argv: str) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def unwritable_dir(tmp_path):
    """A folder no new file can be made in: mode 0500 for an ordinary user; root writes anywhere,
    so for root the folder is made immutable (chattr +i)."""
    folder = tmp_path / "unwritable"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
        yield folder
        folder.chmod(0o700)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("running as root, and `chattr +i` (needed to make a folder root cannot write) is unavailable")
    try:
        yield folder
    finally:
        subprocess.run([chattr, "-i", str(folder)], capture_output=True)
