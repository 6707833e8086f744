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
from headwatch.claims.verdict import NegligibleHead, Point, Status, Verdict

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


def not_counted_text(flagged: Sequence[NegligibleHead], floor_share: float, *, at_revision: bool = True,
                     limit: int = 3) -> str:
    """The heads the attention floor left out, in words: 'L18_H8 (induction 82x at main) not counted:
    1.6e-05 attention to the target, below the floor 3.9e-03 (1/T)'; one phrase per head and class
    (its first revision's numbers, and how many more revisions), the first ``limit``, then how many
    more ('' where none)."""
    groups: dict[tuple[str, str], list[NegligibleHead]] = {}
    for f in flagged:
        groups.setdefault((f.head, f.cls), []).append(f)
    parts = []
    for (head, cls), fs in list(groups.items())[:limit]:
        f, more = fs[0], len(fs) - 1
        where = (f" at {f.revision}" + (f" and {more} more revision(s)" if more else "")) if at_revision else ""
        parts.append(f"{head} ({cls} {f.selectivity:.3g}x{where}) not counted: {f.attention:.1e} attention to the "
                     f"target, below the floor {f.floor:.1e} ({floor_share:g}/T)")
    rest = len(groups) - limit
    return "; ".join(parts) + (f"; and {rest} more head(s) below the floor (details.negligible_heads)" if rest > 0 else "")


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



__all__ = ["not_counted_text", "point", "rounded", "sig", "with_interval", "trajectory_claim"]
