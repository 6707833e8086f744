"""measure(): one record per checkpoint with the author's keys, task metrics and ablations."""
import json
import math

import pytest
import torch

from headwatch.fixtures.tiny import tiny_model
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
    assert raw["schema"] == "headwatch.measurement/1"
    assert set(raw["all_head_selectivity"]["L1_H3"]) == set(HEAD_CLASSES)
    assert MeasurementRecord.from_json(path) == record


def test_random_init_has_no_induction_circuit_so_no_ablation(record):
    assert record.ablations == []
    assert "nothing to ablate" in record.provenance["ablation_note"]


def test_ablation_groups_when_a_circuit_exists():
    settings = ProbeSettings(**{**SMALL.__dict__, "induction_threshold": 0.0})
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
