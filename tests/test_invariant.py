"""The thread-count-invariant training kernels: same function as transformers', same bits for any thread count."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from headwatch.fixtures.hubcache import cached_revisions
from headwatch.fixtures.organisms import FAMILIES, ORGANISMS
from headwatch.fixtures.organisms.invariant import DENSE_EXPERTS, ComposedLayerNorm, compose_layer_norms
from headwatch.fixtures.organisms.train import repo_id, train


def tiny_olmoe(kernel: str) -> torch.nn.Module:
    recipe = dataclasses.replace(ORGANISMS["olmoe"].recipe, n_layers=2, d_model=32, n_heads=2,
                                 intermediate_size=8, experts_kernel=kernel)
    return recipe.build_model(seed=3)


def test_dense_experts_compute_the_sparse_function_and_gradients():
    dense, sparse = tiny_olmoe("dense"), tiny_olmoe("sparse")
    assert dense.config._experts_implementation == DENSE_EXPERTS
    assert sparse.config._experts_implementation != DENSE_EXPERTS
    sparse.load_state_dict(dense.state_dict())
    rows = torch.randint(0, 512, (3, 20), generator=torch.Generator().manual_seed(0))
    losses = [m(input_ids=rows, labels=rows).loss for m in (dense, sparse)]
    for loss in losses:
        loss.backward()
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-6)
    grads = [{n: p.grad for n, p in m.named_parameters()} for m in (dense, sparse)]
    for name, g in grads[0].items():
        torch.testing.assert_close(g, grads[1][name], rtol=1e-4, atol=1e-6, msg=name)


def test_dense_kernel_is_not_saved_with_the_checkpoint(tmp_path):
    model = tiny_olmoe("dense")
    model.save_pretrained(tmp_path)
    assert DENSE_EXPERTS not in (tmp_path / "config.json").read_text()


def test_composed_layer_norm_is_layer_norm():
    torch.manual_seed(0)
    fused = torch.nn.LayerNorm(16)
    with torch.no_grad():
        fused.weight.normal_()
        fused.bias.normal_()
    composed = torch.nn.LayerNorm(16)
    composed.load_state_dict(fused.state_dict())
    model = torch.nn.Sequential(composed)
    assert compose_layer_norms(model) == 1 and type(composed) is ComposedLayerNorm
    x = torch.randn(4, 7, 16) * 3 + 1
    torch.testing.assert_close(composed(x), fused(x), rtol=1e-5, atol=1e-5)
    assert composed.state_dict().keys() == fused.state_dict().keys()


@pytest.mark.parametrize("family", FAMILIES)
def test_training_gives_the_same_bits_with_one_or_two_threads(family, tmp_path):
    """Eight updates of the real recipe (its real shapes) with 1 and with 2 threads.

    Measured before these kernels: OLMoE's weights differed from the 6th update on (sparse
    experts), GPTNeoX's from the 1st (fused LayerNorm backward); OLMo was invariant already.
    """
    recipe = dataclasses.replace(ORGANISMS[family].recipe, total_steps=8, checkpoints=(0, 8))
    commits = []
    for threads in (1, 2):
        cache = tmp_path / f"threads{threads}"
        train(recipe, seed=0, cache_dir=cache, progress=False, threads=threads)
        commits.append(cached_revisions(cache, repo_id(family, 0))["step8"])
    assert commits[0] == commits[1], f"{family}: 1 and 2 threads trained different weights"
