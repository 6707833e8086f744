"""Group ablation (docs/SPEC.md §4): zero chosen heads' slices of the output-projection input.

The ablation passes share their bottom: decoder layers below the lowest ablated layer compute the
same thing in every pass (and in an unablated one), so :func:`prefix_output` computes them once per
batch and :func:`replaying_prefix` hands their output to the layers above in each ablated pass. A
circuit in layers 17-18 of SmolLM2's 30 spares 17/30 of two of its three passes.
"""
from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch.nn as nn

from .architectures import decoder_layers, head_geometry, out_proj_modules
from .record import head_key, parse_head_key


def heads_by_layer(heads: Iterable[str]) -> dict[int, list[int]]:
    """{"L2_H5", "L2_H1"} -> {2: [1, 5]}."""
    by_layer: dict[int, list[int]] = defaultdict(list)
    for key in heads:
        layer, head = parse_head_key(key)
        by_layer[layer].append(head)
    return {l: sorted(hs) for l, hs in sorted(by_layer.items())}


@contextlib.contextmanager
def ablated(model: nn.Module, heads: Iterable[str]) -> Iterator[None]:
    """Within the block, the given heads contribute zero to their layer's output projection."""
    heads = list(heads)
    if not heads:  # the baseline: nothing to hook
        yield
        return
    geometry = head_geometry(model)
    projections = out_proj_modules(model)
    handles = []
    for layer, layer_heads in heads_by_layer(heads).items():
        if not (0 <= layer < geometry.n_layers) or any(not 0 <= h < geometry.n_heads for h in layer_heads):
            raise ValueError(
                f"cannot ablate heads {layer_heads} of layer {layer}: the model has "
                f"{geometry.n_layers} layers x {geometry.n_heads} heads"
            )
        slices = [slice(h * geometry.d_head, (h + 1) * geometry.d_head) for h in layer_heads]

        def zero_heads(_module, args, slices=slices):
            x = args[0].clone()
            for s in slices:
                x[..., s] = 0
            return (x, *args[1:])

        handles.append(projections[layer].register_forward_pre_hook(zero_heads))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def matched_random_heads(circuit: Iterable[str], n_heads: int, seed: int = 123,
                         n_layers: int | None = None) -> list[str]:
    """Same layers and count per layer as ``circuit``, disjoint from it, drawn with RandomState(seed).

    docs/SPEC.md §4's control. Where a layer has too few heads outside the circuit (a tiny model whose
    circuit fills a layer) and ``n_layers`` is given, the shortfall is drawn from the non-circuit
    heads of the other layers, so the control always ablates as many heads as the circuit; without
    ``n_layers`` the shortfall is left out. For the paper's models (8-16 heads a layer, 3-head
    circuits) this never happens and the draw is exactly docs/SPEC.md §4's.
    """
    rng = np.random.RandomState(seed)
    circuit = set(circuit)
    chosen: list[str] = []
    shortfall = 0
    for layer, layer_heads in heads_by_layer(circuit).items():
        candidates = [h for h in range(n_heads) if h not in layer_heads]
        k = min(len(layer_heads), len(candidates))
        shortfall += len(layer_heads) - k
        if k:
            picks = rng.choice(candidates, size=k, replace=False)
            chosen.extend(head_key(layer, int(h)) for h in sorted(picks))
    if shortfall and n_layers is not None:
        others = [head_key(l, h) for l in range(n_layers) for h in range(n_heads)
                  if head_key(l, h) not in circuit and head_key(l, h) not in chosen]
        k = min(shortfall, len(others))
        if k:
            chosen.extend(others[i] for i in sorted(rng.choice(len(others), size=k, replace=False)))
    return chosen


def layer_heads(circuit: Iterable[str], n_heads: int) -> list[str]:
    """Every head of every layer that holds a circuit head (the whole-layer control)."""
    return [head_key(l, h) for l in heads_by_layer(circuit) for h in range(n_heads)]


def lowest_layer(head_groups: Iterable[Iterable[str]]) -> int:
    """The lowest layer any of the groups ablates (0 when none ablates anything)."""
    return min((layer for heads in head_groups for layer in heads_by_layer(heads)), default=0)


class _PrefixDone(Exception):
    """Ends a forward pass once the shared prefix is computed (raised by a hook, caught below)."""


def prefix_output(model: nn.Module, start: int, forward: Callable[[], Any]) -> Any:
    """What decoder layer ``start - 1`` returns when ``forward()`` (one pass of ``model``) reaches it;
    the pass stops there, so layers ``start`` and above are not computed. ``start`` >= 1."""
    seen: dict[str, Any] = {}

    def stop(_module, _args, output):
        seen["output"] = output
        raise _PrefixDone

    handle = decoder_layers(model)[start - 1].register_forward_hook(stop)
    try:
        forward()
    except _PrefixDone:
        pass
    finally:
        handle.remove()
    if "output" not in seen:
        raise RuntimeError(f"the forward pass never reached decoder layer {start - 1}")
    return seen["output"]


class _Replay(nn.Module):
    """Stands in for decoder layers 0..start-1: returns layer start-1's recorded output, whatever it is
    given (the model's loop hands each layer's output to the next, so layer ``start`` receives it)."""

    def __init__(self, output: Any) -> None:
        super().__init__()
        self.output = output

    def forward(self, *_args: Any, **_kwargs: Any) -> Any:
        return self.output


@contextlib.contextmanager
def replaying_prefix(model: nn.Module, start: int, output: Any) -> Iterator[None]:
    """Within the block, decoder layers 0..start-1 are not computed: each returns ``output`` (what
    :func:`prefix_output` recorded for this batch), so layers ``start`` and above compute exactly what
    a whole pass on the same batch would. Nothing is replaced for ``start`` = 0."""
    layers = decoder_layers(model)
    originals = [layers[j] for j in range(start)]
    stub = _Replay(output)
    for j in range(start):
        layers[j] = stub
    try:
        yield
    finally:
        for j, layer in enumerate(originals):
            layers[j] = layer
