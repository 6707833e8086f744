"""Checkpoints broken the ways a careless save, copy or edit breaks them (for the loading tests and
tools/hostile_inputs.py): each a tiny model (``headwatch_testing.tiny``) saved, then damaged.
"""
from __future__ import annotations

import torch

from headwatch_testing.tiny import tiny_model


def _edit_weights(folder, drop=(), add=None) -> None:
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    tensors = {k: v for k, v in load_file(str(path)).items() if not any(k.startswith(p) for p in drop)}
    tensors.update(add or {})
    save_file(tensors, str(path), metadata={"format": "pt"})


def _edit_config(folder, **changes) -> None:
    import json

    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def _cut_in_half(folder) -> None:
    path = folder / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _one_shard_missing(folder) -> None:
    import json

    from safetensors.torch import load_file

    shard = folder / "model-00001-of-00002.safetensors"
    (folder / "model.safetensors").rename(shard)
    keys = list(load_file(str(shard)))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": {
        k: shard.name if i % 2 else "model-00002-of-00002.safetensors" for i, k in enumerate(keys)}}))


#: kind -> (model type saved, how it is broken, what an error about it must name). Each is a way a
#: checkpoint can fail to hold the model its config describes, or fail to be a checkpoint at all.
BROKEN_CHECKPOINTS = {
    "no-lm-head": ("gpt_neox", lambda f: _edit_weights(f, drop=["embed_out"]), "lm_head"),
    "config-more-layers": ("gpt_neox", lambda f: _edit_config(f, num_hidden_layers=3), "layers.2"),
    "config-fewer-layers": ("gpt_neox", lambda f: _edit_config(f, num_hidden_layers=1), "layers.1"),
    "config-wider-mlp": ("gpt_neox", lambda f: _edit_config(f, intermediate_size=256), "dense_h_to_4h"),
    "olmoe-expert-missing": ("olmoe", lambda f: _edit_weights(f, drop=["model.layers.0.mlp.experts.1."]), "experts"),
    "extra-tensor": ("olmo", lambda f: _edit_weights(f, add={"extra.weight": torch.zeros(3)}), "extra.weight"),
    "truncated": ("gpt_neox", _cut_in_half, "model.safetensors"),
    "garbage-weights": ("gpt_neox", lambda f: (f / "model.safetensors").write_bytes(b"not a safetensors file"),
                        "model.safetensors"),
    "empty-weights": ("gpt_neox", lambda f: (f / "model.safetensors").write_bytes(b""), "model.safetensors"),
    "shard-missing": ("gpt_neox", _one_shard_missing, "model-00002-of-00002.safetensors"),
    "config-not-json": ("gpt_neox", lambda f: (f / "config.json").write_text("{ not json"), "config.json"),
    "config-unknown-type": ("gpt_neox", lambda f: _edit_config(f, model_type="nosuchmodel"), "nosuchmodel"),
}


def save_broken_checkpoint(folder, kind: str) -> None:
    """Save a tiny checkpoint into ``folder`` and break it as :data:`BROKEN_CHECKPOINTS[kind]` says."""
    from pathlib import Path

    model_type, breaks, _ = BROKEN_CHECKPOINTS[kind]
    folder = Path(folder)
    tiny_model(model_type, seed=0, attn_implementation="eager").save_pretrained(folder)
    breaks(folder)
