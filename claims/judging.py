"""What the built-in claims' judges share: rounding, the one-revision rule of the trajectory claims.

A claim's judge lives in its own module (:mod:`headwatch.claims.builtin`); these helpers are the
pieces several of them use, and a researcher's own judge may use them too.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from headwatch.formatting import fmt_interval
from headwatch.probes.record import MeasurementRecord

from headwatch.claims import trajectory as T
from headwatch.claims.verdict import Point, Status, Verdict

# ---- formatting helpers ----------------------------------------------------------------------


def point(p: T.RevisionPoint | None) -> Point | None:
    return None if p is None else Point(p.revision, p.tokens)


def rounded(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def sig(x: float | None, digits: int = 4) -> float | None:
    """``x`` to ``digits`` significant digits (p-values span many orders of magnitude)."""
    return None if x is None else float(f"{x:.{digits}g}")


def with_interval(value: float, interval: tuple | None) -> str:
    """'28.1x' or '37.7x [32.4, 43.8]'."""
    return f"{value:.3g}x" + (f" {fmt_interval(interval)}" if interval is not None else "")


# ---- claims about training: one revision is no trajectory ----------------------------------------


def trajectory_claim(judge):
    """F2-F5 are claims about a model's training: judged on records of one revision only (a pretrained
    model a package ships, with no checkpoint from its training), the verdict is "not established"
    (the evidence, earlier checkpoints, is missing), whatever the one revision shows; a claim that does
    not apply (F3 on a model not trained on DCLM, F2 without a declared shape) stays "not applicable",
    its message saying that there is no trajectory either."""
    @functools.wraps(judge)
    def judged(records: Sequence[MeasurementRecord], *args, **kwargs) -> Verdict:
        verdict = judge(records, *args, **kwargs)
        if len(records) >= 2:
            return verdict
        revisions = ", ".join(r.revision for r in records) or "none"
        if verdict.status is Status.NOT_APPLICABLE:
            return dataclasses.replace(verdict, key="one revision: no trajectory", margin=None, message=(
                f"{verdict.claim} does not apply here, and the records hold one revision ({revisions}): no "
                f"trajectory either. At that revision alone: {verdict.message}"))
        return dataclasses.replace(
            verdict, status=Status.NOT_ESTABLISHED, margin=None, failing_revisions=(), failing_heads=(),
            key="one revision: no trajectory",
            message=(f"not established: {verdict.claim} is a claim about training, and the records hold one "
                     f"revision ({revisions}), no trajectory; it needs checkpoints from training (two revisions "
                     f"at least). At that revision alone: {verdict.message}"))
    return judged



__all__ = ["point", "rounded", "sig", "with_interval", "trajectory_claim"]
