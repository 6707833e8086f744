"""Every branch of every verdict, each at its boundary (issue 25).

The claim modules (claims/test_*.py) hold each claim's negative controls and tests/test_tolerances.py
pins each SPEC constant from both sides; this file covers the branches those leave: F1's
"consistent, not established" when an early head's upper bound reaches the bar, F3 with a
milestone at 0 tokens, F4's paper-table readings, F5's timing and margins, the causal check's
missing evidence, formation's conditions, and how declared deviations count. `tools/mutate.py`
runs these first: a mutant of the judge that no test here or elsewhere turns red is a gap.
"""
from __future__ import annotations

import dataclasses

import pytest

from headwatch.claims import trajectory as T
from headwatch.formatting import fmt_tokens
from headwatch.claims.judge import (
    judge_causal, judge_f1, judge_f1_revision, judge_f2, judge_f3, judge_f4, judge_f5, judge_formation,
    judge_model, not_judged, status_word, surprises,
)
from headwatch.claims.synthetic import (
    A, B, C, D, PR_HIGH, PR_LOW, Ablations, FORMATION_EXPECT, HEALTHY_EXPECT, bos_never_forms, healthy, planted_record,
)
from headwatch.claims.verdict import Point, Status
from headwatch.probes.record import RecordIntervals
from headwatch.stats import BOSCHLOO, RATIO_TEST_UNCONDITIONAL
from headwatch.spec import SPEC, Deviation, Expectations, Formation, FormationWindow, PaperTop1


def _with_interval(value: float, upper: float, lower: float = 1.0):
    """One record: a layer-0 head at first-token ``value`` with interval (lower, upper), and a BOS
    head in layer 5 (so F1 is not vacuous)."""
    rec = planted_record("step0", 1e9)
    rec.all_head_selectivity["L0_H1"]["first-token"] = value
    rec.all_head_selectivity["L5_H0"]["first-token"] = 80.0
    rec.intervals = RecordIntervals(level=0.95, methods={"selectivity": "bootstrap"},
                                    selectivity={"L0_H1": {"first-token": (lower, upper)}})
    return rec


# ---- F1 -----------------------------------------------------------------------------------------


def test_f1_upper_bound_at_the_bar_is_consistent_not_established():
    v = judge_f1([_with_interval(20.0, 30.0)])
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.details.highest_upper_bound == 30.0
    assert "not established: an early head's 95% upper bound reaches 30 (>= 30)" in v.message
    assert v.figure.interval == (1.0, 30.0) and v.figure.method == "bootstrap" and v.margin == 10.0


def test_f1_upper_bound_below_the_bar_holds():
    v = judge_f1([_with_interval(20.0, 29.9)])
    assert v.status is Status.HOLDS and v.details.highest_upper_bound == 29.9
    assert v.key == "0 of 8 heads; max 20x [1, 29.9]"


def test_f1_a_wide_interval_on_a_low_head_still_decides():
    """The verdict reads the UPPER bound: a head at 5x whose interval reaches 31 is not established."""
    v = judge_f1([_with_interval(5.0, 31.0, lower=0.5)])
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED


def test_f1_per_revision_upper_bound_at_the_bar():
    assert judge_f1_revision(_with_interval(20.0, 30.0)).status is Status.CONSISTENT_NOT_ESTABLISHED
    v = judge_f1_revision(_with_interval(20.0, 29.9))
    assert v.status is Status.HOLDS and v.failing_revisions == () and v.margin == 10.0


def test_f1_vacuous_everywhere_and_at_some_revisions():
    recs = healthy(bos_fractions=(0.0,) * 7)
    v = judge_f1(recs)
    assert v.status is Status.HOLDS_VACUOUSLY and v.details.vacuous_revisions == tuple(r.revision for r in recs)
    assert "holds vacuously: no head in any layer has first-token selectivity >= 30" in v.message
    some = judge_f1(healthy())  # the healthy BOS curve is 0 at step0 only
    assert some.status is Status.HOLDS and some.details.vacuous_revisions == ("step0",)
    assert "vacuous at 1 of 7 revisions" in some.message and some.details.bos_heads_anywhere == 24


def test_f1_failures_name_revisions_and_heads():
    v = judge_f1(healthy(extra_bos={2: ("L0_H1",), 4: ("L1_H0", "L0_H1")}))
    assert v.status is Status.FAILS and v.failing_revisions == ("step2", "step4")
    assert v.failing_heads == ("L0_H1", "L1_H0") and v.key.startswith("2 of 8 heads (2 rev.)")
    assert v.figure.value == 80.0 and v.margin == -50.0
    one = judge_f1_revision(healthy(extra_bos={2: ("L0_H1",)})[2])
    assert one.status is Status.FAILS and one.failing_heads == ("L0_H1",) and "L0_H1 (first-token 80.0x)" in one.message


# ---- F2 -----------------------------------------------------------------------------------------


def test_f2_margins_and_the_flat_shape():
    ramp = judge_f2(healthy(), Expectations(bos_shape="ramp"))
    assert ramp.status is Status.HOLDS and ramp.margin == pytest.approx(0.5 - ramp.details.share)
    step = judge_f2(healthy(), Expectations(bos_shape="step"))
    assert step.status is Status.FAILS and step.margin == pytest.approx(-ramp.margin)
    flat = judge_f2(healthy(bos_fractions=(0.25,) * 7), Expectations(bos_shape="ramp"))
    assert flat.details.shape == "flat" and flat.status is Status.FAILS and flat.margin is None
    assert judge_f2(healthy()).status is Status.NOT_APPLICABLE  # no shape declared


def test_f2_details_in_points():
    d = judge_f2(healthy(), Expectations(bos_shape="ramp")).details
    assert (d.first_pct, d.final_pct, d.largest_rise_points, d.total_rise_points) == (0.0, 75.0, 25.0, 75.0)
    assert d.share == pytest.approx(1 / 3, abs=1e-4) and d.largest_rise["to"].revision == "step6"
    assert d.series_pct["step3"] == 31.25


# ---- F3 -----------------------------------------------------------------------------------------


def test_f3_induction_at_the_first_revision_leaves_the_ratio_unbounded_above():
    recs = healthy(induction_sets=((A, B, C),) * 7)
    v = judge_f3(recs, Expectations(dclm=True))
    assert v.details.ratio_interval == (pytest.approx(1e11 / 1e8 * 0.2), None) and v.status is Status.HOLDS
    assert v.details.t_induction_before is None and "t_induction at step0, in (0, 100M]" in v.message


def test_f3_bar_from_the_panel():
    recs = healthy()  # the ratio is in (20, 1000)
    assert judge_f3(recs, Expectations(dclm=True, f3_min_ratio=20.0)).status is Status.HOLDS
    v = judge_f3(recs, Expectations(dclm=True, f3_min_ratio=20.5))
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.details.min_ratio == 20.5 and v.margin == 79.5
    assert judge_f3(recs, Expectations(dclm=True, f3_min_ratio=1000.0)).status is Status.FAILS


def test_f3_sensitivity_at_other_milestone_head_counts():
    d = judge_f3(healthy(), Expectations(dclm=True)).details
    assert {k: s.ratio for k, s in d.sensitivity_milestone_heads.items()} == {"1": 100.0, "3": 100.0, "5": None}
    assert d.sensitivity_milestone_heads["5"].t_induction is None


# ---- F4 -----------------------------------------------------------------------------------------


def test_f4_without_a_final_circuit_is_not_applicable():
    v = judge_f4(healthy(induction_sets=((A,),) * 6 + ((),)))
    assert v.status is Status.NOT_APPLICABLE and v.key == "no final circuit" and v.margin is None


def test_f4_total_tokens_from_the_panel():
    v = judge_f4(healthy(), total_tokens=2e12)
    assert v.details.computed.fraction_of_total == 5e-4 and v.details.total_tokens == 2e12
    assert v.details.computed.fraction_interval == (5e-5, 5e-4) and v.margin == pytest.approx(0.0245)


def test_f4_paper_table_readings():
    """Recall 2/3 at step1 under both readings: the paper's 1e9 is reproduced by both; 3e9 by neither
    (recall there is 2/3 too, but neither reading's first revision); 5e9 names no revision."""
    both = judge_f4(healthy(), Expectations(paper_f4_tokens=1e9)).details
    assert both.paper_table.reproduced_by == ("uniform 50x", "intermediate 30x") and both.reproduces == "both readings"
    assert both.paper_table.reproduced is True and both.paper_table.recall_there == pytest.approx(2 / 3, abs=1e-4)
    neither = judge_f4(healthy(), Expectations(paper_f4_tokens=3e9))
    assert neither.details.paper_table.reproduced_by == () and neither.details.reproduces == "neither reading"
    assert "NOT reproduced" in neither.key and "reproduced by neither reading" in neither.message
    nowhere = judge_f4(healthy(), Expectations(paper_f4_tokens=5e9)).details.paper_table
    assert nowhere.revision is None and nowhere.recall_there is None and nowhere.fraction_of_total == 5e-3


def test_f4_intermediate_reading_and_its_own_verdict():
    recs = healthy()
    recs[1].all_head_selectivity[C]["induction"] = 35.0  # C passes 30x at step1: the intermediate reading finds all 3
    d = judge_f4(recs).details
    assert d.intermediate.revision == "step1" and d.intermediate.found == (A, B, C)
    assert d.intermediate.recall == 1.0 and d.intermediate_holds is True and d.intermediate.intermediate_threshold == 30.0
    late = judge_f4(healthy(tokens=(1e7, 1e8, 2e8, 3e8, 5e8, 1e9, 2e9)))
    assert late.details.intermediate_holds is False and late.details.computed.fraction_of_total == 0.05
    assert late.status is Status.CONSISTENT_NOT_ESTABLISHED  # the bracket (0.5%, 5%] straddles 2.5%


def test_f4_recall_series_in_details():
    d = judge_f4(healthy()).details
    assert {r: s.recall for r, s in d.recall_series.items()} == {
        "step0": 0.0, "step1": pytest.approx(0.6667, abs=1e-4), "step2": pytest.approx(0.6667, abs=1e-4),
        "step3": pytest.approx(0.6667, abs=1e-4), "step4": pytest.approx(0.6667, abs=1e-4), "step5": 1.0, "step6": 1.0}
    assert d.final_circuit == (A, B, C) and d.level == pytest.approx(2 / 3)


# ---- F5 -----------------------------------------------------------------------------------------


def test_f5_margin_is_the_fewest_revisions_of_lead():
    v = judge_f5(healthy())  # A leads by 1 revision, B by 0, C by 2
    assert v.margin == 0.0 and {h.head: h.timing for h in v.details.heads} == {A: "before", B: "at", C: "before"}
    assert {h.head: h.lead for h in v.details.heads} == {A: 10.0, B: 1.0, C: 10.0}


def test_f5_timing_after_and_never():
    late = judge_f5(healthy(pr={**{A: (PR_HIGH,) * 7, B: (PR_LOW,) + (PR_HIGH,) * 6}, C: (PR_LOW,) * 6 + (PR_HIGH,)}))
    heads = {h.head: h for h in late.details.heads}
    assert heads[C].timing == "after" and heads[C].holds is False and late.status is Status.FAILS
    assert late.margin == -1.0 and late.failing_heads == (C,) and "[PR 2 < 7.3 at the crossing]" in late.message
    never = judge_f5(healthy(pr={**{A: (PR_HIGH,) * 7, B: (PR_LOW,) + (PR_HIGH,) * 6}, C: (PR_LOW,) * 7}))
    assert {h.head: h.timing for h in never.details.heads}[C] == "never" and never.margin is None


def test_f5_without_a_final_circuit_is_not_applicable():
    v = judge_f5(healthy(induction_sets=((A,),) * 6 + ((),)))
    assert v.status is Status.NOT_APPLICABLE and v.key == "no heads" and v.details.null_p is None


def test_f5_rise_rule_is_reported():
    d = judge_f5(healthy()).details
    assert {h.head: h.rises for h in d.heads} == {A: False, B: True, C: True} and d.rise_holds is False
    # rising by the crossings (step1, step1, step5): {B}, {B}, {B, C}: two draws cannot both be B
    assert d.rise_null_p == 0.0


def test_f5_sensitivity_fractions():
    d = judge_f5(healthy()).details
    assert {f: (s.passing, s.heads, s.holds) for f, s in d.sensitivity.items()} == {
        "0.05": (3, 3, True), "0.1": (3, 3, True), "0.2": (3, 3, True)}  # PR_HIGH 20 clears 1 + 0.2 x 63
    low = judge_f5(healthy(pr={A: (10.0,) * 7, B: (PR_LOW,) + (10.0,) * 6, C: (PR_LOW,) * 3 + (10.0,) * 4})).details
    assert {f: (s.passing, s.holds, s.failing) for f, s in low.sensitivity.items()} == {
        "0.05": (3, True, ()), "0.1": (3, True, ()), "0.2": (0, False, (A, B, C))}


# ---- causal -------------------------------------------------------------------------------------


def test_causal_holds_and_names_both_controls():
    v = judge_causal(healthy())
    assert v.status is Status.HOLDS and v.details.decided_by.startswith("both exact tests: the bar (25% of baseline) p = ")
    assert v.margin == pytest.approx(0.21) and v.key == "4.0% of base, p=8.1e-07 (rand 80.0%, p=4.2e-20)"
    assert v.details.n_random_heads == 3 and v.details.circuit_matches_screen is True


def test_causal_point_rule_failures_say_which():
    cut = judge_causal(healthy(ablations=Ablations(baseline=0.05, circuit=0.03, random=0.045)))
    assert cut.status is Status.FAILS and cut.details.decided_by.startswith("the cut: circuit top-1 is 60.0%")
    rnd = judge_causal(healthy(ablations=Ablations(baseline=0.05, circuit=0.01, random=0.01)))  # equal: not below
    assert rnd.status is Status.FAILS and rnd.details.decided_by.startswith("the matched-random control")


def test_causal_both_exact_tests_short():
    """Circuit 2 of 2000, baseline 8 (share 25%: the bar's p = 0.714), random 8 (Boschloo's p = 0.0518): both tests
    short of 0.05."""
    v = judge_causal(healthy(ablations=Ablations(baseline=0.004, circuit=0.001, random=0.004)))
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED
    assert v.details.decided_by.startswith("the exact test of the bar (circuit < 25% of baseline) (p = 0.714) and of "
                                           "the control (circuit < matched random) (p = 0.0518)")


def test_causal_bar_point_estimate_met_but_not_established():
    """Circuit 2 of 2000 against baseline 25 (8% of baseline, well under the 25% bar), random 80:
    the exact unconditional test gives p = 0.0584 >= 0.05: consistent, not established; baseline
    26 (p = 0.0488; the conditional test before issue 43: 0.0612) establishes it."""
    short = judge_causal(healthy(ablations=Ablations(baseline=0.0125, circuit=0.001, random=0.04)))
    assert short.status is Status.CONSISTENT_NOT_ESTABLISHED and short.details.p_vs_bar == pytest.approx(0.0584, abs=1e-4)
    assert short.details.cuts_enough and short.details.decided_by.startswith(
        "the exact test of the bar (circuit < 25% of baseline) (p = 0.0584)")
    enough = judge_causal(healthy(ablations=Ablations(baseline=0.013, circuit=0.001, random=0.04)))
    assert enough.status is Status.HOLDS and enough.details.p_vs_bar == pytest.approx(0.0488, abs=1e-4)


def test_causal_a_record_that_names_its_own_revision_says_nothing_more():
    v = judge_causal(healthy())
    assert v.details.measured_on == "step6" and "measured on" not in v.message


def test_causal_ablation_without_baseline_is_not_established():
    recs = healthy()
    recs[-1].task = None
    v = judge_causal(recs)
    assert v.status is Status.NOT_ESTABLISHED and v.details.missing == ("baseline task metrics",)


def test_causal_with_an_empty_final_circuit_and_no_ablation_is_not_applicable():
    v = judge_causal(healthy(ablations=None, induction_sets=((A,),) * 6 + ((),)))
    assert v.status is Status.NOT_APPLICABLE and "no induction head at step6: nothing to ablate" in v.message
    assert v.message.endswith("causal check not applicable")  # no head left out by the floor: nothing more said


def test_causal_requested_but_missing_is_not_established():
    """Ablation off at every revision but the final, where none was recorded: the evidence is missing."""
    from headwatch.probes.record import ProbeSettings

    recs = healthy(ablations=None)
    for r in recs:
        r.settings = ProbeSettings(ablation=r is recs[-1])
    v = judge_causal(recs)
    assert v.status is Status.NOT_ESTABLISHED and v.key == "no ablation" and v.details.missing == (
        "induction-circuit ablation",)
    recs[-1].settings = None  # ablation off where stated, unknown at the final revision: still missing
    assert judge_causal(recs).status is Status.NOT_ESTABLISHED


def test_causal_counts_in_details():
    d = judge_causal(healthy()).details
    assert (d.baseline_count, d.circuit_count, d.random_count) == ((100, 2000), (4, 2000), (80, 2000))
    assert d.counts_reconstructed is False and d.alpha == 0.05 and d.max_share == 0.25



def test_causal_top1_intervals_in_details():
    """The record's top-1 intervals, by name; an ablation without one (matched random here) is left out."""
    recs = healthy()
    recs[-1].intervals = RecordIntervals(level=0.95, methods={"top1": "clopper-pearson"}, task_top1=(0.04123, 0.06017),
                                         ablation_top1={"induction_circuit": (0.00101, 0.00412)})
    d = judge_causal(recs).details
    assert d.top1_intervals == {"baseline": (0.04123, 0.06017), "circuit": (0.00101, 0.00412)}
    assert judge_causal(healthy()).details.top1_intervals == {}

# ---- formation ----------------------------------------------------------------------------------


def _formation(records, **declared):
    return judge_formation(records, Expectations(formation=Formation(**declared)))


def test_formation_each_condition_at_its_boundary():
    recs = healthy()
    assert _formation(recs, min_induction_heads_final=3).status is Status.HOLDS
    assert _formation(recs, min_induction_heads_final=4).details.unmet == ("3 heads >= 50x at step6 (needs >= 4)",)
    assert _formation(recs, none_at_first=True).status is Status.HOLDS
    assert _formation(healthy(induction_sets=((A,),) + ((A, B, C),) * 6), none_at_first=True).status is Status.FAILS
    assert _formation(recs, min_top1_final=0.05).status is Status.HOLDS
    assert _formation(recs, min_top1_final=0.0501).status is Status.FAILS
    assert _formation(healthy(ablations=None), min_top1_final=0.01).details.unmet == ("top-1 unknown at step6 (needs >= 0.01)",)


def test_formation_window_by_revisions_and_fractions():
    recs = healthy()  # t_induction at step1 (1e9 of 1e12 = 0.1%)
    for window, ok in (((("step1", "step1")), True), (("step0", "step0"), False), (("step2", "step6"), False)):
        v = _formation(recs, formed_within=FormationWindow(revisions=window))
        assert (v.status is Status.HOLDS) is ok, window
    for window, ok in (((0.001, 0.001), True), ((0.0, 0.00099), False), ((0.0011, 1.0), False)):
        v = _formation(recs, formed_within=FormationWindow(fraction=window))
        assert (v.status is Status.HOLDS) is ok, window
    never = _formation(healthy(induction_sets=((A,),) * 7), formed_within=FormationWindow(fraction=(0.0, 1.0)))
    assert never.details.unmet[-1] == "t_induction never (needs within 0%-100% of training)"


def test_formation_sink_conditions():
    recs = healthy()  # BOS heads from step1 on; t_induction at step1
    assert _formation(recs, min_bos_heads_final=24).status is Status.HOLDS
    assert _formation(recs, min_bos_heads_final=25).status is Status.FAILS
    assert _formation(recs, bos_after_induction=True).status is Status.FAILS  # first BOS head at step1 = t_induction
    later = healthy(bos_fractions=(0.0, 0.0, 0.0625, 0.1875, 0.3125, 0.5, 0.75))
    assert _formation(later, bos_after_induction=True).status is Status.HOLDS
    assert _formation(recs, bos_persists=True).status is Status.HOLDS
    gap = healthy(bos_fractions=(0.0, 0.0625, 0.0, 0.1875, 0.3125, 0.5, 0.75))
    assert _formation(gap, bos_persists=True).details.unmet == (
        "no BOS head at step2 (needs one at every revision from the first to the final)",)
    none = healthy(bos_fractions=(0.0,) * 7)
    assert _formation(none, bos_persists=True).details.unmet == (
        "no BOS head at any revision (needs one at every revision from the first to the final)",)


def test_formation_not_declared_is_not_applicable_and_withholds_nothing():
    v = judge_formation(healthy())
    assert v.status is Status.NOT_APPLICABLE and v.margin is None
    assert "formation" not in judge_model(healthy(), HEALTHY_EXPECT)


def test_not_judged_keeps_the_measurement():
    never = healthy(induction_sets=((),) * 7)
    verdicts = judge_model(never, FORMATION_EXPECT)
    assert verdicts["formation"].status is Status.FAILS
    assert all(v.status is Status.NOT_JUDGED for c, v in verdicts.items() if c != "formation")
    assert verdicts["F2"].message.endswith("expected ramp") and verdicts["F2"].key.startswith("not judged (")
    keyless = dataclasses.replace(verdicts["F2"], key="")
    assert not_judged(keyless, verdicts["formation"]).key == "not judged"
    formed = judge_model(healthy(), FORMATION_EXPECT)
    assert formed["formation"].status is Status.HOLDS and formed["F4"].status is Status.HOLDS
    assert formed["formation"].margin == 0.0


# ---- declared deviations and surprises ----------------------------------------------------------


def test_surprises_count_undeclared_failures_and_deviations_that_do_not_match():
    verdicts = judge_model(healthy(), HEALTHY_EXPECT)
    assert surprises(verdicts) == 0
    bad = judge_model(healthy(bos_fractions=(0.0, 0.5, 0.5625, 0.625, 0.6875, 0.75, 0.75),
                              induction_sets=((), (), (), (A, B, C), (A, B, C), (A, B, C), (A, B, C))),
                      Expectations(dclm=True))
    assert bad["F3"].status is Status.FAILS and surprises(bad) == 1
    declared = {c: v.declare(Deviation("known", key=(0.0, 0.5))) if c == "F3" else v for c, v in bad.items()}
    assert surprises(declared) == 0 and status_word(declared["F3"]) == "fails (declared known deviation)"
    wrong = {c: v.declare(Deviation("known", key=(5.0, 9.0))) if c == "F3" else v for c, v in bad.items()}
    assert surprises(wrong) == 1
    gone = {c: v.declare(Deviation("known", key=(0.0, 0.5))) if c == "F1" else v for c, v in verdicts.items()}
    assert surprises(gone) == 1
    skipped = {c: v.declare(Deviation("known", key=(0.0, 0.5))) if c == "F3" else v
               for c, v in judge_model(healthy(), Expectations(dclm=False)).items()}
    assert surprises(skipped) == 0  # not applicable: neither a failure nor a deviation gone


def test_fmt_tokens():
    assert [fmt_tokens(x) for x in (None, 23e9, 6.29e9, 2.1e6, 3.05e12, 1500.0, 12.0)] == [
        "never", "23B", "6.29B", "2.1M", "3.05T", "1.5K", "12"]
    assert fmt_tokens(-2e9) == "-2B"


# ---- messages and keys: the words a verdict is read in ------------------------------------------

_NO_INTERVAL = "no interval: record measured without intervals (schema /1 or n_bootstrap = 0)"


def test_f1_messages_and_keys():
    v = judge_f1(healthy())
    assert (v.key, v.message) == ("0 of 8 heads; max 1x", (
        f"no BOS head in layers 0/1 at any of 7 revisions; highest first-token selectivity there 1x (L0_H0 at step0; "
        f"bar 30; {_NO_INTERVAL}); vacuous at 1 of 7 revisions (no BOS head in any layer)"))
    assert v.figure.quantity == "largest layer-0/1 first-token selectivity" and v.figure.method == _NO_INTERVAL
    v = judge_f1(healthy(bos_fractions=(0.0,) * 7))
    assert v.message == (f"no BOS head in layers 0/1 at any of 7 revisions; highest first-token selectivity there 1x "
                         f"(L0_H0 at step0; bar 30; {_NO_INTERVAL}); holds vacuously: no head in any layer has "
                         f"first-token selectivity >= 30")
    v = judge_f1(healthy(extra_bos={2: ("L0_H1",), 4: ("L1_H0", "L0_H1")}))
    assert (v.key, v.message) == ("2 of 8 heads (2 rev.); max 80x", (
        f"BOS heads in layers 0/1 at step2: L0_H1; step4: L0_H1, L1_H0; highest first-token selectivity there 80x "
        f"(L0_H1 at step2; bar 30; {_NO_INTERVAL}); vacuous at 1 of 7 revisions (no BOS head in any layer)"))
    assert v.details.violations[1].heads == ("L0_H1", "L1_H0") and v.details.revisions_checked == 7
    v = judge_f1([_with_interval(20.0, 30.0)])
    assert v.message == ("no BOS head in layers 0/1 at any of 1 revisions; highest first-token selectivity there 20x "
                         "[1, 30] (L0_H1 at step0; bar 30; bootstrap); not established: an early head's 95% upper "
                         "bound reaches 30 (>= 30)")
    assert v.details.peak_interval == (1.0, 30.0) and v.details.peak_revision == "step0"


def test_f1_per_revision_messages_and_keys():
    v = judge_f1_revision(healthy()[3])
    assert (v.key, v.message) == ("0 of 8 heads; max 1x", (
        f"no BOS head in layers 0/1 at step3 (10B tokens); highest first-token selectivity there: L0_H0 1x "
        f"(< 30; {_NO_INTERVAL})"))
    assert v.details.revision == "step3" and v.details.tokens == 1e10 and v.details.vacuous_revisions == ()
    v = judge_f1_revision(healthy()[0])
    assert v.status is Status.HOLDS_VACUOUSLY and v.details.vacuous_revisions == ("step0",)
    assert v.message.endswith("; holds vacuously: no head in any layer has first-token selectivity >= 30")
    v = judge_f1_revision(healthy(extra_bos={2: ("L0_H1",)})[2])
    assert (v.key, v.message) == ("1 of 8 heads (1 rev.); max 80x",
                                  "1 BOS head(s) in layers 0/1 at step2 (3B tokens): L0_H1 (first-token 80.0x)")
    assert v.details.first_token_selectivity == {"L0_H1": 80.0} and v.failing_revisions == ("step2",)
    v = judge_f1_revision(_with_interval(20.0, 30.0))
    assert v.message == ("no BOS head in layers 0/1 at step0 (1B tokens); highest first-token selectivity there: "
                         "L0_H1 20x [1, 30] (< 30; bootstrap); not established: an early head's 95% upper bound "
                         "reaches 30 (>= 30)")


def test_f1_without_the_layers_it_names():
    """A table whose F1 layers the model does not have: nothing to fail on, no peak to show."""
    spec = dataclasses.replace(SPEC, f1_layers=(9,))
    v = judge_f1(healthy(), spec)
    assert (v.status, v.key, v.margin, v.figure.value) == (Status.HOLDS, "0 of 0 heads", None, None)
    assert v.message == "no BOS head in layers 9 at any of 7 revisions; vacuous at 1 of 7 revisions (no BOS head in any layer)"
    one = judge_f1_revision(healthy()[3], spec)
    assert (one.key, one.message, one.margin) == ("0 of 0 heads", "no BOS head in layers 9 at step3 (10B tokens)", None)


def test_f1_interval_of_another_head_is_not_the_peaks():
    """The record carries intervals, but not for the peak head: no interval is shown for it."""
    rec = _with_interval(20.0, 25.0)
    rec.all_head_selectivity["L1_H2"]["first-token"] = 22.0
    v = judge_f1([rec])
    assert v.figure.interval is None and v.figure.method == "no interval for this quantity in the record"
    assert v.details.peak_head == "L1_H2" and v.details.highest_upper_bound == 25.0


def test_f1_peak_ties_go_to_the_first_revision_and_head():
    recs = healthy()
    for r in recs[2:4]:
        r.all_head_selectivity["L0_H2"]["first-token"] = 25.0
        r.all_head_selectivity["L1_H3"]["first-token"] = 25.0
    d = judge_f1(recs).details
    assert (d.peak_head, d.peak_revision, d.peak_selectivity) == ("L0_H2", "step2", 25.0)


def test_f2_messages_and_keys():
    v = judge_f2(healthy(), Expectations(bos_shape="ramp"))
    assert (v.key, v.message) == ("ramp: 25.0 of 75.0 pts", (
        "BOS fraction is a ramp: largest adjacent rise 25.0 of 75.0 points (step5 -> step6, 50.0% -> 75.0%); "
        "expected ramp"))
    assert v.details.largest_rise == {"from": Point("step5", 1e11), "to": Point("step6", 1e12)}
    none = judge_f2(healthy())
    assert none.message.endswith("; no shape declared in the panel") and none.details.expected is None
    assert none.margin is None
    one = judge_f2([healthy()[3]], Expectations(bos_shape="ramp"))  # a single revision: no trajectory (issue 36)
    assert one.status is Status.NOT_ESTABLISHED and one.key == "one revision: no trajectory"
    assert one.message.startswith("not established: F2 is a claim about training, and the records hold one revision "
                                  "(step3), no trajectory")
    assert one.message.endswith("At that revision alone: BOS fraction is flat: largest adjacent rise 0.0 of 0.0 "
                                "points; expected ramp")
    assert one.details.largest_rise is None and one.details.first_pct == one.details.final_pct == 31.25


def test_f3_messages_and_keys():
    v = judge_f3(healthy(), Expectations(dclm=True))
    assert (v.key, v.message) == ("100x (20, 1000)", (
        "t_bos50 / t_induction = 100B / 1B = 100; t_induction at step1, in (100M, 1B] (>= 3 heads at induction >= 50); "
        "t_bos50 at step5, in (20B, 100B] (BOS fraction >= 0.5); so the ratio is in (20, 1000); established: the "
        "lower bound 20 >= 10"))
    assert v.figure.method == "revision grid (last revision before, first revision at)" and v.figure.ends == "()"
    assert v.details.t_bos50_before == Point("step4", 2e10) and v.details.t_induction == Point("step1", 1e9)
    nd = judge_f3(healthy(), Expectations(dclm=False))
    assert nd.key == "100x (20, 1000) (not DCLM)" and nd.message.endswith("; not a DCLM model: F3 does not apply")
    assert nd.details.applies is False and nd.details.established is None
    c = judge_f3(bos_never_forms(), Expectations(dclm=True))
    assert c.message == (
        "t_bos50 / t_induction has no point estimate (t_bos50 right-censored); t_induction at step1, in (100M, 1B] "
        "(>= 3 heads at induction >= 50); t_bos50 not reached by the last revision step6: right-censored, in "
        "(1T, inf) (BOS fraction >= 0.5); so the ratio is in (1000, inf); established: the lower bound 1000 >= 10")
    assert c.figure.method == ("revision grid (last revision before, first revision at); t_bos50 right-censored "
                               "after the last revision") and c.details.t_bos50_before == Point("step6", 1e12)
    both = judge_f3(healthy(bos_fractions=(0.0,) * 7, induction_sets=((A,),) * 7), Expectations(dclm=True))
    assert both.message.startswith("t_bos50 / t_induction has no point estimate (t_induction right-censored and "
                                   "t_bos50 right-censored); t_induction not reached by the last revision step6")
    assert both.message.endswith("consistent, not established: the interval straddles 10 (lower bound 0)")


def test_f3_point_estimate_at_zero_tokens():
    """t_induction at a 0-token first revision: no point estimate, the ratio unbounded above."""
    recs = healthy(tokens=(0.0, 1e9, 3e9, 1e10, 2e10, 1e11, 1e12), induction_sets=((A, B, C),) * 7)
    v = judge_f3(recs, Expectations(dclm=True))
    assert v.details.ratio is None and v.details.censored == () and v.key == "censored inf (t_induction at 0 tokens)"
    assert v.status is Status.HOLDS and v.details.ratio_interval == (None, None)
    assert v.message.startswith("t_bos50 / t_induction has no point estimate (t_induction at 0 tokens)")


def test_bars_come_from_the_table_unless_the_panel_overrides_them():
    strict = dataclasses.replace(SPEC, f3_min_ratio=50.0, f4_max_fraction=0.0001)
    assert judge_f3(healthy(), Expectations(dclm=True), strict).details.min_ratio == 50.0
    assert judge_f3(healthy(), Expectations(dclm=True, f3_min_ratio=5.0), strict).details.min_ratio == 5.0
    assert judge_f4(healthy(), spec=strict).details.max_fraction == 0.0001
    assert judge_f4(healthy(), spec=strict).status is Status.FAILS  # (0.01%, 0.1%] lies above 0.01%
    assert judge_f4(healthy(), Expectations(f4_max_fraction=0.01), spec=strict).details.max_fraction == 0.01


def test_f4_messages_and_keys():
    v = judge_f4(healthy(), Expectations(paper_f4_tokens=1e9))
    assert (v.key, v.message) == ("67% at 0.1% of tokens; paper 1B: uniform 50x + intermediate 30x reproduces", (
        "recall of the final circuit (L3_H0, L4_H1, L5_H2) first >= 2/3 at step1 (1B tokens = 0.10% of 1T, on the "
        "grid in (0.01%, 0.1%]; found L3_H0, L4_H1); needs <= 2.5%: established: the upper end 0.1% <= 2.5%; "
        "intermediate-30x reading: step1 (0.10%); paper table: 1B (0.10%), recall there 0.667 - reproduced by the "
        "uniform 50x and the intermediate 30x reading"))
    assert v.figure.ends == "(]" and v.figure.interval == (1e-4, 1e-3)
    nowhere = judge_f4(healthy(), Expectations(paper_f4_tokens=5e9))
    assert nowhere.message.endswith("paper table: 5B (0.50%), no screened revision there - reproduced by neither reading")
    fails = judge_f4(healthy(tokens=(3e9, 1e10, 2e10, 3e10, 5e10, 8e10, 1.2e11)))
    assert fails.message.split("; needs")[1].startswith(" <= 2.5%: the data exclude the claim: the lower end 2.5% >= 2.5%")
    mid = judge_f4(healthy(tokens=(1e7, 1e8, 2e8, 3e8, 5e8, 1e9, 2e9)))
    assert "needs <= 2.5%: consistent, not established: the grid's bracket straddles 2.5%" in mid.message


def test_f5_messages_and_keys():
    v = judge_f5(healthy())
    assert (v.key, v.message) == ("3 of 3 heads (2 before, 1 at); null p 6.7e-05, by layer 0.016", (
        "3/3 final induction heads have PR - 1 >= 0.1 x (d_head - 1) (PR >= 7.3, d_head 64) at or before crossing "
        "(2 before: L3_H0, L5_H2; 1 at the crossing revision: L4_H1): L3_H0: PR elevated step0, crosses 50x step1 "
        "(10x earlier), 6% of all heads elevated by then; L4_H1: PR elevated step1, crosses 50x step1, 6% of all "
        "heads elevated by then; L5_H2: PR elevated step3, crosses 50x step5 (10x earlier), 9% of all heads "
        "elevated by then; null: 3 distinct heads drawn at random from all 32 would all pass with p = 6.72e-05 "
        "(exact), all strictly before with p = 0; matched by layer (each random head from its final head's "
        "layer) p = 0.0156; the larger, 0.0156, decides (< 0.05); rise rule (PR >= 1.5x its first value by the "
        "crossing): 2/3 heads, null p = 0"))
    # by layer: A, B and C are each the one head of their layer (of 4) elevated by their crossing: (1/4)^3
    assert v.details.null_p_layer == 0.01562
    assert v.details.pr_bar == pytest.approx(7.3) and v.figure.p_value == v.details.null_p_decisive == 0.01562
    assert [h.level_null_share for h in v.details.heads] == [0.0625, 0.0625, 0.0938]
    assert [h.before_null_share for h in v.details.heads] == [0.0312, 0.0312, 0.0938]
    assert [h.rise_null_share for h in v.details.heads] == [0.0312, 0.0312, 0.0625]
    late = judge_f5(healthy(pr={**{A: (PR_HIGH,) * 7, B: (PR_LOW,) + (PR_HIGH,) * 6}, C: (PR_LOW,) * 6 + (PR_HIGH,)}))
    assert "L5_H2: PR elevated step6, crosses 50x step5, 6% of all heads elevated by then [PR 2 < 7.3 at the crossing]" \
        in late.message and late.key == "2 of 3 heads (1 before, 1 at); null p 0, by layer 0"


def test_f5_names_the_revisions_without_pr():
    recs = healthy()
    recs[2].pr = None
    v = judge_f5(recs)
    assert v.message == "not established: no per-head PR (or d_head) at step2: F5 needs PR at every revision"
    recs = healthy()
    for r in recs[4:]:
        r.d_head = 1
    assert "at step4, step5, step6:" in judge_f5(recs).message


def test_f5_lead_of_less_than_two():
    """C elevated at 6e10 and crossing at 1e11: 1.67x earlier, said so."""
    v = judge_f5(healthy(tokens=(1e8, 1e9, 3e9, 1e10, 6e10, 1e11, 1e12),
                         pr={A: (PR_HIGH,) * 7, B: (PR_LOW,) + (PR_HIGH,) * 6, C: (PR_LOW,) * 4 + (PR_HIGH,) * 3}))
    assert "L5_H2: PR elevated step4, crosses 50x step5 (1.67x earlier)" in v.message
    assert v.figure.bar == 0.0 and v.figure.value == 0.0


def test_f5_every_head_crossing_at_the_first_revision_has_no_rise_rule():
    v = judge_f5(healthy(induction_sets=((A, B, C),) * 7, pr={A: (PR_HIGH,) * 7, B: (PR_HIGH,) * 7, C: (PR_HIGH,) * 7}))
    assert v.details.rise_holds is None and v.details.rise_null_p is None and "rise rule" not in v.message
    assert {h.head: h.rises for h in v.details.heads} == {A: None, B: None, C: None}


def test_f5_with_two_dimensional_heads():
    """d_head 2 is the smallest head F5 can judge (bar 1 + 0.1 x 1 = 1.1)."""
    recs = healthy(pr={A: (1.2,) * 7, B: (1.0,) + (1.2,) * 6, C: (1.0,) * 3 + (1.2,) * 4})
    for r in recs:
        r.d_head = 2
        r.pr = {h: (v if h in (A, B, C) else 1.0) for h, v in r.pr.items()}
    v = judge_f5(recs)
    assert v.status is Status.HOLDS and v.details.pr_bar == pytest.approx(1.1) and v.details.d_head == 2
    recs[2].pr = None
    assert "no per-head PR (or d_head) at step2:" in judge_f5(recs).message


def test_f5_on_a_single_revision():
    """One revision: every final head crosses at it; elevated there or not at all. No trajectory, so
    not established (issue 36), whatever the revision shows; the details are still the revision's."""
    v = judge_f5([healthy()[-1]])
    assert v.status is Status.NOT_ESTABLISHED and "one revision" in v.message
    assert v.details.null_p == pytest.approx(3 / 32 * 2 / 31 * 1 / 30, rel=1e-3)
    assert v.details.null_p_before == 0.0 and v.details.rise_holds is None and v.details.at == (A, B, C)


def test_f5_details_when_nothing_crosses():
    v = judge_f5(healthy(induction_sets=((A,),) * 6 + ((),)))
    assert (v.details.d_head, v.details.null_alpha, v.details.heads) == (64, 0.05, ())
    assert v.details.pr_bar == pytest.approx(7.3) and set(v.details.sensitivity) == {"0.05", "0.1", "0.2"}


def test_f4_intermediate_reading_at_the_bar_holds():
    d = judge_f4(healthy(tokens=(1e8, 2.5e9, 3e9, 1e10, 2e10, 5e10, 1e11))).details  # step1 at exactly 2.5%
    assert d.intermediate.revision == "step1" and d.intermediate.fraction_of_total == 0.025
    assert d.intermediate_holds is True


def test_f4_figure_without_a_final_circuit():
    v = judge_f4(healthy(induction_sets=((A,),) * 6 + ((),)))
    assert (v.figure.value, v.figure.interval, v.figure.method) == (None, None, "no final circuit")
    assert v.details.computed is None and v.details.intermediate is None and v.details.intermediate_holds is None


def _without_counts(recs, parts=("task", "induction_circuit", "matched_random")):
    """The final record with no number of examples on the named top-1s (rates only)."""
    final = recs[-1]
    if "task" in parts:
        final.task = dataclasses.replace(final.task, n=None, top1_count=None)
    final.ablations = [dataclasses.replace(a, metrics=dataclasses.replace(a.metrics, n=None, top1_count=None))
                       if a.name in parts else a for a in final.ablations]
    return recs


def test_causal_messages_and_keys():
    v = judge_causal(healthy())
    assert v.message == (
        "at step6: top-1 5.00% baseline, 0.20% with the circuit (L3_H0, L4_H1, L5_H2) ablated = 4.0% of baseline "
        "(needs <= 25%), 4.00% with 3 matched-random heads ablated; top-1 counts baseline 100/2000, circuit 4/2000, "
        "random 80/2000; one-sided Boschloo exact unconditional test on top-1 counts: circuit < random p = 4.23e-20; "
        "one-sided exact unconditional test of the ratio of two binomial top-1 rates (Boschloo's construction: "
        "ordered by the conditional binomial p, maximised over the baseline rate): circuit < 25% of baseline "
        "p = 8.08e-07 (each needs < 0.05); holds: decided by both exact tests: the bar (25% of baseline) "
        "p = 8.08e-07, matched random p = 4.23e-20 (< 0.05)")
    assert v.figure.method == v.details.method_bar == RATIO_TEST_UNCONDITIONAL and v.details.method_random == BOSCHLOO
    assert v.figure.p_value == 8.077e-07
    assert v.details.random_matched_to == "the induction circuit (docs/SPEC.md §4)"
    none = judge_causal(healthy(ablations=Ablations(random=None)),
                        Expectations(paper_top1=PaperTop1(baseline=0.05, circuit=0.001, matched_random=0.03)))
    assert none.key == "4.0% of base, p=8.1e-07 (no random control)" and none.message == (
        "at step6: top-1 5.00% baseline, 0.20% with the circuit (L3_H0, L4_H1, L5_H2) ablated = 4.0% of baseline "
        "(needs <= 25%), no matched-random control; top-1 counts baseline 100/2000, circuit 4/2000; one-sided Boschloo "
        "exact unconditional test on top-1 counts: circuit < random p = n/a; one-sided exact unconditional test of the "
        "ratio of two binomial top-1 rates (Boschloo's construction: ordered by the conditional binomial p, maximised "
        "over the baseline rate): circuit < 25% of baseline p = 8.08e-07 (each needs < 0.05); not "
        "established: missing evidence: matched-random ablation; paper reports (not in these records, not used): "
        "top-1 5.00% baseline, 0.10% circuit, 3.00% matched random")


def test_causal_with_rates_only():
    v = judge_causal(_without_counts(healthy()))
    assert v.status is Status.NOT_ESTABLISHED and v.key == "4.0% of base (rand 80.0%)"
    assert v.message.endswith("4.00% with 3 matched-random heads ablated; top-1 counts unknown (the record states no "
                              "number of examples): no exact test; not established: missing evidence: top-1 counts")
    only_random = judge_causal(_without_counts(healthy(), parts=("matched_random",)))
    assert only_random.status is Status.NOT_ESTABLISHED and only_random.details.missing == ("top-1 counts",)
    assert only_random.details.p_vs_bar is not None and only_random.details.p_vs_random is None


def test_causal_with_a_zero_baseline():
    v = judge_causal(healthy(ablations=Ablations(baseline=0.0, circuit=0.0, random=0.0)))
    assert v.status is Status.FAILS and v.key == "? of base" and v.margin is None
    assert "ablated (needs <= 25%)" in v.message and v.details.share_of_baseline is None


def test_causal_exact_test_at_alpha_is_not_below_it():
    """The exact test's p equal to alpha does not pass: p < alpha is needed."""
    from headwatch.stats import boschloo_less

    spec = dataclasses.replace(SPEC, causal_alpha=boschloo_less(10, 2000, 20, 2000))
    v = judge_causal(healthy(ablations=Ablations(baseline=0.1, circuit=0.005, random=0.01)), spec=spec)
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.details.p_vs_random == pytest.approx(spec.causal_alpha, rel=1e-3)


def test_causal_bar_test_at_alpha_is_not_below_it():
    from headwatch.stats import ratio_below_unconditional

    spec = dataclasses.replace(SPEC, causal_alpha=ratio_below_unconditional(2, 2000, 28, 2000, 0.25))  # 2 vs baseline 28
    v = judge_causal(healthy(ablations=Ablations(baseline=0.014, circuit=0.001, random=0.04)), spec=spec)
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.details.decided_by.startswith("the exact test of the bar")


def test_causal_a_control_in_the_record_is_used_whatever_the_panel_says():
    v = judge_causal(healthy(), Expectations(no_matched_random="the panel thought none exists"))
    assert v.status is Status.HOLDS
    na = judge_causal(healthy(ablations=Ablations(random=None)), Expectations(no_matched_random="none exists"))
    assert na.status is Status.NOT_APPLICABLE and na.details.missing == ()
    assert na.message.endswith("not applicable: decided by the panel: this model has no matched-random control "
                               "(none exists)")


# ---- formation, in words ------------------------------------------------------------------------


def test_formation_messages_and_keys():
    v = judge_formation(healthy(), FORMATION_EXPECT)
    assert (v.key, v.message) == ("3 heads, t_ind step1, top-1 0.05", (
        "formed as declared: 3 heads >= 50x at step6: L3_H0 80x, L4_H1 80x, L5_H2 80x; 0 at step0; t_induction step1 "
        "(in (100M, 1B] tokens); top-1 0.05 [0.0409, 0.0605]; numeric path: not recorded (provenance.training)"))
    assert (v.figure.value, v.figure.bar, v.margin) == (3.0, 3.0, 0.0)
    assert v.details.final_top1_interval == (0.04086, 0.06048) and v.details.t_induction_before == Point("step0", 1e8)
    never = judge_formation(healthy(induction_sets=((),) * 7), FORMATION_EXPECT)
    assert (never.key, never.message) == ("0 heads, t_ind never, top-1 0.05", (
        "did not form as declared: 0 heads >= 50x at step6 (needs >= 3); t_induction never (needs between step1 and "
        "step5); measured: 0 heads >= 50x at step6: none (best L0_H0 1x); 0 at step0; t_induction never; top-1 0.05 "
        "[0.0409, 0.0605]; numeric path: not recorded (provenance.training)"))
    assert never.margin == -3.0 and never.details.best_head_final == "L0_H0"
    na = judge_formation(healthy())
    assert na.message.startswith("no formation declared in the panel; measured: 3 heads >= 50x at step6:")
    assert na.figure.bar is None and na.details.declared == {}


def test_formation_with_intervals_and_training_provenance():
    recs = healthy()
    recs[-1].intervals = RecordIntervals(
        level=0.95, methods={"induction_heads": "bootstrap heads", "selectivity": "bootstrap"},
        selectivity={A: {"induction": (70.0, 90.0)}}, induction_heads=(2.0, 3.0), task_top1=(0.04, 0.061))
    recs[-1].provenance["training"] = {"numerics": "pinned"}
    v = judge_formation(recs, FORMATION_EXPECT)
    assert v.message == (
        "formed as declared: 3 heads >= 50x at step6 (95% interval [2, 3]): L3_H0 80x [70, 90], L4_H1 80x, L5_H2 80x; "
        "0 at step0; t_induction step1 (in (100M, 1B] tokens); top-1 0.05 [0.04, 0.061]; numeric path: "
        "{'numerics': 'pinned'}")
    assert v.figure.interval == (2.0, 3.0) and v.figure.method == "bootstrap heads"
    assert v.details.heads_final_intervals == {A: (70.0, 90.0)} and v.details.training == {"numerics": "pinned"}
    nocount = healthy()
    nocount[-1].task = dataclasses.replace(nocount[-1].task, n=None, top1_count=None)
    v = judge_formation(nocount, FORMATION_EXPECT)
    assert v.details.final_top1_interval is None and "; top-1 0.05; numeric path" in v.message
    zero_n = healthy()
    zero_n[-1].task = dataclasses.replace(zero_n[-1].task, n=0)
    assert judge_formation(zero_n, FORMATION_EXPECT).details.final_top1_interval is None
    rate_only = healthy()
    rate_only[-1].task = dataclasses.replace(rate_only[-1].task, top1_count=None)
    assert judge_formation(rate_only, FORMATION_EXPECT).details.final_top1_interval is None
    unknown = judge_formation(healthy(ablations=None), FORMATION_EXPECT)
    assert unknown.key == "3 heads, t_ind step1" and "; top-1 unknown; numeric path" in unknown.message


def test_formation_sink_conditions_in_words():
    v = judge_formation(healthy(), Expectations(formation=Formation(min_bos_heads_final=30, bos_after_induction=True,
                                                                     bos_persists=True)))
    assert v.details.unmet == ("24 BOS heads >= 30x at step6 (needs >= 30)",
                               "first BOS head at step1, t_induction step1 (needs a BOS head, first strictly after "
                               "t_induction)")
    assert "; 24 BOS heads >= 30x at step6: L2_H0 80x, L2_H1 80x," in v.message
    assert v.message.endswith("L7_H3 80x; first BOS head at step1 (L7_H0, L7_H1); numeric path: not recorded "
                              "(provenance.training)")
    for declared in (dict(min_bos_heads_final=1), dict(bos_after_induction=True), dict(bos_persists=True)):
        assert "BOS heads >= 30x at step6:" in judge_formation(healthy(), Expectations(formation=Formation(**declared))).message
    plain = judge_formation(healthy(), Expectations(formation=Formation(min_induction_heads_final=1)))
    assert "BOS heads" not in plain.message
    none = judge_formation(healthy(bos_fractions=(0.0,) * 7), Expectations(formation=Formation(bos_after_induction=True)))
    assert none.details.unmet == ("first BOS head at no revision, t_induction step1 (needs a BOS head, first strictly "
                                  "after t_induction)",) and "0 BOS heads >= 30x at step6: none; first BOS head at no revision" in none.message
    no_induction = judge_formation(healthy(induction_sets=((A,),) * 7), Expectations(formation=Formation(
        bos_after_induction=True)))
    assert no_induction.details.unmet == ("first BOS head at step1, t_induction never (needs a BOS head, first strictly "
                                          "after t_induction)",)


def test_formation_conditions_not_declared_are_not_checked():
    early = healthy(induction_sets=((A, B, C),) * 7)
    assert judge_formation(early, Expectations(formation=Formation(min_induction_heads_final=3))).status is Status.HOLDS
    v = judge_formation(healthy(), Expectations(formation=Formation(formed_within=FormationWindow(revisions=("step1", "nope")))))
    assert v.details.unmet == ("t_induction step1 (needs between step1 and nope)",)
    v = judge_formation(healthy(), Expectations(formation=Formation(formed_within=FormationWindow(revisions=("nope", "step1")))))
    assert v.status is Status.FAILS


def test_causal_uses_the_paired_tests_where_paired_outcomes_are_given():
    """Records keep counts only (no per-example outcome): the unpaired tests decide. Where paired
    outcomes are given, the paired tests do, and the method names say so."""
    from headwatch.claims.trajectory import AblationVerdict, Top1Count
    from headwatch.stats import MCNEMAR, RATIO_TEST_PAIRED, mcnemar_less, paired_ratio_below

    counts = dict(baseline_count=Top1Count(20, 2000, False), circuit_count=Top1Count(1, 2000, False),
                  random_count=Top1Count(27, 2000, False))
    unpaired = AblationVerdict(0.01, 0.0005, 0.0135, ("L1_H0",), ("L2_H0",), 0.25, **counts)
    assert unpaired.method_bar == RATIO_TEST_UNCONDITIONAL and unpaired.method_random == BOSCHLOO
    assert unpaired.p_vs_bar == pytest.approx(0.04595, abs=1e-5)
    paired = dataclasses.replace(unpaired, paired_bar=(1, 0, 19), paired_random=(0, 26))
    assert paired.method_bar == RATIO_TEST_PAIRED and paired.method_random == MCNEMAR
    assert paired.p_vs_bar == paired_ratio_below(1, 0, 19, 0.25) and paired.p_vs_random == mcnemar_less(0, 26)
    assert paired.p_vs_random < 1e-7 and paired.meets_bar == (paired.p_vs_bar < 0.05)
