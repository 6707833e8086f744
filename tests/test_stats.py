"""headwatch/stats.py and probes/intervals.py: the exact intervals and tests, and the bootstrap."""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats

from headwatch.probes.intervals import record_intervals, selectivity_replicates
from headwatch.probes.record import HEAD_CLASSES, TaskMetrics
from headwatch.probes.selectivity import SelectivityAccumulator
from headwatch.stats import (
    binomial_at_least, binomial_at_most, bootstrap_weights, clopper_pearson, count_from_rate, fisher_less,
    nested_draw_probability, percentile_interval, ratio_below,
)


@pytest.mark.parametrize("k, n", [(0, 2000), (5, 2000), (1715, 2000), (2000, 2000), (3, 7)])
def test_clopper_pearson_is_scipys_exact_interval(k, n):
    expected = scipy_stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    assert clopper_pearson(k, n) == pytest.approx((expected.low, expected.high), rel=1e-9, abs=1e-12)


def test_clopper_pearson_refuses_impossible_counts():
    with pytest.raises(ValueError, match="0 <= k <= n"):
        clopper_pearson(3, 2)


def test_fisher_less_is_one_sided():
    # Pythia's published ablation: circuit 5 vs matched random 11 of 2000
    assert fisher_less(5, 2000, 11, 2000) == pytest.approx(0.1046, abs=1e-4)
    assert fisher_less(11, 2000, 5, 2000) > 0.9  # the other direction is not evidence
    assert fisher_less(1, 2000, 27, 2000) < 1e-6


def test_ratio_below_on_the_published_olmo_counts():
    """Circuit 1 vs baseline 20 of 2000 against "circuit >= 25% of baseline": given the 21 correct
    answers, each is the circuit's with probability 0.25 / (0.25 + 1) = 0.2 at the null's edge, so
    p = P(Bin(21, 0.2) <= 1) = 0.8^21 + 21 x 0.2 x 0.8^20 = 0.0576 (issue 33: "p = 0.058")."""
    assert ratio_below(1, 2000, 20, 2000, 0.25) == pytest.approx(0.8 ** 21 + 21 * 0.2 * 0.8 ** 20, rel=1e-12)
    assert ratio_below(1, 2000, 20, 2000, 0.25) == pytest.approx(0.0576, abs=1e-4)
    assert ratio_below(5, 2000, 81, 2000, 0.25) < 1e-3  # Pythia 1B: 6.2% of baseline, established
    assert ratio_below(20, 2000, 80, 2000, 0.25) > 0.5  # at the bar: no evidence below it
    assert ratio_below(0, 10, 0, 10, 0.25) == 1.0  # nothing correct at all: nothing established
    with pytest.raises(ValueError, match="ratio > 0"):
        ratio_below(1, 10, 2, 10, 0.0)
    for args in ((0, 0, 1, 5), (-1, 5, 1, 5), (6, 5, 1, 5), (1, 5, 0, 0), (1, 5, 6, 5), (1, 5, -1, 5)):
        with pytest.raises(ValueError, match="a binomial count needs"):
            ratio_below(*args, 0.25)
    # the edges are counts: one example each, every example correct
    assert ratio_below(0, 1, 1, 1, 0.25) == pytest.approx(0.8) and ratio_below(5, 5, 5, 5, 0.25) == pytest.approx(0.99363, abs=1e-5)


@pytest.mark.parametrize("n, rates", [(40, np.linspace(0.01, 1.0, 100)), (2000, np.concatenate(
    [np.linspace(0.001, 0.03, 12), np.linspace(0.05, 1.0, 14)]))])
def test_ratio_below_keeps_its_size_for_binomial_counts(n, rates):
    """The test conditions as for counts of rare events (Poisson); for two binomial counts of n
    examples its exact size (the chance to reject when circuit = 25% of baseline exactly, summed
    over every pair of outcomes) stays below alpha = 0.05 at every baseline rate tried."""
    ks = np.arange(n + 1)
    p = scipy_stats.binom.cdf(ks[:, None], ks[:, None] + ks[None, :], 0.2)  # [circuit k, baseline k]
    reject = p < 0.05
    assert reject.any()
    for rate in rates:
        joint = scipy_stats.binom.pmf(ks, n, 0.25 * rate)[:, None] * scipy_stats.binom.pmf(ks, n, rate)[None, :]
        assert (joint * reject).sum() <= 0.05, rate
    assert ratio_below(3, n, 30, n, 0.25) == pytest.approx(p[3, 30])  # the matrix is the function


def test_binomial_tails():
    assert binomial_at_least(5, 5, 0.5) == binomial_at_most(0, 5, 0.5) == pytest.approx(1 / 32)
    assert binomial_at_least(0, 5, 0.5) == 1.0 and binomial_at_most(5, 5, 0.5) == pytest.approx(1.0)
    assert binomial_at_least(1, 5, 0.5) == pytest.approx(31 / 32)
    assert binomial_at_least(6, 7, 0.5) == pytest.approx(8 / 128)


def test_count_from_rate():
    assert count_from_rate(0.0005000000237487257, 2000) == 1  # a float32 rate from the author's files
    assert count_from_rate(0.0405, 2000) == 81
    with pytest.raises(ValueError, match="not a count over N = 2000"):
        count_from_rate(0.00123, 2000)


def test_bootstrap_weights_are_seeded_resamples():
    w = bootstrap_weights(50, 200, seed=3)
    assert w.shape == (200, 50) and (w.sum(1) == 50).all()
    assert np.array_equal(w, bootstrap_weights(50, 200, seed=3))
    assert not np.array_equal(w, bootstrap_weights(50, 200, seed=4))


def test_bootstrap_draws_pinned_by_value():
    """The seeded draws themselves (numpy's PCG64 and its multinomial): records' cached intervals
    depend on them, so a numpy that drew differently must turn this red, not shift intervals silently."""
    assert bootstrap_weights(5, 3).tolist() == [[1, 0, 0, 0, 4], [2, 2, 0, 1, 0], [1, 2, 1, 0, 1]]
    assert bootstrap_weights(5, 2, seed=1).tolist() == [[1, 3, 0, 1, 0], [0, 1, 2, 1, 1]]


def test_percentile_interval_by_value():
    reps = np.arange(40, dtype=float).reshape(40, 1)  # 0..39
    assert [float(x[0]) for x in percentile_interval(reps)] == pytest.approx([0.975, 38.025])
    assert [float(x[0]) for x in percentile_interval(reps, level=0.9)] == pytest.approx([1.95, 37.05])
    assert [float(x[0]) for x in percentile_interval(reps, discrete=True)] == [1.0, 38.0]


def test_bootstrap_weights_refuse_empty_draws():
    for n, k in ((0, 5), (5, 0)):
        with pytest.raises(ValueError, match="bootstrap needs n >= 1"):
            bootstrap_weights(n, k)
    assert bootstrap_weights(1, 1).tolist() == [[1]]


def _enumerated(sizes, n):
    """P(k distinct draws from range(n), draw j < sizes[j]) by listing every ordered draw."""
    draws = list(itertools.permutations(range(n), len(sizes)))
    hits = sum(all(d < s for d, s in zip(draw, sizes)) for draw in draws)
    return Fraction(hits, len(draws))


def test_nested_draw_probability_is_the_enumerated_probability():
    """Nested sets range(s): every size tuple up to 3 draws from up to 6 items, in any order."""
    for n in range(1, 7):
        for k in range(0, min(n, 3) + 1):
            for sizes in itertools.product(range(n + 1), repeat=k):
                assert nested_draw_probability(sizes, n) == _enumerated(sizes, n), (sizes, n)


def test_nested_draw_probability_refuses_impossible_draws():
    assert nested_draw_probability((3, 3, 3), 3) == 1 and nested_draw_probability((0,), 3) == 0
    for sizes, n in (((4,), 3), ((-1,), 3), ((1, 1, 1, 1), 3)):
        with pytest.raises(ValueError, match="nested draw needs"):
            nested_draw_probability(sizes, n)


def test_discrete_percentile_bounds_are_values_taken():
    reps = np.array([2.0, 3, 3, 3, 3, 3, 3, 3, 3, 4] * 10)
    lo, hi = percentile_interval(reps, discrete=True)
    assert (lo, hi) == (2.0, 4.0)


def _random_attention(n=64, L=2, H=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    values = torch.rand(n, len(HEAD_CLASSES), L, H, generator=g, dtype=torch.float64)
    baseline = torch.rand(n, L, H, generator=g, dtype=torch.float64) * 0.1 + 0.01
    valid = torch.rand(n, generator=g) > 0.2
    return values.numpy(), baseline.numpy(), valid.numpy()


def test_a_resample_of_every_example_once_is_the_screens_own_selectivity():
    """The bootstrap recomputes exactly what SelectivityAccumulator computes (valid-only classes too)."""
    values, baseline, valid = _random_attention()
    reps = selectivity_replicates(values, baseline, valid, np.ones((1, len(valid))))
    sums = {c: values[:, i].sum(0) if c not in ("induction", "duplicate-token") else values[valid, i].sum(0)
            for i, c in enumerate(HEAD_CLASSES)}
    for i, c in enumerate(HEAD_CLASSES):
        n = valid.sum() if c in ("induction", "duplicate-token") else len(valid)
        expected = (sums[c] / n) / (baseline.sum(0) / len(valid))
        assert np.allclose(reps[0, i], expected, rtol=1e-12), c


def test_the_screen_keeps_per_example_attention_only_when_asked():
    rows = torch.rand(4, 2, 3, 30, dtype=torch.float64)
    ab, valid = torch.tensor([20, 21, 22, 23]), torch.tensor([True, True, False, True])
    plain = SelectivityAccumulator(2, 3, 30, np.array([5, 6]))
    plain.update(rows, ab, valid)
    with pytest.raises(ValueError, match="keep_examples=True"):
        plain.examples()
    kept = SelectivityAccumulator(2, 3, 30, np.array([5, 6]), keep_examples=True)
    kept.update(rows, ab, valid)
    values, baseline, v = kept.examples()
    reps = selectivity_replicates(values, baseline, v, np.ones((1, 4)))
    table = kept.selectivity()
    for i, c in enumerate(HEAD_CLASSES):  # float32 per-example copies: agree to float32 precision
        assert reps[0, i, 1, 2] == pytest.approx(table["L1_H2"][c], rel=1e-5), c


def test_bootstrap_intervals_cover_a_known_ratio_of_means():
    """Coverage check on data with a known answer: ratio of two exponential means (true value 2)."""
    rng = np.random.default_rng(11)
    covered = 0
    trials = 100
    for t in range(trials):
        x = rng.exponential(2.0, size=(400, len(HEAD_CLASSES), 1, 1))
        base = rng.exponential(1.0, size=(400, 1, 1))
        reps = selectivity_replicates(x, base, np.ones(400, bool), bootstrap_weights(400, 300, seed=t))
        lo, hi = percentile_interval(reps[:, 0, 0, 0])
        covered += lo <= 2.0 <= hi
    assert 0.88 <= covered / trials <= 1.0, covered


def test_record_intervals_of_counts_and_bootstrap():
    values, baseline, valid = _random_attention()
    task = TaskMetrics(1.0, 0.25, 0.5, 1.0, n=64, top1_count=16)
    iv = record_intervals(values, baseline, valid, task=task, ablations={"induction_circuit": task},
                          n_resamples=200, seed=0, level=0.95, induction_threshold=1.0, bos_threshold=1.0)
    assert iv.task_top1 == pytest.approx(clopper_pearson(16, 64)) and set(iv.ablation_top1) == {"induction_circuit"}
    assert set(iv.selectivity) == {"L0_H0", "L0_H1", "L0_H2", "L1_H0", "L1_H1", "L1_H2"}
    lo, hi = iv.induction_heads
    assert 0 <= lo <= hi <= 6 and float(lo).is_integer() and float(hi).is_integer()
    exact_only = record_intervals(values, baseline, valid, task=task, ablations={}, n_resamples=0, seed=0,
                                  level=0.95, induction_threshold=1.0, bos_threshold=1.0)
    assert exact_only.selectivity == {} and exact_only.bos_fraction is None and "selectivity" not in exact_only.methods


def test_exact_tests_refuse_impossible_counts():
    for args in ((0, 0, 1, 5), (-1, 5, 1, 5), (6, 5, 1, 5), (1, 5, 0, 0), (1, 5, 6, 5), (1, 5, -1, 5)):
        with pytest.raises(ValueError, match="a binomial count needs"):
            fisher_less(*args)
    assert fisher_less(0, 5, 5, 5) == pytest.approx(1 / 252) and fisher_less(5, 5, 0, 5) == 1.0
    assert fisher_less(0, 1, 1, 1) == pytest.approx(0.5) and fisher_less(1, 1, 0, 1) == 1.0
    with pytest.raises(ValueError, match="a binomial count needs"):
        clopper_pearson(0, 0)
    assert clopper_pearson(0, 1) == pytest.approx((0.0, 0.975)) and clopper_pearson(1, 1) == pytest.approx((0.025, 1.0))


def test_count_from_rate_at_its_tolerance():
    assert count_from_rate(0.5, 2, tolerance=0.0) == 1
    with pytest.raises(ValueError, match="is not a count over N = 1000"):
        count_from_rate(0.00500102, 1000)  # 5.00102 examples: 0.00102 from a count
    with pytest.raises(ValueError, match="is not a count over N = 2"):
        count_from_rate(1.5, 2)  # 3 of 2


def test_count_from_rate_at_the_ends_and_finite_or_none():
    from headwatch.stats import finite_or_none

    assert count_from_rate(0.0, 2000) == 0 and count_from_rate(1.0, 4) == 4
    assert [finite_or_none(x) for x in (None, float("inf"), float("nan"), 2.0, 0)] == [None, None, None, 2.0, 0.0]
