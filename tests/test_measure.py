"""measure(): one record per checkpoint with the author's keys, task metrics and ablations."""
import json
import dataclasses
import math

import pytest
import torch

from headwatch_testing.tiny import TINY_TYPES, tiny_model
from headwatch.probes.measure import measure, task_metrics
from headwatch.probes.batch import induction_batch
from headwatch.probes.record import HEAD_CLASSES, MeasurementRecord, ProbeSettings, parse_head_key

SMALL = ProbeSettings(n_examples=24, seq_len=48, vocab_lo=10, vocab_hi=300, n_pr=16, batch_size=8,
                      baseline_positions=20)


@pytest.fixture(scope="module")
def record():
    return measure(tiny_model("olmo", seed=7), SMALL, model_name="tiny/olmo", revision="step0",
                   tokens_seen=0.0, progress=False)


def test_record_has_every_head_and_class(record):
    assert record.n_layers == 2 and record.n_heads == 4 and record.d_head == 16
    assert set(record.all_head_selectivity) == set(record.heads()) == set(record.pr)
    for sel in record.all_head_selectivity.values():
        assert set(sel) == set(HEAD_CLASSES) and all(math.isfinite(v) and v >= 0 for v in sel.values())
    assert all(1 <= pr <= 16 for pr in record.pr.values())
    assert record.n_examples_valid == 24
    assert 0 <= record.task.top1 <= record.task.top5 <= 1
    assert record.provenance["dtype"] == "float32" and record.provenance["model_type"] == "olmo"


def test_json_round_trip_keeps_author_keys(record, tmp_path):
    path = tmp_path / "r.json"
    record.to_json(path)
    raw = json.loads(path.read_text())
    assert raw["schema"] == "headwatch.measurement/2"
    assert set(raw["all_head_selectivity"]["L1_H3"]) == set(HEAD_CLASSES)
    assert MeasurementRecord.from_json(path) == record


def test_schema_1_records_stay_readable(record):
    """A record written before intervals (schema /1: no intervals, sink, counts) still reads."""
    old = record.to_dict()
    old["schema"] = "headwatch.measurement/1"
    for key in ("intervals", "sink"):
        old.pop(key)
    for key in ("n", "top1_count"):
        old["task"].pop(key)
    for key in ("interval_level", "n_bootstrap", "bootstrap_seed", "sink_examples"):
        old["settings"].pop(key)
    back = MeasurementRecord.from_dict(old)
    assert back.intervals is None and back.sink is None and back.task.n is None
    assert back.all_head_selectivity == record.all_head_selectivity
    assert "schema /1" in back.no_interval_reason()


def test_intervals_of_a_measurement(record):
    """Every selectivity has a bootstrap interval around it, top-1 an exact one; methods are named."""
    iv = record.intervals
    assert iv.level == 0.95 and iv.methods["top1"] == "Clopper-Pearson exact binomial"
    assert iv.methods["selectivity"].startswith("percentile bootstrap over examples (1000 resamples, seed 0)")
    for head, sel in record.all_head_selectivity.items():
        for cls, value in sel.items():
            lo, hi = iv.selectivity[head][cls]
            assert lo <= hi and lo <= value * 1.05 and hi >= value * 0.95, (head, cls, value, lo, hi)
    assert record.task.n == 24 and record.task.top1_count == round(24 * record.task.top1)
    lo, hi = iv.task_top1
    assert 0 <= lo <= record.task.top1 <= hi <= 1
    assert iv.induction_heads == (0.0, 0.0) and iv.bos_fraction[0] <= iv.bos_fraction[1]


def test_the_bootstrap_is_seeded(record):
    again = measure(tiny_model("olmo", seed=7), SMALL, model_name="tiny/olmo", revision="step0",
                    tokens_seen=0.0, progress=False)
    assert again.intervals == record.intervals


SINK_CASES = {  # the fused path: heads sharing keys (SmolLM2's 9 over 3), a sliding window and
    # Gemma's scaling (Gemma 3); the explicit one: softcapped logits (Gemma 2)
    "llama": ("llama", {}), "llama-9q-3kv": ("llama", dict(n_heads=9, n_kv_heads=3, d_model=72)),
    "gemma3_text": ("gemma3_text", {}), "gemma2": ("gemma2", {}),
}


@pytest.mark.parametrize("case", SINK_CASES)
def test_sink_score_matches_eager_attention(case):
    """Sink_1^eps's per-head attention to position 0 over queries 1..T-1 equals what eager
    attention's full weights give (the capture computes it on the sub-batch only)."""
    model_type, kwargs = SINK_CASES[case]
    model = tiny_model(model_type, seed=3, attn_implementation="eager", **kwargs)
    if model_type == "gemma3_text":
        assert model.config.sliding_window < SMALL.seq_len  # the window bites
    settings = ProbeSettings(**{**SMALL.__dict__, "sink_examples": 5, "n_bootstrap": 0})
    rec = measure(model, settings, model_name="t", revision="r", progress=False)
    batch = induction_batch(settings.n_examples, settings.seq_len, settings.vocab_lo, settings.vocab_hi, settings.seed)
    with torch.no_grad():
        att = model(input_ids=batch.tokens[:5], output_attentions=True).attentions  # L x [B, H, T, T]
    for l, a in enumerate(att):
        expected = a[:, :, 1:, 0].mean(-1).mean(0)  # [H]
        for h in range(a.shape[1]):
            assert rec.sink.first_position_attention[f"L{l}_H{h}"] == pytest.approx(float(expected[h]), rel=1e-4)
    assert rec.sink.n_examples == 5 and rec.sink.eps == 0.3
    assert rec.intervals.selectivity == {} and rec.intervals.task_top1 is not None  # n_bootstrap 0: exact ones only


def test_random_init_has_no_induction_circuit_so_no_ablation(record):
    assert record.ablations == []
    assert "nothing to ablate" in record.provenance["ablation_note"]


def test_ablation_groups_when_a_circuit_exists():
    # no attention floor: every head is in the circuit (tests/test_negligible.py: what the floor leaves out)
    settings = ProbeSettings(**{**SMALL.__dict__, "induction_threshold": 0.0, "attention_floor": 0.0})
    rec = measure(tiny_model("gpt_neox", seed=8), settings, model_name="t", revision="r", progress=False)
    names = [a.name for a in rec.ablations]
    assert names == ["induction_circuit", "matched_random", "circuit_layers"]
    assert len(rec.ablation("induction_circuit").heads) == 8
    assert rec.ablation("matched_random").heads == ()  # no head left outside the circuit
    # Zeroing every head changes the metrics.
    assert rec.ablation("circuit_layers").metrics != rec.task


def test_batch_size_does_not_change_numbers():
    model = tiny_model("olmoe", seed=9)
    a = measure(model, SMALL, model_name="t", revision="r", progress=False)
    b = measure(model, ProbeSettings(**{**SMALL.__dict__, "batch_size": 5}), model_name="t", revision="r", progress=False)
    for head in a.heads():
        assert a.pr[head] == pytest.approx(b.pr[head], rel=1e-4)
        for cls in HEAD_CLASSES:
            assert a.all_head_selectivity[head][cls] == pytest.approx(b.all_head_selectivity[head][cls], rel=1e-4)


def test_task_metrics_of_a_perfect_copier():
    """A model stand-in that always predicts b: top-1 = 1 and loss near 0."""
    batch = induction_batch(8, 48, 10, 300, 42)

    class Copier(torch.nn.Module):
        def forward(self, input_ids, **_):
            logits = torch.full((input_ids.shape[0], 1, 300), -20.0)
            rows = torch.arange(input_ids.shape[0])
            logits[rows, 0, batch.b[rows]] = 20.0
            return type("Out", (), {"logits": logits})()

    model = Copier()
    model.register_parameter("p", torch.nn.Parameter(torch.zeros(1)))
    model.config = tiny_model("gpt_neox").config
    metrics = task_metrics(model, batch, 8, torch.device("cpu"))
    assert metrics.top1 == 1.0 and metrics.top5 == 1.0 and metrics.loss < 1e-6


def test_probe_vocabulary_must_fit_the_model():
    with pytest.raises(ValueError, match="vocabulary of 300 ids"):
        measure(tiny_model("olmo"), ProbeSettings(n_examples=4), model_name="t", revision="r", progress=False)


def test_records_refuse_foreign_json():
    with pytest.raises(ValueError, match="not a headwatch measurement record"):
        MeasurementRecord.from_dict({"model": "x"})
    with pytest.raises(ValueError, match="L<layer>_H<head>"):
        parse_head_key("layer3head2")


# ---- the probe settings' rules, where the numbers are made ----


def test_measure_itself_refuses_settings_the_record_would_misstate():
    """The probes check again where the numbers are made, whoever calls them."""
    from headwatch.probes.measure import measure
    from headwatch.probes.record import ProbeSettings
    from headwatch.validation import InputError

    model = tiny_model("gpt_neox")
    base = ProbeSettings(n_examples=8, n_pr=8, seq_len=64, vocab_lo=10, vocab_hi=300, batch_size=4)
    for bad in ({"n_pr": 9}, {"n_pr": 0}, {"vocab_hi": 13}, {"seq_len": 600}):
        with pytest.raises(InputError):
            measure(model, dataclasses.replace(base, **bad), model_name="t", revision="r", progress=False)


def test_one_rule_per_probe_setting():
    from headwatch.probes.record import ProbeSettings
    from headwatch.validation import PROBE_RULES, check_probe_settings

    assert set(PROBE_RULES) == {f.name for f in dataclasses.fields(ProbeSettings)}
    check_probe_settings(dataclasses.asdict(ProbeSettings()))  # the paper's defaults pass
    from headwatch.model_organisms import PROBE

    check_probe_settings(dataclasses.asdict(PROBE))  # and the organisms'


@pytest.mark.parametrize("model_type", TINY_TYPES)
def test_the_last_layers_mlp_at_the_query_position_gives_the_whole_layers_logits(model_type):
    """probes/lastlayer.py: within the block the last layer's MLP sees one position per example, the
    query position's logits are the whole model's up to float rounding, and afterwards the model is
    as it was."""
    from headwatch.probes.architectures import arch_spec, decoder_layers
    from headwatch.probes.lastlayer import query_position_mlp

    model = tiny_model(model_type, seed=5, n_layers=3)
    tokens = torch.randint(0, 300, (4, 40), generator=torch.Generator().manual_seed(1))
    mlp = getattr(decoder_layers(model)[-1], arch_spec(model).mlp)
    seen = []
    handle = mlp.register_forward_pre_hook(lambda _m, args: seen.append(tuple(args[0].shape)))
    with torch.inference_mode():
        whole = model(input_ids=tokens, logits_to_keep=1).logits[:, -1]
        with query_position_mlp(model):
            last = model(input_ids=tokens, logits_to_keep=1).logits[:, -1]
    handle.remove()
    d = model.config.hidden_size
    assert seen == [(4, 40, d), (4, 1, d)]
    assert torch.allclose(last, whole, rtol=1e-5, atol=1e-5)
    assert getattr(decoder_layers(model)[-1], arch_spec(model).mlp) is mlp
