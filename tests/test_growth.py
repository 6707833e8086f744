"""Organisms grown part-way (model_organisms/growth.py): the early run is the smaller organism's,
bit for bit; grown layers are exact identities until they join; a run resumed across the growth step
ends with the same weights; bad growth settings are refused before any training.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from headwatch.model_organisms import FAMILIES, ORGANISMS, DataSpec, GrowthSpec
from headwatch.model_organisms.train import repo_id, train
from headwatch.probes.architectures import decoder_layers, residual_writer_parameters

TINY_DATA = DataSpec(seq_len=24, batch_size=4, vocab_lo=4, vocab_hi=64, span_lo=4, span_hi=10)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)


def load(cache_dir, repo: str, revision: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(repo, revision=revision, cache_dir=cache_dir, use_safetensors=True)


def tiny_grown(family: str, *, at_step: int = 4, total: int = 8):
    """A cut-down family recipe: 1 layer from the start, 1 more from ``at_step``."""
    r = ORGANISMS[family].recipe
    return dataclasses.replace(
        r, n_layers=2, d_model=32, n_heads=2, vocab_size=64, data=TINY_DATA, intermediate_size=32,
        total_steps=total, checkpoints=(0, 2, at_step, total), name=f"{family}-tiny-grown",
        growth=GrowthSpec(at_step=at_step, new_layers=1, lr=1e-2, warmup_steps=2))


def rows(recipe):
    return torch.randint(recipe.data.vocab_lo, recipe.data.vocab_hi, (2, recipe.data.seq_len),
                         generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("family", FAMILIES)
def test_silenced_layers_are_exact_identities(family):
    grown = tiny_grown(family)
    small = dataclasses.replace(grown, n_layers=1, growth=None, name="")
    big_model, small_model = grown.build_model(0).eval(), small.build_model(0).eval()
    assert len(decoder_layers(big_model)) == 2
    assert all(not p.any() for p in residual_writer_parameters(big_model, 1).values())
    x = rows(grown)
    with torch.no_grad():
        assert torch.equal(big_model(x).logits, small_model(x).logits)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["olmoe", "gptneox"])
def test_early_run_is_the_smaller_organism(family, tmp_path):
    grown = tiny_grown(family)
    small = dataclasses.replace(grown, n_layers=1, growth=None, name="", total_steps=4, checkpoints=(0, 2, 4))
    train(grown, seed=0, cache_dir=tmp_path, progress=False)
    train(small, seed=0, cache_dir=tmp_path, progress=False)
    big4 = load(tmp_path, repo_id(grown.organism, 0), "step4")
    small4 = load(tmp_path, repo_id(small.organism, 0), "step4")
    sp = dict(small4.named_parameters())
    for name, p in big4.named_parameters():
        if name in sp:
            assert torch.equal(p, sp[name]), f"{name} differs before growth"
    assert all(not p.any() for p in residual_writer_parameters(big4, 1).values()), \
        "a layer that has not joined must write nothing"
    # After growth the new layer writes into the residual stream and is trained.
    big8 = load(tmp_path, repo_id(grown.organism, 0), "step8")
    assert all(p.any() for p in residual_writer_parameters(big8, 1).values())
    assert big8.config.num_hidden_layers == 2 == big4.config.num_hidden_layers


@pytest.mark.slow
@pytest.mark.parametrize("fresh", [True, False])
@pytest.mark.parametrize("stop", [3, 4, 5])
def test_resume_across_growth_gives_the_same_weights(stop, fresh, tmp_path):
    grown = tiny_grown("olmoe")
    grown = dataclasses.replace(grown, growth=dataclasses.replace(grown.growth, fresh_optimizer=fresh))
    train(grown, seed=0, cache_dir=tmp_path / "a", progress=False)
    train(grown, seed=0, cache_dir=tmp_path / "b", progress=False, stop_after=stop, state_every=1)
    train(grown, seed=0, cache_dir=tmp_path / "b", progress=False)
    a = load(tmp_path / "a", repo_id(grown.organism, 0), "step8")
    b = load(tmp_path / "b", repo_id(grown.organism, 0), "step8")
    pb = dict(b.named_parameters())
    assert all(torch.equal(p, pb[n]) for n, p in a.named_parameters())


@pytest.mark.slow
def test_fresh_optimizer_changes_the_run(tmp_path):
    """The optimiser restart is real: carrying the moments over gives other weights after growth."""
    grown = tiny_grown("olmoe")
    carried = dataclasses.replace(grown, name="carried", growth=dataclasses.replace(grown.growth, fresh_optimizer=False))
    train(grown, seed=0, cache_dir=tmp_path, progress=False)
    train(carried, seed=0, cache_dir=tmp_path, progress=False)
    a, b = (dict(load(tmp_path, repo_id(r.organism, 0), rev).named_parameters())
            for r, rev in ((grown, "step8"), (carried, "step8")))
    assert any(not torch.equal(a[n], b[n]) for n in a)
    a4, b4 = (dict(load(tmp_path, repo_id(r.organism, 0), "step4").named_parameters()) for r in (grown, carried))
    assert all(torch.equal(a4[n], b4[n]) for n in a4), "before growth the two are the same run"


def test_rate_restarts_at_growth():
    grown = tiny_grown("olmo")
    assert grown.lr_at(3) == grown.optim.lr_at(3, grown.total_steps)
    assert grown.lr_at(4) == pytest.approx(0.5e-2) and grown.lr_at(5) == grown.lr_at(7) == pytest.approx(1e-2)


def test_growth_keeps_fingerprints_of_recipes_without_it():
    r = ORGANISMS["olmoe"].recipe
    assert "growth" not in r.to_dict() and "name" not in r.to_dict()
    assert ORGANISMS["olmoe-grown"].recipe.fingerprint() != r.fingerprint()
    assert all(key == org.name for key, org in ORGANISMS.items())


@pytest.mark.parametrize("bad, message", [
    (dict(growth=GrowthSpec(at_step=8, new_layers=1, lr=1e-2)), "must come before total_steps"),
    (dict(growth=GrowthSpec(at_step=4, new_layers=2, lr=1e-2)), "must exceed new_layers"),
])
def test_bad_growth_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(tiny_grown("olmo"), **bad)


@pytest.mark.parametrize("kwargs, message", [
    (dict(at_step=0, new_layers=1, lr=1e-2), "at_step must be >= 1"),
    (dict(at_step=4, new_layers=0, lr=1e-2), "new_layers must be >= 1"),
    (dict(at_step=4, new_layers=1, lr=0.0), "lr must be > 0"),
    (dict(at_step=4, new_layers=1, lr=1e-2, warmup_steps=0), "warmup_steps must be >= 1"),
])
def test_bad_growth_spec_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GrowthSpec(**kwargs)
