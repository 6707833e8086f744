"""headwatch inside the training loop (issue 28): records written while training are the ones the
provider reads afterwards (same key, same numbers, no model loaded), and measuring changes nothing
about the training (bit-identical weights, optimizer state and random streams, same process).

Bit-identity is legitimate here: both runs of a comparison are in one process, on one thread count.
"""
from __future__ import annotations

import dataclasses
import json
import random
import warnings

import numpy as np
import pytest
import torch

from headwatch.fixtures import loading, training_child
from headwatch.fixtures.hubcache import cached_revisions, repo_folder
from headwatch.fixtures.organisms import ORGANISMS, DataSpec, runner
from headwatch.fixtures.organisms.train import train
from headwatch.fixtures.panels import load_panel, parse_panel
from headwatch.fixtures.provider import Provider, ProviderOptions, measurement_key
from headwatch.fixtures.trainloop import MEASURED_IN, MeasurePlan, TrainingProbe, planned_probe, training_untouched
from headwatch.probes.record import ProbeSettings
from headwatch.validation import InputError

TINY_DATA = DataSpec(seq_len=24, batch_size=4, vocab_lo=4, vocab_hi=64, span_lo=4, span_hi=10)
#: A probe a 64-token tiny model can answer in well under a second.
TINY_PROBE = ProbeSettings(n_examples=32, seq_len=64, vocab_lo=4, vocab_hi=64, n_pr=16, batch_size=16, n_bootstrap=50)


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
    assert len(lines) == 3 and "first measurement" in lines[0] and all("% of the" in line for line in lines[1:])

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
    from headwatch.fixtures.tiny import tiny_model

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
    probe = TrainingProbe.for_run("dropout-run", tmp_path / "run", TINY_PROBE, cache_dir=tmp_path / "hw",
                                  report=lines.append)
    (tmp_path / "run").mkdir()
    a, opt_a, after_a = _dropout_run(tmp_path, probe)
    b, opt_b, after_b = _dropout_run(tmp_path, None)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    for sa, sb in zip(opt_a.state_dict()["state"].values(), opt_b.state_dict()["state"].values()):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert torch.equal(after_a[0], after_b[0]) and (after_a[1] == after_b[1]).all() and after_a[2] == after_b[2]
    assert a.training and all(m.training for m in a.modules())
    assert len(lines) == 5 and probe.cost.measurements == 5

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
    assert sum("not resolvable" in str(w.message) for w in caught) == 2
    assert records[2].provenance["resolved_from"] == "local" and records[1].provenance["resolved_from"] == "unsaved"
    assert records[-1].settings.ablation and not records[0].settings.ablation


# ---- the cost bound ---------------------------------------------------------------------------------


def test_max_share_trades_examples_for_time_and_the_record_says_so(tmp_path):
    from headwatch.fixtures.tiny import tiny_model

    model = tiny_model("gpt_neox", vocab_size=64, d_model=32, n_heads=2)
    settings = dataclasses.replace(TINY_PROBE, n_examples=400, n_pr=100)
    lines = []
    full = TrainingProbe.for_run("full", tmp_path / "full", settings, cache_dir=tmp_path / "hw", report=lines.append)
    cheap = TrainingProbe.for_run("cheap", tmp_path / "cheap", settings, cache_dir=tmp_path / "hw",
                                  max_share=0.01, report=lines.append)
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
    assert cheap.summary().measurements == 1 and "wall time" in lines[-1]
    # Before any training there is no interval to scale by: the panel's count stays, and the record says why.
    early = TrainingProbe.for_run("early", tmp_path / "early", settings, cache_dir=tmp_path / "hw", max_share=0.01,
                                  report=lines.append)
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


def _trainer_run(tmp_path, name: str, callback):
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
                             disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback] if callback else [])
    trainer.train()
    return model


def test_the_trainer_callback_measures_each_save_and_changes_nothing(tmp_path, monkeypatch):
    from headwatch.fixtures.trainer_callback import HeadwatchCallback

    lines = []
    callback = HeadwatchCallback("trainer-run", TINY_PROBE, cache_dir=tmp_path / "hw", tokens_per_step=96,
                                 expect={"dclm": False}, report=lines.append)
    a = _trainer_run(tmp_path, "with", callback)
    b = _trainer_run(tmp_path, "without", None)
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
    bad = TrainingProbe.for_run("x", tmp_path, dataclasses.replace(TINY_PROBE, vocab_hi=100), cache_dir=tmp_path / "hw")
    with pytest.raises(InputError, match="vocab_hi"):
        bad.check(recipe.build_model(0))
