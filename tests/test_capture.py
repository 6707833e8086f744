"""Parity of the capture pass with eager output_attentions and with a hook on the out-projection
(``capture_parity`` in tests/conftest.py), and the architecture table."""
import pytest
import torch

from headwatch.fixtures.tiny import TINY_TYPES, tiny_model
from headwatch.probes.architectures import ARCHITECTURES, arch_spec, head_geometry, out_proj_modules
from headwatch.probes.capture import check_finite


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
