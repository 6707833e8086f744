"""Populations (issue 24): each claim across the reference members of a population, and each
candidate placed among them.

Runs once per selected population (a panel entry over seeds, headwatch.fixtures.panels) and once per
candidate member. Every member is judged by the one judge first (formation included): a claim holds
over the population when it holds in most reference members, established by the exact interval of
k / n (``SPEC.population_min_rate``); it fails when it fails in most; members that did not form are
"not judged", left out of k and n, never a pass. A candidate passes when its t_induction, t_bos50,
F3 ratio and F4 recall point lie inside the range of the reference members (a prediction interval
of coverage (n - 1) / (n + 1)); outside, it is an outlier and its test fails, saying so in words.
Negative controls: a planted population where a claim fails in most members, a planted candidate
far outside its siblings, and a member that did not form.
"""
from __future__ import annotations

import pytest

from headwatch.claims.check import check_population_claim, report
from headwatch.claims.population import QUANTITIES, judge_claim_over, judge_population, place, population_report
from headwatch.claims.synthetic_population import (
    F1_DEFECT, FORMATION_EXPECT, NEVER_FORMS, SIBLING_ONSETS, planted_population,
)
from headwatch.claims.verdict import Status
from headwatch.spec import CLAIMS, SPEC


@pytest.fixture(scope="session")
def judged_population(population, population_records):
    """The population judged: members, claims over the reference, spreads, candidates' places."""
    return judge_population(population, population_records)


@pytest.mark.parametrize("claim", CLAIMS)
def test_claim_across_population(request, record_property, population, judged_population, claim):
    verdict = judged_population.claims[claim]
    report(record_property, f"population_{claim}", verdict.to_dict())
    check_population_claim(request, population.id, verdict)


@pytest.mark.parametrize("quantity", QUANTITIES)
def test_candidate_within_population(record_property, population, candidate, judged_population, quantity):
    placement = judged_population.placements[candidate.id][quantity]
    report(record_property, f"placement_{quantity}", placement.to_dict())
    if placement.status in (Status.NOT_JUDGED, Status.NOT_APPLICABLE):
        pytest.skip(f"{placement.status.words}: {candidate.id} in {population.id}: {placement.message}")
    assert not placement.outlier, f"{candidate.id} in {population.id}: {placement.message}"


# ---- negative controls ------------------------------------------------------------------------


def test_negative_control_claim_failing_in_most_members_fails():
    """F1 fails in 4 of 5 planted members: the population's F1 fails (not "4 holds missing")."""
    members = planted_population(SIBLING_ONSETS, defects={i: F1_DEFECT for i in range(4)})
    verdict = judge_claim_over("F1", members, "planted")
    assert verdict.status is Status.FAILS, verdict.message
    assert (verdict.k, verdict.n) == (1, 5) and verdict.fails == ("seed0", "seed1", "seed2", "seed3")
    assert "fails in most members (4 of 5 > 0.5)" in verdict.message


def test_negative_control_candidate_far_outside_is_an_outlier():
    """Siblings form at 1e9-3e9 tokens, the candidate at 1e11: an outlier, said in words."""
    members = planted_population(SIBLING_ONSETS + (5,), candidates=(5,))
    p = place("t_induction", members[-1], members[:-1])
    assert p.outlier and p.side == "above" and p.status is Status.FAILS, p.message
    assert p.rank == (6, 6) and p.coverage == pytest.approx(4 / 6) and p.p_extreme == pytest.approx(1 / 6)
    assert p.message.startswith("outlier: seed5's t_induction is 100B") and "67% prediction interval" in p.message


def test_negative_control_member_that_did_not_form_is_not_judged_never_a_pass():
    """seed2 never forms: every claim leaves it out as "not judged"; it is not among the holds."""
    members = planted_population(SIBLING_ONSETS, defects={2: NEVER_FORMS}, expect=FORMATION_EXPECT)
    judged = population_report("planted", members)
    for claim in CLAIMS:
        v = judged.claims[claim]
        assert "seed2" in v.not_judged and "seed2" not in v.holds and v.n <= 4, (claim, v.message)
    assert judged.claims["formation"].fails == ("seed2",)
    assert "seed2" not in judged.spreads["t_induction"].values


# ---- the rule's other sides -----------------------------------------------------------------------


def test_candidate_inside_its_siblings_passes():
    members = planted_population(SIBLING_ONSETS + (2,), candidates=(5,))
    p = place("t_induction", members[-1], members[:-1])
    assert not p.outlier and p.status is Status.HOLDS and p.rank == (4, 6), p.message


def test_all_of_five_is_consistent_not_established_and_six_establish():
    """5 of 5 gives [0.478, 1]: below the bar; 6 of 6 gives [0.541, 1]: established."""
    five = judge_claim_over("F1", planted_population(SIBLING_ONSETS))
    six = judge_claim_over("F1", planted_population(SIBLING_ONSETS + (1,)))
    assert five.status is Status.CONSISTENT_NOT_ESTABLISHED and "6 would" in five.message, five.message
    assert six.status is Status.HOLDS and six.interval[0] >= SPEC.population_min_rate, six.message
