"""Per-architecture facts in one declarative table (model type -> where the heads live).

Everything architecture-specific that the probes need is a row here: where the decoder layers
are, which submodule is the attention block, which of its children is the output projection
(whose input is the concatenation of the per-head outputs), and how to read head geometry off
the config. Adding a model family is adding a row, not an if/elif elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch.nn as nn

from headwatch.validation import InputError


@dataclass(frozen=True)
class ArchSpec:
    """Paths are dotted attribute paths from the *CausalLM model object."""

    layers: str  # the ModuleList of decoder layers
    attention: str  # attention block, relative to one layer
    out_proj: str  # output projection, relative to the attention block
    #: Parameters (relative to one layer) that write the layer's output into the residual stream:
    #: the attention output projection and the MLP's (or experts') down-projection, biases included.
    #: Zeroing them makes the layer an exact identity (organisms grown part-way: model_organisms/growth.py).
    residual_writers: tuple[str, ...] = ()
    n_heads_attr: str = "num_attention_heads"
    n_layers_attr: str = "num_hidden_layers"
    #: Mixture-of-experts models: the experts module, relative to one layer, and the config
    #: attributes giving the expert count and experts per token (a token runs top_k of n experts).
    experts: str | None = None
    #: The position-wise MLP (or mixture of experts), relative to one layer (probes/lastlayer.py).
    mlp: str = "mlp"
    n_experts_attr: str = "num_experts"
    top_k_attr: str = "num_experts_per_tok"


_DENSE_WRITERS = ("self_attn.o_proj", "mlp.down_proj")
ARCHITECTURES: dict[str, ArchSpec] = {
    "gpt_neox": ArchSpec(layers="gpt_neox.layers", attention="attention", out_proj="dense",
                         residual_writers=("attention.dense", "mlp.dense_4h_to_h")),
    "olmo": ArchSpec(layers="model.layers", attention="self_attn", out_proj="o_proj", residual_writers=_DENSE_WRITERS),
    "olmo2": ArchSpec(layers="model.layers", attention="self_attn", out_proj="o_proj", residual_writers=_DENSE_WRITERS),
    "olmoe": ArchSpec(layers="model.layers", attention="self_attn", out_proj="o_proj", experts="mlp.experts",
                      residual_writers=("self_attn.o_proj", "mlp.experts.down_proj")),
    # Llama (SmolLM2 too): grouped-query attention, num_key_value_heads < num_attention_heads (SmolLM2-135M:
    # 9 query heads share 3 key/value heads). A head is a query head: the capture repeats each key/value
    # head to its num_key_value_groups query heads, and o_proj's input holds one slice per query head.
    "llama": ArchSpec(layers="model.layers", attention="self_attn", out_proj="o_proj", residual_writers=_DENSE_WRITERS),
    # Gemma 3 (text): grouped-query attention (270M: 4 query heads, 1 key/value head, head_dim 256, so
    # o_proj's input is 4 x 256 wide, not hidden_size), RMS norms on q and k before the rotary embedding,
    # scores scaled by query_pre_attn_scalar ** -0.5 (the layer's own ``scaling``), and sliding-window
    # layers (5 of every 6) whose window arrives as the layer's attention mask. The capture sees q and k
    # after the norms and the rotary embedding, and takes the scaling and the mask the layer passes.
    "gemma3_text": ArchSpec(layers="model.layers", attention="self_attn", out_proj="o_proj",
                            residual_writers=_DENSE_WRITERS),
    # Gemma 2: as Gemma 3 without q/k norms, and with attention-logit softcapping (softcap * tanh(s /
    # softcap), 50 by default), which SDPA cannot compute: the capture computes such a layer's output
    # itself, as the eager attention does (probes/capture.py).
    "gemma2": ArchSpec(layers="model.layers", attention="self_attn", out_proj="o_proj", residual_writers=_DENSE_WRITERS),
    # GPT-2: q, k and v come fused from one Conv1D ``c_attn`` and the output projection is the
    # Conv1D ``c_proj``. A Conv1D stores its weight as [in, out], the transpose of nn.Linear's;
    # nothing here reads projection weights, only ``c_proj``'s input (the concatenated head
    # outputs, [.., n_heads * d_head]), which is laid out as for every other row. Positions are a
    # learned absolute embedding (``transformer.wpe``), added once below the first layer.
    "gpt2": ArchSpec(layers="transformer.h", attention="attn", out_proj="c_proj",
                     residual_writers=("attn.c_proj", "mlp.c_proj")),
}


@dataclass(frozen=True)
class HeadGeometry:
    n_layers: int
    n_heads: int
    d_head: int

    @property
    def n_total(self) -> int:
        return self.n_layers * self.n_heads


def arch_spec(model: nn.Module) -> ArchSpec:
    """The table row for ``model``'s config.model_type, or a clear error listing supported types."""
    model_type = getattr(model.config, "model_type", None)
    try:
        return ARCHITECTURES[model_type]
    except KeyError:  # the user's checkpoint: bad input (preflight says so before any weights are read)
        raise InputError(
            f"headwatch has no architecture entry for model_type {model_type!r}; supported: "
            f"{sorted(ARCHITECTURES)}. Add a row to probes/architectures.py:ARCHITECTURES."
        ) from None


def head_geometry(model: nn.Module) -> HeadGeometry:
    spec = arch_spec(model)
    cfg = model.config
    n_heads = getattr(cfg, spec.n_heads_attr)
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    return HeadGeometry(n_layers=getattr(cfg, spec.n_layers_attr), n_heads=n_heads, d_head=d_head)


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """Attention block of every layer, in layer order."""
    spec = arch_spec(model)
    return [layer.get_submodule(spec.attention) for layer in model.get_submodule(spec.layers)]


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The ModuleList of decoder layers."""
    return model.get_submodule(arch_spec(model).layers)


def residual_writer_parameters(model: nn.Module, layer: int) -> dict[str, nn.Parameter]:
    """Parameters of decoder layer ``layer`` that write into the residual stream, by name relative
    to the layer (see ArchSpec.residual_writers); every writer the table names must exist."""
    spec = arch_spec(model)
    if not spec.residual_writers:
        raise ValueError(f"probes/architectures.py has no residual_writers for model_type {model.config.model_type!r}")
    params = dict(decoder_layers(model)[layer].named_parameters())
    out = {n: p for n, p in params.items() if any(n == w or n.startswith(w + ".") for w in spec.residual_writers)}
    found = {w for w in spec.residual_writers if any(n == w or n.startswith(w + ".") for n in out)}
    if found != set(spec.residual_writers):
        raise ValueError(f"layer {layer} has no parameter under {sorted(set(spec.residual_writers) - found)}")
    return out


def out_proj_modules(model: nn.Module) -> list[nn.Module]:
    """Output projection of every layer; its input [.., n_heads * d_head] holds the head outputs."""
    spec = arch_spec(model)
    return [attn.get_submodule(spec.out_proj) for attn in attention_modules(model)]


@dataclass(frozen=True)
class ParameterCounts:
    """Parameter counts of a model (works on a meta-device model: nothing is allocated).

    ``active_non_embedding`` counts what one token's forward pass multiplies by: every parameter
    outside the input and output embeddings, with expert weights scaled by top_k / n_experts.
    """

    total: int
    embedding: int
    non_embedding: int
    active_non_embedding: int
    #: Of ``active_non_embedding``: the last decoder layer's MLP (experts scaled as above).
    active_last_mlp: int = 0

    def flop_floor(self, tokens: int) -> float:
        """2 x active non-embedding parameters x tokens: the matmul FLOPs a forward pass cannot avoid."""
        return 2.0 * self.active_non_embedding * tokens

    def probe_pass_floor(self, n_examples: int, seq_len: int) -> float:
        """:meth:`flop_floor` of one probe pass over ``n_examples`` examples: the last layer's MLP runs
        at the query position only (probes/lastlayer.py)."""
        tokens = n_examples * seq_len
        return self.flop_floor(tokens) - 2.0 * self.active_last_mlp * (tokens - n_examples)


def parameter_counts(model: nn.Module) -> ParameterCounts:
    spec = arch_spec(model)
    params = dict(model.named_parameters())  # shared (tied) parameters appear once
    total = sum(p.numel() for p in params.values())
    embeddings = {id(m.weight) for m in (model.get_input_embeddings(), model.get_output_embeddings()) if m is not None}
    embedding = sum(p.numel() for p in params.values() if id(p) in embeddings)
    expert = 0
    if spec.experts is not None:
        cfg = model.config
        share = getattr(cfg, spec.top_k_attr) / getattr(cfg, spec.n_experts_attr)
        expert_ids = {id(p) for layer in model.get_submodule(spec.layers)
                      for p in layer.get_submodule(spec.experts).parameters()}
        expert = sum(p.numel() for p in params.values() if id(p) in expert_ids)
    else:
        share = 1.0
    non_embedding = total - embedding
    last_mlp = model.get_submodule(spec.layers)[-1].get_submodule(spec.mlp)
    last_expert = ({id(p) for p in model.get_submodule(spec.layers)[-1].get_submodule(spec.experts).parameters()}
                   if spec.experts is not None else set())
    last_mlp_active = sum(p.numel() * (share if id(p) in last_expert else 1.0) for p in last_mlp.parameters())
    return ParameterCounts(total, embedding, non_embedding, round(non_embedding - expert + expert * share),
                           round(last_mlp_active))
