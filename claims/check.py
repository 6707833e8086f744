"""How a claim test turns a judge verdict into a pytest outcome: the one place that decides it.

- :data:`PYTEST_OUTCOME` maps each :class:`~headwatch.claims.verdict.Status` to pass, fail or skip;
  a skip carries the judge's message naming what is missing.
- the panel declares the claim a known deviation for this model: ``xfail(strict=True)`` whose reason
  carries the measured quantities, so a deviation that stops happening fails the run.
- a failing verdict fails the test with the judge's message (measured heads, revisions, ratios).
"""
from __future__ import annotations

from typing import Any

import pytest

from headwatch.fixtures.panels import PanelModel

from .verdict import Status, Verdict, plain

#: Status -> what the claim test does. "holds_vacuously" and "consistent_not_established" are
#: decided here when the verdict statistics give them (today the judge never does).
PYTEST_OUTCOME: dict[Status, str] = {
    Status.HOLDS: "pass",
    Status.HOLDS_VACUOUSLY: "pass",
    Status.CONSISTENT_NOT_ESTABLISHED: "skip",
    Status.FAILS: "fail",
    Status.NOT_APPLICABLE: "skip",
}


def declared_deviation(model_entry: PanelModel, claim: str, verdict: Verdict, revision: str | None = None) -> str | None:
    """The panel's reason for expecting ``claim`` to fail here, or None.

    For a per-revision test, ``"<claim>@<revision>"`` declares one revision (strict there); a
    model-wide ``"<claim>"`` applies only where the revision fails, since a model-wide deviation
    need not occur at every revision (the model-level test of the claim keeps it strict).
    """
    xfail = model_entry.expect.xfail
    if revision is not None and f"{claim}@{revision}" in xfail:
        return xfail[f"{claim}@{revision}"]
    declared = xfail.get(claim)
    if declared and revision is not None and verdict.holds:
        return None
    return declared


def check_verdict(request: pytest.FixtureRequest, model_entry: PanelModel, claim: str, verdict: Verdict,
                  revision: str | None = None) -> None:
    """Skip, xfail-strict or assert, as described in the module docstring."""
    label = model_entry.id + (f"@{revision}" if revision else "")
    outcome = PYTEST_OUTCOME[verdict.status]
    if outcome == "skip":
        pytest.skip(f"{claim} not applicable to {label}: {verdict.message}")
    declared = declared_deviation(model_entry, claim, verdict, revision)
    if declared:
        request.applymarker(pytest.mark.xfail(
            strict=True, reason=f"panel declares {claim} a known deviation for {label} ({declared}); "
                                f"measured: {verdict.message}"))
    assert outcome == "pass", f"{claim} fails for {label}: {verdict.message}"


def report(record_property: Any, name: str, value: Any) -> None:
    """Attach a figure to the test report (JUnit/HTML) and print it (shown with -s or -rA); typed
    details travel as their JSON form (xdist sends properties between processes)."""
    value = plain(value)
    record_property(name, value)
    print(f"{name}: {value}")
