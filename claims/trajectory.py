"""Trajectory quantities of docs/SPEC.md §5: plain functions over a model's measurement records.

Every function takes the records of ONE model (any order; they are sorted by tokens seen here) and
returns a small typed result. Head sets come from :mod:`probes.selectivity`, never recomputed here.
Nothing in this module knows which model is which or what the paper found: expectations live in
the panel files and verdicts in :mod:`headwatch.claims.judge`; every default is :data:`headwatch.spec.SPEC`'s.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from headwatch.probes.participation import is_elevated
from headwatch.probes.record import MeasurementRecord, TaskMetrics, attention_floor_value, parse_head_key
from headwatch.probes.selectivity import bos_fraction_of, bos_heads_of, circuit_of
from headwatch.spec import SPEC
from headwatch.stats import (
    BOSCHLOO, MCNEMAR, MIN_BOOTSTRAP_SEQUENCES, RATIO_TEST_PAIRED, RATIO_TEST_UNCONDITIONAL, SEQUENCE_BOOTSTRAP,
    boschloo_less, bootstrap_p_at_least, count_from_rate, mcnemar_less, nested_draw_probability, paired_ratio_below,
    percentile_interval, ratio_below_unconditional, sequence_bootstrap_totals,
)
from headwatch.validation import InputError

from headwatch.claims.verdict import NO_ATTENTION, NegligibleHead


def by_tokens(records: Iterable[MeasurementRecord]) -> list[MeasurementRecord]:
    """Records of one model sorted by tokens seen; refuses mixed models or unknown tokens."""
    records = list(records)
    if not records:
        raise ValueError("no measurement records: a trajectory needs at least one revision")
    models = {r.model for r in records}
    if len(models) > 1:
        raise ValueError(f"records of several models in one trajectory: {sorted(models)}")
    unknown = [r.revision for r in records if r.tokens_seen is None]
    if unknown:
        raise ValueError(f"tokens seen unknown for revisions {unknown} of {records[0].model}")
    out = sorted(records, key=lambda r: r.tokens_seen)  # type: ignore[arg-type, return-value]
    revisions = [r.revision for r in out]
    if len(set(revisions)) != len(revisions):
        raise ValueError(f"a revision appears twice in the records of {records[0].model}: {revisions}")
    return out


def layer_order(heads: Iterable[str]) -> list[str]:
    """Head keys sorted by (layer, head), for stable messages."""
    return sorted(heads, key=parse_head_key)


@dataclass(frozen=True)
class RevisionPoint:
    """One revision of a trajectory: its name, tokens seen and index in token order."""

    index: int
    revision: str
    tokens: float


def tokens_per_revision(records: Sequence[MeasurementRecord]) -> list[RevisionPoint]:
    """(index, revision, tokens seen) in token order."""
    return [RevisionPoint(i, r.revision, float(r.tokens_seen)) for i, r in enumerate(by_tokens(records))]  # type: ignore[arg-type]


# ---- the attention floor: heads over a threshold that are not counted ----------------------------


def not_counted(records: Iterable[MeasurementRecord], cls: str, threshold: float,
                floor: float = SPEC.attention_floor) -> tuple[NegligibleHead, ...]:
    """Heads whose ``cls`` selectivity is >= ``threshold`` but whose attention to the target is below
    the floor (``floor`` / T), so that no head set counts them; per record, in the records' order, heads
    in (layer, head) order. Records without attention contribute none."""
    out = []
    for r in records:
        left_out = r.negligible_heads(cls, floor)
        if not left_out:
            continue
        level = attention_floor_value(r.settings.seq_len, floor)  # type: ignore[union-attr]
        for h in layer_order(left_out):
            sel = r.all_head_selectivity[h][cls]
            if sel >= threshold:
                out.append(NegligibleHead(r.revision, h, cls, float(sel), r.attention[h][cls], level))  # type: ignore[index]
    return tuple(out)


def attention_floor_note(records: Sequence[MeasurementRecord]) -> str:
    """Whether the attention floor applied to these records, in words: "" where every record
    carries attention; otherwise :data:`~headwatch.claims.verdict.NO_ATTENTION` (and on how many)."""
    lacking = sum(not r.has_attention for r in records)
    if lacking == 0:
        return ""
    if lacking == len(records):
        return NO_ATTENTION
    return f"{NO_ATTENTION} in {lacking} of {len(records)} records (applied in the others)"


# ---- F1: BOS heads in the early layers ---------------------------------------------------------


def early_layer_bos_heads(
    record: MeasurementRecord, layers: Iterable[int] = SPEC.f1_layers, threshold: float = SPEC.bos,
    floor: float = SPEC.attention_floor,
) -> list[str]:
    """BOS heads (first-token selectivity >= threshold, attention to position 0 not negligible) that
    sit in ``layers``."""
    wanted = set(layers)
    return layer_order(h for h in bos_heads_of(record, threshold, floor) if parse_head_key(h)[0] in wanted)


# ---- milestones, BOS fraction and its shape (F2, F3) ------------------------------------------


@dataclass(frozen=True)
class Milestone:
    """The first revision meeting a condition; ``point`` is None when no revision does.

    On the revision grid the milestone is only known to lie in (``before``, ``point``]: after the
    last revision that does not meet it (None: ``point`` is the first revision, so the milestone
    may lie anywhere from 0 tokens on) and at or before the first that does. A milestone no
    revision meets is right-censored: it lies after the last revision (``before``), in
    (``before``, inf).
    """

    what: str
    point: RevisionPoint | None
    before: RevisionPoint | None = None

    @property
    def tokens(self) -> float | None:
        return self.point.tokens if self.point else None

    @property
    def revision(self) -> str | None:
        return self.point.revision if self.point else None

    @property
    def censored(self) -> bool:
        """Not met by the last revision: only a lower bound (the last revision's tokens) is known."""
        return self.point is None

    @property
    def bracket(self) -> tuple[float, float]:
        """The grid's bracket (lo, hi] in tokens: lo 0.0 below the first revision; hi inf when censored."""
        lo = self.before.tokens if self.before else 0.0
        return (lo, self.point.tokens if self.point else math.inf)


def first_meeting(what: str, points: Sequence[RevisionPoint], meets: Sequence[bool]) -> Milestone:
    """The milestone at the first point where ``meets`` is true, bracketed by the point before it;
    right-censored after the last point when none meets it."""
    for i, (p, ok) in enumerate(zip(points, meets)):
        if ok:
            return Milestone(what, p, points[i - 1] if i > 0 else None)
    return Milestone(what, None, points[-1] if points else None)


def t_induction(
    records: Sequence[MeasurementRecord],
    min_heads: int = SPEC.induction_min_heads,
    threshold: float = SPEC.induction,
    floor: float = SPEC.attention_floor,
) -> Milestone:
    """First revision with at least ``min_heads`` heads at induction selectivity >= threshold (heads
    with negligible induction attention not counted)."""
    meets = [len(circuit_of(r, threshold, floor)) >= min_heads for r in by_tokens(records)]
    return first_meeting(f">= {min_heads} heads at induction >= {threshold:g}", tokens_per_revision(records), meets)


def bos_fraction_series(records: Sequence[MeasurementRecord], threshold: float = SPEC.bos,
                        floor: float = SPEC.attention_floor) -> list[float]:
    """BOS fraction (share of all heads with first-token selectivity >= threshold and attention to
    position 0 not negligible) per revision."""
    return [bos_fraction_of(r, threshold, floor) for r in by_tokens(records)]


def t_bos50(
    records: Sequence[MeasurementRecord], level: float = SPEC.bos_level, threshold: float = SPEC.bos,
    floor: float = SPEC.attention_floor,
) -> Milestone:
    """First revision whose BOS fraction is at least ``level``."""
    meets = [f >= level for f in bos_fraction_series(records, threshold, floor)]
    return first_meeting(f"BOS fraction >= {level:g}", tokens_per_revision(records), meets)


def _ratio_bound(num: float, den: float, zero_over_zero: float) -> float:
    """num / den for bracket ends (num, den >= 0, either may be inf): x / 0 is inf for x > 0, and
    0 / 0 (both milestones at a 0-token first revision) the uninformative ``zero_over_zero``."""
    if den == 0:
        return math.inf if num > 0 else zero_over_zero
    return num / den


@dataclass(frozen=True)
class SeparationResult:
    """t_bos50 / t_induction in tokens.

    ``ratio`` is the point estimate (the first revisions at which each milestone is met), None when
    either milestone is right-censored (never met) or t_induction is at 0 tokens. ``bounds`` is what
    the revision grid allows, the open interval (lo, hi): t_bos50 in (b0, b1] and t_induction in
    (i0, i1] give lo = b0 / i1 and hi = b1 / i0, with b1 = inf for a censored t_bos50 (hi = inf),
    i1 = inf for a censored t_induction (lo = 0) and i0 = 0 when t_induction is met at the first
    revision (hi = inf).
    """

    induction: Milestone
    bos: Milestone
    ratio: float | None

    @property
    def bounds(self) -> tuple[float, float]:
        b0, b1 = self.bos.bracket
        i0, i1 = self.induction.bracket
        return (_ratio_bound(b0, i1, 0.0), _ratio_bound(b1, i0, math.inf))

    @property
    def censored(self) -> tuple[str, ...]:
        """The milestones that are right-censored, by name ("t_induction", "t_bos50")."""
        return tuple(name for name, m in (("t_induction", self.induction), ("t_bos50", self.bos)) if m.censored)


def induction_bos_separation(
    records: Sequence[MeasurementRecord],
    min_heads: int = SPEC.induction_min_heads,
    induction_threshold: float = SPEC.induction,
    bos_level: float = SPEC.bos_level,
    bos_threshold: float = SPEC.bos,
    bos: Milestone | None = None,
    floor: float = SPEC.attention_floor,
) -> SeparationResult:
    """Both milestones and their ratio in tokens (docs/SPEC.md §5, F3); ``bos``: t_bos50 already
    found with these settings (F3's sensitivity re-reads only t_induction)."""
    ind = t_induction(records, min_heads, induction_threshold, floor)
    bos = bos if bos is not None else t_bos50(records, bos_level, bos_threshold, floor)
    ratio = None
    if ind.tokens is not None and bos.tokens is not None and ind.tokens > 0:
        ratio = bos.tokens / ind.tokens
    return SeparationResult(ind, bos, ratio)


@dataclass(frozen=True)
class ShapeResult:
    """Shape of a series: "step", "ramp", or "flat" when it does not rise from first to last.

    ``largest_rise`` is the largest increase between adjacent revisions, from index
    ``rise_at - 1`` to ``rise_at``; ``share`` = largest_rise / total_rise.
    """

    shape: str
    first: float
    final: float
    total_rise: float
    largest_rise: float
    rise_at: int | None
    share: float | None


def series_shape(values: Sequence[float], step_share: float = SPEC.step_share) -> ShapeResult:
    """"step" if the largest adjacent rise is >= ``step_share`` of (final - first), else "ramp".

    Decided in exact rational arithmetic on the given numbers (every float is a rational): no
    rounding in the differences, the total or the share can flip a verdict, so the shape of a
    series and of any exact positive affine image of it are the same, ties at ``step_share``
    included (tests/test_trajectory.py). The result's numbers are floats again.
    """
    if not values:
        raise ValueError("an empty series has no shape")
    exact = [Fraction(v) for v in values]
    total = exact[-1] - exact[0]
    rises = [(exact[i] - exact[i - 1], i) for i in range(1, len(exact))]
    largest, at = max(rises, default=(Fraction(0), None), key=lambda t: t[0])
    first, final = float(exact[0]), float(exact[-1])
    if total <= 0:
        # Not rising overall: neither a ramp nor a step up (SPEC's rule divides by this).
        return ShapeResult("flat", first, final, float(total), float(largest), at, None)
    share = largest / total
    shape = "step" if share >= Fraction(step_share) else "ramp"
    return ShapeResult(shape, first, final, float(total), float(largest), at, _as_float(share))


def _as_float(x: Fraction) -> float:
    """A positive rational as the nearest float, infinity beyond float's range (a rise over a
    subnormal total; the share is never negative: a positive total has a positive largest rise)."""
    try:
        return float(x)
    except OverflowError:
        return float("inf")


def bos_shape(
    records: Sequence[MeasurementRecord], step_share: float = SPEC.step_share, threshold: float = SPEC.bos,
    floor: float = SPEC.attention_floor,
) -> ShapeResult:
    """Shape of the BOS-fraction series (docs/SPEC.md §5, F2)."""
    return series_shape(bos_fraction_series(records, threshold, floor), step_share)


# ---- F4: recall of the final induction circuit ------------------------------------------------


@dataclass(frozen=True)
class RecallPoint:
    """Recall of the final circuit at one revision, and which of its heads were found there."""

    point: RevisionPoint
    recall: float
    found: tuple[str, ...]
    circuit_size: int


def recall_series(
    records: Sequence[MeasurementRecord], threshold: float = SPEC.induction,
    intermediate_threshold: float | None = None, floor: float = SPEC.attention_floor,
) -> tuple[frozenset[str], list[RecallPoint]]:
    """The final induction circuit and |C_r ∩ C_final| / |C_final| at every revision.

    The final circuit is taken at ``threshold``; a head counts as found at an earlier revision
    when its induction selectivity there is >= ``intermediate_threshold`` (default: the same
    threshold; F4's second reading counts them at the head-label threshold, 30x). The series is
    empty when the final circuit is empty (recall is undefined then). Heads with negligible
    induction attention are counted neither in the final circuit nor as found.
    """
    recs = by_tokens(records)
    final = circuit_of(recs[-1], threshold, floor)
    if not final:
        return final, []
    at = threshold if intermediate_threshold is None else intermediate_threshold
    out = []
    for i, (p, r) in enumerate(zip(tokens_per_revision(recs), recs)):
        found = final & circuit_of(r, threshold if i == len(recs) - 1 else at, floor)
        out.append(RecallPoint(p, len(found) / len(final), tuple(layer_order(found)), len(final)))
    return final, out


@dataclass(frozen=True)
class ConvergenceResult:
    """First revision whose recall of the final circuit reaches ``level`` (F4)."""

    final_circuit: tuple[str, ...]
    level: float
    point: RecallPoint | None
    total_tokens: float
    series: tuple[RecallPoint, ...]

    @property
    def fraction_of_total(self) -> float | None:
        return self.point.point.tokens / self.total_tokens if self.point else None

    @property
    def fraction_bounds(self) -> tuple[float, float] | None:
        """What the revision grid allows: recall reached after the last revision before the point
        and at or before the point, as fractions of the training tokens."""
        if self.point is None:
            return None
        i = self.point.point.index
        before = self.series[i - 1].point.tokens if i > 0 else 0.0
        return (before / self.total_tokens, self.point.point.tokens / self.total_tokens)


def first_recall_at_least(
    records: Sequence[MeasurementRecord],
    level: float = SPEC.recall_level,
    threshold: float = SPEC.induction,
    total_tokens: float | None = None,
    intermediate_threshold: float | None = None,
    floor: float = SPEC.attention_floor,
) -> ConvergenceResult:
    """Earliest revision with recall >= level; ``total_tokens`` defaults to the last revision's."""
    recs = by_tokens(records)
    total = float(total_tokens if total_tokens is not None else recs[-1].tokens_seen)  # type: ignore[arg-type]
    final, series = recall_series(recs, threshold, intermediate_threshold, floor)
    # No tolerance: k / n and a level written as the same ratio (2 / 3) round to the same float.
    point = next((p for p in series if p.recall >= level), None)
    return ConvergenceResult(tuple(layer_order(final)), level, point, total, tuple(series))


# ---- F5: PR elevation precedes the selectivity crossing ----------------------------------------


@dataclass(frozen=True)
class HeadLead:
    """For one head: first revision with elevated PR vs first with induction >= threshold.

    ``holds`` when the head is elevated at or before it crosses; ``lead`` = crossing tokens /
    elevation tokens (how many times earlier, in tokens, PR was elevated).
    """

    head: str
    elevated: RevisionPoint | None
    crossed: RevisionPoint | None
    pr_series: tuple[float, ...]
    selectivity_series: tuple[float, ...]

    @property
    def holds(self) -> bool:
        if self.crossed is None:
            return True  # never crosses: nothing to precede (not a final induction head)
        return self.elevated is not None and self.elevated.index <= self.crossed.index

    @property
    def timing(self) -> str | None:
        """"before" (elevated at a revision before the crossing), "at" (at the crossing revision
        itself), "after", "never" (never elevated); None when the head never crosses."""
        if self.crossed is None:
            return None
        if self.elevated is None:
            return "never"
        i, c = self.elevated.index, self.crossed.index
        return "before" if i < c else "at" if i == c else "after"

    @property
    def lead(self) -> float | None:
        if self.elevated is None or self.crossed is None or self.elevated.tokens <= 0:
            return None
        return self.crossed.tokens / self.elevated.tokens


def head_lead(
    records: Sequence[MeasurementRecord],
    head: str,
    fraction: float = SPEC.pr_elevation_fraction,
    threshold: float = SPEC.induction,
    floor: float = SPEC.attention_floor,
) -> HeadLead:
    """Elevation and crossing revisions of one head; every record needs ``pr`` and ``d_head``. The
    head crosses at the first revision where its induction selectivity is >= threshold and its
    induction attention is not negligible there."""
    recs = by_tokens(records)
    missing = [r.revision for r in recs if r.pr is None or head not in r.pr]
    if missing:
        raise InputError(f"no PR for {head} at revisions {missing} of {recs[0].model}: those records' pr tables "
                         "lack a head of the final circuit; measure them again (or drop pr from every record to "
                         "leave F5 not applicable)")
    if any(r.d_head <= 1 for r in recs):
        raise ValueError(f"d_head unknown for {recs[0].model}: PR elevation needs the head dimension")
    points = tokens_per_revision(recs)
    prs = tuple(float(r.pr[head]) for r in recs)  # type: ignore[index]
    sels = tuple(float(r.all_head_selectivity[head]["induction"]) for r in recs)
    elevated = next((p for p, r, v in zip(points, recs, prs) if is_elevated(v, r.d_head, fraction)), None)
    crossed = next((p for p, r, s in zip(points, recs, sels)
                    if s >= threshold and head not in r.negligible_heads("induction", floor)), None)
    return HeadLead(head, elevated, crossed, prs, sels)


@dataclass(frozen=True)
class PrLeadResult:
    """F5 over the final induction circuit at one elevation fraction."""

    fraction: float
    heads: tuple[HeadLead, ...]
    failing: tuple[str, ...] = field(default=())

    @property
    def holds(self) -> bool:
        return bool(self.heads) and not self.failing


def has_pr(records: Sequence[MeasurementRecord]) -> bool:
    """Whether every revision carries per-head PR and the head dimension (F5 applies)."""
    return all(r.pr is not None and r.d_head > 1 for r in records)


def pr_lead(
    records: Sequence[MeasurementRecord],
    fraction: float = SPEC.pr_elevation_fraction,
    threshold: float = SPEC.induction,
    floor: float = SPEC.attention_floor,
) -> PrLeadResult:
    """F5 for every head of the final induction circuit."""
    recs = by_tokens(records)
    final = layer_order(circuit_of(recs[-1], threshold, floor))
    leads = tuple(head_lead(recs, h, fraction, threshold, floor) for h in final)
    return PrLeadResult(fraction, leads, tuple(l.head for l in leads if not l.holds))


@dataclass(frozen=True)
class HeadNull:
    """How unusual one final induction head's F5 pass is (docs/statistics.md).

    ``level_null_share``: the share of ALL heads whose PR is elevated at or before this head's
    crossing revision (they would pass the level rule against that revision too);
    ``before_null_share``: the share elevated strictly before it (0 at the first revision);
    ``rises``: the rise rule, PR at some revision after the first and at or before the crossing is
    >= (1 + rise_fraction) x its first-revision PR (None: the head crosses at the first revision);
    ``rise_null_share``: the share of ALL heads that rise so by the crossing.
    """

    head: str
    level_null_share: float
    rises: bool | None
    rise_null_share: float | None
    before_null_share: float


def elevated_by(records: Sequence[MeasurementRecord], index: int,
                fraction: float = SPEC.pr_elevation_fraction) -> frozenset[str]:
    """Heads whose PR is elevated at some revision up to and including ``index`` (token order; none
    for index -1, before the first revision). Every record needs ``pr``."""
    recs = by_tokens(records)[: index + 1]
    return frozenset(h for r in recs for h, v in r.pr.items() if is_elevated(v, r.d_head, fraction))  # type: ignore[union-attr]


def rises_by(pr_series: Sequence[float], index: int, rise_fraction: float = SPEC.f5_rise_fraction) -> bool | None:
    """Whether PR at a revision 1..index is >= (1 + rise_fraction) x PR at revision 0 (None: index 0)."""
    if index < 1:
        return None
    return any(pr_series[j] >= (1 + rise_fraction) * pr_series[0] for j in range(1, index + 1))


def head_nulls(records: Sequence[MeasurementRecord], leads: Sequence[HeadLead],
               fraction: float = SPEC.pr_elevation_fraction,
               rise_fraction: float = SPEC.f5_rise_fraction) -> tuple[HeadNull, ...]:
    """:class:`HeadNull` of each final induction head that crosses (every record needs ``pr``)."""
    recs = by_tokens(records)
    heads = list(recs[0].pr)  # type: ignore[arg-type]
    series = {h: [float(r.pr[h]) for r in recs] for h in heads}  # type: ignore[index]
    out = []
    for lead in leads:
        if lead.crossed is None:
            continue
        i = lead.crossed.index
        level = len(elevated_by(recs, i, fraction)) / len(heads)
        before = len(elevated_by(recs, i - 1, fraction)) / len(heads)
        rises = rises_by(lead.pr_series, i, rise_fraction)
        rise_null = None if i < 1 else sum(bool(rises_by(series[h], i, rise_fraction)) for h in heads) / len(heads)
        out.append(HeadNull(lead.head, level, rises, rise_null, before))
    return tuple(out)


@dataclass(frozen=True)
class F5Null:
    """F5's null: the probability that as many heads as the final circuit, drawn at random (distinct,
    from all ``n_heads``) and each tested against one final head's crossing revision, would ALL pass
    as the final heads did (:func:`headwatch.stats.nested_draw_probability`; exact).

    ``at_or_before``: SPEC's level rule (elevated at or before the crossing: what F5 asserts);
    ``before``: elevated strictly before the crossing; ``rise``: the rise rule, over the heads that
    cross after the first revision (None: none does). ``layer_matched``: the level rule's null with
    each random head drawn from its final head's layer (distinct heads; layers differ in how early
    their PR rises, so this null asks whether the final heads stand out within their own layers).
    """

    n_heads: int
    at_or_before: float
    before: float
    rise: float | None
    layer_matched: float = 1.0


def f5_null(records: Sequence[MeasurementRecord], leads: Sequence[HeadLead],
            fraction: float = SPEC.pr_elevation_fraction,
            rise_fraction: float = SPEC.f5_rise_fraction) -> F5Null | None:
    """:class:`F5Null` for the final heads ``leads`` (None: no head crosses). Every record needs ``pr``."""
    recs = by_tokens(records)
    heads = list(recs[0].pr)  # type: ignore[arg-type]
    crossed = [l for l in leads if l.crossed is not None]
    crossings = [l.crossed.index for l in crossed]  # type: ignore[union-attr]
    if not crossings:
        return None
    series = {h: [float(r.pr[h]) for r in recs] for h in heads}  # type: ignore[index]
    n = len(heads)

    def p(sizes: list[int]) -> float:
        return float(nested_draw_probability(sizes, n))

    elevated = {i: elevated_by(recs, i, fraction) for i in set(crossings)}
    at = p([len(elevated[i]) for i in crossings])
    before = p([len(elevated_by(recs, i - 1, fraction)) for i in crossings])
    rising = [sum(bool(rises_by(series[h], i, rise_fraction)) for h in heads) for i in crossings if i >= 1]
    # layer-matched: within each layer the sets are nested too, and draws in different layers are independent
    layer_of = {h: parse_head_key(h)[0] for h in heads}
    by_layer: dict[int, list[int]] = {}
    for l, i in zip(crossed, crossings):
        by_layer.setdefault(layer_of[l.head], []).append(i)
    layer_p = 1.0
    for layer, indices in by_layer.items():
        members = [h for h in heads if layer_of[h] == layer]
        sizes = [sum(layer_of[h] == layer for h in elevated[i]) for i in indices]
        layer_p *= float(nested_draw_probability(sizes, len(members)))
    return F5Null(n, at, before, p(rising) if rising else None, layer_p)


# ---- causal check ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Top1Count:
    """Top-1 as a count: ``k`` of ``n`` examples; ``reconstructed`` when k came from rate x N."""

    k: int
    n: int
    reconstructed: bool

    @property
    def rate(self) -> float:
        return self.k / self.n


def top1_count(metrics: TaskMetrics, n_examples: int | None) -> Top1Count | None:
    """The record's own count where it has one, else rate x ``n_examples`` (None if N is unknown)."""
    if metrics.n is not None and metrics.top1_count is not None:
        return Top1Count(metrics.top1_count, metrics.n, False)
    if n_examples is None:
        return None
    try:
        return Top1Count(count_from_rate(metrics.top1, n_examples), n_examples, True)
    except ValueError as e:  # a hand-edited or foreign record: bad input, not a defect
        raise InputError(f"a record's task.top1 {metrics.top1!r}: {e}") from None


@dataclass(frozen=True)
class AblationVerdict:
    """Top-1 with the circuit ablated vs baseline and vs the matched-random control.

    The point rules (``cuts_enough``: circuit top-1 <= max_share x baseline; ``below_random``:
    circuit top-1 < random top-1) and the exact tests on the counts (None where counts are unknown):
    ``p_vs_random`` (circuit below random) and ``p_vs_bar`` (circuit below max_share x baseline).
    On two independent counts (the records keep counts only): Boschloo's exact unconditional test
    (:func:`headwatch.stats.boschloo_less`) and the exact unconditional ratio test
    (:func:`headwatch.stats.ratio_below_unconditional`); where per-example outcomes were paired
    (``paired_bar``: examples correct in both passes, with the ablation only, at baseline only;
    ``paired_random``: circuit-ablated correct only, matched-random correct only), the paired tests
    (:func:`headwatch.stats.paired_ratio_below`, :func:`headwatch.stats.mcnemar_less`).
    ``beats_random`` and ``meets_bar`` need p < alpha: the bar is established, not only met at the
    point estimate.
    """

    baseline_top1: float
    circuit_top1: float
    random_top1: float | None
    circuit_heads: tuple[str, ...]
    random_heads: tuple[str, ...]
    max_share: float
    alpha: float = SPEC.causal_alpha
    baseline_count: Top1Count | None = None
    circuit_count: Top1Count | None = None
    random_count: Top1Count | None = None
    #: (both, ablated only, baseline only) correct, on the same examples; None: not recorded.
    paired_bar: tuple[int, int, int] | None = None
    #: (circuit-ablated only, matched-random only) correct, on the same examples; None: not recorded.
    paired_random: tuple[int, int] | None = None

    @property
    def method_bar(self) -> str:
        return RATIO_TEST_PAIRED if self.paired_bar is not None else RATIO_TEST_UNCONDITIONAL

    @property
    def method_random(self) -> str:
        return MCNEMAR if self.paired_random is not None else BOSCHLOO

    @property
    def share_of_baseline(self) -> float | None:
        return self.circuit_top1 / self.baseline_top1 if self.baseline_top1 > 0 else None

    @property
    def cuts_enough(self) -> bool:
        return self.circuit_top1 <= self.max_share * self.baseline_top1

    @property
    def below_random(self) -> bool:
        return self.random_top1 is not None and self.circuit_top1 < self.random_top1

    @property
    def p_vs_random(self) -> float | None:
        if self.paired_random is not None:
            return mcnemar_less(*self.paired_random)
        c, r = self.circuit_count, self.random_count
        return None if c is None or r is None else boschloo_less(c.k, c.n, r.k, r.n)

    @property
    def p_vs_bar(self) -> float | None:
        """Exact one-sided p against "circuit top-1 >= max_share x baseline" (small: the cut is established)."""
        if self.paired_bar is not None:
            return paired_ratio_below(*self.paired_bar, self.max_share)
        c, b = self.circuit_count, self.baseline_count
        return None if c is None or b is None else ratio_below_unconditional(c.k, c.n, b.k, b.n, self.max_share)

    @property
    def beats_random(self) -> bool:
        """The exact test: circuit below random with p < alpha (a one-sided p below alpha < 0.5 puts
        the circuit's rate below random's, so the point rule needs no second check here)."""
        p = self.p_vs_random
        return p is not None and p < self.alpha

    @property
    def meets_bar(self) -> bool:
        """The exact test of the bar: circuit top-1 below max_share x baseline with p < alpha."""
        p = self.p_vs_bar
        return p is not None and p < self.alpha

    @property
    def holds(self) -> bool:
        """Both point rules and both exact tests."""
        return self.cuts_enough and self.beats_random and self.meets_bar


def ablation_verdict(record: MeasurementRecord, max_share: float = SPEC.ablation_max_share,
                     alpha: float = SPEC.causal_alpha) -> AblationVerdict | None:
    """The causal check on a record with ``task`` and an ``induction_circuit`` ablation, else None.

    Counts: the record's own, else rate x the record's number of examples (published files).
    """
    circuit = record.ablation("induction_circuit")
    if record.task is None or circuit is None:
        return None
    rnd = record.ablation("matched_random")
    if rnd is not None and not rnd.heads:  # ablating no head is the baseline, not a control
        rnd = None
    n = record.settings.n_examples if record.settings is not None else None
    return AblationVerdict(
        baseline_top1=record.task.top1,
        circuit_top1=circuit.metrics.top1,
        random_top1=rnd.metrics.top1 if rnd else None,
        circuit_heads=tuple(circuit.heads),
        random_heads=tuple(rnd.heads) if rnd else (),
        max_share=max_share,
        alpha=alpha,
        baseline_count=top1_count(record.task, n),
        circuit_count=top1_count(circuit.metrics, n),
        random_count=top1_count(rnd.metrics, n) if rnd else None,
    )


@dataclass(frozen=True)
class CopyableReading:
    """The causal check read on every copyable position of repeated sequences (probes/copying.py).

    Rates are shares of all ``positions`` (``n_sequences`` x positions per sequence). The tests
    resample whole sequences (:func:`headwatch.stats.sequence_bootstrap_totals`; the same draws for
    every condition): ``p_vs_bar`` against "circuit >= max_share x baseline", ``p_vs_random``
    against "circuit >= matched random", each (1 + resamples at or beyond the null) / (1 +
    resamples). With fewer than :data:`headwatch.stats.MIN_BOOTSTRAP_SEQUENCES` sequences no test
    is made (the p-values are None).
    """

    n_sequences: int
    positions: int
    baseline_rate: float
    circuit_rate: float
    random_rate: float | None
    max_share: float
    alpha: float
    #: interval (at the records' level) of circuit / baseline over the resamples; None without a test
    share_interval: tuple[float, float] | None
    p_vs_bar: float | None
    p_vs_random: float | None
    method: str = SEQUENCE_BOOTSTRAP

    @property
    def share_of_baseline(self) -> float | None:
        return self.circuit_rate / self.baseline_rate if self.baseline_rate > 0 else None

    @property
    def enough_sequences(self) -> bool:
        return self.n_sequences >= MIN_BOOTSTRAP_SEQUENCES

    @property
    def cuts_enough(self) -> bool:
        return self.baseline_rate > 0 and self.circuit_rate <= self.max_share * self.baseline_rate

    @property
    def below_random(self) -> bool:
        return self.random_rate is not None and self.circuit_rate < self.random_rate

    @property
    def meets_bar(self) -> bool:
        return self.p_vs_bar is not None and self.p_vs_bar < self.alpha

    @property
    def beats_random(self) -> bool:
        return self.p_vs_random is not None and self.p_vs_random < self.alpha

    @property
    def holds(self) -> bool:
        return self.cuts_enough and self.below_random and self.meets_bar and self.beats_random


def copyable_reading(record: MeasurementRecord, max_share: float = SPEC.ablation_max_share,
                     alpha: float = SPEC.causal_alpha, n_resamples: int = SPEC.n_bootstrap,
                     seed: int = SPEC.bootstrap_seed, level: float = SPEC.interval_level) -> CopyableReading | None:
    """The copyable-position reading of ``record``'s ablations, or None where it was not measured
    (no ``copy_reading``, or no circuit ablation in it)."""
    copy = record.copy_reading
    if copy is None or "induction_circuit" not in copy.hits or "baseline" not in copy.hits:
        return None
    conditions = {name: copy.hits[name] for name in ("baseline", "induction_circuit", "matched_random")
                  if name in copy.hits}
    positions = copy.n_sequences * copy.positions_per_sequence
    rates = {name: sum(counts) / positions for name, counts in conditions.items()}
    share_interval = p_bar = p_random = None
    if copy.n_sequences >= MIN_BOOTSTRAP_SEQUENCES:
        totals = sequence_bootstrap_totals(conditions, n_resamples, seed)
        with np.errstate(divide="ignore", invalid="ignore"):
            shares = np.where(totals["baseline"] > 0, totals["induction_circuit"] / totals["baseline"], np.nan)
        if rates["baseline"] > 0:
            lo, hi = percentile_interval(shares[np.isfinite(shares)], level)
            share_interval = (float(lo), float(hi))
            p_bar = bootstrap_p_at_least(shares, max_share)
        if "matched_random" in totals:
            p_random = bootstrap_p_at_least(totals["induction_circuit"] - totals["matched_random"], 0.0)
    return CopyableReading(
        n_sequences=copy.n_sequences, positions=positions, baseline_rate=rates["baseline"],
        circuit_rate=rates["induction_circuit"], random_rate=rates.get("matched_random"), max_share=max_share,
        alpha=alpha, share_interval=share_interval, p_vs_bar=p_bar, p_vs_random=p_random)


def ablations_measured_on(record: MeasurementRecord) -> str:
    """The revision a record's ablations were measured on: the record's own, or the one the source
    file names where it differs (the published OLMo ablation names ``main``, attached to the last
    screened revision: fixtures/published/PROVENANCE.md)."""
    source = record.provenance.get("ablation_file") or {}
    return str(source.get("revision_in_file") or record.revision)


def last_with_ablations(records: Sequence[MeasurementRecord]) -> MeasurementRecord | None:
    """The latest revision that carries the causal check's ablations."""
    return next((r for r in reversed(by_tokens(records)) if r.ablation("induction_circuit")), None)
