"""Parity of the capture pass with eager output_attentions and with a hook on the out-projection
(``capture_parity`` in tests/conftest.py), and the architecture table."""
import pytest
import torch

from headwatch_testing.tiny import TINY_TYPES, miniature_model, tiny_model
from headwatch.probes.architectures import ARCHITECTURES, arch_spec, attention_modules, head_geometry, out_proj_modules
from headwatch.probes.capture import capturing, check_finite


@pytest.mark.parametrize("model_type", TINY_TYPES)
def test_capture_equals_eager_attention_and_out_proj_input(model_type, capture_parity):
    model = tiny_model(model_type, seed=1, attn_implementation="eager")
    g = head_geometry(model)
    tokens = torch.randint(0, 300, (3, 40), generator=torch.Generator().manual_seed(0))
    parity = capture_parity(model, tokens)  # tests/conftest.py: the check the miniatures share
    assert parity.rows_shape == (3, g.n_layers, g.n_heads, 40)
    parity.assert_within()  # rows and head outputs <= 1e-5, logits <= 1e-4
    # The model's own attention implementation is restored afterwards.
    assert model.config._attn_implementation == "eager"


def test_every_table_row_names_real_modules():
    for model_type in TINY_TYPES:
        model = tiny_model(model_type)
        assert arch_spec(model) is ARCHITECTURES[model.config.model_type]
        assert len(out_proj_modules(model)) == head_geometry(model).n_layers


def test_unknown_architecture_is_explained():
    model = tiny_model("gpt_neox")
    model.config.model_type = "mamba"
    with pytest.raises(ValueError, match="no architecture entry for model_type 'mamba'"):
        head_geometry(model)


def test_non_finite_values_are_reported_with_their_layer():
    rows = torch.zeros(2, 3, 4, 8)
    rows[1, 2, 0, 5] = float("nan")
    with pytest.raises(FloatingPointError, match=r"layers \[2\]"):
        check_finite(rows, torch.zeros(2, 3, 4, 4), "test")


# ---- GPT-2: fused Conv1D c_attn, per-layer score scaling -------------------------------------------


def _sharpen_gpt2_attention(model, factor: float) -> None:
    """Scale the q and k columns of every layer's fused c_attn (a Conv1D: weight [d_model, 3 * d_model],
    columns q | k | v) so that attention rows are far from uniform: random-init scores are so small
    that softmax hides any error in their scale."""
    d = model.config.n_embd
    with torch.no_grad():
        for attn in attention_modules(model):
            assert attn.c_attn.weight.shape == (d, 3 * d)  # stored transposed against nn.Linear
            attn.c_attn.weight[:, : 2 * d].mul_(factor)


def test_gpt2_capture_keeps_the_per_layer_scaling(capture_parity):
    """Mistral's GPT-2 (its published config, miniature) scales layer l's scores by 1/(l + 1) as well
    as 1/sqrt(d_head). With sharp attention the capture matches eager within 1e-5, and the rows a
    capture that dropped the layer factor would record (recomputed here from the same q and k) are
    far off: the parity check can see a scaling error."""
    model = miniature_model("mistral-gpt2-small", seed=3, attn_implementation="eager")
    assert model.config.scale_attn_by_inverse_layer_idx and model.config.reorder_and_upcast_attn
    _sharpen_gpt2_attention(model, 6.0)
    tokens = torch.randint(100, 10000, (3, 40), generator=torch.Generator().manual_seed(1))
    parity = capture_parity(model, tokens)
    parity.assert_within()
    qkv = {}
    handles = [a.c_attn.register_forward_hook(lambda _m, _i, out, l=l: qkv.__setitem__(l, out))
               for l, a in enumerate(attention_modules(model))]
    with torch.no_grad(), capturing(model) as recorder:
        model(tokens)
    for h in handles:
        h.remove()
    g = head_geometry(model)
    rows, _ = recorder.stacked(g.n_layers)
    q, k, _v = qkv[1].split(model.config.n_embd, dim=-1)
    scores = torch.einsum("bhd,bthd->bht", q.view(3, 40, g.n_heads, g.d_head)[:, -1],
                          k.view(3, 40, g.n_heads, g.d_head)) * g.d_head ** -0.5  # [B, H, T], last query
    assert (torch.softmax(scores / 2, dim=-1) - rows[:, 1]).abs().max() <= 1e-5  # layer 1: 1/(1 + 1)
    assert (torch.softmax(scores, dim=-1) - rows[:, 1]).abs().max() > 1e-2, "the layer factor should matter here"


# ---- grouped-query attention: one helper repeats keys and values to the query heads ---------------


def test_per_query_head_repeats_kv_heads_for_the_three_uses():
    """``per_query_head`` is the one place keys/values are repeated to the query heads (GQA); the
    scores, the first-position attention and the softcapped output computed through it on a module
    with 2 query heads per kv head equal those of a plain module given the keys repeated by hand
    (query head h reads kv head h // 2). Negative control: repeated the other way (tiled), they differ."""
    import types

    from headwatch.probes import capture

    torch.manual_seed(0)
    B, H, H_kv, T, D = 2, 4, 2, 6, 8
    q, k, v = torch.randn(B, H, T, D), torch.randn(B, H_kv, T, D), torch.randn(B, H_kv, T, D)
    gqa, plain = types.SimpleNamespace(num_key_value_groups=H // H_kv), types.SimpleNamespace()
    by_hand = lambda x: x.repeat_interleave(H // H_kv, dim=1)  # noqa: E731
    tiled = lambda x: x.repeat(1, H // H_kv, 1, 1)  # noqa: E731

    assert torch.equal(capture.per_query_head(gqa, k), by_hand(k))
    assert capture.per_query_head(plain, k) is k
    uses = [
        lambda m, kk, vv: capture._scores(m, q, kk, None, None),
        lambda m, kk, vv: capture._first_position_attention(m, q, kk, None, None),
        lambda m, kk, vv: capture._softcapped_attention(m, q, kk, vv, None, None, 30.0),
    ]
    for use in uses:
        grouped = use(gqa, k, v)
        torch.testing.assert_close(grouped, use(plain, by_hand(k), by_hand(v)))
        assert not torch.allclose(grouped, use(plain, tiled(k), tiled(v)))
