"""The pytest plugin is installed for every pytest run in the environment: it must stay out of the
way of anyone else's tests, and act for headwatch's own."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from headwatch import plugin, training_session
from headwatch.fixtures.panels import load_panel
from headwatch import model_organisms as organisms  # imported before pytester's in-process runs snapshot sys.modules
from headwatch.model_organisms import runner

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
    loaded = sorted(m for m in sys.modules if m.startswith("headwatch") or m in ("torch", "transformers"))
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


@pytest.mark.slow
@pytest.mark.parametrize("args", [(), ("-n", "2"), ("--html", "report.html")], ids=["plain", "xdist", "html"])
def test_plugin_is_inert_for_a_foreign_suite(tmp_path, args):
    out, modules = _run_foreign(tmp_path, *args)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout
    ours = [l for l in (out.stdout + out.stderr).lower().splitlines()
            if "headwatch" in l and not l.startswith("plugins:")]  # pytest's header lists installed plugins
    assert not ours, ours
    # no panel parsed, nothing measured or trained: those modules (and torch) were never even imported
    assert not {"headwatch.fixtures.panels", "headwatch.fixtures.provider", "headwatch.model_organisms",
                "headwatch.claims.html_report", "torch", "transformers"} & set(modules), modules
    assert not (tmp_path / "hw-cache").exists() and not (tmp_path / "org-cache").exists()
    if "--html" in args:
        html = (tmp_path / "someone-else" / "report.html").read_text()
        assert "headwatch-verdicts" not in html and "when do attention circuits form" not in html
        assert (tmp_path / "someone-else" / "assets").is_dir()  # their report as they asked for it, not self-contained


def test_claim_tests_are_recognised_wherever_headwatch_is():
    assert plugin.is_claim_test(plugin.CLAIMS_DIR / "test_f1_zero_bos_floor.py")
    assert plugin.CLAIMS_DIR.name == "claims" and (plugin.CLAIMS_DIR / "test_causal_ablation.py").is_file()
    assert not plugin.is_claim_test(Path(__file__))


FAKE_STEP = """
import sys
from headwatch.model_organisms.runner import Progress, READY_LINE
print("the step was started as: " + " ".join(sys.argv[1:]), flush=True)
print(READY_LINE, flush=True)
for step, eta in ((0, None), (1500, 0.0)):
    print(Progress("checkpoint", "gptneox", 0, step=step, total=1500, revision=f"step{step}", checkpoint=1 if step == 0 else 10,
                   checkpoints=10, elapsed=step / 10, eta=eta).to_line(), flush=True)
print(Progress("done", "gptneox", 0, elapsed=150.0).to_line(), flush=True)
"""


@pytest.fixture
def fake_step(monkeypatch, tmp_path):
    """Organisms 'missing' (all but OLMo), and a training step that reports two checkpoints instead of
    training; returns the models the plugin asked to train, per call."""
    from headwatch import selection

    asked = []

    def missing(picked, models):
        models = list(models)
        asked.append(sorted(m.id for m in models))
        return [runner.TrainingJob(m.organism.family, m.organism.seed, tmp_path) for m in models
                if m.organism.family != "olmo"]

    (tmp_path / "fake_step.py").write_text(FAKE_STEP)
    monkeypatch.setattr(selection, "missing_organisms", missing)
    monkeypatch.setattr(selection, "step_argv", lambda command: [sys.executable, str(tmp_path / "fake_step.py"), *command])
    return asked


CLAIM_DEMO = """
import os
import pytest

pytestmark = pytest.mark.headwatch

def test_model(model_entry):
    with open(os.environ["DEMO_ORDER"], "a") as f:
        f.write(model_entry.id + "\\n")
"""


def _demo(pytester, monkeypatch, tmp_path, *args: str):
    """The claim-test contract's demo module over the organisms and published panels, in this process."""
    monkeypatch.setenv("DEMO_ORDER", str(tmp_path / "order"))
    pytester.makepyfile(test_demo=CLAIM_DEMO)
    ini = pytester.makeini("[pytest]\n")  # not the repository's (its addopts want xdist)
    return pytester.runpytest_inprocess("-c", str(ini), "--rootdir", str(pytester.path), "-p", "no:xdist",
                                        "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                                        "--panel", "organisms,published", *args)


def test_with_train_the_step_starts_for_the_collected_tests_and_its_lines_reach_the_terminal(
        pytester, monkeypatch, tmp_path, fake_step):
    """Without xdist: once collected, the training step for the organisms the collected tests need
    (only those: -k deselects OLMoE), its progress through pytest's terminal reporter; the tests that
    read an organism run after the others."""
    result = _demo(pytester, monkeypatch, tmp_path, "--train", "-k", "not olmoe")
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert fake_step == [["organism-gptneox", "organism-olmo"]], fake_step
    assert "headwatch: training model organisms" in out
    assert ("the step was started as: headwatch organisms train --panel organisms --models organism-gptneox "
            "--models organism-olmo") in out
    assert "organism gptneox seed 0: step 0/1500 (checkpoint 1/10, step0), 0 s elapsed, ETA ?" in out
    assert "organism gptneox seed 0: step 1500/1500 (checkpoint 10/10, step1500), 2 min 30 s elapsed, ETA 0 s" in out
    assert "organisms trained in" in out
    order = (tmp_path / "order").read_text().split()
    assert order[:2] == ["pythia-1b", "olmo-1b"] and set(order[2:]) == {"organism-gptneox", "organism-olmo"}, order


def test_without_train_a_missing_organism_is_refused_before_any_test(pytester, monkeypatch, tmp_path, fake_step):
    result = _demo(pytester, monkeypatch, tmp_path, "-k", "not olmoe")
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4, err[-3000:]
    assert "headwatch organisms train --panel organisms --models organism-gptneox" in err
    assert "or rerun with --train" in err and not (tmp_path / "order").exists()
    assert "the step was started" not in result.stdout.str()


def test_collecting_only_trains_nothing(pytester, monkeypatch, tmp_path, fake_step):
    result = _demo(pytester, monkeypatch, tmp_path, "--train", "--collect-only", "-q")
    assert result.ret == 0 and fake_step == [] and "the step was started" not in result.stdout.str()


REGISTERED = """
import os
from headwatch import training_session

def pytest_collection_finish(session):
    found = session.config.pluginmanager.get_plugin(training_session.TRAINING_PLUGIN)
    with open(os.environ["DEMO_REGISTERED"], "w") as f:
        f.write(type(found).__name__)
"""


@pytest.mark.parametrize("train", [False, True], ids=["no-train", "train"])
def test_the_training_session_is_registered_only_with_train(pytester, monkeypatch, tmp_path, train):
    """The plugin only wires: the training step's handling (headwatch.training_session) is an object of
    its own, which the plugin registers only when --train asks for it (as xdist its DSession with -n)."""
    monkeypatch.setenv("DEMO_REGISTERED", str(tmp_path / "registered"))
    pytester.makeconftest(REGISTERED)
    pytester.makepyfile(test_demo=CLAIM_DEMO)
    ini = pytester.makeini("[pytest]\n")
    result = pytester.runpytest_inprocess("-c", str(ini), "-p", "no:xdist", "-p", "no:cacheprovider",
                                          "-p", "no:hypothesispytest", "--panel", "published", "--collect-only",
                                          *(["--train"] if train else []))
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert (tmp_path / "registered").read_text() == ("TrainingSession" if train else "NoneType")
    assert not [name for name, _ in vars(plugin).items() if name in ("TrainingStep", "YIELD_NICENESS")]


ENDLESS_STEP = """
import os, signal, sys
from headwatch.model_organisms.runner import READY_LINE
from headwatch.processes import watch_parent
watch_parent()  # as `headwatch organisms train` does first
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(130))  # as it takes SIGTERM: as Ctrl-C, exit 130
with open(os.environ["STEP_PID"], "w") as f:
    f.write(str(os.getpid()))
print(READY_LINE, flush=True)
while True:
    signal.pause()  # trains until it is stopped
"""

INTERRUPTED_DEMO = """
import pytest

pytestmark = pytest.mark.headwatch

def test_model(model_entry):
    raise KeyboardInterrupt  # the session is interrupted while the step trains
"""


def test_an_interrupted_session_stops_its_step_though_sigint_was_inherited_ignored(
        pytester, monkeypatch, tmp_path, fake_step, sigint_ignored, pid_alive):
    """Interrupted, the session stops its training step, started with SIGINT inherited ignored (pytest
    run from a background job, issue 49): the plugin's stop is SIGTERM, which the step takes as
    Ctrl-C; before, a SIGINT that never arrived, then SIGKILL after a minute."""
    (tmp_path / "fake_step.py").write_text(ENDLESS_STEP)
    monkeypatch.setenv("STEP_PID", str(tmp_path / "step.pid"))
    pytester.makepyfile(test_demo=INTERRUPTED_DEMO)
    ini = pytester.makeini("[pytest]\n")
    with sigint_ignored():
        result = pytester.runpytest_inprocess("-c", str(ini), "--rootdir", str(pytester.path), "-p", "no:xdist",
                                              "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                                              "--panel", "organisms", "--train", "-k", "not olmoe",
                                              no_reraise_ctrlc=True)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "training interrupted" in out, out[-3000:]  # exit 130: stopped, not killed after the grace
    assert not pid_alive(int((tmp_path / "step.pid").read_text()))


XDIST_CONTROLLER_STAND_IN = """
from types import SimpleNamespace
import pytest
from headwatch import plugin

IDS = ["claims/test_f1_zero_bos_floor.py::test_f1_no_bos_head_in_layers_0_1[organism-olmoe@step0]",
       "claims/test_causal_ablation.py::test_causal_ablation_of_induction_circuit[organism-gptneox]",
       "claims/test_f2_bos_shape.py::test_negative_control_f2_fails[step_for_declared_ramp]"]

@pytest.hookimpl(trylast=True)
def pytest_configure(config):  # what xdist's controller calls as each worker finishes collecting
    for _ in range(2):  # two workers: the step is started once
        plugin.pytest_xdist_node_collection_finished(node=SimpleNamespace(config=config), ids=IDS)
"""


def test_the_xdist_controller_starts_the_step_for_what_the_workers_collected(pytester, fake_step):
    """Under xdist the controller sees the workers' collected test ids, before any test is handed out."""
    ini = pytester.makeini("[pytest]\n")
    pytester.makeconftest(XDIST_CONTROLLER_STAND_IN)
    result = pytester.runpytest_inprocess("-c", str(ini), "--panel", "organisms", "--train", "-p", "no:xdist",
                                          "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    assert fake_step == [["organism-gptneox", "organism-olmoe"]], result.stdout.str()[-3000:]
    assert "organism gptneox seed 0: done, 2 min 30 s in this run" in result.stdout.str()


def test_a_test_process_yields_the_cpu_while_organisms_train(tmp_path):
    """Before its first test not marked mostly_waits, a process of a session whose organisms a step is
    training (holds their locks) lowers its own CPU priority (the step's children keep theirs); where
    nothing trains it keeps its own. Asked in a forked child: this process's niceness must not change."""
    from headwatch.fixtures.panels import load_panel

    olmo = [m for m in load_panel("organisms").models if m.organism.family == "olmo"]

    def niceness_after(*marks: str) -> int:
        """How much the niceness of a process rose over tests with these marks (in order)."""
        session = training_session.TrainingSession(config=None, chosen=SimpleNamespace(
            models=olmo, provider=SimpleNamespace(organism_key=lambda m: (m.organism.family, m.organism.seed, tmp_path))))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # a test process before its tests
            try:
                before = os.nice(0)
                for mark in marks:
                    item = SimpleNamespace(get_closest_marker=lambda name, mark=mark: name == mark or None)
                    session.pytest_runtest_setup(item)
                    os.write(w, f"{os.nice(0) - before} ".encode())
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r) as f:
            return [int(x) for x in f.read().split()]

    assert niceness_after("") == [0]  # nothing trains
    locks = runner.hold_locks([runner.TrainingJob("olmo", 0, tmp_path)])  # a step holds olmo's lock
    try:
        risen = min(19 - os.nice(0), training_session.YIELD_NICENESS)  # a process already niced rises to 19 at most
        assert niceness_after("", "") == [risen, risen]  # once, before the first test
        assert niceness_after("mostly_waits", "mostly_waits", "", "mostly_waits") == [0, 0, risen, risen]
    finally:
        for f in locks.values():
            f.close()


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_suite_runs_with_xdist_disabled():
    """pyproject's addopts pass --dist load; with -p no:xdist the root conftest accepts it."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                          "--collect-only", "tests/test_verdict.py"], cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "unrecognized arguments" not in out.stderr, out.stdout[-2000:] + out.stderr[-2000:]


# ---- exit status: bad input stops pytest before any test (exit 4); a crash or bad input met while measuring is an ERROR, never a FAILED claim ----


def _runpytest(pytester, *args: str):
    """The claim tests run in this process, with an ini of their own (the repository's addopts want xdist)."""
    ini = pytester.makeini("[pytest]\n")
    return pytester.runpytest_inprocess(str(plugin.CLAIMS_DIR), "-c", str(ini), "--rootdir", str(pytester.path),
                                        "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                                        *args)


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


OPTIONS = {
    # case: (arguments, what the message must name); {panel} a local panel, {tmp} the test's folder
    "n-examples 0": (["--n-examples", "0"], "--n-examples"),
    "n-examples text": (["--n-examples", "abc"], "--n-examples"),
    "device gpu": (["--device", "gpu", "--panel", "{panel}"], "--device"),
    "device cuda without a GPU": (["--device", "cuda", "--panel", "{panel}"], "cuda"),
    "models unknown": (["--panel", "published", "--models", "nope"], "nope"),
    "revisions unknown": (["--panel", "published", "--revisions", "step7"], "step7"),
    "dtype": (["--dtype", "float64"], "--dtype"),
    "panel empty": (["--panel", ""], "--panel"),
    "panel unknown": (["--panel", "nope"], "nope"),
    "cache dir a file": (["--cache-dir", "{tmp}/afile", "--panel", "{panel}"], "afile"),
    "cache dir a file, from the environment": (["--panel", "{panel}"], "afile"),
    "reference dir missing": (["--panel", "published", "--reference-dir", "{tmp}/nope"], "nope"),
}


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_pytest_options_are_usage_errors(case, pytester, tmp_path, local_panel_file, monkeypatch, never_trains):
    """Every bad option or environment value stops pytest before any test (exit 4), naming it; no traceback."""
    if case == "device cuda without a GPU" and _has_cuda():
        pytest.skip("needs a machine without a CUDA device (this one has one, so --device cuda is valid)")
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / ("afile" if "environment" in case else "cache")))
    monkeypatch.setenv("HEADWATCH_ORGANISMS_CACHE", str(tmp_path / "org"))
    args, says = OPTIONS[case]
    result = _runpytest(pytester, *(a.replace("{panel}", str(local_panel_file)).replace("{tmp}", str(tmp_path))
                                    for a in args))
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4, (result.ret, out[-3000:])
    assert says in out and "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    assert " passed" not in out and " failed" not in out, out[-3000:]


def _subprocess_pytest(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """pytest in a child (Hub variables are read when huggingface_hub is imported: this process has)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HEADWATCH_", "PYTEST_", "HF_"))}
    clean.update(OMP_NUM_THREADS="1", HF_HOME=str(tmp_path / "hf-home"), HEADWATCH_CACHE_DIR=str(tmp_path / "cache"),
                 **env)
    return subprocess.run([sys.executable, "-m", "pytest", str(plugin.CLAIMS_DIR), "-q", "-n", "0", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), *args],
                          cwd=str(Path(__file__).resolve().parents[1]), env=clean, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_no_train_errors_with_the_command_that_trains(tmp_path):
    """``--no-train`` (the default), as users run it: a missing organism stops pytest before any test
    (exit 4) naming the training step's command; nothing is FAILED, nothing trains."""
    r = _subprocess_pytest(tmp_path, "--panel", "organisms", "--models", "organism-olmo", "--no-train", "-k", "F2",
                           env={"HEADWATCH_ORGANISMS_CACHE": str(tmp_path / "org")})
    out = r.stdout + r.stderr
    assert r.returncode == 4, (r.returncode, out[-3000:])
    assert "headwatch organisms train --panel organisms --models organism-olmo" in out, out[-3000:]
    assert " failed" not in out and " passed" not in out, out[-3000:]
    assert not (tmp_path / "org").exists() or not any((tmp_path / "org").rglob("*.safetensors"))


@pytest.mark.slow
def test_bad_input_in_a_fixture_is_an_error_with_exit_4(tmp_path):
    """Offline, a Hub checkpoint missing from the Hub cache is found while measuring: an ERROR saying how to
    download it (exit 4), not a failed claim and not a crash."""
    r = _subprocess_pytest(tmp_path, "--panel", "paper", "--models", "pythia-1b", "-k", "F2",
                           env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")})
    out = r.stdout + r.stderr
    assert r.returncode == 4, (r.returncode, out[-3000:])
    assert "hf download" in out and " failed" not in out and "INTERNALERROR" not in out, out[-3000:]


# ---- the claim-test contract (a subprocess pytest run, as users run it): ids, filters, xdist groups, run info ----


DEMO_TEST = """
import json, os
import pytest

pytestmark = pytest.mark.headwatch  # the claim-test contract, outside headwatch.claims

def test_model(model_entry, model_records):
    tokens = [r.tokens_seen for r in model_records]
    assert tokens == sorted(tokens) and len(model_records) == len(model_entry.revisions)
    assert model_entry.expect.bos_shape in ("ramp", "step")

def test_revision(model_entry, revision, revision_record, request):
    assert revision_record.revision == revision and revision in model_entry.revisions
    mark = request.node.get_closest_marker("xdist_group")
    with open(os.environ["DEMO_LOG"], "a") as f:
        f.write(json.dumps([model_entry.id, revision, os.environ.get("PYTEST_XDIST_WORKER"), mark.args[0]]) + "\\n")
"""


DUMP_PLUGIN = """
import json, os
from headwatch.plugin import run_info

def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        with open(os.environ["DEMO_INFO"], "w") as f:
            json.dump(run_info(session.config).to_dict(), f)
"""


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_demo.py").write_text(DEMO_TEST)
    (tmp_path / "demo_dump.py").write_text(DUMP_PLUGIN)
    env = {**os.environ, "DEMO_LOG": str(tmp_path / "log"), "DEMO_INFO": str(tmp_path / "info.json"),
           "PYTHONPATH": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "demo_dump", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), *args, str(tmp_path / "test_demo.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.mark.slow
def test_contract_ids_groups_and_run_info_under_xdist(tmp_path):
    """Under xdist (pyproject's --dist load) every (model, revision) runs once, carries its model's
    xdist_group mark, and the workers' run info is merged on the controller."""
    out = run_pytest(tmp_path, "--panel", "published", "-n", "2", "-q", "--cache-dir", str(tmp_path / "c"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "22 passed" in out.stdout
    rows = [json.loads(line) for line in (tmp_path / "log").read_text().splitlines()]
    assert len(rows) == 20
    assert {(m, r) for m, r, _, _ in rows} == {(m.name, r) for m in load_panel("published").models for r in m.revisions}
    for model in ("pythia-1b", "olmo-1b"):
        assert {g for m, _, _, g in rows if m == model} == {model}
    info = json.loads((tmp_path / "info.json").read_text())
    assert info["panels"] == ["published"] and info["device"] == "auto"
    assert set(info["models"]) == {"pythia-1b", "olmo-1b"}
    assert info["counts"] == {"reference": 20}


@pytest.mark.slow
def test_contract_test_ids_and_filters(tmp_path):
    out = run_pytest(tmp_path, "--panel", "published", "--collect-only", "-q", "-p", "no:xdist",
                     "--models", "olmo-1b", "--revisions", "step5000-tokens10B,step1454000-tokens3048B")
    assert out.returncode == 0, out.stdout + out.stderr
    ids = re.findall(r"::(test_\w+\[[^\]]+\])", out.stdout)
    assert ids == ["test_model[olmo-1b]", "test_revision[olmo-1b@step5000-tokens10B]",
                   "test_revision[olmo-1b@step1454000-tokens3048B]"]


def test_model_scope_of_test_ids():
    from headwatch.training_session import model_scope

    ids = ["pythia-1b", "pythia-1b-deduped", "olmo-1b", "t.m"]
    assert model_scope("c/test_f1.py::test_f1[pythia-1b@step3000]", ids) == "pythia-1b"
    assert model_scope("c/test_f2.py::test_f2[pythia-1b]", ids) == "pythia-1b"
    assert model_scope("c/test_f2.py::test_f2[pythia-1b-deduped@step1]", ids) == "pythia-1b-deduped"
    assert model_scope("c/test_f5.py::test_f5[0.1-olmo-1b]", ids) == "olmo-1b"
    assert model_scope("c/test_f5.py::test_f5[olmo-1b-0.2]", ids) == "olmo-1b"
    assert model_scope("c/test_x.py::test_x[t.m@step2]", ids) == "t.m"
    assert model_scope("c/test_x.py::test_x[xolmo-1b]", ids) is None
    assert model_scope("c/test_x.py::test_x", ids) is None


def test_run_info_merges_worker_reports():
    from headwatch.fixtures.runinfo import EntryInfo, RunInfo

    a, b = RunInfo(panels=["organisms"], device="auto"), RunInfo(panels=["organisms"], device="auto")
    a.add_entry(EntryInfo("m1", "org/m1", "step1", "computed", worker="gw0"))
    a.add_entry(EntryInfo("m1", "org/m1", "step1", "hit", worker="gw0"))  # same entry again: kept once
    b.add_entry(EntryInfo("m2", "org/m2", "step1", "hit", worker="gw1"))
    b.identical_weights.append({"model": "m2", "revisions": ["step1", "step2"], "weights_hash": "ab"})
    merged = RunInfo()
    for w in (a, b):
        merged.merge(json.loads(json.dumps(w.to_dict())))  # what travels through xdist
    assert merged.panels == ["organisms"] and merged.device == "auto"
    assert merged.counts() == {"computed": 1, "hit": 1}
    assert merged.identical_weights == b.identical_weights
