"""The sensitivity grid: every verdict re-judged with one SPEC constant changed at a time.

The knobs and their values are SPEC's (``grid_bos``, ``grid_induction``, ``grid_step_share``,
``grid_recall_level`` in :mod:`headwatch.spec`): the BOS threshold at 20/30/50, the induction
threshold at 30/50/100, the step share at 0.4/0.5/0.6 and the recall level at 1/2, 2/3, 3/4. A
claim is "robust" when its status is the same at every setting. Reported, never asserted.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from headwatch.formatting import fmt_share
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds

from headwatch.claims.claim import Claim
from headwatch.claims.judge import judge_claim, judge_model
from headwatch.claims.registry import all_claims
from headwatch.claims.trajectory import by_tokens
from headwatch.claims.verdict import Status, Verdict

#: (Thresholds field, what it is, the spec field holding its grid).
KNOBS: tuple[tuple[str, str, str], ...] = (
    ("bos", "BOS threshold", "grid_bos"),
    ("induction", "induction threshold", "grid_induction"),
    ("step_share", "step share", "grid_step_share"),
    ("recall_level", "recall level", "grid_recall_level"),
)


@dataclass(frozen=True)
class GridSetting:
    """One row of the grid: ``knob`` at ``value`` (knob None: SPEC as it is), each verdict's status."""

    knob: str | None
    value: float | None
    statuses: Mapping[str, str]

    @property
    def label(self) -> str:
        if self.knob is None:
            return "SPEC"
        value = f"{self.value:.3g}" if self.knob != "recall_level" else fmt_share(self.value)  # type: ignore[arg-type]
        return f"{dict((k, w) for k, w, _ in KNOBS)[self.knob]} {value}"


@dataclass(frozen=True)
class SensitivityGrid:
    """Rows (SPEC first, then one per knob value that differs from SPEC's) and, per verdict, whether
    its status is the same in every row."""

    rows: tuple[GridSetting, ...]
    robust: Mapping[str, bool]


def reads(knob: str, claims: Sequence[Claim]) -> list[Claim]:
    """The claims whose verdict reads ``knob`` (each claim's ``reads``): the grid re-judges only those;
    the rest of a row is SPEC's (tests/test_report.py checks every row against a whole re-judge). A
    154-revision grid re-judged whole at every row was most of a population report's time."""
    return [c for c in claims if knob in c.reads]


def sensitivity_grid(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(),
                     total_tokens: float | None = None, spec: Thresholds = SPEC,
                     verdicts: Mapping[str, Verdict] | None = None,
                     claims: Sequence[Claim] | None = None) -> SensitivityGrid:
    """Re-judge every verdict (formation too, where declared) across the grid; ``verdicts``: the
    judge's at ``spec`` already (its row is not judged again); ``claims``: the claims judged (default:
    every registered one, or those ``verdicts`` holds)."""
    if claims is None:
        claims = [c for c in all_claims() if verdicts is None or c.name in verdicts]

    def statuses(s: Thresholds) -> dict[str, str]:
        return {claim: v.status.value for claim, v in judge_model(records, expect, total_tokens, s, claims).items()}

    base = {c: v.status.value for c, v in verdicts.items()} if verdicts is not None else statuses(spec)
    rows = [GridSetting(None, None, base)]
    recs = by_tokens(records)
    gates = [c for c in claims if c.gate and c.applies_to(expect)]
    for knob, _, grid in KNOBS:
        for value in getattr(spec, grid):
            if value == getattr(spec, knob):
                continue  # SPEC's own value is the first row
            s = dataclasses.replace(spec, **{knob: value})
            if any(knob in g.reads for g in gates):  # a gate reads it: whether the others are judged may change
                rows.append(GridSetting(knob, value, statuses(s)))
                continue
            row = dict(base)
            if not any(base.get(g.name) == Status.FAILS.value for g in gates):  # did not form: every claim not judged
                for claim in reads(knob, claims):
                    if claim.name in row and not claim.gate:
                        row[claim.name] = judge_claim(claim, recs, expect, total_tokens, s).status.value
            rows.append(GridSetting(knob, value, row))
    claims = list(rows[0].statuses)
    robust = {c: len({r.statuses.get(c) for r in rows}) == 1 for c in claims}
    return SensitivityGrid(tuple(rows), robust)
