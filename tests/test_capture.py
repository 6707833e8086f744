"""Parity of the capture pass with eager output_attentions and with a hook on the out-projection."""
import pytest
import torch

from headwatch.fixtures.tiny import TINY_TYPES, tiny_model
from headwatch.probes.architectures import ARCHITECTURES, arch_spec, head_geometry, out_proj_modules
from headwatch.probes.capture import capturing, check_finite


@pytest.mark.parametrize("model_type", TINY_TYPES)
def test_capture_equals_eager_attention_and_out_proj_input(model_type):
    model = tiny_model(model_type, seed=1, attn_implementation="eager")
    g = head_geometry(model)
    tokens = torch.randint(0, 300, (3, 40), generator=torch.Generator().manual_seed(0))
    hooked = {}
    handles = [
        proj.register_forward_pre_hook(lambda _m, args, i=i: hooked.__setitem__(i, args[0][:, -1].clone()))
        for i, proj in enumerate(out_proj_modules(model))
    ]
    with torch.no_grad():
        eager = model(tokens, output_attentions=True)
    for h in handles:
        h.remove()
    with torch.no_grad(), capturing(model) as recorder:
        captured_logits = model(tokens).logits
    rows, outputs = recorder.stacked(g.n_layers)
    eager_rows = torch.stack([a[:, :, -1, :] for a in eager.attentions], dim=1)
    hook_outputs = torch.stack([hooked[l].view(3, g.n_heads, g.d_head) for l in range(g.n_layers)], dim=1)
    assert rows.shape == (3, g.n_layers, g.n_heads, 40)
    assert (rows - eager_rows).abs().max() <= 1e-5
    assert (outputs - hook_outputs).abs().max() <= 1e-5
    assert (captured_logits - eager.logits).abs().max() <= 1e-4
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
