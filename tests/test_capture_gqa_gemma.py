"""The grouped-query-attention and Gemma rows of probes/architectures.py (issue 36), each checked as
the other rows are: the capture against eager attention and an out-projection hook
(``capture_parity``), and against an independent computation written here from the config alone:
the rotary table from rope_theta, keys repeated to their query heads, the query scaling, the
sliding window, softcapping. Tiny random configs (testing/headwatch_testing/tiny.py), so no package is needed.

Random-init scores are so small that softmax hides errors in their scale; each model is sharpened
first (q and k scaled up), and each test shows that the independent computation with the feature
left out (a wrong scaling, no window, no softcap, keys not repeated) is far off: the check can see it.
"""
from __future__ import annotations

import pytest
import torch

from headwatch_testing.tiny import tiny_model
from headwatch.probes.architectures import attention_modules, head_geometry
from headwatch.probes.capture import capturing
from headwatch.probes.measure import measure
from headwatch.probes.record import ProbeSettings

B, T = 3, 40


def _sharpen(model, factor: float) -> None:
    """Scale q and k up so attention rows are far from uniform (Gemma normalises q and k after the
    projection, so its norms' weights are scaled: Gemma's RMSNorm multiplies by 1 + weight)."""
    with torch.no_grad():
        for attn in attention_modules(model):
            if hasattr(attn, "q_norm"):
                for norm in (attn.q_norm, attn.k_norm):
                    norm.weight.copy_(torch.full_like(norm.weight, factor - 1.0))
            else:
                attn.q_proj.weight.mul_(factor)
                attn.k_proj.weight.mul_(factor)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x [B, T, H, D] rotated by position (the default rotary embedding, from rope_theta alone)."""
    D = x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * inv_freq[None]  # [T, D/2]
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    x = x.double()
    return x * cos + _rotate_half(x) * sin


def independent_attention(model, tokens: torch.Tensor, *, scaling: bool = True, window: bool = True,
                          softcap: bool = True, repeat_kv: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(query-row attention [B, L, H, T], head outputs at the query [B, L, H, D]) recomputed in float64
    from each layer's q, k and v (after Gemma's q/k norms, before the rotary embedding) and the config.

    The keyword switches leave one feature out, to show that the comparison can see it."""
    cfg = model.config
    g = head_geometry(model)
    n_kv = cfg.num_key_value_heads
    seen: dict[tuple[int, str], torch.Tensor] = {}
    handles = []
    for l, attn in enumerate(attention_modules(model)):
        q_src = attn.q_norm if hasattr(attn, "q_norm") else attn.q_proj
        k_src = attn.k_norm if hasattr(attn, "k_norm") else attn.k_proj
        for name, module in (("q", q_src), ("k", k_src), ("v", attn.v_proj)):
            handles.append(module.register_forward_hook(lambda _m, _i, out, l=l, name=name: seen.__setitem__((l, name), out)))
    with torch.no_grad():
        model(tokens)
    for h in handles:
        h.remove()
    layer_types = getattr(cfg, "layer_types", None) or ["full_attention"] * g.n_layers
    rows, outputs = [], []
    pos = torch.arange(T)

    def per_position(x: torch.Tensor, heads: int) -> torch.Tensor:
        """[B, T, heads, D] from a projection's [B, T, heads * D] or a q/k norm's [B, heads, T, D]."""
        return x.transpose(1, 2) if x.dim() == 4 else x.reshape(B, T, heads, g.d_head)

    for l in range(g.n_layers):
        q = per_position(seen[(l, "q")], g.n_heads)
        k = per_position(seen[(l, "k")], n_kv)
        v = per_position(seen[(l, "v")], n_kv).double()
        rope = cfg.rope_parameters.get(layer_types[l], cfg.rope_parameters)
        q, k = _rope(q, rope["rope_theta"]), _rope(k, rope["rope_theta"])
        # query head h reads key/value head h // (H / H_kv); without the repetition: head h mod H_kv
        kv_of = [h // (g.n_heads // n_kv) if repeat_kv else h % n_kv for h in range(g.n_heads)]
        k, v = k[:, :, kv_of], v[:, :, kv_of]  # [B, T, H, D]
        scale = (cfg.query_pre_attn_scalar if scaling and hasattr(cfg, "query_pre_attn_scalar") else g.d_head) ** -0.5
        s = torch.einsum("bhd,bthd->bht", q[:, -1], k) * scale  # [B, H, T]: the last query
        cap = getattr(cfg, "attn_logit_softcapping", None)
        if softcap and cap is not None:
            s = torch.tanh(s / cap) * cap
        if window and layer_types[l] == "sliding_attention":
            s = s.masked_fill((T - 1 - pos) >= cfg.sliding_window, float("-inf"))
        w = torch.softmax(s, dim=-1)
        rows.append(w)
        outputs.append(torch.einsum("bht,bthd->bhd", w, v))
    return torch.stack(rows, dim=1), torch.stack(outputs, dim=1)


def _captured(model, tokens):
    with torch.no_grad(), capturing(model) as recorder:
        model(tokens)
    return recorder.stacked(head_geometry(model).n_layers)


def _tokens(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 300, (B, T), generator=torch.Generator().manual_seed(seed))


# SmolLM2-135M's head layout (9 query heads over 3 key/value heads) and Gemma 3 270M's (4 over 1).
CASES = {
    "llama-9q-3kv": dict(model_type="llama", n_heads=9, n_kv_heads=3, d_model=72),
    "gemma3_text": dict(model_type="gemma3_text"),
}
MATTERS = {"llama-9q-3kv": ("repeat_kv",), "gemma3_text": ("scaling", "window")}


@pytest.mark.parametrize("case", CASES)
def test_capture_matches_eager_and_an_independent_computation(case, capture_parity):
    kwargs = dict(CASES[case])
    model = tiny_model(kwargs.pop("model_type"), seed=2, attn_implementation="eager", **kwargs)
    if case == "llama-9q-3kv":
        assert (model.config.num_attention_heads, model.config.num_key_value_heads) == (9, 3)
    _sharpen(model, 4.0)
    tokens = _tokens()
    parity = capture_parity(model, tokens)
    parity.assert_within()
    rows, outputs = _captured(model, tokens)
    ref_rows, ref_outputs = independent_attention(model, tokens)
    assert (rows.double() - ref_rows).abs().max() <= 1e-5
    assert (outputs.double() - ref_outputs).abs().max() <= 1e-5 * max(1.0, float(ref_outputs.abs().max()))
    # the comparison sees each feature the case has left out: keys read by the wrong query heads
    # (9 over 3); Gemma's scaling (24 ** -0.5, not 32 ** -0.5) and layer 0's window
    for switch in MATTERS[case]:
        other, _ = independent_attention(model, tokens, **{switch: False})
        assert (rows.double() - other).abs().max() > 1e-2, switch


def test_gemma3_sliding_window_layer_attends_inside_its_window_only():
    """Layer 0 of the tiny Gemma 3 is a sliding-window layer (window 8 < T): the captured rows hold
    exactly zero attention outside the window, as the layer's own mask says."""
    model = tiny_model("gemma3_text", seed=3, attn_implementation="eager")
    assert model.config.layer_types[0] == "sliding_attention" and model.config.sliding_window < T
    _sharpen(model, 4.0)
    rows, _ = _captured(model, _tokens(1))
    assert float(rows[:, 0, :, : T - model.config.sliding_window].abs().max()) == 0.0
    assert torch.allclose(rows[:, 0].sum(-1), torch.ones(B, rows.shape[2]), atol=1e-5)


def test_gemma2_softcapping_is_applied_as_eager_attention_applies_it(capture_parity):
    """Gemma 2 softcaps its logits (softcap * tanh(s / softcap)), which SDPA cannot: the capture then
    computes the layer itself. With the cap made to bite (2.0, sharp attention) it matches eager and
    the independent computation, and one without the cap is far off."""
    model = tiny_model("gemma2", seed=4, attn_implementation="eager")
    model.config.attn_logit_softcapping = 2.0
    for attn in attention_modules(model):
        attn.attn_logit_softcapping = 2.0
    _sharpen(model, 6.0)
    tokens = _tokens(2)
    capture_parity(model, tokens).assert_within()
    rows, outputs = _captured(model, tokens)
    ref_rows, ref_outputs = independent_attention(model, tokens)
    assert (rows.double() - ref_rows).abs().max() <= 1e-5
    assert (outputs.double() - ref_outputs).abs().max() <= 1e-5 * max(1.0, float(ref_outputs.abs().max()))
    uncapped, _ = independent_attention(model, tokens, softcap=False)
    assert (rows.double() - uncapped).abs().max() > 1e-2


@pytest.mark.parametrize("model_type", ["gemma3_text", "gemma2"])
def test_the_whole_probe_runs_on_the_gemma_rows(model_type):
    """measure() end to end (screen, PR, ablations, Sink^eps): head geometry from head_dim (wider
    than hidden_size / heads), ablation slices of o_proj's n_heads x head_dim input."""
    model = tiny_model(model_type, seed=5)
    g = head_geometry(model)
    assert g.d_head * g.n_heads != model.config.hidden_size  # o_proj's input is not hidden_size wide
    settings = ProbeSettings(n_examples=24, seq_len=64, vocab_lo=10, vocab_hi=300, n_pr=24, batch_size=8,
                             n_bootstrap=20, sink_examples=8)
    rec = measure(model, settings, model_name=model_type, revision="init", progress=False)
    assert (rec.n_layers, rec.n_heads, rec.d_head) == (g.n_layers, g.n_heads, g.d_head)
    assert len(rec.all_head_selectivity) == g.n_total and rec.sink is not None
