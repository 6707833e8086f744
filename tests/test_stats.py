"""headwatch/stats.py and probes/intervals.py: the exact intervals and tests, and the bootstrap."""
from __future__ import annotations

import itertools
import math
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


# ---- issue 43: the exact unconditional tests, the paired tests, the population rules -------------

from headwatch.stats import (  # noqa: E402
    _conditional_order, _staircase, _tail, boschloo_less, holm_adjusted, maximise_over_nuisance, mcnemar_less,
    paired_ratio_below, permutation_min_p, prediction_p, ratio_below_unconditional,
)


def test_unconditional_ratio_test_on_the_published_olmo_counts_and_unequal_n():
    """1 vs 20 of 2000: 0.0460 (the conditional test: 0.0576); 1 of 1000 vs 20 of 2000 is not the
    equal-N test: 0.274 (conditional 0.306). Never above the conditional p on these counts."""
    assert ratio_below_unconditional(1, 2000, 20, 2000, 0.25) == pytest.approx(0.04595, abs=1e-5)
    assert ratio_below_unconditional(1, 1000, 20, 2000, 0.25) == pytest.approx(0.27362, abs=1e-5)
    for args in ((1, 2000, 20, 2000), (1, 1000, 20, 2000), (5, 2000, 81, 2000), (365, 2000, 1600, 2000)):
        assert ratio_below_unconditional(*args, 0.25) <= ratio_below(*args, 0.25)
    with pytest.raises(ValueError, match="ratio > 0"):
        ratio_below_unconditional(1, 10, 2, 10, 0.0)
    with pytest.raises(ValueError, match="a binomial count needs"):
        ratio_below_unconditional(3, 2, 1, 5, 0.25)


@pytest.mark.parametrize("k1, n1, k2, n2, rates", [(1, 2000, 20, 2000, 2000), (1, 1000, 20, 2000, 2000),
                                                    (3, 40, 20, 40, 20000)])
def test_the_nuisance_search_finds_the_maximum_of_a_dense_grid(k1, n1, k2, n2, rates):
    """The grid-and-refine search is checked against ``rates`` evenly spaced baseline rates plus as
    many log-spaced ones: it is never below their maximum (by more than 1e-9)."""
    stair = _staircase(_conditional_order(n1, n2, 0.25), k1, n1, k2, n2)
    dense = np.concatenate([np.linspace(1e-9, 1, rates), np.geomspace(1e-9, 1, rates)])
    brute = float(_tail(stair, n1, n2, 0.25, dense).max())
    assert ratio_below_unconditional(k1, n1, k2, n2, 0.25) >= brute - 1e-9


@pytest.mark.parametrize("n1, n2", [(40, 40), (30, 60)])
def test_unconditional_ratio_test_keeps_its_size(n1, n2):
    """The exact size of "p < 0.05" at the null's edge (circuit = 25% of baseline), summed over
    every outcome, stays at or below 0.05 at every baseline rate on a grid of 400, equal and unequal N."""
    reject = np.zeros((n1 + 1, n2 + 1), dtype=bool)
    for x2 in range(n2 + 1):  # the p grows with x1: the rejected x1 are 0..c
        for x1 in range(n1 + 1):
            if ratio_below_unconditional(x1, n1, x2, n2, 0.25) < 0.05:
                reject[x1, x2] = True
            else:
                break
    assert reject.any()
    x1, x2 = np.arange(n1 + 1), np.arange(n2 + 1)
    for rate in np.linspace(0.0025, 1.0, 400):
        joint = scipy_stats.binom.pmf(x1, n1, 0.25 * rate)[:, None] * scipy_stats.binom.pmf(x2, n2, rate)[None, :]
        assert (joint * reject).sum() <= 0.05 + 1e-12, rate


@pytest.mark.parametrize("k1, n1, k2, n2", [(3, 20, 9, 20), (1, 7, 6, 9), (0, 15, 4, 12), (4, 60, 12, 50),
                                            (5, 10, 5, 10), (7, 7, 0, 9)])  # weak evidence: the staircase's top rows
def test_boschloo_less_is_scipys_boschloo(k1, n1, k2, n2):
    expected = scipy_stats.boschloo_exact([[k1, k2], [n1 - k1, n2 - k2]], alternative="less", n=64).pvalue
    assert boschloo_less(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-6)
    assert boschloo_less(k1, n1, k2, n2) <= fisher_less(k1, n1, k2, n2)


def test_boschloo_less_on_pythias_published_counts():
    """Circuit 5 vs matched random 11 of 2000: 0.10023 (scipy's boschloo_exact with n = 200 gives the
    same to 1e-12, in two minutes; Fisher's p 0.1046)."""
    assert boschloo_less(5, 2000, 11, 2000) == pytest.approx(0.100235, abs=1e-6)


def test_mcnemar_less_is_the_binomial_of_the_discordant_examples():
    assert mcnemar_less(1, 9) == pytest.approx(11 / 1024)
    assert mcnemar_less(0, 0) == 1.0 and mcnemar_less(5, 5) > 0.5
    with pytest.raises(ValueError, match=">= 0"):
        mcnemar_less(-1, 3)


def _paired_outcomes(t: int):
    """Every (both, ablated only, baseline only) with total t."""
    return [(j, a, t - j - a) for j in range(t + 1) for a in range(t - j + 1)]


@pytest.mark.parametrize("t", [20, 30])
def test_paired_ratio_test_keeps_its_size_on_the_nulls_edge(t):
    """Given t examples correct in either pass, the exact size of "p < 0.05" stays at or below 0.05
    at every point of the null's edge (pi11 from 0 to the ratio; pi01 = (0.25 - pi11) / 1.25), and
    at an interior point of the null."""
    outcomes = _paired_outcomes(t)
    rejected = [o for o in outcomes if paired_ratio_below(*o, 0.25) < 0.05]
    assert rejected

    def size(pi11, pi01):
        pi10 = 1 - pi11 - pi01
        return sum(scipy_stats.multinomial.pmf([j, a, b], t, [pi11, pi01, pi10]) for j, a, b in rejected)

    for pi11 in np.linspace(0, 0.25, 26):
        assert size(pi11, (0.25 - pi11) / 1.25) <= 0.05 + 1e-12, pi11
    assert size(0.1, 0.3) <= 0.05  # inside the null: the ablated rate above 25% of baseline


def test_paired_ratio_test_establishes_a_clear_cut_and_not_one_at_the_bar():
    """Planted: 81 correct at baseline only and none with the ablation: established; 20 of 80
    correct in both passes (25% of baseline, at the bar) and nothing else: not."""
    assert paired_ratio_below(0, 0, 81, 0.25) < 1e-6
    assert paired_ratio_below(20, 0, 60, 0.25) > 0.3
    assert paired_ratio_below(0, 0, 0, 0.25) == 1.0
    with pytest.raises(ValueError, match="0 < ratio < 1"):
        paired_ratio_below(1, 1, 1, 1.0)


def test_maximise_over_nuisance_finds_an_interior_peak():
    peak, at = maximise_over_nuisance(lambda t: 1 - (t - 0.3137) ** 2)
    assert peak == pytest.approx(1.0, abs=1e-12) and at == pytest.approx(0.3137, abs=1e-6)


def test_prediction_p_on_the_log_scale():
    """Logs 0, 1, 2 (mean 1, s 1), candidate e^4: t = 3 / sqrt(4/3) = 2.598 with 2 df."""
    ref = [1.0, math.e, math.e ** 2]
    assert prediction_p(ref, math.e ** 4) == pytest.approx(2 * scipy_stats.t.sf(3 / math.sqrt(4 / 3), 2), rel=1e-9)
    assert prediction_p(ref, math.e ** 4, censored_above=True) == prediction_p(ref, math.e ** 4)
    assert prediction_p(ref, 1.0, censored_above=True) == 1.0  # a bound below the mean tells nothing
    assert prediction_p([2.0, 2.0], 3.0) is None and prediction_p([2.0], 3.0) is None


def test_permutation_min_p_and_holm():
    assert permutation_min_p(0.01, [0.5] * 39) == pytest.approx(1 / 40)
    assert permutation_min_p(0.05, [0.05, 0.5, 0.5, 0.01]) == pytest.approx(3 / 5)
    assert holm_adjusted([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjusted([]) == []


def test_the_staircase_counts_ties_within_a_relative_1e_9_of_the_observed_statistic():
    """Outcomes whose statistic is within 1e-9 (relative) of the observed one are as extreme as it (ties, up
    to rounding); just beyond, they are not. A synthetic ordering: x1 itself, the observed at x1 = 2."""
    for gap, included in ((0.99e-9, 3), (1.02e-9, 2)):
        def order(x1, x2, gap=gap):
            return np.where(np.asarray(x1) == 3, 2.0 * (1 + gap), np.asarray(x1, dtype=float))
        assert list(_staircase(order, 2, 5, 0, 1)) == [included, included], gap


def test_prediction_p_needs_two_positive_finite_values_and_a_positive_candidate():
    from headwatch.stats import prediction_p

    assert prediction_p([2.0], 3.0) is None  # one value: no spread to scale by
    assert 0 < prediction_p([1.0, 2.0], 1.5) <= 1  # two are enough
    assert prediction_p([1.0, 2.0, 4.0], 0.0) is None and prediction_p([1.0, 2.0, 4.0], -1.0) is None
    assert prediction_p([1.0, float("inf")], 2.0) is None


def test_prediction_p_of_a_censored_candidate_is_its_bounds_above_the_mean_and_1_below():
    from headwatch.stats import prediction_p

    ref = [1.0, 2.0, 4.0]  # geometric mean 2
    below = prediction_p(ref, 1.5)
    assert below < 1 and prediction_p(ref, 1.5, censored_above=True) == 1.0  # known only to exceed 1.5: anywhere
    just_above = prediction_p(ref, 2.2)  # 0 < t < 1: a bound above the mean is placed as the value would be
    assert just_above < 1 and prediction_p(ref, 2.2, censored_above=True) == just_above


def test_permutation_min_p_counts_ties_within_1e_12():
    from headwatch.stats import permutation_min_p

    assert permutation_min_p(0.5, [0.5 + 1e-12, 0.9]) == 2 / 3  # a tie up to rounding: counted against the candidate
    assert permutation_min_p(0.5, [0.5 + 1.02e-12, 0.9]) == 1 / 3


def test_holm_caps_each_adjusted_p_at_1():
    assert holm_adjusted([0.6, 0.7]) == [1.0, 1.0]
    assert holm_adjusted([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
