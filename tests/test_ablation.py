"""Group ablation zeroes exactly the chosen heads' slices of the output-projection input."""
import pytest
import torch

from headwatch_testing.tiny import tiny_model
from headwatch.probes.ablation import ablated, heads_by_layer, layer_heads, matched_random_heads
from headwatch.probes.architectures import head_geometry, out_proj_modules

TOKENS = torch.randint(0, 300, (2, 30), generator=torch.Generator().manual_seed(3))


def projection_inputs(model):
    seen = {}
    handles = [p.register_forward_pre_hook(lambda _m, a, i=i: seen.__setitem__(i, a[0].clone()))
               for i, p in enumerate(out_proj_modules(model))]
    return seen, handles


@pytest.mark.parametrize("model_type", ["gpt_neox", "olmoe"])
def test_only_chosen_slices_are_zero(model_type):
    model = tiny_model(model_type, seed=2)
    d = head_geometry(model).d_head
    with torch.no_grad(), ablated(model, ["L1_H2"]):
        seen, handles = projection_inputs(model)  # registered after ours: sees the ablated input
        model(TOKENS)
    for h in handles:
        h.remove()
    x = seen[1]
    assert torch.all(x[..., 2 * d:3 * d] == 0)
    assert torch.all(x[..., :2 * d].abs().sum(-1) > 0) and torch.all(x[..., 3 * d:].abs().sum(-1) > 0)


def test_whole_layer_equals_zeroing_the_projection_input():
    model = tiny_model("olmo", seed=4)
    n_heads = head_geometry(model).n_heads
    with torch.no_grad(), ablated(model, [f"L0_H{h}" for h in range(n_heads)]):
        ablated_logits = model(TOKENS).logits
    handle = out_proj_modules(model)[0].register_forward_pre_hook(lambda _m, a: (torch.zeros_like(a[0]),))
    with torch.no_grad():
        zeroed_logits = model(TOKENS).logits
    handle.remove()
    with torch.no_grad():
        plain_logits = model(TOKENS).logits
    assert torch.allclose(ablated_logits, zeroed_logits, atol=1e-6)
    assert not torch.allclose(ablated_logits, plain_logits, atol=1e-3)


def test_hooks_are_removed_after_the_block():
    model = tiny_model("gpt_neox", seed=5)
    with torch.no_grad():
        before = model(TOKENS).logits
        with ablated(model, ["L0_H0", "L1_H3"]):
            pass
        after = model(TOKENS).logits
    assert torch.equal(before, after)


def test_matched_random_is_disjoint_same_layers_same_counts():
    circuit = ["L2_H1", "L2_H5", "L4_H0"]
    random_heads = matched_random_heads(circuit, n_heads=8, seed=123)
    assert not set(random_heads) & set(circuit)
    assert {l: len(h) for l, h in heads_by_layer(random_heads).items()} == {2: 2, 4: 1}
    assert random_heads == matched_random_heads(circuit, n_heads=8, seed=123)
    # A layer with no spare heads contributes none, unless other layers may fill the shortfall.
    full_layer = [f"L0_H{h}" for h in range(4)]
    assert matched_random_heads(full_layer, n_heads=4) == []
    filled = matched_random_heads(full_layer, n_heads=4, n_layers=3)
    assert len(filled) == 4 and not set(filled) & set(full_layer)
    assert all(not h.startswith("L0_") for h in filled)
    # With room in the circuit's layers, n_layers changes nothing (docs/SPEC.md §4's draw).
    assert matched_random_heads(circuit, 8, 123, n_layers=6) == random_heads


def test_layer_control_covers_whole_layers():
    assert layer_heads(["L1_H0", "L1_H3", "L3_H2"], n_heads=4) == [f"L1_H{h}" for h in range(4)] + [f"L3_H{h}" for h in range(4)]


def test_out_of_range_heads_are_refused():
    model = tiny_model("gpt_neox")
    with pytest.raises(ValueError, match="2 layers x 4 heads"):
        with ablated(model, ["L5_H0"]):
            pass


def test_gpt2_head_ablation_equals_zeroing_its_value_columns():
    """GPT-2's fused c_attn is a Conv1D (weight [d_model, 3 * d_model]: columns q | k | v, head h's
    v in columns 2d + h*D .. 2d + (h+1)*D). Zeroing those columns and their bias silences head h
    exactly, which is what ablating it at c_proj's input must do."""
    model = tiny_model("gpt2", seed=6)
    g = head_geometry(model)
    d = model.config.n_embd
    with torch.no_grad(), ablated(model, ["L1_H2"]):
        ablated_logits = model(TOKENS).logits
    attn = model.transformer.h[1].attn
    cols = slice(2 * d + 2 * g.d_head, 2 * d + 3 * g.d_head)
    with torch.no_grad():
        plain_logits = model(TOKENS).logits
        attn.c_attn.weight[:, cols] = 0
        attn.c_attn.bias[cols] = 0
        silenced_logits = model(TOKENS).logits
    assert torch.allclose(ablated_logits, silenced_logits, atol=1e-6)
    assert not torch.allclose(ablated_logits, plain_logits, atol=1e-4)


# ---- the shared prefix of the ablation passes (issue 36) ----------------------------------------


@pytest.mark.parametrize("model_type", ["llama", "gpt2", "gemma3_text", "olmoe"])
def test_ablation_passes_from_the_shared_prefix_give_the_whole_passes_numbers(model_type):
    """ablation_metrics computes the layers below the lowest ablated one once per batch and replays
    their output; every group's metrics equal those of whole passes (task_metrics) exactly, and the
    model is left as it was (its layers back in place, no hook left)."""
    from headwatch.probes.ablation import lowest_layer
    from headwatch.probes.architectures import decoder_layers
    from headwatch.probes.batch import induction_batch
    from headwatch.probes.measure import ablation_metrics, task_metrics

    model = tiny_model(model_type, seed=7, n_layers=4)
    batch = induction_batch(12, 64, 10, 300, seed=3)
    groups = {"circuit": ["L2_H1", "L3_H0"], "random": ["L2_H3", "L3_H2"], "layers": ["L2_H0", "L2_H1", "L3_H3"]}
    assert lowest_layer(groups.values()) == 2
    layers_before = list(decoder_layers(model))
    shared = ablation_metrics(model, batch, 5, torch.device("cpu"), groups)
    for name, heads in groups.items():
        assert shared[name] == task_metrics(model, batch, 5, torch.device("cpu"), heads), name
    assert list(decoder_layers(model)) == layers_before
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    # a group that ablates nothing below layer 0 runs whole passes, and still agrees
    whole = ablation_metrics(model, batch, 5, torch.device("cpu"), {"first": ["L0_H0"]})
    assert whole["first"] == task_metrics(model, batch, 5, torch.device("cpu"), ["L0_H0"])


def test_replayed_prefix_is_what_a_whole_pass_hands_the_layer_above():
    """The replay is seen by the layers above: with a wrong prefix output the logits change."""
    from headwatch.probes.ablation import prefix_output, replaying_prefix

    model = tiny_model("llama", seed=8, n_layers=3)
    tokens = torch.randint(0, 300, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        full = model(tokens).logits
        out = prefix_output(model, 2, lambda: model(tokens))
        with replaying_prefix(model, 2, out):
            replayed = model(tokens).logits
        with replaying_prefix(model, 2, torch.zeros_like(out)):
            wrong = model(tokens).logits
    assert torch.equal(full, replayed)
    assert not torch.allclose(full, wrong)


# ---- the screen's kept layer output (issue 36) ----------------------------------------------------


def _screen_keeping(model, batch, batch_size, guess, budget_bytes=None):
    """What the screen does for the ablation passes: a captured pass per batch, a layer chosen after
    the first; returns the keeper's KeptPrefix."""
    from headwatch.probes.ablation import PREFIX_KEEP_BYTES, PrefixKeeper
    from headwatch.probes.capture import capturing

    T = batch.tokens.shape[1]
    keeper = PrefixKeeper(model, len(batch), batch_size, T,
                          PREFIX_KEEP_BYTES if budget_bytes is None else budget_bytes)
    with torch.inference_mode(), capturing(model), keeper:
        for lo in range(0, len(batch), batch_size):
            model(input_ids=batch.slice(lo, min(lo + batch_size, len(batch))).tokens, use_cache=False)
            if lo == 0:
                keeper.choose(guess)
    return keeper.kept


GROUPS = {"circuit": ["L2_H1", "L3_H0"], "random": ["L2_H3", "L3_H2"], "layers": ["L2_H0", "L2_H1", "L3_H3"]}


@pytest.mark.parametrize("model_type", ["llama", "gpt2", "gemma3_text", "olmoe", "gpt_neox", "gemma2"])
def test_ablation_passes_from_the_screens_kept_layer_give_the_same_numbers(model_type):
    """Started from the layer the screen kept (at or below the lowest ablated one), every group's
    metrics equal those of passes that compute every layer; the check on the first batch finds the
    captured pass's output the same as a plain pass's (Gemma 2: the capture computes softcapped
    attention as eager does, the plain pass too), and the model is left as it was."""
    from headwatch.probes.architectures import decoder_layers
    from headwatch.probes.batch import induction_batch
    from headwatch.probes.measure import ablation_metrics

    model = tiny_model(model_type, seed=7, n_layers=4)
    batch = induction_batch(12, 64, 10, 300, seed=3)
    plain = ablation_metrics(model, batch, 5, torch.device("cpu"), GROUPS)
    layers_before = list(decoder_layers(model))
    for guess in (1, 2):
        kept = _screen_keeping(model, batch, 5, guess)
        assert kept.layer == guess and len(kept.outputs) == 3  # batches of 5, 5, 2
        assert ablation_metrics(model, batch, 5, torch.device("cpu"), GROUPS, kept=kept) == plain
        assert kept.same is True, (model_type, guess)
    assert list(decoder_layers(model)) == layers_before
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_a_kept_output_that_differs_from_a_plain_pass_is_not_used():
    """A kept first batch that a fresh computation contradicts (here: planted zeros) is dropped, and
    the numbers are those of whole passes; so is a kept layer above the lowest ablated one."""
    from headwatch.probes.batch import induction_batch
    from headwatch.probes.measure import ablation_metrics

    model = tiny_model("llama", seed=7, n_layers=4)
    batch = induction_batch(12, 64, 10, 300, seed=3)
    plain = ablation_metrics(model, batch, 5, torch.device("cpu"), GROUPS)
    kept = _screen_keeping(model, batch, 5, 2)
    kept.outputs = [torch.zeros_like(o) for o in kept.outputs]
    assert ablation_metrics(model, batch, 5, torch.device("cpu"), GROUPS, kept=kept) == plain
    assert kept.same is False
    above = _screen_keeping(model, batch, 5, 3)  # the groups start at layer 2
    above.outputs = [torch.zeros_like(o) for o in above.outputs]  # would change every number if used
    assert ablation_metrics(model, batch, 5, torch.device("cpu"), GROUPS, kept=above) == plain
    assert above.same is None  # never compared: never used


def test_the_keeper_keeps_nothing_beyond_its_budget_or_for_layer_zero():
    from headwatch.probes.batch import induction_batch

    model = tiny_model("llama", seed=7, n_layers=4)
    batch = induction_batch(12, 64, 10, 300, seed=3)
    # one layer for 12 examples plus four layers of the first batch of 5: (12 + 20) x 64 x 64 x 4 bytes
    need = (12 + 4 * 5) * 64 * 64 * 4
    assert _screen_keeping(model, batch, 5, 2, budget_bytes=need - 1) is None
    assert _screen_keeping(model, batch, 5, 2, budget_bytes=need) is not None
    assert _screen_keeping(model, batch, 5, 0) is None


def test_the_guess_is_the_lowest_layer_near_the_threshold():
    from headwatch.probes.ablation import PREFIX_GUESS_SHARE, guessed_layer

    threshold = 5.0
    just_under = PREFIX_GUESS_SHARE * threshold * 0.99
    assert guessed_layer({"L0_H0": just_under, "L3_H1": 9.0, "L2_H0": PREFIX_GUESS_SHARE * threshold}, threshold) == 2
    assert guessed_layer({"L0_H0": 0.1, "L1_H1": just_under}, threshold) == 0


@pytest.mark.parametrize("model_type", ["llama", "gpt_neox", "gemma2"])
def test_on_a_model_loaded_eager_the_ablation_passes_compute_as_the_screen_and_use_its_layer(model_type):
    """measure() runs the ablation passes under the screen's attention (capture_kernel), whatever the
    model was loaded with: on an eager model the kept layer is then found the same and used, and the
    numbers equal whole passes under that attention."""
    from headwatch.probes.batch import induction_batch
    from headwatch.probes.capture import capture_kernel
    from headwatch.probes.measure import ablation_metrics

    model = tiny_model(model_type, seed=7, n_layers=4, attn_implementation="eager")
    batch = induction_batch(12, 64, 10, 300, seed=3)
    with capture_kernel(model):
        plain = ablation_metrics(model, batch, 5, torch.device("cpu"), GROUPS)
        kept = _screen_keeping(model, batch, 5, 2)
        assert ablation_metrics(model, batch, 5, torch.device("cpu"), GROUPS, kept=kept) == plain
    assert kept.same is True
    assert model.config._attn_implementation == "eager"
