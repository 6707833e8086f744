"""A variant of a paper claim with another threshold: F1 with a BOS head at first-token selectivity >= 20
(SPEC's is 30), everything else F1's own judge (claims/builtin/f1_zero_bos_floor.py).

Use it: ``headwatch judge --claims-module f1_bos20.py``, or import it from a conftest.py.
"""
from __future__ import annotations

import dataclasses

from headwatch.claims import Claim, NegativeControl, Threshold, register_claim
from headwatch.claims.judge import judge_f1, judge_f1_revision
from headwatch.claims.synthetic import HEALTHY_EXPECT, healthy
from headwatch.claims.verdict import F1Details

NAME = "F1_bos20"
#: This variant's BOS bar (SPEC's: 30).
BOS = 20.0


def judge(records, expect, spec, *, total_tokens=None):
    return dataclasses.replace(judge_f1(records, dataclasses.replace(spec, bos=BOS)), claim=NAME)


def judge_revision(record, spec):
    return dataclasses.replace(judge_f1_revision(record, dataclasses.replace(spec, bos=BOS)), claim=NAME)


def _between_the_bars():
    """A layer-0 head at first-token selectivity 25 at step2: F1 (bar 30) holds, this variant must fail."""
    recs = healthy()
    recs[2].all_head_selectivity["L0_H1"]["first-token"] = 25.0
    return recs


CLAIM = register_claim(Claim(
    name=NAME, title="F1 at a BOS bar of 20",
    question="Is there no head with first-token selectivity >= 20 in layers 0 and 1, at every revision?",
    judge=judge, judge_revision=judge_revision,
    thresholds=(Threshold("BOS head: first-token selectivity >=", "this variant (SPEC §2 says 30)", value=BOS),
                Threshold("layers that hold no BOS head", "docs/SPEC.md §6", field="f1_layers")),
    key_figure="largest layer-0/1 first-token selectivity over the revisions (bar: 20)",
    details=F1Details,
    negative_controls=(
        NegativeControl("layer_0_head_between_the_bars", "a layer-0 head at first-token 25 at step2 (F1 holds)",
                        _between_the_bars, HEALTHY_EXPECT),
        NegativeControl("bos_head_in_layer_0", "a BOS head (80x) in layer 0 at step2",
                        lambda: healthy(extra_bos={2: ("L0_H1",)}), HEALTHY_EXPECT),
    ),
))
