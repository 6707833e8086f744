"""Full-size models from the published configs: parameter counts, FLOP floor, the random checkpoint writer.

``benchmarks/full_size.py`` times these models; here is what it relies on, checked cheaply (meta
device for the full configs, a miniature for the writer).
"""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from headwatch.fixtures import memory
from headwatch.fixtures.realconfigs import REAL_MODELS, real_config
from headwatch_testing.tiny import DISTINCT_MINIATURES, miniature_config
from headwatch.probes.architectures import ARCHITECTURES, parameter_counts
from headwatch_testing.random_checkpoint import write_random_checkpoint


def meta_model(name: str):
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(real_config(name))


@pytest.mark.parametrize("name,total,active", [
    # Pythia's own table: 1,011,781,632 parameters; OLMoE: 6.9 B total, 1.3 B active (embeddings included)
    ("pythia-1b", 1_011_781_632, 1_011_781_632),
    ("olmo-1b-0724", 1_279_787_008, 1_279_787_008),
    ("olmoe-1b-7b-0924", 6_919_161_856, 1_282_017_280),
])
def test_parameter_counts_of_the_published_configs(name, total, active):
    counts = parameter_counts(meta_model(name))
    assert counts.total == total
    assert counts.active_non_embedding + counts.embedding == active
    assert counts.embedding == 2 * 50304 * 2048  # untied input and output embeddings
    assert counts.flop_floor(512_000) == 2 * counts.active_non_embedding * 512_000


@pytest.mark.parametrize("name,mode", [("pythia-1b", "direct"), ("olmo-1b-0724", "direct"),
                                       ("olmoe-1b-7b-0924", "layer-by-layer")])
def test_what_the_suite_does_with_each_full_size_model_in_24_gib(name, mode):
    size = memory.model_size(real_config(name))
    assert size.stored_dtype == REAL_MODELS[name].stored_dtype
    assert memory.plan_memory(size, "float32", "cpu", host_available=20 * (1 << 30)).mode == mode


@pytest.mark.parametrize("name,non_embedding", [
    # the Pythia model cards' "Non-Embedding Params" column; GPT-2 small: 124,439,808 parameters in all
    ("pythia-14m", 1_189_888), ("pythia-31m", 4_739_072), ("pythia-70m", 18_915_328),
    ("pythia-160m", 85_056_000), ("pythia-410m", 302_311_424), ("gpt2-small", 124_439_808 - 50257 * 768),
    ("pythia-1.4b", 1_208_602_624), ("pythia-2.8b", 2_517_652_480), ("pythia-6.9b", 6_444_163_072),
    ("pythia-12b", 11_327_027_200),
])
def test_parameter_counts_of_the_suites_published_configs(name, non_embedding):
    counts = parameter_counts(meta_model(name))
    assert counts.non_embedding == counts.active_non_embedding == non_embedding
    if name == "gpt2-small":  # tied: one embedding matrix is both input and output
        assert counts.embedding == 50257 * 768 and counts.total == 124_439_808
    else:
        assert counts.embedding == 2 * real_config(name).vocab_size * real_config(name).hidden_size


@pytest.mark.slow
@pytest.mark.parametrize("name", DISTINCT_MINIATURES)
def test_random_checkpoint_is_written_layer_by_layer_in_the_stored_dtype(name, tmp_path):
    config = miniature_config(name)
    info = write_random_checkpoint(config, tmp_path / "ck", seed=1)
    assert info.n_shards == config.num_hidden_layers
    assert not list(tmp_path.glob(".ck.staging-*"))  # staged, then renamed into place
    model, loading_info = AutoModelForCausalLM.from_pretrained(tmp_path / "ck", dtype=None, output_loading_info=True)
    assert not loading_info["missing_keys"] and not loading_info["unexpected_keys"] and not loading_info["mismatched_keys"]
    assert next(model.parameters()).dtype == getattr(torch, REAL_MODELS[name].stored_dtype)  # as published
    reference = AutoModelForCausalLM.from_config(config)
    assert {k: v.shape for k, v in model.state_dict().items()} == {k: v.shape for k, v in reference.state_dict().items()}
    sd = model.state_dict()
    layers = ARCHITECTURES[config.model_type].layers  # "model.layers", "transformer.h", ...
    first = next(k for k in sd if k.startswith(f"{layers}.0.") and sd[k].dim() >= 2)
    assert not torch.equal(sd[first], sd[first.replace(f"{layers}.0.", f"{layers}.1.")])  # each layer its own draw
    assert 0.015 < float(sd[first].float().std()) < 0.025  # the model's own init (initializer_range 0.02)
    with pytest.raises(FileExistsError):
        write_random_checkpoint(config, tmp_path / "ck")


@pytest.mark.slow
def test_flop_count_of_the_benchmark_meets_the_floor_on_each_miniature():
    """The benchmark's FLOP counter sees every matmul, the experts' grouped_mm included."""
    import importlib.util
    from pathlib import Path

    from headwatch_testing.tiny import MINIATURES, miniature_model
    from headwatch.probes.record import ProbeSettings

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "full_size.py"
    spec = importlib.util.spec_from_file_location("full_size_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    settings = ProbeSettings(n_examples=2, seq_len=64, vocab_lo=100, vocab_hi=10000, n_pr=2, batch_size=2)
    for name in MINIATURES:
        model = miniature_model(name)
        floor = parameter_counts(model).probe_pass_floor(2, 64)
        counted = bench.count_flops(model, settings)
        # above the floor by attention scores (T = 64 vs d_model 128, counted as whole T x T) and the
        # last position's head: 1.08-1.62 on these two-layer miniatures, whose last layer's MLP (run at
        # one position) is half of their MLPs
        assert floor < counted < 1.7 * floor, (name, counted / floor)
