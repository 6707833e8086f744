"""The statistics every verdict and record uses, in one place: intervals and exact tests.

Pure numpy/scipy, no torch: the probes use it to put intervals into records, the judge to test
top-1 counts. Each function states its method; the level defaults to SPEC's interval level.

- :func:`clopper_pearson`: exact binomial interval of a rate (task top-1, ablation top-1).
- :func:`fisher_less`: one-sided Fisher exact test that one rate is below another (the causal check).
- :func:`ratio_below`: one-sided exact test that one rate is below a given share of another (the
  causal check's "<= 25% of baseline" bar).
- :func:`binomial_at_least` / :func:`binomial_at_most`: exact binomial tails (a claim over a
  population's members: does it hold in most of them, or do the data exclude that?).
- :func:`bootstrap_weights` / :func:`percentile_interval`: the seeded bootstrap over examples that
  the probes use for ratio-of-means selectivities and the head counts built on them.
- :func:`count_from_rate`: a count back from a rate over a known N (published files give rates).
- :func:`nested_draw_probability`: the exact probability that distinct random draws all land in
  nested sets (F5's null: would randomly drawn heads all pass as the final induction heads did?).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from scipy import stats as _scipy_stats

from headwatch.spec import SPEC

#: Method names as records and verdicts state them.
CLOPPER_PEARSON = "Clopper-Pearson exact binomial"
BOOTSTRAP = "percentile bootstrap over examples"
FISHER = "one-sided Fisher exact test on top-1 counts"
RATIO_TEST = "one-sided exact conditional binomial test of the ratio of two top-1 counts"
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
