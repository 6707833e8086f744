"""Participation ratio of a head's outputs (docs/SPEC.md §3).

PR = exp(entropy of the normalised squared singular values): 1 when the outputs lie on one line,
k when they spread evenly over k directions. The matrix is not mean-centred (author's choice).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from headwatch.spec import SPEC

if TYPE_CHECKING:  # the judge reads is_elevated from here without torch
    import torch

#: Floors from the author's definition: keep log and division finite for all-zero outputs.
_SUM_FLOOR = 1e-12
_LOG_FLOOR = 1e-12


def participation_ratio(outputs: torch.Tensor) -> torch.Tensor:
    """PR of each matrix in a batch.

    outputs: [..., N, D] samples x head dimensions (any leading batch dims, e.g. heads).
    Returns [...] float64 PR values with 1 <= PR <= min(N, D) (up to rounding).
    """
    import torch  # deferred: torch (the judge imports this module without it)

    if outputs.dim() < 2:
        raise ValueError(f"participation_ratio needs [..., N, D], got shape {tuple(outputs.shape)}")
    s = torch.linalg.svdvals(outputs.to(torch.float64))
    s2 = s * s
    p = s2 / s2.sum(-1, keepdim=True).clamp(min=_SUM_FLOOR)
    entropy = -(p * torch.log(p + _LOG_FLOOR)).sum(-1)
    return torch.exp(entropy)


def is_elevated(pr: float, d_head: int, fraction: float = SPEC.pr_elevation_fraction) -> bool:
    """"Elevated PR" (docs/SPEC.md §3): PR - 1 >= fraction x (d_head - 1), i.e. the head's output uses
    at least ``fraction`` of its dimensions beyond one. The one definition (F5, figures, reports)."""
    return pr - 1.0 >= fraction * (d_head - 1)
