"""The training step the organisms' claims depend on: the one ``ensure_organisms`` every front end
calls (headwatch.selection), the exact command it names, the bound on what one run trains, and
``headwatch organisms train`` itself. The runner under it (children, locks, the step process) is
tests/test_organisms.py's; the plugin's use of it, tests/test_plugin.py's."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from headwatch import selection, validation
from headwatch.model_organisms import runner
from headwatch.validation import InputError


def chosen(**choices) -> selection.Selection:
    return selection.select(selection.Choices(**choices), resolve=False)


@pytest.fixture
def fake_training(monkeypatch, tmp_path):
    """Every organism of the selection 'missing' (into tmp_path) but OLMoE's, and a runner that records
    what it was handed, and how many of its organisms' locks were held then, instead of training."""
    calls = []

    def missing(picked, models):
        return [runner.TrainingJob(m.organism.family, m.organism.seed, tmp_path) for m in models
                if m.organism.family != "olmoe"]

    def train(jobs, *, threads, parallel, report, locks):
        calls.append({"jobs": [j.name for j in jobs], "threads": threads, "parallel": parallel,
                      "held": runner.training_now([(j.family, j.seed, j.cache_dir) for j in jobs])})
        for job in list(locks):
            locks.pop(job).close()

    monkeypatch.setattr(selection, "missing_organisms", missing)
    monkeypatch.setattr(runner, "train_in_subprocesses", train)
    monkeypatch.delenv(validation.MAX_ORGANISMS_ENV, raising=False)
    return calls


def test_nothing_missing_nothing_to_do(monkeypatch, never_trains):
    monkeypatch.setattr(selection, "missing_organisms", lambda picked, models: [])
    step = selection.ensure_organisms(chosen(panels=("organisms",)), train=False)
    assert step.missing == [] and step.running is None
    assert step.command == ["headwatch", "organisms", "train", "--panel", "organisms"]
    assert selection.ensure_organisms(chosen(panels=("published",)), train=False).command == []  # no organism at all


def test_missing_without_train_is_refused_naming_the_exact_command(fake_training, tmp_path):
    """The refusal names the step's command with the user's options it depends on (the measurement
    cache the step measures into, the probe settings of the cache keys), and only the models needed."""
    picked = chosen(cache_dir=str(tmp_path / "hw"), n_examples=500, device="cpu", revisions=("step0",))
    with pytest.raises(selection.OrganismsNotTrained) as refused:
        selection.ensure_organisms(picked, train=False, model_ids={"organism-olmo"})
    command = ["headwatch", "organisms", "train", "--panel", "organisms", "--models", "organism-olmo",
               "--n-examples", "500", "--cache-dir", str(tmp_path / "hw")]
    assert refused.value.command == command
    message = str(refused.value)
    assert "olmo seed 0" in message and " ".join(command) in message and "or rerun with --train" in message
    assert "about " in message and " on " in message  # what it would cost
    assert fake_training == []


def test_train_runs_the_step_here_with_every_lock_held(fake_training):
    said, locked = [], []
    step = selection.ensure_organisms(chosen(panels=("organisms",)), train=True, say=said.append,
                                      on_locked=lambda: locked.append(True))
    assert step.missing == ["gptneox seed 0", "olmo seed 0"] and locked == [True]
    assert fake_training == [{"jobs": ["gptneox seed 0", "olmo seed 0"], "threads": 1, "parallel": 2, "held": 2}]
    assert said[0].startswith("training 2 organism(s) into ") and "about " in said[0]


def test_more_organisms_than_one_run_trains_are_refused_unless_confirmed(fake_training, monkeypatch):
    """The bound of RUN_BOUNDS, as --n-examples': an estimate, refused above it, confirmed by the environment."""
    many = [runner.TrainingJob("olmo", seed, Path("/nonexistent")) for seed in range(21)]
    monkeypatch.setattr(selection, "missing_organisms", lambda picked, models: many)
    monkeypatch.setattr(runner, "hold_locks", lambda jobs: {})
    with pytest.raises(InputError, match=r"21 organisms to train \(about .* h .*\), more than the 20 .*"
                                         r"HEADWATCH_MAX_ORGANISMS=21"):
        selection.ensure_organisms(chosen(panels=("organisms",)), train=True)
    assert fake_training == []
    monkeypatch.setenv(validation.MAX_ORGANISMS_ENV, "21")
    selection.ensure_organisms(chosen(panels=("organisms",)), train=True)
    assert len(fake_training[0]["jobs"]) == 21
    monkeypatch.setenv(validation.MAX_ORGANISMS_ENV, "many")
    with pytest.raises(InputError, match="HEADWATCH_MAX_ORGANISMS: got 'many'"):
        selection.ensure_organisms(chosen(panels=("organisms",)), train=True)


def test_a_population_needs_its_members():
    picked = chosen(panels=("organisms-seeds",))
    pop = {m.member.population for m in picked.models if m.member is not None}.pop()
    members = selection.organism_models(picked, {pop})
    assert members and {m.id for m in members} == {m.id for m in picked.models if m.member is not None}


# ---- headwatch organisms train ----------------------------------------------------------------------


@pytest.mark.parametrize("argv, says", [
    (["--seed", "3"], "--seed: is spelled --seeds"),
    (["--seeds", "0-9999"], "30,000 organisms to train"),
    (["--family", "olmo", "--panel", "organisms"], "--family trains by recipe"),
])
def test_organisms_train_refusals(argv, says, headwatch_cli, tmp_path, monkeypatch, never_trains):
    monkeypatch.delenv(validation.MAX_ORGANISMS_ENV, raising=False)
    r = headwatch_cli("organisms", "train", *argv, "--organisms-cache-dir", tmp_path / "org")
    assert r.code == 2 and says in r.err, (r.code, r.err[-2000:])
    if "--seeds" in argv:
        assert "HEADWATCH_MAX_ORGANISMS=30000" in r.err and " h " in r.err  # confirmable, with its estimate


def test_organisms_train_trains_a_panels_organisms(headwatch_cli, tmp_path, fake_training):
    r = headwatch_cli("organisms", "train", "--panel", "organisms", "--models", "organism-olmo",
                      "--organisms-cache-dir", tmp_path / "org", "--cache-dir", tmp_path / "hw")
    assert r.code == 0, r.err[-2000:]
    assert [c["jobs"] for c in fake_training] == [["olmo seed 0"]]


def _started_training(command: list[str], sigint_ignored) -> tuple[runner.TrainingStep, list]:
    """The real step, as the plugin starts it, from a process that ignores SIGINT (a background job
    of a non-interactive shell), once its child has started training."""
    seen: list = []
    with sigint_ignored():
        step = runner.TrainingStep(selection.step_argv(command), report=seen.append, say=lambda line: None).start()
    deadline = time.monotonic() + 120
    while not any(p.event == "start" for p in seen) and step.running and time.monotonic() < deadline:
        time.sleep(0.1)  # its child has started training
    assert any(p.event == "start" for p in seen), seen
    return step, seen


@pytest.mark.slow
def test_organisms_train_interrupted_stops_its_child_and_leaves_no_lock(tmp_path, sigint_ignored):
    """The real step, as the plugin starts it, with SIGINT inherited ignored: ready once it holds the
    lock; stopped (SIGTERM, taken as Ctrl-C) it stops its training child (exit 130), and the
    organism's lock dies with it. A rerun takes the lock and trains again; killed (SIGKILL), it takes
    its child with it: the lock (which only the child holds by then) is free within seconds."""
    command = ["headwatch", "organisms", "train", "--family", "gptneox", "--organisms-cache-dir", str(tmp_path / "org"),
               "--cache-dir", str(tmp_path / "hw")]
    key = [("gptneox", 0, tmp_path / "org")]
    step, _ = _started_training(command, sigint_ignored)
    assert runner.training_now(key) == 1
    error = step.stop()
    assert isinstance(error, runner.TrainingCancelled), error
    assert runner.training_now(key) == 0 and runner.wait_until_trained("gptneox", 0, tmp_path / "org") < 1

    rerun, _ = _started_training(command, sigint_ignored)
    assert runner.training_now(key) == 1
    os.kill(rerun.pid, signal.SIGKILL)
    assert "exit -9" in str(rerun.wait())
    deadline = time.monotonic() + 30
    while runner.training_now(key) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert runner.training_now(key) == 0, "the killed step's child still trains"
