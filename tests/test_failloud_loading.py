"""Loading refuses a checkpoint whose weights do not cover its model, and names what is wrong.

Catalogue: docs/hostile-inputs.md, "Checkpoint weights and files". Each test here failed on main's
code (before issue 14): main measured such checkpoints as partly random weights with exit 0, or
ended in a traceback naming no file.
"""
from __future__ import annotations

import json

import pytest

from headwatch.fixtures import loading
from headwatch.fixtures.tiny import BROKEN_CHECKPOINTS, save_broken_checkpoint, tiny_model

WEIGHTS = ["no-lm-head", "config-more-layers", "config-fewer-layers", "config-wider-mlp", "olmoe-expert-missing",
           "extra-tensor"]
FILES = ["truncated", "garbage-weights", "empty-weights", "shard-missing"]
CONFIGS = ["config-not-json", "config-unknown-type"]


def _resolved(tmp_path, kind: str) -> loading.ResolvedRevision:
    save_broken_checkpoint(tmp_path / "run" / kind, kind)
    return loading.resolve_local(tmp_path / "run", kind)


@pytest.mark.parametrize("kind", WEIGHTS)
def test_weights_that_do_not_cover_the_model_are_refused(tmp_path, kind):
    """Missing keys (would be random), unexpected keys, shape mismatches: refused, the keys named."""
    resolved = _resolved(tmp_path, kind)
    with pytest.raises(loading.LoadingError, match=BROKEN_CHECKPOINTS[kind][2]) as info:
        loading.load_checkpoint(resolved)
    assert "do not match the model" in str(info.value)


def test_tied_weights_legitimately_absent_load(tmp_path):
    """With tie_word_embeddings the LM head is the embedding: its absence from the file is fine."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "run" / "tied"
    tiny_model("gpt_neox", seed=0, attn_implementation="eager").save_pretrained(folder)
    tensors = load_file(str(folder / "model.safetensors"))
    tensors.pop("embed_out.weight")
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    loaded = loading.load_checkpoint(loading.resolve_local(tmp_path / "run", "tied"))
    model = loaded.model
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


@pytest.mark.parametrize("kind", FILES)
def test_damaged_weight_files_are_named(tmp_path, kind):
    """Truncated, garbage, empty or missing weight files: a LoadingError naming the file, not a traceback
    from deep inside safetensors."""
    resolved = _resolved(tmp_path, kind)
    with pytest.raises(loading.LoadingError, match=BROKEN_CHECKPOINTS[kind][2]):
        loading.load_checkpoint(resolved)


@pytest.mark.parametrize("kind", CONFIGS)
def test_bad_configs_are_refused_before_the_weights(tmp_path, kind, monkeypatch, headwatch_cli):
    """A config.json that is not JSON, or names an unknown model_type: refused naming it, through
    ``headwatch measure`` (exit 2), and no weights are read."""
    save_broken_checkpoint(tmp_path / kind, kind)
    monkeypatch.setattr(loading, "load_checkpoint", _must_not_load)
    r = headwatch_cli("measure", "--model", tmp_path / kind, "--out", tmp_path / "o.json", *SMALL)
    assert r.code == 2 and BROKEN_CHECKPOINTS[kind][2] in r.err and "Traceback" not in r.err, r.err


def test_an_architecture_without_a_row_is_refused_before_the_weights(tmp_path, monkeypatch, headwatch_cli):
    from transformers import OPTConfig, OPTForCausalLM

    OPTForCausalLM(OPTConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=16, ffn_dim=32,
                             word_embed_proj_dim=16, vocab_size=300)).save_pretrained(tmp_path / "opt")
    monkeypatch.setattr(loading, "load_checkpoint", _must_not_load)
    r = headwatch_cli("measure", "--model", tmp_path / "opt", "--out", tmp_path / "o.json", *SMALL)
    assert r.code == 2 and "'opt'" in r.err and "architecture" in r.err, r.err


#: Probe settings that fit the tiny models and run in a second.
SMALL = ("--n-examples", "8", "--n-pr", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300",
         "--batch-size", "4", "--device", "cpu")


def _must_not_load(*args, **kwargs):
    raise AssertionError("weights were loaded although the config is unusable")
