"""F3: on DCLM models, t_bos50 / t_induction >= 10 (induction forms an order of magnitude earlier, in
tokens, than the BOS fraction reaches 50%), on the revision grid's interval (docs/SPEC.md §6).
Its population quantity: the ratio (right-censored where t_bos50 is not reached)."""
from __future__ import annotations

import math
from collections.abc import Sequence

from headwatch.formatting import OPEN, fmt_interval, fmt_number, fmt_tokens
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds
from headwatch.stats import REVISION_GRID, finite_or_none

from headwatch.claims import synthetic as S
from headwatch.claims import trajectory as T
from headwatch.claims.claim import FLOOR_SOURCE, FLOOR_THRESHOLD, Claim, GridValue, NegativeControl, Quantity, Threshold
from headwatch.claims.registry import register_claim
from headwatch.claims.synthetic import A, B, C
from headwatch.claims.verdict import F3Details, F3Sensitivity, KeyFigure, Status, Verdict
from headwatch.claims.judging import not_counted_text, point as _point, rounded as _round, sig as _sig, with_interval as _with_interval, trajectory_claim as _trajectory_claim

#: The claim's name (panels' xfail keys, --claims, JSON).
NAME = "F3"


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
def judge_f3(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(), spec: Thresholds = SPEC) -> Verdict:
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

    floor = spec.attention_floor
    bos = T.t_bos50(records, spec.bos_level, spec.bos, floor)  # the same at every head count

    def separation(k: int) -> T.SeparationResult:
        return T.induction_bos_separation(records, min_heads=k, induction_threshold=spec.induction,
                                          bos_level=spec.bos_level, bos_threshold=spec.bos, bos=bos, floor=floor)

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
    recs = T.by_tokens(records)
    flagged = (T.not_counted(recs, "induction", spec.induction, floor)
               + T.not_counted(recs, "first-token", spec.bos, floor))
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
                        ratio_interval=interval, established=established, censored=sep.censored,
                        negligible_heads=flagged, attention_floor=T.attention_floor_note(recs))
    ratio = (f"{details.ratio:.3g}x " if details.ratio is not None else "censored ") + interval_txt
    method = REVISION_GRID + "".join(f"; {c} right-censored after the last revision" for c in sep.censored)
    figure = KeyFigure("t_bos50 / t_induction (tokens)", details.ratio, min_ratio, interval, method, ends=OPEN)
    floor_txt = f"; {not_counted_text(flagged, floor)}" if flagged else ""
    return Verdict(NAME, status, f"{ratio_txt}; {where}; {verdict}{floor_txt}", details,
                   key=ratio if expect.dclm else f"{ratio} (not DCLM)",
                   margin=None if sep.ratio is None else _round(sep.ratio - min_ratio), figure=figure)


def _judge(records: Sequence[MeasurementRecord], expect: Expectations, spec: Thresholds, *,
           total_tokens: float | None = None) -> Verdict:
    return judge_f3(records, expect, spec)


def ratio_value(records: Sequence[MeasurementRecord], total_tokens: float | None, spec: Thresholds) -> GridValue:
    """One member's t_bos50 / t_induction as the grid allows: censored above final / t_induction where
    t_bos50 is not reached; undefined without t_induction (or at 0 tokens)."""
    recs = T.by_tokens(records)
    final_tokens = float(recs[-1].tokens_seen)  # type: ignore[arg-type]
    sep = T.induction_bos_separation(recs, spec.induction_min_heads, spec.induction, spec.bos_level, spec.bos,
                                     floor=spec.attention_floor)
    if sep.induction.point is None:
        return GridValue(None, undefined="t_induction never reached")
    if sep.bos.point is None:
        # t_bos50 > final and t_induction <= its point: the ratio exceeds final / t_induction.
        return (GridValue(None, censored_above=final_tokens / sep.induction.tokens)
                if sep.induction.tokens else GridValue(None, undefined="t_induction at 0 tokens"))
    if sep.ratio is None:
        return GridValue(None, undefined="t_induction at 0 tokens")
    lo, hi = sep.bounds  # type: ignore[misc]
    return GridValue(sep.ratio, (lo, hi if math.isfinite(hi) else None))


#: The population quantity: a late circuit makes the ratio smaller (the same event as t_induction
#: above, or t_bos50 below), a late sink larger.
RATIO = Quantity("F3_ratio", "F3 ratio", ratio_value, unit="ratio", grows_with_time=False, same_event={
    "below": (("t_induction", "above"), ("t_bos50", "below")),
    "above": (("t_induction", "below"), ("t_bos50", "above")),
})

CLAIM = register_claim(Claim(
    name=NAME, title="F3 t_bos50 / t_induction",
    question="On a model trained on DCLM, does induction form at least 10x earlier (in tokens) than the BOS "
             "fraction reaches 50%?",
    judge=_judge,
    thresholds=(Threshold("t_bos50 / t_induction >=", "docs/SPEC.md §6", field="f3_min_ratio"),
                Threshold("t_induction: induction heads at least", "docs/SPEC.md §5", field="induction_min_heads"),
                Threshold("t_bos50: BOS fraction >=", "docs/SPEC.md §5", field="bos_level"),
                Threshold(FLOOR_THRESHOLD, FLOOR_SOURCE, field="attention_floor")),
    key_figure="t_bos50 / t_induction in tokens, with the open interval the revision grid allows",
    reads=("bos", "induction"), details=F3Details, placed_on=RATIO, test_module="test_f3_induction_before_bos.py",
    negative_controls=(
        NegativeControl("bos_before_induction", "BOS fraction >= 50% before 3 induction heads form",
                        lambda: S.healthy(bos_fractions=(0.0, 0.5, 0.5625, 0.625, 0.6875, 0.75, 0.75),
                                          induction_sets=((), (), (), (A, B, C), (A, B, C), (A, B, C), (A, B, C))),
                        S.HEALTHY_EXPECT),
        NegativeControl("bos_soon_after_induction",
                        "BOS fraction reaches 50% one revision after 3 induction heads form (2e10 vs 1e10): "
                        "the grid bounds the ratio below 2e10 / 3e9 = 6.7",
                        lambda: S.healthy(bos_fractions=(0.0, 0.0625, 0.125, 0.1875, 0.5, 0.5625, 0.75),
                                          induction_sets=((), (), (), (A, B, C), (A, B, C), (A, B, C), (A, B, C))),
                        S.HEALTHY_EXPECT),
    ),
))
