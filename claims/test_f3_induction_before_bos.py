"""F3: in DCLM models, t_bos50 / t_induction >= 10 (induction forms an order of magnitude earlier).

Per model; applies where the panel declares ``dclm = true``. The revision grid brackets both
milestones, so the ratio is an interval [lo, hi]: the claim is established (holds) iff lo >= 10,
consistent but not established (a skip saying so) if only the point estimate passes. Sensitivity:
the induction milestone at 1, 3 and 5 heads is reported, not asserted. Negative controls: BOS before
induction; a BOS curve that never reaches 50%.
"""
from __future__ import annotations

import pytest

from headwatch.claims.check import check_verdict, report
from headwatch.claims.judge import judge_f3
from headwatch.claims.synthetic import controls_for, healthy
from headwatch.claims.verdict import Status
from headwatch.spec import Expectations


def test_f3_induction_precedes_bos(request, record_property, model_entry, model_records):
    verdict = judge_f3(model_records, model_entry.expect)
    report(record_property, "F3_ratio", verdict.details.ratio)
    report(record_property, "F3_ratio_interval", verdict.details.ratio_interval)
    report(record_property, "F3_sensitivity_milestone_heads",
           {k: v.ratio for k, v in verdict.details.sensitivity_milestone_heads.items()})
    check_verdict(request, model_entry, "F3", verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for("F3"), ids=lambda c: c.name)
def test_negative_control_f3_fails(control):
    verdict = judge_f3(control.records(), control.expect)
    assert verdict.status is Status.FAILS, f"{control.what}: F3 judged to hold ({verdict.message})"
    assert verdict.details.ratio is None or verdict.details.ratio < verdict.details.min_ratio


def test_negative_control_f3_not_applicable_without_dclm():
    """F3 is a DCLM claim: for a model not declared DCLM it reports the ratio but no verdict."""
    verdict = judge_f3(healthy(), Expectations(dclm=False))
    assert verdict.status is Status.NOT_APPLICABLE and verdict.details.ratio == pytest.approx(100.0)


def test_f3_point_estimate_alone_is_consistent_not_established():
    """BOS reaches 50% at 1e10 (after 3e9), induction at 1e9 (after 1e8): ratio 10, grid [3, 100]."""
    recs = healthy(bos_fractions=(0.0, 0.0625, 0.1875, 0.5, 0.5625, 0.625, 0.75))
    verdict = judge_f3(recs, Expectations(dclm=True))
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED, verdict.message
    assert verdict.details.ratio_interval == pytest.approx((3.0, 100.0)) and verdict.holds is None
