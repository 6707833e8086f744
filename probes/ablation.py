"""Group ablation (docs/SPEC.md §4): zero chosen heads' slices of the output-projection input.

The ablation passes share their bottom: decoder layers below the lowest ablated layer compute the
same thing in every pass (and in an unablated one), so :func:`prefix_output` computes them once per
batch and :func:`replaying_prefix` hands their output to the layers above in each ablated pass. A
circuit in layers 17-18 of SmolLM2's 30 spares 17/30 of two of its three passes.

The screen is such an unablated pass: :class:`PrefixKeeper` keeps what one decoder layer returns in
each of its batches (the layer guessed from the first batch, within :data:`PREFIX_KEEP_BYTES`), and
:func:`shared_prefix` starts the ablation passes from it, after checking on the first batch that a
fresh computation gives the same tensors exactly. A wrong guess or a failed check costs time, never
a number: the layers are then computed as without it.
"""
from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from headwatch.probes.architectures import decoder_layers, head_geometry, out_proj_modules
from headwatch.probes.record import head_key, parse_head_key

log = logging.getLogger("headwatch.probes.ablation")

#: Most memory the screen may hold for the ablation passes' shared prefix: one layer's output for
#: every example plus, during the first batch, every layer's (SmolLM2-135M at N = 200: 0.4 GB; a
#: run that would need more recomputes the prefix instead).
PREFIX_KEEP_BYTES = 2 << 30
#: The layer kept is the lowest holding a head whose first-batch induction selectivity reaches this
#: share of the threshold: lower than the circuit's (a head just under the threshold on one batch
#: may pass it on all) costs a little time; higher costs the whole saving.
PREFIX_GUESS_SHARE = 0.5


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


def _same(a: Any, b: Any) -> bool:
    """Exact equality of two layer outputs (a tensor, or a tuple of them and other values)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and bool(torch.equal(a, b)))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b or a == b


@dataclass
class KeptPrefix:
    """What decoder layer ``layer - 1`` returned in each batch of the screen (batch i at index i)."""

    layer: int
    outputs: list[Any]
    #: None until the first batch's fresh computation is compared; then whether it was the same.
    same: bool | None = None


class PrefixKeeper:
    """During the screen (a context manager around its batches): keeps one decoder layer's output
    of every batch for the ablation passes (:class:`KeptPrefix`).

    Which layer the passes need is known only after the screen (the circuit's lowest), so during the
    first batch every layer's output is held, and :meth:`choose` (called after it) keeps the one below
    the guessed layer and holds only that one from then on. Nothing is kept when the model's config
    has no ``hidden_size``, or when it would take more than ``budget_bytes``.
    """

    def __init__(self, model: nn.Module, n_examples: int, batch_size: int, seq_len: int,
                 budget_bytes: int = PREFIX_KEEP_BYTES) -> None:
        self.layers = decoder_layers(model)
        hidden = getattr(model.config, "hidden_size", None)
        itemsize = next(model.parameters()).element_size()
        need = (None if not isinstance(hidden, int) else
                (n_examples + len(self.layers) * min(batch_size, n_examples)) * seq_len * hidden * itemsize)
        self.active = need is not None and need <= budget_bytes
        self.first: dict[int, Any] = {}
        self.kept: KeptPrefix | None = None
        self._handles: list[Any] = []

    def __enter__(self) -> PrefixKeeper:
        if self.active:
            for j, layer in enumerate(self.layers):
                self._handles.append(layer.register_forward_hook(self._record_first(j)))
        return self

    def __exit__(self, *exc: Any) -> None:
        self._remove()
        self.first.clear()

    def _remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _record_first(self, j: int) -> Callable:
        def hook(_module, _args, output):
            self.first[j] = output
        return hook

    def choose(self, layer: int) -> None:
        """After the first batch: keep what layer ``layer - 1`` returns from here on (nothing for
        ``layer`` 0)."""
        self._remove()
        if self.active and layer > 0 and layer - 1 in self.first:
            self.kept = KeptPrefix(layer, [self.first[layer - 1]])
            outputs = self.kept.outputs
            self._handles.append(self.layers[layer - 1].register_forward_hook(
                lambda _module, _args, output: outputs.append(output)))
        self.first.clear()


def guessed_layer(first_batch_induction: dict[str, float], threshold: float) -> int:
    """The layer to keep: the lowest with a head whose induction selectivity on the first batch
    reaches ``PREFIX_GUESS_SHARE`` x ``threshold`` (0, nothing kept, when none does)."""
    return lowest_layer([[h for h, v in first_batch_induction.items() if v >= PREFIX_GUESS_SHARE * threshold]])


def shared_prefix(model: nn.Module, start: int, forward: Callable[[], Any], kept: KeptPrefix | None,
                  batch_index: int) -> Any:
    """What decoder layer ``start - 1`` returns for this batch (None for ``start`` 0): from the screen's
    kept output where it lies at or below ``start`` and was the same as a fresh computation on the
    first batch; otherwise computed (:func:`prefix_output`)."""
    if start == 0:
        return None
    if kept is None or kept.layer > start or kept.same is False or batch_index >= len(kept.outputs):
        return prefix_output(model, start, forward)
    base = kept.outputs[batch_index]
    if kept.same is None:  # the first batch: compute it once more, and compare
        fresh = prefix_output(model, kept.layer, forward)
        kept.same = _same(fresh, base)
        if not kept.same:
            log.info("the screen's output of layer %d differs from a plain pass's; the ablation passes "
                     "compute their shared layers themselves", kept.layer - 1)
            base = fresh
    if kept.layer == start:
        return base
    with replaying_prefix(model, kept.layer, base):
        return prefix_output(model, start, forward)
