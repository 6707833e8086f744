"""F3: in DCLM models, t_bos50 / t_induction >= 10 (induction forms an order of magnitude earlier).

Per model; applies where the panel declares ``dclm = true``. Sensitivity: the induction milestone
at 1, 3 and 5 heads is reported, not asserted. Negative controls: BOS before induction; a BOS curve
that never reaches 50%.
"""
from __future__ import annotations

import pytest

from claims.check import check_verdict, expectations_of, report
from claims.judge import judge_f3
from claims.synthetic import controls_for, healthy


def test_f3_induction_precedes_bos(request, record_property, model_entry, model_records):
    verdict = judge_f3(model_records, expectations_of(model_entry))
    report(record_property, "F3_ratio", verdict["ratio"])
    report(record_property, "F3_sensitivity_milestone_heads",
           {k: v["ratio"] for k, v in verdict["sensitivity_milestone_heads"].items()})
    check_verdict(request, model_entry, "F3", verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for("F3"), ids=lambda c: c.name)
def test_negative_control_f3_fails(control):
    verdict = judge_f3(control.records(), control.expect)
    assert verdict["holds"] is False, f"{control.what}: F3 judged to hold ({verdict['message']})"
    assert verdict["ratio"] is None or verdict["ratio"] < verdict["min_ratio"]


def test_negative_control_f3_not_applicable_without_dclm():
    """F3 is a DCLM claim: for a model not declared DCLM it reports the ratio but no verdict."""
    verdict = judge_f3(healthy(), {"dclm": False})
    assert verdict["holds"] is None and verdict["ratio"] == pytest.approx(20.0)
