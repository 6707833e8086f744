"""The one judge of every registered claim (formation, F1-F5, causal, and a researcher's own), shared
by tests, CLI and report.

Each claim is a :class:`~headwatch.claims.claim.Claim` defined in its own module (the built-ins:
:mod:`headwatch.claims.builtin`) and registered there; :func:`judge_model` runs every registered one
(or those ``--claims`` selects) in the registry's order, a gate first (formation, where a panel
declares it), and returns each :class:`~headwatch.claims.verdict.Verdict`: a status in the shared
vocabulary (holds / holds vacuously / consistent, not established / fails / not applicable / not
judged / crashed), a one-line message stating the measured quantities, the key figure with its bar,
interval and method, the margin, and the claim's typed details. Every bar comes from ``spec``
(default :data:`headwatch.spec.SPEC`) unless the panel's expectations override it for the model; the
sensitivity grid (:mod:`headwatch.claims.sensitivity`) re-judges with other ``spec`` values. A claim
whose judge raises is that claim's ``crashed`` verdict; the others are judged all the same.

The built-ins' judges are importable from here too (``judge_f1``, ..., ``judge_formation``).
"""
from __future__ import annotations

import dataclasses
import logging
import traceback
from collections.abc import Sequence

from headwatch.probes.record import MeasurementRecord
from headwatch.spec import SPEC, Expectations, Thresholds

from headwatch.claims import trajectory as T
from headwatch.claims.builtin.causal_ablation import judge_causal
from headwatch.claims.builtin.f1_zero_bos_floor import judge_f1, judge_f1_revision
from headwatch.claims.builtin.f2_bos_shape import judge_f2
from headwatch.claims.builtin.f3_induction_before_bos import judge_f3
from headwatch.claims.builtin.f4_early_convergence import INTERMEDIATE_READING, UNIFORM_READING, judge_f4
from headwatch.claims.builtin.f5_pr_precedes_threshold import judge_f5
from headwatch.claims.builtin.formation import judge_formation
from headwatch.claims.claim import Claim
from headwatch.claims.registry import all_claims
from headwatch.claims.verdict import CrashDetails, DeclaredOutcome, Status, Verdict, declared_outcome

__all__ = ["judge_model", "judge_claim", "judge_f1", "judge_f1_revision", "judge_f2", "judge_f3", "judge_f4",
           "judge_f5", "judge_causal", "judge_formation", "not_judged", "crashed", "status_word", "surprises",
           "UNIFORM_READING", "INTERMEDIATE_READING"]

log = logging.getLogger("headwatch.judge")

_NONE = Expectations()


def not_judged(verdict: Verdict, formation: Verdict) -> Verdict:
    """``verdict`` withheld because the subject did not form: status ``not_judged``, the formation
    numbers first, the claim's own measurement kept after them (nothing measured is lost)."""
    return dataclasses.replace(
        verdict, status=Status.NOT_JUDGED,
        message=f"not judged: organism did not form: {formation.message} | measured anyway: {verdict.message}",
        key=f"not judged ({verdict.key})" if verdict.key else "not judged")


def crashed(claim: Claim, error: BaseException) -> Verdict:
    """The verdict of a claim whose judge raised: status ``crashed``, the exception in the message (its
    traceback logged), nothing else claimed."""
    text = f"{type(error).__name__}: {error}"
    return Verdict(claim.name, Status.CRASHED, f"crashed: the judge of {claim.name} raised {text} (a bug in the "
                   "claim, not a finding about the model; the other claims are judged all the same)",
                   CrashDetails(type(error).__name__, str(error)), key="crashed")


def judge_claim(claim: Claim, records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
                total_tokens: float | None = None, spec: Thresholds = SPEC) -> Verdict:
    """``claim``'s verdict on ``records`` (sorted by tokens); a judge that raises gives :func:`crashed`."""
    try:
        verdict = claim.judge(records, expect, spec, total_tokens=total_tokens)
    except Exception as e:  # noqa: BLE001 - one claim's bug must not take the others down
        log.error("the judge of claim %s raised:\n%s", claim.name, traceback.format_exc())
        return crashed(claim, e)
    if not isinstance(verdict, Verdict) or verdict.claim != claim.name:
        return crashed(claim, TypeError(f"the judge returned {type(verdict).__name__}"
                                        + (f" of claim {verdict.claim!r}" if isinstance(verdict, Verdict) else "")
                                        + f", not a Verdict of {claim.name!r}"))
    return verdict


# ---- everything ------------------------------------------------------------------------------


def judge_model(records: Sequence[MeasurementRecord], expect: Expectations = _NONE,
                total_tokens: float | None = None, spec: Thresholds = SPEC,
                claims: Sequence[Claim] | None = None) -> dict[str, Verdict]:
    """All verdicts for one model, in the registry's order (``claims``: those only, e.g.
    :func:`~headwatch.claims.registry.select_claims`' ``--claims``), each carrying the panel's declared
    deviation for its claim (or None). Where a gate applies (formation, declared by the panel), its
    verdict comes first, and if the model did not form every claim is ``not_judged``."""
    recs = T.by_tokens(records)
    chosen = all_claims() if claims is None else list(claims)
    out = {c.name: judge_claim(c, recs, expect, total_tokens, spec).declare(expect.declared(c.name))
           for c in chosen if not c.gate and c.applies_to(expect)}
    gates = {c.name: judge_claim(c, recs, expect, total_tokens, spec)
             for c in chosen if c.gate and c.applies_to(expect)}
    if not gates:
        return out
    failed = next((v for v in gates.values() if v.status is Status.FAILS), None)
    if failed is not None:
        out = {claim: not_judged(v, failed) for claim, v in out.items()}
    return {**gates, **out}


def surprises(verdicts: dict[str, Verdict]) -> int:
    """Verdicts that are news against the panel: a failure it did not declare, a declared deviation
    that did not occur, or one that occurred differently from its declaration (key range, revisions
    or heads). Any makes ``headwatch judge`` and ``report`` exit 1."""
    def news(v: Verdict) -> bool:
        outcome = declared_outcome(v)
        if outcome is None:  # nothing declared (a failing verdict with a declaration has an outcome)
            return v.status is Status.FAILS
        return outcome is not DeclaredOutcome.MATCHED

    return sum(1 for v in verdicts.values() if news(v))


def status_word(verdict: Verdict) -> str:
    """A verdict's status in words for a terminal, with how a declared deviation turned out."""
    outcome = declared_outcome(verdict)
    return verdict.status.words + (f" ({outcome.suffix})" if outcome is not None else "")