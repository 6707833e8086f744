"""F5: each final induction head's participation ratio is elevated at or before it crosses the
induction threshold, where randomly drawn heads would not all be (exact null; docs/SPEC.md §3,
docs/statistics.md)."""
from __future__ import annotations

from collections.abc import Sequence

from headwatch.formatting import fmt_pct
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds
from headwatch.stats import NESTED_DRAW

from headwatch.claims import synthetic as S
from headwatch.claims import trajectory as T
from headwatch.claims.claim import FLOOR_SOURCE, FLOOR_THRESHOLD, Claim, NegativeControl, Threshold
from headwatch.claims.registry import register_claim
from headwatch.claims.synthetic import A, C, PR_HIGH, PR_LOW
from headwatch.claims.verdict import F5Details, F5Head, F5Sensitivity, KeyFigure, Status, Verdict
from headwatch.claims.judging import not_counted_text, point as _point, rounded as _round, sig as _sig, with_interval as _with_interval, trajectory_claim as _trajectory_claim

#: The claim's name (panels' xfail keys, --claims, JSON).
NAME = "F5"


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
        return Verdict(NAME, Status.NOT_ESTABLISHED,
                       f"not established: no per-head PR (or d_head) at {', '.join(missing)}: F5 needs PR at every revision",
                       F5Details(fraction=fraction, null_alpha=alpha), key="no PR")
    floor = spec.attention_floor
    res = T.pr_lead(recs, fraction, spec.induction, floor)
    flagged = T.not_counted(recs, "induction", spec.induction, floor)
    floor_note = T.attention_floor_note(recs)
    floor_txt = f"; {not_counted_text(flagged, floor)}" if flagged else ""
    sensitivity = {}
    for f in spec.f5_sensitivity_fractions:
        r = T.pr_lead(recs, f, spec.induction, floor)
        sensitivity[f"{f:g}"] = F5Sensitivity(r.holds, tuple(r.failing), len(r.heads) - len(r.failing), len(r.heads))
    d_head = recs[-1].d_head
    bar = 1 + fraction * (d_head - 1)
    if not res.heads:
        return Verdict(NAME, Status.NOT_APPLICABLE,
                       f"the final revision has no induction head (>= {spec.induction:g}x): F5 has no heads to judge"
                       + floor_txt,
                       F5Details(fraction=fraction, sensitivity=sensitivity, d_head=d_head, pr_bar=bar, null_alpha=alpha,
                                 negligible_heads=flagged, attention_floor=floor_note),
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
    decisive = max(null.at_or_before, null.layer_matched)  # both nulls must reject (docs/statistics.md)
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
    message += floor_txt
    gaps = [l.crossed.index - l.elevated.index for l in res.heads if l.elevated]  # type: ignore[union-attr]
    margin = None if len(gaps) < k else float(min(gaps))  # a head never elevated: no margin
    details = F5Details(fraction=fraction, heads=tuple(_head(l, nulls[l.head]) for l in res.heads),
                        failing=tuple(res.failing), sensitivity=sensitivity, d_head=d_head, pr_bar=bar,
                        null_p=_sig(null.at_or_before), null_p_before=_sig(null.before), null_alpha=alpha,
                        informative=informative, before=before, at=at, n_heads_all=null.n_heads,
                        rise_fraction=spec.f5_rise_fraction, rise_holds=rise_holds,
                        rise_null_p=None if null.rise is None else _sig(null.rise),
                        null_p_layer=_sig(null.layer_matched), null_p_decisive=_sig(decisive),
                        negligible_heads=flagged, attention_floor=floor_note)
    key = (f"{k - len(res.failing)} of {k} heads ({len(before)} before, {len(at)} at); null p {null.at_or_before:.2g}, "
           f"by layer {null.layer_matched:.2g}")
    figure = KeyFigure("fewest revisions by which PR elevation precedes the crossing", margin, 0.0,
                       method=f"no interval; {NESTED_DRAW} (the larger of the all-heads and layer-matched nulls)",
                       p_value=_sig(decisive))
    return Verdict(NAME, status, message, details, key=key, margin=margin, figure=figure,
                   failing_heads=tuple(res.failing))


def _judge(records: Sequence[MeasurementRecord], expect: Expectations, spec: Thresholds, *,
           total_tokens: float | None = None) -> Verdict:
    return judge_f5(records, spec)


CLAIM = register_claim(Claim(
    name=NAME, title="F5 PR before 50x",
    question="Is each final induction head's PR elevated at or before it first crosses the induction threshold, "
             "more often than randomly drawn heads would be?",
    judge=_judge,
    thresholds=(Threshold("PR elevated: PR - 1 >= this x (d_head - 1)", "docs/SPEC.md §3", field="pr_elevation_fraction"),
                Threshold("induction head: induction selectivity >=", "docs/SPEC.md §2", field="induction"),
                Threshold("the null's alpha", "docs/statistics.md", field="f5_null_alpha"),
                Threshold(FLOOR_THRESHOLD, FLOOR_SOURCE, field="attention_floor")),
    key_figure="fewest revisions by which PR elevation precedes a final head's crossing; the null's p-value",
    reads=("induction",), details=F5Details, test_module="test_f5_pr_precedes_threshold.py",
    negative_controls=(
        NegativeControl("pr_rises_after_crossing", "head C crosses 50x at step5 but its PR rises at step6",
                        lambda: S.healthy(pr={**S.HEALTHY["pr"], C: (PR_LOW,) * 6 + (PR_HIGH,)}), S.HEALTHY_EXPECT),
        NegativeControl("pr_never_elevated", "head A crosses 50x but its PR is never elevated",
                        lambda: S.healthy(pr={**S.HEALTHY["pr"], A: (PR_LOW,) * 7}), S.HEALTHY_EXPECT),
    ),
))
