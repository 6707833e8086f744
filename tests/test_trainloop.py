"""headwatch inside the training loop (issues 28, 34): records written while training are the ones the
provider reads afterwards (same key, same numbers, no model loaded), and measuring changes nothing
about the training (bit-identical weights, optimizer state and random streams, same process); a
killed and resumed run keeps every revision once; under mixed precision and in a user's autocast
block the records equal a reload; compiled and DDP-wrapped models are measured as the module itself,
on rank 0 only; a moved run is judged from the records it carries; bad input is refused before any
compute; each checkpoint's figures reach the Trainer's log; the default cost.

Bit-identity is legitimate here: both runs of a comparison are in one process, on one thread count.
"""
from __future__ import annotations

import dataclasses
import json
import random
import shutil
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from headwatch_testing import trainruns

from headwatch.fixtures import loading
from headwatch.training import training_child
from headwatch.fanout.tasks import is_cached
from headwatch.hubcache import cached_revisions, repo_folder
from headwatch.model_organisms import ORGANISMS, DataSpec, runner
from headwatch.model_organisms.train import train
from headwatch.fixtures.panels import load_panel, parse_panel
from headwatch.fixtures.provider import Provider, ProviderOptions, measurement_key
from headwatch.fixtures.runstore import store_dir
from headwatch.training.trainloop import MEASURED_IN, MeasurePlan, TrainingProbe, planned_probe, training_untouched
from headwatch.probes.record import ProbeSettings
from headwatch.validation import InputError

TINY_DATA = DataSpec(seq_len=24, batch_size=4, vocab_lo=4, vocab_hi=64, span_lo=4, span_hi=10)
#: A probe a 64-token tiny model can answer in well under a second.
TINY_PROBE = trainruns.PROBE


def tiny_organism(monkeypatch, family: str):
    """The family's real recipe shrunk to seconds (as tests/test_organisms.py), installed as ORGANISMS[family]."""
    recipe = dataclasses.replace(ORGANISMS[family].recipe, n_layers=2, d_model=32, n_heads=2, vocab_size=64,
                                 intermediate_size=32, data=TINY_DATA, total_steps=6, checkpoints=(0, 2, 6))
    monkeypatch.setitem(ORGANISMS, family, dataclasses.replace(ORGANISMS[family], recipe=recipe, probe=TINY_PROBE))
    return recipe


def organism_panel_model(tmp_path, family: str):
    text = (f'[[models]]\nname = "o"\nsource = "organism"\n[models.organism]\nfamily = "{family}"\nseed = 0\n'
            f'cache_dir = "{tmp_path / "organisms"}"\n')
    return parse_panel(text, name="trainloop", path=tmp_path / "trainloop.toml").models[0]


def no_model_loaded(monkeypatch):
    """Make loading or measuring a checkpoint fail the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded: the record should have come from the cache")

    monkeypatch.setattr(loading, "load_checkpoint", refuse)
    return refuse


def cost_lines(lines: list[str]) -> list[str]:
    """The probe's cost lines among its reported lines (one per measurement)."""
    return [line for line in lines if " measured in " in line]


def same_numbers(a, b) -> None:
    assert a.all_head_selectivity == b.all_head_selectivity and a.pr == b.pr and a.task == b.task
    assert [(x.name, x.heads, x.metrics) for x in a.ablations] == [(x.name, x.heads, x.metrics) for x in b.ablations]
    assert a.intervals == b.intervals and a.sink == b.sink and a.settings == b.settings
    assert a.tokens_seen == b.tokens_seen and a.n_examples_valid == b.n_examples_valid


# ---- the organisms: measured in the training process, read back with no model loaded -----------------


@pytest.mark.parametrize("family", ["gptneox", "olmo", "olmoe"])
def test_organism_records_written_in_training_are_the_providers(family, tmp_path, monkeypatch):
    recipe = tiny_organism(monkeypatch, family)
    pm = organism_panel_model(tmp_path, family)
    options = ProviderOptions(cache_dir=tmp_path / "hw")
    lines = []
    probe = planned_probe(MeasurePlan.from_dict(Provider(options).measure_plan(pm)), report=lines.append)
    log = train(recipe, seed=0, cache_dir=tmp_path / "organisms", progress=False, probe=probe)
    assert log.probe_seconds > 0 and sorted(probe.measured) == ["step0", "step2", "step6"]
    costs = cost_lines(lines)
    assert len(costs) == 3 and "first measurement" in costs[0] and all("% of the" in line for line in costs[1:])

    # Reloading each checkpoint measures exactly what training measured (same process, same threads).
    reloaded = Provider(ProviderOptions(cache_dir=tmp_path / "hw-reload")).model_records(pm)

    no_model_loaded(monkeypatch)
    provider = Provider(dataclasses.replace(options,
                                            measure_fn=lambda *a, **k: pytest.fail("measured again")))
    records = provider.model_records(pm)
    assert [e.status for e in provider.run.entries] == ["hit", "hit", "hit"]
    for rec, again in zip(records, reloaded):
        same_numbers(rec, again)
        assert rec.provenance["measured_in"] == MEASURED_IN and "measured_in" not in again.provenance
        for k in ("weights_hash", "identity", "commit", "resolved_from", "probe_version", "panel", "training"):
            assert rec.provenance[k] == again.provenance[k], k
    assert records[-1].ablations or records[-1].provenance["ablation_note"]  # the final revision's ablations ran
    assert records[0].settings.ablation is False and records[-1].settings.ablation is True


def test_organism_training_is_bit_identical_with_the_probe(tmp_path, monkeypatch):
    recipe = tiny_organism(monkeypatch, "gptneox")  # head dropout: its own generator, hooks in train mode only
    pm = organism_panel_model(tmp_path, "gptneox")
    probe = planned_probe(MeasurePlan.from_dict(Provider(ProviderOptions(cache_dir=tmp_path / "hw")).measure_plan(pm)),
                          report=lambda line: None)
    train(recipe, seed=0, cache_dir=tmp_path / "with", progress=False, probe=probe)
    train(recipe, seed=0, cache_dir=tmp_path / "without", progress=False)
    repo = "headwatch-organisms/gptneox-seed0"
    assert cached_revisions(tmp_path / "with", repo) == cached_revisions(tmp_path / "without", repo)


def test_a_plan_measures_only_the_revisions_its_panel_judges(tmp_path, monkeypatch):
    """A panel naming a subset of the checkpoints: those are measured, with the ablations at its own final."""
    recipe = tiny_organism(monkeypatch, "olmo")
    pm = organism_panel_model(tmp_path, "olmo").with_revisions(["step0", "step2"])
    plan = MeasurePlan.from_dict(json.loads(json.dumps(Provider(ProviderOptions(cache_dir=tmp_path / "hw")).measure_plan(pm))))
    assert plan.settings["step2"].ablation and not plan.settings["step0"].ablation
    probe = planned_probe(plan, report=lambda line: None)
    train(recipe, seed=0, cache_dir=tmp_path / "organisms", progress=False, probe=probe)
    assert sorted(probe.measured) == ["step0", "step2"]
    commit = cached_revisions(tmp_path / "organisms", "headwatch-organisms/olmo-seed0")["step2"]
    key = measurement_key(pm, "step2", commit, ProviderOptions(cache_dir=tmp_path / "hw"))
    assert probe.measured["step2"].path == probe.cache.path_for(key)


def test_the_training_child_measures_and_reports_the_probes_share(tmp_path, monkeypatch, capsys):
    tiny_organism(monkeypatch, "olmoe")
    pm = organism_panel_model(tmp_path, "olmoe")
    plan = Provider(ProviderOptions(cache_dir=tmp_path / "hw")).measure_plan(pm)
    args = ["--family", "olmoe", "--seed", "0", "--cache-dir", str(tmp_path / "organisms"),
            "--measure-plan", json.dumps(plan)]
    assert training_child.main(args) == 0
    events = [p for line in capsys.readouterr().out.splitlines() if (p := runner.Progress.from_line(line))]
    checkpoints = [e for e in events if e.event == "checkpoint"]
    assert len(checkpoints) == 3 and all(e.probe_seconds > 0 for e in checkpoints) and checkpoints[0].probe_share is None
    assert all(0 < e.probe_share < 1 for e in checkpoints[1:])
    assert "measured in training" in checkpoints[0].describe() and "% of the time" in events[-1].describe()
    assert events[-1].event == "done" and events[-1].probe_seconds > 0
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "hw"))
    no_model_loaded(monkeypatch)
    provider.model_records(pm)
    assert {e.status for e in provider.run.entries} == {"hit"}


# ---- not perturbing a hand-written loop ---------------------------------------------------------------


def test_training_untouched_restores_modes_grad_attention_and_every_rng():
    from headwatch_testing.tiny import tiny_model

    model = tiny_model("gpt_neox").train()
    model.gpt_neox.layers[0].eval()  # a mixed state must come back as it was
    modes = [m.training for m in model.modules()]
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    before = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    with training_untouched(model, "eager"):
        assert model.config._attn_implementation == "eager" and not torch.is_grad_enabled()
        model.eval()
        torch.manual_seed(1), np.random.seed(1), random.seed(1)
        torch.rand(3), np.random.rand(3), random.random()
    assert [m.training for m in model.modules()] == modes and torch.is_grad_enabled()
    assert model.config._attn_implementation == "sdpa"
    assert torch.equal(torch.get_rng_state(), before[0])
    assert (np.random.get_state()[1] == before[1]).all() and random.getstate() == before[2]


def _dropout_run(tmp_path, probe: TrainingProbe | None, steps: int = 8):
    """A hand-written loop whose every step draws from torch's global RNG (dropout), with AdamW."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                             intermediate_size=64, max_position_embeddings=128, hidden_dropout=0.1,
                                             attention_dropout=0.1)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rows = torch.randint(4, 64, (4, 24), generator=torch.Generator().manual_seed(1))
    for step in range(steps + 1):
        if probe is not None and step % 2 == 0:
            folder = tmp_path / "run" / f"step{step}"
            if step % 4 == 0:  # every other one saved; the rest measured without a checkpoint
                model.save_pretrained(folder)
            probe.measure(model, f"step{step}", tokens_seen=step * rows.numel(), final=step == steps)
        if step == steps:
            break
        loss = model(input_ids=rows, labels=rows).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model, opt, (torch.rand(4), np.random.rand(2), random.random())


def test_a_hand_written_loop_trains_bit_identically_with_the_probe(tmp_path):
    lines = []
    probe = TrainingProbe.for_run("dropout-run", tmp_path / "run", TINY_PROBE, report=lines.append)
    (tmp_path / "run").mkdir()
    a, opt_a, after_a = _dropout_run(tmp_path, probe)
    b, opt_b, after_b = _dropout_run(tmp_path, None)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    for sa, sb in zip(opt_a.state_dict()["state"].values(), opt_b.state_dict()["state"].values()):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert torch.equal(after_a[0], after_b[0]) and (after_a[1] == after_b[1]).all() and after_a[2] == after_b[2]
    assert a.training and all(m.training for m in a.modules())
    assert len(cost_lines(lines)) == 5 and probe.cost.measurements == 5

    # Judged from the cache with the panel the probe writes: saved revisions hit, unsaved ones are
    # found by model, revision and settings, with a warning that no checkpoint backs them.
    panel = probe.write_panel(tmp_path / "run.toml")
    pm = load_panel(panel).models[0]
    assert pm.revisions == ("step0", "step2", "step4", "step6", "step8") and pm.tokens_seen["step8"] == 8 * 96
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "hw", measure_fn=lambda *a, **k: pytest.fail("measured")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = provider.model_records(pm)
    assert {e.revision: e.status for e in provider.run.entries} == {
        "step0": "hit", "step2": "loose-hit", "step4": "hit", "step6": "loose-hit", "step8": "hit"}
    assert sum("not resolvable" in str(w.message) for w in caught) == 1  # one warning per model (issue 33)
    assert records[2].provenance["resolved_from"] == "local" and records[1].provenance["resolved_from"] == "unsaved"
    assert records[-1].settings.ablation and not records[0].settings.ablation


# ---- the cost bound ---------------------------------------------------------------------------------


def test_max_share_trades_examples_for_time_and_the_record_says_so(tmp_path):
    from headwatch_testing.tiny import tiny_model

    model = tiny_model("gpt_neox", vocab_size=64, d_model=32, n_heads=2)
    settings = dataclasses.replace(TINY_PROBE, n_examples=400, n_pr=100)
    lines = []
    full = TrainingProbe.for_run("full", tmp_path / "full", settings, report=lines.append)
    cheap = TrainingProbe.for_run("cheap", tmp_path / "cheap", settings, max_share=0.01, report=lines.append)
    cheap._last -= 1.0  # as if one second of training came before this save
    a = full.measure(model, "step100", tokens_seen=100, identity="test")
    b = cheap.measure(model, "step100", tokens_seen=100, identity="test")
    chosen = b.record.provenance["n_examples_chosen"]
    assert chosen["of"] == 400 and chosen["max_share"] == 0.01
    assert b.n_examples == b.record.settings.n_examples == chosen["n_examples"] < 400
    assert any("probe examples per checkpoint" in line for line in lines)
    assert (b.record.intervals.task_top1[1] - b.record.intervals.task_top1[0]
            > a.record.intervals.task_top1[1] - a.record.intervals.task_top1[0])  # fewer examples: wider
    assert f"n_examples = {chosen['n_examples']}" in cheap.panel_text(panel_dir=tmp_path)
    assert cheap.summary().measurements == 1 and "wall time" in lines[-2] and "not formed by step100" in lines[-1]
    # Before any training there is no interval to scale by: the panel's count stays, and the record says why.
    early = TrainingProbe.for_run("early", tmp_path / "early", settings, max_share=0.01, report=lines.append)
    c = early.measure(model, "step0", tokens_seen=0, identity="test")
    assert c.n_examples == 400 and "before any training" in c.record.provenance["n_examples_chosen"]["reason"]


def test_bad_settings_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(InputError, match="max_share"):
        TrainingProbe.for_run("x", tmp_path, TINY_PROBE, max_share=1.5)
    with pytest.raises(InputError, match="not both"):
        TrainingProbe.for_run("x", tmp_path, TINY_PROBE, max_share=0.1, n_examples=100)
    with pytest.raises(InputError, match="run name"):
        TrainingProbe.for_run("no spaces", tmp_path, TINY_PROBE)
    with pytest.raises(InputError, match="SPEC's thresholds"):
        TrainingProbe.for_run("x", tmp_path, dataclasses.replace(TINY_PROBE, induction_threshold=20.0))
    with pytest.raises(InputError, match="nothing measured"):
        TrainingProbe.for_run("x", tmp_path, TINY_PROBE).panel_text(panel_dir=tmp_path)


# ---- transformers.Trainer -----------------------------------------------------------------------------


def _trainer_run(tmp_path, name: str, callback, *, others=(), bind: bool = False, **training):
    """A 6-step Trainer run saving at step 4 (dropout on); ``training``: more TrainingArguments. Returns the trainer."""
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate (pip install 'headwatch[trainer]')")
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                             intermediate_size=64, max_position_embeddings=128, hidden_dropout=0.1))
    g = torch.Generator().manual_seed(1)
    data = [{"input_ids": (r := torch.randint(4, 64, (24,), generator=g)), "labels": r} for _ in range(32)]
    args = TrainingArguments(output_dir=str(tmp_path / name), max_steps=6, per_device_train_batch_size=4,
                             learning_rate=1e-2, save_strategy="steps", save_steps=4, logging_strategy="no",
                             report_to=[], use_cpu=True, seed=3, data_seed=4, dataloader_num_workers=0,
                             disable_tqdm=True, **training)
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[*others, *([callback] if callback else [])])
    if bind:
        callback.bind(trainer)
    trainer.train()
    return trainer


def test_the_trainer_callback_measures_each_save_and_changes_nothing(tmp_path, monkeypatch):
    from headwatch.training.trainer_callback import HeadwatchCallback

    lines = []
    callback = HeadwatchCallback("trainer-run", TINY_PROBE, tokens_per_step=96, expect={"dclm": False},
                                 report=lines.append)
    a = _trainer_run(tmp_path, "with", callback).model
    b = _trainer_run(tmp_path, "without", None).model
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    # step 0 (saved by the callback), the Trainer's save at 4, and the last step (saved because it is last)
    assert sorted(callback.probe.measured) == ["checkpoint-0", "checkpoint-4", "checkpoint-6"]
    assert any("wall time" in line for line in lines) and any("pytest claims --panel" in line for line in lines)
    pm = load_panel(callback.panel_path).models[0]
    assert pm.repo == str((tmp_path / "with").resolve()) and pm.tokens_seen["checkpoint-6"] == 6 * 96
    no_model_loaded(monkeypatch)
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "hw", measure_fn=lambda *a, **k: pytest.fail("measured")))
    records = provider.model_records(pm)
    assert [e.status for e in provider.run.entries] == ["hit"] * 3
    assert records[-1].settings.ablation and records[-1].provenance["measured_in"] == MEASURED_IN


def test_a_failing_measurement_is_reported_and_training_goes_on(tmp_path, monkeypatch):
    """A probe must not stop the run it watches: the failure is one line, the revision is left to the
    provider (which measures it from its checkpoint); settings the model cannot answer fail before training."""
    recipe = tiny_organism(monkeypatch, "gptneox")
    pm = organism_panel_model(tmp_path, "gptneox")
    lines = []

    def broken(model, settings, **kw):
        raise RuntimeError("probe broke")

    probe = planned_probe(MeasurePlan.from_dict(Provider(ProviderOptions(cache_dir=tmp_path / "hw")).measure_plan(pm)),
                          report=lines.append, measure_fn=broken)
    log = train(recipe, seed=0, cache_dir=tmp_path / "organisms", progress=False, probe=probe)
    assert log.complete and sorted(probe.failures) == ["step0", "step2", "step6"]
    assert "step0 NOT measured in training (RuntimeError: probe broke)" in lines[0]
    bad = TrainingProbe.for_run("x", tmp_path, dataclasses.replace(TINY_PROBE, vocab_hi=100))
    with pytest.raises(InputError, match="vocab_hi"):
        bad.check(recipe.build_model(0))


# ---- helpers of issue 34's tests ------------------------------------------------------------------


def run_trainruns(kind: str, out, *args: str, killed: bool = False):
    """``python -m headwatch_testing.trainruns KIND --out OUT ARGS`` in its own process; ``killed``:
    it must end by SIGKILL (its ``--kill-at``), else exit 0."""
    proc = subprocess.run([sys.executable, "-m", "headwatch_testing.trainruns", kind, "--out", str(out), *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == (-signal.SIGKILL if killed else 0), proc.stdout[-1500:] + proc.stderr[-3000:]
    return proc


def last_report(out, name: str) -> dict:
    """What the newest ``trainruns`` process of ``name`` wrote about itself."""
    paths = sorted(out.glob(f"{name}-*.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(paths[-1].read_text())


def stored_revisions(folder) -> list[str]:
    """The revision of every record in a run's own store (one file per record)."""
    return sorted(json.loads(p.read_text())["key"]["revision"] for p in store_dir(folder).glob("*.json"))


def judged_from_records(panel, tmp_path, monkeypatch, *, may_measure: tuple[str, ...] = ()):
    """(panel model, provider, records) of judging ``panel`` with a fresh measurement cache; measuring
    (loading a checkpoint) fails the test except for the revisions ``may_measure`` names."""
    from headwatch.probes.measure import measure

    measured: list[str] = []

    def only_allowed(*args, **kwargs):
        if kwargs["revision"] not in may_measure:
            pytest.fail(f"measured {kwargs['revision']} again")
        measured.append(kwargs["revision"])
        return measure(*args, **kwargs)

    if not may_measure:
        no_model_loaded(monkeypatch)
    pm = load_panel(panel).models[0]
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "fresh-cache", measure_fn=only_allowed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unsaved revisions: "not resolvable", said and tested elsewhere
        records = provider.model_records(pm)
    return pm, provider, records


def reloaded(panel, tmp_path) -> dict:
    """Each revision of ``panel`` loaded from its checkpoint and measured by the provider, by revision."""
    pm = load_panel(panel).models[0]
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "reload-cache", refresh=True))
    return {r.revision: r for r in provider.model_records(pm)}


# ---- 1. resume: a killed run keeps every revision, once --------------------------------------------

CHECKPOINTS = [f"checkpoint-{step}" for step in range(0, 9, 2)]


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["after-measuring", "before-measuring"])
def test_a_trainer_run_killed_and_resumed_keeps_every_revision_once(kill, tmp_path, monkeypatch):
    """SIGKILL at checkpoint-4's save, then ``train(resume_from_checkpoint=True)``: the panel lists
    checkpoint-0..8 once each, the records before the kill are not computed again, and the cache
    holds one record per revision. Killed before measuring, the Trainer also restores the callback
    itself (restore_callback_states_from_checkpoint: a copy rebuilt from trainer_state.json)."""
    out = tmp_path / "run"
    before = ["--kill-before-measure"] if kill == "before-measuring" else []
    restore = ["--restore-states"] if kill == "before-measuring" else []
    run_trainruns("trainer", out, "--kill-at", "4", *before, killed=True)
    measured_before = stored_revisions(out)
    assert measured_before == (CHECKPOINTS[:3] if kill == "after-measuring" else CHECKPOINTS[:2])
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
    saved = state["stateful_callbacks"]["HeadwatchCallback"]["attributes"]["resume_state"]
    assert list(saved["revisions"]) == ["checkpoint-0", "checkpoint-2"]  # its own measurement comes after its save

    trainruns.main(["trainer", "--out", str(out), "--resume", *restore])  # in this process: resumed, not killed
    resumed = last_report(out, "trainer-run")
    assert resumed["restored_copy"] == bool(restore)
    assert not set(resumed["measured"]) & {"checkpoint-0", "checkpoint-2"}  # kept, not computed again
    assert {"checkpoint-6", "checkpoint-8"} <= set(resumed["measured"])
    # checkpoint-4: kept from the run's records, or (the model the Trainer resumed does not hold its
    # weights: transformers 5.24 leaves GPTNeoX's lm_head, saved as embed_out, at its initial values)
    # said so and listed for the provider to measure from the checkpoint
    line4 = [line for line in resumed["lines"] if line.startswith("headwatch: checkpoint-4")]
    assert line4 and ("already measured" in line4[0] or "NOT measured" in line4[0] or " measured in " in line4[0])

    pm = load_panel(out / "headwatch-panel.toml").models[0]
    assert list(pm.revisions) == CHECKPOINTS and [pm.tokens_seen[r] for r in CHECKPOINTS] == [0, 192, 384, 576, 768]
    stored = stored_revisions(out)
    assert sorted(set(stored)) == sorted(set(stored) & set(CHECKPOINTS)) and len(stored) == len(set(stored))
    _, provider, records = judged_from_records(out / "headwatch-panel.toml", tmp_path, monkeypatch,
                                               may_measure=("checkpoint-4",) if kill == "before-measuring" else ())
    assert [r.revision for r in records] == CHECKPOINTS
    assert all(e.status == "hit" for e in provider.run.entries if e.revision != "checkpoint-4")
    if kill == "after-measuring":
        assert {e.status for e in provider.run.entries} == {"hit"}


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["after-measuring", "before-measuring"])
def test_a_hand_written_loop_killed_and_resumed_keeps_every_revision_once(kill, tmp_path, monkeypatch):
    """A loop that saves and measures ``step<N>`` and resumes from its latest save, SIGKILLed at step 4:
    the panel (merged with the one before the kill) lists step0..8 once each, each record is the
    one an uninterrupted run writes (same checkpoint, same numbers), and judging measures nothing."""
    out = tmp_path / "run"
    before = ["--kill-before-measure"] if kill == "before-measuring" else []
    run_trainruns("loop", out, "--kill-at", "4", *before, killed=True)
    trainruns.main(["loop", "--out", str(out)])  # in this process: resumed, not killed
    resumed = last_report(out, "loop-run")
    assert resumed["measured"] == ["step4", "step6", "step8"]
    assert resumed["kept"] == (["step4"] if kill == "after-measuring" else [])
    steps = [f"step{s}" for s in range(0, 9, 2)]
    assert stored_revisions(out) == steps  # one record each: nothing measured twice

    trainruns.main(["loop", "--out", str(tmp_path / "whole")])  # the same run, never stopped
    pm, provider, records = judged_from_records(out / "headwatch-panel.toml", tmp_path, monkeypatch)
    assert list(pm.revisions) == steps and {e.status for e in provider.run.entries} == {"hit"}
    whole = {r.revision: r for r in
             Provider(ProviderOptions(cache_dir=tmp_path / "c2")).model_records(load_panel(tmp_path / "whole" / "headwatch-panel.toml").models[0])}
    for rec in records:
        same_numbers(rec, whole[rec.revision])
        assert rec.provenance["identity"] == whole[rec.revision].provenance["identity"]


# ---- 2. mixed precision: measured in the declared dtype ---------------------------------------------


def _bf16_attention_error() -> str | None:
    """What torch's bfloat16 CPU attention raises here, or None. Forcing AVX2 kernels
    (ATEN_CPU_CAPABILITY=avx2) on a CPU with AVX-512 makes it pick a packing that needs AVX-512 and
    fail at T >= 64; these tests then have no bf16 training to measure."""
    q = torch.zeros(1, 1, 64, 16, dtype=torch.bfloat16)
    try:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    except RuntimeError as e:
        return str(e)
    return None


needs_bf16_attention = pytest.mark.skipif(
    _bf16_attention_error() is not None,
    reason=f"needs torch's bfloat16 CPU attention, which fails on this machine: {_bf16_attention_error()}")


@needs_bf16_attention
def test_trainer_bf16_records_equal_a_reload_of_each_checkpoint(tmp_path):
    """Trainer(bf16=True) on CPU: accelerate wraps forward in a bfloat16 autocast; the records written
    in training equal what loading each checkpoint in float32 and measuring it gives."""
    from headwatch.training.trainer_callback import HeadwatchCallback
    from headwatch.probes.measure import measure

    callback = HeadwatchCallback("bf16-run", TINY_PROBE, tokens_per_step=96, report=lambda line: None)
    trainer = _trainer_run(tmp_path, "bf16", callback, bf16=True)
    assert "_original_forward" in trainer.model.__dict__  # the autocast wrapper is in place
    again = reloaded(callback.panel_path, tmp_path)
    assert sorted(again) == sorted(callback.probe.measured) == ["checkpoint-0", "checkpoint-4", "checkpoint-6"]
    for revision, done in callback.probe.measured.items():
        assert done.record.provenance["dtype"] == "float32"
        same_numbers(done.record, again[revision])
    # the control: measured through the Trainer's forward (bfloat16 autocast), the numbers differ
    through = measure(trainer.model, done.record.settings, model_name="x", revision="checkpoint-6", progress=False)
    assert through.all_head_selectivity != done.record.all_head_selectivity


@needs_bf16_attention
def test_a_users_autocast_block_is_left_for_the_probe(tmp_path):
    from headwatch.probes.measure import measure

    probe = TrainingProbe.for_run("autocast-run", tmp_path / "run", TINY_PROBE, report=lambda line: None)
    model = trainruns.tiny_model(dropout=0.0).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(5):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if step % 2 == 0:
                model.save_pretrained(tmp_path / "run" / f"step{step}")
                probe.measure(model, f"step{step}", tokens_seen=step * 96, final=step == 4)
            if step == 4:
                break
            rows = trainruns.rows_at(step)
            loss = model(input_ids=rows, labels=rows).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    again = reloaded(probe.write_panel(), tmp_path)
    assert sorted(again) == ["step0", "step2", "step4"]
    for revision, rec in again.items():
        same_numbers(probe.measured[revision].record, rec)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the control: measured inside the block, they differ
        inside = measure(model, rec.settings, model_name="x", revision="step4", progress=False)
    assert inside.all_head_selectivity != rec.all_head_selectivity


def test_a_forward_that_turns_autocast_on_itself_is_refused(tmp_path):
    from headwatch.training.heldmodel import MixedPrecisionActive

    model = trainruns.tiny_model(dropout=0.0)
    model.forward = torch.autocast("cpu", dtype=torch.bfloat16)(model.forward)  # no original kept to fall back on
    model.save_pretrained(tmp_path / "run" / "step0")
    probe = TrainingProbe.for_run("autocast-inside", tmp_path / "run", TINY_PROBE, report=lambda line: None)
    with pytest.raises(MixedPrecisionActive, match="autocast"):
        probe.measure(model, "step0", tokens_seen=0)
    assert stored_revisions(tmp_path / "run") == []


# ---- 3. wrappers: torch.compile, DDP, one rank -------------------------------------------------------


def _compiled_loop(tmp_path, name: str, probe_on: bool, how: str, steps: int = 4):
    """A loop over a compiled tiny model (a backend that counts the graphs it is given and runs them
    as they are); returns (model, graphs compiled, probe)."""
    graphs: list[int] = []

    def counting_backend(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return gm.forward

    torch._dynamo.reset()
    model = trainruns.tiny_model(dropout=0.0).train()
    if how == "torch.compile":
        compiled = torch.compile(model, backend=counting_backend)
    else:  # nn.Module.compile: in place
        model.compile(backend=counting_backend)
        compiled = model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    probe = TrainingProbe.for_run(name, tmp_path / name, TINY_PROBE, report=lambda line: None) if probe_on else None
    for step in range(steps + 1):
        if probe is not None and step % 2 == 0:
            model.save_pretrained(tmp_path / name / f"step{step}")
            compiled_before = len(graphs)
            probe.measure(compiled, f"step{step}", tokens_seen=step * 96, final=step == steps)
            assert len(graphs) == compiled_before, "the probe called compiled code"
        if step == steps:
            break
        rows = trainruns.rows_at(step)
        loss = compiled(input_ids=rows, labels=rows).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model, compiled, graphs, probe


@pytest.mark.slow  # compiles graphs: seconds each
@pytest.mark.parametrize("how", ["torch.compile", "module.compile"])
def test_a_compiled_model_is_measured_as_the_module_itself(how, tmp_path):
    from headwatch.probes.measure import measure

    model, compiled, graphs, probe = _compiled_loop(tmp_path, "with", True, how)
    plain, _, plain_graphs, _ = _compiled_loop(tmp_path, "without", False, how)
    assert graphs == plain_graphs  # no recompilation: training ran the same compiled code
    for (name, x), (_, y) in zip(model.state_dict().items(), plain.state_dict().items()):
        assert torch.equal(x, y), name
    again = reloaded(probe.write_panel(), tmp_path)  # the uncompiled module, loaded from each checkpoint
    for revision, rec in again.items():
        same_numbers(probe.measured[revision].record, rec)
    # the control: measuring the compiled module itself compiles (and would change training's code)
    before = len(graphs)
    measure(compiled, rec.settings, model_name="x", revision="step4", progress=False)
    assert len(graphs) > before


class FullyShardedDataParallel(torch.nn.Module):
    """Stands for torch's FSDP wrapper (by name): a rank holds its shard of the parameters."""

    def __init__(self, module):
        super().__init__()
        self.module = module


def test_wrappers_are_unwrapped_and_sharded_ones_refused(tmp_path):
    from headwatch.training.heldmodel import ModelNotMeasurable, unwrap

    model = trainruns.tiny_model()
    assert unwrap(torch.nn.parallel.DataParallel(model)) is model  # a .module wrapper without a config
    with pytest.raises(ModelNotMeasurable, match="shard"):
        unwrap(FullyShardedDataParallel(model))
    probe = TrainingProbe.for_run("sharded", tmp_path / "run", TINY_PROBE, report=lambda line: None)
    with pytest.raises(ModelNotMeasurable, match="FullyShardedDataParallel"):
        probe.measure(FullyShardedDataParallel(model), "step0", tokens_seen=0)


@pytest.mark.slow
def test_ddp_on_two_ranks_only_rank_0_measures_and_writes(tmp_path):
    """Two gloo processes train one DistributedDataParallel model; both call the probe on the wrapper
    at every save. Rank 0 measures and writes; rank 1 returns at once and never reads a checkpoint
    (its resolve and files hash are made to fail); both end with the same weights."""
    out = tmp_path / "run"
    common = ["--world", "2", "--init", str(tmp_path / "rendezvous"), "--steps", "4"]
    procs = [subprocess.Popen([sys.executable, "-m", "headwatch_testing.trainruns", "ddp", "--out", str(out),
                               "--rank", str(rank), *common], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in (0, 1)]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    rank0, rank1 = last_report(out, "ddp-0"), last_report(out, "ddp-1")
    assert rank0["measured"] == ["step0", "step2", "step4"] and rank1["measured"] == []
    assert rank1["lines"] == ["headwatch: rank 1 does not measure (rank 0 measures every checkpoint and writes the records)"]
    assert rank0["weights"] == rank1["weights"]
    assert stored_revisions(out) == ["step0", "step2", "step4"]
    again = reloaded(out / "headwatch-panel.toml", tmp_path)
    assert sorted(again) == ["step0", "step2", "step4"]


# ---- 4. a moved run is judged from the records it carries ---------------------------------------


def test_a_moved_run_is_judged_with_nothing_measured_again(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch" / "run"
    scratch.mkdir(parents=True)
    probe = TrainingProbe.for_run("moved-run", scratch, TINY_PROBE, report=lambda line: None)
    _dropout_run(tmp_path / "scratch", probe)  # saves step0, 4, 8; measures 2 and 6 without saving
    panel = probe.write_panel()
    assert panel == scratch / "headwatch-panel.toml" and 'repo = "."' in panel.read_text()
    moved = tmp_path / "colleague" / "copied-run"
    shutil.copytree(scratch, moved)
    shutil.rmtree(tmp_path / "scratch")
    pm, provider, records = judged_from_records(moved / "headwatch-panel.toml", tmp_path, monkeypatch)
    assert pm.repo == str(moved.resolve())
    assert {e.revision: e.status for e in provider.run.entries} == {
        "step0": "hit", "step2": "loose-hit", "step4": "hit", "step6": "loose-hit", "step8": "hit"}
    assert [r.provenance["weights_hash"] for r in records] == [
        probe.measured[r].record.provenance["weights_hash"] for r in pm.revisions]
    # the report's read-only path finds them too, and `headwatch measure-panel` has nothing to do
    found, missing = Provider(ProviderOptions(cache_dir=tmp_path / "other-cache")).cached_records(pm)
    assert [r.revision for r in found] == list(pm.revisions) and missing == []
    assert all(is_cached(provider, pm, r) for r in pm.revisions)
    assert provider.list_revisions(pm) == ["step0", "step4", "step8"]  # the run's .headwatch/ is no revision


# ---- 5. refused before any compute, naming the argument ---------------------------------------------


def _never(*args, **kwargs):
    raise AssertionError("measured: the input should have been refused first")


@pytest.mark.parametrize("tokens", ["1000", float("nan"), float("inf"), -1])
def test_bad_tokens_seen_is_refused_before_measuring(tokens, tmp_path):
    model = trainruns.tiny_model()
    probe = TrainingProbe.for_run("bad-tokens", tmp_path / "run", TINY_PROBE, measure_fn=_never)
    with pytest.raises(InputError, match="tokens_seen"):
        probe.measure(model, "step0", tokens_seen=tokens)
    assert not (tmp_path / "run").exists() or stored_revisions(tmp_path / "run") == []


def test_a_huge_example_count_is_refused_before_any_allocation(tmp_path, monkeypatch):
    import headwatch.training.trainloop as trainloop

    monkeypatch.setattr(trainloop, "induction_batch", _never)
    with pytest.raises(InputError, match=r"settings\.n_examples: got 1,000,000,000"):
        TrainingProbe.for_run("huge", tmp_path, dataclasses.replace(TINY_PROBE, n_examples=10**9))
    with pytest.raises(InputError, match=r"n_examples: got 1,000,000,000"):
        TrainingProbe.for_run("huge", tmp_path, TINY_PROBE, n_examples=10**9)
    with pytest.raises(InputError, match="n_examples"):
        TrainingProbe.for_run("huge", tmp_path, TINY_PROBE, n_examples="200")


def test_a_module_the_probes_cannot_read_is_refused(tmp_path):
    from transformers import GPTNeoXForCausalLM

    from headwatch.training.heldmodel import ModelNotMeasurable

    probe = TrainingProbe.for_run("odd-modules", tmp_path / "run", TINY_PROBE, measure_fn=_never)
    with pytest.raises(ModelNotMeasurable, match="model: a Linear without a config"):
        probe.measure(torch.nn.Linear(4, 4), "step0", tokens_seen=0)
    with torch.device("meta"):
        meta = GPTNeoXForCausalLM(trainruns.tiny_model().config)
    with pytest.raises(ModelNotMeasurable, match="meta device"):
        probe.measure(meta, "step0", tokens_seen=0)
    with pytest.raises(ModelNotMeasurable, match="meta device"):
        probe.check(meta)


def test_a_revision_is_never_measured_again_at_other_weights(tmp_path):
    """After more training: a saved revision measured before, a saved one not measured yet (the
    model no longer equals its checkpoint), and an unsaved one measured before are each refused,
    naming the revision; the records written stay byte for byte."""
    model = trainruns.tiny_model(dropout=0.0).train()
    probe = TrainingProbe.for_run("remeasured", tmp_path / "run", TINY_PROBE, report=lambda line: None)
    model.save_pretrained(tmp_path / "run" / "step0")
    model.save_pretrained(tmp_path / "run" / "step1")  # saved, not measured yet
    probe.measure(model, "step0", tokens_seen=0)
    probe.measure(model, "step0b", tokens_seen=10)  # not saved: keyed on its weights
    written = {p: p.read_bytes() for p in store_dir(tmp_path / "run").glob("*.json")}
    rows = trainruns.rows_at(0)
    model(input_ids=rows, labels=rows).loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    for revision, why in (("step0", "measured at other weights"), ("step1", "does not hold the weights saved"),
                          ("step0b", "measured at other weights")):
        with pytest.raises(InputError, match=f"revision '{revision}'.*{why}"):
            probe.measure(model, revision, tokens_seen=20)
    assert {p: p.read_bytes() for p in store_dir(tmp_path / "run").glob("*.json")} == written


# ---- 6. where researchers look: the Trainer's log, logging, formation ------------------------------


def test_the_figures_of_each_checkpoint_reach_the_trainers_log(tmp_path):
    from transformers import TrainerCallback

    from headwatch.training.trainer_callback import HeadwatchCallback

    class Tracker(TrainerCallback):  # stands for TensorBoard, W&B, trackio: called before headwatch's callback
        logged: list[dict] = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logged.append(dict(logs))

    keys = {"headwatch/induction_heads", "headwatch/best_induction", "headwatch/best_previous_token",
            "headwatch/bos_fraction", "headwatch/induction_top1"}
    for bind in (True, False):
        Tracker.logged = []
        callback = HeadwatchCallback("logged-run", TINY_PROBE, tokens_per_step=96, report=lambda line: None)
        trainer = _trainer_run(tmp_path, f"logged-{bind}", callback, others=[Tracker()], bind=bind)
        history = [e for e in trainer.state.log_history if keys <= set(e)]
        assert [e["step"] for e in history] == [0, 4, 6]
        final = callback.probe.measured["checkpoint-6"].record
        assert history[-1]["headwatch/induction_top1"] == final.task.top1
        assert len([e for e in Tracker.logged if keys <= set(e)]) == (3 if bind else 0)


def _planted(induction: dict[str, list[float]]):
    """A measure function whose records carry the given induction selectivities by revision (the other
    classes as measured): heads L0_H0, L0_H1, L1_H0, L1_H1 of the tiny model. The measured attention no
    longer matches planted selectivities, so the records drop it (the attention floor does not apply)."""
    from headwatch.probes.measure import measure

    def planted(model, settings, **kwargs):
        record = measure(model, settings, **kwargs)
        for head, value in zip(sorted(record.all_head_selectivity), induction[kwargs["revision"]]):
            record.all_head_selectivity[head]["induction"] = value
        record.attention = None
        return record

    return planted


def test_formation_and_near_miss_lines_go_through_logging(tmp_path, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="headwatch.trainloop")
    model = trainruns.tiny_model(dropout=0.0)
    forming = {"step0": [1, 1, 1, 1], "step2": [33, 1, 1, 1], "step4": [60, 70, 1, 80], "step6": [60, 70, 55, 80]}
    probe = TrainingProbe.for_run("forming", tmp_path / "a", TINY_PROBE, measure_fn=_planted(forming))
    for step in (0, 2, 4, 6):
        probe.measure(model, f"step{step}", tokens_seen=step, identity=f"test-{step}")
    probe.summary()
    lines = [r.getMessage() for r in caplog.records if r.name == "headwatch.trainloop"]
    assert [line for line in lines if "circuit" in line] == ["headwatch: induction circuit formed at step4: 3 heads >= 50x"]
    assert "headwatch: step2: 0 head(s) >= 50x (best induction 33.0x" in "\n".join(lines)

    caplog.clear()
    near = {"step0": [1, 1, 1, 1], "step2": [33, 1, 1, 1]}
    probe = TrainingProbe.for_run("near", tmp_path / "b", TINY_PROBE, measure_fn=_planted(near))
    for step in (0, 2):
        probe.measure(model, f"step{step}", tokens_seen=step, identity=f"test-{step}")
    probe.summary()
    lines = [r.getMessage() for r in caplog.records if r.name == "headwatch.trainloop"]
    assert lines[-1] == "headwatch: induction circuit not formed by step2: best 33x, 0 head(s) >= 50x of the 3 it needs"


# ---- 7. the cost: the training default, and what it leaves alone ------------------------------------


def test_the_training_default_count_is_kept_in_the_record_and_leaves_spec_alone(tmp_path):
    from headwatch.training.trainloop import TRAINING_EXAMPLES
    from headwatch.spec import PROBE_RUN

    settings = dataclasses.replace(TINY_PROBE, n_examples=PROBE_RUN.n_examples, n_pr=PROBE_RUN.n_pr)  # left at SPEC's
    probe = TrainingProbe.for_run("default-n", tmp_path / "run", settings, report=lambda line: None)
    done = probe.measure(trainruns.tiny_model(), "step0", tokens_seen=0, identity="test")
    assert done.n_examples == done.record.settings.n_examples == TRAINING_EXAMPLES < PROBE_RUN.n_examples
    assert f"n_examples = {TRAINING_EXAMPLES}" in probe.panel_text(panel_dir=tmp_path)
    chosen = TrainingProbe.for_run("chosen-n", tmp_path / "run2", settings, n_examples=400)
    assert chosen.settings("step0", final=False).n_examples == 400
    # what `headwatch measure` and the panels measure by default is SPEC's batch, as before
    assert ProbeSettings().n_examples == PROBE_RUN.n_examples == 2000
    pm = parse_panel('[[models]]\nname = "m"\nrepo = "run"\nsource = "local"\nrevisions = ["a"]\ntokens = { table = { a = 1 } }\n',
                     name="p", path=tmp_path / "p.toml").models[0]
    assert pm.settings_for("a").n_examples == 2000
