"""Trajectory quantities of docs/SPEC.md §5: plain functions over a model's measurement records.

Every function takes the records of ONE model (any order; they are sorted by tokens seen here) and
returns a small typed result. Head sets come from :mod:`probes.selectivity`, never recomputed here.
Nothing in this module knows which model is which or what the paper found: expectations live in
the panel files and verdicts in :mod:`headwatch.claims.judge`; every default is :data:`headwatch.spec.SPEC`'s.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from headwatch.probes.participation import is_elevated
from headwatch.probes.record import MeasurementRecord, parse_head_key
from headwatch.probes.selectivity import bos_fraction, bos_heads, induction_circuit
from headwatch.spec import SPEC



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


# ---- F1: BOS heads in the early layers ---------------------------------------------------------


def early_layer_bos_heads(
    record: MeasurementRecord, layers: Iterable[int] = SPEC.f1_layers, threshold: float = SPEC.bos
) -> list[str]:
    """BOS heads (first-token selectivity >= threshold) that sit in ``layers``."""
    wanted = set(layers)
    return layer_order(h for h in bos_heads(record.all_head_selectivity, threshold) if parse_head_key(h)[0] in wanted)


# ---- milestones, BOS fraction and its shape (F2, F3) ------------------------------------------


@dataclass(frozen=True)
class Milestone:
    """The first revision meeting a condition; ``point`` is None when no revision does."""

    what: str
    point: RevisionPoint | None

    @property
    def tokens(self) -> float | None:
        return self.point.tokens if self.point else None

    @property
    def revision(self) -> str | None:
        return self.point.revision if self.point else None


def t_induction(
    records: Sequence[MeasurementRecord],
    min_heads: int = SPEC.induction_min_heads,
    threshold: float = SPEC.induction,
) -> Milestone:
    """First revision with at least ``min_heads`` heads at induction selectivity >= threshold."""
    for p, r in zip(tokens_per_revision(records), by_tokens(records)):
        if len(induction_circuit(r.all_head_selectivity, threshold)) >= min_heads:
            return Milestone(f">= {min_heads} heads at induction >= {threshold:g}", p)
    return Milestone(f">= {min_heads} heads at induction >= {threshold:g}", None)


def bos_fraction_series(records: Sequence[MeasurementRecord], threshold: float = SPEC.bos) -> list[float]:
    """BOS fraction (share of all heads with first-token selectivity >= threshold) per revision."""
    return [bos_fraction(r.all_head_selectivity, threshold) for r in by_tokens(records)]


def t_bos50(
    records: Sequence[MeasurementRecord], level: float = SPEC.bos_level, threshold: float = SPEC.bos
) -> Milestone:
    """First revision whose BOS fraction is at least ``level``."""
    for p, f in zip(tokens_per_revision(records), bos_fraction_series(records, threshold)):
        if f >= level:
            return Milestone(f"BOS fraction >= {level:g}", p)
    return Milestone(f"BOS fraction >= {level:g}", None)


@dataclass(frozen=True)
class SeparationResult:
    """t_bos50 / t_induction in tokens; ``ratio`` is None when either milestone is never reached."""

    induction: Milestone
    bos: Milestone
    ratio: float | None


def induction_bos_separation(
    records: Sequence[MeasurementRecord],
    min_heads: int = SPEC.induction_min_heads,
    induction_threshold: float = SPEC.induction,
    bos_level: float = SPEC.bos_level,
    bos_threshold: float = SPEC.bos,
) -> SeparationResult:
    """Both milestones and their ratio in tokens (docs/SPEC.md §5, F3)."""
    ind = t_induction(records, min_heads, induction_threshold)
    bos = t_bos50(records, bos_level, bos_threshold)
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
    """"step" if the largest adjacent rise is >= ``step_share`` of (final - first), else "ramp"."""
    if not values:
        raise ValueError("an empty series has no shape")
    first, final = float(values[0]), float(values[-1])
    total = final - first
    rises = [(float(values[i]) - float(values[i - 1]), i) for i in range(1, len(values))]
    largest, at = max(rises, default=(0.0, None), key=lambda t: t[0])
    if total <= 0:
        # Not rising overall: neither a ramp nor a step up (SPEC's rule divides by this).
        return ShapeResult("flat", first, final, total, largest, at, None)
    share = largest / total
    return ShapeResult("step" if share >= step_share else "ramp", first, final, total, largest, at, share)


def bos_shape(
    records: Sequence[MeasurementRecord], step_share: float = SPEC.step_share, threshold: float = SPEC.bos
) -> ShapeResult:
    """Shape of the BOS-fraction series (docs/SPEC.md §5, F2)."""
    return series_shape(bos_fraction_series(records, threshold), step_share)


# ---- F4: recall of the final induction circuit ------------------------------------------------


@dataclass(frozen=True)
class RecallPoint:
    """Recall of the final circuit at one revision, and which of its heads were found there."""

    point: RevisionPoint
    recall: float
    found: tuple[str, ...]
    circuit_size: int


def recall_series(
    records: Sequence[MeasurementRecord], threshold: float = SPEC.induction
) -> tuple[frozenset[str], list[RecallPoint]]:
    """The final induction circuit and |C_r ∩ C_final| / |C_final| at every revision.

    The series is empty when the final circuit is empty (recall is undefined then).
    """
    recs = by_tokens(records)
    final = induction_circuit(recs[-1].all_head_selectivity, threshold)
    if not final:
        return final, []
    out = []
    for p, r in zip(tokens_per_revision(recs), recs):
        found = final & induction_circuit(r.all_head_selectivity, threshold)
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


def first_recall_at_least(
    records: Sequence[MeasurementRecord],
    level: float = SPEC.recall_level,
    threshold: float = SPEC.induction,
    total_tokens: float | None = None,
) -> ConvergenceResult:
    """Earliest revision with recall >= level; ``total_tokens`` defaults to the last revision's."""
    recs = by_tokens(records)
    total = float(total_tokens if total_tokens is not None else recs[-1].tokens_seen)  # type: ignore[arg-type]
    final, series = recall_series(recs, threshold)
    # A small tolerance so that 2 of 3 heads counts as reaching 2/3 despite float rounding.
    point = next((p for p in series if p.recall >= level - 1e-9), None)
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
    def lead(self) -> float | None:
        if self.elevated is None or self.crossed is None or self.elevated.tokens <= 0:
            return None
        return self.crossed.tokens / self.elevated.tokens


def head_lead(
    records: Sequence[MeasurementRecord],
    head: str,
    fraction: float = SPEC.pr_elevation_fraction,
    threshold: float = SPEC.induction,
) -> HeadLead:
    """Elevation and crossing revisions of one head; every record needs ``pr`` and ``d_head``."""
    recs = by_tokens(records)
    missing = [r.revision for r in recs if r.pr is None or head not in r.pr]
    if missing:
        raise ValueError(f"no PR for {head} at revisions {missing} of {recs[0].model}")
    if any(r.d_head <= 1 for r in recs):
        raise ValueError(f"d_head unknown for {recs[0].model}: PR elevation needs the head dimension")
    points = tokens_per_revision(recs)
    prs = tuple(float(r.pr[head]) for r in recs)  # type: ignore[index]
    sels = tuple(float(r.all_head_selectivity[head]["induction"]) for r in recs)
    elevated = next((p for p, r, v in zip(points, recs, prs) if is_elevated(v, r.d_head, fraction)), None)
    crossed = next((p for p, s in zip(points, sels) if s >= threshold), None)
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
) -> PrLeadResult:
    """F5 for every head of the final induction circuit."""
    recs = by_tokens(records)
    final = layer_order(induction_circuit(recs[-1].all_head_selectivity, threshold))
    leads = tuple(head_lead(recs, h, fraction, threshold) for h in final)
    return PrLeadResult(fraction, leads, tuple(l.head for l in leads if not l.holds))


# ---- causal check ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AblationVerdict:
    """Top-1 with the circuit ablated vs baseline and vs the matched-random control."""

    baseline_top1: float
    circuit_top1: float
    random_top1: float | None
    circuit_heads: tuple[str, ...]
    random_heads: tuple[str, ...]
    max_share: float

    @property
    def share_of_baseline(self) -> float | None:
        return self.circuit_top1 / self.baseline_top1 if self.baseline_top1 > 0 else None

    @property
    def cuts_enough(self) -> bool:
        return self.circuit_top1 <= self.max_share * self.baseline_top1

    @property
    def beats_random(self) -> bool:
        return self.random_top1 is not None and self.circuit_top1 < self.random_top1

    @property
    def holds(self) -> bool:
        return self.cuts_enough and self.beats_random


def ablation_verdict(record: MeasurementRecord, max_share: float = SPEC.ablation_max_share) -> AblationVerdict | None:
    """The causal check on a record with ``task`` and an ``induction_circuit`` ablation, else None."""
    circuit = record.ablation("induction_circuit")
    if record.task is None or circuit is None:
        return None
    rnd = record.ablation("matched_random")
    if rnd is not None and not rnd.heads:  # ablating no head is the baseline, not a control
        rnd = None
    return AblationVerdict(
        baseline_top1=record.task.top1,
        circuit_top1=circuit.metrics.top1,
        random_top1=rnd.metrics.top1 if rnd else None,
        circuit_heads=tuple(circuit.heads),
        random_heads=tuple(rnd.heads) if rnd else (),
        max_share=max_share,
    )


def last_with_ablations(records: Sequence[MeasurementRecord]) -> MeasurementRecord | None:
    """The latest revision that carries the causal check's ablations."""
    return next((r for r in reversed(by_tokens(records)) if r.ablation("induction_circuit")), None)
