"""Unit and property tests of claims/trajectory.py on planted records (no model, no data files)."""
from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwatch.claims import trajectory as T
from headwatch.claims.judge import judge_model
from headwatch.claims.synthetic import (
    A, B, C, D, D_HEAD, HEALTHY, HEALTHY_EXPECT, PR_HIGH, PR_LOW, TOKENS, Ablations, bos_candidates, healthy,
    planted_record, planted_trajectory,
)
from headwatch.fixtures.panels import tokens_from_name
from headwatch.probes.participation import is_elevated

FAST = settings(max_examples=40, deadline=None)


# ---- tokens and ordering -----------------------------------------------------------------------


def test_tokens_from_revision_names():
    assert tokens_from_name("step11000-tokens23B") == 23e9
    assert tokens_from_name("step5000-tokens20B") == 20e9
    assert tokens_from_name("step10-tokens1.5M") == 1.5e6
    assert tokens_from_name("step10") is None  # a bare step says nothing by itself


def test_tokens_per_revision_sorts_by_tokens():
    recs = healthy()
    shuffled = recs[::-1]
    pts = T.tokens_per_revision(shuffled)
    assert [p.tokens for p in pts] == list(TOKENS)
    assert [p.index for p in pts] == list(range(len(TOKENS)))


def test_by_tokens_refuses_bad_trajectories():
    recs = healthy()
    with pytest.raises(ValueError, match="no measurement records"):
        T.by_tokens([])
    other = planted_record("x", 5e9, model="other/model")
    with pytest.raises(ValueError, match="several models"):
        T.by_tokens(recs + [other])
    unknown = planted_record("stepX", 1.0)
    unknown.tokens_seen = None
    with pytest.raises(ValueError, match="tokens seen unknown"):
        T.by_tokens(recs + [unknown])
    with pytest.raises(ValueError, match="appears twice"):
        T.by_tokens(recs + [planted_record("step0", 7e12)])


@FAST
@given(st.randoms(use_true_random=False))
def test_verdicts_do_not_depend_on_record_order(rnd: random.Random):
    recs = healthy()
    shuffled = recs[:]
    rnd.shuffle(shuffled)
    assert judge_model(shuffled, HEALTHY_EXPECT) == judge_model(recs, HEALTHY_EXPECT)


# ---- F1 ----------------------------------------------------------------------------------------


def test_early_layer_bos_heads_finds_only_layers_0_1():
    rec = planted_record("s", 1.0, bos=("L0_H2", "L1_H0", "L2_H0", "L7_H3"))
    assert T.early_layer_bos_heads(rec) == ["L0_H2", "L1_H0"]
    assert T.early_layer_bos_heads(rec, layers=(2,)) == ["L2_H0"]
    # the threshold is inclusive (>= 30)
    rec.all_head_selectivity["L0_H0"]["first-token"] = 30.0
    rec.all_head_selectivity["L0_H1"]["first-token"] = 29.999
    assert "L0_H0" in T.early_layer_bos_heads(rec) and "L0_H1" not in T.early_layer_bos_heads(rec)


# ---- shape -------------------------------------------------------------------------------------


def test_series_shape_examples():
    assert T.series_shape([0, 0.1, 0.2, 0.3, 0.4]).shape == "ramp"
    step = T.series_shape([0.0, 0.07, 0.70, 0.78, 0.81])
    assert step.shape == "step" and step.rise_at == 2 and step.largest_rise == pytest.approx(0.63)
    assert T.series_shape([0.0, 0.5, 1.0]).shape == "step"  # exactly 50% of the rise counts as a step
    assert T.series_shape([0.3, 0.3, 0.3]).shape == "flat"
    # a rise over a subnormal total: the share is beyond float's range and reads as infinity
    huge = T.series_shape([0.0, 1e300, 5e-324])
    assert huge.shape == "step" and huge.share == float("inf") and huge.total_rise == 5e-324
    assert T.series_shape([0.5, 0.2]).shape == "flat"
    assert T.series_shape([0.4]).shape == "flat"


series_st = st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=12)

#: Series on a dyadic grid (k / 2^10, as BOS fractions are k / n_heads for power-of-two head counts)
#: and positive affine maps with dyadic scale and shift: every mapped value is exact in binary
#: floating point, so the map itself loses nothing and the property can be asserted with no
#: exclusions, ties at the step share included.
dyadic_series_st = st.lists(st.integers(0, 2**10).map(lambda k: k / 2**10), min_size=2, max_size=12)
dyadic_scale_st = st.integers(1, 2**8).map(lambda k: k / 2**4)  # (0, 16]
dyadic_shift_st = st.integers(-2**8, 2**8).map(lambda k: k / 2**6)  # [-4, 4]


@FAST
@given(dyadic_series_st, dyadic_scale_st, dyadic_shift_st)
def test_series_shape_is_invariant_to_positive_affine_maps(values, scale, shift):
    """The shape is decided on exact rationals (claims/trajectory.py), so a positive affine image that
    is itself exact has the same shape, always. (The old property mapped arbitrary floats: then the
    map's own rounding destroys information, e.g. [0, 1, 1.1e-36] + 1 = [1, 2, 1], a rise that no
    longer exists; no rule can be invariant to that, and an `assume` only hid it.)"""
    mapped = [scale * v + shift for v in values]
    assert all(Fraction(m) == Fraction(scale) * Fraction(v) + Fraction(shift) for m, v in zip(mapped, values))
    a, b = T.series_shape(values), T.series_shape(mapped)
    assert a.shape == b.shape and a.rise_at == b.rise_at
    assert a.share == b.share  # the same rational, rounded once


@FAST
@given(series_st, st.floats(0.1, 10), st.floats(-1, 1))
def test_series_shape_of_rounded_affine_images_follows_their_exact_values(values, scale, shift):
    """Arbitrary floats: the rule is exact on the numbers it is given, so the shape of a rounded
    image is the shape of that image's exact values, never a rounding artefact of the rule."""
    mapped = [scale * v + shift for v in values]
    exact = [Fraction(m) for m in mapped]
    total = exact[-1] - exact[0]
    res = T.series_shape(mapped)
    if total <= 0:
        assert res.shape == "flat"
    else:
        largest = max(exact[i] - exact[i - 1] for i in range(1, len(exact)))
        assert res.shape == ("step" if largest / total >= Fraction(0.5) else "ramp")


@FAST
@given(series_st)
def test_series_shape_definition(values):
    res = T.series_shape(values)
    exact = [Fraction(v) for v in values]
    rises = [exact[i] - exact[i - 1] for i in range(1, len(exact))]
    total = exact[-1] - exact[0]
    if total <= 0:
        assert res.shape == "flat"
    else:
        assert res.largest_rise == float(max(rises))
        assert res.shape == ("step" if max(rises) >= total / 2 else "ramp")
        assert 0 < res.share <= 1 or max(rises) > total


def test_series_shape_ties_at_the_step_share_are_steps():
    assert T.series_shape([0, 0.25, 0.5]).shape == "step"  # exactly half the rise in one step
    assert T.series_shape([0.1, 0.2, 0.3]).shape == "step"  # 0.2 - 0.1 is a hair above half of 0.3 - 0.1 in binary
    assert T.series_shape([0, 0.5, 1.0], step_share=0.5000001).shape == "ramp"


# ---- milestones --------------------------------------------------------------------------------

fraction_st = st.integers(0, 24).map(lambda k: k / 32)
pool = [A, B, C, D, "L2_H1", "L7_H2"]
set_st = st.lists(st.sampled_from(pool), unique=True, max_size=len(pool))


@st.composite
def trajectories(draw):
    n = draw(st.integers(2, 7))
    return planted_trajectory(
        TOKENS[:n],
        bos_fractions=[draw(fraction_st) for _ in range(n)],
        induction_sets=[draw(set_st) for _ in range(n)],
        pr={h: [draw(st.sampled_from([PR_LOW, PR_HIGH])) for _ in range(n)] for h in pool},
        ablations=None,
    )


@FAST
@given(trajectories())
def test_milestones_are_monotone_in_their_thresholds(recs):
    def tok(m):
        return float("inf") if m.tokens is None else m.tokens

    assert tok(T.t_induction(recs, 1)) <= tok(T.t_induction(recs, 3)) <= tok(T.t_induction(recs, 5))
    assert tok(T.t_bos50(recs, 0.25)) <= tok(T.t_bos50(recs, 0.5)) <= tok(T.t_bos50(recs, 0.75))
    sep = T.induction_bos_separation(recs)
    if sep.ratio is not None:
        assert sep.ratio == pytest.approx(sep.bos.tokens / sep.induction.tokens)


def test_milestones_on_the_healthy_trajectory():
    recs = healthy()
    assert T.t_induction(recs).revision == "step1"
    assert T.t_induction(recs, min_heads=4).point is None
    assert T.t_bos50(recs).revision == "step5" and T.t_bos50(recs).before.revision == "step4"
    sep = T.induction_bos_separation(recs)
    assert sep.ratio == pytest.approx(1e11 / 1e9)
    assert sep.bounds == pytest.approx((2e10 / 1e9, 1e11 / 1e8))  # the open interval (b0 / i1, b1 / i0)
    assert T.t_induction(recs).bracket == (1e8, 1e9)
    assert T.bos_fraction_series(recs) == list(HEALTHY["bos_fractions"])


# ---- recall ------------------------------------------------------------------------------------


@FAST
@given(trajectories())
def test_recall_is_a_fraction_and_complete_at_the_end(recs):
    final, series = T.recall_series(recs)
    if not final:
        assert series == []
        return
    assert all(0 <= p.recall <= 1 for p in series)
    assert series[-1].recall == 1
    conv = T.first_recall_at_least(recs)
    assert conv.point is not None and conv.fraction_of_total <= 1
    assert all(p.recall < 2 / 3 - 1e-9 for p in series[: conv.point.point.index])


def test_recall_two_of_three_reaches_two_thirds():
    conv = T.first_recall_at_least(healthy())
    assert conv.final_circuit == (A, B, C)
    assert conv.point.point.revision == "step1" and conv.point.found == (A, B)
    assert conv.fraction_of_total == pytest.approx(1e9 / 1e12)
    assert T.first_recall_at_least(healthy(), total_tokens=2e12).fraction_of_total == pytest.approx(0.0005)


# ---- PR elevation ------------------------------------------------------------------------------


def test_pr_elevation_boundary():
    bar = 1 + 0.1 * (D_HEAD - 1)
    assert is_elevated(bar, D_HEAD) and not is_elevated(bar - 1e-6, D_HEAD)
    assert is_elevated(1.0, D_HEAD, fraction=0.0)


@FAST
@given(trajectories(), st.sampled_from([0.05, 0.1, 0.2]))
def test_head_lead_holds_iff_elevated_no_later_than_crossing(recs, fraction):
    res = T.pr_lead(recs, fraction)
    for lead in res.heads:
        assert lead.crossed is not None  # final circuit heads cross at the latest at the end
        expected = lead.elevated is not None and lead.elevated.index <= lead.crossed.index
        assert lead.holds == expected
        assert (lead.head in res.failing) == (not expected)


def test_head_lead_on_the_healthy_trajectory():
    res = T.pr_lead(healthy())
    by_head = {l.head: l for l in res.heads}
    assert res.holds and set(by_head) == {A, B, C}
    assert by_head[C].elevated.revision == "step3" and by_head[C].crossed.revision == "step5"
    assert by_head[C].lead == pytest.approx(1e11 / 1e10)


def test_head_lead_needs_pr():
    with pytest.raises(ValueError, match="no PR"):
        T.head_lead(healthy(with_pr=False), A)
    assert not T.has_pr(healthy(with_pr=False))


# ---- ablation ----------------------------------------------------------------------------------


def test_ablation_verdict_boundaries():
    at_bar = healthy(ablations=Ablations(baseline=0.04, circuit=0.01, random=0.02))
    v = T.ablation_verdict(at_bar[-1])
    # at the bar exactly the point rule passes, its exact test cannot (the cut is not established)
    assert v.cuts_enough and v.beats_random and not v.meets_bar and not v.holds
    assert v.share_of_baseline == pytest.approx(0.25) and v.p_vs_bar > 0.5
    clear = T.ablation_verdict(healthy(ablations=Ablations(baseline=0.4, circuit=0.01, random=0.02))[-1])
    assert clear.meets_bar and clear.beats_random and clear.holds
    equal_random = healthy(ablations=Ablations(baseline=0.04, circuit=0.005, random=0.005))
    assert not T.ablation_verdict(equal_random[-1]).holds  # must be strictly below random
    assert T.ablation_verdict(healthy(ablations=None)[-1]) is None
    assert T.last_with_ablations(healthy(ablations=None)) is None


def test_bos_candidates_avoid_layers_0_and_1():
    assert all(not h.startswith(("L0_", "L1_")) for h in bos_candidates())


def test_an_empty_matched_random_ablation_is_no_control():
    """Ablating no head reproduces the baseline; it must not count as a control the circuit beats."""
    from dataclasses import replace

    from headwatch.claims.synthetic import healthy
    from headwatch.claims.trajectory import ablation_verdict, last_with_ablations

    final = last_with_ablations(healthy())
    final.ablations = [replace(a, heads=()) if a.name == "matched_random" else a for a in final.ablations]
    verdict = ablation_verdict(final)
    assert verdict.random_top1 is None and not verdict.beats_random and not verdict.holds


# ---- censored milestones, bounds and leads at their edges (issue 25) ----------------------------


def test_a_milestone_never_met_is_right_censored_after_the_last_revision():
    recs = healthy()
    m = T.t_induction(recs, min_heads=4)
    assert m.censored and m.point is None and m.before.revision == "step6" and m.bracket == (1e12, float("inf"))
    met = T.t_induction(recs)
    assert not met.censored and met.bracket == (1e8, 1e9)
    first = T.t_induction(healthy(induction_sets=((A, B, C),) * 7))
    assert first.before is None and first.bracket == (0.0, 1e8)
    assert T.first_meeting("nothing", [], []) == T.Milestone("nothing", None, None)


def test_ratio_bounds_at_zero():
    assert T._ratio_bound(0.0, 0.0, 0.0) == 0.0 and T._ratio_bound(0.0, 0.0, float("inf")) == float("inf")
    assert T._ratio_bound(1.0, 0.0, 0.0) == float("inf") and T._ratio_bound(3.0, 1.0, 0.0) == 3.0
    assert T._ratio_bound(2.0, 4.0, 9.0) == 0.5 and T._ratio_bound(float("inf"), 2.0, 0.0) == float("inf")
    assert T._ratio_bound(5.0, float("inf"), 9.0) == 0.0


def test_separation_with_both_milestones_at_a_zero_token_first_revision():
    recs = healthy(tokens=(0.0, 1e9, 3e9, 1e10, 2e10, 1e11, 1e12), bos_fractions=(0.5,) * 7,
                   induction_sets=((A, B, C),) * 7)
    sep = T.induction_bos_separation(recs)
    assert sep.ratio is None and sep.bounds == (0.0, float("inf")) and sep.censored == ()


def test_separation_point_estimate_needs_only_positive_tokens():
    recs = healthy(tokens=(1.0, 1e9, 3e9, 1e10, 2e10, 1e11, 1e12), induction_sets=((A, B, C),) * 7)
    assert T.induction_bos_separation(recs).ratio == 1e11


def test_recall_at_the_final_revision_uses_the_circuits_own_threshold():
    """Heads found earlier may be counted at another threshold, but the final revision's circuit is
    itself: recall 1 there even when the intermediate threshold is the stricter one."""
    final, series = T.recall_series(healthy(), intermediate_threshold=100.0)
    assert series[-1].recall == 1.0 and series[1].recall == 0.0 and final == {A, B, C}


def test_recall_point_at_the_first_revision_and_without_a_circuit():
    conv = T.first_recall_at_least(healthy(induction_sets=((A, B, C),) * 7))
    assert conv.point.point.index == 0 and conv.fraction_bounds == (0.0, 1e8 / 1e12)
    none = T.first_recall_at_least(healthy(induction_sets=((A,),) * 6 + ((),)))
    assert none.point is None and none.fraction_of_total is None and none.fraction_bounds is None
    assert not T.pr_lead(healthy(induction_sets=((A,),) * 6 + ((),))).holds  # no heads: F5 has nothing to hold on


def test_leads_at_their_edges():
    recs = healthy(tokens=(1.0, 1e9, 3e9, 1e10, 2e10, 1e11, 1e12))
    assert T.head_lead(recs, A).lead == 1e9  # elevated at 1 token, crosses at 1e9
    zero = healthy(tokens=(0.0, 1e9, 3e9, 1e10, 2e10, 1e11, 1e12))
    assert T.head_lead(zero, A).lead is None  # elevated at 0 tokens: no ratio
    never = T.head_lead(healthy(), D)  # D is an induction head only at step1-2, never elevated
    assert never.elevated is None and never.lead is None and never.timing == "never"
    nowhere = T.head_lead(healthy(), "L7_H3")  # never crosses
    assert nowhere.crossed is None and nowhere.lead is None and nowhere.timing is None and nowhere.holds


def test_head_lead_crosses_at_exactly_the_threshold():
    recs = healthy()
    recs[2].all_head_selectivity[C]["induction"] = 50.0
    assert T.head_lead(recs, C).crossed.revision == "step2"


def test_head_lead_refuses_missing_pr_and_head_dimension():
    recs = healthy()
    del recs[3].pr[A]
    with pytest.raises(ValueError, match=r"no PR for L3_H0 at revisions \['step3'\]"):
        T.head_lead(recs, A)
    flat = healthy()
    flat[2].d_head = 1
    with pytest.raises(ValueError, match="d_head unknown"):
        T.head_lead(flat, A)


def test_top1_count_needs_both_the_count_and_its_n():
    from headwatch.probes.record import TaskMetrics

    both = T.top1_count(TaskMetrics(loss=1.0, top1=0.05, top5=0.1, mean_logit_target=1.0, n=2000, top1_count=100), None)
    assert both == T.Top1Count(100, 2000, False)
    for n, k in ((None, 100), (2000, None)):
        rate = TaskMetrics(loss=1.0, top1=0.05, top5=0.1, mean_logit_target=1.0, n=n, top1_count=k)
        assert T.top1_count(rate, 1000) == T.Top1Count(50, 1000, True) and T.top1_count(rate, None) is None


def test_exact_tests_need_both_counts():
    count = T.Top1Count(5, 2000, False)
    v = T.AblationVerdict(baseline_top1=0.05, circuit_top1=0.0025, random_top1=0.01, circuit_heads=(A,),
                          random_heads=(B,), max_share=0.25, circuit_count=None, random_count=count, baseline_count=count)
    assert v.p_vs_random is None and v.p_vs_bar is None and not v.beats_random and not v.meets_bar
    w = T.AblationVerdict(baseline_top1=0.05, circuit_top1=0.0025, random_top1=0.01, circuit_heads=(A,),
                          random_heads=(B,), max_share=0.25, circuit_count=count)
    assert w.p_vs_random is None and w.p_vs_bar is None and not w.holds


def test_below_random_needs_a_random_control():
    """No matched-random ablation: the circuit is not below a control that does not exist (and no
    comparison with None is attempted)."""
    v = T.AblationVerdict(baseline_top1=0.05, circuit_top1=0.0025, random_top1=None, circuit_heads=(A,),
                          random_heads=(), max_share=0.25)
    assert v.below_random is False and not v.beats_random and not v.holds


def test_ablation_verdict_needs_the_circuit_ablation():
    recs = healthy()
    recs[-1].ablations = [a for a in recs[-1].ablations if a.name != "induction_circuit"]
    assert T.ablation_verdict(recs[-1]) is None and T.last_with_ablations(recs) is None


def test_elevated_by_before_the_first_revision_is_empty():
    assert T.elevated_by(healthy(), -1) == frozenset() and T.elevated_by(healthy(), 0) == {A}


def test_ablation_verdict_needs_the_cut_as_well_as_both_tests():
    count = T.Top1Count
    v = T.AblationVerdict(baseline_top1=0.1, circuit_top1=0.05, random_top1=0.2, circuit_heads=(A,), random_heads=(B,),
                          max_share=0.25, baseline_count=count(200, 2000, False), circuit_count=count(100, 2000, False),
                          random_count=count(400, 2000, False))
    assert v.beats_random and not v.cuts_enough and not v.holds
    # the bar's exact test refuses what its point rule refuses (p < alpha puts the share below the bar)
    assert not v.meets_bar and v.p_vs_bar > 0.5
    # rates and counts that disagree (a hand-written record): the point rule on the rates still decides
    w = T.AblationVerdict(baseline_top1=0.1, circuit_top1=0.05, random_top1=0.2, circuit_heads=(A,), random_heads=(B,),
                          max_share=0.25, baseline_count=count(200, 2000, False), circuit_count=count(2, 2000, False),
                          random_count=count(400, 2000, False))
    assert w.beats_random and w.meets_bar and not w.cuts_enough and not w.holds


def test_a_lead_needs_a_crossing():
    recs = healthy(pr={**HEALTHY["pr"], "L7_H3": (PR_HIGH,) * 7})  # elevated from step0, never an induction head
    lead = T.head_lead(recs, "L7_H3")
    assert lead.elevated.index == 0 and lead.crossed is None and lead.lead is None
