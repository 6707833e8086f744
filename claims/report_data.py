"""What the report shows, computed once for the HTML plugin and ``headwatch report`` alike.

:func:`model_report` reads a panel model's records without measuring anything
(:meth:`headwatch.fixtures.provider.Provider.cached_records`: published files for ``reference``
models, the measurement cache for the others), judges them with
:func:`headwatch.claims.judge.judge_model` (the judge the claim tests use), draws its figures if
asked, and keeps what the page shows of each revision (:class:`RevisionRow`), a population
member's quantities and trajectory; with ``release`` it then drops the records, so a report of
thousands of revisions holds one model's records at a time. :func:`verdict_cell` turns
one verdict into a table cell: a status word and the claim's key number.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from headwatch.fixtures.panels import PanelModel, populations
from headwatch.fixtures.provider import Provider
from headwatch.probes.record import MeasurementRecord
from headwatch.probes.selectivity import bos_fraction_of
from headwatch.spec import SPEC

from headwatch.claims import trajectory as T
from headwatch.claims.figures import Figure, Trajectory, model_figures, population_figures, trajectory_of
from headwatch.claims.judge import judge_model
from headwatch.claims.population import Member, PopulationReport, member_from_verdicts, population_report
from headwatch.claims.claim import Claim
from headwatch.claims.registry import ClaimError, all_claims, get_claim
from headwatch.claims.sensitivity import SensitivityGrid, sensitivity_grid
from headwatch.claims.verdict import WORDS, DeclaredOutcome, Status, Verdict, check_deviation, declared_outcome

#: Cell statuses: the verdict vocabulary's words (claims/verdict.py, the one place), how a declared
#: deviation turned out, and "missing".
HOLDS, VACUOUS, CONSISTENT, NOT_ESTABLISHED, FAILS, NA, NOT_JUDGED = (
    s.words for s in (Status.HOLDS, Status.HOLDS_VACUOUSLY, Status.CONSISTENT_NOT_ESTABLISHED, Status.NOT_ESTABLISHED,
                      Status.FAILS, Status.NOT_APPLICABLE, Status.NOT_JUDGED))
XFAIL, MISMATCH, XPASS = (o.value for o in (DeclaredOutcome.MATCHED, DeclaredOutcome.MISMATCH, DeclaredOutcome.GONE))
MISSING = "missing"
#: Each cell status as the report's table labels it.
CELL_LABEL: dict[str, str] = {**{s.words: WORDS[s].label for s in Status},
                              **{o.value: o.label for o in DeclaredOutcome}, MISSING: "not measured"}

def claim_title(name: str) -> str:
    """A claim's column heading (its registered ``title``; the name itself for one not registered here)."""
    try:
        return get_claim(name).title
    except ClaimError:
        return name


#: Per-model figures of population members are drawn when the report has at most this many models;
#: beyond that each population's figures show every member, and the page stays small.
MEMBER_FIGURES_UP_TO = 12


@dataclass(frozen=True)
class RevisionRow:
    """What the page shows of one revision: SPEC's BOS fraction beside Gu et al.'s Sink_1^eps."""

    revision: str
    tokens: float | None
    bos_fraction: float
    sink: str
    sink_examples: int | None


@dataclass
class ModelReport:
    """One panel model's records and verdicts (``verdicts`` empty when no record could be read).

    ``records`` may be released once the rest is filled (:meth:`release`): ``revisions``, ``rows``,
    ``trajectory`` and ``member`` are what the page and the population sections need of them.
    """

    id: str
    repo: str
    panel: str
    records: list[MeasurementRecord]
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    #: Revisions the panel lists that have no measurement on disk (not measured yet).
    missing: list[str] = field(default_factory=list)
    error: str | None = None
    #: Every verdict re-judged across SPEC's sensitivity grid (None: nothing judged).
    grid: SensitivityGrid | None = None
    figures: list[Figure] = field(default_factory=list)
    revisions: list[str] = field(default_factory=list)
    rows: list[RevisionRow] = field(default_factory=list)
    trajectory: Trajectory | None = None
    #: The model as a population member (its quantities), when its panel entry is one.
    member: Member | None = None
    figure_error: str | None = None
    #: The claims the model is judged on (``--claims``; empty: every registered one).
    claims: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.records and not self.revisions:
            self.summarize()

    def summarize(self) -> None:
        """Fill what the page needs of the records (revisions, rows, trajectory)."""
        recs = T.by_tokens(self.records)
        self.revisions = [r.revision for r in recs]
        self.rows = [_row(r) for r in recs]
        self.trajectory = trajectory_of(recs)

    def release(self) -> None:
        """Drop the records (what the page needs is kept)."""
        if self.records and not self.revisions:
            self.summarize()
        self.records = []


def _row(r: MeasurementRecord) -> RevisionRow:
    if r.sink is not None:
        return RevisionRow(r.revision, r.tokens_seen, bos_fraction_of(r, SPEC.bos),
                           f"{100 * r.sink.share_at(SPEC.sink_eps):.1f}%", r.sink.n_examples)
    return RevisionRow(r.revision, r.tokens_seen, bos_fraction_of(r, SPEC.bos),
                       "not in the published files" if r.is_published else "not computed", None)


@dataclass(frozen=True)
class Cell:
    """One verdict-table cell: ``status`` (one of the constants above), the key number, the judge's message."""

    status: str
    key: str
    message: str


def draws_member_figures(models: Sequence[PanelModel]) -> bool:
    """Whether a report of ``models`` draws per-model figures for population members (small reports)."""
    return len(models) <= MEMBER_FIGURES_UP_TO


def model_report(pm: PanelModel, provider: Provider, *, figures: bool = False, release: bool = False,
                 claims: Sequence[Claim] | None = None) -> ModelReport:
    """Records and verdicts of one panel model, its figures when ``figures``; ``release`` drops the
    records afterwards; ``claims``: the claims judged (``--claims``; default every registered one).
    A failure to read, judge or draw is kept, not raised."""
    chosen = all_claims() if claims is None else list(claims)
    out = ModelReport(pm.id, pm.repo, pm.panel, [], claims=() if claims is None else tuple(c.name for c in chosen))
    try:
        out.records, out.missing = provider.cached_records(pm)
        if out.records:
            out.summarize()
            out.verdicts = judge_model(out.records, pm.expect, pm.total_tokens, claims=chosen)
            out.grid = sensitivity_grid(out.records, pm.expect, pm.total_tokens, verdicts=out.verdicts, claims=chosen)
            if pm.member is not None:
                out.member = member_from_verdicts(pm, out.records, out.verdicts)
    except Exception as e:  # a report about a broken model beats no report
        out.error = f"{type(e).__name__}: {e}"
    if figures and out.records and not out.error:
        try:
            out.figures = model_figures(out.records, out.verdicts, out.id)
            for c in chosen:  # a claim's own figures, where it declares them
                if c.figures is not None and c.name in out.verdicts:
                    out.figures += list(c.figures(out.records, out.verdicts[c.name], out.id))
        except Exception as e:  # a report without a figure beats no report
            out.figure_error = f"figures of {out.id} failed: {type(e).__name__}: {e}"
    if release:
        out.release()
    return out


def cell_status(verdict: Verdict) -> str:
    """The verdict's status in words; a declared deviation as 'expected deviation' (it failed as
    declared: xfail), 'deviation mismatch' (it failed otherwise) or 'deviation gone' (it held)."""
    outcome = declared_outcome(verdict)
    return outcome.value if outcome is not None else verdict.status.words


def rows_of(reports: Sequence[ModelReport]) -> list[str]:
    """The verdict rows to show, in the registry's order: a gate (formation) when any model has its
    verdict, then the claims the models were judged on (``--claims``; every registered one by default)."""
    judged = {c for r in reports for c in r.verdicts}
    chosen = {c for r in reports for c in r.claims}
    return [c.name for c in all_claims()
            if (c.name in judged if c.gate else (not chosen or c.name in chosen))]


def verdict_cell(claim: str, report: ModelReport) -> Cell:
    """The table cell of ``claim`` for one model."""
    v = report.verdicts.get(claim)
    if v is None:
        if report.verdicts and claim in {c.name for c in all_claims() if c.gate}:
            return Cell(NA, "", "the panel declares no formation for this model")
        why = report.error or ("no measurements on disk" if not report.revisions else "not judged")
        return Cell(MISSING, "", why)
    message = v.message
    if v.declared_deviation is not None:
        found = check_deviation(v, v.declared_deviation)
        message += f" | declared deviation ({v.declared_deviation.reason}): expects {found.declared}; measured {found.measured}"
    return Cell(cell_status(v), v.key, message)


def summary_rows(reports: Sequence[ModelReport]) -> list[dict[str, Any]]:
    """One flat row per (model, claim): what the CSV holds."""
    rows = []
    for r in reports:
        for claim in rows_of(reports):
            c = verdict_cell(claim, r)
            v = r.verdicts.get(claim)
            f = v.figure if v else None
            rows.append({
                "model": r.id, "repo": r.repo, "panel": r.panel, "claim": claim, "status": c.status,
                "key": c.key, "verdict": v.status.value if v else "",
                "figure": "" if f is None or f.value is None else f.value,
                "interval": f.interval_text() if f else "", "interval_method": f.method if f else "",
                "p_value": "" if f is None or f.p_value is None else f.p_value,
                "robust": "" if r.grid is None or claim not in r.grid.robust else r.grid.robust[claim],
                "declared_deviation": (v.declared_deviation.reason if v and v.declared_deviation else ""),
                "revisions": len(r.revisions), "missing_revisions": " ".join(r.missing), "message": c.message,
            })
    return rows


# ---- populations -------------------------------------------------------------------------


def population_reports(models: Sequence[PanelModel], reports: Sequence[ModelReport]) -> list[PopulationReport]:
    """Each population among ``models``, judged from the models' reports (their verdicts reused, nothing
    judged twice). Members without records are left out; a population without a reference member
    that has records is not reported."""
    by_id = {r.id: r for r in reports}
    out = []
    for pop in populations(models):
        have = [m for m in pop.members if m.id in by_id and by_id[m.id].verdicts and
                (by_id[m.id].member is not None or by_id[m.id].records)]
        if any(not m.member.is_candidate for m in have):  # type: ignore[union-attr]
            members = [by_id[m.id].member or member_from_verdicts(m, by_id[m.id].records, by_id[m.id].verdicts)
                       for m in have]
            out.append(population_report(pop.id, members, rule=pop.placement))
    return out


def population_parts(models: Sequence[PanelModel], reports: Sequence[ModelReport], errors: list[str]
                     ) -> tuple[list[PopulationReport], dict[str, list[Figure]]]:
    """The populations among ``models`` and their figures, for the report (a figure that fails to draw
    is appended to ``errors``; the report is written anyway)."""
    pops = population_reports(models, reports)
    by_id = {r.id: r for r in reports}
    figs: dict[str, list[Figure]] = {}
    for p in pops:
        try:
            figs[p.name] = population_figures(p.name, {m.id: by_id[m.id].trajectory or Trajectory((), (), ())
                                                       for m in p.members}, [m.id for m in p.candidates])
        except Exception as e:  # a report without a figure beats no report
            errors.append(f"figures of population {p.name} failed: {type(e).__name__}: {e}")
    return pops, figs
