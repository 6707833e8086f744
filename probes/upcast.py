"""Compute in float32 from weights kept in a narrower dtype, one block at a time.

A checkpoint stored in bfloat16 or float16 holds values that float32 represents exactly, so a model
loaded in its stored dtype and upcast block by block just before each block runs computes exactly
what the same model loaded in float32 computes, while only one block at a time exists in float32.
This is how OLMoE 1B-7B (13.8 GB of bfloat16, 27.7 GB in float32) is probed in float32 on a machine
with less memory than the float32 model needs.

A *block* is a decoder layer (from ``headwatch.probes.architectures``) or any other module that owns
parameters directly and lies outside the layers (embeddings, final norm, output head). Before a
block's forward its floating parameters are swapped for float32 copies; after it (also when it
raises) the originals are put back, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn as nn

from headwatch.probes.architectures import arch_spec


def upcast_blocks(model: nn.Module) -> list[nn.Module]:
    """The blocks of ``model`` in module order: decoder layers, then every other module that owns
    parameters directly and is not inside a layer (embeddings, final norm, lm head)."""
    layers = list(model.get_submodule(arch_spec(model).layers))
    inside = {id(m) for layer in layers for m in layer.modules()}
    others = [m for m in model.modules()
              if id(m) not in inside and any(True for _ in m.parameters(recurse=False))]
    return layers + others


def block_parameter_counts(model: nn.Module) -> list[int]:
    """Parameter count of each block (works on a meta-device model)."""
    return [sum(p.numel() for p in b.parameters()) for b in upcast_blocks(model)]


@dataclass
class LayerwiseUpcast:
    """Hooks that run each block of a model in ``compute_dtype``; ``remove()`` takes them away."""

    compute_dtype: torch.dtype
    n_blocks: int
    handles: list = field(default_factory=list)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()


def compute_layer_by_layer(model: nn.Module, compute_dtype: torch.dtype = torch.float32) -> LayerwiseUpcast:
    """Make every block of ``model`` compute in ``compute_dtype`` while its weights stay as loaded.

    Peak extra memory: one block's parameters in ``compute_dtype``. Parameters already in
    ``compute_dtype`` are left alone (a float32 model runs unchanged).
    """
    blocks = upcast_blocks(model)
    state = LayerwiseUpcast(compute_dtype, len(blocks))

    def before(module: nn.Module, _args) -> None:
        saved = []
        for p in module.parameters():
            if p.is_floating_point() and p.dtype != compute_dtype:
                saved.append((p, p.data))
                # Made outside inference mode: a parameter whose data is an inference tensor takes
                # another matmul path in aten::linear (measured: 5e-7 apart on OLMoE's lm head for
                # a non-contiguous input), so the numbers would no longer be a float32 load's.
                with torch.inference_mode(False):
                    p.data = p.data.to(compute_dtype)
        module._headwatch_upcast_saved = saved

    def after(module: nn.Module, _args, _output) -> None:
        for p, original in getattr(module, "_headwatch_upcast_saved", ()):
            p.data = original
        module._headwatch_upcast_saved = []

    for block in blocks:
        state.handles.append(block.register_forward_pre_hook(before))
        state.handles.append(block.register_forward_hook(after, always_call=True))
    return state
