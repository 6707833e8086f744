"""Intervals of a probe run's numbers, from per-example quantities kept in memory during ``measure``.

- Selectivities (ratio of means), the BOS fraction and the induction-head count: a seeded
  percentile bootstrap over examples (:func:`headwatch.stats.bootstrap_weights`). Every resample
  draws N examples with replacement, recomputes each head's six class means and its baseline mean
  (induction and duplicate-token over the resample's valid examples, as the screen does), divides,
  and counts the heads over the thresholds whose mean attention to the target is not below the
  attention floor; the same resamples serve every head, so the counts'
  intervals are those of a coherent table.
- Task and ablation top-1: exact Clopper-Pearson intervals from the counts.

Nothing per-example is stored: the record keeps the bounds and the method names only.
"""
from __future__ import annotations

import numpy as np

from headwatch.stats import BOOTSTRAP, CLOPPER_PEARSON, bootstrap_weights, clopper_pearson, percentile_interval

from headwatch.probes.record import HEAD_CLASSES, RecordIntervals, TaskMetrics, head_key
from headwatch.probes.selectivity import BASELINE_FLOOR

#: Classes averaged over valid examples only (docs/SPEC.md §2).
_VALID_ONLY = ("induction", "duplicate-token")


def bootstrap_method(n_resamples: int, seed: int) -> str:
    return f"{BOOTSTRAP} ({n_resamples} resamples, seed {seed}), ratio of means"


def selectivity_replicates(values: np.ndarray, baseline: np.ndarray, valid: np.ndarray,
                           weights: np.ndarray) -> np.ndarray:
    """Selectivities of every resample: [R, C, L, H].

    values: [N, C, L, H] per-example class attention (HEAD_CLASSES order); baseline: [N, L, H] per-example
    mean attention to the baseline positions; valid: [N] bool; weights: [R, N] draw counts.
    """
    means, base = attention_replicates(values, baseline, valid, weights)
    return means / np.maximum(base, BASELINE_FLOOR)[:, None]


def attention_replicates(values: np.ndarray, baseline: np.ndarray, valid: np.ndarray,
                         weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean class attention [R, C, L, H] and mean baseline attention [R, L, H] of every resample
    (arguments as :func:`selectivity_replicates`)."""
    N, C, L, H = values.shape
    if baseline.shape != (N, L, H) or valid.shape != (N,) or weights.shape[1] != N:
        raise ValueError(f"shapes disagree: values {values.shape}, baseline {baseline.shape}, valid {valid.shape}, "
                         f"weights {weights.shape}")
    valid_only = [HEAD_CLASSES.index(c) for c in _VALID_ONLY]
    masked = values.astype(np.float64)  # a copy: the caller's array stays as it was
    masked[:, valid_only] *= valid[:, None, None, None]
    sums = (weights @ masked.reshape(N, C * L * H)).reshape(-1, C, L, H)  # [R, C, L, H]
    n_all = weights.sum(1)  # [R]
    n_valid = weights @ valid.astype(np.float64)  # [R]
    denominators = np.repeat(np.maximum(n_all, 1)[:, None], C, axis=1)  # [R, C]
    denominators[:, valid_only] = np.maximum(n_valid, 1)[:, None]
    means = sums / denominators[:, :, None, None]
    base = (weights @ baseline.reshape(N, L * H).astype(np.float64)).reshape(-1, L, H) / np.maximum(n_all, 1)[:, None, None]
    return means, base


def record_intervals(
    values: np.ndarray, baseline: np.ndarray, valid: np.ndarray, *,
    task: TaskMetrics | None, ablations: dict[str, TaskMetrics],
    n_resamples: int, seed: int, level: float, induction_threshold: float, bos_threshold: float,
    attention_floor: float = 0.0,
) -> RecordIntervals:
    """All of a record's intervals (see the module docstring); ``n_resamples`` = 0 gives the exact
    top-1 intervals only. ``attention_floor``: a head whose resample mean attention to the class
    target is below it is not counted in that resample's BOS fraction or induction-head count, as
    the judge leaves it out (docs/statistics.md#negligible-attention; 0: every head counts)."""
    methods = {"top1": CLOPPER_PEARSON}
    selectivity: dict[str, dict[str, tuple[float, float]]] = {}
    bos_fraction = induction_heads = None
    if n_resamples > 0:
        N, C, L, H = values.shape
        means, base = attention_replicates(values, baseline, valid, bootstrap_weights(N, n_resamples, seed))
        reps = means / np.maximum(base, BASELINE_FLOOR)[:, None]
        counted = means >= attention_floor  # [R, C, L, H]
        lo, hi = percentile_interval(reps, level)
        for l in range(L):
            for h in range(H):
                selectivity[head_key(l, h)] = {
                    c: (float(lo[i, l, h]), float(hi[i, l, h])) for i, c in enumerate(HEAD_CLASSES)}
        first = HEAD_CLASSES.index("first-token")
        ind = HEAD_CLASSES.index("induction")
        bos_reps = ((reps[:, first] >= bos_threshold) & counted[:, first]).reshape(len(reps), -1).mean(1)
        ind_reps = ((reps[:, ind] >= induction_threshold) & counted[:, ind]).reshape(len(reps), -1).sum(1).astype(np.float64)
        b_lo, b_hi = percentile_interval(bos_reps, level, discrete=True)
        i_lo, i_hi = percentile_interval(ind_reps, level, discrete=True)
        bos_fraction, induction_heads = (float(b_lo), float(b_hi)), (float(i_lo), float(i_hi))
        method = bootstrap_method(n_resamples, seed)
        methods.update(selectivity=method, bos_fraction=method, induction_heads=method)

    def top1(m: TaskMetrics) -> tuple[float, float] | None:
        if m.n is None or m.top1_count is None or m.n == 0:
            return None
        return clopper_pearson(m.top1_count, m.n, level)

    return RecordIntervals(
        level=level, methods=methods, selectivity=selectivity, bos_fraction=bos_fraction,
        induction_heads=induction_heads, task_top1=top1(task) if task is not None else None,
        ablation_top1={name: b for name, m in ablations.items() if (b := top1(m)) is not None},
    )
