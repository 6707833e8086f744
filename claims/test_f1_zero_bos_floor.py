"""F1: at every revision, no BOS head (first-token selectivity >= 30) in layers 0 and 1.

Per (model, revision), and per model over all revisions. Negative controls: planted BOS heads in layer 0 and in layer 1,
and one in layer 0 with real attention mass (the same head below the attention floor is left out).
"""
from __future__ import annotations

import pytest

from headwatch.claims.builtin.f1_zero_bos_floor import NAME  # this module's claim, named where it is defined
from headwatch.claims.check import check_verdict
from headwatch.claims.judge import judge_f1, judge_f1_revision
from headwatch.claims.registry import controls_for
from headwatch.claims.synthetic import STRONG, healthy, with_attention
from headwatch.claims.verdict import Status


def test_f1_no_bos_head_in_layers_0_1(request, model_entry, revision, revision_record):
    verdict = judge_f1_revision(revision_record)
    check_verdict(request, model_entry, NAME, verdict, revision=revision)


def test_f1_no_bos_head_in_layers_0_1_at_any_revision(request, model_entry, model_records):
    """The model-level verdict (what `headwatch judge` reports); strict for declared deviations."""
    verdict = judge_f1(model_records)
    check_verdict(request, model_entry, NAME, verdict)


# ---- negative controls: the judge must report failure ------------------------------------------


@pytest.mark.parametrize("control", controls_for(NAME), ids=lambda c: c.name)
def test_negative_control_f1_fails(control):
    records = control.records()
    verdict = judge_f1(records)
    assert verdict.status is Status.FAILS, f"{control.what}: F1 judged to hold ({verdict.message})"
    planted = {(v.revision, h) for v in verdict.details.violations for h in v.heads}
    assert len(planted) == 1, f"expected exactly the planted head, got {planted}"
    bad = [r for r in records if judge_f1_revision(r).status is Status.FAILS]
    assert [r.revision for r in bad] == [v.revision for v in verdict.details.violations]
    assert "L0_H1" in verdict.message or "L1_H3" in verdict.message, verdict.message


def test_negative_control_f1_sink_head_below_the_attention_floor_is_not_counted():
    """The planted layer-0 BOS head of ``bos_head_in_layer_0_with_mass`` with 1e-5 of attention on position 0
    in place of 0.5: a ratio of two negligible masses, left out (docs/statistics.md#negligible-attention)."""
    records = with_attention(healthy(extra_bos={2: ("L0_H1",)}), baseline={2: {"L0_H1": 1e-5 / STRONG}})
    verdict = judge_f1(records)
    assert verdict.status is Status.HOLDS, verdict.message
    assert [(f.revision, f.head) for f in verdict.details.negligible_heads] == [("step2", "L0_H1")]
    assert "L0_H1 (first-token 80x at step2) not counted" in verdict.message


def test_negative_control_f1_bos_head_in_layer_2_is_allowed():
    """The floor is about layers 0 and 1 only: a BOS head in layer 2 is not a violation."""
    assert judge_f1(healthy(extra_bos={2: ("L2_H0",)})).status is Status.HOLDS
