"""The statistics every verdict and record uses, in one place: intervals and exact tests.

Pure numpy/scipy, no torch: the probes use it to put intervals into records, the judge to test
top-1 counts. Each function states its method; the level defaults to SPEC's interval level.

- :func:`clopper_pearson`: exact binomial interval of a rate (task top-1, ablation top-1).
- :func:`fisher_less`: one-sided Fisher exact test that one rate is below another (the causal check).
- :func:`ratio_below`: one-sided conditional binomial test that one rate is below a given share of
  another (the causal bar's earlier test; kept as the ordering of the unconditional test).
- :func:`ratio_below_unconditional`: the exact unconditional test of that ratio (maximised over the
  nuisance baseline rate; Boschloo's construction), the causal bar's test on two independent counts;
  :func:`boschloo_less` the same construction against ratio 1 ordered by Fisher's p (Boschloo's test).
- :func:`paired_ratio_below` / :func:`mcnemar_less`: the paired tests (the same examples scored with
  and without an ablation) of the bar and of circuit below matched random.
- :func:`prediction_p` / :func:`permutation_min_p` / :func:`holm_adjusted`: a candidate seed against its
  reference seeds (a t prediction interval on the log scale), and joint rules over several quantities.
- :func:`binomial_at_least` / :func:`binomial_at_most`: exact binomial tails (a claim over a
  population's members: does it hold in most of them, or do the data exclude that?).
- :func:`bootstrap_weights` / :func:`percentile_interval`: the seeded bootstrap over examples that
  the probes use for ratio-of-means selectivities and the head counts built on them.
- :func:`count_from_rate`: a count back from a rate over a known N (published files give rates).
- :func:`nested_draw_probability`: the exact probability that distinct random draws all land in
  nested sets (F5's null: would randomly drawn heads all pass as the final induction heads did?).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

import numpy as np
from scipy import stats as _scipy_stats
from scipy.optimize import minimize_scalar

from headwatch.spec import SPEC

#: Method names as records and verdicts state them.
CLOPPER_PEARSON = "Clopper-Pearson exact binomial"
BOOTSTRAP = "percentile bootstrap over examples"
FISHER = "one-sided Fisher exact test on top-1 counts"
RATIO_TEST = "one-sided exact conditional binomial test of the ratio of two top-1 counts"
#: The bar's and the control's tests on two independent counts, and on paired outcomes.
RATIO_TEST_UNCONDITIONAL = ("one-sided exact unconditional test of the ratio of two binomial top-1 rates (Boschloo's "
                            "construction: ordered by the conditional binomial p, maximised over the baseline rate)")
BOSCHLOO = "one-sided Boschloo exact unconditional test on top-1 counts"
RATIO_TEST_PAIRED = ("one-sided exact paired test of the ratio of two top-1 rates (given the examples correct in "
                     "either pass, maximised over the share correct in both)")
MCNEMAR = "one-sided exact McNemar test on the discordant examples"
PREDICTION_T = "t prediction interval on the log scale (normal log values assumed)"
BINOMIAL_TEST = "one-sided exact binomial test"
NESTED_DRAW = "exact probability that as many distinct random heads all pass"
NO_INTERVAL_PUBLISHED = "no interval: published means"
REVISION_GRID = "revision grid (last revision before, first revision at)"


def clopper_pearson(k: int, n: int, level: float = SPEC.interval_level) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a binomial rate k/n; (0, 1) bounds are exact at k = 0 or n."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"a binomial count needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    alpha = 1 - level
    lo = 0.0 if k == 0 else float(_scipy_stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(_scipy_stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def fisher_less(k1: int, n1: int, k2: int, n2: int) -> float:
    """One-sided Fisher exact p-value that rate k1/n1 is below rate k2/n2.

    The two counts are treated as independent samples; for two ablations scored on the same
    examples this ignores the pairing (a paired test would need per-example outcomes, which the
    published files do not have), which makes the test conservative when outcomes correlate.
    """
    for k, n in ((k1, n1), (k2, n2)):
        if n <= 0 or not 0 <= k <= n:
            raise ValueError(f"a binomial count needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    table = [[k1, n1 - k1], [k2, n2 - k2]]
    return float(_scipy_stats.fisher_exact(table, alternative="less").pvalue)


def ratio_below(k1: int, n1: int, k2: int, n2: int, ratio: float) -> float:
    """One-sided exact p-value against "rate k1/n1 is at least ``ratio`` x rate k2/n2".

    Small p establishes rate1 < ratio x rate2 (the causal bar: circuit top-1 below 25% of baseline).
    Conditional on the total k1 + k2, k1 is binomial with success probability
    ratio x n1 / (ratio x n1 + n2) at the boundary of the null (exact for counts of rare events,
    the Poisson model); p = P(X <= k1). For two binomial counts the conditional law is tighter
    than that binomial (fewer than n1 + n2 trials are possible), which makes the test conservative:
    tests/test_stats.py computes its exact size over the baseline rate for N = 2000 (below alpha).
    Example: 1 of 2000 against 20 of 2000 at ratio 0.25: P(Bin(21, 0.2) <= 1) = 0.0576.
    """
    for k, n in ((k1, n1), (k2, n2)):
        if n <= 0 or not 0 <= k <= n:
            raise ValueError(f"a binomial count needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    if not 0 < ratio:
        raise ValueError(f"a rate ratio needs ratio > 0, got {ratio!r}")
    share = ratio * n1 / (ratio * n1 + n2)
    return float(_scipy_stats.binom.cdf(k1, k1 + k2, share))


def binomial_at_least(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): the one-sided p-value of k successes against a rate <= p."""
    return float(_scipy_stats.binom.sf(k - 1, n, p))


def binomial_at_most(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p): the one-sided p-value of k successes against a rate >= p."""
    return float(_scipy_stats.binom.cdf(k, n, p))


def count_from_rate(rate: float, n: int, *, tolerance: float = 1e-3) -> int:
    """The count k with k / n == rate (a published rate over N examples).

    Refuses a rate that is not a count over ``n`` (within ``tolerance`` of an integer): then N is
    not the number of examples the rate was taken over.
    """
    x = rate * n
    k = round(x)
    if abs(x - k) > tolerance or not 0 <= k <= n:
        raise ValueError(f"rate {rate!r} is not a count over N = {n} ({x:.4f} examples); "
                         "the record's number of examples must be the one the rate was measured on")
    return int(k)


def nested_draw_probability(sizes: Sequence[int], n: int) -> Fraction:
    """Exact probability that k distinct items drawn uniformly at random from ``n`` (without
    replacement) all land in their sets, item j in a set of ``sizes[j]`` items, when the sets are
    nested (each contains every smaller one; F5's "elevated by revision c" grows with c).

    With the sizes in ascending order s_1 <= ... <= s_k, the j-th item (counting from 0) has
    s_(j+1) - j admissible items left of n - j: P = prod_j max(s_(j+1) - j, 0) / (n - j). Exact
    rational arithmetic; the empty product (no sets) is 1.
    """
    if any(not 0 <= s <= n for s in sizes) or len(sizes) > n:
        raise ValueError(f"nested draw needs 0 <= each size <= n and at most n draws, got sizes {list(sizes)}, n={n}")
    p = Fraction(1)
    for j, s in enumerate(sorted(sizes)):
        p *= Fraction(max(s - j, 0), n - j)
    return p


def bootstrap_weights(n: int, n_resamples: int = SPEC.n_bootstrap, seed: int = SPEC.bootstrap_seed) -> np.ndarray:
    """How often each of ``n`` examples is drawn in each resample: [n_resamples, n] float64 counts.

    One multinomial draw of n per resample (sampling n examples with replacement), from
    ``numpy.random.default_rng(seed)``: the same seed gives the same resamples on every machine.
    A weighted sum ``weights @ values`` is then every resample's sum at once.
    """
    if n < 1 or n_resamples < 1:
        raise ValueError(f"bootstrap needs n >= 1 examples and >= 1 resample, got n={n}, resamples={n_resamples}")
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_resamples).astype(np.float64)


#: The copyable-position reading's method (probes/copying.py): sequences, not positions, are resampled.
SEQUENCE_BOOTSTRAP = "percentile bootstrap over sequences (a sequence's positions resampled together)"
#: Fewer sequences than this and a bootstrap over them says little about its own error: the reading
#: is then reported without a test ("not established").
MIN_BOOTSTRAP_SEQUENCES = 10


def sequence_bootstrap_totals(hits: Mapping[str, Sequence[int]], n_resamples: int = SPEC.n_bootstrap,
                              seed: int = SPEC.bootstrap_seed) -> dict[str, np.ndarray]:
    """Every resample's total hits per condition: {condition: [n_resamples] float64}.

    ``hits[condition]``: [S] hits per sequence, the same S sequences under every condition. Each
    resample draws S sequences with replacement (:func:`bootstrap_weights`) and the same draw serves
    every condition, so the conditions stay paired by sequence.
    """
    lengths = {len(v) for v in hits.values()}
    if len(lengths) != 1:
        raise ValueError(f"every condition needs one count per sequence; got lengths {sorted(lengths)}")
    weights = bootstrap_weights(lengths.pop(), n_resamples, seed)
    return {name: weights @ np.asarray(counts, dtype=np.float64) for name, counts in hits.items()}


def bootstrap_p_at_least(replicates: np.ndarray, null_value: float) -> float:
    """One-sided bootstrap p against "the statistic >= null_value": (1 + resamples at or above it) /
    (1 + resamples). Small when nearly every resample lies below the null value; never 0. NaN
    replicates (an undefined ratio) count as at the null value."""
    reps = np.asarray(replicates, dtype=np.float64)
    at_least = np.count_nonzero(~(reps < null_value))
    return float((1 + at_least) / (1 + reps.size))


def percentile_interval(replicates: np.ndarray, level: float = SPEC.interval_level,
                        discrete: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0 of ``replicates`` [n_resamples, ...] -> (lo [...], hi [...]).

    ``discrete``: the bounds are values the statistic took (inverted CDF), for counts and shares.
    """
    alpha = 1 - level
    method = "inverted_cdf" if discrete else "linear"
    lo = np.quantile(replicates, alpha / 2, axis=0, method=method)
    hi = np.quantile(replicates, 1 - alpha / 2, axis=0, method=method)
    return lo, hi


def finite_or_none(x: float | None) -> float | None:
    """None for None, NaN or infinity (JSON has no infinity; an open bound is None)."""
    return None if x is None or not math.isfinite(x) else float(x)


# ---- exact unconditional tests -------------------------------------------------------

#: The nuisance grid of the unconditional tests: this many log-spaced and this many evenly spaced
#: rates, then each of the best few local maxima refined by a bounded scalar search (the tail
#: probability is a smooth polynomial in the rate). tests/test_stats.py checks the result against a
#: grid of 20,000 rates.
NUISANCE_GRID = 96
NUISANCE_REFINED = 4


def _check_counts(*pairs: tuple[int, int]) -> None:
    for k, n in pairs:
        if n <= 0 or not 0 <= k <= n:
            raise ValueError(f"a binomial count needs 0 <= k <= n and n > 0, got k={k}, n={n}")


def _staircase(order: "Callable[[np.ndarray, np.ndarray], np.ndarray]", k1: int, n1: int, k2: int, n2: int) -> np.ndarray:
    """The outcomes at least as extreme as (k1, k2) under ``order`` (smaller: more evidence that rate 1
    is low): for each x2 in 0..n2, the largest x1 whose statistic is <= the observed one (-1: none).
    ``order`` is non-decreasing in x1 and non-increasing in x2; the staircase is made non-decreasing
    in x2 (a region closed under "fewer x1, more x2"), which only enlarges it (never anti-conservative).
    Vectorised bisection over x1: O(n2 log n1) evaluations of ``order``. Returns [n2 + 1] ints."""
    t0 = float(order(np.array([k1]), np.array([k2]))[0])
    tol = t0 + 1e-9 * abs(t0)  # a relative tolerance for ties: the orderings are p-values, some far below 1e-9
    x2 = np.arange(n2 + 1)
    lo = np.full(n2 + 1, -1)  # order(lo) <= tol (or lo = -1)
    hi = np.full(n2 + 1, n1 + 1)  # order(hi) > tol (or hi = n1 + 1)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        active = hi - lo > 1
        ok = order(np.clip(mid, 0, n1), x2) <= tol
        lo = np.where(active & ok, mid, lo)
        hi = np.where(active & ~ok, mid, hi)
    return np.maximum.accumulate(lo)


def _tail(stair: np.ndarray, n1: int, n2: int, ratio: float, theta: np.ndarray) -> np.ndarray:
    """P(outcome in the staircase) at rate 2 = theta, rate 1 = ratio x theta (the null's edge): [len(theta)]."""
    x2 = np.nonzero(stair >= 0)[0]
    if not len(x2):
        return np.zeros(len(theta))
    pmf = _scipy_stats.binom.pmf(x2[None, :], n2, theta[:, None])
    cdf = _scipy_stats.binom.cdf(stair[x2][None, :], n1, np.minimum(ratio * theta[:, None], 1.0))
    return np.clip((pmf * cdf).sum(axis=1), 0.0, 1.0)


def maximise_over_nuisance(tail: "Callable[[np.ndarray], np.ndarray]", upper: float = 1.0,
                           grid: int = NUISANCE_GRID, refined: int = NUISANCE_REFINED) -> tuple[float, float]:
    """(max, argmax) of ``tail`` (a vectorised function of a rate in (0, upper]) over the nuisance
    rate: ``grid`` log-spaced rates from 1e-7 and ``grid`` evenly spaced, then the ``refined`` best
    local maxima of that grid each refined by a bounded scalar search between its neighbours."""
    thetas = np.unique(np.concatenate([np.geomspace(1e-7 * upper, upper, grid), np.linspace(0, upper, grid + 1)[1:]]))
    values = tail(thetas)
    peaks = [i for i in range(len(thetas)) if (i == 0 or values[i] >= values[i - 1])
             and (i == len(thetas) - 1 or values[i] >= values[i + 1])]
    peaks = sorted(peaks, key=lambda i: -values[i])[:refined]
    best_v, best_t = float(values.max()), float(thetas[int(values.argmax())])
    for i in peaks:
        a, b = thetas[max(i - 1, 0)], thetas[min(i + 1, len(thetas) - 1)]
        if b <= a:
            continue
        r = minimize_scalar(lambda t: -float(tail(np.array([t]))[0]), bounds=(a, b), method="bounded",
                            options={"xatol": 1e-10 * upper})
        if -r.fun > best_v:
            best_v, best_t = float(-r.fun), float(r.x)
    return min(best_v, 1.0), best_t


def _conditional_order(n1: int, n2: int, ratio: float):
    share = ratio * n1 / (ratio * n1 + n2)
    return lambda x1, x2: _scipy_stats.binom.cdf(x1, x1 + x2, share)


def _fisher_order(n1: int, n2: int):
    # Fisher's one-sided p of [[x1, n1 - x1], [x2, n2 - x2]] (rate 1 below rate 2): a hypergeometric tail.
    return lambda x1, x2: _scipy_stats.hypergeom.cdf(x1, n1 + n2, x1 + x2, n1)


@functools.lru_cache(maxsize=4096)
def ratio_below_unconditional(k1: int, n1: int, k2: int, n2: int, ratio: float) -> float:
    """One-sided exact unconditional p-value against "rate k1/n1 >= ``ratio`` x rate k2/n2" for two
    independent binomial counts (the causal bar: circuit top-1 below 25% of baseline).

    Boschloo's construction for a ratio: outcomes are ordered by the conditional binomial test's
    p-value (:func:`ratio_below`, smaller: more evidence); p = the largest probability, over every
    rate pair of the null, of an outcome at least as extreme. The ordering is monotone (fewer
    circuit and more baseline successes are more extreme), so the largest lies on the null's edge
    rate 1 = ``ratio`` x rate 2 and only the baseline rate is a nuisance, maximised by
    :func:`maximise_over_nuisance`. The size is at most alpha at every baseline rate by
    construction (up to the grid, checked in tests/test_stats.py), and p is never above the
    conditional test's wherever that test keeps its size. Unequal N (1 of 1000 vs 20 of 2000) enter
    the binomial laws as they are. Cost: O(n2 log n1) for the ordering, O(n2) per nuisance rate.
    Example: 1 of 2000 vs 20 of 2000 at ratio 0.25: 0.0460 (the conditional test: 0.0576).
    """
    _check_counts((k1, n1), (k2, n2))
    if not 0 < ratio:
        raise ValueError(f"a rate ratio needs ratio > 0, got {ratio!r}")
    stair = _staircase(_conditional_order(n1, n2, ratio), k1, n1, k2, n2)
    upper = min(1.0, 1.0 / ratio)
    return maximise_over_nuisance(lambda t: _tail(stair, n1, n2, ratio, t), upper)[0]


@functools.lru_cache(maxsize=4096)
def boschloo_less(k1: int, n1: int, k2: int, n2: int) -> float:
    """Boschloo's one-sided exact unconditional test that rate k1/n1 is below rate k2/n2 (two
    independent binomial counts): outcomes ordered by Fisher's one-sided p, the probability of one
    at least as extreme maximised over the common rate. Never above Fisher's p; the same test as
    ``scipy.stats.boschloo_exact(alternative="less")`` on the table [[k1, k2], [n1 - k1, n2 - k2]]
    (checked in tests/test_stats.py), with the nuisance rate searched as in
    :func:`ratio_below_unconditional` at a bounded cost (about a second at N = 2000: results are cached)."""
    _check_counts((k1, n1), (k2, n2))
    stair = _staircase(_fisher_order(n1, n2), k1, n1, k2, n2)
    return maximise_over_nuisance(lambda t: _tail(stair, n1, n2, 1.0, t))[0]


# ---- paired outcomes: the same examples scored with and without an ablation ---------------------


def mcnemar_less(only_first: int, only_second: int) -> float:
    """One-sided exact McNemar p that pass 1's rate is below pass 2's on the same examples:
    ``only_first`` examples correct in pass 1 only, ``only_second`` in pass 2 only; given the
    discordant examples, each is pass 1's with probability 1/2 at the null's edge:
    p = P(Bin(only_first + only_second, 1/2) <= only_first) (1.0 with no discordant example)."""
    if only_first < 0 or only_second < 0:
        raise ValueError(f"discordant counts need to be >= 0, got {only_first}, {only_second}")
    return float(_scipy_stats.binom.cdf(only_first, only_first + only_second, 0.5))


def paired_ratio_below(both: int, only_ablated: int, only_baseline: int, ratio: float) -> float:
    """One-sided exact p against "ablated rate >= ``ratio`` x baseline rate" on paired outcomes (each
    example scored with and without the ablation): ``both`` examples correct in both passes,
    ``only_ablated`` correct with the ablation only, ``only_baseline`` correct at baseline only.

    The examples correct in neither pass carry no information on the ratio; given the t = both +
    only_ablated + only_baseline others, the three counts are multinomial (pi11, pi01, pi10) and the
    null is (1 - ratio) pi11 + pi01 - ratio pi10 >= 0. The statistic D = (1 - ratio) both +
    only_ablated - ratio only_baseline (smaller: more evidence); p = the largest probability of
    D <= observed over the null. Moving mass from "ablated only" (or "both") to "baseline only"
    only makes D smaller, so the largest lies on the null's edge, a segment parametrised by
    pi11 in [0, ratio] (pi01 = (ratio - pi11) / (1 + ratio)), searched as the nuisance by
    :func:`maximise_over_nuisance`; given both = j, only_ablated is binomial, so each rate costs O(t).
    """
    if min(both, only_ablated, only_baseline) < 0:
        raise ValueError(f"paired counts need to be >= 0, got {both}, {only_ablated}, {only_baseline}")
    if not 0 < ratio < 1:
        raise ValueError(f"a paired rate ratio needs 0 < ratio < 1, got {ratio!r}")
    t = both + only_ablated + only_baseline
    if t == 0:
        return 1.0
    d_obs = (1 - ratio) * both + only_ablated - ratio * only_baseline
    j = np.arange(t + 1)
    # D <= d  <=>  only_ablated <= (d + ratio t - j) / (1 + ratio), given both = j
    limit = np.floor((d_obs + ratio * t - j) / (1 + ratio) + 1e-9).astype(int)
    limit = np.minimum(limit, t - j)

    def tail(pi11: np.ndarray) -> np.ndarray:
        pi11 = np.minimum(pi11, ratio)
        pi01 = (ratio - pi11) / (1 + ratio)
        q = np.clip(pi01 / np.maximum(1 - pi11, 1e-300), 0.0, 1.0)  # P(ablated only | not both)
        pmf = _scipy_stats.binom.pmf(j[None, :], t, pi11[:, None])
        cdf = np.where(limit[None, :] >= 0, _scipy_stats.binom.cdf(limit[None, :], (t - j)[None, :], q[:, None]), 0.0)
        return np.clip((pmf * cdf).sum(axis=1), 0.0, 1.0)

    return maximise_over_nuisance(tail, ratio)[0]


# ---- a candidate seed against reference seeds ------------------------------------------


def prediction_p(reference: Sequence[float], candidate: float, *, censored_above: bool = False) -> float | None:
    """Two-sided p of a t prediction interval on the log scale: how far ``candidate`` lies from n
    ``reference`` values (all > 0), assuming their logs and the candidate's are independent draws
    of one normal law: (log y - mean) / (s sqrt(1 + 1/n)) ~ t(n - 1). None where it cannot be
    computed (fewer than 2 values, or no spread: s = 0). ``censored_above``: the candidate is known
    only to exceed ``candidate``; p is then that of the bound where it lies above the mean (the true
    value is further out: conservative), else 1.
    """
    logs = np.log(np.asarray(reference, dtype=float))
    n = len(logs)
    if n < 2 or candidate <= 0 or not np.all(np.isfinite(logs)):
        return None
    s = float(logs.std(ddof=1))
    if not s > 0:
        return None
    t = (math.log(candidate) - float(logs.mean())) / (s * math.sqrt(1 + 1 / n))
    if censored_above and t <= 0:
        return 1.0
    return float(min(1.0, 2 * _scipy_stats.t.sf(abs(t), n - 1)))


def permutation_min_p(p_candidate: float, p_members: Sequence[float]) -> float:
    """The joint p of a min-p rule calibrated by permutation: ``p_candidate`` is the candidate's
    smallest p over the quantities compared, ``p_members`` each reference member's own smallest p
    (that member placed against the other n, the candidate among them). Exchangeable with the
    reference, the candidate's is equally likely to be any of the n + 1: p = (1 + #{members with a
    min-p <= the candidate's}) / (n + 1). Exact under exchangeability whatever the quantities'
    dependence (one quantity counted as often as it is repeated)."""
    ties = sum(1 for p in p_members if p <= p_candidate + 1e-12)
    return (1 + ties) / (len(p_members) + 1)


def holm_adjusted(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (valid under any dependence): the i-th smallest of m
    (from 0) becomes max over j <= i of (m - j) p_(j), at most 1; a quantity is rejected at family-wise
    level alpha where its adjusted p is below alpha."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out
