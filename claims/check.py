"""How a claim test turns a judge verdict into a pytest outcome.

- ``holds`` None: the claim does not apply (or the records lack what it needs): skip, with the
  judge's message naming what is missing.
- the panel declares the claim a known deviation for this model: ``xfail(strict=True)`` whose reason
  carries the measured quantities, so a deviation that stops happening fails the run.
- otherwise assert ``holds`` with the judge's message (measured heads, revisions, ratios).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from .judge import ModelExpectations


def expectations_of(model_entry: Any) -> ModelExpectations:
    """The panel's expectations for a ``model_entry`` (a PanelModel or anything with ``.expect``)."""
    return ModelExpectations.from_any(getattr(model_entry, "expect", None))


def total_tokens_of(model_entry: Any) -> float | None:
    """Training tokens the panel declares (or derives) for the model, else None."""
    return getattr(model_entry, "total_tokens", None)


def model_label(model_entry: Any) -> str:
    return getattr(model_entry, "id", None) or getattr(model_entry, "name", None) or str(model_entry)


def declared_deviation(model_entry: Any, claim: str, verdict: Mapping[str, Any], revision: str | None = None) -> str | None:
    """The panel's reason for expecting ``claim`` to fail here, or None.

    For a per-revision test, ``"<claim>@<revision>"`` declares one revision (strict there); a
    model-wide ``"<claim>"`` applies only where the revision fails, since a model-wide deviation
    need not occur at every revision (the model-level test of the claim keeps it strict).
    """
    xfail = expectations_of(model_entry).xfail
    if revision is not None and f"{claim}@{revision}" in xfail:
        return xfail[f"{claim}@{revision}"]
    declared = xfail.get(claim)
    if declared and revision is not None and verdict["holds"]:
        return None
    return declared


def check_verdict(request: pytest.FixtureRequest, model_entry: Any, claim: str, verdict: Mapping[str, Any],
                  revision: str | None = None) -> None:
    """Skip, xfail-strict or assert, as described in the module docstring."""
    label = model_label(model_entry) + (f"@{revision}" if revision else "")
    if verdict["holds"] is None:
        pytest.skip(f"{claim} not applicable to {label}: {verdict['message']}")
    declared = declared_deviation(model_entry, claim, verdict, revision)
    if declared:
        request.applymarker(pytest.mark.xfail(
            strict=True, reason=f"panel declares {claim} a known deviation for {label} ({declared}); "
                                f"measured: {verdict['message']}"))
    assert verdict["holds"], f"{claim} fails for {label}: {verdict['message']}"


def report(record_property: Any, name: str, value: Any) -> None:
    """Attach a figure to the test report (JUnit/HTML) and print it (shown with -s or -rA)."""
    record_property(name, value)
    print(f"{name}: {value}")
