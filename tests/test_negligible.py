"""The attention floor (docs/statistics.md#negligible-attention): a head whose attention to a class
target is below floor_share / T is counted in no head set, whatever its selectivity.

The rule's boundary (1/T counted, just below not), its properties (hypothesis), the record's
``attention`` (validation, round trip, old records), the head sets, the claims that count heads
(a planted sink head in layer 0 that F1 leaves out at 1e-5 attention and fails on at 0.5: the floor
is what decides), measure() (the ablated circuit) and the published files (no attention: the rule
does not apply, and the verdicts say so).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwatch.claims import synthetic as S
from headwatch.claims.judge import judge_causal, judge_f1, judge_f2, judge_formation, judge_model
from headwatch.claims.verdict import NO_ATTENTION, Status, Verdict
from headwatch.fixtures.reference import load_published
from headwatch.probes.intervals import record_intervals
from headwatch.probes.record import (
    ATTENTION_KEYS, HEAD_CLASSES, PROBE_VERSION, MeasurementRecord, ProbeSettings, RecordError, attention_floor_value,
    negligible_heads,
)
from headwatch.probes.selectivity import (
    bos_fraction, bos_fraction_of, bos_heads, circuit_of, head_labels, induction_circuit, labels_of,
    previous_token_circuit,
)
from headwatch.spec import SPEC

T = 256
FLOOR = 1 / T  # 0.00390625, exact in binary


def _att(**values: float) -> dict[str, float]:
    """One head's attention: every key 0.01 unless given."""
    return {**{k: 0.01 for k in ATTENTION_KEYS}, **values}


# ---- the rule's boundary ---------------------------------------------------------------------------


def test_target_attention_exactly_at_one_over_t_is_counted():
    assert negligible_heads({"L0_H0": _att(induction=FLOOR)}, "induction", T, 1.0) == frozenset()


def test_target_attention_just_below_one_over_t_is_not_counted():
    below = math.nextafter(FLOOR, 0.0)
    assert negligible_heads({"L0_H0": _att(induction=below)}, "induction", T, 1.0) == {"L0_H0"}


def test_the_floor_is_floor_share_over_t():
    assert attention_floor_value(256, 1.0) == FLOOR and attention_floor_value(128, 2.0) == 2 / 128
    assert negligible_heads({"L0_H0": _att(induction=0.015)}, "induction", T, 4.0) == {"L0_H0"}  # 4/256 = 0.0156
    assert SPEC.attention_floor == 1.0


def test_an_unknown_class_or_length_is_refused():
    with pytest.raises(ValueError, match="unknown class"):
        negligible_heads({"L0_H0": _att()}, "induction-ish", T, 1.0)
    with pytest.raises(ValueError, match="seq_len"):
        negligible_heads({"L0_H0": _att()}, "induction", 0, 1.0)


# ---- properties of the rule --------------------------------------------------------------------------

MASS = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_subnormal=False)
TABLES = st.dictionaries(st.sampled_from([f"L{l}_H{h}" for l in range(3) for h in range(3)]),
                         st.fixed_dictionaries({k: MASS for k in ATTENTION_KEYS}), min_size=1)


@settings(max_examples=200, deadline=None)
@given(TABLES, st.sampled_from(ATTENTION_KEYS), st.integers(2, 4096), st.floats(0.01, 100.0))
def test_flags_exactly_the_heads_below_the_floor(table, cls, seq_len, share):
    """Never flags a head at or above the floor; flags every head below it."""
    flagged = negligible_heads(table, cls, seq_len, share)
    floor = share / seq_len
    assert all(table[h][cls] < floor for h in flagged)
    assert all(table[h][cls] >= floor for h in set(table) - flagged)


@settings(max_examples=200, deadline=None)
@given(TABLES, st.sampled_from(ATTENTION_KEYS), st.integers(2, 2048), st.floats(0.01, 100.0), st.integers(-8, 8))
def test_scaling_the_masses_and_the_floor_together_changes_nothing(table, cls, seq_len, share, k):
    """Attention and floor scaled by the same power of two (exact in binary): the same heads."""
    c = 2.0 ** k
    scaled = {h: {key: v * c for key, v in att.items()} for h, att in table.items()}
    assert negligible_heads(scaled, cls, seq_len, share * c) == negligible_heads(table, cls, seq_len, share)
    # T doubled and the share doubled: the same floor
    assert negligible_heads(table, cls, 2 * seq_len, 2 * share) == negligible_heads(table, cls, seq_len, share)


@settings(max_examples=200, deadline=None)
@given(TABLES, st.sampled_from(ATTENTION_KEYS), st.integers(2, 4096), st.floats(0.01, 10.0), st.floats(1.0, 10.0))
def test_a_higher_floor_flags_at_least_the_same_heads(table, cls, seq_len, share, factor):
    assert negligible_heads(table, cls, seq_len, share) <= negligible_heads(table, cls, seq_len, share * factor)


@settings(max_examples=100, deadline=None)
@given(TABLES, st.floats(0.0, 200.0))
def test_head_sets_leave_out_the_flagged_heads_and_nothing_else(table, threshold):
    """A head set with ``negligible`` is the head set without them; the BOS fraction keeps all heads
    in its denominator."""
    sel = {h: {c: 100.0 * att[c] / max(att["baseline"], 1e-8) for c in HEAD_CLASSES} for h, att in table.items()}
    flagged = negligible_heads(table, "induction", T, 1.0)
    assert induction_circuit(sel, threshold, flagged) == induction_circuit(sel, threshold) - flagged
    first = negligible_heads(table, "first-token", T, 1.0)
    assert bos_heads(sel, threshold, first) == bos_heads(sel, threshold) - first
    assert bos_fraction(sel, threshold, first) == len(bos_heads(sel, threshold) - first) / len(sel)


# ---- head sets ----------------------------------------------------------------------------------------


def _table(**heads: dict[str, float]) -> dict[str, dict[str, float]]:
    return {h: {**{c: 1.0 for c in HEAD_CLASSES}, **v} for h, v in heads.items()}


def test_head_labels_take_the_best_class_that_counts():
    table = _table(L0_H0={"first-token": 500.0, "previous-token": 120.0}, L0_H1={"first-token": 500.0})
    assert head_labels(table, 30.0) == {"L0_H0": "first-token", "L0_H1": "first-token"}
    labels = head_labels(table, 30.0, {"first-token": {"L0_H0", "L0_H1"}})
    assert labels == {"L0_H0": "previous-token", "L0_H1": "unclassified"}


def test_previous_token_circuit_leaves_out_the_flagged_heads():
    table = _table(L1_H0={"previous-token": 150.0}, L1_H1={"previous-token": 150.0})
    assert previous_token_circuit(table, 100.0, {"L1_H1"}) == {"L1_H0"}


def _planted(baseline: dict[str, float] | None = None) -> MeasurementRecord:
    """A planted record (8 x 4 heads) with attention: L3_H0 at 80x induction, L7_H3 a BOS head."""
    rec = S.planted_record("step0", 1e9, induction=("L3_H0",), bos=("L7_H3",))
    return S.with_attention([rec], baseline={0: baseline or {}})[0]


def test_record_head_sets_apply_the_floor_where_the_record_has_attention():
    rec = _planted({"L3_H0": 1e-7, "L7_H3": 1e-7})  # 80 x 1e-7 = 8e-6 on each target
    assert rec.negligible_heads("induction") >= {"L3_H0"} and "L3_H0" in induction_circuit(rec.all_head_selectivity)
    assert circuit_of(rec) == frozenset() and bos_fraction_of(rec) == 0.0
    assert labels_of(rec)["L3_H0"] == "unclassified"
    kept = _planted()  # every head's baseline 1/128: targets at 1/128 (WEAK) and 80/128
    assert kept.negligible_heads("induction") == frozenset()
    assert circuit_of(kept) == {"L3_H0"} and bos_fraction_of(kept) == 1 / 32


def test_without_attention_or_settings_the_floor_is_not_applied():
    rec = S.planted_record("step0", 1e9, induction=("L3_H0",))
    assert rec.attention is None and not rec.has_attention and rec.negligible_heads("induction") == frozenset()
    no_settings = dataclasses.replace(_planted({"L3_H0": 1e-7}), settings=None)
    assert not no_settings.has_attention and circuit_of(no_settings) == {"L3_H0"}


# ---- the record's attention: validated, round trip, old records ----------------------------------------


def test_attention_round_trips_and_old_records_read_without_it(tmp_path):
    rec = _planted({"L3_H0": 1e-7})
    path = tmp_path / "r.json"
    rec.to_json(path)
    assert MeasurementRecord.from_json(path) == rec
    old = rec.to_dict()
    del old["attention"]
    assert MeasurementRecord.from_dict(old).attention is None
    assert PROBE_VERSION == "4" and ProbeSettings().attention_floor == SPEC.attention_floor


@pytest.mark.parametrize("damage, message", [
    (lambda a: a.pop("L0_H0"), "attention does not match 8 layers x 4 heads; missing L0_H0"),
    (lambda a: a["L0_H0"].pop("baseline"), r"attention\['L0_H0'\] has keys"),
    (lambda a: a["L0_H0"].update(induction=1.5), "allowed: a mean attention from 0 to 1"),
    (lambda a: a["L0_H0"].update(induction=-0.1), "allowed: a mean attention from 0 to 1"),
    (lambda a: a.update(L9_H0=dict(a["L0_H0"])), "not in the model: L9_H0"),
])
def test_damaged_attention_is_refused_naming_it(damage, message):
    data = _planted().to_dict()
    damage(data["attention"])
    with pytest.raises(RecordError, match=message):
        MeasurementRecord.from_dict(data)


# ---- the claims: F1's planted sink head, the others ------------------------------------------------------


def _sink_in_layer_0(mass: float) -> list[MeasurementRecord]:
    """The healthy trajectory with a layer-0 head of 100x first-token selectivity at step2 whose attention
    to position 0 is ``mass`` (its baseline mass / 100)."""
    recs = S.healthy(extra_bos={2: ("L0_H1",)})
    recs[2].all_head_selectivity["L0_H1"]["first-token"] = 100.0
    recs = S.with_attention(recs, baseline={2: {"L0_H1": mass / 100.0}})
    recs[2].attention["L0_H1"]["first-token"] = mass
    return recs


def test_f1_holds_with_a_sink_head_of_negligible_mass_flagged():
    verdict = judge_f1(_sink_in_layer_0(1e-5))
    assert verdict.status is Status.HOLDS
    (flagged,) = verdict.details.negligible_heads
    assert (flagged.revision, flagged.head, flagged.cls, flagged.selectivity) == ("step2", "L0_H1", "first-token", 100.0)
    assert "L0_H1 (first-token 100x at step2) not counted: 1.0e-05 attention to the target, below the floor " \
           "3.9e-03 (1/T)" in verdict.message
    # the key figure leaves the head out, and says so
    assert verdict.figure.value == 1.0 and "left out" in verdict.figure.method and "1 not counted" in verdict.key
    assert verdict.details.attention_floor == ""


def test_f1_fails_on_the_same_head_with_real_mass():
    verdict = judge_f1(_sink_in_layer_0(0.5))
    assert verdict.status is Status.FAILS and verdict.failing_heads == ("L0_H1",)
    assert verdict.details.negligible_heads == () and verdict.figure.value == 100.0


def test_f1_per_revision_flags_the_head_too():
    from headwatch.claims.builtin.f1_zero_bos_floor import judge_f1_revision

    verdict = judge_f1_revision(_sink_in_layer_0(1e-5)[2])
    assert verdict.status is Status.HOLDS and [f.head for f in verdict.details.negligible_heads] == ["L0_H1"]
    assert "L0_H1 (first-token 100x) not counted" in verdict.message


def test_formation_and_causal_leave_out_and_show_a_noise_induction_head():
    """An extra final head at 80x induction with 1.6e-5 on its target: not in the circuit formation counts
    or the screen circuit the causal check compares with; both verdicts name it."""
    recs = S.healthy(induction_sets=S.HEALTHY["induction_sets"][:-1] + (("L3_H0", "L4_H1", "L5_H2", "L7_H0"),))
    recs = S.with_attention(recs, baseline={6: {"L7_H0": 2e-7}})
    formation = judge_formation(recs, S.FORMATION_EXPECT)
    assert formation.status is Status.HOLDS and set(formation.details.heads_final) == {"L3_H0", "L4_H1", "L5_H2"}
    assert [f.head for f in formation.details.negligible_heads] == ["L7_H0"]
    assert "L7_H0 (induction 80x at step6) not counted: 1.6e-05 attention" in formation.message
    causal = judge_causal(recs, S.HEALTHY_EXPECT)
    assert causal.details.screen_circuit == ("L3_H0", "L4_H1", "L5_H2")
    assert [f.head for f in causal.details.negligible_heads] == ["L7_H0"] and "L7_H0 (induction 80x) not counted" \
        in causal.message


def test_bos_fraction_counts_no_negligible_head():
    recs = S.healthy()
    final_bos = S.bos_candidates()[:24]  # 0.75 of 32 heads at the final revision
    recs = S.with_attention(recs, baseline={6: {h: 1e-7 for h in final_bos[:8]}})
    verdict = judge_f2(recs, S.HEALTHY_EXPECT)
    assert verdict.details.series_pct["step6"] == 50.0 and len(verdict.details.negligible_heads) == 8


def test_verdicts_with_flagged_heads_round_trip_through_json():
    import json

    for claim, v in judge_model(_sink_in_layer_0(1e-5), S.HEALTHY_EXPECT).items():
        assert Verdict.from_dict(json.loads(json.dumps(v.to_dict(), allow_nan=False))) == v, claim


def test_a_head_crosses_where_its_induction_attention_counts():
    """F5's crossing: head A is at 80x from step1 but with 8e-6 on its target until step3; it crosses at
    step3, and it is flagged (exactly at the 50x bar) at step1 and step2."""
    from headwatch.claims import trajectory as Tr

    recs = S.with_attention(S.healthy(), baseline={i: {S.A: 1e-7} for i in (1, 2)})
    assert Tr.head_lead(recs, S.A).crossed.revision == "step3"
    assert Tr.head_lead(S.with_attention(S.healthy()), S.A).crossed.revision == "step1"
    for r in recs[1:3]:
        r.all_head_selectivity[S.A]["induction"] = 50.0
    assert [(f.revision, f.head) for f in Tr.not_counted(recs, "induction", 50.0)] == [("step1", S.A), ("step2", S.A)]
    assert Tr.not_counted(recs, "induction", 50.5) == ()


def test_the_message_names_the_first_heads_and_counts_the_rest():
    from headwatch.claims.judging import not_counted_text
    from headwatch.claims.verdict import NegligibleHead

    flagged = [NegligibleHead(f"step{i}", f"L{k}_H0", "induction", 82.0, 1.6e-5, FLOOR) for k in range(5) for i in (1, 2)]
    text = not_counted_text(flagged, 1.0)
    assert text.startswith("L0_H0 (induction 82x at step1 and 1 more revision(s)) not counted: 1.6e-05 attention to "
                           "the target, below the floor 3.9e-03 (1/T); L1_H0")
    assert text.count("not counted") == 3 and text.endswith("; and 2 more head(s) below the floor (details.negligible_heads)")
    assert not_counted_text(flagged[:6], 1.0).count("not counted") == 3 and "more head(s)" not in not_counted_text(flagged[:6], 1.0)
    assert not_counted_text(flagged[:1], 2.0, at_revision=False) == (
        "L0_H0 (induction 82x) not counted: 1.6e-05 attention to the target, below the floor 3.9e-03 (2/T)")


def test_records_partly_without_attention_are_named():
    from headwatch.claims import trajectory as Tr

    recs = S.healthy()
    mixed = S.with_attention(recs[:5]) + recs[5:]
    assert Tr.attention_floor_note(S.with_attention(recs)) == ""
    assert Tr.attention_floor_note(recs) == NO_ATTENTION == Tr.attention_floor_note(recs[:1])
    assert Tr.attention_floor_note(mixed) == f"{NO_ATTENTION} in 2 of 7 records (applied in the others)"
    assert judge_f1(mixed).details.attention_floor == Tr.attention_floor_note(mixed)


def test_published_records_carry_no_attention_and_their_verdicts_say_the_floor_is_not_applied():
    recs = load_published("EleutherAI/pythia-1b")
    assert all(r.attention is None for r in recs)
    for claim, v in judge_model(recs).items():
        if hasattr(v.details, "attention_floor") and v.status is not Status.NOT_APPLICABLE:
            assert v.details.attention_floor == NO_ATTENTION, claim


# ---- the probes: the bootstrap's counts and measure()'s ablated circuit --------------------------------


def test_bootstrap_counts_leave_out_heads_below_the_floor():
    """Two heads, selectivity 100 in every example; one gives its targets 1e-5: counted without a floor,
    not with one."""
    n = 40
    values = np.zeros((n, len(HEAD_CLASSES), 1, 2), dtype=np.float32)
    values[:, HEAD_CLASSES.index("induction"), 0] = (0.5, 1e-5)
    values[:, HEAD_CLASSES.index("first-token"), 0] = (0.5, 1e-5)
    baseline = np.tile(np.array([[0.005, 1e-7]], dtype=np.float32), (n, 1, 1))
    common = dict(task=None, ablations={}, n_resamples=50, seed=0, level=0.95, induction_threshold=50.0,
                  bos_threshold=30.0)
    without = record_intervals(values, baseline, np.ones(n, bool), **common)
    with_floor = record_intervals(values, baseline, np.ones(n, bool), attention_floor=FLOOR, **common)
    assert without.induction_heads == (2.0, 2.0) and without.bos_fraction == (1.0, 1.0)
    assert with_floor.induction_heads == (1.0, 1.0) and with_floor.bos_fraction == (0.5, 0.5)


SMALL = ProbeSettings(n_examples=16, seq_len=48, vocab_lo=10, vocab_hi=300, n_pr=8, batch_size=8,
                      baseline_positions=20, n_bootstrap=0, sink_examples=0, induction_threshold=0.0)


@pytest.fixture(scope="module")
def tiny_records():
    from headwatch_testing.tiny import tiny_model

    from headwatch.probes.measure import measure

    model = tiny_model("gpt_neox", seed=3)
    return {floor: measure(model, dataclasses.replace(SMALL, attention_floor=floor), model_name="tiny/neox",
                           revision="step0", progress=False) for floor in (0.0, 1e6)}


def test_measure_records_the_attention_the_selectivities_come_from(tiny_records):
    rec = tiny_records[0.0]
    assert rec.attention is not None and set(rec.attention) == set(rec.heads())
    for h, att in rec.attention.items():
        assert set(att) == set(ATTENTION_KEYS) and all(0.0 <= v <= 1.0 for v in att.values())
        for c in HEAD_CLASSES:
            assert rec.all_head_selectivity[h][c] == pytest.approx(att[c] / max(att["baseline"], 1e-8), rel=1e-9)


def test_measure_ablates_only_the_heads_the_floor_keeps(tiny_records):
    """Threshold 0: every head is over it. With no floor every head is ablated; with a floor no head
    reaches, none is and nothing is ablated."""
    every = tiny_records[0.0]
    assert set(every.ablation("induction_circuit").heads) == set(every.heads())
    assert tiny_records[1e6].ablations == []


# ---- benchmarks/negligible_heads.py: its table from a record (the smoke tier runs the script) ----------


def test_the_benchmark_table_shows_what_the_floor_leaves_out():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "negligible_heads.py"
    spec = importlib.util.spec_from_file_location("negligible_heads_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rec = S.planted_record("step0", 1e9, induction=("L3_H0", "L4_H1"), bos=("L7_H3",))
    rec = S.with_attention([rec], baseline={0: {"L4_H1": 2e-7}})[0]
    row = bench.row(rec, 1.0)
    assert row["induction_no_floor"] == ["L3_H0", "L4_H1"] and row["induction_floor"] == ["L3_H0"]
    assert row["induction_not_counted"] == [{"head": "L4_H1", "selectivity": 80.0, "attention": pytest.approx(1.6e-5)}]
    assert row["bos_floor"] == row["bos_no_floor"] == ["L7_H3"] and row["floor"] == FLOOR
    table = bench.markdown([row])
    assert "| 2000 | 2 (L3_H0, L4_H1) | 1 (L3_H0) | L4_H1 80x at 1.6e-05 | 1 | 1 | none | 1.0 |" in table
