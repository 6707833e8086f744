"""The copyable-position reading of the causal check: the repeated batch, the per-sequence hits a
record keeps, the bootstrap over sequences, and the verdict with either reading deciding."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from headwatch.claims.builtin.causal_ablation import judge_causal
from headwatch.claims.synthetic import Ablations, healthy
from headwatch.claims.verdict import Status
from headwatch.probes.copying import copy_reading, effective_half, repeated_batch
from headwatch.probes.record import CopyReading, MeasurementRecord, RecordError
from headwatch.spec import SPEC, Expectations
from headwatch.stats import MIN_BOOTSTRAP_SEQUENCES, bootstrap_p_at_least, sequence_bootstrap_totals

from headwatch_testing.tiny import tiny_model

POSITIONS = 63  # half = 64
COPYABLE = Expectations(bos_shape="ramp", dclm=True, causal_reading="copyable")
QUERY = Expectations(bos_shape="ramp", dclm=True)


def with_copy(records: list[MeasurementRecord], **hits: list[int]) -> list[MeasurementRecord]:
    """The planted trajectory with the final record's copyable-position hits per sequence."""
    n = len(next(iter(hits.values())))
    records[-1].copy_reading = CopyReading(n_sequences=n, half=POSITIONS + 1, seed=SPEC.bootstrap_seed,
                                           positions_per_sequence=POSITIONS, hits={k: tuple(v) for k, v in hits.items()})
    return records


def planted(baseline: int, circuit: int, random: int, n: int = 32, query: Ablations | None = None) -> list[MeasurementRecord]:
    """Every sequence alike: ``baseline``/``circuit``/``random`` hits of 63 each."""
    records = healthy(ablations=query or Ablations(baseline=0.05, circuit=0.002, random=0.05))
    return with_copy(records, baseline=[baseline] * n, induction_circuit=[circuit] * n, matched_random=[random] * n)


# ---- the batch --------------------------------------------------------------------------------


def test_a_repeated_sequence_is_distinct_ids_then_the_same_ids():
    batch = repeated_batch(5, 16, 100, 200, seed=3)
    tokens = batch.tokens.numpy()
    assert tokens.shape == (5, 32) and batch.positions_per_sequence == 15
    assert (tokens[:, :16] == tokens[:, 16:]).all()
    assert all(len(set(row[:16])) == 16 for row in tokens)
    assert tokens.min() >= 100 and tokens.max() < 200
    assert torch.equal(repeated_batch(5, 16, 100, 200, seed=3).tokens, batch.tokens)
    assert not torch.equal(repeated_batch(5, 16, 100, 200, seed=4).tokens, batch.tokens)


def test_the_half_is_capped_at_the_token_range_and_the_positions():
    assert effective_half(64, 100, 10000, 2048) == 64
    assert effective_half(64, 4, 64, 2048) == 60  # a 60-id range: 60 distinct ids at most
    assert effective_half(64, 100, 10000, 100) == 50  # 100 positions: sequences of 2 x 50
    assert effective_half(64, 0, 1, None) == 1  # below 2: no copyable position, the reading is skipped


def test_a_copy_reading_of_a_model_counts_hits_per_sequence_within_bounds():
    model = tiny_model("gpt_neox", seed=0).eval()
    batch = repeated_batch(4, 10, 5, 60, seed=1)
    reading = copy_reading(model, batch, {"induction_circuit": ["L1_H0"], "matched_random": ["L1_H1"]},
                           torch.device("cpu"), seed=1)
    assert set(reading.hits) == {"baseline", "induction_circuit", "matched_random"}
    assert all(len(v) == 4 and all(0 <= c <= 9 for c in v) for v in reading.hits.values())
    reading.check("reading")


def test_the_hits_are_the_greedy_top1_on_the_copyable_positions_only():
    """A stand-in model whose logits at position t favour token t+1's true value where t is copyable
    and a wrong id elsewhere: every copyable position is a hit, and nothing else is counted."""
    batch = repeated_batch(3, 8, 10, 40, seed=0)

    class Oracle(torch.nn.Module):
        config = type("C", (), {"vocab_size": 40})()

        def forward(self, input_ids, logits_to_keep, use_cache):
            B, T = input_ids.shape
            logits = torch.zeros(B, T, 40)
            logits[:, :-1].scatter_(2, input_ids[:, 1:, None], 1.0)
            return type("Out", (), {"logits": logits[:, -logits_to_keep:]})()

    from headwatch.probes.copying import _hits

    assert _hits(Oracle(), batch.tokens, batch.half).tolist() == [7, 7, 7]


# ---- the record -------------------------------------------------------------------------------


@pytest.mark.parametrize("change, words", [
    (dict(hits={"baseline": (1, 2)}), "holds 2 counts for 3 sequences"),
    (dict(hits={"baseline": (1, 2, 64)}), "above the 63 copyable positions"),
    (dict(positions_per_sequence=62), "has 63 copyable positions"),
])
def test_a_copy_reading_that_does_not_add_up_is_refused_on_reading(change, words):
    record = planted(60, 1, 58, n=3)[-1]
    record.copy_reading = dataclasses.replace(record.copy_reading, **change)
    with pytest.raises(RecordError, match=words):
        MeasurementRecord.from_dict(record.to_dict(), "record")


def test_a_copy_reading_round_trips_through_json():
    record = planted(60, 1, 58, n=12)[-1]
    again = MeasurementRecord.from_dict(record.to_dict(), "record")
    assert again.copy_reading == record.copy_reading


# ---- the statistics ---------------------------------------------------------------------------


def test_the_bootstrap_p_is_never_zero_and_counts_ties_against_the_claim():
    assert bootstrap_p_at_least(np.zeros(999), 0.25) == pytest.approx(1 / 1000)
    assert bootstrap_p_at_least(np.full(999, 0.25), 0.25) == 1.0
    assert bootstrap_p_at_least(np.array([np.nan, 0.1, 0.1, 0.1]), 0.25) == pytest.approx(2 / 5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 63), st.integers(0, 63)), min_size=2, max_size=20), st.integers(0, 10))
def test_the_sequence_bootstrap_keeps_conditions_paired(pairs, seed):
    """Resampling draws whole sequences for every condition at once: a condition identical to
    another stays identical in every resample, and totals lie between S x min and S x max."""
    first = [a for a, _ in pairs]
    totals = sequence_bootstrap_totals({"a": first, "b": first, "c": [b for _, b in pairs]}, 50, seed)
    assert np.array_equal(totals["a"], totals["b"])
    assert (totals["a"] >= len(first) * min(first)).all() and (totals["a"] <= len(first) * max(first)).all()


# ---- the verdict ------------------------------------------------------------------------------


def test_a_clear_cut_on_every_copyable_position_holds_when_that_reading_decides():
    v = judge_causal(planted(60, 1, 58), COPYABLE)
    assert v.status is Status.HOLDS and v.details.reading == "copyable" and v.details.copyable.decides
    assert v.details.copyable.p_vs_bar == pytest.approx(1 / (SPEC.n_bootstrap + 1), rel=1e-3)
    assert "every copyable position (2016 positions over 32 repeated sequences" in v.message
    assert v.figure.value == pytest.approx(1 / 60, abs=1e-4)


def test_the_query_reading_decides_by_default_and_the_copyable_one_is_only_reported():
    """Planted: a query position with no signal (1 of 2000 at baseline: the bar cannot be
    established) and a clear copyable cut. The default verdict is the query's, with the other beside it."""
    records = planted(60, 1, 58, query=Ablations(baseline=0.004, circuit=0.0, random=0.004))
    query, copyable = judge_causal(records, QUERY), judge_causal(records, COPYABLE)
    assert query.status is Status.CONSISTENT_NOT_ESTABLISHED and copyable.status is Status.HOLDS
    assert "reported beside the query position's and not deciding: holds" in query.message
    plain = planted(60, 1, 58, query=Ablations(baseline=0.004, circuit=0.0, random=0.004))
    plain[-1].copy_reading = None
    assert judge_causal(plain, QUERY).status is query.status and judge_causal(plain, QUERY).key == query.key


@pytest.mark.parametrize("circuit, random, status", [
    (15, 58, Status.CONSISTENT_NOT_ESTABLISHED),  # 25% of 60 exactly: the point rule passes, the test cannot
    (16, 58, Status.FAILS),  # 26.7% of baseline: the cut fails
    (10, 10, Status.FAILS),  # no lower than matched random: the control fails
    (14, 58, Status.HOLDS),  # 23.3%, every sequence alike: established
])
def test_the_bar_and_the_control_on_copyable_positions(circuit, random, status):
    assert judge_causal(planted(60, circuit, random), COPYABLE).status is status


def test_a_cut_carried_by_one_sequence_in_ten_is_not_established():
    """Nine sequences lose every hit, one keeps all: 10% of baseline over 630 positions, which a
    test treating positions as independent would call certain; resampling sequences, a draw with three
    copies of the odd one is at 30% (binomial(10, 0.1) >= 3: 7%), so the bar is not established."""
    records = with_copy(healthy(), baseline=[60] * 10, induction_circuit=[0] * 9 + [60], matched_random=[58] * 10)
    v = judge_causal(records, COPYABLE)
    assert v.details.copyable.share_of_baseline == pytest.approx(0.1)
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED
    assert 0.05 < v.details.copyable.p_vs_bar < 0.12


def test_too_few_sequences_or_no_baseline_hits_are_missing_evidence():
    few = judge_causal(planted(60, 1, 58, n=MIN_BOOTSTRAP_SEQUENCES - 1), COPYABLE)
    assert few.status is Status.NOT_ESTABLISHED and "too few for a bootstrap over sequences" in few.message
    assert judge_causal(planted(60, 1, 58, n=MIN_BOOTSTRAP_SEQUENCES), COPYABLE).status is Status.HOLDS
    silent = judge_causal(planted(0, 0, 0), COPYABLE)
    assert silent.status is Status.NOT_ESTABLISHED and "does not copy" in silent.message


def test_a_panel_asking_the_copyable_reading_of_records_without_it_is_not_established():
    v = judge_causal(healthy(ablations=Ablations(baseline=0.8, circuit=0.01, random=0.7)), COPYABLE)
    assert v.status is Status.NOT_ESTABLISHED and "copyable-position reading" in v.details.missing


def test_the_causal_reading_is_checked_like_every_panel_key():
    from headwatch.schema import from_data
    from headwatch.validation import InputError

    assert from_data(Expectations, {"causal_reading": "copyable"}, "expect").causal_reading == "copyable"
    with pytest.raises(InputError, match="copyable"):
        from_data(Expectations, {"causal_reading": "copyables"}, "expect")


def test_without_a_matched_random_ablation_the_control_is_missing_evidence_not_a_failure():
    records = with_copy(healthy(), baseline=[60] * 32, induction_circuit=[1] * 32)
    v = judge_causal(records, COPYABLE)
    assert v.status is Status.NOT_ESTABLISHED and v.details.missing == ("no matched-random ablation",)
    assert "with matched random" not in v.message and "control p" not in v.message


def test_the_copyable_reading_says_which_test_is_weak_and_what_is_missing():
    """The message names the test that fell short (not the one that passed); the interval and the share
    appear where there are any; what is missing is listed only when evidence is."""
    weak = judge_causal(planted(60, 15, 58), COPYABLE)  # 25% of baseline: the bar's test cannot pass
    assert weak.status is Status.CONSISTENT_NOT_ESTABLISHED and weak.details.missing == ()
    assert "the bar (circuit < 25% of baseline) (p = " in weak.message
    assert "the control (circuit < matched random) (p = " not in weak.message
    odd = judge_causal(with_copy(healthy(), baseline=[60] * 10, induction_circuit=[0] * 9 + [60],
                                 matched_random=[58] * 10), COPYABLE)
    lo, hi = odd.details.copyable.share_interval
    assert lo < 0.1 < hi
    assert "= 10.0% of baseline [" in odd.message
    few = judge_causal(planted(60, 1, 58, n=MIN_BOOTSTRAP_SEQUENCES - 1), COPYABLE)
    assert few.details.copyable.share_interval is None and "of baseline [" not in few.message
    assert few.details.missing == (f"{MIN_BOOTSTRAP_SEQUENCES - 1} sequences, too few for a bootstrap over sequences "
                                   f"(needs >= {MIN_BOOTSTRAP_SEQUENCES})",)
    silent = judge_causal(planted(0, 0, 0), COPYABLE)
    assert "of baseline" not in silent.message.split("every copyable position")[1].split(";")[0]
