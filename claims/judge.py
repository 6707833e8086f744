"""The one judge of claims F1-F5 and the causal check (docs/SPEC.md §6), shared by tests and CLI.

Each ``judge_*`` function takes a model's records (and, where a claim needs them, the panel's
:class:`~headwatch.spec.Expectations`) and returns a :class:`~headwatch.claims.verdict.Verdict`:
a status, a one-line message stating the measured quantities, the headline figure and margin, and
the claim's typed details. :func:`judge_model` runs them all. Every bar comes from
:data:`headwatch.spec.SPEC` unless the panel's expectations override it for the model.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from headwatch.probes.record import MeasurementRecord, parse_head_key
from headwatch.spec import CLAIMS, SPEC, Expectations

from . import trajectory as T
from .verdict import (
    CausalDetails, F1Details, F1Violation, F2Details, F3Details, F3Sensitivity, F4Computed, F4Details,
    F4PaperTable, F5Details, F5Head, F5Sensitivity, Point, RecallAt, Status, Verdict,
)

__all__ = ["CLAIMS", "judge_model", "judge_f1", "judge_f1_revision", "judge_f2", "judge_f3", "judge_f4",
           "judge_f5", "judge_causal", "fmt_tokens", "status_word"]

_NONE = Expectations()


# ---- formatting helpers ----------------------------------------------------------------------


def fmt_tokens(tokens: float | None) -> str:
    """23e9 -> '23B', 6.29e9 -> '6.29B', 2.1e6 -> '2.1M'."""
    if tokens is None:
        return "never"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(tokens) >= scale:
            return f"{tokens / scale:.3g}{unit}"
    return f"{tokens:.3g}"


def _point(p: T.RevisionPoint | None) -> Point | None:
    return None if p is None else Point(p.revision, p.tokens)


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def _pct(x: float | None, nd: int = 1) -> str:
    return "?" if x is None else f"{100 * x:.{nd}f}%"


# ---- F1 ---------------------------------------------------------------------------------------


def _early_peak(records: Sequence[MeasurementRecord], layers: Sequence[int]) -> tuple[str | None, float | None]:
    """The head in ``layers`` with the highest first-token selectivity over ``records``."""
    wanted = set(layers)
    best: tuple[str | None, float | None] = (None, None)
    for r in records:
        for h, sel in r.all_head_selectivity.items():
            if parse_head_key(h)[0] in wanted and (best[1] is None or sel["first-token"] > best[1]):
                best = (h, sel["first-token"])
    return best


def _f1_key(violations: Sequence[F1Violation], record: MeasurementRecord, layers: Sequence[int]) -> str:
    early = sum(1 for h in record.all_head_selectivity if parse_head_key(h)[0] in set(layers))
    worst = max((len(v.heads) for v in violations), default=0)
    return f"{worst} of {early} heads" + (f" ({len(violations)} rev.)" if violations else "")


def judge_f1_revision(record: MeasurementRecord, layers: Sequence[int] = SPEC.f1_layers,
                      threshold: float = SPEC.bos) -> Verdict:
    """F1 at one revision: no head in ``layers`` with first-token selectivity >= threshold."""
    heads = T.early_layer_bos_heads(record, layers, threshold)
    sel = {h: _round(record.all_head_selectivity[h]["first-token"], 2) for h in heads}
    where = f"{record.revision} ({fmt_tokens(record.tokens_seen)} tokens)"
    layer_txt = "/".join(str(l) for l in layers)
    top, peak = _early_peak([record], layers)
    if heads:
        message = (f"{len(heads)} BOS head(s) in layers {layer_txt} at {where}: "
                   + ", ".join(f"{h} (first-token {v}x)" for h, v in sel.items()))
    else:
        shown = peak if peak is not None else float("nan")
        message = (f"no BOS head in layers {layer_txt} at {where}; highest first-token selectivity "
                   f"there: {top} {shown:.3g}x (< {threshold:g})")
    violations = (F1Violation(record.revision, record.tokens_seen, tuple(heads)),) if heads else ()
    details = F1Details(layers=tuple(layers), threshold=threshold, peak_selectivity=_round(peak), peak_head=top,
                        revision=record.revision, tokens=record.tokens_seen, heads=tuple(heads),
                        first_token_selectivity=sel)
    return Verdict("F1", Status.of(not heads), message, details, key=_f1_key(violations, record, layers),
                   margin=None if peak is None else _round(threshold - peak))


def judge_f1(records: Sequence[MeasurementRecord], layers: Sequence[int] = SPEC.f1_layers,
             threshold: float = SPEC.bos) -> Verdict:
    """F1 over every revision."""
    recs = T.by_tokens(records)
    per_rev = [judge_f1_revision(r, layers, threshold) for r in recs]
    bad = [F1Violation(v.details.revision, v.details.tokens, v.details.heads) for v in per_rev if not v.holds]
    if bad:
        message = "BOS heads in layers 0/1 at " + "; ".join(f"{v.revision}: {', '.join(v.heads)}" for v in bad)
    else:
        message = f"no BOS head in layers {'/'.join(map(str, layers))} at any of {len(per_rev)} revisions"
    top, peak = _early_peak(recs, layers)
    details = F1Details(layers=tuple(layers), threshold=threshold, revisions_checked=len(per_rev),
                        violations=tuple(bad), peak_selectivity=_round(peak), peak_head=top)
    return Verdict("F1", Status.of(not bad), message, details, key=_f1_key(bad, recs[-1], layers),
                   margin=None if peak is None else _round(threshold - peak))


# ---- F2 ---------------------------------------------------------------------------------------


def judge_f2(records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
             step_share: float = SPEC.step_share) -> Verdict:
    """F2: the BOS-fraction shape matches the panel's expected shape (not applicable if none declared)."""
    recs = T.by_tokens(records)
    shape = T.bos_shape(recs, step_share)
    series = T.bos_fraction_series(recs)
    pts = T.tokens_per_revision(recs)
    rise = None
    if shape.rise_at is not None:
        rise = {"from": _point(pts[shape.rise_at - 1]), "to": _point(pts[shape.rise_at])}
    holds = None if expect.bos_shape is None else shape.shape == expect.bos_shape
    rise_txt = (f"largest adjacent rise {100 * shape.largest_rise:.1f} of {100 * shape.total_rise:.1f} points"
                + (f" ({pts[shape.rise_at - 1].revision} -> {pts[shape.rise_at].revision}, "
                   f"{100 * series[shape.rise_at - 1]:.1f}% -> {100 * series[shape.rise_at]:.1f}%)"
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
    return Verdict("F2", Status.of(holds), f"BOS fraction is a {shape.shape}: {rise_txt}; {expected_txt}",
                   details, key=key, margin=margin)


# ---- F3 ---------------------------------------------------------------------------------------


def judge_f3(records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
             min_heads: int = SPEC.induction_min_heads) -> Verdict:
    """F3: for DCLM models, t_bos50 / t_induction >= the bar (10). Not applicable otherwise."""
    min_ratio = expect.min_ratio
    sep = T.induction_bos_separation(records, min_heads=min_heads)
    sensitivity = {}
    for k in SPEC.f3_sensitivity_heads:
        s = T.induction_bos_separation(records, min_heads=k)
        sensitivity[str(k)] = F3Sensitivity(_point(s.induction.point), _round(s.ratio))
    ratio_txt = (f"t_bos50 / t_induction = {fmt_tokens(sep.bos.tokens)} / {fmt_tokens(sep.induction.tokens)}"
                 + (f" = {sep.ratio:.3g}" if sep.ratio is not None else " (undefined)"))
    where = (f"t_induction at {sep.induction.revision or 'no revision'} (>= {min_heads} heads at induction "
             f">= {SPEC.induction:g}), t_bos50 at {sep.bos.revision or 'no revision'}")
    if not expect.dclm:
        holds, verdict = None, "not a DCLM model: F3 does not apply"
    elif sep.ratio is None:
        holds, verdict = False, "a milestone is never reached, so the separation cannot be shown"
    else:
        holds, verdict = sep.ratio >= min_ratio, f"needs >= {min_ratio:g}"
    details = F3Details(applies=expect.dclm, ratio=_round(sep.ratio), min_ratio=min_ratio,
                        t_induction=_point(sep.induction.point), t_bos50=_point(sep.bos.point),
                        milestone_heads=min_heads, sensitivity_milestone_heads=sensitivity)
    ratio = "never" if details.ratio is None else f"{details.ratio:.3g}x"
    return Verdict("F3", Status.of(holds), f"{ratio_txt}; {where}; {verdict}", details,
                   key=ratio if expect.dclm else f"{ratio} (not DCLM)",
                   margin=None if sep.ratio is None else _round(sep.ratio - min_ratio))


# ---- F4 ---------------------------------------------------------------------------------------


def judge_f4(records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
             total_tokens: float | None = None, level: float = SPEC.recall_level) -> Verdict:
    """F4: the first revision with recall of the final circuit >= 2/3 lies within 2.5% of training.

    Reports the computed revision and, where the panel declares ``paper_f4_tokens``, the paper
    table's number with the recall actually measured at that revision.
    """
    max_fraction = expect.max_fraction
    conv = T.first_recall_at_least(records, level, total_tokens=total_tokens)
    series = {p.point.revision: RecallAt(p.point.tokens, _round(p.recall), tuple(p.found)) for p in conv.series}
    computed = None
    if conv.point is not None:
        computed = F4Computed(conv.point.point.revision, conv.point.point.tokens, _round(conv.fraction_of_total, 6),
                              _round(conv.point.recall), tuple(conv.point.found))
    paper_tokens = expect.paper_f4_tokens
    paper = None
    if paper_tokens is not None:
        at = next((p for p in conv.series if math.isclose(p.point.tokens, paper_tokens, rel_tol=0.02)), None)
        paper = F4PaperTable(
            tokens=paper_tokens, fraction_of_total=_round(paper_tokens / conv.total_tokens, 6),
            revision=at.point.revision if at else None, recall_there=_round(at.recall) if at else None,
            reproduced=bool(at and at.recall >= level - 1e-9
                            and computed is not None and at.point.revision == computed.revision),
        )
    margin = None
    if not conv.final_circuit:
        holds, message = None, "the final revision has no induction head (>= 50x): recall is undefined"
    elif conv.point is None:
        holds, message = False, f"recall never reaches {level:.3g} before the final revision"
    else:
        frac = conv.fraction_of_total
        holds = frac <= max_fraction
        margin = _round(max_fraction - frac, 6)
        message = (f"recall of the final circuit ({', '.join(conv.final_circuit)}) first >= {level:.3g} at "
                   f"{conv.point.point.revision} ({fmt_tokens(conv.point.point.tokens)} tokens = "
                   f"{100 * frac:.2f}% of {fmt_tokens(conv.total_tokens)}; found {', '.join(conv.point.found)}); "
                   f"needs <= {100 * max_fraction:g}%")
    if paper is not None:
        message += (f"; paper table: {fmt_tokens(paper_tokens)} ({100 * paper.fraction_of_total:.2f}%), "
                    + (f"recall there {paper.recall_there:.3g}" if paper.recall_there is not None
                       else "no screened revision there")
                    + (" - reproduced" if paper.reproduced else " - not reproduced"))
    if computed is None:
        key = "no final circuit" if not conv.final_circuit else "never"
    else:
        key = f"{100 * computed.recall:.0f}% at {100 * computed.fraction_of_total:.2g}% of tokens"
        if paper is not None:
            key += (f"; paper table {100 * paper.fraction_of_total:.2g}% "
                    + ("reproduced" if paper.reproduced else "NOT reproduced"))
    details = F4Details(
        computed=computed, paper_table=paper,
        reproduces=None if paper is None else ("paper table" if paper.reproduced else "computed only"),
        final_circuit=tuple(conv.final_circuit), total_tokens=conv.total_tokens, level=level,
        max_fraction=max_fraction, recall_series=series,
    )
    return Verdict("F4", Status.of(holds), message, details, key=key, margin=margin)


# ---- F5 ---------------------------------------------------------------------------------------


def _head(l: T.HeadLead) -> F5Head:
    return F5Head(l.head, _point(l.elevated), _point(l.crossed), _round(l.lead), l.holds)


def judge_f5(records: Sequence[MeasurementRecord], fraction: float = SPEC.pr_elevation_fraction) -> Verdict:
    """F5: every final induction head has elevated PR at or before it first crosses 50x."""
    recs = T.by_tokens(records)
    if not T.has_pr(recs):
        missing = [r.revision for r in recs if r.pr is None or r.d_head <= 1]
        return Verdict("F5", Status.NOT_APPLICABLE,
                       f"no per-head PR (or d_head) at revisions {missing}: F5 cannot be judged",
                       F5Details(fraction=fraction), key="no PR")
    res = T.pr_lead(recs, fraction)
    sensitivity = {}
    for f in SPEC.f5_sensitivity_fractions:
        r = T.pr_lead(recs, f)
        sensitivity[f"{f:g}"] = F5Sensitivity(r.holds, tuple(r.failing), len(r.heads) - len(r.failing), len(r.heads))
    d_head = recs[-1].d_head
    bar = 1 + fraction * (d_head - 1)
    margin = None
    if not res.heads:
        holds, message = None, "the final revision has no induction head (>= 50x): F5 has no heads to judge"
    else:
        holds = res.holds
        parts = []
        for l in res.heads:
            el = f"{l.elevated.revision}" if l.elevated else "never"
            parts.append(f"{l.head}: PR elevated {el}, crosses 50x {l.crossed.revision if l.crossed else 'never'}"
                         + (f" ({l.lead:.3g}x earlier)" if l.lead and l.lead > 1 else ""))
            if not l.holds:
                i = l.crossed.index if l.crossed else -1
                parts[-1] += f" [PR {l.pr_series[i]:.3g} < {bar:.3g} at the crossing]"
        message = (f"{len(res.heads) - len(res.failing)}/{len(res.heads)} final induction heads have PR - 1 >= "
                   f"{fraction:g} x (d_head - 1) (PR >= {bar:.3g}, d_head {d_head}) at or before crossing: "
                   + "; ".join(parts))
        gaps = [l.crossed.index - l.elevated.index for l in res.heads if l.crossed and l.elevated]
        never = any(l.crossed and not l.elevated for l in res.heads)
        margin = None if never or not gaps else float(min(gaps))
    details = F5Details(fraction=fraction, heads=tuple(_head(l) for l in res.heads), failing=tuple(res.failing),
                        sensitivity=sensitivity, d_head=d_head, pr_bar=bar)
    key = f"{len(res.heads) - len(res.failing)} of {len(res.heads)} heads" if res.heads else "no heads"
    return Verdict("F5", Status.of(holds), message, details, key=key, margin=margin)


# ---- causal -----------------------------------------------------------------------------------


def judge_causal(records: Sequence[MeasurementRecord], max_share: float = SPEC.ablation_max_share) -> Verdict:
    """Causal check on the latest revision with ablations: circuit top-1 <= 25% of baseline and
    below the matched-random control."""
    rec = T.last_with_ablations(records)
    v = T.ablation_verdict(rec, max_share) if rec is not None else None
    if v is None:
        return Verdict("causal", Status.NOT_APPLICABLE,
                       "no revision carries an induction-circuit ablation: causal check not run",
                       CausalDetails(), key="not run")
    if not v.circuit_heads:  # ablating nothing tells nothing about a circuit
        return Verdict("causal", Status.NOT_APPLICABLE,
                       f"the induction circuit ablated at {rec.revision} is empty: causal check not applicable",
                       CausalDetails(revision=rec.revision), key="not run")
    note = rec.provenance.get("ablation_file", {}).get("relative_to", {}).get("matched_random")
    final_circuit = T.layer_order(T.induction_circuit(rec.all_head_selectivity))
    share = v.share_of_baseline
    message = (f"at {rec.revision}: top-1 {100 * v.baseline_top1:.2f}% baseline, {100 * v.circuit_top1:.2f}% with "
               f"the circuit ({', '.join(v.circuit_heads)}) ablated"
               + (f" = {100 * share:.1f}% of baseline" if share is not None else "")
               + f" (needs <= {100 * max_share:g}%), "
               + (f"{100 * v.random_top1:.2f}% with {len(v.random_heads)} matched-random heads ablated"
                  if v.random_top1 is not None else "no matched-random control"))
    if note:
        message += f"; NOTE matched-random is matched to {note}"
    details = CausalDetails(
        revision=rec.revision, baseline_top1=v.baseline_top1, circuit_top1=v.circuit_top1,
        random_top1=v.random_top1, share_of_baseline=_round(share), max_share=max_share,
        cuts_enough=v.cuts_enough, beats_random=v.beats_random, circuit_heads=tuple(v.circuit_heads),
        screen_circuit=tuple(final_circuit), circuit_matches_screen=sorted(v.circuit_heads) == sorted(final_circuit),
        n_random_heads=len(v.random_heads), random_matched_to=note or "the induction circuit (docs/SPEC.md §4)",
    )
    key = f"{_pct(share)} of base"
    if v.random_top1 is not None and v.baseline_top1:
        key += f" (rand {_pct(v.random_top1 / v.baseline_top1)})"
        if note:
            key += " \u2020"  # the control is matched to another head set: the report's footnote says so
    return Verdict("causal", Status.of(v.holds), message, details, key=key,
                   margin=None if share is None else _round(max_share - share))


# ---- everything ------------------------------------------------------------------------------


def judge_model(records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
                total_tokens: float | None = None) -> dict[str, Verdict]:
    """All verdicts for one model, in :data:`CLAIMS` order, each carrying the panel's declared
    deviation for its claim (or None)."""
    recs = T.by_tokens(records)
    out = {
        "F1": judge_f1(recs),
        "F2": judge_f2(recs, expect),
        "F3": judge_f3(recs, expect),
        "F4": judge_f4(recs, expect, total_tokens),
        "F5": judge_f5(recs),
        "causal": judge_causal(recs),
    }
    return {claim: v.declare(expect.declared(claim)) for claim, v in out.items()}


def surprises(verdicts: dict[str, Verdict]) -> int:
    """Verdicts that contradict the panel: a claim fails that it did not declare, or a declared known
    deviation did not occur. Either makes ``headwatch judge`` and ``report`` exit 1."""
    return sum(1 for v in verdicts.values()
               if (v.holds is False and not v.declared_deviation) or (v.holds is True and v.declared_deviation))


def status_word(verdict: Verdict) -> str:
    """One word for a verdict on a terminal: holds / FAILS / n/a, with declared deviations marked."""
    holds = verdict.holds
    word = "n/a" if holds is None else ("holds" if holds else "FAILS")
    if verdict.declared_deviation:
        word += " (declared known deviation)" if holds is False else " (declared deviation did NOT occur)"
    return word
