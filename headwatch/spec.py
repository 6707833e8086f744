"""SPEC's constants as one table, and what a panel expects of a model (docs/SPEC.md §2-§6).

Everything that decides a verdict lives here once: the probes' defaults (``ProbeSettings``), the
head sets (:mod:`headwatch.probes.selectivity`), the trajectory quantities
(:mod:`headwatch.claims.trajectory`), the statistics (:mod:`headwatch.stats`: interval level,
bootstrap, exact tests' alpha) and the judge (:mod:`headwatch.claims.judge`) all read
:data:`SPEC`; the judge takes the table as an argument, so the sensitivity grid
(:mod:`headwatch.claims.sensitivity`) re-judges with one value changed. A panel may change a
model's expectations (:class:`Expectations`), never the table. Each constant has a just-passing and
a just-failing test in tests/test_tolerances.py (docs/statistics.md).

Why ``ProbeSettings`` still carries thresholds: they are part of every measurement's cache key and
of the record's ``settings`` (the published files state theirs). Their defaults come from this
table and a panel cannot override them (fixtures/panels/ refuses the keys), so a record's
settings and the judge cannot silently disagree. The probe uses only ``induction_threshold``, to
pick the heads it ablates; the judge always uses this table, whatever a record's settings say.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Thresholds:
    """SPEC's numbers (docs/SPEC.md section in brackets); every one is a default a caller may pass."""

    #: [§2] induction circuit: induction selectivity >= this.
    induction: float = 50.0
    #: [§2] head label: best class kept when its selectivity >= this.
    label: float = 30.0
    #: [§2] BOS head (F1, BOS fraction): first-token selectivity >= this.
    bos: float = 30.0
    #: [§2] previous-token circuit: best class previous-token and >= this.
    previous_token: float = 100.0
    #: [§2, every head set] a head's selectivity for a class counts only where its mean attention to
    #: the class target is at least this many times a uniform head's share of one position (1/T, T
    #: the record's seq_len): below it the head gives the target less than uniform attention would,
    #: whatever its ratio (docs/statistics.md). Applies only to records that carry attention.
    attention_floor: float = 1.0
    #: [§5] t_induction: the first revision with at least this many induction heads.
    induction_min_heads: int = 3
    #: [§5] t_bos50: the first revision with BOS fraction >= this.
    bos_level: float = 0.5
    #: [§5] BOS shape: "step" when the largest adjacent rise is >= this share of the total rise.
    step_share: float = 0.5
    #: [§5, F4] recall of the final circuit that counts as "found".
    recall_level: float = 2 / 3
    #: [§3, F5] PR is elevated when PR - 1 >= this x (d_head - 1).
    pr_elevation_fraction: float = 0.1
    #: [§6, causal] ablating the circuit must cut top-1 to <= this share of baseline.
    ablation_max_share: float = 0.25
    #: [§6, F3] t_bos50 / t_induction must be >= this (DCLM models).
    f3_min_ratio: float = 10.0
    #: [§6, F4] recall >= recall_level must come within this share of training tokens.
    f4_max_fraction: float = 0.025
    #: [§6, F1] layers that must hold no BOS head.
    f1_layers: tuple[int, ...] = (0, 1)
    #: [§6, F4] the paper table's tokens name the revision whose tokens are within this relative
    #: distance (the table rounds: "6.3B" for step3000's 6.29B).
    paper_tokens_rel_tol: float = 0.02
    #: [§6] reported, never asserted: F3 with the induction milestone at these head counts ...
    f3_sensitivity_heads: tuple[int, ...] = (1, 3, 5)
    #: ... and F5 at these elevation fractions.
    f5_sensitivity_fractions: tuple[float, ...] = (0.05, 0.1, 0.2)

    # ---- verdict statistics (ours; docs/statistics.md) ------------------------------
    #: [causal] "beats matched random" and "cuts below baseline" need a one-sided exact test on
    #: the top-1 counts (Fisher) with p < this.
    causal_alpha: float = 0.05
    #: [F5, rise rule] PR at some revision at or before the crossing >= (1 + this) x its PR at the
    #: first revision (reported beside SPEC's level rule).
    f5_rise_fraction: float = 0.5
    #: [F5, null] F5 is informative (holds rather than "consistent, not established") only when the
    #: probability that as many randomly drawn heads would ALL pass the level rule against the
    #: final heads' crossing revisions is below this (an exact probability: docs/statistics.md).
    f5_null_alpha: float = 0.05
    #: [population] a claim over a population is "it holds in more than this share of the
    #: population the seeds are drawn from" (most members; docs/statistics.md) ...
    population_min_rate: float = 0.5
    #: ... judged by one-sided exact binomial tests on k of n members at this alpha: established
    #: ("holds") where a share <= population_min_rate is rejected; "fails" only where the data
    #: exclude the claim (a share >= population_min_rate rejected even with every undecided member
    #: counted as holding); otherwise consistent, not established.
    population_alpha: float = 0.05
    #: [population] a candidate outside the range of its reference members is an outlier flag; it
    #: fails only where the chance that an exchangeable member lands at least that far out (either
    #: side), times the number of quantities compared (Bonferroni), is below this.
    population_outlier_alpha: float = 0.05
    #: [intervals] level of every interval a record or verdict carries.
    interval_level: float = 0.95
    #: [intervals] bootstrap resamples over examples (selectivities, BOS fraction, induction heads).
    n_bootstrap: int = 1000
    #: [intervals] seed of the bootstrap's resampling (numpy default_rng).
    bootstrap_seed: int = 0
    #: [Gu et al. 2024, arXiv 2410.10781] Sink_1^eps: share of heads whose attention to position 0,
    #: averaged over query positions 1..T-1, exceeds eps. Reported, never asserted.
    sink_eps: float = 0.3
    #: ... computed on the first this-many examples of the batch (it needs whole attention rows).
    sink_examples: int = 64

    # ---- the sensitivity grid of the report (reported, never asserted) --------------------------
    #: every verdict is re-judged with one of these changed at a time (the others at their SPEC value).
    grid_bos: tuple[float, ...] = (20.0, 30.0, 50.0)
    grid_induction: tuple[float, ...] = (30.0, 50.0, 100.0)
    grid_step_share: tuple[float, ...] = (0.4, 0.5, 0.6)
    grid_recall_level: tuple[float, ...] = (1 / 2, 2 / 3, 3 / 4)


#: The table every module reads.
SPEC = Thresholds()


@dataclass(frozen=True)
class ProbeRun:
    """SPEC's probe run (docs/SPEC.md §1-§4): the batch, the baseline and the ablation control as
    the paper's trajectories were measured. ``headwatch.probes.record.ProbeSettings`` takes its
    defaults from here, and :mod:`headwatch.validation` fills the fields a partial setting leaves out
    from here when it checks the rules that tie fields together. Not judged: no tolerance tests."""

    #: [§1] examples N, sequence length T, token ids [vocab_lo, vocab_hi), RandomState seed.
    n_examples: int = 2000
    seq_len: int = 256
    vocab_lo: int = 100
    vocab_hi: int = 10000
    seed: int = 42
    #: [§3] N_pr: the first examples whose head outputs enter the participation ratio.
    n_pr: int = 500
    #: [§2] baseline positions and the seed they are drawn with.
    baseline_positions: int = 50
    baseline_seed: int = 0
    #: [§4] the matched-random control's seed.
    ablation_seed: int = 123
    #: The copyable-position reading of the same ablations (ours; docs/statistics.md): repeated
    #: sequences, distinct ids in each first half, and their RandomState seed.
    copy_sequences: int = 32
    copy_half: int = 64
    copy_seed: int = 7


#: The probe run every default reads.
PROBE_RUN = ProbeRun()

#: The entry-point group that installed packages list their claims in, one entry per claim named as
#: the claim (``F1 = "headwatch.claims.builtin.f1_zero_bos_floor:CLAIM"``; docs/claims.md).
CLAIMS_GROUP = "headwatch.claims"
#: The claims a panel may declare a deviation of (``[models.expect] xfail``), in registration order:
#: filled by :func:`headwatch.claims.registry.register_claim` (this table knows no claim itself;
#: a claim is defined, and registered, in its own module).
_DECLARABLE: list[str] = []
#: What each registered claim needs measured ("ablation"): a panel that measures none of it cannot
#: declare a deviation of the claim (fixtures/panels/parse.py).
_NEEDS: dict[str, tuple[str, ...]] = {}


def declare_claim_name(name: str, needs: tuple[str, ...] = ()) -> None:
    """Record that ``name`` is a claim a panel may name, needing ``needs`` measured (called by the
    claims' registry)."""
    if name not in _DECLARABLE:
        _DECLARABLE.append(name)
    _NEEDS[name] = tuple(needs)


def forget_claim_name(name: str) -> None:
    """Forget a registered claim's name (headwatch.claims.registry.unregister_claim)."""
    if name in _DECLARABLE:
        _DECLARABLE.remove(name)
    _NEEDS.pop(name, None)


def claim_needs(name: str) -> tuple[str, ...]:
    """What the registered claim ``name`` needs measured (() where unknown)."""
    return _NEEDS.get(name, ())


@functools.lru_cache(maxsize=1)
def _listed_claim_names() -> frozenset[str]:
    """The claim names the installed packages' entry points list (read once per process)."""
    from importlib.metadata import entry_points  # deferred: the distributions' metadata, read only here

    return frozenset(ep.name for ep in entry_points(group=CLAIMS_GROUP))


def claim_names() -> tuple[str, ...]:
    """The claims a panel's ``xfail`` may name: those registered in this process, then those the
    installed packages' entry points (group :data:`CLAIMS_GROUP`) list and no module has registered
    yet (read from their metadata: nothing is imported), in name order."""
    return (*_DECLARABLE, *sorted(_listed_claim_names() - set(_DECLARABLE)))


BOS_SHAPES: tuple[str, ...] = ("ramp", "step")
#: The readings of the causal check a panel may let decide: "query", docs/SPEC.md §4's (top-1 at the
#: query position of the induction batch), and "copyable" (top-1 on every copyable position of repeated
#: sequences, resampled by sequence: docs/statistics.md). The other is reported beside it.
CAUSAL_READINGS: tuple[str, ...] = ("query", "copyable")


def _doc(doc: str, **more: object) -> dict[str, object]:
    """A field's metadata for the panel schema (headwatch.schema, which says what each key means;
    this module imports nothing of headwatch's): its meaning, bounds, allowed values, an example."""
    return {"doc": doc, **more}


_RATE = _doc("the paper's top-1 rate", min=0, max=1, allowed="a rate from 0 to 1 (top-1 as a fraction, not a percentage)")


@dataclass(frozen=True)
class Deviation:
    """A declared known deviation: why, and what the panel expects to be measured.

    At least one of ``key`` (the claim's key figure lies in [lo, hi]: F1 the largest layer-0/1
    first-token selectivity, F2 the largest rise's share, F3 the ratio, F4 the fraction of training,
    F5 the fewest revisions of lead, causal the circuit's share of baseline top-1), ``revisions``
    (exactly these revisions fail) or ``heads`` (exactly these heads are the failing ones). The
    claim test xfails strictly only when the measured verdict fails and matches every given field.
    """

    reason: str = field(metadata=_doc("why the deviation is expected (shown with the xfail)", example="why"))
    key: tuple[float, float] | None = field(default=None, metadata=_doc(
        "the claim's key figure lies in [lo, hi]", allowed="[lo, hi] (numbers)", example=[0.4, 0.8]))
    revisions: tuple[str, ...] | None = field(default=None, metadata=_doc("exactly these revisions fail",
                                                                          example=["step1200"]))
    heads: tuple[str, ...] | None = field(default=None, metadata=_doc("exactly these heads are the failing ones",
                                                                      example=["L0_H0"]))

    def expected(self) -> str:
        """What the declaration expects, in words: 'key in [0.3, 0.6]; revisions step1200; heads L0_H0'."""
        parts = []
        if self.key is not None:
            parts.append(f"key in [{self.key[0]:g}, {self.key[1]:g}]")
        if self.revisions is not None:
            parts.append("revisions " + (", ".join(self.revisions) or "none"))
        if self.heads is not None:
            parts.append("heads " + (", ".join(self.heads) or "none"))
        return "; ".join(parts)


@dataclass(frozen=True)
class FormationWindow:
    """Where t_induction must lie: between two revisions (inclusive, by tokens seen) or between two
    fractions of the training tokens (inclusive). Exactly one is set."""

    revisions: tuple[str, str] | None = field(default=None, metadata=_doc(
        "t_induction between these revisions (inclusive)", allowed="two revisions [first, last]"))
    fraction: tuple[float, float] | None = field(default=None, metadata=_doc(
        "t_induction between these fractions of the training tokens (inclusive)", min=0, max=1,
        allowed="[lo, hi]: fractions of training, which lie in [0, 1]"))

    def describe(self) -> str:
        if self.revisions is not None:
            return f"between {self.revisions[0]} and {self.revisions[1]}"
        assert self.fraction is not None
        return f"within {100 * self.fraction[0]:g}%-{100 * self.fraction[1]:g}% of training"


@dataclass(frozen=True)
class Formation:
    """What a model organism must show before any claim is judged on it (``[models.expect.formation]``).

    ``min_induction_heads_final``: heads at induction selectivity >= SPEC.induction at the final
    revision; ``formed_within``: where t_induction (SPEC's milestone) must lie; ``none_at_first``:
    no induction head at the first revision; ``min_top1_final``: task top-1 at the final revision.
    Sink organisms also declare: ``min_bos_heads_final``: BOS heads (first-token
    selectivity >= SPEC.bos, any layer) at the final revision; ``bos_after_induction``: the first
    revision with a BOS head comes strictly after t_induction; ``bos_persists``: every revision from
    that one to the final has a BOS head.
    """

    min_induction_heads_final: int | None = field(default=None, metadata=_doc(
        "heads at induction selectivity >= 50 at the final revision", min=1, example=3))
    formed_within: FormationWindow | None = field(default=None, metadata=_doc(
        "t_induction between (inclusive), or { fraction = [0.05, 0.9] } of the training tokens",
        allowed='{ revisions = ["stepA", "stepB"] } or { fraction = [lo, hi] }',
        example={"revisions": ["step100", "step1500"]}))
    none_at_first: bool = field(default=False, metadata=_doc("no induction head at the first revision", example=True))
    min_top1_final: float | None = field(default=None, metadata=_doc(
        "task top-1 at the final revision", min=0, max=1, allowed="a top-1 rate, which lies in [0, 1]", example=0.5))
    min_bos_heads_final: int | None = field(default=None, metadata=_doc(
        "sink organisms: BOS heads (first-token >= 30) at the final revision", min=1, example=1))
    bos_after_induction: bool = field(default=False, metadata=_doc(
        "sink organisms: the first BOS head comes strictly after t_induction", example=True))
    bos_persists: bool = field(default=False, metadata=_doc(
        "sink organisms: a BOS head at every revision after the first one", example=True))


@dataclass(frozen=True)
class PaperTop1:
    """Top-1 rates the paper reports for the causal check (docs/SPEC.md §4), printed beside the
    records' own ("paper reports"), never used to judge."""

    baseline: float = field(metadata=_RATE)
    circuit: float = field(metadata=_RATE)
    matched_random: float = field(metadata=_RATE)


@dataclass(frozen=True)
class Expectations:
    """What a panel declares for one model (``[models.expect]``); the judge reads nothing else.

    ``xfail`` maps a claim ("F4") or a claim at one revision ("F1@step1200") to a
    :class:`Deviation` (kept as a strict xfail while it matches). ``f3_min_ratio`` /
    ``f4_max_fraction`` override the table's bars for this model (None: :data:`SPEC`'s);
    ``paper_f4_tokens`` is the tokens the paper's F4 table gives, reported beside the computed
    number; ``formation`` is what an organism must show before its claims are judged;
    ``paper_top1`` is the causal check's top-1 as the paper reports it (printed beside the
    records'); ``no_matched_random`` says why this model has no matched-random control (the causal
    check is then not applicable rather than not established); ``causal_reading`` says which of
    the causal check's readings (:data:`CAUSAL_READINGS`) decides its status.
    """

    bos_shape: str | None = field(default=None, metadata=_doc(
        '"ramp" | "step" | omitted (no expectation)', choices=BOS_SHAPES, example="ramp"))
    dclm: bool = field(default=False, metadata=_doc("trained on DCLM (F3 applies)", example=False))
    xfail: Mapping[str, Deviation] = field(default_factory=dict, metadata=_doc(
        "claim (or claim@revision) -> a known deviation",
        allowed='a table naming what the deviation looks like, not only why: { reason = "...", key = [lo, hi] } or '
                '{ reason = "...", revisions = ["step1200"] } or { reason = "...", heads = ["L0_H0"] } (any of key / '
                "revisions / heads, at least one)"))
    paper_f4_tokens: float | None = field(default=None, metadata=_doc(
        "optional: the paper table's F4 tokens, reported beside ours", min=0, above=True,
        allowed="a finite number of tokens > 0", example=6.3e9))
    f3_min_ratio: float | None = field(default=None, metadata=_doc(
        "optional: this model's F3 bar (default: SPEC's)", min=0, above=True, allowed="a finite ratio > 0",
        example=10))
    f4_max_fraction: float | None = field(default=None, metadata=_doc(
        "optional: this model's F4 bar (default: SPEC's)", min=0, above=True, max=1,
        allowed="a finite share of training > 0 and <= 1", example=0.025))
    formation: Formation | None = field(default=None, metadata=_doc(
        "what a model organism must show before its claims are judged"))
    paper_top1: PaperTop1 | None = field(default=None, metadata=_doc(
        "optional: the paper's causal top-1 rates, printed beside the records'",
        example={"baseline": 0.0405, "circuit": 0.0025, "matched_random": 0.044}))
    no_matched_random: str | None = field(default=None, metadata=_doc(
        'optional: this model has no matched-random control (the causal check is then not applicable, not "not '
        'established")', example="why"))
    causal_reading: str = field(default="query", metadata=_doc(
        'which reading decides the causal check: "query" (docs/SPEC.md §4, the paper\'s) or "copyable" (every '
        "copyable position of repeated sequences); the other is reported beside it", choices=CAUSAL_READINGS,
        example="copyable"))

    @property
    def min_ratio(self) -> float:
        return SPEC.f3_min_ratio if self.f3_min_ratio is None else float(self.f3_min_ratio)

    @property
    def max_fraction(self) -> float:
        return SPEC.f4_max_fraction if self.f4_max_fraction is None else float(self.f4_max_fraction)

    def declared(self, claim: str, revision: str | None = None) -> Deviation | None:
        """The panel's declaration for ``claim`` (at ``revision``, if declared there), or None."""
        if revision is not None and f"{claim}@{revision}" in self.xfail:
            return self.xfail[f"{claim}@{revision}"]
        return self.xfail.get(claim)


#: Keys of ``[models.expect]``: the fields of :class:`Expectations`.
EXPECT_KEYS: frozenset[str] = frozenset(Expectations.__dataclass_fields__)
#: Keys of an xfail table and of ``[models.expect.formation]``.
DEVIATION_KEYS: frozenset[str] = frozenset(Deviation.__dataclass_fields__)
PAPER_TOP1_KEYS: frozenset[str] = frozenset(PaperTop1.__dataclass_fields__)
FORMATION_KEYS: frozenset[str] = frozenset(Formation.__dataclass_fields__)
