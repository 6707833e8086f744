"""The torch threads of a test process: one rule for plain pytest and xdist workers (headwatch.threads)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from headwatch.threads import choose_threads


@pytest.mark.parametrize("processes, cores, load, threads", [
    (1, 2, 0.2, 2),   # plain pytest on a quiet 2-core machine: both cores
    (1, 2, 1.9, 2),   # just under the cores: still quiet enough
    (1, 2, 2.0, 1),   # the load fills the cores: threads would spin, one is faster
    (2, 2, 0.0, 1),   # -n 2 on 2 cores: one each
    (2, 16, 0.5, 8),  # -n 2 on 16 cores: eight each
    (2, 16, 20.0, 1),
    (4, 2, 0.0, 1),   # more workers than cores: never 0
    (1, 1, 5.0, 1),
    (1, 8, None, 8),  # no load average on this platform: the share
])
def test_each_process_takes_its_share_and_one_thread_on_a_loaded_machine(processes, cores, load, threads):
    assert choose_threads(processes, cores, load, env={}).threads == threads


def test_an_explicit_thread_count_in_the_environment_wins():
    assert choose_threads(1, 16, 0.0, env={"OMP_NUM_THREADS": "3"}).threads == 3
    assert choose_threads(1, 16, 0.0, env={"HEADWATCH_THREADS": "5", "OMP_NUM_THREADS": "3"}).threads == 5
    assert choose_threads(1, 16, 0.0, env={"OMP_NUM_THREADS": "zero"}).threads == 16  # not a count: the rule


def test_plain_pytest_sets_the_threads_it_chose_and_says_so(tmp_path, monkeypatch):
    """A plain run (no -n) of a headwatch session takes the rule's count, shown in the header."""
    (tmp_path / "test_t.py").write_text("import torch\n\ndef test_threads():\n    print('THREADS', torch.get_num_threads())\n")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("HEADWATCH_THREADS", "3")  # torch alone would take one per core
    out = subprocess.run([sys.executable, "-m", "pytest", "-s", str(tmp_path / "test_t.py"),
                          "--panel", "published", "-p", "no:cacheprovider"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "THREADS 3" in out.stdout and "torch threads 3 (HEADWATCH_THREADS=3)" in out.stdout, out.stdout + out.stderr


def test_a_session_that_never_uses_torch_does_not_import_it(tmp_path, monkeypatch):
    """Judging recorded measurements needs no torch: the count waits for torch's import (none here)."""
    (tmp_path / "test_t.py").write_text("import sys\n\ndef test_torch():\n    print('TORCH', 'torch' in sys.modules)\n")
    monkeypatch.setenv("HEADWATCH_THREADS", "3")
    out = subprocess.run([sys.executable, "-m", "pytest", "-s", str(tmp_path / "test_t.py"),
                          "--panel", "published", "-p", "no:cacheprovider"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "TORCH False" in out.stdout and "torch threads 3 (HEADWATCH_THREADS=3)" in out.stdout, out.stdout + out.stderr


def test_torch_threads_are_set_at_once_where_torch_is_imported():
    import torch

    from headwatch.threads import set_torch_threads

    before = torch.get_num_threads()
    try:
        set_torch_threads(before + 1)
        assert torch.get_num_threads() == before + 1
    finally:
        torch.set_num_threads(before)
