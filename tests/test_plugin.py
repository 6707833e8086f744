"""The pytest plugin is installed for every pytest run in the environment: it must stay out of the
way of anyone else's tests, and act for headwatch's own."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from headwatch import plugin
from headwatch.fixtures import organisms  # imported before pytester's in-process runs snapshot sys.modules
from headwatch.fixtures.organisms import runner

pytest_plugins = ["pytester"]

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


@pytest.fixture
def fake_training(monkeypatch, tmp_path):
    """Organisms that are 'missing', and a runner that reports two checkpoints each instead of training."""
    calls = []
    monkeypatch.setattr(organisms, "missing_jobs",
                        lambda triples: [runner.TrainingJob(f, s, tmp_path) for f, s, _ in triples if f != "olmo"])

    def fake(jobs, *, threads, parallel, report):
        calls.append(([j.name for j in jobs], threads, parallel))
        for j in jobs:
            for step, eta in ((0, None), (1500, 0.0)):
                report(runner.Progress("checkpoint", j.family, j.seed, step=step, total=1500, revision=f"step{step}",
                                       checkpoint=1 if step == 0 else 10, checkpoints=10, elapsed=step / 10, eta=eta))
            report(runner.Progress("done", j.family, j.seed, elapsed=150.0))

    monkeypatch.setattr(runner, "train_in_subprocesses", fake)
    return calls


def test_first_run_trains_what_the_collected_claim_tests_need_and_says_so(pytester, fake_training):
    """Without xdist: at the end of collection, one line per organism checkpoint through pytest's
    terminal reporter; only organisms whose tests were collected (and are missing) are trained."""
    ini = pytester.makeini("[pytest]\n")  # not the repository's (its addopts want xdist)
    result = pytester.runpytest_inprocess(str(plugin.CLAIMS_DIR), "-c", str(ini), "--rootdir", str(pytester.path),
                                          "--collect-only", "-q", "--panel", "organisms",
                                          "-k", "not olmoe and not test_claim_across", "-p", "no:xdist", "-p", "no:cacheprovider",
                                          "-p", "no:hypothesispytest")
    out = result.stdout.str()
    # olmo cached; olmoe deselected (and the population tests, which need every member of "organisms")
    assert fake_training == [(["gptneox seed 0"], 1, 1)], fake_training
    assert "headwatch: training model organisms" in out
    assert "organism gptneox seed 0: step 0/1500 (checkpoint 1/10, step0), 0 s elapsed, ETA ?" in out
    assert "organism gptneox seed 0: step 1500/1500 (checkpoint 10/10, step1500), 2 min 30 s elapsed, ETA 0 s" in out


XDIST_CONTROLLER_STAND_IN = """
from types import SimpleNamespace
import pytest
from headwatch import plugin

IDS = ["claims/test_f1_zero_bos_floor.py::test_f1_no_bos_head_in_layers_0_1[organism-olmoe@step0]",
       "claims/test_causal_ablation.py::test_causal_ablation_of_induction_circuit[organism-gptneox]",
       "claims/test_f2_bos_shape.py::test_negative_control_f2_fails[step_for_declared_ramp]"]

@pytest.hookimpl(trylast=True)
def pytest_configure(config):  # what xdist's controller calls as each worker finishes collecting
    config.option.numprocesses = 2
    for _ in range(2):  # two workers: trained once
        plugin.pytest_xdist_node_collection_finished(node=SimpleNamespace(config=config), ids=IDS)
"""


def test_xdist_controller_trains_before_the_workers_start(pytester, fake_training):
    """Under xdist the controller sees the workers' collected test ids and trains what they need."""
    ini = pytester.makeini("[pytest]\n")
    pytester.makeconftest(XDIST_CONTROLLER_STAND_IN)
    result = pytester.runpytest_inprocess("-c", str(ini), "--collect-only", "-q", "--panel", "organisms",
                                          "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    assert fake_training == [(["gptneox seed 0", "olmoe seed 0"], 1, 2)], result.stdout.str()
    assert "organism olmoe seed 0: done, 2 min 30 s in this run" in result.stdout.str()


FORMATION_PANEL = """
[[models]]
name = "pythia-formed"
repo = "EleutherAI/pythia-1b"
source = "reference"
revisions = ["step1", "step4", "step16", "step64", "step256", "step512", "step3000", "step10000",
             "step38000", "step143000"]
tokens = { per_step = 2097152 }
[models.expect]
bos_shape = "ramp"
[models.expect.formation]
min_induction_heads_final = 3
none_at_first = true
formed_within = { revisions = ["step4", "step10000"] }
"""


def test_formation_runs_first_and_only_for_models_that_declare_it(tmp_path):
    """claims/test_formation.py is ordered before every claim test, and parametrised only over the
    models whose panel declares formation (the published ones do not: one skip naming why)."""
    panel = tmp_path / "formed.toml"
    panel.write_text(FORMATION_PANEL)
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "pytest", "claims", "--collect-only", "-q", "-p", "no:cacheprovider"]
    mine = subprocess.run(cmd + ["--panel", str(panel)], cwd=root, capture_output=True, text=True, timeout=600)
    ids = [l for l in mine.stdout.splitlines() if "::" in l]
    assert ids[0] == "claims/test_formation.py::test_organism_formed_as_declared[pythia-formed]", ids[:3]
    assert [i for i in ids if "test_organism_formed_as_declared" in i] == ids[:1]
    published = subprocess.run(cmd + ["--panel", "published"], cwd=root, capture_output=True, text=True, timeout=600)
    assert "claims/test_formation.py::test_organism_formed_as_declared[none]" in published.stdout
    run = subprocess.run([sys.executable, "-m", "pytest", "claims/test_formation.py", "-q", "-p", "no:cacheprovider",
                          "-rs", "--panel", "published"], cwd=root, capture_output=True, text=True, timeout=600)
    assert "no selected model declares [models.expect.formation]" in run.stdout, run.stdout[-2000:]


def test_hypothesis_profiles():
    """Derandomized, with no example database, under CI (root conftest.py); .ci/run sets CI."""
    from hypothesis import settings

    ci = settings.get_profile("ci")
    assert ci.derandomize is True and ci.database is None
    expected = "ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev")
    assert settings.default == settings.get_profile(expected)
    assert 'export CI="${CI:-1}"' in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()


def test_the_suite_runs_with_xdist_disabled():
    """pyproject's addopts pass --dist loadgroup; with -p no:xdist the root conftest accepts it."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                          "--collect-only", "tests/test_verdict.py"], cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "unrecognized arguments" not in out.stderr, out.stdout[-2000:] + out.stderr[-2000:]
