"""The training kernels that replace transformers' sparse experts and torch's fused LayerNorm compute the same function."""
from __future__ import annotations

import dataclasses

import torch

from headwatch.model_organisms import ORGANISMS
from headwatch.model_organisms.invariant import DENSE_EXPERTS, ComposedLayerNorm, compose_layer_norms


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
