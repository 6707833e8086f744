"""Causal check: ablating the final induction circuit cuts top-1 to <= 25% of baseline, and below
the matched-random control.

Per model, on the latest revision with ablations. Each comparison is confirmed by a one-sided
Fisher exact test on the top-1 counts (p < 0.05); point rules passing without the tests is
"consistent, not established" (a skip). Negative controls: an ablation that hurts no more than
random; one that leaves most of the baseline.
"""
from __future__ import annotations

import pytest

from headwatch.claims.check import check_verdict, report
from headwatch.claims.judge import judge_causal
from headwatch.claims.synthetic import Ablations, controls_for, healthy
from headwatch.claims.verdict import Status


def test_causal_ablation_of_induction_circuit(request, record_property, model_entry, model_records):
    verdict = judge_causal(model_records)
    d = verdict.details
    report(record_property, "causal_top1", {"baseline_top1": d.baseline_top1, "circuit_top1": d.circuit_top1,
                                            "random_top1": d.random_top1})
    report(record_property, "causal_random_matched_to", d.random_matched_to)
    report(record_property, "causal_p_values", {"circuit_below_random": d.p_vs_random,
                                                "circuit_below_baseline": d.p_vs_baseline,
                                                "counts_reconstructed": d.counts_reconstructed})
    check_verdict(request, model_entry, "causal", verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for("causal"), ids=lambda c: c.name)
def test_negative_control_causal_fails(control):
    verdict = judge_causal(control.records())
    assert verdict.status is Status.FAILS, f"{control.what}: causal check judged to hold ({verdict.message})"


def test_negative_control_causal_needs_random_control():
    """Cutting top-1 is not enough when there is no matched-random control to beat."""
    verdict = judge_causal(healthy(ablations=Ablations(random=None)))
    assert verdict.details.cuts_enough is True and verdict.status is Status.FAILS


def test_negative_control_causal_empty_circuit_is_not_judged():
    """A final revision without induction heads has nothing to ablate: no verdict either way."""
    recs = healthy(induction_sets=((),) * 7)
    verdict = judge_causal(recs)
    assert verdict.status is Status.NOT_APPLICABLE and "empty" in verdict.message


def test_causal_point_rules_without_significance_are_not_established():
    """5 vs 11 of 2000 (Pythia's published counts): circuit below random at the point, p = 0.10."""
    verdict = judge_causal(healthy(ablations=Ablations(baseline=0.0405, circuit=0.0025, random=0.0055)))
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED, verdict.message
    assert verdict.details.p_vs_random == pytest.approx(0.1046, abs=1e-3)
