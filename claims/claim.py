"""A claim as one object: everything every consumer of a claim needs, defined in one place.

A :class:`Claim` carries its name and title, the question in words, its thresholds (each with the
SPEC section it comes from), the judge over one model's records (and, where it has one, per revision),
what its key figure is, the sensitivity knobs it reads, what a population places a candidate on for
it, its details type, the negative controls it must reject and, optionally, figures. It is registered
where it is defined (:func:`headwatch.claims.registry.register_claim`) and looked up by name
everywhere else: the judge (:func:`headwatch.claims.judge.judge_model`), the sensitivity grid, the
report, the population audit, ``headwatch judge`` and the pytest plugin. The built-in claims (formation,
F1-F5, causal) are modules of :mod:`headwatch.claims.builtin`; a researcher's own claim is the same
object, from a ``conftest.py``, a ``--claims-module`` file or an installed package's entry point
(docs/claims.md).

The judge's contract: ``judge(records, expect, spec, *, total_tokens=None) -> Verdict`` where
``records`` are one model's :class:`~headwatch.probes.record.MeasurementRecord` s sorted by tokens seen,
``expect`` the panel's :class:`~headwatch.spec.Expectations` for the model, ``spec`` the
:class:`~headwatch.spec.Thresholds` in use (SPEC, or one sensitivity-grid row) and ``total_tokens``
the model's training length in tokens (None: the last record's). It returns a
:class:`~headwatch.claims.verdict.Verdict` whose ``claim`` is the claim's name.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from headwatch.formatting import fmt_pct, fmt_tokens
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import Expectations, Thresholds

from headwatch.claims.verdict import Verdict


def _doc(doc: str) -> dict[str, str]:
    """A field's meaning, as docs/reference.md shows it (tools/gen_reference.py)."""
    return {"doc": doc}


class Judge(Protocol):
    """A claim's judge over one model's records (see the module docstring)."""

    def __call__(self, records: Sequence[MeasurementRecord], expect: Expectations, spec: Thresholds, *,
                 total_tokens: float | None = None) -> Verdict: ...


@dataclass(frozen=True)
class Threshold:
    """A bar a claim's judge compares against: ``field`` names the :class:`~headwatch.spec.Thresholds`
    field it reads (so the sensitivity grid and a panel's overrides reach it), or ``value`` is a
    constant of the claim's own (a variant's bar); ``source`` says where the number comes from
    ("docs/SPEC.md §6", "this claim")."""

    name: str
    source: str
    field: str | None = None
    value: Any = None

    def value_in(self, spec: Thresholds) -> Any:
        """The bar under ``spec`` (a number; F1's layers: a tuple)."""
        return getattr(spec, self.field) if self.field is not None else self.value


#: The attention floor as a claim that counts heads lists it among its thresholds.
FLOOR_THRESHOLD = "a head counts only where its attention to the class target >= this x 1/T"
FLOOR_SOURCE = "docs/statistics.md#negligible-attention"


@dataclass(frozen=True)
class NegativeControl:
    """Planted records on which a claim is false: its judge must return ``fails`` on them.

    ``build`` makes the records (one model's, sorted or not); ``expect`` and ``total_tokens`` are what
    they are judged with. ``claim`` is filled in by :func:`~headwatch.claims.registry.register_claim`.
    """

    name: str
    what: str
    build: Callable[[], list[MeasurementRecord]]
    expect: Expectations = Expectations()
    total_tokens: float | None = None
    claim: str = ""

    def records(self) -> list[MeasurementRecord]:
        return self.build()


@dataclass(frozen=True)
class GridValue:
    """One member's value of a population quantity, as its revision grid allows.

    ``value`` is the point estimate (the first revision meeting the milestone); ``interval`` (lo, hi)
    what the grid allows (hi None: open). ``censored_above``: the milestone is not reached by the
    final revision, so the value is only known to exceed this bound (``value`` is None then).
    ``undefined``: why there is no value at all (no final circuit, t_induction never reached).
    """

    value: float | None
    interval: tuple[float | None, float | None] | None = None
    censored_above: float | None = None
    undefined: str = ""

    @property
    def bounds(self) -> tuple[float, float] | None:
        """What the value is known to lie in, for ranking: (v, v) when reached, (bound, inf) when censored
        (the bound itself excluded), None when undefined."""
        if self.value is not None:
            return self.value, self.value
        return (self.censored_above, math.inf) if self.censored_above is not None else None

    def text(self, quantity: str) -> str:
        """'2.62M (2.3M, 2.62M]', '> 4.6M (never reached)', 'undefined: ...'."""
        fmt = fmt_for(quantity)
        if self.value is not None:
            iv = "" if self.interval is None else (
                f" ({fmt(self.interval[0])}, {fmt(self.interval[1]) if self.interval[1] is not None else 'inf'}]")
            return fmt(self.value) + iv
        if self.censored_above is not None:
            return f"> {fmt(self.censored_above)} (not reached by the final revision)"
        return f"undefined ({self.undefined})"


#: How a quantity's values are written: tokens ("2.62M"), a share of training ("0.27%"), a ratio ("11.5x").
UNITS = ("tokens", "fraction", "ratio")
#: Each population quantity's unit: the screen's milestones, then every registered claim's ``placed_on``
#: (added by the registry).
QUANTITY_UNITS: dict[str, str] = {"t_induction": "tokens", "t_bos50": "tokens"}


def fmt_for(quantity: str) -> Callable[[float | None], str]:
    """How values of ``quantity`` are written (its unit's notation; a ratio where the unit is unknown)."""
    unit = QUANTITY_UNITS.get(quantity, "ratio")
    if unit == "tokens":
        return fmt_tokens
    if unit == "fraction":
        return lambda x: fmt_pct(x, ".3g")
    return lambda x: "?" if x is None else f"{x:.3g}x"


@dataclass(frozen=True)
class Quantity:
    """A number per population member that a candidate is placed on (claims/population.py).

    ``value(records, total_tokens, spec)`` reads it from one member's records as a :class:`GridValue`
    (censored where a milestone is not reached by the final revision: known only to exceed a bound);
    ``unit`` one of :data:`UNITS`; ``grows_with_time``: a larger value is "later" (milestones in tokens,
    a share of training), else "larger". ``same_event`` maps a side ("above", "below") of this
    quantity's outlier flag to the (quantity, side) flags listed earlier that are the same event
    (counted there only: a late circuit moves t_induction and the F4 recall point together)."""

    name: str
    words: str
    value: Callable[[Sequence[MeasurementRecord], float | None, Thresholds], GridValue]
    unit: str = "tokens"
    grows_with_time: bool = True
    same_event: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    """One claim: what every consumer needs (see the module docstring).

    - ``name``: how panels (``xfail``), ``--claims``, JSON and the report name it; ``title`` the
      report's column heading; ``question`` the claim in words.
    - ``judge``: the verdict over one model's records (:class:`Judge`); ``judge_revision(record, spec)``
      the verdict at one revision, where the claim has one (F1): pytest then tests each revision too.
    - ``thresholds``: its bars with their sources; ``key_figure``: what the verdict's key figure is.
    - ``reads``: the sensitivity knobs (``headwatch.claims.sensitivity.KNOBS``: Thresholds fields with a
      grid) its verdict depends on; the grid re-judges it on those rows only.
    - ``details``: the dataclass of ``Verdict.details`` (its JSON form is read back through it); None: a
      plain mapping.
    - ``placed_on``: the quantity a population places a candidate on for this claim (None: none); a
      member where the claim does not apply has no value of it.
    - ``negative_controls``: planted records the judge must reject (at least one: a claim that cannot
      fail is refused at registration).
    - ``figures(records, verdict, model) -> list[Figure]``: the report's figures of this claim
      (:class:`headwatch.claims.figures.Figure`), where declared.
    - ``gate``: judged first; where it fails, every other claim is "not judged" (formation);
      ``applies(expect)``: whether the claim is judged for a model at all (formation: where declared).
      A gate is never a declared deviation.
    - ``needs``: what the records must have been measured with (``"ablation"``): a panel measuring
      none of it (``ablation = "none"``) cannot declare a deviation of the claim.
    - ``test_module``: the file name of the claim's own test module in ``headwatch.claims``
      (``test_f1_zero_bos_floor.py``); "" for claims tested by the generic ``test_registered_claims.py``.
    """

    name: str = field(metadata=_doc("how panels (xfail keys), --claims, JSON and the report name it"))
    title: str = field(metadata=_doc("the report's column heading"))
    question: str = field(metadata=_doc("the claim in words"))
    judge: Judge = field(metadata=_doc("judge(records, expect, spec, *, total_tokens=None) -> Verdict over one "
                                       "model's records, sorted by tokens"))
    negative_controls: tuple[NegativeControl, ...] = field(default=(), metadata=_doc(
        "planted records its judge must say 'fails' on; at least one (a claim without is refused)"))
    thresholds: tuple[Threshold, ...] = field(default=(), metadata=_doc(
        "its bars, each a SPEC field or a constant of its own, with the source"))
    judge_revision: Callable[[MeasurementRecord, Thresholds], Verdict] | None = field(default=None, metadata=_doc(
        "judge_revision(record, spec) -> Verdict at one revision, where it has one: pytest tests each revision too"))
    key_figure: str = field(default="", metadata=_doc("what the verdict's key figure is, in words"))
    reads: tuple[str, ...] = field(default=(), metadata=_doc(
        "the sensitivity knobs its verdict depends on (the grid re-judges it on those rows)"))
    details: type | None = field(default=None, metadata=_doc(
        "the dataclass of Verdict.details (its JSON form is read back through it); None: a plain mapping"))
    placed_on: Quantity | None = field(default=None, metadata=_doc(
        "the quantity a population places a candidate on for this claim"))
    figures: Callable[[Sequence[MeasurementRecord], Verdict, str], list[Any]] | None = field(default=None, metadata=_doc(
        "figures(records, verdict, model) -> [headwatch.claims.figures.Figure]: the report's figures of it"))
    gate: bool = field(default=False, metadata=_doc(
        "judged first; where it fails every other claim is 'not judged' (formation)"))
    applies: Callable[[Expectations], bool] | None = field(default=None, metadata=_doc(
        "applies(expect) -> whether the claim is judged for a model at all (None: always)"))
    needs: tuple[str, ...] = field(default=(), metadata=_doc(
        "what the records must be measured with ('ablation'): a panel measuring none cannot declare it a deviation"))
    test_module: str = field(default="", metadata=_doc(
        "its own test module in headwatch.claims; '' (a researcher's): the generic test_registered_claims.py"))

    def applies_to(self, expect: Expectations) -> bool:
        """Whether this claim is judged for a model with ``expect``."""
        return self.applies is None or bool(self.applies(expect))


__all__ = ["Claim", "GridValue", "Judge", "NegativeControl", "Quantity", "QUANTITY_UNITS", "Threshold", "UNITS", "fmt_for"]
