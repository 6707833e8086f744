"""A claim's verdict as a typed value with one JSON form (``to_dict`` / ``from_dict``).

The judge (:mod:`headwatch.claims.judge`) makes them; the claim tests, ``headwatch judge --json``,
the figures and the report read them. ``details`` is one dataclass per claim (:data:`DETAILS`),
whose field names are the JSON keys.

:class:`Status` names more outcomes than the judge gives today (it maps True -> ``holds``,
False -> ``fails``, None -> ``not_applicable``); ``holds_vacuously`` and
``consistent_not_established`` are for the verdict statistics to come. How a status becomes a
pytest outcome is decided in one place: :data:`headwatch.claims.check.PYTEST_OUTCOME`.
"""
from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    HOLDS = "holds"
    HOLDS_VACUOUSLY = "holds_vacuously"
    CONSISTENT_NOT_ESTABLISHED = "consistent_not_established"
    FAILS = "fails"
    NOT_APPLICABLE = "not_applicable"

    @classmethod
    def of(cls, holds: bool | None) -> "Status":
        """Today's three-valued judgement as a status."""
        return cls.NOT_APPLICABLE if holds is None else (cls.HOLDS if holds else cls.FAILS)

    @property
    def holds(self) -> bool | None:
        """True for the holding statuses, False for ``fails``, None where no verdict is given."""
        if self in (Status.HOLDS, Status.HOLDS_VACUOUSLY):
            return True
        return False if self is Status.FAILS else None


# ---- per-claim details ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """A revision and the tokens seen there."""

    revision: str
    tokens: float


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
    #: highest first-token selectivity in ``layers`` over the revisions judged, and where
    peak_selectivity: float | None = None
    peak_head: str | None = None
    revision: str | None = None
    tokens: float | None = None
    heads: tuple[str, ...] = ()
    first_token_selectivity: Mapping[str, float | None] = field(default_factory=dict)


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


@dataclass(frozen=True)
class F4Computed:
    revision: str
    tokens: float
    fraction_of_total: float | None
    recall: float | None
    found: tuple[str, ...]


@dataclass(frozen=True)
class F4PaperTable:
    tokens: float
    fraction_of_total: float | None
    revision: str | None
    recall_there: float | None
    reproduced: bool


@dataclass(frozen=True)
class RecallAt:
    tokens: float
    recall: float | None
    found: tuple[str, ...]


@dataclass(frozen=True)
class F4Details:
    computed: F4Computed | None
    paper_table: F4PaperTable | None
    reproduces: str | None
    final_circuit: tuple[str, ...]
    total_tokens: float
    level: float
    max_fraction: float
    recall_series: Mapping[str, RecallAt]


@dataclass(frozen=True)
class F5Head:
    head: str
    elevated: Point | None
    crossed: Point | None
    lead: float | None
    holds: bool


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


#: The details type of each claim.
DETAILS: dict[str, type] = {
    "F1": F1Details, "F2": F2Details, "F3": F3Details, "F4": F4Details, "F5": F5Details, "causal": CausalDetails,
}


@dataclass(frozen=True)
class Verdict:
    """One claim judged on one model's records.

    ``key`` is the claim's headline figure as the report shows it ("11.5x", "0 of 32 heads");
    ``margin`` is the signed distance from the claim's bar in the claim's own unit, positive on the
    holding side (None where there is none): F1 bar - highest early first-token selectivity;
    F2 share - step_share for an expected step (the reverse for a ramp); F3 ratio - min_ratio;
    F4 max_fraction - fraction of training; F5 the fewest revisions by which a head's PR elevation
    precedes its crossing; causal max_share - share of baseline.
    """

    claim: str
    status: Status
    message: str
    details: Any
    key: str = ""
    margin: float | None = None
    #: The panel's reason for expecting this claim to fail here, or None.
    declared_deviation: str | None = None

    @property
    def holds(self) -> bool | None:
        return self.status.holds

    def declare(self, reason: str | None) -> "Verdict":
        return dataclasses.replace(self, declared_deviation=reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim, "status": self.status.value, "message": self.message, "key": self.key,
            "margin": self.margin, "declared_deviation": self.declared_deviation,
            "details": plain(self.details),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        claim = d["claim"]
        return cls(claim=claim, status=Status(d["status"]), message=d["message"],
                   details=_build(DETAILS[claim], d["details"]), key=d.get("key", ""),
                   margin=d.get("margin"), declared_deviation=d.get("declared_deviation"))


# ---- JSON form of the details ----------------------------------------------------------------------


def plain(value: Any) -> Any:
    """Dataclasses, mappings and tuples as JSON-able dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _build(tp: Any, value: Any) -> Any:
    """The inverse of :func:`plain` for the annotation ``tp``."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(inner[0], value) if len(inner) == 1 else value
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: _build(hints[f.name], value[f.name]) for f in dataclasses.fields(tp) if f.name in value})
    if origin is tuple:
        (item, *_) = typing.get_args(tp)
        return tuple(_build(item, v) for v in value)
    if origin in (Mapping, dict, typing.Mapping):
        _, item = typing.get_args(tp)
        return {k: _build(item, v) for k, v in value.items()}
    return value
