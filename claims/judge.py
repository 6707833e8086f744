"""The one judge of claims F1-F5, the causal check and organism formation (docs/SPEC.md §6), shared
by tests, CLI and report.

Each ``judge_*`` function takes a model's records (and, where a claim needs them, the panel's
:class:`~headwatch.spec.Expectations`) and returns a :class:`~headwatch.claims.verdict.Verdict`:
a status in the shared vocabulary (holds / holds vacuously / consistent, not established / fails /
not applicable / not judged), a one-line message stating the measured quantities, the key figure
with its bar, interval and method, the margin, and the claim's typed details. :func:`judge_model`
runs them all (formation first, where a panel declares it). Every bar comes from ``spec`` (default
:data:`headwatch.spec.SPEC`) unless the panel's expectations override it for the model; the
sensitivity grid (:mod:`headwatch.claims.sensitivity`) re-judges with other ``spec`` values.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

from headwatch.formatting import GRID, OPEN, fmt_interval, fmt_layers, fmt_number, fmt_pct, fmt_share, fmt_tokens
from headwatch.probes.record import MeasurementRecord, parse_head_key, TRAINING_PROVENANCE
from headwatch.probes.selectivity import bos_heads, induction_circuit
from headwatch.schema import to_data
from headwatch.spec import CLAIMS, FORMATION, SPEC, Expectations, Thresholds
from headwatch.stats import NESTED_DRAW, REVISION_GRID, clopper_pearson, finite_or_none

from . import trajectory as T
from .verdict import (
    CausalDetails, F1Details, F1Violation, F2Details, F3Details, F3Sensitivity, F4Computed, F4Details,
    F4PaperTable, F5Details, F5Head, F5Sensitivity, FormationDetails, KeyFigure, Point, RecallAt, Status,
    Verdict, DeclaredOutcome, declared_outcome,
)

__all__ = ["CLAIMS", "judge_model", "judge_f1", "judge_f1_revision", "judge_f2", "judge_f3", "judge_f4",
           "judge_f5", "judge_causal", "judge_formation", "not_judged", "status_word"]

_NONE = Expectations()

#: The two readings of F4's recall (docs/statistics.md): their names in details and messages.
UNIFORM_READING, INTERMEDIATE_READING = "uniform 50x", "intermediate 30x"


# ---- formatting helpers ----------------------------------------------------------------------


def _point(p: T.RevisionPoint | None) -> Point | None:
    return None if p is None else Point(p.revision, p.tokens)


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def _sig(x: float | None, digits: int = 4) -> float | None:
    """``x`` to ``digits`` significant digits (p-values span many orders of magnitude)."""
    return None if x is None else float(f"{x:.{digits}g}")


def _with_interval(value: float, interval: tuple | None) -> str:
    """'28.1x' or '37.7x [32.4, 43.8]'."""
    return f"{value:.3g}x" + (f" {fmt_interval(interval)}" if interval is not None else "")


# ---- F1 ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 16)
def _layer(head: str) -> int:
    """A head key's layer, parsed once per key (F1 looks at every head of every revision, again per grid row)."""
    return parse_head_key(head)[0]


def _early_heads(record: MeasurementRecord, layers: Sequence[int]) -> list[str]:
    wanted = set(layers)
    return [h for h in record.all_head_selectivity if _layer(h) in wanted]


def _early_peak(records: Sequence[MeasurementRecord], layers: Sequence[int]
                ) -> tuple[str, float, MeasurementRecord] | None:
    """The head in ``layers`` with the highest first-token selectivity over ``records`` (the first
    such in token order on ties), its selectivity and its record; None when no record has those layers."""
    best: tuple[str, float, MeasurementRecord] | None = None
    for r in records:
        for h in _early_heads(r, layers):
            sel = r.all_head_selectivity[h]["first-token"]
            if best is None or sel > best[1]:
                best = (h, sel, r)
    return best


def _highest_upper_bound(records: Sequence[MeasurementRecord], layers: Sequence[int]) -> float | None:
    """The largest upper interval bound of any early head's first-token selectivity (None: no intervals)."""
    bounds = [b[1] for r in records for h in _early_heads(r, layers)
              if (b := r.selectivity_interval(h, "first-token")) is not None]
    return max(bounds) if bounds else None


def _f1_key(violations: Sequence[F1Violation], record: MeasurementRecord, layers: Sequence[int],
            figure: KeyFigure) -> str:
    """'0 of 32 heads; max 28.1x' (the margin to the bar shows), with the interval where there is one."""
    early = len(_early_heads(record, layers))
    worst = max((len(v.heads) for v in violations), default=0)
    peak = "" if figure.value is None else f"; max {_with_interval(figure.value, figure.interval)}"
    return f"{worst} of {early} heads" + (f" ({len(violations)} rev.)" if violations else "") + peak


def _f1_figure(records: Sequence[MeasurementRecord], layers: Sequence[int], threshold: float
               ) -> tuple[KeyFigure, str | None, MeasurementRecord | None]:
    quantity = f"largest layer-{fmt_layers(layers)} first-token selectivity"
    peak = _early_peak(records, layers)
    if peak is None:
        return KeyFigure(quantity, None, threshold, method="no head in these layers"), None, None
    top, value, rec = peak
    interval = rec.selectivity_interval(top, "first-token")
    method = (rec.no_interval_reason() if interval is None
              else rec.intervals.methods.get("selectivity", ""))  # type: ignore[union-attr]
    return (KeyFigure(quantity, _round(value, 3), threshold,
                      None if interval is None else (_round(interval[0], 3), _round(interval[1], 3)), method),
            top, rec)


def _f1_status(violations: bool, bos_anywhere: int, upper: float | None, threshold: float) -> Status:
    if violations:
        return Status.FAILS
    if bos_anywhere == 0:
        return Status.HOLDS_VACUOUSLY
    if upper is not None and upper >= threshold:
        return Status.CONSISTENT_NOT_ESTABLISHED
    return Status.HOLDS


def _f1_caveat(status: Status, upper: float | None, threshold: float) -> str:
    if status is Status.HOLDS_VACUOUSLY:
        return "; holds vacuously: no head in any layer has first-token selectivity >= " f"{threshold:g}"
    if status is Status.CONSISTENT_NOT_ESTABLISHED:
        return f"; not established: an early head's 95% upper bound reaches {upper:.3g} (>= {threshold:g})"
    return ""


def judge_f1_revision(record: MeasurementRecord, spec: Thresholds = SPEC) -> Verdict:
    """F1 at one revision: no head in the F1 layers with first-token selectivity >= the BOS bar."""
    layers, threshold = spec.f1_layers, spec.bos
    heads = T.early_layer_bos_heads(record, layers, threshold)
    sel = {h: _round(record.all_head_selectivity[h]["first-token"], 2) for h in heads}
    where = f"{record.revision} ({fmt_tokens(record.tokens_seen)} tokens)"
    figure, top, _ = _f1_figure([record], layers, threshold)
    anywhere = len(bos_heads(record.all_head_selectivity, threshold))
    upper = _highest_upper_bound([record], layers)
    status = _f1_status(bool(heads), anywhere, upper, threshold)
    if heads:
        message = (f"{len(heads)} BOS head(s) in layers {fmt_layers(layers)} at {where}: "
                   + ", ".join(f"{h} (first-token {v}x)" for h, v in sel.items()))
    else:
        message = f"no BOS head in layers {fmt_layers(layers)} at {where}"
        if figure.value is not None:  # None: the model has none of these layers
            message += (f"; highest first-token selectivity there: {top} {_with_interval(figure.value, figure.interval)} "
                        f"(< {threshold:g}; {figure.method})")
    message += _f1_caveat(status, upper, threshold)
    violations = (F1Violation(record.revision, record.tokens_seen, tuple(heads)),) if heads else ()
    details = F1Details(layers=tuple(layers), threshold=threshold, peak_selectivity=figure.value, peak_head=top,
                        revision=record.revision, tokens=record.tokens_seen, heads=tuple(heads),
                        first_token_selectivity=sel, peak_revision=record.revision, peak_interval=figure.interval,
                        interval_method=figure.method, highest_upper_bound=_round(upper, 3),
                        bos_heads_anywhere=anywhere, vacuous_revisions=() if anywhere else (record.revision,))
    return Verdict("F1", status, message, details, key=_f1_key(violations, record, layers, figure),
                   margin=None if figure.value is None else _round(threshold - figure.value),
                   figure=figure, failing_revisions=(record.revision,) if heads else (), failing_heads=tuple(heads))


def judge_f1(records: Sequence[MeasurementRecord], spec: Thresholds = SPEC) -> Verdict:
    """F1 over every revision: fails where any revision has a BOS head in the F1 layers; holds
    vacuously where no revision has a BOS head in any layer; not established where an early
    head's interval reaches the bar."""
    layers, threshold = spec.f1_layers, spec.bos
    recs = T.by_tokens(records)
    per_rev = [judge_f1_revision(r, spec) for r in recs]
    bad = [F1Violation(v.details.revision, v.details.tokens, v.details.heads) for v in per_rev if v.status is Status.FAILS]
    vacuous = tuple(v.details.revision for v in per_rev if v.status is Status.HOLDS_VACUOUSLY)
    anywhere = max(v.details.bos_heads_anywhere for v in per_rev)
    upper = _highest_upper_bound(recs, layers)
    status = _f1_status(bool(bad), anywhere, upper, threshold)
    figure, top, rec = _f1_figure(recs, layers, threshold)
    if bad:
        message = (f"BOS heads in layers {fmt_layers(layers)} at "
                   + "; ".join(f"{v.revision}: {', '.join(v.heads)}" for v in bad))
    else:
        message = f"no BOS head in layers {fmt_layers(layers)} at any of {len(per_rev)} revisions"
    if figure.value is not None:
        message += (f"; highest first-token selectivity there {_with_interval(figure.value, figure.interval)} "
                    f"({top} at {rec.revision}; bar {threshold:g}; {figure.method})")  # type: ignore[union-attr]
    if vacuous and status is not Status.HOLDS_VACUOUSLY:
        message += f"; vacuous at {len(vacuous)} of {len(per_rev)} revisions (no BOS head in any layer)"
    message += _f1_caveat(status, upper, threshold)
    details = F1Details(layers=tuple(layers), threshold=threshold, revisions_checked=len(per_rev),
                        violations=tuple(bad), peak_selectivity=figure.value, peak_head=top,
                        peak_revision=rec.revision if rec else None, peak_interval=figure.interval,
                        interval_method=figure.method, highest_upper_bound=_round(upper, 3),
                        bos_heads_anywhere=anywhere, vacuous_revisions=vacuous)
    heads = tuple(T.layer_order({h for v in bad for h in v.heads}))
    return Verdict("F1", status, message, details, key=_f1_key(bad, recs[-1], layers, figure),
                   margin=None if figure.value is None else _round(threshold - figure.value),
                   figure=figure, failing_revisions=tuple(v.revision for v in bad), failing_heads=heads)


# ---- claims about training: one revision is no trajectory ----------------------------------------


def _trajectory_claim(judge):
    """F2-F5 are claims about a model's training: judged on records of one revision only (a pretrained
    model a package ships, with no checkpoint from its training), the verdict is "not established"
    (the evidence, earlier checkpoints, is missing), whatever the one revision shows; a claim that does
    not apply (F3 on a model not trained on DCLM, F2 without a declared shape) stays "not applicable",
    its message saying that there is no trajectory either."""
    @functools.wraps(judge)
    def judged(records: Sequence[MeasurementRecord], *args, **kwargs) -> Verdict:
        verdict = judge(records, *args, **kwargs)
        if len(records) >= 2:
            return verdict
        revisions = ", ".join(r.revision for r in records) or "none"
        if verdict.status is Status.NOT_APPLICABLE:
            return dataclasses.replace(verdict, key="one revision: no trajectory", margin=None, message=(
                f"{verdict.claim} does not apply here, and the records hold one revision ({revisions}): no "
                f"trajectory either. At that revision alone: {verdict.message}"))
        return dataclasses.replace(
            verdict, status=Status.NOT_ESTABLISHED, margin=None, failing_revisions=(), failing_heads=(),
            key="one revision: no trajectory",
            message=(f"not established: {verdict.claim} is a claim about training, and the records hold one "
                     f"revision ({revisions}), no trajectory; it needs checkpoints from training (two revisions "
                     f"at least). At that revision alone: {verdict.message}"))
    return judged


# ---- F2 ---------------------------------------------------------------------------------------


@_trajectory_claim
def judge_f2(records: Sequence[MeasurementRecord], expect: Expectations = _NONE, spec: Thresholds = SPEC) -> Verdict:
    """F2: the BOS-fraction shape matches the panel's expected shape (not applicable if none declared)."""
    step_share = spec.step_share
    recs = T.by_tokens(records)
    shape = T.bos_shape(recs, step_share, spec.bos)
    series = T.bos_fraction_series(recs, spec.bos)
    pts = T.tokens_per_revision(recs)
    rise = None
    if shape.rise_at is not None:
        rise = {"from": _point(pts[shape.rise_at - 1]), "to": _point(pts[shape.rise_at])}
    holds = None if expect.bos_shape is None else shape.shape == expect.bos_shape
    rise_txt = (f"largest adjacent rise {100 * shape.largest_rise:.1f} of {100 * shape.total_rise:.1f} points"
                + (f" ({pts[shape.rise_at - 1].revision} -> {pts[shape.rise_at].revision}, "
                   f"{fmt_pct(series[shape.rise_at - 1], '.1f')} -> {fmt_pct(series[shape.rise_at], '.1f')})"
                   if shape.rise_at is not None else ""))
    expected_txt = f"expected {expect.bos_shape}" if expect.bos_shape else "no shape declared in the panel"
    details = F2Details(
        shape=shape.shape, expected=expect.bos_shape,
        first_pct=_round(100 * shape.first, 2), final_pct=_round(100 * shape.final, 2),
        largest_rise_points=_round(100 * shape.largest_rise, 2), total_rise_points=_round(100 * shape.total_rise, 2),
        share=_round(shape.share), step_share=step_share, largest_rise=rise,
        series_pct={p.revision: _round(100 * f, 2) for p, f in zip(pts, series)},
    )
    margin = None
    if shape.share is not None and expect.bos_shape is not None:
        margin = _round(shape.share - step_share if expect.bos_shape == "step" else step_share - shape.share)
    key = f"{details.shape}: {details.largest_rise_points:.1f} of {details.total_rise_points:.1f} pts"
    figure = KeyFigure("largest adjacent rise / total rise of the BOS fraction", details.share, step_share,
                       method="no interval (the shape of a curve on the revision grid)")
    shape_txt = "flat" if shape.shape == "flat" else f"a {shape.shape}"
    return Verdict("F2", Status.of(holds), f"BOS fraction is {shape_txt}: {rise_txt}; {expected_txt}",
                   details, key=key, margin=margin, figure=figure)


# ---- F3 ---------------------------------------------------------------------------------------


def _bracket_txt(m: T.Milestone) -> str:
    """'(10B, 23B]' on the revision grid; '(209B, inf)' for a right-censored milestone."""
    lo, hi = m.bracket
    return f"({fmt_tokens(lo)}, " + (f"{fmt_tokens(hi)}]" if math.isfinite(hi) else "inf)")


def _milestone_txt(name: str, m: T.Milestone) -> str:
    if m.censored:  # then ``before`` is the last revision
        return (f"{name} not reached by the last revision {m.before.revision}: right-censored, "  # type: ignore[union-attr]
                f"in {_bracket_txt(m)}")
    return f"{name} at {m.revision}, in {_bracket_txt(m)}"


@_trajectory_claim
def judge_f3(records: Sequence[MeasurementRecord], expect: Expectations = _NONE, spec: Thresholds = SPEC) -> Verdict:
    """F3: for DCLM models, t_bos50 / t_induction >= the bar (10). Not applicable otherwise.

    Each milestone is known only on the revision grid, in (last revision before, first revision
    at]; one no revision reaches is right-censored, in (last revision, inf). The ratio then lies in
    the open interval (lo, hi) = (b0 / i1, b1 / i0) (:class:`~headwatch.claims.trajectory.SeparationResult`)
    and the verdict follows from it: holds (established) iff lo >= bar; fails iff hi <= bar (the
    data exclude the claim); consistent, not established where the interval straddles the bar,
    whatever the point estimate (the first revisions at which each milestone is met).
    """
    min_ratio = expect.min_ratio if expect.f3_min_ratio is not None else spec.f3_min_ratio
    min_heads = spec.induction_min_heads

    bos = T.t_bos50(records, spec.bos_level, spec.bos)  # the same at every head count

    def separation(k: int) -> T.SeparationResult:
        return T.induction_bos_separation(records, min_heads=k, induction_threshold=spec.induction,
                                          bos_level=spec.bos_level, bos_threshold=spec.bos, bos=bos)

    sep = separation(min_heads)
    sensitivity = {}
    for k in spec.f3_sensitivity_heads:
        s = separation(k)
        sensitivity[str(k)] = F3Sensitivity(_point(s.induction.point), _round(s.ratio))
    lo, hi = sep.bounds
    interval = (_round(finite_or_none(lo)), _round(finite_or_none(hi)))
    # t_induction at a 0-token revision (induction heads at initialization): the ratio is infinite
    interval_txt = fmt_interval(interval, ends=OPEN) if math.isfinite(lo) else "inf (t_induction at 0 tokens)"
    if sep.ratio is not None:
        ratio_txt = (f"t_bos50 / t_induction = {fmt_tokens(sep.bos.tokens)} / {fmt_tokens(sep.induction.tokens)}"
                     f" = {sep.ratio:.3g}")
    else:
        ratio_txt = "t_bos50 / t_induction has no point estimate (" + (
            " and ".join(f"{c} right-censored" for c in sep.censored) or "t_induction at 0 tokens") + ")"
    where = (f"{_milestone_txt('t_induction', sep.induction)} (>= {min_heads} heads at induction >= {spec.induction:g}); "
             f"{_milestone_txt('t_bos50', sep.bos)} (BOS fraction >= {spec.bos_level:g}); so the ratio is in {interval_txt}")
    established = None
    if not expect.dclm:
        status, verdict = Status.NOT_APPLICABLE, "not a DCLM model: F3 does not apply"
    elif lo >= min_ratio:
        status, established = Status.HOLDS, True
        verdict = f"established: the lower bound {fmt_number(lo)} >= {min_ratio:g}"
    elif hi <= min_ratio:
        status, established = Status.FAILS, False
        verdict = f"the data exclude the claim: the upper bound {fmt_number(hi)} <= {min_ratio:g}"
    else:
        status, established = Status.CONSISTENT_NOT_ESTABLISHED, False
        verdict = (f"consistent, not established: the interval straddles {min_ratio:g} (lower bound {fmt_number(lo)}"
                   + (f"; the point estimate {'passes' if sep.ratio >= min_ratio else 'does not'}"
                      if sep.ratio is not None else "") + ")")
    details = F3Details(applies=expect.dclm, ratio=_round(sep.ratio), min_ratio=min_ratio,
                        t_induction=_point(sep.induction.point), t_bos50=_point(sep.bos.point),
                        milestone_heads=min_heads, sensitivity_milestone_heads=sensitivity,
                        t_induction_before=_point(sep.induction.before), t_bos50_before=_point(sep.bos.before),
                        ratio_interval=interval, established=established, censored=sep.censored)
    ratio = (f"{details.ratio:.3g}x " if details.ratio is not None else "censored ") + interval_txt
    method = REVISION_GRID + "".join(f"; {c} right-censored after the last revision" for c in sep.censored)
    figure = KeyFigure("t_bos50 / t_induction (tokens)", details.ratio, min_ratio, interval, method, ends=OPEN)
    return Verdict("F3", status, f"{ratio_txt}; {where}; {verdict}", details,
                   key=ratio if expect.dclm else f"{ratio} (not DCLM)",
                   margin=None if sep.ratio is None else _round(sep.ratio - min_ratio), figure=figure)


# ---- F4 ---------------------------------------------------------------------------------------


def _f4_computed(conv: T.ConvergenceResult, intermediate: float) -> F4Computed | None:
    if conv.point is None:
        return None
    b = conv.fraction_bounds
    return F4Computed(conv.point.point.revision, conv.point.point.tokens, _round(conv.fraction_of_total, 6),
                      _round(conv.point.recall), tuple(conv.point.found),
                      None if b is None else (_round(b[0], 6), _round(b[1], 6)), intermediate)


@_trajectory_claim
def judge_f4(records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
             total_tokens: float | None = None, spec: Thresholds = SPEC) -> Verdict:
    """F4: the first revision with recall of the final circuit >= 2/3 lies within 2.5% of training.

    Two readings (docs/statistics.md): *uniform* (every revision's heads at the induction
    threshold, SPEC's stated definition, which decides the verdict) and *intermediate* (the final
    circuit at the induction threshold, heads at earlier revisions counted at the head-label
    threshold). The recall point is known on the revision grid only, as a fraction of training in
    (last revision before, first revision at]: holds (established) iff the upper end <= the bar;
    fails iff the lower end >= the bar (the data exclude the claim); consistent, not established
    where the bracket straddles the bar. (The recall point cannot be right-censored: the final
    circuit is the last revision's, so recall is 1 there.) Where the panel declares
    ``paper_f4_tokens``, both readings are compared with the paper's table: the report says which
    reading reproduces it.
    """
    level = spec.recall_level
    max_fraction = expect.max_fraction if expect.f4_max_fraction is not None else spec.f4_max_fraction
    conv = T.first_recall_at_least(records, level, spec.induction, total_tokens=total_tokens)
    conv_mid = T.first_recall_at_least(records, level, spec.induction, total_tokens=total_tokens,
                                       intermediate_threshold=spec.label)
    series = {p.point.revision: RecallAt(p.point.tokens, _round(p.recall), tuple(p.found)) for p in conv.series}
    computed, intermediate = _f4_computed(conv, spec.induction), _f4_computed(conv_mid, spec.label)
    paper_tokens = expect.paper_f4_tokens
    paper = None
    if paper_tokens is not None:
        at = next((p for p in conv.series if math.isclose(p.point.tokens, paper_tokens, rel_tol=spec.paper_tokens_rel_tol)), None)
        by = tuple(name for name, c in ((UNIFORM_READING, computed), (INTERMEDIATE_READING, intermediate))
                   if at is not None and c is not None and c.revision == at.point.revision)
        paper = F4PaperTable(
            tokens=paper_tokens, fraction_of_total=_round(paper_tokens / conv.total_tokens, 6),
            revision=at.point.revision if at else None, recall_there=_round(at.recall) if at else None,
            reproduced=UNIFORM_READING in by, reproduced_by=by,
        )
    margin = None
    if conv.point is None:  # only without a final circuit: recall is 1 at the final revision
        status, message = Status.NOT_APPLICABLE, f"the final revision has no induction head (>= {spec.induction:g}x): recall is undefined"
    else:
        frac = conv.fraction_of_total
        lo, hi = conv.fraction_bounds
        margin = _round(max_fraction - frac, 6)
        grid = f"({fmt_pct(lo, '.3g')}, {fmt_pct(hi, '.3g')}]"
        if hi <= max_fraction:
            status, decided = Status.HOLDS, f"established: the upper end {fmt_pct(hi, '.3g')} <= {fmt_pct(max_fraction)}"
        elif lo >= max_fraction:
            status, decided = Status.FAILS, f"the data exclude the claim: the lower end {fmt_pct(lo, '.3g')} >= {fmt_pct(max_fraction)}"
        else:
            status = Status.CONSISTENT_NOT_ESTABLISHED
            decided = f"consistent, not established: the grid's bracket straddles {fmt_pct(max_fraction)}"
        message = (f"recall of the final circuit ({', '.join(conv.final_circuit)}) first >= {fmt_share(level)} at "
                   f"{conv.point.point.revision} ({fmt_tokens(conv.point.point.tokens)} tokens = "
                   f"{fmt_pct(frac, '.2f')} of {fmt_tokens(conv.total_tokens)}, on the grid in {grid}; "
                   f"found {', '.join(conv.point.found)}); needs <= {fmt_pct(max_fraction)}: {decided}")
        assert intermediate is not None  # the same final circuit: found at the final revision at the latest
        message += (f"; intermediate-{spec.label:g}x reading: {intermediate.revision} "
                    f"({fmt_pct(intermediate.fraction_of_total, '.2f')})")
    if paper is not None:
        message += (f"; paper table: {fmt_tokens(paper_tokens)} ({fmt_pct(paper.fraction_of_total, '.2f')}), "
                    + (f"recall there {paper.recall_there:.3g}" if paper.recall_there is not None
                       else "no screened revision there")
                    + (f" - reproduced by the {' and the '.join(paper.reproduced_by)} reading"
                       if paper.reproduced_by else " - reproduced by neither reading"))
    if computed is None:
        key = "no final circuit"
    else:
        key = f"{fmt_pct(computed.recall, '.0f')} at {fmt_pct(computed.fraction_of_total, '.2g')} of tokens"
        if paper is not None:
            key += (f"; paper {fmt_tokens(paper_tokens)}: "
                    + (f"{' + '.join(paper.reproduced_by)} reproduces" if paper.reproduced_by else "NOT reproduced"))
    reproduces = None
    if paper is not None:
        reproduces = ("both readings" if len(paper.reproduced_by) == 2 else
                      f"the {paper.reproduced_by[0]} reading" if paper.reproduced_by else "neither reading")
    details = F4Details(
        computed=computed, paper_table=paper, reproduces=reproduces,
        final_circuit=tuple(conv.final_circuit), total_tokens=conv.total_tokens, level=level,
        max_fraction=max_fraction, recall_series=series, intermediate=intermediate,
        intermediate_holds=None if conv_mid.point is None else conv_mid.fraction_of_total <= max_fraction,
    )
    figure = KeyFigure("fraction of training tokens at the recall point", computed.fraction_of_total if computed else None,
                       max_fraction, computed.fraction_interval if computed else None,
                       REVISION_GRID if computed else "no final circuit", ends=GRID)
    return Verdict("F4", status, message, details, key=key, margin=margin, figure=figure)


# ---- F5 ---------------------------------------------------------------------------------------


def _head(l: T.HeadLead, null: T.HeadNull) -> F5Head:
    return F5Head(l.head, _point(l.elevated), _point(l.crossed), _round(l.lead), l.holds,
                  level_null_share=_round(null.level_null_share), rises=null.rises,
                  rise_null_share=_round(null.rise_null_share), timing=l.timing,
                  before_null_share=_round(null.before_null_share))


@_trajectory_claim
def judge_f5(records: Sequence[MeasurementRecord], spec: Thresholds = SPEC) -> Verdict:
    """F5: every final induction head has elevated PR at or before it first crosses the induction bar.

    Beside SPEC's level rule, its null: the exact probability that as many heads drawn at random
    (distinct, from all heads), each tested against one final head's crossing revision, would ALL
    pass too (:func:`headwatch.claims.trajectory.f5_null`). F5 holds only where that probability
    is below ``f5_null_alpha``; a pass that random heads match as often is consistent, not
    established ("not informative"). Heads elevated strictly before their crossing and at the
    crossing revision itself are reported apart, with the null of "strictly before"; the rise rule
    and its null are reported, not asserted. No PR in the records: not established.
    """
    fraction, alpha = spec.pr_elevation_fraction, spec.f5_null_alpha
    recs = T.by_tokens(records)
    if not T.has_pr(recs):
        missing = [r.revision for r in recs if r.pr is None or r.d_head <= 1]
        return Verdict("F5", Status.NOT_ESTABLISHED,
                       f"not established: no per-head PR (or d_head) at {', '.join(missing)}: F5 needs PR at every revision",
                       F5Details(fraction=fraction, null_alpha=alpha), key="no PR")
    res = T.pr_lead(recs, fraction, spec.induction)
    sensitivity = {}
    for f in spec.f5_sensitivity_fractions:
        r = T.pr_lead(recs, f, spec.induction)
        sensitivity[f"{f:g}"] = F5Sensitivity(r.holds, tuple(r.failing), len(r.heads) - len(r.failing), len(r.heads))
    d_head = recs[-1].d_head
    bar = 1 + fraction * (d_head - 1)
    if not res.heads:
        return Verdict("F5", Status.NOT_APPLICABLE,
                       f"the final revision has no induction head (>= {spec.induction:g}x): F5 has no heads to judge",
                       F5Details(fraction=fraction, sensitivity=sensitivity, d_head=d_head, pr_bar=bar, null_alpha=alpha),
                       key="no heads")
    nulls = {n.head: n for n in T.head_nulls(recs, res.heads, fraction, spec.f5_rise_fraction)}
    null = T.f5_null(recs, res.heads, fraction, spec.f5_rise_fraction)
    assert null is not None  # every final induction head crosses, at the final revision at the latest
    before = tuple(l.head for l in res.heads if l.timing == "before")
    at = tuple(l.head for l in res.heads if l.timing == "at")
    parts = []
    for l in res.heads:
        assert l.crossed is not None
        parts.append(f"{l.head}: PR elevated {l.elevated.revision if l.elevated else 'never'}, crosses "
                     f"{spec.induction:g}x {l.crossed.revision}" + (f" ({l.lead:.3g}x earlier)" if l.lead and l.lead > 1 else "")
                     + f", {fmt_pct(nulls[l.head].level_null_share, '.0f')} of all heads elevated by then")
        if not l.holds:
            parts[-1] += f" [PR {l.pr_series[l.crossed.index]:.3g} < {bar:.3g} at the crossing]"
    rise_values = [n.rises for n in nulls.values() if n.rises is not None]
    rise_holds = all(rise_values) if rise_values else None
    decisive = max(null.at_or_before, null.layer_matched)  # issue 43: both nulls must reject (docs/statistics.md)
    informative = decisive < alpha
    if not res.holds:
        status = Status.FAILS
    elif not informative:
        status = Status.CONSISTENT_NOT_ESTABLISHED
    else:
        status = Status.HOLDS
    k = len(res.heads)
    message = (f"{k - len(res.failing)}/{k} final induction heads have PR - 1 >= {fraction:g} x (d_head - 1) "
               f"(PR >= {bar:.3g}, d_head {d_head}) at or before crossing ({len(before)} before: "
               f"{', '.join(before) or 'none'}; {len(at)} at the crossing revision: {', '.join(at) or 'none'}): "
               + "; ".join(parts)
               + f"; null: {k} distinct heads drawn at random from all {null.n_heads} would all pass with "
               f"p = {null.at_or_before:.3g} (exact), all strictly before with p = {null.before:.3g}; matched by "
               f"layer (each random head from its final head's layer) p = {null.layer_matched:.3g}; the larger, "
               f"{decisive:.3g}, decides"
               + (f" (>= {alpha:g}: F5 not informative)" if not informative else f" (< {alpha:g})"))
    if rise_holds is not None:  # some head crosses after the first revision: its rise null exists too
        message += (f"; rise rule (PR >= {1 + spec.f5_rise_fraction:g}x its first value by the crossing): "
                    f"{sum(rise_values)}/{len(rise_values)} heads, null p = {null.rise:.3g}")
    gaps = [l.crossed.index - l.elevated.index for l in res.heads if l.elevated]  # type: ignore[union-attr]
    margin = None if len(gaps) < k else float(min(gaps))  # a head never elevated: no margin
    details = F5Details(fraction=fraction, heads=tuple(_head(l, nulls[l.head]) for l in res.heads),
                        failing=tuple(res.failing), sensitivity=sensitivity, d_head=d_head, pr_bar=bar,
                        null_p=_sig(null.at_or_before), null_p_before=_sig(null.before), null_alpha=alpha,
                        informative=informative, before=before, at=at, n_heads_all=null.n_heads,
                        rise_fraction=spec.f5_rise_fraction, rise_holds=rise_holds,
                        rise_null_p=None if null.rise is None else _sig(null.rise),
                        null_p_layer=_sig(null.layer_matched), null_p_decisive=_sig(decisive))
    key = (f"{k - len(res.failing)} of {k} heads ({len(before)} before, {len(at)} at); null p {null.at_or_before:.2g}, "
           f"by layer {null.layer_matched:.2g}")
    figure = KeyFigure("fewest revisions by which PR elevation precedes the crossing", margin, 0.0,
                       method=f"no interval; {NESTED_DRAW} (the larger of the all-heads and layer-matched nulls)",
                       p_value=_sig(decisive))
    return Verdict("F5", status, message, details, key=key, margin=margin, figure=figure,
                   failing_heads=tuple(res.failing))


# ---- causal -----------------------------------------------------------------------------------


def _count_pair(c: T.Top1Count | None) -> tuple[int, int] | None:
    return None if c is None else (c.k, c.n)


def _no_ablation(records: Sequence[MeasurementRecord], spec: Thresholds) -> Verdict:
    """The causal verdict where no revision carries the circuit ablation: not applicable where the
    records were measured with ablation off at every revision (the panel's ``ablation = "none"``) or
    the final circuit is empty (nothing to ablate); otherwise not established (the evidence is missing)."""
    recs = T.by_tokens(records)
    if all(r.settings is not None and not r.settings.ablation for r in recs):
        return Verdict("causal", Status.NOT_APPLICABLE, "the records were measured without ablations "
                       "(settings.ablation false at every revision: the panel's ablation = \"none\"): causal check not run",
                       CausalDetails(), key="not run")
    final = recs[-1]
    if not induction_circuit(final.all_head_selectivity, spec.induction):
        return Verdict("causal", Status.NOT_APPLICABLE,
                       f"no induction head at {final.revision}: nothing to ablate, causal check not applicable",
                       CausalDetails(), key="not run")
    return Verdict("causal", Status.NOT_ESTABLISHED,
                   "not established: no revision carries an induction-circuit ablation (missing: the ablation; "
                   "measure the final revision with ablation on)", CausalDetails(missing=("induction-circuit ablation",)),
                   key="no ablation")


def judge_causal(records: Sequence[MeasurementRecord], expect: Expectations = _NONE, spec: Thresholds = SPEC) -> Verdict:
    """Causal check on the latest revision with ablations: circuit top-1 <= 25% of baseline and
    below the matched-random control, each confirmed by a one-sided exact test on the top-1 counts
    (p < alpha): the bar by :func:`headwatch.stats.ratio_below` (against "circuit >= 25% of
    baseline"), the control by Fisher's test (against "circuit >= random").

    Fails where a point rule fails (the cut, or circuit >= random); holds where both point rules
    and both exact tests pass; consistent, not established where the point rules pass and an exact
    test does not; not established where evidence is missing (no matched-random ablation, no top-1
    counts, no ablation at all: the message names it); not applicable where the panel says the
    model has no matched-random control (``no_matched_random``), the records were measured without
    ablations, or the circuit is empty. The message says which control decided, the revision the
    ablations were measured on where the record names another (``main``), and the paper's
    figures beside the record's where the panel gives them (``paper_top1``: "paper reports").
    """
    max_share, alpha = spec.ablation_max_share, spec.causal_alpha
    rec = T.last_with_ablations(records)
    if rec is None:
        return _no_ablation(records, spec)
    on = T.ablations_measured_on(rec)
    at = rec.revision + (f" (ablations measured on {on})" if on != rec.revision else "")
    v = T.ablation_verdict(rec, max_share, alpha)
    if v is None:
        return Verdict("causal", Status.NOT_ESTABLISHED,
                       f"not established: at {at} the circuit ablation has no baseline (missing: task metrics)",
                       CausalDetails(revision=rec.revision, measured_on=on, missing=("baseline task metrics",)),
                       key="no baseline")
    if not v.circuit_heads:  # ablating nothing tells nothing about a circuit
        return Verdict("causal", Status.NOT_APPLICABLE,
                       f"the induction circuit ablated at {at} is empty: causal check not applicable",
                       CausalDetails(revision=rec.revision, measured_on=on), key="not run")
    note = rec.provenance.get("ablation_file", {}).get("relative_to", {}).get("matched_random")
    final_circuit = T.layer_order(induction_circuit(rec.all_head_selectivity, spec.induction))
    share = v.share_of_baseline
    p_rnd, p_base = v.p_vs_random, v.p_vs_bar
    has_random = v.random_top1 is not None
    reconstructed = any(c is not None and c.reconstructed for c in (v.baseline_count, v.circuit_count, v.random_count))
    message = (f"at {at}: top-1 {fmt_pct(v.baseline_top1, '.2f')} baseline, {fmt_pct(v.circuit_top1, '.2f')} with "
               f"the circuit ({', '.join(v.circuit_heads)}) ablated"
               + (f" = {fmt_pct(share, '.1f')} of baseline" if share is not None else "")
               + f" (needs <= {fmt_pct(max_share)}), "
               + (f"{fmt_pct(v.random_top1, '.2f')} with {len(v.random_heads)} matched-random heads ablated"  # type: ignore[arg-type]
                  if has_random else "no matched-random control"))
    if v.circuit_count is not None:
        counts = ", ".join(f"{name} {c.k}/{c.n}" for name, c in (("baseline", v.baseline_count), ("circuit", v.circuit_count),
                                                                   ("random", v.random_count)) if c is not None)
        message += (f"; top-1 counts {counts}" + (" (reconstructed from the published rates x N)" if reconstructed else "")
                    + f"; {v.method_random}: circuit < random p = {'n/a' if p_rnd is None else format(p_rnd, '.3g')}; "
                    f"{v.method_bar}: circuit < {100 * max_share:g}% of baseline p = "
                    f"{'n/a' if p_base is None else format(p_base, '.3g')} (each needs < {alpha:g})")
    else:
        message += "; top-1 counts unknown (the record states no number of examples): no exact test"
    if note:
        message += f"; NOTE matched-random is matched to {note}"
    missing = []
    if not has_random:
        missing.append("matched-random ablation")
    if p_base is None or (has_random and p_rnd is None):
        missing.append("top-1 counts")
    if not v.cuts_enough:
        status, decided = Status.FAILS, f"the cut: circuit top-1 is {fmt_pct(share, '.1f')} of baseline (> {fmt_pct(max_share)})"
    elif has_random and not v.below_random:
        status, decided = Status.FAILS, "the matched-random control: circuit top-1 is not below it"
    elif not has_random and expect.no_matched_random:
        status = Status.NOT_APPLICABLE
        decided = f"the panel: this model has no matched-random control ({expect.no_matched_random})"
        missing = [m for m in missing if m != "matched-random ablation"]
    elif missing:
        status, decided = Status.NOT_ESTABLISHED, "missing evidence: " + " and ".join(missing)
    elif v.holds:
        status = Status.HOLDS
        decided = (f"both exact tests: the bar ({100 * max_share:g}% of baseline) p = {p_base:.3g}, matched random "
                   f"p = {p_rnd:.3g} (< {alpha:g})")
    else:
        weak = [(name, p) for name, p, ok in ((f"the bar (circuit < {100 * max_share:g}% of baseline)", p_base,
                                               v.meets_bar),
                                              ("the control (circuit < matched random)", p_rnd, v.beats_random))
                if not ok]
        status = Status.CONSISTENT_NOT_ESTABLISHED
        decided = ("the exact test of " + " and of ".join(f"{name} (p = {p:.3g})" for name, p in weak)
                   + f", not below {alpha:g}; the point rules pass")
    message += f"; {status.words}: " + (decided if status is Status.NOT_ESTABLISHED else f"decided by {decided}")
    paper = expect.paper_top1
    if paper is not None:
        message += (f"; paper reports (not in these records, not used): top-1 {fmt_pct(paper.baseline, '.2f')} baseline, "
                    f"{fmt_pct(paper.circuit, '.2f')} circuit, {fmt_pct(paper.matched_random, '.2f')} matched random"
                    + (f" (the records' matched random, used: {fmt_pct(v.random_top1, '.2f')})" if has_random else ""))  # type: ignore[arg-type]
    intervals = {}
    if rec.intervals is not None:
        named = {"baseline": rec.intervals.task_top1, "circuit": rec.intervals.ablation_top1.get("induction_circuit"),
                 "random": rec.intervals.ablation_top1.get("matched_random")}
        intervals = {k: (_round(b[0], 5), _round(b[1], 5)) for k, b in named.items() if b is not None}
    details = CausalDetails(
        revision=rec.revision, baseline_top1=v.baseline_top1, circuit_top1=v.circuit_top1,
        random_top1=v.random_top1, share_of_baseline=_round(share), max_share=max_share,
        cuts_enough=v.cuts_enough, beats_random=v.beats_random, circuit_heads=tuple(v.circuit_heads),
        screen_circuit=tuple(final_circuit), circuit_matches_screen=sorted(v.circuit_heads) == sorted(final_circuit),
        n_random_heads=len(v.random_heads), random_matched_to=note or "the induction circuit (docs/SPEC.md §4)",
        baseline_count=_count_pair(v.baseline_count), circuit_count=_count_pair(v.circuit_count),
        random_count=_count_pair(v.random_count), counts_reconstructed=reconstructed,
        p_vs_random=_sig(p_rnd), p_vs_bar=_sig(p_base), method_random=v.method_random, method_bar=v.method_bar, alpha=alpha, top1_intervals=intervals,
        measured_on=on, decided_by=decided, missing=tuple(missing),
        paper_top1=None if paper is None else to_data(paper),
    )
    key = f"{fmt_pct(share, '.1f')} of base" + (f", p={p_base:.2g}" if p_base is not None and share is not None else "")
    if v.random_top1 is not None and v.baseline_top1:
        key += f" (rand {fmt_pct(v.random_top1 / v.baseline_top1, '.1f')}" + (f", p={p_rnd:.2g})" if p_rnd is not None else ")")
        if note:
            key += " \u2020"  # the control is matched to another head set: the report's footnote says so
    elif not has_random:
        key += " (no random control)"
    figure = KeyFigure("circuit-ablated top-1 as a share of baseline", _round(share), max_share,
                       method=v.method_bar + (" (counts reconstructed from rates x N)" if reconstructed else ""),
                       p_value=_sig(p_base))
    return Verdict("causal", status, message, details, key=key,
                   margin=None if share is None else _round(max_share - share), figure=figure)


# ---- formation (model organisms) ---------------------------------------------------------------


def judge_formation(records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
                    total_tokens: float | None = None, spec: Thresholds = SPEC) -> Verdict:
    """Whether a model formed its induction circuit as its panel declares (``[models.expect.formation]``).

    Not applicable when nothing is declared. Fails, with the measured numbers (heads at the final
    revision with selectivities and intervals, t_induction on the grid, final top-1 with its exact
    interval, and the training numeric path when the records carry ``provenance["training"]``),
    when any declared condition is not met.
    """
    declared = expect.formation
    recs = T.by_tokens(records)
    final, first = recs[-1], recs[0]
    heads = T.layer_order(induction_circuit(final.all_head_selectivity, spec.induction))
    sel = {h: _round(final.all_head_selectivity[h]["induction"], 2) for h in heads}
    sel_iv = {h: (_round(b[0], 2), _round(b[1], 2)) for h in heads if (b := final.selectivity_interval(h, "induction"))}
    best = max(final.all_head_selectivity, key=lambda h: final.all_head_selectivity[h]["induction"])
    best_sel = _round(final.all_head_selectivity[best]["induction"], 2)
    n_first = len(induction_circuit(first.all_head_selectivity, spec.induction))
    t_ind = T.t_induction(recs, spec.induction_min_heads, spec.induction)
    top1 = final.task.top1 if final.task else None
    top1_iv = final.intervals.task_top1 if final.intervals else None
    if top1_iv is None and final.task is not None and final.task.n and final.task.top1_count is not None:
        top1_iv = clopper_pearson(final.task.top1_count, final.task.n, spec.interval_level)
    training = final.provenance.get(TRAINING_PROVENANCE)
    total = float(total_tokens if total_tokens is not None else final.tokens_seen)  # type: ignore[arg-type]
    bos_final = T.layer_order(bos_heads(final.all_head_selectivity, spec.bos))
    with_bos = [i for i, r in enumerate(recs) if bos_heads(r.all_head_selectivity, spec.bos)]
    first_bos = recs[with_bos[0]] if with_bos else None
    bos_gaps = [r.revision for r in recs[with_bos[0]:] if not bos_heads(r.all_head_selectivity, spec.bos)] if with_bos else []
    unmet: list[str] = []
    if declared is not None:
        if declared.min_bos_heads_final is not None and len(bos_final) < declared.min_bos_heads_final:
            unmet.append(f"{len(bos_final)} BOS heads >= {spec.bos:g}x at {final.revision} "
                         f"(needs >= {declared.min_bos_heads_final})")
        if declared.bos_after_induction and (
                first_bos is None or t_ind.point is None or with_bos[0] <= t_ind.point.index):
            unmet.append(f"first BOS head at {first_bos.revision if first_bos else 'no revision'}, "
                         f"t_induction {t_ind.revision or 'never'} (needs a BOS head, first strictly after t_induction)")
        if declared.bos_persists and (first_bos is None or bos_gaps):
            unmet.append("no BOS head at " + (", ".join(bos_gaps) if first_bos else "any revision")
                         + " (needs one at every revision from the first to the final)")
        if declared.min_induction_heads_final is not None and len(heads) < declared.min_induction_heads_final:
            unmet.append(f"{len(heads)} heads >= {spec.induction:g}x at {final.revision} "
                         f"(needs >= {declared.min_induction_heads_final})")
        if declared.none_at_first and n_first:
            unmet.append(f"{n_first} induction head(s) already at the first revision {first.revision}")
        if declared.min_top1_final is not None and (top1 is None or top1 < declared.min_top1_final):
            unmet.append(f"top-1 {'unknown' if top1 is None else format(top1, '.3g')} at {final.revision} "
                         f"(needs >= {declared.min_top1_final:g})")
        window = declared.formed_within
        if window is not None:
            inside = False
            if t_ind.point is not None:
                if window.revisions is not None:
                    order = {r.revision: i for i, r in enumerate(recs)}
                    lo, hi = (order.get(window.revisions[0]), order.get(window.revisions[1]))
                    inside = lo is not None and hi is not None and lo <= t_ind.point.index <= hi
                else:
                    assert window.fraction is not None
                    inside = window.fraction[0] <= t_ind.point.tokens / total <= window.fraction[1]
            if not inside:
                unmet.append(f"t_induction {t_ind.revision or 'never'} (needs {window.describe()})")
    heads_txt = ", ".join(f"{h} {sel[h]:.3g}x {fmt_interval(sel_iv.get(h))}".rstrip() for h in heads) or (
        f"none (best {best} {best_sel:.3g}x {fmt_interval(final.selectivity_interval(best, 'induction'))})".replace(" )", ")"))
    n_iv = final.intervals.induction_heads if final.intervals else None
    t_txt = ("never" if t_ind.point is None else
             f"{t_ind.revision} (in ({fmt_tokens(t_ind.bracket[0])}, {fmt_tokens(t_ind.bracket[1])}] tokens)")
    bos_txt = ""
    if declared is not None and (declared.min_bos_heads_final is not None or declared.bos_after_induction
                                 or declared.bos_persists):
        sel_bos = ", ".join(f"{h} {final.all_head_selectivity[h]['first-token']:.3g}x" for h in bos_final) or "none"
        bos_txt = (f"; {len(bos_final)} BOS heads >= {spec.bos:g}x at {final.revision}: {sel_bos}; first BOS head at "
                   + (f"{first_bos.revision} ({', '.join(T.layer_order(bos_heads(first_bos.all_head_selectivity, spec.bos)))})"
                      if first_bos else "no revision"))
    measured = (f"{len(heads)} heads >= {spec.induction:g}x at {final.revision}"
                + (f" (95% interval {fmt_interval(n_iv, 'g')})" if n_iv else "")
                + f": {heads_txt}; {n_first} at {first.revision}; t_induction {t_txt}; top-1 "
                + ("unknown" if top1 is None else f"{top1:.3g} {fmt_interval(top1_iv)}".rstrip())
                + bos_txt
                + f"; numeric path: {to_data(training) if training else 'not recorded (provenance.training)'}")
    if declared is None:
        status, message = Status.NOT_APPLICABLE, f"no formation declared in the panel; measured: {measured}"
    elif unmet:
        status, message = Status.FAILS, f"did not form as declared: {'; '.join(unmet)}; measured: {measured}"
    else:
        status, message = Status.HOLDS, f"formed as declared: {measured}"
    details = FormationDetails(
        declared=to_data(declared) if declared is not None else {}, final_revision=final.revision,
        heads_final=sel, heads_final_intervals=sel_iv, n_heads_final=len(heads),
        n_heads_final_interval=n_iv, best_head_final=best, best_selectivity_final=best_sel,
        n_heads_first=n_first, t_induction=_point(t_ind.point), t_induction_before=_point(t_ind.before),
        final_top1=_round(top1, 5), final_top1_interval=None if top1_iv is None else (_round(top1_iv[0], 5), _round(top1_iv[1], 5)),
        training=training, unmet=tuple(unmet),
    )
    want = declared.min_induction_heads_final if declared is not None else None
    figure = KeyFigure(f"heads >= {spec.induction:g}x at the final revision", float(len(heads)),
                       None if want is None else float(want), n_iv,
                       final.intervals.methods.get("induction_heads", "") if final.intervals else final.no_interval_reason())
    key = f"{len(heads)} heads, t_ind {t_ind.revision or 'never'}" + ("" if top1 is None else f", top-1 {top1:.2g}")
    return Verdict(FORMATION, status, message, details, key=key,
                   margin=None if want is None else float(len(heads) - want), figure=figure)


def not_judged(verdict: Verdict, formation: Verdict) -> Verdict:
    """``verdict`` withheld because the subject did not form: status ``not_judged``, the formation
    numbers first, the claim's own measurement kept after them (nothing measured is lost)."""
    return dataclasses.replace(
        verdict, status=Status.NOT_JUDGED,
        message=f"not judged: organism did not form: {formation.message} | measured anyway: {verdict.message}",
        key=f"not judged ({verdict.key})" if verdict.key else "not judged")


# ---- everything ------------------------------------------------------------------------------


def judge_model(records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
                total_tokens: float | None = None, spec: Thresholds = SPEC) -> dict[str, Verdict]:
    """All verdicts for one model, in :data:`CLAIMS` order, each carrying the panel's declared
    deviation for its claim (or None). Where the panel declares formation, its verdict comes first
    (key ``"formation"``), and if the model did not form every claim is ``not_judged``."""
    recs = T.by_tokens(records)
    out = {
        "F1": judge_f1(recs, spec),
        "F2": judge_f2(recs, expect, spec),
        "F3": judge_f3(recs, expect, spec),
        "F4": judge_f4(recs, expect, total_tokens, spec),
        "F5": judge_f5(recs, spec),
        "causal": judge_causal(recs, expect, spec),
    }
    out = {claim: v.declare(expect.declared(claim)) for claim, v in out.items()}
    if expect.formation is None:
        return out
    formation = judge_formation(recs, expect, total_tokens, spec)
    if formation.status is Status.FAILS:
        out = {claim: not_judged(v, formation) for claim, v in out.items()}
    return {FORMATION: formation, **out}


def surprises(verdicts: dict[str, Verdict]) -> int:
    """Verdicts that are news against the panel: a failure it did not declare, a declared deviation
    that did not occur, or one that occurred differently from its declaration (key range, revisions
    or heads). Any makes ``headwatch judge`` and ``report`` exit 1."""
    def news(v: Verdict) -> bool:
        outcome = declared_outcome(v)
        if outcome is None:  # nothing declared (a failing verdict with a declaration has an outcome)
            return v.status is Status.FAILS
        return outcome is not DeclaredOutcome.MATCHED

    return sum(1 for v in verdicts.values() if news(v))


def status_word(verdict: Verdict) -> str:
    """A verdict's status in words for a terminal, with how a declared deviation turned out."""
    outcome = declared_outcome(verdict)
    return verdict.status.words + (f" ({outcome.suffix})" if outcome is not None else "")
