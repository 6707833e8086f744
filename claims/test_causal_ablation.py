"""Causal check: ablating the final induction circuit cuts top-1 to <= 25% of baseline, and below
the matched-random control.

Per model, on the latest revision with ablations. Each comparison is confirmed by a one-sided exact
test on the top-1 counts (p < 0.05): the bar by a conditional binomial test of the ratio (against
"circuit >= 25% of baseline"), the control by Fisher's test; point rules passing without the tests
is "consistent, not established" (a skip); missing evidence (no matched-random ablation, no counts)
is "not established", never a failure. Negative controls: an ablation that hurts no more than
random; one that leaves most of the baseline; one under the bar at its point estimate whose counts
do not establish it (the published OLMo 1B's 1 vs 20 of 2000).
"""
from __future__ import annotations

import dataclasses

import pytest

from headwatch.claims.builtin.causal_ablation import NAME  # this module's claim, named where it is defined
from headwatch.claims.check import check_verdict, report
from headwatch.claims.judge import judge_causal
from headwatch.claims.registry import controls_for
from headwatch.claims.synthetic import Ablations, healthy
from headwatch.claims.verdict import Status
from headwatch.probes.record import ProbeSettings
from headwatch.spec import Expectations, PaperTop1
from headwatch.stats import ratio_below_unconditional


def test_causal_ablation_of_induction_circuit(request, record_property, model_entry, model_records):
    verdict = judge_causal(model_records)
    d = verdict.details
    report(record_property, "causal_top1", {"baseline_top1": d.baseline_top1, "circuit_top1": d.circuit_top1,
                                            "random_top1": d.random_top1})
    report(record_property, "causal_random_matched_to", d.random_matched_to)
    report(record_property, "causal_p_values", {"circuit_below_random": d.p_vs_random,
                                                "circuit_below_bar": d.p_vs_bar,
                                                "counts_reconstructed": d.counts_reconstructed})
    check_verdict(request, model_entry, NAME, verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for(NAME), ids=lambda c: c.name)
def test_negative_control_causal_fails(control):
    verdict = judge_causal(control.records())
    assert verdict.status is Status.FAILS, f"{control.what}: causal check judged to hold ({verdict.message})"


def test_causal_without_random_control_is_not_established():
    """Cutting top-1 is not enough when there is no matched-random control to beat, but a missing
    control is missing evidence, not a failure: the message names it."""
    verdict = judge_causal(healthy(ablations=Ablations(random=None)))
    assert verdict.details.cuts_enough is True and verdict.status is Status.NOT_ESTABLISHED
    assert verdict.details.missing == ("matched-random ablation",) and "missing evidence: matched-random" in verdict.message


def test_causal_without_random_control_the_panel_says_does_not_exist_is_not_applicable():
    verdict = judge_causal(healthy(ablations=Ablations(random=None)),
                           Expectations(no_matched_random="every head of the circuit's layer is in the circuit"))
    assert verdict.status is Status.NOT_APPLICABLE and "every head of the circuit's layer" in verdict.message


def test_causal_without_counts_is_not_established():
    recs = healthy()
    final = recs[-1]
    final.task = dataclasses.replace(final.task, n=None, top1_count=None)
    verdict = judge_causal(recs)
    assert verdict.status is Status.NOT_ESTABLISHED and verdict.details.missing == ("top-1 counts",)
    assert "circuit < 25% of baseline p = n/a" in verdict.message and "not established: missing evidence: top-1 counts" in verdict.message


def test_causal_without_any_ablation_is_not_established():
    verdict = judge_causal(healthy(ablations=None))
    assert verdict.status is Status.NOT_ESTABLISHED and "no revision carries an induction-circuit ablation" in verdict.message


def test_causal_measured_without_ablations_is_not_applicable():
    """settings.ablation false at every revision: the panel asked for no ablation (ablation = "none")."""
    recs = healthy(ablations=None)
    for r in recs:
        r.settings = ProbeSettings(ablation=False)
    assert judge_causal(recs).status is Status.NOT_APPLICABLE


def test_negative_control_causal_bar_met_at_the_point_but_not_established():
    """Circuit 1 vs baseline 19 of 2000 (5.3% of baseline: the point rule passes with room to spare)
    and vs random 40: below random (p < 1e-9), but "circuit < 25% of baseline" has p = 0.0556 by the
    exact unconditional test on these counts: consistent, not established, never "holds" (the
    published OLMo 1B's 1 vs 20 gives 0.046 and is established)."""
    verdict = judge_causal(healthy(ablations=Ablations(baseline=0.0095, circuit=0.0005, random=0.02)))
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED, verdict.message
    assert verdict.details.p_vs_bar == pytest.approx(0.0556, abs=1e-4) and verdict.details.p_vs_random < 1e-4
    assert verdict.details.decided_by.startswith("the exact test of the bar (circuit < 25% of baseline) (p = 0.0556)")


def test_negative_control_causal_bar_with_half_the_examples_ablated():
    """Unequal N: circuit 1 of 1000 against baseline 20 of 2000 (the same 10% share as 2 of 2000)
    carries half the evidence: the exact unconditional test gives p = 0.274 (the equal-N 1 vs 20 of
    2000: 0.046): consistent, not established."""
    assert ratio_below_unconditional(1, 1000, 20, 2000, 0.25) == pytest.approx(0.2736, abs=1e-4)
    assert ratio_below_unconditional(1, 2000, 20, 2000, 0.25) == pytest.approx(0.0460, abs=1e-4)


def test_causal_names_the_revision_the_ablations_were_measured_on_and_the_papers_figures():
    recs = healthy()
    recs[-1].provenance["ablation_file"] = {"revision_in_file": "main", "relative_to": {"matched_random": "another set"}}
    paper = PaperTop1(baseline=0.05, circuit=0.001, matched_random=0.03)
    verdict = judge_causal(recs, Expectations(paper_top1=paper))
    assert verdict.message.startswith("at step6 (ablations measured on main):") and verdict.details.measured_on == "main"
    assert ("paper reports (not in these records, not used): top-1 5.00% baseline, 0.10% circuit, 3.00% matched "
            "random (the records' matched random, used: 4.00%)") in verdict.message
    assert verdict.details.paper_top1 == {"baseline": 0.05, "circuit": 0.001, "matched_random": 0.03}
    assert verdict.details.random_matched_to == "another set" and verdict.key.endswith("\u2020")
    assert "; NOTE matched-random is matched to another set;" in verdict.message


def test_negative_control_causal_empty_circuit_is_not_judged():
    """A final revision without induction heads has nothing to ablate: no verdict either way."""
    recs = healthy(induction_sets=((),) * 7)
    verdict = judge_causal(recs)
    assert verdict.status is Status.NOT_APPLICABLE and "empty" in verdict.message


def test_causal_point_rules_without_significance_are_not_established():
    """5 vs 11 of 2000 (Pythia's published counts): circuit below random at the point, Boschloo's p = 0.100."""
    verdict = judge_causal(healthy(ablations=Ablations(baseline=0.0405, circuit=0.0025, random=0.0055)))
    assert verdict.status is Status.CONSISTENT_NOT_ESTABLISHED, verdict.message
    assert verdict.details.p_vs_random == pytest.approx(0.1002, abs=1e-4)
