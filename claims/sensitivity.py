"""The sensitivity grid: every verdict re-judged with one SPEC constant changed at a time.

The knobs and their values are SPEC's (``grid_bos``, ``grid_induction``, ``grid_step_share``,
``grid_recall_level`` in :mod:`headwatch.spec`): the BOS threshold at 20/30/50, the induction
threshold at 30/50/100, the step share at 0.4/0.5/0.6 and the recall level at 1/2, 2/3, 3/4. A
claim is "robust" when its status is the same at every setting. Reported, never asserted.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds

from .judge import judge_f2, judge_f4, judge_model
from .verdict import Status, Verdict, fmt_share

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


#: Knobs that only one claim reads, and how to re-judge that claim alone (the rest of the row is
#: SPEC's: nothing else reads the knob; tests/test_report.py checks it against a whole re-judge).
#: A grid of 154 revisions re-judged whole at every row was most of a population report's time (issue 33).
ONE_CLAIM: dict[str, tuple[str, Callable[..., Verdict]]] = {
    "step_share": ("F2", lambda recs, expect, total, s: judge_f2(recs, expect, s)),
    "recall_level": ("F4", lambda recs, expect, total, s: judge_f4(recs, expect, total, s)),
}


def sensitivity_grid(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(),
                     total_tokens: float | None = None, spec: Thresholds = SPEC,
                     verdicts: Mapping[str, Verdict] | None = None) -> SensitivityGrid:
    """Re-judge every verdict (formation too, where declared) across the grid; ``verdicts``: the
    judge's at ``spec`` already (its row is not judged again)."""
    def statuses(s: Thresholds) -> dict[str, str]:
        return {claim: v.status.value for claim, v in judge_model(records, expect, total_tokens, s).items()}

    base = {c: v.status.value for c, v in verdicts.items()} if verdicts is not None else statuses(spec)
    rows = [GridSetting(None, None, base)]
    withheld = base.get("formation") == Status.FAILS.value  # a model that did not form: every claim not judged
    for knob, _, grid in KNOBS:
        for value in getattr(spec, grid):
            if value == getattr(spec, knob):
                continue  # SPEC's own value is the first row
            s = dataclasses.replace(spec, **{knob: value})
            if knob in ONE_CLAIM:
                claim, judge = ONE_CLAIM[knob]
                row = dict(base)
                if not withheld:
                    row[claim] = judge(records, expect, total_tokens, s).status.value
                rows.append(GridSetting(knob, value, row))
            else:
                rows.append(GridSetting(knob, value, statuses(s)))
    claims = list(rows[0].statuses)
    robust = {c: len({r.statuses.get(c) for r in rows}) == 1 for c in claims}
    return SensitivityGrid(tuple(rows), robust)
