"""One forward pass that records, for every layer and head, the query position's attention row
and the head's output at the output-projection input.

Asking a model for ``output_attentions`` materialises B x H x T x T weights per layer and forces
the slow eager path. Instead we register our own attention function with transformers: it runs
the library's SDPA kernel for the layer output and additionally computes softmax(q_last K^T) for
the one query row we need, which costs B x H x T per layer.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from headwatch.validation import InputError

from headwatch.probes.architectures import attention_modules, head_geometry

CAPTURE_IMPLEMENTATION = "headwatch_capture"


@dataclass
class LayerCapture:
    """What one layer's attention produced for one batch.

    attention_row: [B, H, T] fp32 attention of the query position (the last one).
    head_output: [B, H, D] the per-head output at the query position (out-proj input slices).
    first_position_attention: [B, H] attention to position 0 averaged over query positions 1..T-1
    (whole attention rows), only in passes where the recorder's ``want_first_position`` is set.
    """

    attention_row: torch.Tensor
    head_output: torch.Tensor
    first_position_attention: torch.Tensor | None = None


@dataclass
class CaptureRecorder:
    """Collects :class:`LayerCapture` by layer index during one forward pass."""

    layers: dict[int, LayerCapture] = field(default_factory=dict)
    #: Set before a forward pass to also compute every query's attention to position 0 (Sink_1^eps):
    #: B x H x T x T scores per layer, so only for a small sub-batch.
    want_first_position: bool = False

    def stacked(self, n_layers: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(attention rows [B, L, H, T], head outputs [B, L, H, D]) in layer order."""
        missing = [l for l in range(n_layers) if l not in self.layers]
        if missing:
            raise RuntimeError(f"capture saw no attention call for layers {missing}")
        rows = torch.stack([self.layers[l].attention_row for l in range(n_layers)], dim=1)
        outs = torch.stack([self.layers[l].head_output for l in range(n_layers)], dim=1)
        return rows, outs

    def first_position(self, n_layers: int) -> torch.Tensor:
        """Attention to position 0 averaged over queries 1..T-1: [B, L, H] (a pass with
        ``want_first_position`` set)."""
        missing = [l for l in range(n_layers) if self.layers[l].first_position_attention is None]
        if missing:
            raise RuntimeError(f"no first-position attention for layers {missing}: set want_first_position first")
        return torch.stack([self.layers[l].first_position_attention for l in range(n_layers)], dim=1)


#: Attribute under which ``capturing`` hands each attention block of a model its recorder.
_RECORDER_ATTR = "_headwatch_recorder"


def per_query_head(module: nn.Module, kv: torch.Tensor) -> torch.Tensor:
    """Keys or values ``kv`` [B, H_kv, T, D] repeated to the query heads, [B, H, T, D]: under
    grouped-query attention ``num_key_value_groups`` query heads share one key/value head (query head
    h reads kv head h // groups, as transformers' ``repeat_kv``); without it, ``kv`` itself."""
    groups = getattr(module, "num_key_value_groups", 1)
    return repeat_kv(kv, groups) if groups > 1 else kv


def _scores(module: nn.Module, query, key, scaling, softcap, rows: slice = slice(None)) -> torch.Tensor:
    """Attention logits in fp32 for the query positions ``rows``: [B, H, rows, T_k].

    Keys are repeated to the query heads (grouped-query attention: ``num_key_value_groups`` query
    heads share one key head); scores are scaled by ``scaling`` (default 1/sqrt(d_head): Gemma's
    query_pre_attn_scalar arrives here as the layer's own scaling) and, where the layer softcaps its
    logits (Gemma 2's attn_logit_softcapping), squashed to softcap * tanh(scores / softcap) as its
    eager attention does, before the mask.
    """
    key = per_query_head(module, key)
    scores = torch.matmul(query[:, :, rows, :].float(), key.float().transpose(2, 3))
    scores = scores * (scaling if scaling is not None else query.shape[-1] ** -0.5)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    return scores


def _masked(scores: torch.Tensor, attention_mask, rows: slice) -> torch.Tensor:
    """``scores`` [B, H, rows, T_k] with the layer's mask (bool: keep where True; float: added)
    applied for the same query rows; a layer with no mask (SDPA's plain causal case) keeps all."""
    if attention_mask is None:
        return scores
    mask = attention_mask[:, :, rows, : scores.shape[-1]]
    return scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask.float()


def _query_row_attention(module: nn.Module, query, key, attention_mask, scaling, softcap=None) -> torch.Tensor:
    """softmax(softcap(q_{T-1} K^T * scaling) + mask) in fp32: [B, H, T]."""
    last = slice(query.shape[-2] - 1, None)
    return torch.softmax(_masked(_scores(module, query, key, scaling, softcap, last), attention_mask, last), dim=-1)[:, :, 0, :]


def _first_position_attention(module: nn.Module, query, key, attention_mask, scaling, softcap=None) -> torch.Tensor:
    """Attention to position 0 from every query position 1..T-1, averaged over them: [B, H], fp32.

    The column of position 0 in softmax(Q K^T * scaling + causal mask + mask), in fp32. Without
    softcapping it is SDPA's output for values that are 1 at position 0 and 0 elsewhere (one fused
    kernel, no B x H x T x T matrix: a quarter of the explicit computation's time on CPU); with it,
    the whole rows are computed as eager attention does.
    """
    T, T_k = query.shape[-2], key.shape[-2]
    causal = torch.ones(T, T_k, dtype=torch.bool, device=query.device).tril()
    if softcap is None:
        key = per_query_head(module, key).float()
        first = torch.zeros_like(key)  # [B, H, T_k, D]: output column 0 is the weight on position 0
        first[:, :, 0, 0] = 1
        if attention_mask is None:
            mask = {"is_causal": True}
        else:
            m = attention_mask[:, :, :, :T_k]
            mask = {"attn_mask": m & causal if m.dtype == torch.bool else m.float().masked_fill(~causal, float("-inf"))}
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        weights = F.scaled_dot_product_attention(query.float(), key, first, scale=scale, **mask)[:, :, :, 0]
        return weights[:, :, 1:].mean(-1)
    scores = _scores(module, query, key, scaling, softcap)
    scores = _masked(scores.masked_fill(~causal, float("-inf")), attention_mask, slice(None))
    return torch.softmax(scores, dim=-1)[:, :, 1:, 0].mean(-1)


def _softcapped_attention(module: nn.Module, query, key, value, attention_mask, scaling, softcap) -> torch.Tensor:
    """The layer output where SDPA cannot compute it (softcapped logits): [B, T, H, D], in the query's
    dtype, as the model's eager attention computes it (scores, softcap, mask, softmax in fp32, then V)."""
    value = per_query_head(module, value)
    scores = _scores(module, query, key, scaling, softcap)
    if attention_mask is None:  # SDPA's mask functions leave the plain causal mask implicit
        T = query.shape[-2]
        causal = torch.ones(T, key.shape[-2], dtype=torch.bool, device=scores.device).tril(key.shape[-2] - T)
        scores = scores.masked_fill(~causal, float("-inf"))
    weights = torch.softmax(_masked(scores, attention_mask, slice(None)), dim=-1).to(value.dtype)
    return torch.matmul(weights, value).transpose(1, 2).contiguous()


def capture_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Attention function registered with transformers as ``headwatch_capture``.

    query: [B, H, T, D]; key/value: [B, H_kv, T, D]. Returns (output [B, T, H, D], None) exactly
    like the SDPA implementation (or, for a layer that softcaps its logits, which SDPA cannot, like
    the eager one), and records the query row and head outputs on the side.
    """
    softcap = kwargs.get("softcap")
    if softcap is None:
        output, _ = sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    else:
        output = _softcapped_attention(module, query, key, value, attention_mask, scaling, softcap)
    recorder = getattr(module, _RECORDER_ATTR, None)
    if recorder is not None:
        row = _query_row_attention(module, query, key, attention_mask, scaling, softcap)
        first = (_first_position_attention(module, query, key, attention_mask, scaling, softcap)
                 if recorder.want_first_position else None)
        recorder.layers[module.layer_idx] = LayerCapture(
            attention_row=row, head_output=output[:, -1, :, :].detach(), first_position_attention=first
        )
    return output, None


AttentionInterface.register(CAPTURE_IMPLEMENTATION, capture_attention_forward)
# Masks are built as for SDPA (which may skip the mask entirely for plain causal attention).
AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


@contextlib.contextmanager
def capture_kernel(model: nn.Module) -> Iterator[None]:
    """Within the block, ``model`` computes attention as the screen does (``headwatch_capture``: SDPA,
    or eager attention's own computation where a layer softcaps), recording nothing; its attention
    implementation is restored afterwards. The ablation passes run so, whatever the model was loaded
    with: their numbers are then computed as the screen's are, and the layers they share with it
    are the same tensors (probes/ablation.py)."""
    head_geometry(model)  # fail early, with the supported list, on an unknown architecture
    previous = model.config._attn_implementation
    model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


@contextlib.contextmanager
def capturing(model: nn.Module) -> Iterator[CaptureRecorder]:
    """Within the block, every forward pass of ``model`` fills the yielded recorder.

    The model computes attention as under :func:`capture_kernel`. Each new forward pass overwrites
    the previous pass's layers.
    """
    recorder = CaptureRecorder()
    with capture_kernel(model):
        blocks = attention_modules(model)
        for block in blocks:  # the recorder travels with this model's blocks: no process-wide state
            setattr(block, _RECORDER_ATTR, recorder)
        try:
            yield recorder
        finally:
            for block in blocks:
                delattr(block, _RECORDER_ATTR)


class NonFiniteError(InputError, FloatingPointError):
    """The checkpoint (or the dtype it is computed in) gives NaN or inf: bad input, not a defect."""


def check_finite(rows: torch.Tensor, outputs: torch.Tensor, where: str) -> None:
    """Raise with the offending layers if attention or head outputs are NaN/inf.

    rows: [B, L, H, T]; outputs: [B, L, H, D].
    """
    for name, t in (("attention", rows), ("head output", outputs)):
        bad = ~torch.isfinite(t)
        if bad.any():
            layers = sorted({int(l) for l in bad.nonzero()[:, 1].tolist()})
            raise NonFiniteError(
                f"non-finite {name} in layers {layers} ({where}); the checkpoint or dtype gives "
                "garbage here. Measure in float32 (--dtype float32), which the paper's author also "
                "needed for early checkpoints."
            )


__all__ = ["NonFiniteError", "capture_kernel", "capturing", "CaptureRecorder", "LayerCapture", "check_finite", "attention_modules"]
