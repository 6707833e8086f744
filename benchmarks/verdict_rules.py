"""Size and power of every decision rule, and of the point rules they replaced, by exact sums and simulation.

Run by hand (numpy and scipy only, one core); it prints markdown tables (docs/statistics.md holds them):

- **the causal bar** ("circuit top-1 <= 25% of baseline"): the conditional binomial test (the
  rule before the current one) and the exact unconditional test (:func:`headwatch.stats.ratio_below_unconditional`),
  each as its rejection region over every outcome at N examples each (and at unequal N): the size
  is the largest chance of rejecting at the null's edge (circuit = 25% of baseline) over a grid of
  baseline rates, the power the chance of rejecting at circuit = 5% of baseline (exact sums, no
  simulation). The unconditional region is found once per N by bisection on the conditional p
  (the ordering), so the cost is bounded;
- **the control** (circuit below matched random): Fisher's test (before) and Boschloo's (now), the
  same way (size at equal rates, power at circuit = 1/4 of random);
- **a candidate among reference seeds**: four quantities per seed, normal on the log scale with
  correlation rho between quantities; the rank rule with Bonferroni (before), the rank rule with
  the permutation min-p (now, the default) and the log-normal rule with Holm (a panel's option), by
  simulation: the share of exchangeable candidates failing (size) and of candidates shifted by
  3 SD on every quantity, or on one, failing (power), at 5, 10 and 40 seeds.

    python benchmarks/verdict_rules.py --quick      # about a minute on one core
    python benchmarks/verdict_rules.py              # a few minutes: N up to 2000, more simulations
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from headwatch.stats import maximise_over_nuisance

ALPHA = 0.05
RATIO = 0.25


# ---- two counts: rejection regions over every outcome -----------------------------------------------


def _orders(n1: int, n2: int, ratio: float, kind: str) -> np.ndarray:
    """[n1 + 1, n2 + 1] the ordering statistic of every outcome (smaller: more evidence)."""
    x1, x2 = np.arange(n1 + 1)[:, None], np.arange(n2 + 1)[None, :]
    if kind == "conditional":
        return stats.binom.cdf(x1, x1 + x2, ratio * n1 / (ratio * n1 + n2))
    return stats.hypergeom.cdf(x1, n1 + n2, x1 + x2, n1)  # Fisher's one-sided p


def _stair(order: np.ndarray, t: float) -> np.ndarray:
    """Per x2 the largest x1 with order <= t (-1: none); monotone in x2 as the tests make it."""
    ok = order <= t
    c = np.where(ok.any(axis=0), ok.shape[0] - 1 - np.argmax(ok[::-1], axis=0), -1)
    return np.maximum.accumulate(c)


def _reject_prob(stair: np.ndarray, n1: int, n2: int, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    x2 = np.nonzero(stair >= 0)[0]
    if not len(x2):
        return np.zeros(len(p2))
    pmf = stats.binom.pmf(x2[None, :], n2, p2[:, None])
    cdf = stats.binom.cdf(stair[x2][None, :], n1, p1[:, None])
    return (pmf * cdf).sum(axis=1)


def regions(n1: int, n2: int, ratio: float, kind: str) -> dict[str, np.ndarray]:
    """The old (order < alpha) and the new (unconditional: order <= t*) rejection staircases."""
    order = _orders(n1, n2, ratio, kind)
    old = _stair(order, np.nextafter(ALPHA, 0))
    values = np.unique(order)
    lo, hi = 0, len(values) - 1  # find the largest t with sup P(order <= t) < alpha
    while lo < hi:
        mid = (lo + hi + 1) // 2
        stair = _stair(order, values[mid])
        size = maximise_over_nuisance(lambda th: _reject_prob(stair, n1, n2, np.minimum(ratio * th, 1), th),
                                      min(1.0, 1 / ratio))[0]
        lo, hi = (mid, hi) if size < ALPHA else (lo, mid - 1)
    return {"old": old, "new": _stair(order, values[lo])}


def two_count_table(cases, ratio: float, kind: str, alt: float, rates: np.ndarray) -> list[str]:
    names = ("conditional binomial (before)", "exact unconditional (now)") if kind == "conditional" else \
        ("Fisher (before)", "Boschloo (now)")
    rows = [f"| N (circuit, {'baseline' if kind == 'conditional' else 'random'}) | test | size (max over rates) | "
            + " | ".join(f"power at rate {r:g}" for r in (0.01, 0.04, 0.2)) + " |", "| --- | --- | ---: |" + " ---: |" * 3]
    for n1, n2 in cases:
        reg = regions(n1, n2, ratio, kind)
        for (label, stair), name in zip(reg.items(), names):
            size = _reject_prob(stair, n1, n2, np.minimum(ratio * rates, 1), rates).max()
            power = [_reject_prob(stair, n1, n2, np.array([alt * r]), np.array([r]))[0] for r in (0.01, 0.04, 0.2)]
            rows.append(f"| {n1}, {n2} | {name} | {size:.4f} | " + " | ".join(f"{p:.3f}" for p in power) + " |")
    return rows


# ---- a candidate among reference seeds ------------------------------------------------------------------


def placement_table(seeds: tuple[int, ...], reps: int, rho: float = 0.9, q: int = 4, shift: float = 3.0,
                    seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    cov = np.full((q, q), rho) + (1 - rho) * np.eye(q)
    chol = np.linalg.cholesky(cov)
    rows = ["| reference seeds | rule | size (exchangeable candidate) | power: 3 SD on all four | power: 3 SD on one |",
            "| ---: | --- | ---: | ---: | ---: |"]
    for n in seeds:
        results = {}
        for case, delta in (("size", np.zeros(q)), ("all", np.full(q, shift)), ("one", np.eye(q)[0] * shift)):
            x = rng.standard_normal((reps, n + 1, q)) @ chol.T
            x[:, n, :] += delta  # the candidate is the last
            ranks = x.argsort(axis=1).argsort(axis=1) + 1  # 1..n+1 within each quantity
            p = np.minimum(1.0, 2 * np.minimum(ranks, n + 2 - ranks) / (n + 1))  # each member against the others
            m = p.min(axis=2)
            mc = m[:, n]
            bonferroni = np.minimum(1.0, q * mc) < ALPHA
            joint = (1 + (m[:, :n] <= mc[:, None] + 1e-12).sum(axis=1)) / (n + 1) < ALPHA
            ref = x[:, :n, :]
            t = (x[:, n, :] - ref.mean(axis=1)) / (ref.std(axis=1, ddof=1) * np.sqrt(1 + 1 / n))
            pt = 2 * stats.t.sf(np.abs(t), n - 1)
            holm = pt.min(axis=1) < ALPHA / q  # Holm rejects something iff its first step does
            results[case] = (bonferroni.mean(), joint.mean(), holm.mean())
        for i, name in enumerate(("rank + Bonferroni (before)", "rank + permutation min-p (now, default)",
                                  "log-normal + Holm (panel's option)")):
            rows.append(f"| {n} | {name} | {results['size'][i]:.4f} | {results['all'][i]:.3f} | {results['one'][i]:.3f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N up to 256 and 4,000 simulations a cell")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rates = np.concatenate([np.geomspace(1e-4, 1, 200), np.linspace(0.005, 1, 200)])
    bar_cases = [(40, 40), (256, 256), (128, 256)] + ([] if args.quick else [(1000, 2000), (2000, 2000)])
    print(f"## The causal bar (circuit <= {RATIO:g} x baseline), alpha {ALPHA:g}; power at circuit = 5% of baseline\n")
    print("\n".join(two_count_table(bar_cases, RATIO, "conditional", 0.05, rates)))
    ctl_cases = [(40, 40), (256, 256)] + ([] if args.quick else [(1000, 1000)])
    print(f"\n## The control (circuit below matched random), alpha {ALPHA:g}; power at circuit = 1/4 of random\n")
    print("\n".join(two_count_table(ctl_cases, 1.0, "fisher", 0.25, rates[rates <= 1])))
    reps = 4000 if args.quick else 20000
    print(f"\n## A candidate among reference seeds: 4 quantities, correlation 0.9, {reps:,} simulations a cell\n")
    print("\n".join(placement_table((5, 10, 40) if args.quick else (5, 10, 40, 160), reps)))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
