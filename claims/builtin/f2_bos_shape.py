"""F2: the BOS-fraction curve has the shape the panel declares for the model, "ramp" or "step"
(docs/SPEC.md §5); not applicable where none is declared."""
from __future__ import annotations

from collections.abc import Sequence

from headwatch.formatting import fmt_pct
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds

from headwatch.claims import synthetic as S
from headwatch.claims import trajectory as T
from headwatch.claims.claim import FLOOR_SOURCE, FLOOR_THRESHOLD, Claim, NegativeControl, Threshold
from headwatch.claims.registry import register_claim
from headwatch.claims.verdict import F2Details, KeyFigure, Status, Verdict
from headwatch.claims.judging import not_counted_text, point as _point, rounded as _round, sig as _sig, with_interval as _with_interval, trajectory_claim as _trajectory_claim

#: The claim's name (panels' xfail keys, --claims, JSON).
NAME = "F2"


@_trajectory_claim
def judge_f2(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(), spec: Thresholds = SPEC) -> Verdict:
    """F2: the BOS-fraction shape matches the panel's expected shape (not applicable if none declared)."""
    step_share = spec.step_share
    recs = T.by_tokens(records)
    shape = T.bos_shape(recs, step_share, spec.bos, spec.attention_floor)
    series = T.bos_fraction_series(recs, spec.bos, spec.attention_floor)
    flagged = T.not_counted(recs, "first-token", spec.bos, spec.attention_floor)
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
        negligible_heads=flagged, attention_floor=T.attention_floor_note(recs),
    )
    margin = None
    if shape.share is not None and expect.bos_shape is not None:
        margin = _round(shape.share - step_share if expect.bos_shape == "step" else step_share - shape.share)
    key = f"{details.shape}: {details.largest_rise_points:.1f} of {details.total_rise_points:.1f} pts"
    figure = KeyFigure("largest adjacent rise / total rise of the BOS fraction", details.share, step_share,
                       method="no interval (the shape of a curve on the revision grid)")
    shape_txt = "flat" if shape.shape == "flat" else f"a {shape.shape}"
    floor_txt = f"; {not_counted_text(flagged, spec.attention_floor)}" if flagged else ""
    return Verdict(NAME, Status.of(holds), f"BOS fraction is {shape_txt}: {rise_txt}; {expected_txt}{floor_txt}",
                   details, key=key, margin=margin, figure=figure)


def _judge(records: Sequence[MeasurementRecord], expect: Expectations, spec: Thresholds, *,
           total_tokens: float | None = None) -> Verdict:
    return judge_f2(records, expect, spec)


CLAIM = register_claim(Claim(
    name=NAME, title="F2 BOS-fraction shape",
    question="Does the BOS-fraction curve over training have the shape the panel declares (ramp or step)?",
    judge=_judge,
    thresholds=(Threshold("step: largest adjacent rise / total rise >=", "docs/SPEC.md §5", field="step_share"),
                Threshold("BOS head: first-token selectivity", "docs/SPEC.md §2", field="bos"),
                Threshold(FLOOR_THRESHOLD, FLOOR_SOURCE, field="attention_floor")),
    key_figure="largest adjacent rise of the BOS fraction as a share of its total rise (bar: the step share)",
    reads=("bos", "step_share"), details=F2Details, test_module="test_f2_bos_shape.py",
    negative_controls=(
        NegativeControl("step_for_declared_ramp", "a step-shaped BOS curve for a model declared ramp",
                        lambda: S.healthy(bos_fractions=(0.0, 0.0, 0.0, 0.0625, 0.625, 0.6875, 0.75)), S.HEALTHY_EXPECT),
        NegativeControl("ramp_for_declared_step", "a ramp BOS curve for a model declared step",
                        lambda: S.healthy(), Expectations(bos_shape="step", dclm=True)),
    ),
))
