"""F5: for every final induction head, PR is elevated (PR - 1 >= 0.1 x (d_head - 1)) at or before the
first revision where its induction selectivity reaches 50.

Per model. Beside the level rule, its null: the exact probability that as many heads drawn at
random would ALL pass against the final heads' crossings; unless it is below 0.05 F5 is "not
informative" (consistent, not established, a skip). Heads elevated before and at their crossing
are reported apart, and the rise rule beside (reported). Sensitivity at elevation fractions 0.05 /
0.1 / 0.2 is reported, not asserted. Negative controls: PR rising only after the crossing; PR
never elevated.
"""
from __future__ import annotations

import pytest

from headwatch.claims.builtin.f5_pr_precedes_threshold import NAME  # this module's claim, named where it is defined
from headwatch.claims.check import check_verdict, report
from headwatch.claims.judge import judge_f5
from headwatch.claims.registry import controls_for
from headwatch.claims.synthetic import A, B, C, PR_HIGH, healthy
from headwatch.claims.verdict import Status


def test_f5_pr_elevated_before_crossing(request, record_property, model_entry, model_records):
    verdict = judge_f5(model_records)
    report(record_property, "F5_heads", [(h.head, h.elevated and h.elevated.revision, h.crossed and h.crossed.revision,
                                          h.lead) for h in verdict.details.heads])
    report(record_property, "F5_null_p", {"at_or_before": verdict.details.null_p, "before": verdict.details.null_p_before,
                                          "rise": verdict.details.rise_null_p})
    report(record_property, "F5_timing", {"before": verdict.details.before, "at": verdict.details.at})
    report(record_property, "F5_sensitivity_fraction",
           {f: f"{s.passing}/{s.heads}" for f, s in verdict.details.sensitivity.items()})
    check_verdict(request, model_entry, NAME, verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for(NAME), ids=lambda c: c.name)
def test_negative_control_f5_fails(control):
    verdict = judge_f5(control.records())
    assert verdict.status is Status.FAILS, f"{control.what}: F5 judged to hold ({verdict.message})"
    assert len(verdict.details.failing) == 1, verdict.details.failing
    assert verdict.details.failing[0] in verdict.message


def test_f5_without_pr_is_not_established():
    """Missing evidence is never a failure: no PR in the records, F5 is not established, saying so."""
    verdict = judge_f5(healthy(with_pr=False))
    assert verdict.status is Status.NOT_ESTABLISHED and "no per-head PR" in verdict.message


def test_f5_passed_by_most_heads_is_not_informative():
    """Every head elevated from the first revision (as in the organisms): F5 passes but tells nothing."""
    recs = healthy()
    for r in recs:
        r.pr = {h: PR_HIGH for h in r.pr}
    verdict = judge_f5(recs)
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED and verdict.details.null_p == 1.0
    assert "F5 not informative" in verdict.message


def test_f5_reports_heads_elevated_before_and_at_their_crossing():
    """Healthy: A elevated at step0 and crossing at step1 (before), B elevated and crossing at step1
    (at), C elevated at step3 and crossing at step5 (before). The null draws 3 distinct heads of 32
    against crossings step1, step1, step5, where {A, B}, {A, B}, {A, B, C} are elevated:
    2/32 x 1/31 x 1/30. Strictly before: {A}, {A}, {A, B}: two draws cannot both be A, so 0."""
    d = judge_f5(healthy()).details
    assert (d.before, d.at) == ((A, C), (B,)) and d.null_p == pytest.approx(2 / 32 * 1 / 31 * 1 / 30, rel=1e-3)
    assert d.null_p_before == 0.0 and d.n_heads_all == 32
