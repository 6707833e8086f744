"""What the report shows, computed once for the HTML plugin and ``headwatch report`` alike.

:func:`cached_records` reads a panel model's records without measuring anything (published files
for ``reference`` models, the measurement cache for the others), :func:`model_report` judges them
with :func:`claims.judge.judge_model` (the judge the claim tests use), and :func:`verdict_cell`
turns one verdict into a table cell: a status word and the claim's key number.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from probes.record import MeasurementRecord, parse_head_key

from .judge import CLAIMS, fmt_tokens, judge_model

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
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Revisions the panel lists that have no measurement on disk (not measured yet).
    missing: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Cell:
    """One verdict-table cell: ``status`` (one of the constants above), the key number, the judge's message."""

    status: str
    key: str
    message: str


# ---- records, read only -------------------------------------------------------------------------


def cached_records(pm: Any, options: Any) -> tuple[list[MeasurementRecord], list[str]]:
    """(records in token order, revisions without a measurement) for a PanelModel; measures nothing.

    A cached entry is found whatever checkpoint identity it was measured at (the newest wins):
    resolving identities could mean training organisms or asking the Hub, which a report must not do.
    """
    from fixtures import provider
    from fixtures.cache import CacheKey, MeasurementCache

    if pm.source == "reference":
        return provider.model_records(pm, options), []
    cache = MeasurementCache(options.measurement_dir, check_writable=False)
    records, missing = [], []
    for rev in pm.sorted_revisions:
        settings = pm.settings_for(rev, n_examples=options.n_examples, dtype=options.dtype)
        rec = cache.lookup_loose(CacheKey.make(pm.repo, rev, "", settings))
        if rec is None:
            missing.append(rev)
            continue
        if rec.tokens_seen is None:
            rec.tokens_seen = pm.tokens_rule.tokens(rev)
        records.append(rec)
    return provider.sort_by_tokens(records), missing


def model_report(pm: Any, options: Any) -> ModelReport:
    """Records and verdicts of one panel model; a failure to read or judge is kept, not raised."""
    out = ModelReport(pm.id, pm.repo, pm.panel, [])
    try:
        out.records, out.missing = cached_records(pm, options)
        if out.records:
            out.verdicts = judge_model(out.records, pm.expect, pm.total_tokens)
    except Exception as e:  # a report about a broken model beats no report
        out.error = f"{type(e).__name__}: {e}"
    return out


# ---- cells --------------------------------------------------------------------------------------


def cell_status(verdict: Mapping[str, Any]) -> str:
    """holds / fails / n/a, with declared deviations as 'expected deviation' (xfail) or 'deviation gone'."""
    holds = verdict.get("holds")
    if holds is None:
        return NA
    if verdict.get("declared_xfail"):
        return XFAIL if holds is False else XPASS
    return HOLDS if holds else FAILS


def _pct(x: float | None, nd: int = 1) -> str:
    return "?" if x is None else f"{100 * x:.{nd}f}%"


def _f1_key(v: Mapping[str, Any], records: Sequence[MeasurementRecord]) -> str:
    layers = v.get("layers", [0, 1])
    early = sum(1 for h in records[-1].all_head_selectivity if parse_head_key(h)[0] in set(layers)) if records else 0
    worst = max((len(x["heads"]) for x in v.get("violations", [])), default=0)
    return f"{worst} of {early} heads" + (f" ({len(v['violations'])} rev.)" if v.get("violations") else "")


def _f2_key(v: Mapping[str, Any]) -> str:
    return f"{v['shape']}: {v['largest_rise_points']:.1f} of {v['total_rise_points']:.1f} pts"


def _f3_key(v: Mapping[str, Any]) -> str:
    ratio = "never" if v.get("ratio") is None else f"{v['ratio']:.3g}x"
    return ratio if v.get("applies") else f"{ratio} (not DCLM)"


def _f4_key(v: Mapping[str, Any]) -> str:
    c = v.get("computed")
    if not c:
        return "no final circuit" if not v.get("final_circuit") else "never"
    fr = c["fraction_of_total"]
    key = f"{100 * c['recall']:.0f}% at {100 * fr:.2g}% of tokens"
    paper = v.get("paper_table")
    if paper:
        key += (f"; paper table {100 * paper['fraction_of_total']:.2g}% "
                + ("reproduced" if paper.get("reproduced") else "NOT reproduced"))
    return key


def _f5_key(v: Mapping[str, Any]) -> str:
    heads = v.get("heads") or []
    if not heads:
        return "no PR" if "no per-head PR" in v.get("message", "") else "no heads"
    return f"{len(heads) - len(v.get('failing', []))} of {len(heads)} heads"


def _causal_key(v: Mapping[str, Any]) -> str:
    if "circuit_top1" not in v:
        return "not run"
    base = v["baseline_top1"]
    key = f"{_pct(v.get('share_of_baseline'))} of base"
    if v.get("random_top1") is not None and base:
        key += f" (rand {_pct(v['random_top1'] / base)})"
        if not str(v.get("random_matched_to", "")).startswith("the induction circuit"):
            key += " †"  # the control is matched to another head set: the table's footnote says so
    return key


def key_number(claim: str, verdict: Mapping[str, Any], records: Sequence[MeasurementRecord] = ()) -> str:
    """The claim's headline number, e.g. '11.5x', '0 of 32 heads', '67% at 0.75%'."""
    try:
        if claim == "F1":
            return _f1_key(verdict, records)
        return {"F2": _f2_key, "F3": _f3_key, "F4": _f4_key, "F5": _f5_key, "causal": _causal_key}[claim](verdict)
    except (KeyError, TypeError):  # a verdict without its figures (n/a): the message says why
        return ""


def verdict_cell(claim: str, report: ModelReport) -> Cell:
    """The table cell of ``claim`` for one model."""
    v = report.verdicts.get(claim)
    if v is None:
        why = report.error or ("no measurements on disk" if not report.records else "not judged")
        return Cell(MISSING, "", why)
    return Cell(cell_status(v), key_number(claim, v, report.records), v.get("message", ""))


def summary_rows(reports: Sequence[ModelReport]) -> list[dict[str, Any]]:
    """One flat row per (model, claim): what the CSV holds."""
    rows = []
    for r in reports:
        for claim in CLAIMS:
            c = verdict_cell(claim, r)
            v = r.verdicts.get(claim, {})
            rows.append({
                "model": r.id, "repo": r.repo, "panel": r.panel, "claim": claim, "status": c.status,
                "key": c.key, "holds": v.get("holds"), "declared_xfail": v.get("declared_xfail") or "",
                "revisions": len(r.records), "missing_revisions": " ".join(r.missing), "message": c.message,
            })
    return rows


def token_label(tokens: float | None) -> str:
    """Re-exported for figures: 2.3e10 -> '23B'."""
    return fmt_tokens(tokens)
