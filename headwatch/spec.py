"""SPEC's constants as one table, and what a panel expects of a model (docs/SPEC.md §2-§6).

Everything that decides a verdict lives here once: the probes' defaults (``ProbeSettings``), the
head sets (:mod:`headwatch.probes.selectivity`), the trajectory quantities
(:mod:`headwatch.claims.trajectory`) and the judge (:mod:`headwatch.claims.judge`) all read
:data:`SPEC`. A panel may change a model's expectations (:class:`Expectations`), never the table.

Why ``ProbeSettings`` still carries thresholds: they are part of every measurement's cache key and
of the record's ``settings`` (the published files state theirs). Their defaults come from this
table and a panel cannot override them (fixtures/panels.py refuses the keys), so a record's
settings and the judge cannot silently disagree. The probe uses only ``induction_threshold``, to
pick the heads it ablates; the judge always uses this table, whatever a record's settings say.
"""
from __future__ import annotations

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
    #: [§6] reported, never asserted: F3 with the induction milestone at these head counts ...
    f3_sensitivity_heads: tuple[int, ...] = (1, 3, 5)
    #: ... and F5 at these elevation fractions.
    f5_sensitivity_fractions: tuple[float, ...] = (0.05, 0.1, 0.2)


#: The table every module reads.
SPEC = Thresholds()

#: Claims in report order.
CLAIMS: tuple[str, ...] = ("F1", "F2", "F3", "F4", "F5", "causal")
BOS_SHAPES: tuple[str, ...] = ("ramp", "step")


@dataclass(frozen=True)
class Expectations:
    """What a panel declares for one model (``[models.expect]``); the judge reads nothing else.

    ``xfail`` maps a claim ("F4") or a claim at one revision ("F1@step1200") to the reason it is a
    known deviation (kept as a strict xfail). ``f3_min_ratio`` / ``f4_max_fraction`` override the
    table's bars for this model (None: :data:`SPEC`'s); ``paper_f4_tokens`` is the tokens the
    paper's F4 table gives, reported beside the computed number.
    """

    bos_shape: str | None = None
    dclm: bool = False
    xfail: Mapping[str, str] = field(default_factory=dict)
    paper_f4_tokens: float | None = None
    f3_min_ratio: float | None = None
    f4_max_fraction: float | None = None

    @property
    def min_ratio(self) -> float:
        return SPEC.f3_min_ratio if self.f3_min_ratio is None else float(self.f3_min_ratio)

    @property
    def max_fraction(self) -> float:
        return SPEC.f4_max_fraction if self.f4_max_fraction is None else float(self.f4_max_fraction)

    def declared(self, claim: str, revision: str | None = None) -> str | None:
        """The reason the panel gives for ``claim`` (at ``revision``, if declared there), or None."""
        if revision is not None and f"{claim}@{revision}" in self.xfail:
            return self.xfail[f"{claim}@{revision}"]
        return self.xfail.get(claim)


#: Keys of ``[models.expect]``: the fields of :class:`Expectations`.
EXPECT_KEYS: frozenset[str] = frozenset(Expectations.__dataclass_fields__)
