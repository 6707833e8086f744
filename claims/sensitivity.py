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

from .judge import judge_model

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


def sensitivity_grid(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(),
                     total_tokens: float | None = None, spec: Thresholds = SPEC) -> SensitivityGrid:
    """Re-judge every verdict (formation too, where declared) across the grid."""
    def statuses(s: Thresholds) -> dict[str, str]:
        return {claim: v.status.value for claim, v in judge_model(records, expect, total_tokens, s).items()}

    rows = [GridSetting(None, None, statuses(spec))]
    for knob, _, grid in KNOBS:
        for value in getattr(spec, grid):
            if value == getattr(spec, knob):
                continue  # SPEC's own value is the first row
            rows.append(GridSetting(knob, value, statuses(dataclasses.replace(spec, **{knob: value}))))
    claims = list(rows[0].statuses)
    robust = {c: len({r.statuses.get(c) for r in rows}) == 1 for c in claims}
    return SensitivityGrid(tuple(rows), robust)
