"""Config-faithful miniatures of Pythia 1B, OLMo 1B 0724, OLMoE 1B-7B, the PolyPythia sizes, GPT-2 small
and Mistral's GPT-2 small: flags, capture parity, pipeline.

A miniature (``headwatch_testing.tiny.miniature_model``) is the published config
(``headwatch.fixtures.realconfigs``) with only its sizes shrunk, so the flags that change how attention is computed (partial rotary,
parallel residual, qkv clipping, non-parametric LayerNorm, full-width q/k norm, 64 experts top-8
without renormalisation, GPT-2's fused Conv1D qkv, learned positions and Mistral's per-layer score
scaling) are exercised by the capture path exactly as on the real models.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from headwatch.fixtures.realconfigs import REAL_MODELS, config_value, real_config, real_model
from headwatch_testing.tiny import DISTINCT_MINIATURES, MINIATURE_SIZES, MINIATURES, miniature_config, miniature_model
from headwatch.probes.architectures import attention_modules, head_geometry
from headwatch.probes.record import HEAD_CLASSES


def probe_tokens(n: int = 3, seq_len: int = 64) -> torch.Tensor:
    """Token ids in the paper's probe range [100, 10000): [n, seq_len]."""
    return torch.randint(100, 10000, (n, seq_len), generator=torch.Generator().manual_seed(0))


# ---- the miniatures keep every published flag -----------------------------------------------------


@pytest.mark.parametrize("name", MINIATURES)
def test_miniature_keeps_every_published_flag_and_shrinks_only_sizes(name):
    row = real_model(name)
    full, mini = real_config(name), miniature_config(name)
    for what, path, value in row.flags:
        assert config_value(mini, path) == value == config_value(full, path), what
    # Every key other than the declared sizes is the published config's, the stored dtype included.
    full_d, mini_d = full.to_dict(), mini.to_dict()
    differing = {k for k in full_d.keys() | mini_d.keys() if full_d.get(k) != mini_d.get(k)}
    assert differing == set(MINIATURE_SIZES[name])
    assert (str(mini.dtype).removeprefix("torch.") if mini.dtype else "float32") == row.stored_dtype
    assert mini.vocab_size == row.published["vocab_size"] >= 10000  # the real vocabulary: the paper's probe ids fit


def test_pythia_sizes_differ_from_pythia_1b_in_sizes_only():
    """So Pythia 1B's miniature is every Pythia size's miniature (DISTINCT_MINIATURES lists one)."""
    base = real_model("pythia-1b")
    for name in ("pythia-14m", "pythia-31m", "pythia-70m", "pythia-160m", "pythia-410m", "pythia-1.4b", "pythia-2.8b",
                 "pythia-6.9b", "pythia-12b"):
        row = real_model(name)
        assert {k for k in row.published if row.published[k] != base.published[k]} <= set(base.size_keys)
        assert row.flags == base.flags and row.sources
        if name in MINIATURE_SIZES:  # the vocabulary apart (6.9b and 12b pad theirs): a size, no code path
            assert {**miniature_config(name).to_dict(), "vocab_size": 0} == {**miniature_config("pythia-1b").to_dict(),
                                                                             "vocab_size": 0}

    def key(n):
        return tuple(sorted((k, str(v)) for k, v in miniature_config(n).to_dict().items() if k != "vocab_size"))

    every, distinct = {key(n) for n in MINIATURES}, {key(n) for n in DISTINCT_MINIATURES}
    assert every == distinct and len(distinct) == len(DISTINCT_MINIATURES)


def test_gpt2_flags_are_live_in_the_modules():
    """Fused Conv1D qkv (weight stored [in, out]), learned positions, tied embeddings, and Mistral's
    1/(layer + 1) score scaling, which GPT-2 small does not have."""
    for name, per_layer in (("gpt2-small", False), ("mistral-gpt2-small", True)):
        model = miniature_model(name)
        g = head_geometry(model)
        attns = attention_modules(model)
        assert type(attns[0].c_attn).__name__ == "Conv1D" and attns[0].c_attn.weight.shape == (128, 3 * 128)
        assert model.transformer.wpe.weight.shape == (1024, 128)  # learned absolute positions
        assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
        assert [a.scaling for a in attns] == [g.d_head ** -0.5 / ((l + 1) if per_layer else 1) for l in range(g.n_layers)]
        assert model.config.reorder_and_upcast_attn is per_layer


def test_published_flags_are_live_in_the_modules():
    """The flags reach the modules transformers builds (not only the config object)."""
    neox = miniature_model("pythia-1b")
    attn = attention_modules(neox)[0]
    assert attn.rotary_ndims == attn.head_size // 4 == 8  # partial rotary 0.25 of 32 dims
    assert neox.config.use_parallel_residual and neox.gpt_neox.layers[0].use_parallel_residual
    assert neox.get_output_embeddings().weight.data_ptr() != neox.get_input_embeddings().weight.data_ptr()  # untied

    olmo = miniature_model("olmo-1b-0724")
    layer = olmo.model.layers[0]
    assert list(layer.input_layernorm.parameters()) == [] == list(olmo.model.norm.parameters())  # non-parametric
    assert all(getattr(m, "bias", None) is None for m in olmo.modules() if isinstance(m, torch.nn.Linear))
    assert olmo.get_output_embeddings().weight.data_ptr() != olmo.get_input_embeddings().weight.data_ptr()

    olmoe = miniature_model("olmoe-1b-7b-0924")
    attn = attention_modules(olmoe)[0]
    g = head_geometry(olmoe)
    assert attn.q_norm.weight.shape == attn.k_norm.weight.shape == (g.n_heads * g.d_head,)  # full width
    moe = olmoe.model.layers[0].mlp
    assert moe.gate.weight.shape[0] == 64 and moe.gate.top_k == 8 and moe.gate.norm_topk_prob is False
    # top-8 of 64 without renormalisation: the routing weights of a token sum to less than 1.
    with torch.no_grad():
        _, weights, index = moe.gate(torch.randn(5, 128))
    assert index.shape == (5, 8) and (weights.sum(-1) < 0.999).all()


# ---- capture parity on each miniature ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", DISTINCT_MINIATURES)
def test_capture_parity_on_each_miniature(name, capture_parity):
    """Rows and head outputs <= 1e-5 of the eager references, logits <= 1e-4 (tests/conftest.py)."""
    capture_parity(miniature_model(name, seed=1), probe_tokens()).assert_within()


@pytest.mark.slow
def test_capture_parity_with_qkv_clipping_engaged(capture_parity):
    """OLMo's clip_qkv only bites on large activations: scale q/k/v until about 15% of q passes 8.

    Attention rows stay within the absolute bound. Head outputs are compared relative to their
    size: v is clamped at 8, not at random-init scale ~0.1, and SDPA's and eager's fp32 rounding
    differ by ~1e-6 of that (measured: 2.7e-5 absolute on outputs up to ~8). The capture records
    exactly what enters the out-projection (difference 0 against the hook on its own pass).
    """
    model = miniature_model("olmo-1b-0724", seed=2)
    pre_clip: list[torch.Tensor] = []
    with torch.no_grad():
        for attn in attention_modules(model):
            for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
                proj.weight.mul_(25.0)
            attn.q_proj.register_forward_hook(lambda _m, _a, out: pre_clip.append(out.detach().clone()))
    parity = capture_parity(model, probe_tokens())
    clipped = torch.cat([x.flatten() for x in pre_clip]).abs().gt(8.0).float().mean()
    assert clipped > 0.05, f"clipping not engaged ({float(clipped):.3f} of q above 8)"
    scale = parity.head_output_scale
    assert scale > 1.0  # clamped values, far above random-init size
    assert parity.rows_vs_eager <= parity.bound, parity
    assert parity.heads_vs_eager_hook <= parity.bound * scale, parity  # relative to the outputs' size
    assert parity.heads_vs_capture_hook == 0.0, parity


# ---- the whole pipeline on each miniature -----------------------------------------------------------


@pytest.fixture(scope="module")
def miniature_folders(tmp_path_factory) -> Path:
    """Each miniature saved in its stored dtype as a local panel folder ``<name>/step0``."""
    root = tmp_path_factory.mktemp("miniatures")
    for name in DISTINCT_MINIATURES:
        miniature_model(name, seed=3, dtype="stored").save_pretrained(root / name / "step0")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", DISTINCT_MINIATURES)
def test_whole_measure_pipeline_on_each_miniature(name, miniature_folders, tmp_path, measure_step0):
    record = measure_step0(miniature_folders / name, tmp_path / "c")  # tests/conftest.py: 12 examples
    g = head_geometry(miniature_model(name))
    assert (record.n_layers, record.n_heads, record.d_head) == (g.n_layers, g.n_heads, g.d_head)
    assert set(record.all_head_selectivity) == set(record.pr) == set(record.heads())
    for sel in record.all_head_selectivity.values():
        assert set(sel) == set(HEAD_CLASSES) and all(math.isfinite(v) and v >= 0 for v in sel.values())
    assert all(1 <= pr <= 12 for pr in record.pr.values())
    assert record.n_examples_valid == 12 and 0 <= record.task.top1 <= record.task.top5 <= 1
    # stored in float16/float32/bfloat16, probed in float32 (what the paper's author needed)
    assert record.provenance["dtype"] == "float32" and record.provenance["model_type"] == REAL_MODELS[name].published["model_type"]
    assert record.provenance["resolved_from"] == "local" and len(record.provenance["weights_hash"]) == 64


def test_gpt2_probe_longer_than_its_learned_positions_is_refused_before_the_weights(tmp_path):
    """GPT-2 has 1024 learned positions (n_positions; transformers reads it as max_position_embeddings):
    a longer probe is refused from config.json alone, naming the limit, not an index error mid-forward."""
    from headwatch.fixtures import loading, preflight
    from headwatch.probes.record import ProbeSettings
    from headwatch.validation import InputError

    miniature_model("mistral-gpt2-small", dtype="stored").save_pretrained(tmp_path / "run" / "step0")
    resolved = loading.resolve_local(tmp_path / "run", "step0")
    settings = ProbeSettings(n_examples=4, seq_len=1025, vocab_lo=100, vocab_hi=10000, n_pr=4, batch_size=4)
    with pytest.raises(InputError, match=r"seq_len: got 1025, beyond the 1024 positions"):
        preflight.check_before_load(resolved, settings, offline=True)
