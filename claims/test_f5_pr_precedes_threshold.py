"""F5: for every final induction head, PR is elevated (PR - 1 >= 0.1 x (d_head - 1)) at or before the
first revision where its induction selectivity reaches 50.

Per model. Beside the level rule: its null share (the share of ALL heads that pass against each
crossing; above 50% F5 is "not informative": consistent, not established, a skip) and the rise rule
(reported). Sensitivity at elevation fractions 0.05 / 0.1 / 0.2 is reported, not asserted.
Negative controls: PR rising only after the crossing; PR never elevated.
"""
from __future__ import annotations

import pytest

from headwatch.claims.check import check_verdict, report
from headwatch.claims.judge import judge_f5
from headwatch.claims.synthetic import PR_HIGH, controls_for, healthy
from headwatch.claims.verdict import Status


def test_f5_pr_elevated_before_crossing(request, record_property, model_entry, model_records):
    verdict = judge_f5(model_records)
    report(record_property, "F5_heads", [(h.head, h.elevated and h.elevated.revision, h.crossed and h.crossed.revision,
                                          h.lead) for h in verdict.details.heads])
    report(record_property, "F5_null_share", {"level": verdict.details.null_share,
                                              "rise": verdict.details.rise_null_share})
    report(record_property, "F5_sensitivity_fraction",
           {f: f"{s.passing}/{s.heads}" for f, s in verdict.details.sensitivity.items()})
    check_verdict(request, model_entry, "F5", verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for("F5"), ids=lambda c: c.name)
def test_negative_control_f5_fails(control):
    verdict = judge_f5(control.records())
    assert verdict.status is Status.FAILS, f"{control.what}: F5 judged to hold ({verdict.message})"
    assert len(verdict.details.failing) == 1, verdict.details.failing
    assert verdict.details.failing[0] in verdict.message


def test_negative_control_f5_without_pr_is_not_judged():
    verdict = judge_f5(healthy(with_pr=False))
    assert verdict.status is Status.NOT_APPLICABLE and "no per-head PR" in verdict.message


def test_f5_passed_by_most_heads_is_not_informative():
    """Every head elevated from the first revision (as in the organisms): F5 passes but tells nothing."""
    recs = healthy()
    for r in recs:
        r.pr = {h: PR_HIGH for h in r.pr}
    verdict = judge_f5(recs)
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED and verdict.details.null_share == 1.0
    assert "F5 not informative" in verdict.message
