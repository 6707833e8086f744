"""A new trajectory claim over the screen's existing head classes: previous-token heads form at or before
the induction circuit (the two-step story of induction: a previous-token head feeds the induction head).

    t_prev       the first revision with a previous-token head (best class previous-token, selectivity
                 >= SPEC's previous_token, 100: docs/SPEC.md §2)
    t_induction  the first revision with >= 3 induction heads (SPEC's, §5)

Holds where t_prev is at or before t_induction on the revision grid (the same revision counts: the grid
cannot order two milestones inside one interval); fails where t_prev comes at a later revision, or
never while t_induction is reached (right-censored beyond it); not applicable without t_induction.
A population places each candidate on t_prev (censored where never reached).

Use it: ``headwatch judge --claims-module prev_token_first.py``, or import it from a conftest.py.
"""
from __future__ import annotations

from headwatch.claims import Claim, GridValue, KeyFigure, NegativeControl, Quantity, Status, Threshold, Verdict, register_claim
from headwatch.claims import trajectory as T
from headwatch.claims.synthetic import HEALTHY_EXPECT, healthy
from headwatch.probes.selectivity import previous_token_circuit_of

NAME = "prev_token_first"
#: Previous-token heads that make the milestone (one: the circuit needs a single one to feed it).
MIN_HEADS = 1


def t_prev(records, spec) -> T.Milestone:
    """The first revision with >= MIN_HEADS previous-token heads (heads whose previous-token attention is
    below SPEC's attention floor not counted), on the revision grid."""
    recs = T.by_tokens(records)
    meets = [len(previous_token_circuit_of(r, spec.previous_token, spec.attention_floor)) >= MIN_HEADS for r in recs]
    return T.first_meeting(f">= {MIN_HEADS} previous-token head(s) at >= {spec.previous_token:g}",
                           T.tokens_per_revision(recs), meets)


def judge(records, expect, spec, *, total_tokens=None) -> Verdict:
    recs = T.by_tokens(records)
    prev = t_prev(recs, spec)
    ind = T.t_induction(recs, spec.induction_min_heads, spec.induction, spec.attention_floor)
    where = (f"t_prev {prev.revision or 'never'} ({MIN_HEADS} previous-token head >= {spec.previous_token:g}x), "
             f"t_induction {ind.revision or 'never'} (>= {spec.induction_min_heads} heads >= {spec.induction:g}x)")
    gap = None if prev.point is None or ind.point is None else ind.point.index - prev.point.index
    if ind.point is None:
        status, why = Status.NOT_APPLICABLE, "no induction circuit forms: nothing to precede"
    elif prev.point is None:
        status, why = Status.FAILS, "no previous-token head by the last revision (right-censored after t_induction)"
    elif gap >= 0:
        status, why = Status.HOLDS, f"previous-token heads first at or before the induction circuit ({gap} revision(s) earlier)"
    else:
        status, why = Status.FAILS, f"previous-token heads first {-gap} revision(s) after the induction circuit"
    figure = KeyFigure("revisions by which t_prev precedes t_induction", None if gap is None else float(gap), 0.0,
                       method="no interval (the order of two milestones on the revision grid)")
    return Verdict(NAME, status, f"{where}: {why}", {"t_prev": prev.revision, "t_induction": ind.revision, "gap": gap},
                   key=f"{'never' if prev.revision is None else prev.revision} vs {ind.revision or 'never'}",
                   margin=None if gap is None else float(gap), figure=figure)


def t_prev_value(records, total_tokens, spec) -> GridValue:
    """t_prev in tokens, with the grid's bracket; censored above the last revision where never reached."""
    m = t_prev(records, spec)
    if m.point is None:
        return GridValue(None, censored_above=float(T.by_tokens(records)[-1].tokens_seen))
    return GridValue(m.tokens, m.bracket)


def _late_previous_token_head():
    """The healthy trajectory (induction at step1) with its only previous-token head at the final revision."""
    recs = healthy()
    recs[-1].all_head_selectivity["L2_H0"]["previous-token"] = 150.0
    return recs


def _no_previous_token_head():
    return healthy()  # the planted heads are induction and first-token ones only


CLAIM = register_claim(Claim(
    name=NAME, title="previous-token heads at or before induction",
    question="Do previous-token heads reach their threshold at or before the induction circuit reaches its own?",
    judge=judge,
    thresholds=(Threshold("previous-token head: selectivity >=", "docs/SPEC.md §2", field="previous_token"),
                Threshold("previous-token heads at t_prev", "this claim", value=MIN_HEADS),
                Threshold("t_induction: induction heads at least", "docs/SPEC.md §5", field="induction_min_heads")),
    key_figure="revisions by which t_prev precedes t_induction",
    reads=("induction",),
    placed_on=Quantity("t_previous_token", "t_prev", t_prev_value, unit="tokens"),
    negative_controls=(
        NegativeControl("previous_token_after_induction", "the only previous-token head appears at the final "
                        "revision, five revisions after the induction circuit", _late_previous_token_head, HEALTHY_EXPECT),
        NegativeControl("no_previous_token_head", "an induction circuit forms, no previous-token head ever does",
                        _no_previous_token_head, HEALTHY_EXPECT),
    ),
))
