"""Populations (issues 24, 33): each claim across the reference members of a population, and each
candidate placed among them.

Runs once per selected population (a panel entry over seeds, headwatch.fixtures.panels) and once per
candidate member. Every member is judged by the one judge first (formation included). A claim holds
over the population when a one-sided exact binomial test on k of n members establishes that it holds
in most of the population (``SPEC.population_min_rate``, at ``SPEC.population_alpha``); it fails only
where the data exclude that, even counting every undecided member as holding; members that did not
form are "not judged", left out of k and n, never a pass. A candidate is placed on t_induction,
t_bos50, the F3 ratio and the F4 recall point: inside the reference members' range it passes;
beyond all of them it is an outlier flag (skipped, with its rank and the chance an exchangeable
member lands that far out), and it fails only where that chance, times the quantities compared,
is below ``SPEC.population_outlier_alpha``; one event is counted once. Negative controls: a planted
population where a claim fails in every member, a planted candidate beyond 160 siblings, and a
member that did not form.
"""
from __future__ import annotations

import pytest

from headwatch.claims.check import PYTEST_OUTCOME, check_population_claim, report
from headwatch.claims.population import audit, judge_claim_over, judge_population, population_report, quantities
from headwatch.claims.builtin.f1_zero_bos_floor import NAME as F1
from headwatch.claims.builtin.formation import NAME as FORMATION
from headwatch.claims.registry import all_claims
from headwatch.claims.synthetic_population import (
    F1_DEFECT, FORMATION_EXPECT, MANY_SIBLING_ONSETS, NEVER_FORMS, SIBLING_ONSETS, planted_population,
)
from headwatch.claims.verdict import Status


#: The quantities a candidate is placed on with the built-in claims alone (the planted cases' family).
BUILT_IN_QUANTITIES = ("t_induction", "t_bos50", "F3_ratio", "F4_recall_point")


def only_the_built_in_quantities() -> None:
    """Skip a planted case computed for the built-in quantities' joint family where a researcher's
    registered claim adds a quantity of its own to it (the family, and so the numbers, differ)."""
    extra = [q for q in quantities() if q not in BUILT_IN_QUANTITIES]
    if extra:
        pytest.skip(f"a registered claim adds {', '.join(extra)} to the quantities compared; this planted case is "
                    f"computed for the built-in {len(BUILT_IN_QUANTITIES)}")


@pytest.fixture(scope="session")
def judged_population(population, population_records):
    """The population judged: members, claims over the reference, spreads, candidates' places."""
    return judge_population(population, population_records)


@pytest.mark.parametrize("claim", [c.name for c in all_claims() if not c.gate])  # a researcher's too
def test_claim_across_population(request, record_property, population, judged_population, claim):
    verdict = judged_population.claims[claim]
    report(record_property, f"population_{claim}", verdict.to_dict())
    check_population_claim(request, population.id, verdict)


@pytest.mark.parametrize("quantity", quantities())
def test_candidate_within_population(record_property, population, candidate, judged_population, quantity):
    placement = judged_population.placements[candidate.id][quantity]
    report(record_property, f"placement_{quantity}", placement.to_dict())
    if PYTEST_OUTCOME[placement.status] == "skip":  # an outlier flag, or nothing to compare: the reason says which
        prefix = "" if placement.outlier else f"{placement.status.words}: "  # a flag's message starts "outlier (flag)"
        pytest.skip(f"{prefix}{candidate.id} in {population.id}: {placement.message}")
    assert placement.status is not Status.FAILS, f"{candidate.id} in {population.id}: {placement.message}"


# ---- negative controls ------------------------------------------------------------------------


def test_negative_control_claim_failing_in_every_member_fails():
    """F1 fails in 5 of 5 planted members: the data exclude "it holds in most" (P(0 of 5 | 0.5) = 1/32)."""
    members = planted_population(SIBLING_ONSETS, defects={i: F1_DEFECT for i in range(5)})
    verdict = judge_claim_over(F1, members, "planted")
    assert verdict.status is Status.FAILS, verdict.message
    assert (verdict.k, verdict.n) == (0, 5) and verdict.fails == ("seed0", "seed1", "seed2", "seed3", "seed4")
    assert "the data exclude it: 0 of 5 gives p = 0.0312 < 0.05" in verdict.message


def test_negative_control_candidate_beyond_160_siblings_fails_once():
    """160 siblings form at 1e9-3e9 tokens, the candidate at 1e11: beyond every one on t_induction
    (rank p 2 / 161); no sibling lies as far out on any quantity (each member's own smallest rank p
    is larger), so the permutation min-p over the 4 quantities is 1 / 161 < 0.05: it fails there,
    and the F3 ratio and F4 recall point it moves are the same event (flagged, counted once)."""
    only_the_built_in_quantities()
    members = planted_population(MANY_SIBLING_ONSETS + (5,), candidates=(160,))
    places = audit(members[-1], members[:-1])
    t = places["t_induction"]
    assert t.outlier and t.side == "above" and t.status is Status.FAILS, t.message
    assert t.rank == (161, 161) and t.p_extreme == pytest.approx(2 / 161) and t.p_joint == pytest.approx(1 / 161)
    assert t.rule == "rank" and t.joint_rule == "permutation min-p" and t.p_adjusted == t.p_joint
    assert t.message.startswith("outlier (fails): seed160's t_induction is 100B (20B, 100B], later than every one of the 160 ")
    assert t.message.endswith("(2 of the 161 ranks); permutation min-p over 4 quantities: joint p = 0.00621 < alpha 0.05: "
                              "it does not belong with them")
    assert [places[q].same_event_as for q in ("F3_ratio", "F4_recall_point")] == ["t_induction", "t_induction"]
    assert [places[q].status for q in quantities()] == [Status.FAILS, Status.CONSISTENT_NOT_ESTABLISHED,
                                                      Status.CONSISTENT_NOT_ESTABLISHED, Status.CONSISTENT_NOT_ESTABLISHED]
    assert places["t_bos50"].inside and not places["F3_ratio"].inside


def test_negative_control_member_that_did_not_form_is_not_judged_never_a_pass():
    """seed2 never forms: every claim leaves it out as "not judged"; it is not among the holds."""
    members = planted_population(SIBLING_ONSETS, defects={2: NEVER_FORMS}, expect=FORMATION_EXPECT)
    judged = population_report("planted", members)
    for claim in (c.name for c in all_claims() if not c.gate):
        v = judged.claims[claim]
        assert "seed2" in v.not_judged and "seed2" not in v.holds and v.n <= 4, (claim, v.message)
    assert judged.claims[FORMATION].fails == ("seed2",)
    assert "seed2" not in judged.spreads["t_induction"].values


# ---- the rule's other sides -----------------------------------------------------------------------


def test_candidate_inside_its_siblings_is_consistent_not_established():
    """Inside the siblings' range a candidate is consistent with them: a rank that does not reject
    establishes nothing, so the status is "consistent, not established" (a skip), never "holds"."""
    members = planted_population(SIBLING_ONSETS + (2,), candidates=(5,))
    p = audit(members[-1], members[:-1])["t_induction"]
    assert not p.outlier and p.inside and p.status is Status.CONSISTENT_NOT_ESTABLISHED and p.rank == (4, 6), p.message
    assert p.message.startswith("within its siblings (consistent with them; a rule that does not reject establishes nothing)")


def test_candidate_beyond_five_siblings_is_a_flag_not_a_failure():
    """The same late candidate against 5 siblings: rank 6 of 6, p = 2/6 (x 4 quantities: 1): a flag."""
    only_the_built_in_quantities()
    members = planted_population(SIBLING_ONSETS + (5,), candidates=(5,))
    p = audit(members[-1], members[:-1])["t_induction"]
    assert p.outlier and p.status is Status.CONSISTENT_NOT_ESTABLISHED and p.flag == "outlier (flag)", p.message
    assert p.p_extreme == pytest.approx(1 / 3) and "fails from 40 members on" in p.message
    assert p.rule == "rank" and p.p_joint == pytest.approx(1 / 6)  # no sibling as far out: 1 / (5 + 1)


def test_log_normal_rule_fails_the_late_candidate_against_five_siblings():
    """The rule a panel may declare for power at 5-10 seeds: a t prediction interval on log tokens.
    The same late candidate (1e11 against 1e9-3e9) is far outside it: p = 0.0032, x 4 quantities
    (Holm's first step) = 0.0128 < 0.05: it fails, and the verdict says which rule decided."""
    only_the_built_in_quantities()
    members = planted_population(SIBLING_ONSETS + (5,), candidates=(5,))
    places = audit(members[-1], members[:-1], rule="log-normal")
    t = places["t_induction"]
    assert t.status is Status.FAILS and t.rule == "log-normal" and t.joint_rule == "Holm step-down", t.message
    assert t.p_rule == pytest.approx(0.003207, abs=1e-6) and t.p_joint == pytest.approx(4 * t.p_rule) and t.family == 4
    assert "t prediction p on the log scale 0.00321" in t.message
    assert places["F4_recall_point"].same_event_as == "t_induction" and places["F4_recall_point"].status is not Status.FAILS


def test_negative_control_log_normal_rule_keeps_a_sibling_like_candidate():
    """Planted negative control of the log-normal rule: a candidate drawn like its siblings (onset 2)
    lies inside: consistent, never a failure."""
    members = planted_population(SIBLING_ONSETS + (2,), candidates=(5,))
    places = audit(members[-1], members[:-1], rule="log-normal")
    assert all(p.status is not Status.FAILS for p in places.values()), [p.message for p in places.values()]
    assert places["t_induction"].inside and places["t_induction"].rule == "log-normal"


def test_all_of_five_establish_a_claim_and_four_do_not():
    """One-sided: 5 of 5 gives P(5 of 5 | 0.5) = 1/32 < 0.05, established; 4 of 4 (1/16) is not."""
    five = judge_claim_over(F1, planted_population(SIBLING_ONSETS))
    four = judge_claim_over(F1, planted_population(SIBLING_ONSETS[:4]))
    assert five.status is Status.HOLDS and five.p_holds == pytest.approx(1 / 32), five.message
    assert four.status is Status.CONSISTENT_NOT_ESTABLISHED and "4 members cannot establish it even if all hold: " \
        "5 would" in four.message, four.message
