"""Formation: a model organism shows what its panel declares (``[models.expect.formation]``) before
any claim is judged on it: enough induction heads at the final revision, none at the
first, t_induction inside the declared window, top-1 above the declared floor.

Runs first (headwatch/plugin.py orders it before the claim tests), once per selected model that
declares formation. An organism that did not form fails red with the measured numbers (heads and
selectivities with intervals, t_induction on the grid, final top-1, the training numeric path when
the records carry it); its claims are then "not judged" (claims/check.py), never passed.
Negative controls: planted trajectories that never form, form too late, form at step 0, copy
badly, or form only on heads whose induction attention is below the attention floor.
"""
from __future__ import annotations

import dataclasses

import pytest

from headwatch.claims.builtin.formation import NAME  # this module's claim, named where it is defined
from headwatch.claims.check import report
from headwatch.claims.judge import judge_formation, judge_model
from headwatch.claims.registry import all_claims, controls_for
from headwatch.claims.synthetic import A, B, C, D, FORMATION_EXPECT, healthy
from headwatch.claims.verdict import Status
from headwatch.spec import Formation, FormationWindow

#: The plugin runs this module's model tests only for models whose panel declares formation.
headwatch_models = ("declares [models.expect.formation]", lambda m: m.expect.formation is not None)


def test_organism_formed_as_declared(record_property, model_entry, model_records):
    verdict = judge_formation(model_records, model_entry.expect, model_entry.total_tokens)
    report(record_property, NAME, verdict.details)
    assert verdict.status is Status.HOLDS, f"formation fails for {model_entry.id}: {verdict.message}"


# ---- negative controls ------------------------------------------------------------------------

NEVER = ((),) * 7
#: What each of formation's negative controls (claims/builtin/formation.py) must show in its message.
SHOWN = {"never_forms": "0 heads", "forms_too_late": "t_induction step6", "formed_at_step0": "already at the first revision",
         "copies_badly": "top-1 0.01", "forms_only_on_noise": "(induction 80x at step1 and 5 more revision(s)) not counted"}


@pytest.mark.parametrize("control", controls_for(NAME), ids=lambda c: c.name)
def test_negative_control_formation_fails(control):
    verdict = judge_formation(control.records(), control.expect)
    assert verdict.status is Status.FAILS, f"{control.name}: formation judged to hold ({verdict.message})"
    assert verdict.message.startswith("did not form as declared") and SHOWN[control.name] in verdict.message, verdict.message


def test_negative_control_claims_on_an_organism_that_did_not_form_are_not_judged():
    """Every claim is "not judged" (never a pass) when formation fails, and keeps its measurement."""
    verdicts = judge_model(healthy(induction_sets=NEVER), FORMATION_EXPECT)
    assert verdicts[NAME].status is Status.FAILS
    for claim in (c.name for c in all_claims() if not c.gate):
        v = verdicts[claim]
        assert v.status is Status.NOT_JUDGED and v.holds is None, (claim, v.status)
        assert v.message.startswith("not judged: organism did not form: did not form as declared: 0 heads")
        assert "measured anyway" in v.message


def test_formation_window_in_training_fractions():
    """formed_within as a fraction of training: the healthy circuit forms at 1e9 of 1e12 tokens (0.1%)."""
    inside = dataclasses.replace(FORMATION_EXPECT, formation=Formation(formed_within=FormationWindow(fraction=(0.0005, 0.002))))
    outside = dataclasses.replace(FORMATION_EXPECT, formation=Formation(formed_within=FormationWindow(fraction=(0.01, 0.5))))
    assert judge_formation(healthy(), inside).status is Status.HOLDS
    v = judge_formation(healthy(), outside)
    assert v.status is Status.FAILS and "within 1%-50% of training" in v.message


def test_formation_message_carries_the_training_numeric_path():
    recs = healthy(induction_sets=NEVER)
    recs[-1].provenance["training"] = {"ATEN_CPU_CAPABILITY": "avx512", "threads": 1}
    v = judge_formation(recs, FORMATION_EXPECT)
    assert "avx512" in v.message and v.details.training == {"ATEN_CPU_CAPABILITY": "avx512", "threads": 1}


def test_healthy_trajectory_forms():
    verdict = judge_formation(healthy(), FORMATION_EXPECT)
    assert verdict.status is Status.HOLDS and verdict.details.n_heads_final == 3, verdict.message
    assert verdict.details.t_induction.revision == "step1" and not verdict.details.unmet
    assert D not in verdict.details.heads_final  # D is an early-only head


# ---- sink organisms: BOS heads after the circuit, persisting ---------------------------

SINK_EXPECT = dataclasses.replace(FORMATION_EXPECT, formation=dataclasses.replace(
    FORMATION_EXPECT.formation, min_bos_heads_final=2, bos_after_induction=True, bos_persists=True))
#: Healthy induction (t_induction step1); BOS heads (layers >= 2) from step3 to the end.
SINK_BOS = (0.0, 0.0, 0.0, 0.03125, 0.0625, 0.0625, 0.09375)
SINK_CONTROLS = {
    "sinks_before_induction": (dict(bos_fractions=(0.0, 0.03125, 0.0, 0.0, 0.0625, 0.0625, 0.09375)),
                               "first BOS head at step1, t_induction step1"),
    "no_sinks": (dict(bos_fractions=(0.0,) * 7), "0 BOS heads >= 30x at step6"),
    "too_few_sinks_final": (dict(bos_fractions=(0.0, 0.0, 0.0, 0.03125, 0.0625, 0.0625, 0.03125)), "1 BOS heads"),
    "sink_gap": (dict(bos_fractions=(0.0, 0.0, 0.0, 0.03125, 0.0, 0.0625, 0.09375)), "no BOS head at step4"),
}


def test_healthy_trajectory_forms_with_declared_sinks():
    verdict = judge_formation(healthy(bos_fractions=SINK_BOS), SINK_EXPECT)
    assert verdict.status is Status.HOLDS, verdict.message
    assert "3 BOS heads >= 30x at step6" in verdict.message and "first BOS head at step3" in verdict.message


@pytest.mark.parametrize("name", sorted(SINK_CONTROLS))
def test_negative_control_sink_formation_fails(name):
    overrides, shown = SINK_CONTROLS[name]
    verdict = judge_formation(healthy(**overrides), SINK_EXPECT)
    assert verdict.status is Status.FAILS, f"{name}: sink formation judged to hold ({verdict.message})"
    assert shown in verdict.message, verdict.message
