"""Property tests of the participation ratio (docs/SPEC.md §3)."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from headwatch.probes.participation import is_elevated, participation_ratio


def matrices(min_n=2, max_n=24, min_d=2, max_d=12):
    shape = st.tuples(st.integers(min_n, max_n), st.integers(min_d, max_d))
    # Entries bounded away from denormals; at least one clearly non-zero entry.
    return shape.flatmap(lambda s: arrays(np.float64, s, elements=st.floats(-10, 10, allow_subnormal=False))).filter(
        lambda m: np.abs(m).max() > 1e-3
    )


def pr(m):
    return float(participation_ratio(torch.as_tensor(m)))


@given(matrices())
def test_bounds(m):
    value = pr(m)
    assert 1 - 1e-9 <= value <= min(m.shape) + 1e-6


@given(matrices(), st.floats(1e-3, 1e3))
def test_scale_invariant(m, scale):
    assert pr(m * scale) == pytest.approx(pr(m), rel=1e-6)


@given(matrices(), st.randoms(use_true_random=False))
def test_sample_permutation_invariant(m, rnd):
    order = list(range(m.shape[0]))
    rnd.shuffle(order)
    assert pr(m[order]) == pytest.approx(pr(m), rel=1e-6)


@given(matrices(), st.integers(0, 2**31 - 1))
def test_rotation_invariant(m, seed):
    q, _ = np.linalg.qr(np.random.RandomState(seed).randn(m.shape[1], m.shape[1]))
    assert pr(m @ q) == pytest.approx(pr(m), rel=1e-6, abs=1e-9)


@settings(max_examples=50)
@given(st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_rank_k_equal_singular_values_gives_k(k, seed):
    rng = np.random.RandomState(seed)
    n, d = 20, 10
    u, _ = np.linalg.qr(rng.randn(n, k))
    v, _ = np.linalg.qr(rng.randn(d, k))
    m = 3.0 * u @ v.T  # k equal singular values
    assert pr(m) == pytest.approx(k, rel=1e-6)


def test_batched_over_heads_equals_one_by_one():
    stack = torch.randn(3, 5, 40, 8)
    batched = participation_ratio(stack)
    assert batched.shape == (3, 5)
    assert float(batched[2, 4]) == pytest.approx(float(participation_ratio(stack[2, 4])))


def test_zero_matrix_is_finite():
    assert torch.isfinite(participation_ratio(torch.zeros(10, 4)))


def test_elevation_threshold_boundary():
    # d_head 11: elevated from PR 2.0 at fraction 0.1 (PR - 1 >= 1.0).
    assert is_elevated(2.0, 11, 0.1)
    assert not is_elevated(1.999, 11, 0.1)


def test_needs_a_matrix():
    with pytest.raises(ValueError, match="N, D"):
        participation_ratio(torch.ones(5))
