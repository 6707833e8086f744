"""The pytest plugin is installed for every pytest run in the environment: it must stay out of the
way of anyone else's tests, and act for headwatch's own."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from headwatch import plugin

FOREIGN_TEST = """
import sys

def test_something_else(request):
    assert request.config.pluginmanager.has_plugin("headwatch")  # installed and loaded ...
    assert 1 + 1 == 2

def test_own_fixture_names(revision):
    assert revision == "mine"  # ... yet a fixture of the same name stays theirs
"""

FOREIGN_CONFTEST = """
import json, os, sys
import pytest

@pytest.fixture
def revision():
    return "mine"

def pytest_sessionfinish(session):
    loaded = sorted(m for m in sys.modules if m.startswith("headwatch"))
    with open(os.environ["FOREIGN_MODULES"], "w") as f:
        json.dump(loaded, f)
"""


def _run_foreign(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    import json

    project = tmp_path / "someone-else"
    project.mkdir()
    (project / "test_theirs.py").write_text(FOREIGN_TEST)
    (project / "conftest.py").write_text(FOREIGN_CONFTEST)
    env = {**os.environ, "FOREIGN_MODULES": str(tmp_path / "modules.json"),
           "HEADWATCH_CACHE_DIR": str(tmp_path / "hw-cache"), "HEADWATCH_ORGANISMS_CACHE": str(tmp_path / "org-cache")}
    out = subprocess.run([sys.executable, "-P", "-m", "pytest", "-p", "no:cacheprovider", *args],
                         cwd=project, env=env, capture_output=True, text=True, timeout=300)
    return out, json.loads((tmp_path / "modules.json").read_text())


@pytest.mark.parametrize("args", [(), ("-n", "2"), ("--html", "report.html")], ids=["plain", "xdist", "html"])
def test_plugin_is_inert_for_a_foreign_suite(tmp_path, args):
    out, modules = _run_foreign(tmp_path, *args)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout
    ours = [l for l in (out.stdout + out.stderr).lower().splitlines()
            if "headwatch" in l and not l.startswith("plugins:")]  # pytest's header lists installed plugins
    assert not ours, ours
    # no panel parsed, nothing measured or trained: those modules were never even imported
    assert not {"headwatch.fixtures.panels", "headwatch.fixtures.provider", "headwatch.fixtures.organisms",
                "headwatch.claims.html_report"} & set(modules), modules
    assert not (tmp_path / "hw-cache").exists() and not (tmp_path / "org-cache").exists()
    if "--html" in args:
        html = (tmp_path / "someone-else" / "report.html").read_text()
        assert "headwatch-verdicts" not in html and "when do attention circuits form" not in html
        assert (tmp_path / "someone-else" / "assets").is_dir()  # their report as they asked for it, not self-contained


def test_claim_tests_are_recognised_wherever_headwatch_is():
    assert plugin.is_claim_test(plugin.CLAIMS_DIR / "test_f1_zero_bos_floor.py")
    assert plugin.CLAIMS_DIR.name == "claims" and (plugin.CLAIMS_DIR / "test_causal_ablation.py").is_file()
    assert not plugin.is_claim_test(Path(__file__))
