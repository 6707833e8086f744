"""How a claim test turns a judge verdict into a pytest outcome: the one place that decides it.

- :data:`PYTEST_OUTCOME` maps each :class:`~headwatch.claims.verdict.Status` to pass, fail or skip.
  ``holds`` and ``holds vacuously`` pass; ``fails`` fails with the judge's message (measured heads,
  revisions, ratios, intervals, p-values). Four statuses skip, each with its reason:
  ``consistent, not established`` (the evidence neither excludes nor establishes the claim:
  never a plain pass, and not a failure either: the reason starts "consistent, not established"
  and says which interval, p-value or null probability falls short), ``not established`` (evidence the
  claim needs is missing: the reason starts "not established" and names it), ``not applicable``
  (the claim does not apply: the reason says why), and ``not judged`` (the organism did not form
  its circuit: the reason starts "not judged: organism did not form" and gives the formation
  numbers).
- a model whose panel declares formation (``[models.expect.formation]``) and did not form has every
  claim ``not judged`` here, whatever its own verdict (:func:`headwatch.claims.judge.not_judged`).
- a declared deviation (``[models.expect] xfail``): the test xfails strictly only when the verdict
  fails and matches the declaration (:func:`headwatch.claims.verdict.check_deviation`); a failing
  verdict that does not match fails with declared vs measured; a declared deviation that does not
  occur fails the run (XPASS(strict)).
"""
from __future__ import annotations

from typing import Any

import pytest

from headwatch.fixtures.panels import PanelModel
from headwatch.schema import to_data
from headwatch.spec import Deviation

from headwatch.claims.judge import judge_claim, not_judged
from headwatch.claims.registry import gates
from headwatch.claims.verdict import Status, Verdict, check_deviation

#: Status -> what the claim test does.
PYTEST_OUTCOME: dict[Status, str] = {
    Status.HOLDS: "pass",
    Status.HOLDS_VACUOUSLY: "pass",
    Status.CONSISTENT_NOT_ESTABLISHED: "skip",
    Status.NOT_ESTABLISHED: "skip",
    Status.FAILS: "fail",
    Status.NOT_APPLICABLE: "skip",
    Status.NOT_JUDGED: "skip",
    Status.CRASHED: "error",
}


class ClaimCrashed(RuntimeError):
    """A claim's judge raised (its verdict ``crashed``): the test errors, it does not fail."""


def skip_reason(claim: str, label: str, verdict: Verdict) -> str:
    """The reason a skipped claim test gives: it starts with the status in words."""
    if verdict.status is Status.NOT_JUDGED:
        return f"{verdict.message} [{claim}, {label}]"  # the judge's message starts "not judged: organism did not form"
    if verdict.status in (Status.CONSISTENT_NOT_ESTABLISHED, Status.NOT_ESTABLISHED):
        return f"{verdict.status.words}: {claim} for {label}: {verdict.message}"
    return f"{claim} {verdict.status.words} to {label}: {verdict.message}"


def declared_deviation(model_entry: PanelModel, claim: str, revision: str | None = None
                       ) -> tuple[Deviation | None, bool]:
    """(the panel's declaration for ``claim`` here, whether it is model-wide applied to one revision).

    ``"<claim>@<revision>"`` declares one revision (checked exactly there); a model-wide
    ``"<claim>"`` seen from a per-revision test is checked loosely there (the revision among the
    declared ones, its failing heads among the declared heads), exactly by the model-level test.
    """
    xfail = model_entry.expect.xfail
    if revision is not None and f"{claim}@{revision}" in xfail:
        return xfail[f"{claim}@{revision}"], False
    deviation = xfail.get(claim)
    return deviation, deviation is not None and revision is not None


def formation_withheld(request: pytest.FixtureRequest, model_entry: PanelModel, verdict: Verdict) -> Verdict:
    """``verdict``, or its ``not judged`` form when a gate applies (the panel declares formation) and
    the model did not pass it (did not form)."""
    applying = [g for g in gates() if g.applies_to(model_entry.expect)]
    if not applying:
        return verdict
    records = request.getfixturevalue("model_records")
    for g in applying:
        gate = judge_claim(g, records, model_entry.expect, getattr(model_entry, "total_tokens", None))
        if gate.status is Status.FAILS:
            return not_judged(verdict, gate)
    return verdict


def check_verdict(request: pytest.FixtureRequest, model_entry: PanelModel, claim: str, verdict: Verdict,
                  revision: str | None = None) -> None:
    """Skip, xfail-strict or assert, as described in the module docstring."""
    label = model_entry.id + (f"@{revision}" if revision else "")
    verdict = formation_withheld(request, model_entry, verdict)
    outcome = PYTEST_OUTCOME[verdict.status]
    if outcome == "error":  # a crash is not a failed claim: an ERROR (headwatch/plugin.py), never FAILED
        raise ClaimCrashed(f"{claim} for {label}: {verdict.message}")
    if outcome == "skip":
        pytest.skip(skip_reason(claim, label, verdict))
    deviation, loose = declared_deviation(model_entry, claim, revision)
    if deviation is not None:
        if verdict.status is Status.FAILS:
            found = check_deviation(verdict, deviation, one_revision_of_many=loose)
            if not found.matches:
                pytest.fail(f"{claim} fails for {label}, but not as the panel declares: declared {found.declared}; "
                            f"measured {found.measured} ({deviation.reason}); {verdict.message}", pytrace=False)
        # A model-wide declaration need not hold at every revision unless it names the revisions.
        applies = not loose or (deviation.revisions is not None and revision in deviation.revisions) \
            or verdict.status is Status.FAILS
        if applies:
            request.applymarker(pytest.mark.xfail(
                strict=True, reason=f"panel declares {claim} a known deviation for {label} ({deviation.reason}; "
                                    f"expects {deviation.expected()}); measured: {verdict.message}"))
    assert outcome == "pass", f"{claim} fails for {label}: {verdict.message}"


def report(record_property: Any, name: str, value: Any) -> None:
    """Attach a figure to the test report (JUnit/HTML) and print it (shown with -s or -rA); typed
    details travel as their JSON form (xdist sends properties between processes)."""
    value = to_data(value)
    record_property(name, value)
    print(f"{name}: {value}")


# ---- populations: a claim over a population's reference members -------------------------


def check_population_claim(request: pytest.FixtureRequest, label: str, verdict: Any) -> None:
    """A :class:`headwatch.claims.population.PopulationClaim` as a test outcome, by the same table.

    Skips say why (consistent, not established; not applicable; not judged: no member formed).
    Declared deviations are the members' own: when every counted member's panel declares the claim
    a deviation, the population's failure xfails strictly if every failing member failed as
    declared, fails otherwise, and a population where it did not fail XPASSes (strict).
    """
    claim = verdict.claim
    outcome = PYTEST_OUTCOME[verdict.status]
    if outcome == "skip":
        words = verdict.status.words
        pytest.skip(f"{words}: {claim} over population {label}: {verdict.message}")
    if verdict.every_member_declares:
        if verdict.status is Status.FAILS and not verdict.all_failures_declared:
            pytest.fail(f"{claim} fails over population {label}, but not as its members declare: failing "
                        f"{', '.join(verdict.fails)}, as declared {', '.join(verdict.declared) or 'none'}; "
                        f"{verdict.message}", pytrace=False)
        request.applymarker(pytest.mark.xfail(
            strict=True, reason=f"the members of {label} declare {claim} a known deviation; measured: {verdict.message}"))
    assert outcome == "pass", f"{claim} fails over population {label}: {verdict.message}"
