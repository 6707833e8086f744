"""F2: the BOS-fraction curve has the shape the panel expects for the model ("ramp" or "step").

Per model. Negative controls: a step curve for a model declared ramp, a ramp for one declared step.
"""
from __future__ import annotations

import pytest

from headwatch.claims.builtin.f2_bos_shape import NAME  # this module's claim, named where it is defined
from headwatch.claims.check import check_verdict, report
from headwatch.claims.judge import judge_f2
from headwatch.claims.registry import controls_for
from headwatch.claims.synthetic import healthy
from headwatch.claims.verdict import Status
from headwatch.spec import Expectations


def test_f2_bos_fraction_shape(request, record_property, model_entry, model_records):
    verdict = judge_f2(model_records, model_entry.expect)
    report(record_property, "F2_bos_fraction_pct", dict(verdict.details.series_pct))
    report(record_property, "F2_largest_rise",
           f"{verdict.details.largest_rise_points} of {verdict.details.total_rise_points} points")
    check_verdict(request, model_entry, NAME, verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for(NAME), ids=lambda c: c.name)
def test_negative_control_f2_fails(control):
    verdict = judge_f2(control.records(), control.expect)
    assert verdict.status is Status.FAILS, f"{control.what}: F2 judged to hold ({verdict.message})"
    assert verdict.details.shape != control.expect.bos_shape
    assert "points" in verdict.message


def test_negative_control_f2_no_declared_shape_is_not_judged():
    """Without an expected shape in the panel, F2 reports the shape but gives no verdict."""
    verdict = judge_f2(healthy(), Expectations())
    assert verdict.status is Status.NOT_APPLICABLE and verdict.details.shape == "ramp"
