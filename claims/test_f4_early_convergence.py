"""F4: the first revision whose recall of the final induction circuit is >= 2/3 lies within 2.5% of
total training tokens. Reports both readings (every revision at 50x, which decides; intermediate
revisions at the 30x label threshold) and which of them reproduces the paper table's number (panel
``paper_f4_tokens``).

Per model. Negative control: a circuit found only at the final revision.
"""
from __future__ import annotations

import pytest

from headwatch.claims.builtin.f4_early_convergence import NAME  # this module's claim, named where it is defined
from headwatch.claims.check import check_verdict, report
from headwatch.claims.judge import judge_f4
from headwatch.claims.registry import controls_for
from headwatch.claims.verdict import Status


def test_f4_screen_converges_early(request, record_property, model_entry, model_records):
    verdict = judge_f4(model_records, model_entry.expect, model_entry.total_tokens)
    report(record_property, "F4_computed", verdict.details.computed)
    report(record_property, "F4_intermediate_30x", verdict.details.intermediate)
    report(record_property, "F4_paper_table", verdict.details.paper_table)
    check_verdict(request, model_entry, NAME, verdict)


# ---- negative controls ------------------------------------------------------------------------


@pytest.mark.parametrize("control", controls_for(NAME), ids=lambda c: c.name)
def test_negative_control_f4_fails(control):
    verdict = judge_f4(control.records(), control.expect)
    assert verdict.status is Status.FAILS, f"{control.what}: F4 judged to hold ({verdict.message})"
    assert verdict.details.computed.fraction_of_total == pytest.approx(1.0)
