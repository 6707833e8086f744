"""The last decoder layer's MLP at the query position only.

Every probe pass reads the model at one position of its last layer: the logits at the query
position (``logits_to_keep=1``); the attention rows and head outputs are read inside attention,
before the MLP. The last layer's MLP is position-wise, so its output at the other positions feeds
nothing read: :func:`query_position_mlp` runs it on the last position alone (a layer's MLP is about
three quarters of its matmuls: 2.5% of a SmolLM2-135M pass). The logits are those of the whole
layer up to float rounding (a matmul over fewer rows may round differently), not bit for bit.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn as nn

from headwatch.probes.architectures import arch_spec, decoder_layers


class _QueryPositionOnly(nn.Module):
    """Stands in for a position-wise MLP: computes the last position, and hands every position that
    output ([B, T, d] as a broadcast view; positions before the last are never read)."""

    def __init__(self, mlp: nn.Module) -> None:
        super().__init__()
        self.mlp = mlp

    def forward(self, hidden: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        """hidden: [B, T, d] -> [B, T, d_out]."""
        out = self.mlp(hidden[:, -1:].contiguous(), *args, **kwargs)
        if isinstance(out, torch.Tensor) and out.dim() == 3:
            return out.expand(hidden.shape[0], hidden.shape[1], out.shape[-1])
        return self.mlp(hidden, *args, **kwargs)  # not one tensor per position: the whole MLP, as it was


@contextlib.contextmanager
def query_position_mlp(model: nn.Module) -> Iterator[None]:
    """Within the block, the last decoder layer's MLP (``ArchSpec.mlp``) runs on the last position only;
    for passes that read no hidden state of that layer but the last position's."""
    layer = decoder_layers(model)[-1]
    name = arch_spec(model).mlp
    original = getattr(layer, name)
    setattr(layer, name, _QueryPositionOnly(original))
    try:
        yield
    finally:
        setattr(layer, name, original)
