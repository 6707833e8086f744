"""Population verdicts (issue 24): a claim across the seeds of one run, and a candidate among them.

A population (``headwatch.fixtures.panels.Population``) is the reference members a panel declares
(e.g. PolyPythia's seeds 1-9 and the original, or the organisms' seeds 0-4) plus candidates under
audit. Every member is judged on its own first, by the one judge (:func:`judge.judge_model`, formation
included), and this module reads only those verdicts and the trajectory quantities of
:mod:`headwatch.claims.trajectory`; nothing is judged twice.

- :func:`judge_claim_over` a claim over the reference members: it holds in k of n members, with the
  exact (Clopper-Pearson) interval on the rate. Established ("holds") when the interval's lower bound
  is >= ``SPEC.population_min_rate`` (most members hold); "fails" when the claim fails in more than
  1 - that share of them; otherwise "consistent, not established". Members that did not form are
  "not judged" and left out of k and n (never counted as a pass); members where the claim does not
  apply are left out too.
- :func:`spread` the distribution over members of one quantity (t_induction, t_bos50, the F3 ratio,
  the F4 recall point): median, range, each member's value with the interval its revision grid
  allows; a milestone never reached by the final revision is censored, shown as a bound (> tokens).
- :func:`place` a candidate against the reference members: its rank, and whether it lies inside
  [min, max] of the n reference values, which covers a new exchangeable member with probability
  (n - 1) / (n + 1) (a nonparametric prediction interval; 67% for n = 5, 80% for n = 9): "outlier"
  when outside, said in words with that coverage. Members share their revisions, so all values lie
  on one grid: a candidate later than every reference member's revision is later than each of them,
  not only at the point estimate.
- :func:`leave_one_out` each reference member placed against the others: how often the range of
  n - 1 members holds the n-th (expected (n - 2) / n), a check of the interval on the population itself.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from headwatch.fixtures.panels import PanelModel, Population
from headwatch.formatting import fmt_pct, fmt_tokens
from headwatch.probes.record import MeasurementRecord
from headwatch.spec import CLAIMS, FORMATION, SPEC, Expectations, Thresholds
from headwatch.stats import CLOPPER_PEARSON, clopper_pearson

from . import trajectory as T
from .judge import judge_model
from .verdict import KeyFigure, Status, Verdict, check_deviation

#: The quantities whose spread over members is reported and against which candidates are placed.
QUANTITIES: tuple[str, ...] = ("t_induction", "t_bos50", "F3_ratio", "F4_recall_point")
#: What each quantity is, in words, with its unit.
QUANTITY_WORDS: dict[str, str] = {
    "t_induction": "t_induction", "t_bos50": "t_bos50", "F3_ratio": "F3 ratio", "F4_recall_point": "F4 recall point",
}
#: The method a placement states.
PREDICTION_INTERVAL = "nonparametric prediction interval [min, max] of the reference members"


# ---- one member ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GridValue:
    """One member's value of a quantity, as its revision grid allows.

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
    def order(self) -> float | None:
        """What ranks it: the value, +inf when censored above (later than any reached value), None if undefined."""
        if self.value is not None:
            return self.value
        return math.inf if self.censored_above is not None else None

    def text(self, quantity: str) -> str:
        """'2.62M (2.3M, 2.62M]', '> 4.6M (never reached)', 'undefined: ...'."""
        fmt = _fmt(quantity)
        if self.value is not None:
            iv = "" if self.interval is None else (
                f" ({fmt(self.interval[0])}, {fmt(self.interval[1]) if self.interval[1] is not None else 'inf'}]")
            return fmt(self.value) + iv
        if self.censored_above is not None:
            return f"> {fmt(self.censored_above)} (not reached by the final revision)"
        return f"undefined ({self.undefined})"


def _fmt(quantity: str):
    if quantity in ("t_induction", "t_bos50"):
        return fmt_tokens
    if quantity == "F4_recall_point":
        return lambda x: fmt_pct(x, ".3g")
    return lambda x: "?" if x is None else f"{x:.3g}x"


def member_quantities(records: Sequence[MeasurementRecord], total_tokens: float | None = None,
                      spec: Thresholds = SPEC) -> dict[str, GridValue]:
    """The four quantities of one member's records (:data:`QUANTITIES`), each a :class:`GridValue`."""
    recs = T.by_tokens(records)
    final_tokens = float(recs[-1].tokens_seen)  # type: ignore[arg-type]
    sep = T.induction_bos_separation(recs, spec.induction_min_heads, spec.induction, spec.bos_level, spec.bos)

    def milestone(m: T.Milestone) -> GridValue:
        if m.point is None:
            return GridValue(None, None, censored_above=final_tokens)
        return GridValue(m.tokens, m.bracket)

    out = {"t_induction": milestone(sep.induction), "t_bos50": milestone(sep.bos)}
    if sep.induction.point is None:
        out["F3_ratio"] = GridValue(None, undefined="t_induction never reached")
    elif sep.bos.point is None:
        # t_bos50 > final and t_induction <= its point: the ratio exceeds final / t_induction.
        out["F3_ratio"] = (GridValue(None, censored_above=final_tokens / sep.induction.tokens)
                           if sep.induction.tokens else GridValue(None, undefined="t_induction at 0 tokens"))
    elif sep.ratio is None:
        out["F3_ratio"] = GridValue(None, undefined="t_induction at 0 tokens")
    else:
        lo, hi = sep.bounds  # type: ignore[misc]
        out["F3_ratio"] = GridValue(sep.ratio, (lo, hi if math.isfinite(hi) else None))
    conv = T.first_recall_at_least(recs, spec.recall_level, spec.induction, total_tokens=total_tokens)
    if conv.point is None:
        out["F4_recall_point"] = GridValue(None, undefined="no induction head at the final revision")
    else:
        out["F4_recall_point"] = GridValue(conv.fraction_of_total, conv.fraction_bounds)
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
        f = self.verdicts.get(FORMATION)
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
    and members that did not form ("not judged"), are listed but not counted. ``interval`` is the
    exact interval of k / n at SPEC's level. ``declared``: failing members whose failure matches the
    deviation their panel declares for the claim (a known deviation, not news).
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
                "declared": list(self.declared)}


def _ids(ms: Sequence[Member]) -> str:
    return ", ".join(m.id for m in ms)


def judge_claim_over(claim: str, members: Sequence[Member], population: str = "",
                     spec: Thresholds = SPEC) -> PopulationClaim:
    """``claim`` over ``members`` (the reference members; see the module docstring for the rule)."""
    bar = spec.population_min_rate
    by: dict[str, list[Member]] = {"holds": [], "fails": [], "consistent": [], "na": [], "nj": []}
    declared, declaring = [], []
    for m in members:
        v = m.verdicts.get(claim)
        if v is None or v.status is Status.NOT_JUDGED or (claim != FORMATION and not m.judged):
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
    interval = clopper_pearson(k, n, spec.interval_level) if n else None
    level = f"{100 * spec.interval_level:g}%"
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
    lo, hi = interval  # type: ignore[misc]
    counts = (f"holds in {k} of {n} reference members{where} (rate {k / n:.2f}, {level} {CLOPPER_PEARSON} "
              f"[{lo:.3g}, {hi:.3g}])")
    parts = [counts]
    if by["fails"]:
        parts.append(f"fails in {_ids(by['fails'])}" + (" (as each declares)" if declared and set(declared) ==
                                                         {m.id for m in by['fails']} else ""))
    if by["consistent"]:
        parts.append(f"consistent, not established in {_ids(by['consistent'])}")
    if f / n > 1 - bar:
        status = Status.FAILS
        verdict = f"fails in most members ({f} of {n} > {1 - bar:g})"
    elif lo >= bar:
        status = Status.HOLDS
        verdict = f"established: the lower bound {lo:.3g} >= {bar:g} (it holds in most members)"
    else:
        status = Status.CONSISTENT_NOT_ESTABLISHED
        need = _members_needed(bar, spec.interval_level)
        verdict = (f"not established: the lower bound {lo:.3g} < {bar:g}"
                   + (f" ({n} members cannot establish it even if all hold: {need} would)" if k == n else ""))
    message = "; ".join(parts) + f"; {verdict}{tail}"
    key = f"{k}/{n} [{lo:.2f}, {hi:.2f}]"
    figure = KeyFigure("share of reference members where the claim holds", k / n, bar, (lo, hi), CLOPPER_PEARSON)
    return PopulationClaim(claim, population, status, message, key, k, n, (lo, hi), bar,
                           holds=tuple(m.id for m in by["holds"]), fails=tuple(m.id for m in by["fails"]),
                           consistent=tuple(m.id for m in by["consistent"]),
                           not_applicable=tuple(m.id for m in by["na"]), not_judged=tuple(m.id for m in by["nj"]),
                           declared=tuple(declared), declaring=tuple(declaring), figure=figure)


def _members_needed(bar: float, level: float) -> int:
    """The fewest members that establish the claim when every one holds (n of n clears the bar)."""
    n = 1
    while clopper_pearson(n, n, level)[0] < bar:
        n += 1
    return n


# ---- the spread of a quantity, and a candidate's place in it ------------------------------------------


@dataclass(frozen=True)
class Spread:
    """A quantity over members: each member's grid value, the median and the range.

    ``median`` / ``low`` / ``high`` are None when undefined; ``high_censored``: the largest member is
    censored (the range is open above); ``median_censored``: the median itself is censored;
    ``low_censored``: every member is censored (the smallest is only known to exceed ``low``). A
    censored bound is a lower bound, so ``high`` is the largest censored bound and ``low`` (all
    censored) the smallest.
    """

    quantity: str
    values: dict[str, GridValue]
    median: float | None
    low: float | None
    high: float | None
    high_censored: bool = False
    median_censored: bool = False
    low_censored: bool = False
    undefined: tuple[str, ...] = ()

    def text(self) -> str:
        fmt = _fmt(self.quantity)
        if self.low is None:
            return "undefined in every member" if self.undefined else "no member"
        if self.median_censored:
            med = f"> {fmt(self.median)}"
        else:
            med = fmt(self.median)
        hi = f"> {fmt(self.high)}" if self.high_censored else fmt(self.high)
        lo = f"> {fmt(self.low)}" if self.low_censored else fmt(self.low)
        return f"median {med}, range [{lo}, {hi}] over {len(self.values) - len(self.undefined)} members"


def spread(quantity: str, members: Sequence[Member]) -> Spread:
    """The distribution of ``quantity`` over ``members`` that formed (censored values as bounds)."""
    values = {m.id: m.quantities[quantity] for m in members if m.judged}
    ranked = sorted((v for v in values.values() if v.order is not None), key=lambda v: v.order)  # type: ignore[arg-type,return-value]
    undefined = tuple(mid for mid, v in values.items() if v.order is None)
    if not ranked:
        return Spread(quantity, values, None, None, None, undefined=undefined)
    orders = [v.order for v in ranked]
    med = statistics.median(orders)  # type: ignore[type-var]
    median_censored = not math.isfinite(med)
    if median_censored:  # the median falls among the censored: it exceeds the smallest censored bound
        med = min(v.censored_above for v in ranked if v.value is None)  # type: ignore[type-var]
    bounds = [v.censored_above for v in ranked if v.value is None]
    high_censored, low_censored = bool(bounds), len(bounds) == len(ranked)
    high = max(bounds) if high_censored else ranked[-1].value  # type: ignore[type-var]
    low = min(bounds) if low_censored else ranked[0].value  # type: ignore[type-var]
    return Spread(quantity, values, med, low, high, high_censored=high_censored, median_censored=median_censored,
                  low_censored=low_censored, undefined=undefined)


@dataclass(frozen=True)
class Placement:
    """Where a candidate's value of one quantity falls among the n reference members' values.

    ``below`` / ``tied`` / ``above``: reference members with a smaller, equal, larger value (a
    censored value ranks above every reached one). ``outlier``: the candidate lies strictly outside
    [min, max] of the reference (``side`` "below" or "above"); that interval covers a new exchangeable
    member with probability ``coverage`` = (n - 1) / (n + 1), so a member of the population lands
    outside it with probability 2 / (n + 1). ``p_extreme``: under exchangeability, the chance of a
    value at least this far out on its side, (tied + 1 + the reference members beyond it) / (n + 1).
    """

    quantity: str
    candidate: str
    value: GridValue
    n: int
    below: int
    tied: int
    above: int
    low: float | None
    high: float | None
    high_censored: bool
    outlier: bool
    side: str
    coverage: float | None
    p_extreme: float | None
    status: Status
    message: str

    @property
    def rank(self) -> tuple[int, int]:
        """(lowest, highest) rank of the candidate among the n + 1 values (ties give a range)."""
        return self.below + 1, self.below + self.tied + 1

    def to_dict(self) -> dict:
        return {"quantity": self.quantity, "candidate": self.candidate, "n": self.n, "rank": list(self.rank),
                "below": self.below, "tied": self.tied, "above": self.above, "low": self.low, "high": self.high,
                "high_censored": self.high_censored, "outlier": self.outlier, "side": self.side,
                "coverage": self.coverage, "p_extreme": self.p_extreme, "method": PREDICTION_INTERVAL,
                "status": self.status.value, "message": self.message}


def place(quantity: str, candidate: Member, reference: Sequence[Member]) -> Placement:
    """``candidate``'s value of ``quantity`` against the reference members' (see :class:`Placement`)."""
    fmt = _fmt(quantity)
    words = QUANTITY_WORDS[quantity]
    value = candidate.quantities[quantity]
    ref = {m.id: m.quantities[quantity] for m in reference if m.judged}
    orders = [v.order for v in ref.values() if v.order is not None]
    n = len(orders)
    sp = spread(quantity, [m for m in reference if m.judged])

    def result(status: Status, message: str, **kw) -> Placement:
        base = dict(below=0, tied=0, above=0, outlier=False, side="", coverage=None, p_extreme=None)
        base.update(kw)
        return Placement(quantity, candidate.id, value, n, low=sp.low, high=sp.high, high_censored=sp.high_censored,
                         status=status, message=message, **base)

    if not candidate.judged:
        return result(Status.NOT_JUDGED, f"not judged: {candidate.id} did not form its circuit "
                                         f"({candidate.verdicts[FORMATION].key})")
    if value.order is None:
        return result(Status.NOT_APPLICABLE, f"{words} is undefined for {candidate.id} ({value.undefined})")
    if n < 2:
        return result(Status.NOT_APPLICABLE, f"{words}: {n} reference member(s) with a value; placing a candidate "
                                             "needs at least 2")
    if all(math.isinf(o) for o in orders) and math.isinf(value.order):
        return result(Status.NOT_APPLICABLE, f"{words} is reached by neither {candidate.id} nor any of the {n} "
                                             "reference members by their final revisions: nothing to compare")
    c = value.order
    below = sum(o < c for o in orders)
    tied = sum(o == c for o in orders)
    above = n - below - tied
    coverage = (n - 1) / (n + 1)
    outlier = below == n or above == n
    side = "above" if below == n else "below" if above == n else ""
    # chance, for an exchangeable member, of landing at least this far out on the candidate's side
    beyond = above if below >= above else below
    p_extreme = (tied + 1 + beyond) / (n + 1)
    lo_r, hi_r = below + 1, below + tied + 1
    rank = f"rank {lo_r}" + (f"-{hi_r}" if hi_r != lo_r else "") + f" of {n + 1}"
    rng = f"[{'> ' if sp.low_censored else ''}{fmt(sp.low)}, {'> ' if sp.high_censored else ''}{fmt(sp.high)}]"
    pi = (f"the range of the {n} reference members {rng} (a {100 * coverage:.0f}% prediction interval for a new "
          "exchangeable member: (n-1)/(n+1))")
    if outlier:
        later = "later" if quantity in ("t_induction", "t_bos50", "F4_recall_point") else "larger"
        earlier = "earlier" if later == "later" else "smaller"
        message = (f"outlier: {candidate.id}'s {words} is {value.text(quantity)}, {later if side == 'above' else earlier} "
                   f"than every one of the {n} reference members ({rank}); outside {pi}. A member of the population "
                   f"lands this far out with probability {p_extreme:.2g} ({2 / (n + 1):.2g} for either side), "
                   "so with few members this flags, it does not prove")
        status = Status.FAILS
    else:
        message = (f"within its siblings: {candidate.id}'s {words} is {value.text(quantity)}, {rank} "
                   f"({below} reference members below, {tied} tied, {above} above); inside {pi}")
        status = Status.HOLDS
    return result(status, message, below=below, tied=tied, above=above, outlier=outlier, side=side,
                  coverage=coverage, p_extreme=p_extreme)


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
    judged = [m for m in reference if m.judged and m.quantities[quantity].order is not None]
    inside, outside, not_compared = [], [], []
    if len(judged) >= 3:
        for m in judged:
            p = place(quantity, m, [o for o in judged if o is not m])
            {Status.FAILS: outside, Status.HOLDS: inside}.get(p.status, not_compared).append(m.id)
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
    #: candidate id -> quantity -> placement
    placements: dict[str, dict[str, Placement]] = field(default_factory=dict)

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
            "spreads": {q: {"median": s.median, "low": s.low, "high": s.high, "high_censored": s.high_censored,
                            "low_censored": s.low_censored,
                            "median_censored": s.median_censored, "text": s.text()} for q, s in self.spreads.items()},
            "leave_one_out": {q: {"inside": list(l.inside), "outside": list(l.outside), "n": l.n,
                                  "not_compared": list(l.not_compared)}
                              for q, l in self.loo.items()},
            "placements": {c: {q: p.to_dict() for q, p in ps.items()} for c, ps in self.placements.items()},
        }


def judge_population(population: Population, records: Mapping[str, Sequence[MeasurementRecord]],
                     spec: Thresholds = SPEC) -> PopulationReport:
    """Judge every member (``records`` by member id; a member without records is left out) and the
    population: each claim over the reference members, each quantity's spread, each candidate's place."""
    members = [judge_member(m, records[m.id], spec) for m in population.members if records.get(m.id)]
    return population_report(population.id, members, spec)


def population_report(name: str, members: Sequence[Member], spec: Thresholds = SPEC) -> PopulationReport:
    """:func:`judge_population` from members already judged."""
    out = PopulationReport(name, list(members))
    ref = out.reference
    claims = ([FORMATION] if any(FORMATION in m.verdicts for m in ref) else []) + list(CLAIMS)
    out.claims = {c: judge_claim_over(c, ref, name, spec) for c in claims}
    out.spreads = {q: spread(q, ref) for q in QUANTITIES}
    out.loo = {q: leave_one_out(q, ref) for q in QUANTITIES}
    out.placements = {c.id: {q: place(q, c, ref) for q in QUANTITIES} for c in out.candidates}
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
            lines.append(f"  candidate {cid} {q}: {p.status.words}: {p.message}")
    return "\n".join(lines)


__all__ = ["QUANTITIES", "GridValue", "Member", "PopulationClaim", "Spread", "Placement", "LeaveOneOut",
           "PopulationReport", "member_quantities", "member_of", "member_from_verdicts", "judge_member", "judge_claim_over", "spread",
           "place", "leave_one_out", "judge_population", "population_report", "population_table"]
