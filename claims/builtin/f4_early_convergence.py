"""F4: the screen recovers >= 2/3 of the final induction circuit within 2.5% of training
(docs/SPEC.md §6), read uniformly (SPEC) and at the intermediate threshold (the paper's table).
Its population quantity: the recall point as a share of training."""
from __future__ import annotations

import math
from collections.abc import Sequence

from headwatch.formatting import GRID, fmt_pct, fmt_share, fmt_tokens
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds
from headwatch.stats import REVISION_GRID

from headwatch.claims import synthetic as S
from headwatch.claims import trajectory as T
from headwatch.claims.claim import FLOOR_SOURCE, FLOOR_THRESHOLD, Claim, GridValue, NegativeControl, Quantity, Threshold
from headwatch.claims.registry import register_claim
from headwatch.claims.synthetic import A, B, C, D
from headwatch.claims.verdict import F4Computed, F4Details, F4PaperTable, KeyFigure, RecallAt, Status, Verdict
from headwatch.claims.judging import not_counted_text, point as _point, rounded as _round, sig as _sig, with_interval as _with_interval, trajectory_claim as _trajectory_claim

#: The two readings of F4's recall (docs/statistics.md): their names in details and messages.
UNIFORM_READING, INTERMEDIATE_READING = "uniform 50x", "intermediate 30x"

#: The claim's name (panels' xfail keys, --claims, JSON).
NAME = "F4"


def _f4_computed(conv: T.ConvergenceResult, intermediate: float) -> F4Computed | None:
    if conv.point is None:
        return None
    b = conv.fraction_bounds
    return F4Computed(conv.point.point.revision, conv.point.point.tokens, _round(conv.fraction_of_total, 6),
                      _round(conv.point.recall), tuple(conv.point.found),
                      None if b is None else (_round(b[0], 6), _round(b[1], 6)), intermediate)


@_trajectory_claim
def judge_f4(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(),
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
    floor = spec.attention_floor
    conv = T.first_recall_at_least(records, level, spec.induction, total_tokens=total_tokens, floor=floor)
    conv_mid = T.first_recall_at_least(records, level, spec.induction, total_tokens=total_tokens,
                                       intermediate_threshold=spec.label, floor=floor)
    recs = T.by_tokens(records)
    flagged = T.not_counted(recs, "induction", spec.induction, floor)
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
    if flagged:
        message += f"; {not_counted_text(flagged, floor)}"
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
        negligible_heads=flagged, attention_floor=T.attention_floor_note(recs),
    )
    figure = KeyFigure("fraction of training tokens at the recall point", computed.fraction_of_total if computed else None,
                       max_fraction, computed.fraction_interval if computed else None,
                       REVISION_GRID if computed else "no final circuit", ends=GRID)
    return Verdict(NAME, status, message, details, key=key, margin=margin, figure=figure)


def _judge(records: Sequence[MeasurementRecord], expect: Expectations, spec: Thresholds, *,
           total_tokens: float | None = None) -> Verdict:
    return judge_f4(records, expect, total_tokens, spec)


def recall_point_value(records: Sequence[MeasurementRecord], total_tokens: float | None,
                       spec: Thresholds) -> GridValue:
    """One member's F4 recall point as a share of training, with the grid's bracket."""
    conv = T.first_recall_at_least(T.by_tokens(records), spec.recall_level, spec.induction, total_tokens=total_tokens,
                                   floor=spec.attention_floor)
    if conv.point is None:
        return GridValue(None, undefined="no induction head at the final revision")
    return GridValue(conv.fraction_of_total, conv.fraction_bounds)


#: The population quantity: a late circuit moves it with t_induction (the same event, counted there).
RECALL_POINT = Quantity("F4_recall_point", "F4 recall point", recall_point_value, unit="fraction", same_event={
    "above": (("t_induction", "above"),),
    "below": (("t_induction", "below"),),
})

CLAIM = register_claim(Claim(
    name=NAME, title="F4 early circuit recall",
    question="Does the screen recover at least 2/3 of the final induction circuit within the first 2.5% of training?",
    judge=_judge,
    thresholds=(Threshold("recall of the final circuit >=", "docs/SPEC.md §5", field="recall_level"),
                Threshold("within this share of training", "docs/SPEC.md §6", field="f4_max_fraction"),
                Threshold("induction head: induction selectivity >=", "docs/SPEC.md §2", field="induction"),
                Threshold(FLOOR_THRESHOLD, FLOOR_SOURCE, field="attention_floor")),
    key_figure="fraction of training tokens at the recall point, with the revision grid's bracket",
    reads=("induction", "recall_level"), details=F4Details, placed_on=RECALL_POINT,
    test_module="test_f4_early_convergence.py",
    negative_controls=(
        NegativeControl("circuit_only_at_end", "the final circuit is found only at the final revision",
                        lambda: S.healthy(induction_sets=((), (D,), (D,), (D,), (D,), (D,), (A, B, C))),
                        S.HEALTHY_EXPECT),
    ),
))
