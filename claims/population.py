"""Population verdicts (issues 24, 33): a claim across the seeds of one run, and a candidate among them.

A population (``headwatch.fixtures.panels.Population``) is the reference members a panel declares
(e.g. PolyPythia's seeds 1-9 and the original, or the organisms' seeds 0-4) plus candidates under
audit. Every member is judged on its own first, by the one judge (:func:`judge.judge_model`, formation
included), and this module reads only those verdicts and the trajectory quantities of
:mod:`headwatch.claims.trajectory`; nothing is judged twice.

- :func:`judge_claim_over` a claim over the reference members: it holds in k of n members. The
  claim is "it holds in more than ``SPEC.population_min_rate`` of the population" (most members),
  judged by one-sided exact binomial tests at ``SPEC.population_alpha``: "holds" (established)
  where a share <= that rate is rejected; "fails" only where the data exclude the claim (a share
  >= that rate rejected even with every undecided member counted as holding); otherwise
  "consistent, not established". k / n always comes with its exact (Clopper-Pearson) one-sided
  bounds. Members that did not form are "not judged" and left out of k and n (never counted as a
  pass); members where the claim does not apply are left out too; members where it is "consistent,
  not established" stay in n (not in k).
- :func:`spread` the distribution over members of one quantity (t_induction, t_bos50, the F3 ratio,
  the F4 recall point): median and range, each member's value with the interval its revision grid
  allows. A milestone never reached by the final revision is censored: known only to exceed a
  bound, which varies per member for the F3 ratio (final tokens / t_induction). Values are ranked
  as intervals (interval-censored): the median and range are each an interval of what the data
  allow, printed as the bound that is known ("> 10x", ">= 33.3x", "(10x, 33.3x]").
- :func:`place` a candidate against the reference members: its rank range among the n + 1 values
  (a member whose interval overlaps the candidate's may lie on either side), and, where it lies
  outside every reference value, an **outlier flag** with the chance that an exchangeable member
  lands at least that far out (either side; at least 2 / (n + 1)); inside the range it is
  *consistent* with them (nothing established). :func:`audit` places a candidate on every quantity
  at once under the population's rule (``placement``: "rank", the default, or "log-normal", a t
  prediction interval on the log scale) and decides them jointly (the rank rule by a permutation
  min-p over the quantities, the log-normal rule by Holm's step-down): it fails only below
  ``SPEC.population_outlier_alpha``, and one event is counted once
  (a late circuit moves t_induction, the F3 ratio and the F4 recall point: it is flagged on all
  three and judged on t_induction alone). Quantities of a claim that does not apply (the F3 ratio
  off DCLM) are not judged.
- :func:`leave_one_out` each reference member placed against the others: how often the range of
  n - 1 members holds the n-th (expected (n - 2) / n), a check of the interval on the population itself.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from headwatch.fixtures.panels import PanelModel, Population
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds
from headwatch.stats import (
    BINOMIAL_TEST, CLOPPER_PEARSON, PREDICTION_T, binomial_at_least, binomial_at_most, clopper_pearson, holm_adjusted,
    permutation_min_p, prediction_p,
)

from headwatch.claims import trajectory as T
from headwatch.claims.claim import GridValue, Quantity, fmt_for
from headwatch.claims.judge import judge_model
from headwatch.claims.registry import all_claims, gates
from headwatch.claims.verdict import KeyFigure, Status, Verdict, check_deviation

#: The screen's own quantities (no claim's): whose spread over members is reported and against which
#: candidates are placed, before each registered claim's ``placed_on`` (:func:`quantities`).
SCREEN_QUANTITIES: tuple[str, ...] = ("t_induction", "t_bos50")


def _placed() -> dict[str, tuple[str, Quantity]]:
    """Each registered claim's population quantity: quantity name -> (claim name, Quantity)."""
    return {c.placed_on.name: (c.name, c.placed_on) for c in all_claims() if c.placed_on is not None}


def quantities() -> tuple[str, ...]:
    """The quantities whose spread over members is reported and against which candidates are placed:
    t_induction, t_bos50, then each registered claim's (F3's ratio, F4's recall point, a user's)."""
    return SCREEN_QUANTITIES + tuple(_placed())


def quantities_of(members: Sequence[Member]) -> tuple[str, ...]:
    """The quantities compared over ``members``: the screen's, and those of the claims the members were
    judged on (``--claims`` leaves the others out; members without verdicts: every one)."""
    judged = {c for m in members for c in m.verdicts}
    return tuple(q for q in quantities() if not judged or quantity_claim(q) in (None, *judged))


def quantity_words(quantity: str) -> str:
    """What a quantity is, in words."""
    placed = _placed().get(quantity)
    return placed[1].words if placed else quantity


def quantity_claim(quantity: str) -> str | None:
    """The claim a quantity belongs to: a member where that claim does not apply has no value of it
    (the F3 ratio off DCLM is not judged). None: the screen's own."""
    placed = _placed().get(quantity)
    return placed[0] if placed else None


def same_event(quantity: str, side: str) -> tuple[tuple[str, str], ...]:
    """One event moves several quantities: a flag of (quantity, side) is the same event as a flag of
    an earlier (quantity, side) listed here, and is counted there only (a late circuit: t_induction
    later, the F3 ratio smaller, the F4 recall point later; a late sink: t_bos50 later, the ratio larger)."""
    placed = _placed().get(quantity)
    return tuple(placed[1].same_event.get(side, ())) if placed else ()


def _gate_names() -> set[str]:
    return {g.name for g in gates()}


def gate_verdict(verdicts: Mapping[str, Verdict]) -> Verdict | None:
    """A member's gate verdict (formation): the first that fails, else the first it has (None: none)."""
    found = [verdicts[g.name] for g in gates() if g.name in verdicts]
    return next((v for v in found if v.status is Status.FAILS), found[0] if found else None)


#: The method a placement states.
PREDICTION_INTERVAL = ("rank among the reference members (interval-censored: overlapping values may lie on either "
                       "side); an exchangeable member's chance of landing at least as far out, either side")
#: The placement rules a population may declare (``placement`` in its panel entry): "rank"
#: (the default: assumption-free, exchangeability only) or "log-normal" (a t prediction interval on
#: the log scale: power at 5-10 seeds, assuming each quantity's logs are normal across seeds).
PLACEMENT_RULES: tuple[str, ...] = ("rank", "log-normal")
#: How each rule decides over the several quantities compared, in words.
JOINT_RULES: dict[str, str] = {
    # rank: each reference member's own smallest rank p (placed against the others and the candidate)
    # calibrates the candidate's: exact under exchangeability whatever the quantities' correlation.
    "rank": "permutation min-p",
    # log-normal: valid under any dependence among the quantities.
    "log-normal": "Holm step-down",
}


# ---- one member ---------------------------------------------------------------------------------


def _fmt(quantity: str):
    return fmt_for(quantity)


def member_quantities(records: Sequence[MeasurementRecord], total_tokens: float | None = None,
                      spec: Thresholds = SPEC) -> dict[str, GridValue]:
    """The quantities of one member's records (:func:`quantities`), each a :class:`GridValue`."""
    recs = T.by_tokens(records)
    final_tokens = float(recs[-1].tokens_seen)  # type: ignore[arg-type]
    sep = T.induction_bos_separation(recs, spec.induction_min_heads, spec.induction, spec.bos_level, spec.bos,
                                     floor=spec.attention_floor)

    def milestone(m: T.Milestone) -> GridValue:
        if m.point is None:
            return GridValue(None, None, censored_above=final_tokens)
        return GridValue(m.tokens, m.bracket)

    out = {"t_induction": milestone(sep.induction), "t_bos50": milestone(sep.bos)}
    for name, (_, q) in _placed().items():  # each claim's own (F3's ratio, F4's recall point)
        out[name] = q.value(recs, total_tokens, spec)
    return out


@dataclass
class Member:
    """One member of a population: its verdicts (formation first where declared) and quantities."""

    id: str
    role: str
    seed: int | None
    verdicts: dict[str, Verdict]
    quantities: dict[str, GridValue]
    revisions: int = 0

    @property
    def formed(self) -> bool | None:
        """False when the panel declares formation and it failed (its claims are not judged)."""
        f = gate_verdict(self.verdicts)
        return None if f is None else f.status is not Status.FAILS

    @property
    def judged(self) -> bool:
        return self.formed is not False


def member_of(member_id: str, records: Sequence[MeasurementRecord], expect: Expectations = Expectations(), *,
              role: str = "reference", seed: int | None = None, total_tokens: float | None = None,
              spec: Thresholds = SPEC) -> Member:
    """Judge one member's records (the judge of every model, formation first) and read its quantities."""
    verdicts = judge_model(records, expect, total_tokens, spec)
    return Member(member_id, role, seed, verdicts, member_quantities(records, total_tokens, spec), len(records))


def member_from_verdicts(model: PanelModel, records: Sequence[MeasurementRecord], verdicts: Mapping[str, Verdict],
                         spec: Thresholds = SPEC) -> Member:
    """A member from verdicts the judge already gave (the report's), its quantities read from ``records``."""
    return Member(model.id, model.member.role if model.member else "reference",
                  model.member.seed if model.member else None, dict(verdicts),
                  member_quantities(records, model.total_tokens, spec), len(records))


def judge_member(model: PanelModel, records: Sequence[MeasurementRecord], spec: Thresholds = SPEC) -> Member:
    """:func:`member_of` for a panel model (its id, role, seed, expectations and training tokens)."""
    return member_of(model.id, records, model.expect, role=model.member.role if model.member else "reference",
                     seed=model.member.seed if model.member else None, total_tokens=model.total_tokens, spec=spec)


# ---- a claim over the reference members -----------------------------------------------------------


@dataclass(frozen=True)
class PopulationClaim:
    """A claim over a population's reference members: who holds, fails, is undecided or not judged.

    ``k`` of ``n`` hold (established, holds or holds vacuously); ``n`` counts the members with a
    verdict (holds, fails, consistent not established); members where the claim does not apply,
    and members that did not form ("not judged"), are listed but not counted. ``interval``: the
    exact (Clopper-Pearson) one-sided (1 - alpha) lower and upper bounds of k / n, the inversions
    of the two tests. ``declared``: failing members whose failure matches the deviation their panel
    declares for the claim (a known deviation, not news).
    """

    claim: str
    population: str
    status: Status
    message: str
    key: str
    k: int
    n: int
    interval: tuple[float, float] | None
    min_rate: float
    holds: tuple[str, ...] = ()
    fails: tuple[str, ...] = ()
    consistent: tuple[str, ...] = ()
    not_applicable: tuple[str, ...] = ()
    not_judged: tuple[str, ...] = ()
    declared: tuple[str, ...] = ()
    #: Failing members whose panel declares the claim a deviation, and every such member.
    declaring: tuple[str, ...] = ()
    figure: KeyFigure | None = None
    #: The one-sided exact binomial tests (None: no member judged): against a share <= min_rate
    #: (small: established) and against a share >= min_rate with every undecided member holding
    #: (small: the data exclude the claim); both at ``alpha``.
    p_holds: float | None = None
    p_fails: float | None = None
    alpha: float | None = None

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def all_failures_declared(self) -> bool:
        """Every failing member failed as its panel declares (the population's failure is a known deviation)."""
        return bool(self.fails) and set(self.fails) == set(self.declared)

    @property
    def every_member_declares(self) -> bool:
        """Every counted member's panel declares the claim a deviation (shared expectations do)."""
        counted = set(self.holds) | set(self.fails) | set(self.consistent)
        return bool(counted) and counted <= set(self.declaring)

    def to_dict(self) -> dict:
        return {"claim": self.claim, "population": self.population, "status": self.status.value,
                "status_words": self.status.words, "message": self.message, "key": self.key, "k": self.k,
                "n": self.n, "interval": list(self.interval) if self.interval else None, "min_rate": self.min_rate,
                "holds": list(self.holds), "fails": list(self.fails), "consistent": list(self.consistent),
                "not_applicable": list(self.not_applicable), "not_judged": list(self.not_judged),
                "declared": list(self.declared), "p_holds": self.p_holds, "p_fails": self.p_fails, "alpha": self.alpha}


def _ids(ms: Sequence[Member]) -> str:
    return ", ".join(m.id for m in ms)


def judge_claim_over(claim: str, members: Sequence[Member], population: str = "",
                     spec: Thresholds = SPEC) -> PopulationClaim:
    """``claim`` over ``members`` (the reference members; see the module docstring for the rule)."""
    bar, alpha = spec.population_min_rate, spec.population_alpha
    by: dict[str, list[Member]] = {"holds": [], "fails": [], "consistent": [], "na": [], "nj": []}
    declared, declaring = [], []
    for m in members:
        v = m.verdicts.get(claim)
        if v is None or v.status is Status.NOT_JUDGED or (claim not in _gate_names() and not m.judged):
            by["nj"].append(m)
            continue
        if v.declared_deviation is not None:
            declaring.append(m.id)
        if v.status in (Status.HOLDS, Status.HOLDS_VACUOUSLY):
            by["holds"].append(m)
        elif v.status is Status.FAILS:
            by["fails"].append(m)
            if v.declared_deviation is not None and check_deviation(v, v.declared_deviation).matches:
                declared.append(m.id)
        elif v.status is Status.NOT_APPLICABLE:
            by["na"].append(m)
        else:  # consistent, not established, or any status short of "holds": in n, never in k
            by["consistent"].append(m)
    k, f, c = len(by["holds"]), len(by["fails"]), len(by["consistent"])
    n = k + f + c
    where = f" of {population}" if population else ""
    left_out = []
    if by["nj"]:
        left_out.append(f"not judged (did not form): {_ids(by['nj'])}")
    if by["na"]:
        left_out.append(f"not applicable: {_ids(by['na'])}")
    tail = ("; left out: " + "; ".join(left_out)) if left_out else ""
    if n == 0:
        status = Status.NOT_JUDGED if by["nj"] and not by["na"] else Status.NOT_APPLICABLE
        what = ("no reference member formed its circuit" if status is Status.NOT_JUDGED
                else f"{claim} applies to no reference member")
        message = f"{what}{where}{tail}"
        key = "not judged" if status is Status.NOT_JUDGED else "n/a"
        return PopulationClaim(claim, population, status, message, key, 0, 0, None, bar,
                               not_applicable=tuple(m.id for m in by["na"]), not_judged=tuple(m.id for m in by["nj"]),
                               figure=KeyFigure("share of reference members where the claim holds", None, bar,
                                                None, "no member judged"))
    # one-sided (1 - alpha) bounds: each is the inversion of one of the two tests below
    lo, hi = clopper_pearson(k, n, 1 - 2 * alpha)
    p_holds = binomial_at_least(k, n, bar)  # small: a share <= bar is excluded (the claim is established)
    p_fails = binomial_at_most(k + c, n, bar)  # small: a share >= bar is excluded, every undecided member held
    level = f"{100 * (1 - alpha):g}%"
    counts = (f"holds in {k} of {n} reference members{where} (rate {k / n:.2f}; {CLOPPER_PEARSON}, one-sided {level} "
              f"bounds: >= {lo:.3g}, <= {hi:.3g})")
    parts = [counts]
    if by["fails"]:
        parts.append(f"fails in {_ids(by['fails'])}" + (" (as each declares)" if declared and set(declared) ==
                                                         {m.id for m in by['fails']} else ""))
    if by["consistent"]:
        parts.append(f"consistent, not established in {_ids(by['consistent'])} (in n, not in k)")
    share = f"a share of the population > {bar:g}"
    if p_holds < alpha:
        status = Status.HOLDS
        verdict = f"established: {BINOMIAL_TEST} of {share}: p = {p_holds:.3g} < {alpha:g}"
    elif p_fails < alpha:
        status = Status.FAILS
        verdict = (f"the data exclude it: even with the {c} undecided member(s) holding, {k + c} of {n} gives "
                   f"p = {p_fails:.3g} < {alpha:g} against {share.replace('>', '>=')} ({BINOMIAL_TEST})"
                   if c else f"the data exclude it: {k} of {n} gives p = {p_fails:.3g} < {alpha:g} against "
                   f"{share.replace('>', '>=')} ({BINOMIAL_TEST})")
    else:
        status = Status.CONSISTENT_NOT_ESTABLISHED
        least = _least_establishing(n, bar, alpha)
        verdict = (f"not established: p = {p_holds:.3g} >= {alpha:g} for {share}, and not excluded (p = {p_fails:.3g}); "
                   + (f"{n} members cannot establish it even if all hold: {_members_needed(bar, alpha)} would"
                      if least is None else f"{least} of these {n} would establish it"))
    message = "; ".join(parts) + f"; {verdict}{tail}"
    key = f"{k}/{n} [{lo:.2f}, {hi:.2f}]"
    figure = KeyFigure("share of reference members where the claim holds", k / n, bar, (lo, hi),
                       f"{CLOPPER_PEARSON}, one-sided {level} bounds; {BINOMIAL_TEST}",
                       p_value=float(f"{(p_holds if status is not Status.FAILS else p_fails):.4g}"))
    return PopulationClaim(claim, population, status, message, key, k, n, (lo, hi), bar,
                           holds=tuple(m.id for m in by["holds"]), fails=tuple(m.id for m in by["fails"]),
                           consistent=tuple(m.id for m in by["consistent"]),
                           not_applicable=tuple(m.id for m in by["na"]), not_judged=tuple(m.id for m in by["nj"]),
                           declared=tuple(declared), declaring=tuple(declaring), figure=figure,
                           p_holds=p_holds, p_fails=p_fails, alpha=alpha)


def _least_establishing(n: int, bar: float, alpha: float) -> int | None:
    """The fewest of ``n`` members that must hold to establish the claim (None: not even all n)."""
    return next((k for k in range(n + 1) if binomial_at_least(k, n, bar) < alpha), None)


def _members_needed(bar: float, alpha: float) -> int:
    """The fewest members that establish the claim when every one holds (n of n clears the bar)."""
    n = 1
    while binomial_at_least(n, n, bar) >= alpha:
        n += 1
    return n


# ---- the spread of a quantity, and a candidate's place in it ------------------------------------------


def _applies(member: Member, quantity: str) -> bool:
    """Whether ``quantity`` is judged for ``member``: not where its claim does not apply (F3 off DCLM)."""
    claim = quantity_claim(quantity)
    v = member.verdicts.get(claim) if claim else None
    return v is None or v.status is not Status.NOT_APPLICABLE


@dataclass(frozen=True)
class Extent:
    """An order statistic (the median, the smallest, the largest) of interval-censored values: known to
    lie in [lo, hi] (``hi`` None: unbounded above; ``strict``: ``lo`` itself excluded, a censored bound)."""

    lo: float
    hi: float | None
    strict: bool = False

    def text(self, fmt: Callable[[float | None], str]) -> str:
        """'2.88M', '> 10x' (a bound), '>= 33.3x' (at least a reached value), '(10x, 33.3x]' (between)."""
        if self.hi is not None and self.hi == self.lo:
            return fmt(self.lo)
        if self.hi is None:
            return f"{'>' if self.strict else '>='} {fmt(self.lo)}"
        return f"{'(' if self.strict else '['}{fmt(self.lo)}, {fmt(self.hi)}]"

    def to_dict(self) -> dict:
        return {"lo": self.lo, "hi": self.hi, "lo_excluded": self.strict}


def _order_statistic(bounds: Sequence[tuple[float, float]], strict: Sequence[bool], k: int) -> Extent:
    """The k-th smallest (0-based) of values known only to lie in ``bounds``: between the k-th smallest
    lower end and the k-th smallest upper end. A lower end excluded (censored) ranks after an equal one included."""
    lows = sorted(zip((b[0] for b in bounds), strict), key=lambda x: (x[0], x[1]))
    highs = sorted(b[1] for b in bounds)
    return Extent(lows[k][0], None if math.isinf(highs[k]) else highs[k], lows[k][1])


def _median(bounds: Sequence[tuple[float, float]], strict: Sequence[bool]) -> Extent:
    m = len(bounds)
    a = _order_statistic(bounds, strict, (m - 1) // 2)
    if m % 2:
        return a
    b = _order_statistic(bounds, strict, m // 2)
    hi = None if a.hi is None or b.hi is None else (a.hi + b.hi) / 2
    return Extent((a.lo + b.lo) / 2, hi, a.strict and b.strict)


@dataclass(frozen=True)
class Spread:
    """A quantity over members: each member's grid value, and the median, smallest and largest as
    :class:`Extent` s (None when no member has a value).

    ``censored``: members known only to exceed a bound; ``undefined``: members without a value
    (no final circuit); ``not_applicable``: members where the quantity's claim does not apply.
    """

    quantity: str
    values: dict[str, GridValue]
    median: Extent | None
    low: Extent | None
    high: Extent | None
    censored: tuple[str, ...] = ()
    undefined: tuple[str, ...] = ()
    not_applicable: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        """Members with a value (reached or censored)."""
        return len(self.values) - len(self.undefined)

    def range_text(self) -> str:
        fmt = _fmt(self.quantity)
        if self.low is None or self.high is None:
            return "no value"
        return f"[{self.low.text(fmt)}, {self.high.text(fmt)}]"

    def text(self) -> str:
        if self.low is None or self.median is None:
            if self.not_applicable and not self.values:
                return f"not judged: {quantity_claim(self.quantity) or self.quantity} applies to no member"
            return "undefined in every member" if self.undefined else "no member"
        fmt = _fmt(self.quantity)
        censored = f" ({len(self.censored)} censored: known only to exceed a bound)" if self.censored else ""
        median = self.median.text(fmt)
        return (f"median {'in ' if median[0] in '([' else ''}{median}, range {self.range_text()} over {self.n} "
                f"members{censored}")

    def to_dict(self) -> dict:
        return {"median": self.median.to_dict() if self.median else None, "low": self.low.to_dict() if self.low else None,
                "high": self.high.to_dict() if self.high else None, "censored": list(self.censored),
                "undefined": list(self.undefined), "not_applicable": list(self.not_applicable), "text": self.text()}


def spread(quantity: str, members: Sequence[Member]) -> Spread:
    """The distribution of ``quantity`` over ``members`` that formed (censored values as intervals)."""
    judged = [m for m in members if m.judged]
    values = {m.id: m.quantities[quantity] for m in judged if _applies(m, quantity)}
    not_applicable = tuple(m.id for m in judged if not _applies(m, quantity))
    undefined = tuple(mid for mid, v in values.items() if v.bounds is None)
    defined = [v for v in values.values() if v.bounds is not None]
    censored = tuple(mid for mid, v in values.items() if v.value is None and v.censored_above is not None)
    if not defined:
        return Spread(quantity, values, None, None, None, censored, undefined, not_applicable)
    bounds = [v.bounds for v in defined]
    strict = [v.value is None for v in defined]
    return Spread(quantity, values, _median(bounds, strict), _order_statistic(bounds, strict, 0),  # type: ignore[arg-type]
                  _order_statistic(bounds, strict, len(bounds) - 1), censored, undefined, not_applicable)  # type: ignore[arg-type]


def _relation(c: tuple[float, float], m: tuple[float, float]) -> int | None:
    """Where value ``c`` lies against value ``m`` (each (lo, hi) from :attr:`GridValue.bounds`): -1 surely
    below, 1 surely above, 0 equal, None either way (their intervals overlap: a censored bound)."""
    if c[0] == c[1] and m[0] == m[1]:
        return (c[0] > m[0]) - (c[0] < m[0])
    if c[1] <= m[0]:  # c's top at or below m's bound: m is beyond it (a censored bound is excluded)
        return -1
    if m[1] <= c[0]:
        return 1
    return None


@dataclass(frozen=True)
class Placement:
    """Where a candidate's value of one quantity falls among the n reference members' values.

    ``below`` / ``tied`` / ``overlapping`` / ``above``: reference members surely smaller, equal,
    either way (a censored value whose interval overlaps), surely larger. ``outlier``: the candidate
    lies beyond every reference member (``side`` "below" or "above"): a flag. ``p_extreme``: for a
    member exchangeable with the reference, the chance of a rank at least this far out on either
    side (twice the one-sided (n + 1 - below) / (n + 1) or (n + 1 - above) / (n + 1), at most 1:
    ties and overlaps count against the candidate). ``family``: the quantities compared for this
    candidate; ``p_adjusted``: the joint p that decides (``p_joint``; the quantity alone where no
    joint rule was applied): "fails" only below ``alpha``. ``same_event_as``: the quantity whose
    flag is the same event (counted there, not here). Inside the range the status is "consistent,
    not established": a rule that does not reject establishes nothing.
    """

    quantity: str
    candidate: str
    value: GridValue
    n: int
    below: int
    tied: int
    overlapping: int
    above: int
    reference: str
    outlier: bool
    side: str
    p_extreme: float | None
    family: int
    p_adjusted: float | None
    alpha: float
    same_event_as: str
    status: Status
    message: str
    #: the rule that decided: "rank" or "log-normal" (:data:`PLACEMENT_RULES`); ``p_rule``
    #: its p for this quantity (the rank rule's is ``p_extreme``; the log-normal rule's the t prediction
    #: p, None where it does not apply and the rank rule decides instead: ``rule`` then says "rank")
    rule: str = "rank"
    p_rule: float | None = None
    #: the joint rule over the quantities compared (:data:`JOINT_RULES`) and its p for the candidate
    #: (the rank rule's permutation min-p; None under Holm, which compares each p with its own level)
    joint_rule: str = ""
    p_joint: float | None = None

    @property
    def inside(self) -> bool:
        """Within the reference members' range (consistent with them: nothing is established)."""
        return not self.outlier and self.status is Status.CONSISTENT_NOT_ESTABLISHED

    @property
    def rank(self) -> tuple[int, int]:
        """(lowest, highest) rank of the candidate among the n + 1 values (ties and overlaps give a range)."""
        return self.below + 1, self.below + self.tied + self.overlapping + 1

    @property
    def flag(self) -> str:
        """'' (inside), 'outlier (flag)', 'outlier (same event as <q>)' or 'outlier (fails)'."""
        if not self.outlier:
            return ""
        if self.same_event_as:
            return f"outlier (same event as {self.same_event_as})"
        return "outlier (fails)" if self.status is Status.FAILS else "outlier (flag)"

    def to_dict(self) -> dict:
        return {"quantity": self.quantity, "candidate": self.candidate, "n": self.n, "rank": list(self.rank),
                "below": self.below, "tied": self.tied, "overlapping": self.overlapping, "above": self.above,
                "reference": self.reference, "outlier": self.outlier, "flag": self.flag, "side": self.side,
                "p_extreme": self.p_extreme, "family": self.family, "p_adjusted": self.p_adjusted, "alpha": self.alpha,
                "same_event_as": self.same_event_as or None,
                "method": PREDICTION_T if self.rule == "log-normal" else PREDICTION_INTERVAL, "rule": self.rule,
                "p_rule": self.p_rule, "joint_rule": self.joint_rule or None, "p_joint": self.p_joint,
                "status": self.status.value, "message": self.message}


def min_members_to_fail(family: int, alpha: float) -> int:
    """The fewest reference members with which a candidate beyond all of them on one quantity can
    fail under Bonferroni over ``family`` quantities (the rule before the permutation min-p, reported for
    comparison): the least n with family x 2 / (n + 1) < alpha (40 for one quantity at 0.05, 160 for four).
    Under the permutation min-p rule that decides now it is ``min_members_to_fail(1, alpha)``
    whatever the number of quantities (the candidate's 2 / (n + 1) ties at least the member at the
    other end)."""
    n = 1
    while family * 2 / (n + 1) >= alpha:
        n += 1
    return n


def _rank_p(c: tuple[float, float], ref: Sequence[tuple[float, float]]) -> tuple[int, int, int, int, float]:
    """(below, tied, overlapping, above, p_extreme) of value ``c`` among the values ``ref``: the chance
    that an exchangeable member lands at least that far out, either side (ties and overlaps against it)."""
    rel = [_relation(c, m) for m in ref]
    below, above, tied = rel.count(1), rel.count(-1), rel.count(0)
    n = len(ref)
    p_up, p_down = (n + 1 - below) / (n + 1), (n + 1 - above) / (n + 1)
    return below, tied, rel.count(None), above, min(1.0, 2 * min(p_up, p_down))


def _lognormal_p(value: GridValue, reference: Sequence[GridValue]) -> tuple[float | None, str]:
    """The t prediction p of ``value`` among ``reference`` on the log scale, or (None, why not): the
    rule needs every reference value reached (a censored one has no place in a mean) and some spread."""
    if any(v.value is None for v in reference):
        return None, "a reference value is censored (not reached by the final revision)"
    refs = [float(v.value) for v in reference]  # type: ignore[arg-type]
    if value.value is not None:
        p = prediction_p(refs, value.value)
    else:
        p = prediction_p(refs, value.censored_above, censored_above=True)  # type: ignore[arg-type]
    if p is None:
        return None, ("the reference values do not spread (every member on one revision)" if len(set(refs)) < 2
                      else "a value is not positive")
    return p, ""


def place(quantity: str, candidate: Member, reference: Sequence[Member], spec: Thresholds = SPEC, *,
          family: int = 1, same_event_as: str = "", rule: str = "rank",
          joint: tuple[str, float, bool] | None = None) -> Placement:
    """``candidate``'s value of ``quantity`` against the reference members' (see :class:`Placement`).

    ``rule``: the population's placement rule (:data:`PLACEMENT_RULES`). ``joint``: (joint rule in
    words, the candidate's joint p, whether this quantity fails under it), which :func:`audit` sets
    after comparing every quantity; without it the quantity is decided alone (its own p < alpha).
    ``family``: how many quantities the candidate is compared on (reported)."""
    fmt = _fmt(quantity)
    words = quantity_words(quantity)
    alpha = spec.population_outlier_alpha
    value = candidate.quantities[quantity]
    sp = spread(quantity, reference)
    ref_values = [v for v in sp.values.values() if v.bounds is not None]
    ref = [v.bounds for v in ref_values]
    n = len(ref)

    def result(status: Status, message: str, **kw) -> Placement:
        base = dict(below=0, tied=0, overlapping=0, above=0, outlier=False, side="", p_extreme=None, p_adjusted=None)
        base.update(kw)
        return Placement(quantity, candidate.id, value, n, reference=sp.text(), family=family, alpha=alpha,
                         same_event_as=same_event_as, status=status, message=message, **base)

    if not candidate.judged:
        return result(Status.NOT_JUDGED, f"not judged: {candidate.id} did not form its circuit "
                                         f"({gate_verdict(candidate.verdicts).key})")  # type: ignore[union-attr]
    claim = quantity_claim(quantity)
    if not _applies(candidate, quantity):
        return result(Status.NOT_APPLICABLE, f"{words} is not judged: {claim} does not apply to {candidate.id} "
                                             f"({candidate.verdicts[claim].key})")  # type: ignore[index]
    if sp.not_applicable and not sp.values:
        return result(Status.NOT_APPLICABLE, f"{words} is not judged: {claim} applies to none of the reference members")
    c = value.bounds
    if c is None:
        return result(Status.NOT_APPLICABLE, f"{words} is undefined for {candidate.id} ({value.undefined})")
    if n < 2:
        return result(Status.NOT_APPLICABLE, f"{words}: {n} reference member(s) with a value; placing a candidate "
                                             "needs at least 2")
    if value.value is None and all(math.isinf(b[1]) for b in ref):
        return result(Status.NOT_APPLICABLE, f"{words} is reached by neither {candidate.id} nor any of the {n} "
                                             "reference members by their final revisions: nothing to compare")
    below, tied, overlapping, above, p_extreme = _rank_p(c, ref)
    outlier = below == n or above == n
    side = "above" if below == n else "below" if above == n else ""
    used, p_rule, why_not = "rank", p_extreme, ""
    if rule == "log-normal":
        p_t, why_not = _lognormal_p(value, ref_values)
        if p_t is not None:
            used, p_rule = "log-normal", p_t
    if joint is None:
        joint_words, p_joint, fails = "", p_rule, p_rule < alpha
    else:
        joint_words, p_joint, fails = joint
    lo_r, hi_r = below + 1, below + tied + overlapping + 1
    rank = f"rank {lo_r}" + (f"-{hi_r}" if hi_r != lo_r else "") + f" of {n + 1}"
    where = (f"the {n} reference members: {sp.text()}")
    kw = dict(below=below, tied=tied, overlapping=overlapping, above=above, outlier=outlier, side=side,
              p_extreme=p_extreme, p_adjusted=p_joint, rule=used, p_rule=p_rule, joint_rule=joint_words,
              p_joint=p_joint)
    rule_words = ("" if used == "rank" and rule == "rank" else
                  f"; t prediction p on the log scale {p_rule:.3g}" if used == "log-normal" else
                  f"; the log-normal rule does not apply ({why_not}): the rank rule decides")
    if not outlier:
        return result(Status.CONSISTENT_NOT_ESTABLISHED,
                      f"within its siblings (consistent with them; a rule that does not reject establishes "
                      f"nothing): {candidate.id}'s {words} is {value.text(quantity)}, {rank} "
                      f"({below} reference members below, {tied} tied"
                      + (f", {overlapping} either way (censored)" if overlapping else "")
                      + f", {above} above){rule_words}; {where}", **kw)
    placed = _placed().get(quantity)
    later = "later" if placed is None or placed[1].grows_with_time else "larger"
    earlier = "earlier" if later == "later" else "smaller"
    chance = (f"a member of the population lands at least this far out (either side) with probability "
              f"{p_extreme:.3g} (2 of the {n + 1} ranks)" if p_extreme == 2 / (n + 1) else
              f"a member of the population lands at least this far out (either side) with probability {p_extreme:.3g}")
    fact = (f"{candidate.id}'s {words} is {value.text(quantity)}, {later if side == 'above' else earlier} than every "
            f"one of the {n} reference members ({rank}; {where}); {chance}{rule_words}")
    if same_event_as:
        return result(Status.CONSISTENT_NOT_ESTABLISHED,
                      f"outlier (flag), the same event as {same_event_as} (counted once, there): {fact}", **kw)
    decided = (f"; {joint_words} over {family} quantities: joint p = {p_joint:.3g}" if joint_words else "")
    if fails:
        return result(Status.FAILS, f"outlier (fails): {fact}{decided} < alpha {alpha:g}: it does not belong with them",
                      **kw)
    need = min_members_to_fail(1, alpha)
    return result(Status.CONSISTENT_NOT_ESTABLISHED,
                  f"outlier (flag): {fact}{decided}, not below alpha {alpha:g}: a flag, not a failure"
                  + (f" ({n} reference members cannot show it under the rank rule: a candidate beyond all of them "
                     f"fails from {need} members on)" if used == "rank" and n < need else ""), **kw)


def _member_min_p(member: Member, others: Sequence[Member], quantities: Sequence[str]) -> float | None:
    """The smallest rank p of ``member`` over ``quantities``, placed against ``others`` (None: no value)."""
    ps = []
    for q in quantities:
        mine = member.quantities[q].bounds if member.judged and _applies(member, q) else None
        theirs = [o.quantities[q].bounds for o in others if o.judged and _applies(o, q)]
        theirs = [b for b in theirs if b is not None]
        if mine is None or len(theirs) < 2:
            continue
        ps.append(_rank_p(mine, theirs)[4])
    return min(ps) if ps else None


def audit(candidate: Member, reference: Sequence[Member], spec: Thresholds = SPEC,
          rule: str = "rank") -> dict[str, Placement]:
    """``candidate`` placed on every quantity under the population's ``rule``: flags grouped by event
    (:func:`same_event`, counted once), the quantities decided jointly (:data:`JOINT_RULES`): under
    the rank rule by the permutation min-p over the quantities compared (each reference member's own
    smallest rank p, placed against the others and the candidate, calibrates the candidate's); under
    the log-normal rule by Holm's step-down over the quantities' p (the rank p where the t
    prediction interval does not apply)."""
    if rule not in PLACEMENT_RULES:
        raise ValueError(f"placement rule {rule!r}: allowed {', '.join(PLACEMENT_RULES)}")
    alpha = spec.population_outlier_alpha
    first = {q: place(q, candidate, reference, spec, rule=rule) for q in quantities_of([candidate, *reference])}
    compared = [q for q, p in first.items() if p.status not in (Status.NOT_APPLICABLE, Status.NOT_JUDGED)]
    family = max(1, len(compared))
    joint: dict[str, tuple[str, float, bool]] = {}
    if compared and rule == "rank":
        p_c = min(first[q].p_extreme for q in compared)  # type: ignore[type-var]
        members = [m for m in reference if m.judged]
        mins = [_member_min_p(m, [o for o in members if o is not m] + [candidate], compared) for m in members]
        p_joint = permutation_min_p(p_c, [p for p in mins if p is not None])
        for q in compared:
            joint[q] = (JOINT_RULES["rank"], p_joint, p_joint < alpha and first[q].p_extreme <= p_c + 1e-12)
    elif compared:
        adjusted = holm_adjusted([first[q].p_rule for q in compared])  # type: ignore[misc]
        for q, a in zip(compared, adjusted):
            joint[q] = (JOINT_RULES["log-normal"], a, a < alpha)
    out: dict[str, Placement] = {}
    for q, p in first.items():
        cause = next((c for c, side in same_event(q, p.side) if first[c].outlier and first[c].side == side),
                     "") if p.outlier else ""
        out[q] = place(q, candidate, reference, spec, family=family, same_event_as=cause, rule=rule, joint=joint[q]) \
            if q in joint else replace(p, family=family)
    return out


@dataclass(frozen=True)
class LeaveOneOut:
    """Each reference member placed against the others: how many fall inside the others' range.
    ``not_compared``: members with nothing to compare against (the milestone reached by none)."""

    quantity: str
    inside: tuple[str, ...]
    outside: tuple[str, ...]
    n: int
    not_compared: tuple[str, ...] = ()

    @property
    def expected(self) -> float | None:
        """The share expected inside for exchangeable members: (n - 2) / n."""
        return (self.n - 2) / self.n if self.n >= 3 else None

    def text(self) -> str:
        if self.n < 3:
            return f"leave-one-out needs >= 3 reference members with a value ({self.n})"
        if not self.inside and not self.outside:
            return "leave-one-out: nothing to compare (no reference member reaches it by its final revision)"
        return (f"leave-one-out: {len(self.inside)} of {self.n} reference members inside the range of the others "
                f"(expected {100 * self.expected:.0f}% for exchangeable members)"
                + (f"; outside: {', '.join(self.outside)}" if self.outside else ""))


def leave_one_out(quantity: str, reference: Sequence[Member]) -> LeaveOneOut:
    """:func:`place` each judged reference member with a value against the other reference members."""
    judged = [m for m in reference if m.judged and _applies(m, quantity) and m.quantities[quantity].bounds is not None]
    inside, outside, not_compared = [], [], []
    if len(judged) >= 3:
        for m in judged:
            p = place(quantity, m, [o for o in judged if o is not m])
            if p.status in (Status.NOT_APPLICABLE, Status.NOT_JUDGED):
                not_compared.append(m.id)
            else:
                (outside if p.outlier else inside).append(m.id)
    return LeaveOneOut(quantity, tuple(inside), tuple(outside), len(judged), tuple(not_compared))


# ---- everything about one population --------------------------------------------------------------


@dataclass
class PopulationReport:
    """A population judged: its members, each claim over the reference, spreads, candidates' places."""

    name: str
    members: list[Member]
    claims: dict[str, PopulationClaim] = field(default_factory=dict)
    spreads: dict[str, Spread] = field(default_factory=dict)
    loo: dict[str, LeaveOneOut] = field(default_factory=dict)
    #: candidate id -> quantity -> placement (:func:`audit`)
    placements: dict[str, dict[str, Placement]] = field(default_factory=dict)

    @property
    def failing_candidates(self) -> int:
        """Placements that fail (an outlier the joint rule rejects; flags do not count)."""
        return sum(p.status is Status.FAILS for ps in self.placements.values() for p in ps.values())

    @property
    def reference(self) -> list[Member]:
        return [m for m in self.members if m.role != "candidate"]

    @property
    def candidates(self) -> list[Member]:
        return [m for m in self.members if m.role == "candidate"]

    def to_dict(self) -> dict:
        return {
            "population": self.name,
            "members": [{"id": m.id, "role": m.role, "seed": m.seed, "formed": m.formed,
                         "verdicts": {c: v.status.value for c, v in m.verdicts.items()},
                         "quantities": {q: {"value": g.value, "interval": list(g.interval) if g.interval else None,
                                            "censored_above": g.censored_above, "undefined": g.undefined or None}
                                        for q, g in m.quantities.items()}}
                        for m in self.members],
            "claims": {c: pc.to_dict() for c, pc in self.claims.items()},
            "spreads": {q: s.to_dict() for q, s in self.spreads.items()},
            "leave_one_out": {q: {"inside": list(l.inside), "outside": list(l.outside), "n": l.n,
                                  "not_compared": list(l.not_compared)}
                              for q, l in self.loo.items()},
            "placements": {c: {q: p.to_dict() for q, p in ps.items()} for c, ps in self.placements.items()},
        }


def judge_population(population: Population, records: Mapping[str, Sequence[MeasurementRecord]],
                     spec: Thresholds = SPEC) -> PopulationReport:
    """Judge every member (``records`` by member id; a member without records is left out) and the
    population: each claim over the reference members, each quantity's spread, each candidate's place."""
    members = []
    for m in population.members:  # one member's records at a time (``records`` may read them on access)
        recs = records.get(m.id)
        if recs:
            members.append(judge_member(m, recs, spec))
    return population_report(population.id, members, spec, getattr(population, "placement", "rank"))


def population_report(name: str, members: Sequence[Member], spec: Thresholds = SPEC,
                      rule: str = "rank") -> PopulationReport:
    """:func:`judge_population` from members already judged; ``rule``: the population's placement rule."""
    out = PopulationReport(name, list(members))
    ref = out.reference
    judged = {c for m in ref for c in m.verdicts}
    claims = [c.name for c in all_claims() if c.name in judged or (not judged and not c.gate)]
    out.claims = {c: judge_claim_over(c, ref, name, spec) for c in claims}
    out.spreads = {q: spread(q, ref) for q in quantities_of(ref)}
    out.loo = {q: leave_one_out(q, ref) for q in quantities_of(ref)}
    out.placements = {c.id: audit(c, ref, spec, rule) for c in out.candidates}
    return out


def population_table(report: PopulationReport) -> str:
    """The population in plain text: per claim k/n with its interval; each quantity per member."""
    lines = [f"population {report.name}: {len(report.reference)} reference member(s), "
             f"{len(report.candidates)} candidate(s)"]
    for claim, pc in report.claims.items():
        declared = " (each failure a member's declared deviation)" if pc.all_failures_declared else ""
        lines.append(f"  {claim:9s} {pc.status.words:28s} {pc.key}{declared}")
    for q, sp in report.spreads.items():
        lines.append(f"  {q}: {sp.text()}; {report.loo[q].text()}")
        for mid, g in sp.values.items():
            lines.append(f"    {mid}: {g.text(q)}")
    for cid, ps in report.placements.items():
        for q, p in ps.items():
            lines.append(f"  candidate {cid} {q}: " + ("" if p.outlier else f"{p.status.words}: ") + p.message)
    return "\n".join(lines)


__all__ = ["PLACEMENT_RULES", "JOINT_RULES", "SCREEN_QUANTITIES", "quantities", "quantities_of", "quantity_claim", "quantity_words", "same_event", "gate_verdict", "GridValue", "Member", "PopulationClaim", "Extent", "Spread",
           "Placement", "LeaveOneOut", "PopulationReport", "member_quantities", "member_of", "member_from_verdicts",
           "judge_member", "judge_claim_over", "spread", "place", "audit", "min_members_to_fail", "leave_one_out", "judge_population",
           "population_report", "population_table"]
