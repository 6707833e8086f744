"""What the suite does when a checkpoint's float32 copy does not fit (OLMoE 1B-7B: 27.7 GB > 24 GiB).

It loads the weights in their stored dtype and computes in float32 one block at a time, which is
exact; when even that does not fit it refuses before reading any weights. Tested on the OLMoE
miniature (stored in bfloat16, like the real checkpoints) under an artificially low memory limit.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from headwatch.fixtures import loading, memory
from headwatch.fixtures.realconfigs import real_config
from headwatch_testing.tiny import miniature_config, miniature_model
from headwatch.probes.upcast import compute_layer_by_layer, upcast_blocks

GiB = 1 << 30


# ---- the plan, in numbers ------------------------------------------------------------------------


def test_full_size_olmoe_on_this_machine_is_probed_layer_by_layer():
    size = memory.model_size(real_config("olmoe-1b-7b-0924"))
    assert size.stored_dtype == "bfloat16"
    assert 6.9e9 < size.n_params < 6.95e9  # 6.92 B
    assert size.largest_block_params == 419_569_664  # one decoder layer: 64 experts x 3 x 2048 x 1024 + attention
    assert size.bytes("float32") > 24 * GiB  # does not fit the 24 GiB development machine
    plan = memory.plan_memory(size, "float32", "cpu", host_available=21 * GiB)
    assert plan.mode == "layer-by-layer" and plan.load_dtype == "bfloat16" and plan.compute_dtype == "float32"
    assert 15 * GiB < plan.need_bytes < 16.5 * GiB  # 12.9 GiB of weights + 1.6 GiB layer + 1 GiB headroom
    with pytest.raises(memory.NotEnoughMemory) as e:
        memory.plan_memory(size, "float32", "cpu", host_available=12 * GiB, what="allenai/OLMoE-1B-7B-0924@step5000")
    msg = str(e.value)
    for part in ("allenai/OLMoE-1B-7B-0924@step5000", "6.92 B parameters", "stored in bfloat16", "12.0 GiB available",
                 "float32: 26.8 GiB", "bfloat16 weights computed in float32 layer by layer: 15.5 GiB",
                 "--dtype bfloat16", "13.9 GiB", "HEADWATCH_MEMORY_LIMIT"):
        assert part in msg, (part, msg)


def test_plans_for_each_situation():
    size = memory.ModelSize(n_params=1_000_000_000, largest_block_params=100_000_000, stored_dtype="bfloat16")
    fp32 = 4 * 10**9
    assert memory.plan_memory(size, "float32", "cpu", host_available=None).mode == "direct"  # unknown: no check
    assert memory.plan_memory(size, "float32", "cpu", host_available=fp32 + GiB).mode == "direct"
    assert memory.plan_memory(size, "float32", "cpu", host_available=fp32).mode == "layer-by-layer"
    assert memory.plan_memory(size, "bfloat16", "cpu", host_available=3 * 10**9 + GiB).mode == "direct"
    # a GPU that holds float32 behind a host that does not: load bfloat16, cast on the GPU
    gpu = memory.plan_memory(size, "float32", "cuda:0", host_available=3 * 10**9, device_available=80 * GiB)
    assert (gpu.mode, gpu.load_dtype) == ("upcast-on-device", "bfloat16")
    assert memory.plan_memory(size, "float32", "cuda:0", host_available=64 * GiB,
                              device_available=80 * GiB).mode == "direct"
    # stored in float32: nothing narrower to keep, so no layer-by-layer plan
    fp32_stored = memory.ModelSize(1_000_000_000, 100_000_000, "float32")
    with pytest.raises(memory.NotEnoughMemory) as e:
        memory.plan_memory(fp32_stored, "float32", "cpu", host_available=fp32)
    assert "layer by layer" not in str(e.value) and "--dtype bfloat16" in str(e.value)


@pytest.mark.parametrize("text,expected", [("1024", 1024), ("20GiB", 20 * GiB), ("1.5GB", 1_500_000_000),
                                           ("512 MiB", 512 << 20)])
def test_memory_limit_parsing(text, expected):
    assert memory.parse_bytes(text) == expected


def test_memory_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv("HEADWATCH_MEMORY_LIMIT", "3GiB")
    assert memory.available_memory("cpu") == 3 * GiB
    monkeypatch.setenv("HEADWATCH_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="not a memory size"):
        memory.available_memory("cpu")


# ---- the OLMoE miniature under a low limit ------------------------------------------------------------


@pytest.fixture(scope="module")
def olmoe_folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("olmoe-mini")
    miniature_model("olmoe-1b-7b-0924", seed=5, dtype="stored").save_pretrained(root / "step0")
    return root


def limits() -> tuple[int, int]:
    """(layer-by-layer need, float32 need) of the OLMoE miniature, headroom included."""
    size = memory.model_size(miniature_config("olmoe-1b-7b-0924"))
    layered = size.bytes("bfloat16") + 4 * size.largest_block_params + memory.HEADROOM_BYTES
    direct = size.bytes("float32") + memory.HEADROOM_BYTES
    assert layered < direct
    return layered, direct


@pytest.mark.slow
def test_low_limit_gives_layer_by_layer_float32_with_identical_numbers(olmoe_folder, tmp_path, monkeypatch, measure_step0):
    monkeypatch.delenv("HEADWATCH_MEMORY_LIMIT", raising=False)
    full = measure_step0(olmoe_folder, tmp_path / "plain")
    assert "memory_plan" not in full.provenance and full.provenance["dtype"] == "float32"
    layered, direct = limits()
    monkeypatch.setenv("HEADWATCH_MEMORY_LIMIT", str((layered + direct) // 2))
    low = measure_step0(olmoe_folder, tmp_path / "low")
    assert low.provenance["memory_plan"].startswith("layer-by-layer")
    assert (low.provenance["dtype"], low.provenance["weights_dtype"]) == ("float32", "bfloat16")
    # bfloat16 -> float32 is exact: every number and the weights hash are the float32 load's, bit for bit
    assert low.all_head_selectivity == full.all_head_selectivity
    assert low.pr == full.pr and low.task == full.task
    assert low.provenance["weights_hash"] == full.provenance["weights_hash"]


def test_at_most_one_block_is_float32_at_a_time(olmoe_folder):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(olmoe_folder / "step0", dtype=torch.bfloat16).eval()
    blocks = upcast_blocks(model)
    compute_layer_by_layer(model)
    seen: list[int] = []

    def count_fp32(*_):
        seen.append(sum(p.numel() for p in model.parameters() if p.dtype == torch.float32))

    for b in blocks:  # registered after the upcast hooks: runs inside each block's float32 window
        b.register_forward_pre_hook(count_fp32)
    with torch.no_grad():
        logits = model(torch.randint(100, 10000, (2, 16))).logits
    largest = max(sum(p.numel() for p in b.parameters()) for b in blocks)
    assert len(seen) == len(blocks) and 0 < max(seen) <= largest
    assert logits.dtype == torch.float32
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())  # put back after each block


def test_too_low_limit_refuses_before_reading_weights(olmoe_folder, tmp_path, monkeypatch, measure_step0):
    from transformers import AutoModelForCausalLM

    def no_load(*a, **k):
        raise AssertionError("weights were read although the plan refuses")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", no_load)
    layered, _ = limits()
    monkeypatch.setenv("HEADWATCH_MEMORY_LIMIT", str(layered - (1 << 20)))
    with pytest.raises(memory.NotEnoughMemory) as e:
        measure_step0(olmoe_folder, tmp_path / "refused")
    msg = str(e.value)
    assert "stored in bfloat16" in msg and "--dtype bfloat16" in msg and "layer by layer" in msg
    assert isinstance(e.value, loading.LoadingError)  # reported like every other loading problem


@pytest.mark.slow
def test_upcast_on_device_plan_gives_identical_numbers(olmoe_folder, tmp_path, monkeypatch, measure_step0):
    """The GPU plan (bfloat16 on the host, cast to float32 on the device), run here with the CPU as
    the device: the same numbers and weights hash as a float32 load."""
    monkeypatch.delenv("HEADWATCH_MEMORY_LIMIT", raising=False)
    full = measure_step0(olmoe_folder, tmp_path / "plain")
    plan = memory.MemoryPlan("upcast-on-device", "bfloat16", "float32", 0, None, "loaded in bfloat16, cast on cpu")
    monkeypatch.setattr(loading, "memory_plan", lambda *a, **k: plan)
    cast = measure_step0(olmoe_folder, tmp_path / "cast")
    assert cast.provenance["memory_plan"].startswith("upcast-on-device")
    assert cast.all_head_selectivity == full.all_head_selectivity and cast.pr == full.pr and cast.task == full.task
    assert cast.provenance["weights_hash"] == full.provenance["weights_hash"]
