"""A claim's verdict as a typed value with one JSON form (``to_dict`` / ``from_dict``).

The judge (:mod:`headwatch.claims.judge`) makes them; the claim tests, ``headwatch judge --json``,
the figures and the report read them. ``details`` is one dataclass per claim (:data:`DETAILS`, filled
from each registered claim's ``details``), whose field names are the JSON keys.

The vocabulary (:class:`Status`), shared by judge, tests, ``headwatch judge --json`` and report,
with every word it is shown in (:data:`WORDS`: the one place; README and docs/statistics.md show it):

- ``holds``: the claim holds and the evidence establishes it (intervals clear the bar).
- ``holds_vacuously``: it holds because there is nothing it could fail on (F1 with no first-token
  head at all).
- ``consistent_not_established``: the evidence is all there and does not exclude the claim, but
  does not establish it either (F3's ratio interval straddles the bar, an F1 interval reaches 30, a
  causal p-value >= alpha, F5 passed by random heads with probability >= alpha).
- ``not_established``: evidence the claim needs is missing from the records (no matched-random
  ablation, no PR, no top-1 counts); the message names what is missing; nothing measured
  contradicts the claim.
- ``fails``: the claim is false on these records (the data exclude it).
- ``not_applicable``: the claim does not apply (not a DCLM model, no declared shape, no induction
  head at the final revision, a control the panel says does not exist).
- ``not_judged``: the subject did not form (a model organism without its circuit): claims are
  not judged.
- ``crashed``: the claim's judge raised (a bug in that claim, not a finding); the other claims of
  the model are judged all the same.

How a status becomes a pytest outcome is decided in one place:
:data:`headwatch.claims.check.PYTEST_OUTCOME`. :func:`check_deviation` decides whether a
declared deviation matches what was measured.
"""
from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headwatch.formatting import CLOSED, Bound, fmt_interval
from headwatch.schema import from_data, to_data
from headwatch.spec import Deviation
from headwatch.validation import InputError


class Status(str, enum.Enum):
    HOLDS = "holds"
    HOLDS_VACUOUSLY = "holds_vacuously"
    CONSISTENT_NOT_ESTABLISHED = "consistent_not_established"
    NOT_ESTABLISHED = "not_established"
    FAILS = "fails"
    NOT_APPLICABLE = "not_applicable"
    NOT_JUDGED = "not_judged"
    CRASHED = "crashed"

    @classmethod
    def of(cls, holds: bool | None) -> "Status":
        """A three-valued judgement as a status."""
        return cls.NOT_APPLICABLE if holds is None else (cls.HOLDS if holds else cls.FAILS)

    @property
    def holds(self) -> bool | None:
        """True for the holding statuses, False for ``fails``, None where no verdict is given
        (not applicable, not judged, not established, consistent but not established)."""
        if self in (Status.HOLDS, Status.HOLDS_VACUOUSLY):
            return True
        return False if self is Status.FAILS else None

    @property
    def words(self) -> str:
        """The status as the terminal, JSON and skip reasons write it."""
        return WORDS[self].words


@dataclass(frozen=True)
class Words:
    """How one status is shown: ``words`` (terminal, ``status_words`` in JSON, skip reasons),
    ``label`` (the report's verdict cells), ``short`` (the sensitivity grid's cells) and
    ``meaning`` (the vocabulary tables of README and docs/statistics.md)."""

    words: str
    label: str
    short: str
    meaning: str


#: Every word a verdict status is shown in: the one place.
WORDS: dict[Status, Words] = {
    Status.HOLDS: Words("holds", "holds", "holds", "the evidence establishes the claim"),
    Status.HOLDS_VACUOUSLY: Words("holds vacuously", "holds vacuously", "vacuous",
                                  "nothing to fail on (F1 with no first-token head anywhere)"),
    Status.CONSISTENT_NOT_ESTABLISHED: Words(
        "consistent, not established", "consistent, not established", "consistent",
        "the evidence does not exclude the claim and does not establish it (an interval straddles the bar, "
        "an exact test or null probability is not below alpha)"),
    Status.NOT_ESTABLISHED: Words("not established", "not established", "not established",
                                  "evidence the claim needs is missing from the records (named in the message)"),
    Status.FAILS: Words("fails", "FAILS", "FAILS", "the data exclude the claim"),
    Status.NOT_APPLICABLE: Words("not applicable", "n/a", "n/a",
                                 "the claim does not apply (not DCLM, no shape declared, no final induction head, "
                                 "a control the panel says does not exist)"),
    Status.NOT_JUDGED: Words("not judged", "not judged (did not form)", "not judged",
                             "an organism did not form its circuit (`[models.expect.formation]`)"),
    Status.CRASHED: Words("crashed", "CRASHED (its judge raised)", "crashed",
                          "the claim's judge raised an exception: a bug in the claim, not a finding (the message "
                          "gives it; the other claims are judged all the same)"),
}
#: Each status in words (README's vocabulary).
STATUS_WORDS: dict[Status, str] = {s: w.words for s, w in WORDS.items()}


class DeclaredOutcome(str, enum.Enum):
    """How a claim the panel declares a known deviation turned out."""

    MATCHED = "expected deviation"      # it failed as declared: strict xfail
    MISMATCH = "deviation mismatch"     # it failed otherwise than declared
    GONE = "deviation gone"             # it held: the declared deviation did not occur

    @property
    def label(self) -> str:
        """The report's cell label."""
        return _DECLARED_LABEL[self]

    @property
    def suffix(self) -> str:
        """What the terminal adds after the status words."""
        return _DECLARED_SUFFIX[self]


_DECLARED_LABEL = {DeclaredOutcome.MATCHED: "expected deviation (xfail)",
                   DeclaredOutcome.MISMATCH: "FAILS, not as declared",
                   DeclaredOutcome.GONE: "declared deviation did not occur"}
_DECLARED_SUFFIX = {DeclaredOutcome.MATCHED: "declared known deviation",
                    DeclaredOutcome.MISMATCH: "declared deviation does NOT match",
                    DeclaredOutcome.GONE: "declared deviation did NOT occur"}


def declared_outcome(verdict: "Verdict") -> DeclaredOutcome | None:
    """How the panel's declared deviation for this verdict turned out (None: none declared, or the
    verdict neither fails nor holds)."""
    declared = verdict.declared_deviation
    if declared is None:
        return None
    if verdict.status is Status.FAILS:
        return DeclaredOutcome.MATCHED if check_deviation(verdict, declared).matches else DeclaredOutcome.MISMATCH
    return DeclaredOutcome.GONE if verdict.holds else None


@dataclass(frozen=True)
class KeyFigure:
    """The number a verdict turns on, its bar, and how sure it is.

    ``interval`` (lo, hi) is the quantity's interval (None bound: open, e.g. an infinite ratio
    bound); ``method`` says how it was obtained, or why there is none ("no interval: published
    means"); ``p_value`` is an exact test's (causal). ``value`` is what a declared deviation's
    ``key = [lo, hi]`` is checked against.
    """

    quantity: str
    value: float | None
    bar: float | None = None
    interval: Bound | None = None
    method: str = ""
    p_value: float | None = None
    #: how ``interval``'s ends are written (headwatch.formatting's CLOSED, GRID, OPEN)
    ends: str = CLOSED

    def interval_text(self) -> str:
        """The interval in the one notation ('' when there is none)."""
        return fmt_interval(self.interval, ends=self.ends)


# ---- per-claim details ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """A revision and the tokens seen there."""

    revision: str
    tokens: float


@dataclass(frozen=True)
class NegligibleHead:
    """A head over a head set's threshold that is not counted: its mean attention to the class
    target is below the attention floor (docs/statistics.md#negligible-attention)."""

    revision: str
    head: str
    #: the class whose selectivity it is ("induction", "first-token", ...)
    cls: str
    selectivity: float
    #: mean attention to the class target, and the floor it falls below (floor_share / T)
    attention: float
    floor: float


#: What a verdict's ``attention_floor`` says where the records carry no attention.
NO_ATTENTION = "no attention mass in the record: the floor is not applied"


@dataclass(frozen=True)
class F1Violation:
    revision: str
    tokens: float | None
    heads: tuple[str, ...]


@dataclass(frozen=True)
class F1Details:
    """F1 over all revisions (``revisions_checked`` > 0) or at one (``revision`` set)."""

    layers: tuple[int, ...]
    threshold: float
    revisions_checked: int = 0
    violations: tuple[F1Violation, ...] = ()
    #: highest first-token selectivity in ``layers`` over the revisions judged, where, and its interval
    peak_selectivity: float | None = None
    peak_head: str | None = None
    revision: str | None = None
    tokens: float | None = None
    heads: tuple[str, ...] = ()
    first_token_selectivity: Mapping[str, float | None] = field(default_factory=dict)
    peak_revision: str | None = None
    peak_interval: tuple[float, float] | None = None
    interval_method: str = ""
    #: the largest upper interval bound of any head in ``layers`` (decides "established")
    highest_upper_bound: float | None = None
    #: BOS heads in any layer (per revision: there; over all: the most at any revision); 0: vacuous
    bos_heads_anywhere: int = 0
    #: revisions with no BOS head in any layer (F1 is vacuous there)
    vacuous_revisions: tuple[str, ...] = ()
    #: heads over the threshold left out by the attention floor, and whether the floor applied
    negligible_heads: tuple[NegligibleHead, ...] = ()
    attention_floor: str = ""


@dataclass(frozen=True)
class F2Details:
    shape: str
    expected: str | None
    first_pct: float | None
    final_pct: float | None
    largest_rise_points: float | None
    total_rise_points: float | None
    share: float | None
    step_share: float
    largest_rise: Mapping[str, Point | None] | None
    series_pct: Mapping[str, float | None]
    #: heads over the threshold left out by the attention floor, and whether the floor applied
    negligible_heads: tuple[NegligibleHead, ...] = ()
    attention_floor: str = ""


@dataclass(frozen=True)
class F3Sensitivity:
    t_induction: Point | None
    ratio: float | None


@dataclass(frozen=True)
class F3Details:
    applies: bool
    ratio: float | None
    min_ratio: float
    t_induction: Point | None
    t_bos50: Point | None
    milestone_heads: int
    sensitivity_milestone_heads: Mapping[str, F3Sensitivity]
    #: the last revisions before each milestone (the grid brackets: (before, at])
    t_induction_before: Point | None = None
    t_bos50_before: Point | None = None
    #: what the revision grid allows for the ratio: the open interval (lo, hi) (hi None: unbounded)
    ratio_interval: tuple[float | None, float | None] | None = None
    established: bool | None = None
    #: the milestones no revision reaches ("t_induction", "t_bos50"): right-censored after the last
    censored: tuple[str, ...] = ()
    #: heads over the threshold left out by the attention floor, and whether the floor applied
    negligible_heads: tuple[NegligibleHead, ...] = ()
    attention_floor: str = ""


@dataclass(frozen=True)
class F4Computed:
    """The first revision where recall reaches the level, under one reading of the definition."""

    revision: str
    tokens: float
    fraction_of_total: float | None
    recall: float | None
    found: tuple[str, ...]
    #: the revision grid's bracket of the recall point, as fractions of training: (before, at]
    fraction_interval: tuple[float, float] | None = None
    #: threshold at which heads count as found at intermediate revisions (the final circuit: 50x)
    intermediate_threshold: float | None = None


@dataclass(frozen=True)
class F4PaperTable:
    tokens: float
    fraction_of_total: float | None
    revision: str | None
    recall_there: float | None
    reproduced: bool
    #: which readings put the recall point at the paper's revision ("uniform 50x", "intermediate 30x")
    reproduced_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecallAt:
    tokens: float
    recall: float | None
    found: tuple[str, ...]


@dataclass(frozen=True)
class F4Details:
    """``computed``: the uniform reading (every revision at the induction threshold, SPEC's stated
    definition; it decides the verdict); ``intermediate``: intermediate revisions counted at the
    head-label threshold, the final circuit at the induction threshold (the reading that gives the
    paper's table)."""

    computed: F4Computed | None
    paper_table: F4PaperTable | None
    reproduces: str | None
    final_circuit: tuple[str, ...]
    total_tokens: float
    level: float
    max_fraction: float
    recall_series: Mapping[str, RecallAt]
    intermediate: F4Computed | None = None
    intermediate_holds: bool | None = None
    #: heads over the threshold left out by the attention floor, and whether the floor applied
    negligible_heads: tuple[NegligibleHead, ...] = ()
    attention_floor: str = ""


@dataclass(frozen=True)
class F5Head:
    head: str
    elevated: Point | None
    crossed: Point | None
    lead: float | None
    holds: bool
    #: share of ALL heads whose PR is elevated at or before this head's crossing (the level rule's null)
    level_null_share: float | None = None
    #: rise rule: PR at or before the crossing >= (1 + rise_fraction) x its first-revision PR
    #: (None: the head crosses at the first revision, nothing to rise from)
    rises: bool | None = None
    rise_null_share: float | None = None
    #: "before" (elevated at an earlier revision), "at" (at the crossing revision), "after", "never"
    timing: str | None = None
    #: share of ALL heads elevated strictly before this head's crossing
    before_null_share: float | None = None


@dataclass(frozen=True)
class F5Sensitivity:
    holds: bool
    failing: tuple[str, ...]
    passing: int
    heads: int


@dataclass(frozen=True)
class F5Details:
    fraction: float
    heads: tuple[F5Head, ...] = ()
    failing: tuple[str, ...] = ()
    sensitivity: Mapping[str, F5Sensitivity] = field(default_factory=dict)
    d_head: int | None = None
    pr_bar: float | None = None
    #: the null: exact probability that as many random distinct heads would all be elevated at or
    #: before the final heads' crossings (``null_p``), strictly before (``null_p_before``); F5 is
    #: "not informative" (consistent, not established) unless both this and the layer-matched null
    #: are below null_alpha (``null_p_decisive``)
    null_p: float | None = None
    null_p_before: float | None = None
    null_alpha: float | None = None
    informative: bool | None = None
    #: final heads elevated strictly before their crossing / at the crossing revision itself
    before: tuple[str, ...] = ()
    at: tuple[str, ...] = ()
    #: how many heads the null draws from (all heads of the model)
    n_heads_all: int | None = None
    rise_fraction: float | None = None
    rise_holds: bool | None = None
    #: the rise rule's null probability (reported, not asserted)
    rise_null_p: float | None = None
    #: the level rule's null with each random head drawn from its final head's layer
    null_p_layer: float | None = None
    #: the null that decides: the larger of ``null_p`` and ``null_p_layer``; F5 is
    #: informative only where it is below null_alpha
    null_p_decisive: float | None = None
    #: heads over the threshold left out by the attention floor, and whether the floor applied
    negligible_heads: tuple[NegligibleHead, ...] = ()
    attention_floor: str = ""


@dataclass(frozen=True)
class CopyableDetails:
    """The causal check read on every copyable position of repeated sequences (claims/trajectory.py:
    ``CopyableReading``): rates over ``positions``, the circuit's share of baseline with its interval
    over sequence resamples, and the two one-sided bootstrap p-values (None: too few sequences)."""

    n_sequences: int
    positions: int
    baseline_top1: float
    circuit_top1: float
    random_top1: float | None
    share_of_baseline: float | None
    share_interval: tuple[float, float] | None
    p_vs_bar: float | None
    p_vs_random: float | None
    method: str
    #: this reading's own outcome ("holds", "fails", ...) and whether it decided the verdict
    status: str
    decides: bool


@dataclass(frozen=True)
class CausalDetails:
    """Empty (``revision`` None) when no revision carries the circuit ablation."""

    revision: str | None = None
    baseline_top1: float | None = None
    circuit_top1: float | None = None
    random_top1: float | None = None
    share_of_baseline: float | None = None
    max_share: float | None = None
    cuts_enough: bool | None = None
    beats_random: bool | None = None
    circuit_heads: tuple[str, ...] = ()
    screen_circuit: tuple[str, ...] = ()
    circuit_matches_screen: bool | None = None
    n_random_heads: int = 0
    random_matched_to: str | None = None
    #: top-1 counts (k of n) behind the rates; reconstructed from rate x N where the record has rates only
    baseline_count: tuple[int, int] | None = None
    circuit_count: tuple[int, int] | None = None
    random_count: tuple[int, int] | None = None
    counts_reconstructed: bool = False
    #: one-sided exact p-values: circuit top-1 below matched random (Boschloo's test; McNemar's on
    #: paired outcomes) / below max_share x baseline (the bar: the exact unconditional ratio test;
    #: the paired ratio test on paired outcomes), named in ``method_random`` / ``method_bar``
    p_vs_random: float | None = None
    p_vs_bar: float | None = None
    method_random: str | None = None
    method_bar: str | None = None
    alpha: float | None = None
    #: exact (Clopper-Pearson) intervals of the three top-1 rates, where the record carries counts
    top1_intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    #: the revision the ablations were measured on (``main`` for the published OLMo file), when known
    measured_on: str | None = None
    #: which control decided the status, in words
    decided_by: str | None = None
    #: evidence the check needed and the record lacks ("matched-random ablation", "top-1 counts", ...)
    missing: tuple[str, ...] = ()
    #: the paper's top-1 rates (baseline, circuit, matched_random) from the panel: printed, never used
    paper_top1: Mapping[str, float] | None = None
    #: the copyable-position reading (None: not measured); which reading decided: "query" or "copyable"
    copyable: CopyableDetails | None = None
    reading: str = "query"
    #: heads over the threshold left out by the attention floor, and whether the floor applied
    negligible_heads: tuple[NegligibleHead, ...] = ()
    attention_floor: str = ""


@dataclass(frozen=True)
class FormationDetails:
    """What a model organism showed against what its panel declares (``[models.expect.formation]``)."""

    declared: Mapping[str, Any]
    final_revision: str
    #: heads at induction selectivity >= the threshold at the final revision: selectivity and interval
    heads_final: Mapping[str, float]
    heads_final_intervals: Mapping[str, tuple[float, float]]
    n_heads_final: int
    n_heads_final_interval: tuple[float, float] | None
    best_head_final: str | None
    best_selectivity_final: float | None
    n_heads_first: int
    t_induction: Point | None
    t_induction_before: Point | None
    final_top1: float | None
    final_top1_interval: tuple[float, float] | None
    #: the record's provenance["training"] (e.g. the numeric path the organism was trained on)
    training: Mapping[str, Any] | None
    #: each declared condition that was not met, in words
    unmet: tuple[str, ...] = ()
    #: heads over the threshold left out by the attention floor, and whether the floor applied
    negligible_heads: tuple[NegligibleHead, ...] = ()
    attention_floor: str = ""


#: The details type of each registered claim (None: a plain mapping), filled by
#: :func:`headwatch.claims.registry.register_claim` from each claim's ``details``.
DETAILS: dict[str, type | None] = {}


@dataclass(frozen=True)
class CrashDetails:
    """A claim whose judge raised: the exception's type and message (its traceback goes to the log)."""

    error: str
    message: str


@dataclass(frozen=True)
class Verdict:
    """One claim judged on one model's records.

    ``key`` is the claim's headline figure as the report shows it ("11.5x (5.09, 26.4)", "0 of 32
    heads"); ``figure`` is that number typed, with its bar, interval and method; ``margin`` is the
    signed distance from the claim's bar in the claim's own unit, positive on the holding side (None
    where there is none): F1 bar - highest early first-token selectivity; F2 share - step_share for
    an expected step (the reverse for a ramp); F3 ratio - min_ratio; F4 max_fraction - fraction of
    training; F5 the fewest revisions by which a head's PR elevation precedes its crossing; causal
    max_share - share of baseline. ``failing_revisions`` and ``failing_heads`` are what a declared
    deviation's ``revisions`` / ``heads`` are checked against.
    """

    claim: str
    status: Status
    message: str
    details: Any
    key: str = ""
    margin: float | None = None
    #: The panel's declaration that this claim is a known deviation here, or None.
    declared_deviation: Deviation | None = None
    figure: KeyFigure | None = None
    failing_revisions: tuple[str, ...] = ()
    failing_heads: tuple[str, ...] = ()

    @property
    def holds(self) -> bool | None:
        return self.status.holds

    def declare(self, deviation: Deviation | None) -> "Verdict":
        return dataclasses.replace(self, declared_deviation=deviation)

    def to_dict(self) -> dict[str, Any]:
        """The one JSON form (headwatch.schema.to_data), with the status in words beside it."""
        d = to_data(self)
        return {"claim": d.pop("claim"), "status": d.pop("status"), "status_words": self.status.words, **d}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "verdict") -> "Verdict":
        """The verdict in ``d`` (what :meth:`to_dict` wrote), checked field by field by the one
        converter (headwatch.schema.from_data); ``details`` by its claim's dataclass (:data:`DETAILS`)."""
        verdict = from_data(cls, d, where)
        if verdict.claim not in DETAILS:
            raise InputError(f"{where}.claim: {verdict.claim!r} is not one of {', '.join(DETAILS)}")
        tp = CrashDetails if verdict.status is Status.CRASHED else DETAILS[verdict.claim]
        if tp is None:  # a claim whose details are a plain mapping
            return verdict
        return dataclasses.replace(verdict, details=from_data(tp, verdict.details, f"{where}.details"))


# ---- declared deviations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviationCheck:
    """Whether a failing verdict is the deviation the panel declared: ``declared`` and ``measured``
    in the same terms (only the fields the declaration gives), ``matches`` when every one agrees."""

    matches: bool
    declared: str
    measured: str


def check_deviation(verdict: Verdict, deviation: Deviation, *, one_revision_of_many: bool = False) -> DeviationCheck:
    """Compare a verdict with a declared deviation (see :class:`headwatch.spec.Deviation`).

    A verdict that does not fail never matches. ``one_revision_of_many``: the verdict is one
    revision's, judged against a model-wide declaration; then the failing revisions and heads
    need only be among the declared ones, and the key (a model-wide figure) is not checked there.
    """
    measured = []
    ok = verdict.status is Status.FAILS
    if deviation.key is not None and not one_revision_of_many:
        value = verdict.figure.value if verdict.figure is not None else None
        lo, hi = deviation.key
        ok = ok and value is not None and lo <= value <= hi
        measured.append(f"key {'none' if value is None else format(value, '.4g')}")
    for name, have, want in (("revisions", verdict.failing_revisions, deviation.revisions),
                             ("heads", verdict.failing_heads, deviation.heads)):
        if want is None:
            continue
        same = set(have) <= set(want) if one_revision_of_many else set(have) == set(want)
        ok = ok and same
        measured.append(f"{name} " + (", ".join(have) or "none"))
    if verdict.status is not Status.FAILS:
        measured.insert(0, f"the claim {verdict.status.words}")
    return DeviationCheck(ok, deviation.expected(), "; ".join(measured))
