"""Formation: whether a model organism formed its induction circuit as its panel declares
(``[models.expect.formation]``). A gate: judged first, only where declared; where it fails, every
other claim of the model is "not judged"."""
from __future__ import annotations

from collections.abc import Sequence

from headwatch.formatting import fmt_interval, fmt_tokens
from headwatch.probes.record import MeasurementRecord, TRAINING_PROVENANCE
from headwatch.probes.selectivity import bos_heads_of, circuit_of
from headwatch.schema import to_data
from headwatch.spec import SPEC, Expectations, Thresholds
from headwatch.stats import clopper_pearson

from headwatch.claims import synthetic as S
from headwatch.claims import trajectory as T
from headwatch.claims.claim import FLOOR_SOURCE, FLOOR_THRESHOLD, Claim, NegativeControl, Threshold
from headwatch.claims.registry import register_claim
from headwatch.claims.synthetic import A, B, C, D, Ablations
from headwatch.claims.verdict import FormationDetails, KeyFigure, Status, Verdict
from headwatch.claims.judging import not_counted_text, point as _point, rounded as _round, sig as _sig, with_interval as _with_interval, trajectory_claim as _trajectory_claim

#: The claim's name (panels' xfail keys, --claims, JSON).
NAME = "formation"


def judge_formation(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(),
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
    floor = spec.attention_floor
    heads = T.layer_order(circuit_of(final, spec.induction, floor))
    sel = {h: _round(final.all_head_selectivity[h]["induction"], 2) for h in heads}
    sel_iv = {h: (_round(b[0], 2), _round(b[1], 2)) for h in heads if (b := final.selectivity_interval(h, "induction"))}
    negligible_final = final.negligible_heads("induction", floor)
    counted = [h for h in final.all_head_selectivity if h not in negligible_final] or list(final.all_head_selectivity)
    best = max(counted, key=lambda h: final.all_head_selectivity[h]["induction"])
    best_sel = _round(final.all_head_selectivity[best]["induction"], 2)
    n_first = len(circuit_of(first, spec.induction, floor))
    t_ind = T.t_induction(recs, spec.induction_min_heads, spec.induction, floor)
    top1 = final.task.top1 if final.task else None
    top1_iv = final.intervals.task_top1 if final.intervals else None
    if top1_iv is None and final.task is not None and final.task.n and final.task.top1_count is not None:
        top1_iv = clopper_pearson(final.task.top1_count, final.task.n, spec.interval_level)
    training = final.provenance.get(TRAINING_PROVENANCE)
    total = float(total_tokens if total_tokens is not None else final.tokens_seen)  # type: ignore[arg-type]
    bos_final = T.layer_order(bos_heads_of(final, spec.bos, floor))
    with_bos = [i for i, r in enumerate(recs) if bos_heads_of(r, spec.bos, floor)]
    first_bos = recs[with_bos[0]] if with_bos else None
    bos_gaps = [r.revision for r in recs[with_bos[0]:] if not bos_heads_of(r, spec.bos, floor)] if with_bos else []
    declares_bos = declared is not None and (declared.min_bos_heads_final is not None or declared.bos_after_induction
                                             or declared.bos_persists)
    flagged = T.not_counted(recs, "induction", spec.induction, floor) + (
        T.not_counted(recs, "first-token", spec.bos, floor) if declares_bos else ())
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
    if declares_bos:
        sel_bos = ", ".join(f"{h} {final.all_head_selectivity[h]['first-token']:.3g}x" for h in bos_final) or "none"
        bos_txt = (f"; {len(bos_final)} BOS heads >= {spec.bos:g}x at {final.revision}: {sel_bos}; first BOS head at "
                   + (f"{first_bos.revision} ({', '.join(T.layer_order(bos_heads_of(first_bos, spec.bos, floor)))})"
                      if first_bos else "no revision"))
    measured = (f"{len(heads)} heads >= {spec.induction:g}x at {final.revision}"
                + (f" (95% interval {fmt_interval(n_iv, 'g')})" if n_iv else "")
                + f": {heads_txt}; {n_first} at {first.revision}; t_induction {t_txt}; top-1 "
                + ("unknown" if top1 is None else f"{top1:.3g} {fmt_interval(top1_iv)}".rstrip())
                + bos_txt
                + (f"; {not_counted_text(flagged, floor)}" if flagged else "")
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
        training=training, unmet=tuple(unmet), negligible_heads=flagged, attention_floor=T.attention_floor_note(recs),
    )
    want = declared.min_induction_heads_final if declared is not None else None
    figure = KeyFigure(f"heads >= {spec.induction:g}x at the final revision", float(len(heads)),
                       None if want is None else float(want), n_iv,
                       final.intervals.methods.get("induction_heads", "") if final.intervals else final.no_interval_reason())
    key = f"{len(heads)} heads, t_ind {t_ind.revision or 'never'}" + ("" if top1 is None else f", top-1 {top1:.2g}")
    return Verdict(NAME, status, message, details, key=key,
                   margin=None if want is None else float(len(heads) - want), figure=figure)


def _judge(records: Sequence[MeasurementRecord], expect: Expectations, spec: Thresholds, *,
           total_tokens: float | None = None) -> Verdict:
    return judge_formation(records, expect, total_tokens, spec)


NEVER = ((),) * 7
CLAIM = register_claim(Claim(
    name=NAME, title="organism formed as declared",
    question="Did the model form its induction circuit as its panel declares ([models.expect.formation])?",
    judge=_judge, gate=True, applies=lambda expect: expect.formation is not None,
    thresholds=(Threshold("induction head: induction selectivity >=", "docs/SPEC.md §2", field="induction"),
                Threshold("BOS head: first-token selectivity >=", "docs/SPEC.md §2", field="bos"),
                Threshold(FLOOR_THRESHOLD, FLOOR_SOURCE, field="attention_floor")),
    key_figure="heads >= the induction threshold at the final revision (bar: the panel's declared minimum)",
    reads=("bos", "induction"), details=FormationDetails, test_module="test_formation.py",
    negative_controls=(
        NegativeControl("never_forms", "no induction head at any revision",
                        lambda: S.healthy(induction_sets=NEVER), S.FORMATION_EXPECT),
        NegativeControl("forms_too_late", "the circuit forms only at the final revision",
                        lambda: S.healthy(induction_sets=((),) * 6 + ((A, B, C),)), S.FORMATION_EXPECT),
        NegativeControl("formed_at_step0", "the circuit is there at the first revision",
                        lambda: S.healthy(induction_sets=((A, B, C),) * 7), S.FORMATION_EXPECT),
        NegativeControl("copies_badly", "final top-1 below the declared floor",
                        lambda: S.healthy(ablations=Ablations(baseline=0.01, circuit=0.001, random=0.009)),
                        S.FORMATION_EXPECT),
        NegativeControl("forms_only_on_noise",
                        "the final circuit's heads are over 50x with 1e-5 attention on the induction target: below "
                        "the attention floor, so no head is counted",
                        lambda: S.with_attention(S.healthy(), baseline={
                            i: {h: 1e-5 / S.STRONG for h in (A, B, C, D)} for i in range(7)}),
                        S.FORMATION_EXPECT),
    ),
))
