"""F1: at every revision, no BOS head (first-token selectivity >= SPEC's BOS bar) in layers 0 and 1
(docs/SPEC.md §6). Judged per revision too (:func:`judge_f1_revision`)."""
from __future__ import annotations

import functools
from collections.abc import Sequence

from headwatch.formatting import fmt_layers, fmt_tokens
from headwatch.probes.record import MeasurementRecord, parse_head_key
from headwatch.probes.selectivity import bos_heads_of
from headwatch.spec import SPEC, Expectations, Thresholds

from headwatch.claims import synthetic as S
from headwatch.claims import trajectory as T
from headwatch.claims.claim import FLOOR_SOURCE, FLOOR_THRESHOLD, Claim, NegativeControl, Threshold
from headwatch.claims.registry import register_claim
from headwatch.claims.verdict import F1Details, F1Violation, KeyFigure, NegligibleHead, Status, Verdict
from headwatch.claims.judging import not_counted_text, point as _point, rounded as _round, sig as _sig, with_interval as _with_interval, trajectory_claim as _trajectory_claim

#: The claim's name (panels' xfail keys, --claims, JSON).
NAME = "F1"


@functools.lru_cache(maxsize=1 << 16)
def _layer(head: str) -> int:
    """A head key's layer, parsed once per key (F1 looks at every head of every revision, again per grid row)."""
    return parse_head_key(head)[0]


def _early_heads(record: MeasurementRecord, layers: Sequence[int]) -> list[str]:
    wanted = set(layers)
    return [h for h in record.all_head_selectivity if _layer(h) in wanted]


def _counted_early_heads(record: MeasurementRecord, layers: Sequence[int], floor: float) -> list[str]:
    """The heads in ``layers`` whose attention to position 0 is not below the attention floor."""
    negligible = record.negligible_heads("first-token", floor)
    return [h for h in _early_heads(record, layers) if h not in negligible]


def _early_peak(records: Sequence[MeasurementRecord], layers: Sequence[int], floor: float = SPEC.attention_floor
                ) -> tuple[str, float, MeasurementRecord] | None:
    """The head in ``layers`` with the highest first-token selectivity over ``records`` (the first
    such in token order on ties), its selectivity and its record; None when no record has those layers
    (or every such head's attention to position 0 is below the floor)."""
    best: tuple[str, float, MeasurementRecord] | None = None
    for r in records:
        for h in _counted_early_heads(r, layers, floor):
            sel = r.all_head_selectivity[h]["first-token"]
            if best is None or sel > best[1]:
                best = (h, sel, r)
    return best


def _highest_upper_bound(records: Sequence[MeasurementRecord], layers: Sequence[int],
                         floor: float = SPEC.attention_floor) -> float | None:
    """The largest upper interval bound of any counted early head's first-token selectivity (None: no intervals)."""
    bounds = [b[1] for r in records for h in _counted_early_heads(r, layers, floor)
              if (b := r.selectivity_interval(h, "first-token")) is not None]
    return max(bounds) if bounds else None


def _not_counted(records: Sequence[MeasurementRecord], layers: Sequence[int], spec: Thresholds
                 ) -> tuple[NegligibleHead, ...]:
    """The heads in ``layers`` at or over the BOS bar that the attention floor leaves out."""
    return tuple(f for f in T.not_counted(records, "first-token", spec.bos, spec.attention_floor)
                 if _layer(f.head) in set(layers))


def _floor_txt(flagged: Sequence[NegligibleHead], spec: Thresholds, at_revision: bool = True) -> str:
    return f"; {not_counted_text(flagged, spec.attention_floor, at_revision=at_revision)}" if flagged else ""


def _f1_key(violations: Sequence[F1Violation], record: MeasurementRecord, layers: Sequence[int],
            figure: KeyFigure, flagged: Sequence[NegligibleHead] = ()) -> str:
    """'0 of 32 heads; max 28.1x' (the margin to the bar shows), with the interval where there is one,
    and how many heads over the bar the attention floor left out."""
    early = len(_early_heads(record, layers))
    worst = max((len(v.heads) for v in violations), default=0)
    peak = "" if figure.value is None else f"; max {_with_interval(figure.value, figure.interval)}"
    left_out = len({f.head for f in flagged})
    return (f"{worst} of {early} heads" + (f" ({len(violations)} rev.)" if violations else "") + peak
            + (f"; {left_out} not counted (attention floor)" if left_out else ""))


def _f1_figure(records: Sequence[MeasurementRecord], layers: Sequence[int], threshold: float,
               floor: float = SPEC.attention_floor, flagged: Sequence[NegligibleHead] = ()
               ) -> tuple[KeyFigure, str | None, MeasurementRecord | None]:
    """The largest first-token selectivity of a counted head in ``layers``; its method says how many
    heads over the bar the attention floor left out (``flagged``)."""
    quantity = f"largest layer-{fmt_layers(layers)} first-token selectivity"
    left_out = (f"; {len({f.head for f in flagged})} head(s) over the bar left out: attention to position 0 "
                "below the floor" if flagged else "")
    peak = _early_peak(records, layers, floor)
    if peak is None:
        none = ("no head in these layers" if not any(_early_heads(r, layers) for r in records)
                else "every head in these layers below the attention floor")
        return KeyFigure(quantity, None, threshold, method=none + left_out), None, None
    top, value, rec = peak
    interval = rec.selectivity_interval(top, "first-token")
    method = (rec.no_interval_reason() if interval is None
              else rec.intervals.methods.get("selectivity", ""))  # type: ignore[union-attr]
    unfloored = _early_peak(records, layers, 0.0)
    if unfloored is not None and unfloored[1] > value:  # a higher head under the bar, left out by the floor alone
        method += (f"; over every head {_round(unfloored[1], 3)}x ({unfloored[0]} at {unfloored[2].revision}), "
                   "whose attention to position 0 is below the floor")
    return (KeyFigure(quantity, _round(value, 3), threshold,
                      None if interval is None else (_round(interval[0], 3), _round(interval[1], 3)), method + left_out),
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
    layers, threshold, floor = spec.f1_layers, spec.bos, spec.attention_floor
    heads = T.early_layer_bos_heads(record, layers, threshold, floor)
    sel = {h: _round(record.all_head_selectivity[h]["first-token"], 2) for h in heads}
    where = f"{record.revision} ({fmt_tokens(record.tokens_seen)} tokens)"
    flagged = _not_counted([record], layers, spec)
    figure, top, _ = _f1_figure([record], layers, threshold, floor, flagged)
    anywhere = len(bos_heads_of(record, threshold, floor))
    upper = _highest_upper_bound([record], layers, floor)
    status = _f1_status(bool(heads), anywhere, upper, threshold)
    if heads:
        message = (f"{len(heads)} BOS head(s) in layers {fmt_layers(layers)} at {where}: "
                   + ", ".join(f"{h} (first-token {v}x)" for h, v in sel.items()))
    else:
        message = f"no BOS head in layers {fmt_layers(layers)} at {where}"
        if figure.value is not None:  # None: the model has none of these layers
            message += (f"; highest first-token selectivity there: {top} {_with_interval(figure.value, figure.interval)} "
                        f"(< {threshold:g}; {figure.method})")
    message += _floor_txt(flagged, spec, at_revision=False)
    message += _f1_caveat(status, upper, threshold)
    violations = (F1Violation(record.revision, record.tokens_seen, tuple(heads)),) if heads else ()
    details = F1Details(layers=tuple(layers), threshold=threshold, peak_selectivity=figure.value, peak_head=top,
                        revision=record.revision, tokens=record.tokens_seen, heads=tuple(heads),
                        first_token_selectivity=sel, peak_revision=record.revision, peak_interval=figure.interval,
                        interval_method=figure.method, highest_upper_bound=_round(upper, 3),
                        bos_heads_anywhere=anywhere, vacuous_revisions=() if anywhere else (record.revision,),
                        negligible_heads=flagged, attention_floor=T.attention_floor_note([record]))
    return Verdict(NAME, status, message, details, key=_f1_key(violations, record, layers, figure, flagged),
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
    upper = _highest_upper_bound(recs, layers, spec.attention_floor)
    status = _f1_status(bool(bad), anywhere, upper, threshold)
    flagged = _not_counted(recs, layers, spec)
    figure, top, rec = _f1_figure(recs, layers, threshold, spec.attention_floor, flagged)
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
    message += _floor_txt(flagged, spec)
    message += _f1_caveat(status, upper, threshold)
    details = F1Details(layers=tuple(layers), threshold=threshold, revisions_checked=len(per_rev),
                        violations=tuple(bad), peak_selectivity=figure.value, peak_head=top,
                        peak_revision=rec.revision if rec else None, peak_interval=figure.interval,
                        interval_method=figure.method, highest_upper_bound=_round(upper, 3),
                        bos_heads_anywhere=anywhere, vacuous_revisions=vacuous,
                        negligible_heads=flagged, attention_floor=T.attention_floor_note(recs))
    heads = tuple(T.layer_order({h for v in bad for h in v.heads}))
    return Verdict(NAME, status, message, details, key=_f1_key(bad, recs[-1], layers, figure, flagged),
                   margin=None if figure.value is None else _round(threshold - figure.value),
                   figure=figure, failing_revisions=tuple(v.revision for v in bad), failing_heads=heads)


def _judge(records: Sequence[MeasurementRecord], expect: Expectations, spec: Thresholds, *,
           total_tokens: float | None = None) -> Verdict:
    return judge_f1(records, spec)


CLAIM = register_claim(Claim(
    name=NAME, title="F1 no BOS head in layers 0-1",
    question="Is there no BOS head (first-token selectivity >= the BOS bar) in layers 0 and 1, at every revision?",
    judge=_judge, judge_revision=judge_f1_revision,
    thresholds=(Threshold("BOS head: first-token selectivity", "docs/SPEC.md §2", field="bos"),
                Threshold("layers that hold no BOS head", "docs/SPEC.md §6", field="f1_layers"),
                Threshold(FLOOR_THRESHOLD, FLOOR_SOURCE, field="attention_floor")),
    key_figure="largest layer-0/1 first-token selectivity over the revisions (bar: the BOS threshold)",
    reads=("bos",), details=F1Details, test_module="test_f1_zero_bos_floor.py",
    negative_controls=(
        NegativeControl("bos_head_in_layer_0", "a BOS head in layer 0 at step2",
                        lambda: S.healthy(extra_bos={2: ("L0_H1",)}), S.HEALTHY_EXPECT),
        NegativeControl("bos_head_in_layer_1_final", "a BOS head in layer 1 at the final revision",
                        lambda: S.healthy(extra_bos={6: ("L1_H3",)}), S.HEALTHY_EXPECT),
        NegativeControl("bos_head_in_layer_0_with_mass",
                        "a BOS head in layer 0 at step2, 0.5 of its attention on position 0: over the attention "
                        "floor, so it counts (the same head at 1e-5 attention is left out: tests/test_negligible.py)",
                        lambda: S.with_attention(S.healthy(extra_bos={2: ("L0_H1",)}),
                                                 baseline={2: {"L0_H1": 0.5 / S.STRONG}}), S.HEALTHY_EXPECT),
    ),
))
