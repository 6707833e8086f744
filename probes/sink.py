"""Gu et al.'s Sink_1^eps (arXiv 2410.10781), beside SPEC's BOS fraction: reported, never asserted.

The capture (probes/capture.py) computes, on a small sub-batch, each head's attention to position 0
from every query position 1..T-1 (whole attention rows); :func:`sink_score` averages it and counts
the heads above eps.
"""
from __future__ import annotations

import torch

from headwatch.spec import SPEC

from headwatch.probes.record import SinkScore, head_key


def sink_score(first_position: torch.Tensor, eps: float = SPEC.sink_eps) -> SinkScore:
    """Sink_1^eps from [n, L, H] per-example attention to position 0 (averaged over queries 1..T-1)."""
    mean = first_position.double().mean(0)  # [L, H]
    L, H = mean.shape
    per_head = {head_key(l, h): float(mean[l, h]) for l in range(L) for h in range(H)}
    share = sum(v > eps for v in per_head.values()) / len(per_head)
    return SinkScore(eps=eps, n_examples=int(first_position.shape[0]), share=share, first_position_attention=per_head)
