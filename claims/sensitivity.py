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

from headwatch.formatting import fmt_share
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds

from .judge import judge_causal, judge_f1, judge_f2, judge_f3, judge_f4, judge_f5, judge_model
from .trajectory import by_tokens
from .verdict import Status, Verdict

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


#: The claims whose verdict reads each knob (the grid re-judges only those; the rest of a row is
#: SPEC's: tests/test_report.py checks every row against a whole re-judge). A 154-revision grid
#: re-judged whole at every row was most of a population report's time (issue 33).
READS: dict[str, tuple[str, ...]] = {
    "bos": ("F1", "F2", "F3"),
    "induction": ("F3", "F4", "F5", "causal"),
    "step_share": ("F2",),
    "recall_level": ("F4",),
}
#: Formation reads these too: with formation declared, their rows are judged whole.
FORMATION_READS = ("bos", "induction")


def _judge_one(claim: str, records: Sequence[MeasurementRecord], expect: Expectations, total_tokens: float | None,
               spec: Thresholds) -> Verdict:
    return {
        "F1": lambda: judge_f1(records, spec), "F2": lambda: judge_f2(records, expect, spec),
        "F3": lambda: judge_f3(records, expect, spec), "F4": lambda: judge_f4(records, expect, total_tokens, spec),
        "F5": lambda: judge_f5(records, spec), "causal": lambda: judge_causal(records, expect, spec),
    }[claim]()


def sensitivity_grid(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(),
                     total_tokens: float | None = None, spec: Thresholds = SPEC,
                     verdicts: Mapping[str, Verdict] | None = None) -> SensitivityGrid:
    """Re-judge every verdict (formation too, where declared) across the grid; ``verdicts``: the
    judge's at ``spec`` already (its row is not judged again)."""
    def statuses(s: Thresholds) -> dict[str, str]:
        return {claim: v.status.value for claim, v in judge_model(records, expect, total_tokens, s).items()}

    base = {c: v.status.value for c, v in verdicts.items()} if verdicts is not None else statuses(spec)
    rows = [GridSetting(None, None, base)]
    recs = by_tokens(records)
    for knob, _, grid in KNOBS:
        for value in getattr(spec, grid):
            if value == getattr(spec, knob):
                continue  # SPEC's own value is the first row
            s = dataclasses.replace(spec, **{knob: value})
            if expect.formation is not None and knob in FORMATION_READS:
                rows.append(GridSetting(knob, value, statuses(s)))
                continue
            row = dict(base)
            if base.get("formation") != Status.FAILS.value:  # a model that did not form: every claim not judged
                for claim in READS[knob]:
                    row[claim] = _judge_one(claim, recs, expect, total_tokens, s).status.value
            rows.append(GridSetting(knob, value, row))
    claims = list(rows[0].statuses)
    robust = {c: len({r.statuses.get(c) for r in rows}) == 1 for c in claims}
    return SensitivityGrid(tuple(rows), robust)
