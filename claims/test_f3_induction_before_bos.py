"""F3: in DCLM models, t_bos50 / t_induction >= 10 (induction forms an order of magnitude earlier).

Per model; applies where the panel declares ``dclm = true``. The revision grid brackets both
milestones, each in (last revision before, first revision at]; one never reached is
right-censored, in (last revision, inf). The ratio lies in the open interval (lo, hi): the claim
is established (holds) iff lo >= 10, fails iff hi <= 10 (the data exclude it), and is consistent
but not established (a skip saying so) where the interval straddles 10. Sensitivity: the
induction milestone at 1, 3 and 5 heads is reported, not asserted. Negative controls: BOS before
induction; BOS one revision after induction, so the grid bounds the ratio below 10.
"""
from __future__ import annotations

import pytest

from headwatch.claims.builtin.f3_induction_before_bos import NAME  # this module's claim, named where it is defined
from headwatch.claims.check import check_verdict, report
from headwatch.claims.judge import judge_f3
from headwatch.claims.registry import controls_for
from headwatch.claims.synthetic import A, B, C, bos_never_forms, healthy
from headwatch.claims.verdict import Status
from headwatch.spec import Expectations


def test_f3_induction_precedes_bos(request, record_property, model_entry, model_records):
    verdict = judge_f3(model_records, model_entry.expect)
    report(record_property, "F3_ratio", verdict.details.ratio)
    report(record_property, "F3_ratio_interval", verdict.details.ratio_interval)
    report(record_property, "F3_censored", verdict.details.censored)
    report(record_property, "F3_sensitivity_milestone_heads",
           {k: v.ratio for k, v in verdict.details.sensitivity_milestone_heads.items()})
    check_verdict(request, model_entry, NAME, verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for(NAME), ids=lambda c: c.name)
def test_negative_control_f3_fails(control):
    verdict = judge_f3(control.records(), control.expect)
    assert verdict.status is Status.FAILS, f"{control.what}: F3 not judged to fail ({verdict.message})"
    assert verdict.details.ratio_interval[1] <= verdict.details.min_ratio and "exclude" in verdict.message


def test_negative_control_f3_not_applicable_without_dclm():
    """F3 is a DCLM claim: for a model not declared DCLM it reports the ratio but no verdict."""
    verdict = judge_f3(healthy(), Expectations(dclm=False))
    assert verdict.status is Status.NOT_APPLICABLE and verdict.details.ratio == pytest.approx(100.0)


def test_f3_point_estimate_alone_is_consistent_not_established():
    """BOS reaches 50% at 1e10 (after 3e9), induction at 1e9 (after 1e8): ratio 10, grid (3, 100)."""
    recs = healthy(bos_fractions=(0.0, 0.0625, 0.1875, 0.5, 0.5625, 0.625, 0.75))
    verdict = judge_f3(recs, Expectations(dclm=True))
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED, verdict.message
    assert verdict.details.ratio_interval == pytest.approx((3.0, 100.0)) and verdict.holds is None
    assert verdict.key == "10x (3, 100)"


def test_f3_point_estimate_below_the_bar_is_not_a_failure_while_the_grid_allows_the_claim():
    """BOS 50% at 3e9 (after 1e9), induction at 1e9 (after 1e8): ratio 3 < 10, but the grid allows
    up to 3e9 / 1e8 = 30: the data do not exclude the claim."""
    recs = healthy(bos_fractions=(0.0, 0.0625, 0.5, 0.5, 0.5625, 0.625, 0.75))
    verdict = judge_f3(recs, Expectations(dclm=True))
    assert verdict.details.ratio == pytest.approx(3.0) and verdict.details.ratio_interval == pytest.approx((1.0, 30.0))
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED and "point estimate does not" in verdict.message


def test_f3_right_censored_bos_is_established():
    """BOS never reaches 50% by the last revision (1e12), induction at 1e9: t_bos50 > 1e12, so the
    ratio is > 1000 (once scored "fails")."""
    verdict = judge_f3(bos_never_forms(), Expectations(dclm=True))
    assert verdict.status is Status.HOLDS, verdict.message
    assert verdict.details.censored == ("t_bos50",) and verdict.details.ratio is None
    assert verdict.details.ratio_interval == (1000.0, None) and verdict.key == "censored (1000, inf)"
    assert "t_bos50 not reached by the last revision step6: right-censored, in (1T, inf)" in verdict.message


def test_f3_right_censored_bos_straddling_the_bar_is_consistent():
    """BOS never reaches 50% by 1e10, induction at 1e10: the ratio is > 1, unbounded above."""
    recs = healthy(tokens=(1e8, 1e9, 3e9, 1e10), bos_fractions=(0.0, 0.0625, 0.125, 0.25),
                   induction_sets=((), (), (), (A, B, C)), pr={}, ablations=None)
    verdict = judge_f3(recs, Expectations(dclm=True))
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED and verdict.details.ratio_interval == (1.0, None)


def test_f3_right_censored_induction_is_bounded_above():
    """Three induction heads never form; BOS reaches 50% at 1e9 (after 1e8): t_induction > 1e12, so
    the ratio is < 1e9 / 1e12: the data exclude the claim."""
    recs = healthy(bos_fractions=(0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.75), induction_sets=((A,),) * 7)
    verdict = judge_f3(recs, Expectations(dclm=True))
    assert verdict.details.censored == ("t_induction",) and verdict.status is Status.FAILS
    assert verdict.details.ratio_interval == pytest.approx((0.0, 1e-3))


def test_f3_both_milestones_censored_is_consistent():
    recs = healthy(bos_fractions=(0.0,) * 7, induction_sets=((A,),) * 7)
    verdict = judge_f3(recs, Expectations(dclm=True))
    assert verdict.details.censored == ("t_induction", "t_bos50") and verdict.details.ratio_interval == (0.0, None)
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED
