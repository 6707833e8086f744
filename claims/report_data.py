"""What the report shows, computed once for the HTML plugin and ``headwatch report`` alike.

:func:`model_report` reads a panel model's records without measuring anything
(:meth:`headwatch.fixtures.provider.Provider.cached_records`: published files for ``reference``
models, the measurement cache for the others), judges them with
:func:`headwatch.claims.judge.judge_model` (the judge the claim tests use), and :func:`verdict_cell`
turns one verdict into a table cell: a status word and the claim's key number.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from headwatch.fixtures.panels import PanelModel
from headwatch.fixtures.provider import Provider
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import CLAIMS

from .judge import judge_model
from .verdict import Verdict

#: Cell statuses, in the order a reader should worry about them.
HOLDS, FAILS, XFAIL, XPASS, NA, MISSING = "holds", "fails", "expected deviation", "deviation gone", "n/a", "missing"

CLAIM_TITLES: dict[str, str] = {
    "F1": "F1 no BOS head in layers 0-1",
    "F2": "F2 BOS-fraction shape",
    "F3": "F3 t_bos50 / t_induction",
    "F4": "F4 early circuit recall",
    "F5": "F5 PR before 50x",
    "causal": "causal ablation",
}


@dataclass
class ModelReport:
    """One panel model's records and verdicts (``verdicts`` empty when no record could be read)."""

    id: str
    repo: str
    panel: str
    records: list[MeasurementRecord]
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    #: Revisions the panel lists that have no measurement on disk (not measured yet).
    missing: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Cell:
    """One verdict-table cell: ``status`` (one of the constants above), the key number, the judge's message."""

    status: str
    key: str
    message: str


def model_report(pm: PanelModel, provider: Provider) -> ModelReport:
    """Records and verdicts of one panel model; a failure to read or judge is kept, not raised."""
    out = ModelReport(pm.id, pm.repo, pm.panel, [])
    try:
        out.records, out.missing = provider.cached_records(pm)
        if out.records:
            out.verdicts = judge_model(out.records, pm.expect, pm.total_tokens)
    except Exception as e:  # a report about a broken model beats no report
        out.error = f"{type(e).__name__}: {e}"
    return out


def cell_status(verdict: Verdict) -> str:
    """holds / fails / n/a, with declared deviations as 'expected deviation' (xfail) or 'deviation gone'."""
    holds = verdict.holds
    if holds is None:
        return NA
    if verdict.declared_deviation:
        return XFAIL if holds is False else XPASS
    return HOLDS if holds else FAILS


def verdict_cell(claim: str, report: ModelReport) -> Cell:
    """The table cell of ``claim`` for one model."""
    v = report.verdicts.get(claim)
    if v is None:
        why = report.error or ("no measurements on disk" if not report.records else "not judged")
        return Cell(MISSING, "", why)
    return Cell(cell_status(v), v.key, v.message)


def summary_rows(reports: Sequence[ModelReport]) -> list[dict[str, Any]]:
    """One flat row per (model, claim): what the CSV holds."""
    rows = []
    for r in reports:
        for claim in CLAIMS:
            c = verdict_cell(claim, r)
            v = r.verdicts.get(claim)
            rows.append({
                "model": r.id, "repo": r.repo, "panel": r.panel, "claim": claim, "status": c.status,
                "key": c.key, "verdict": v.status.value if v else "",
                "declared_deviation": (v.declared_deviation if v else None) or "",
                "revisions": len(r.records), "missing_revisions": " ".join(r.missing), "message": c.message,
            })
    return rows
