"""Every registered claim that has no test module of its own: a researcher's, from a ``conftest.py``,
``--claims-module`` or an installed package's entry point (docs/claims.md).

The plugin parametrises these tests (headwatch/plugin.py): one per (claim, model), one per (claim,
model, revision) where the claim judges a revision, and one per (claim, negative control). A verdict
becomes a pytest outcome by the same table as the built-ins' (claims/check.py): holds passes, fails
fails, the rest skip with their reason, a declared deviation xfails strictly; a judge that raises is
an ERROR (a crash), never a failed claim. Each negative control must be judged ``fails``.
"""
from __future__ import annotations

from headwatch.claims import trajectory as T
from headwatch.claims.check import check_verdict, report
from headwatch.claims.verdict import Status
from headwatch.spec import SPEC


def test_claim(request, record_property, registered_claim, model_entry, model_records):
    verdict = registered_claim.judge(T.by_tokens(model_records), model_entry.expect, SPEC,
                                     total_tokens=model_entry.total_tokens)
    report(record_property, registered_claim.name, verdict.to_dict())
    check_verdict(request, model_entry, registered_claim.name, verdict)


def test_claim_at_revision(request, registered_claim, model_entry, revision, revision_record):
    verdict = registered_claim.judge_revision(revision_record, SPEC)
    check_verdict(request, model_entry, registered_claim.name, verdict, revision=revision)


def test_negative_control(registered_claim, negative_control):
    verdict = registered_claim.judge(T.by_tokens(negative_control.records()), negative_control.expect, SPEC,
                                     total_tokens=negative_control.total_tokens)
    assert verdict.status is Status.FAILS, (f"{negative_control.what}: {registered_claim.name} judged "
                                            f"{verdict.status.words} ({verdict.message})")
