"""F3: in DCLM models, t_bos50 / t_induction >= 10 (induction forms an order of magnitude earlier).

Per model; applies where the panel declares ``dclm = true``. Sensitivity: the induction milestone
at 1, 3 and 5 heads is reported, not asserted. Negative controls: BOS before induction; a BOS curve
that never reaches 50%.
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
    assert verdict.status is Status.NOT_APPLICABLE and verdict.details.ratio == pytest.approx(20.0)
