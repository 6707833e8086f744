"""Verdicts: one typed value with one JSON form; SPEC's one table; the name helpers."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from headwatch.claims import synthetic as S
from headwatch.claims.check import PYTEST_OUTCOME
from headwatch.claims.judge import judge_model
from headwatch.claims.verdict import DETAILS, Status, Verdict
from headwatch.names import did_you_mean, model_matches, split_list
from headwatch.probes.record import ProbeSettings
from headwatch.spec import CLAIMS, SPEC, Expectations


@pytest.mark.parametrize("case", ["healthy", *S.NEGATIVE_CONTROLS])
def test_every_verdict_survives_its_json_form(case):
    if case == "healthy":
        records, expect = S.healthy(), S.HEALTHY_EXPECT
    else:
        records, expect = S.NEGATIVE_CONTROLS[case].records(), S.NEGATIVE_CONTROLS[case].expect
    verdicts = judge_model(records, expect)
    assert list(verdicts) == list(CLAIMS)
    for claim, v in verdicts.items():
        text = json.dumps(v.to_dict(), allow_nan=False)
        back = Verdict.from_dict(json.loads(text))
        assert back == v and isinstance(back.details, DETAILS[claim]) and isinstance(back.status, Status)


def test_status_mapping_and_outcomes_are_total():
    assert [Status.of(x) for x in (True, False, None)] == [Status.HOLDS, Status.FAILS, Status.NOT_APPLICABLE]
    assert set(PYTEST_OUTCOME) == set(Status)  # one place decides every status's pytest outcome
    assert {s.value for s in Status} == {"holds", "holds_vacuously", "consistent_not_established", "fails",
                                         "not_applicable", "not_judged"}
    # never a plain pass unless the claim holds; "not judged" and "consistent, not established" skip
    assert {s for s, o in PYTEST_OUTCOME.items() if o == "pass"} == {Status.HOLDS, Status.HOLDS_VACUOUSLY}
    assert PYTEST_OUTCOME[Status.NOT_JUDGED] == PYTEST_OUTCOME[Status.CONSISTENT_NOT_ESTABLISHED] == "skip"
    assert [s.holds for s in (Status.CONSISTENT_NOT_ESTABLISHED, Status.NOT_JUDGED)] == [None, None]


def test_skip_reasons_start_with_the_status_in_words():
    from headwatch.claims.check import skip_reason
    from headwatch.claims.judge import judge_formation, judge_model, not_judged

    never = S.healthy(induction_sets=((),) * 7)
    formation = judge_formation(never, S.FORMATION_EXPECT)
    withheld = not_judged(judge_model(never)["F4"], formation)
    assert skip_reason("F4", "m", withheld).startswith("not judged: organism did not form: did not form as declared: 0 heads")
    consistent = judge_model(S.healthy(ablations=S.Ablations(baseline=0.0405, circuit=0.0025, random=0.0055)))["causal"]
    assert skip_reason("causal", "m", consistent).startswith("consistent, not established: causal for m:")


def test_formation_and_declared_deviations_survive_the_json_form():
    from headwatch.spec import Deviation

    expect = replace(S.FORMATION_EXPECT, xfail={"F4": Deviation("r", key=(0.1, 0.2), heads=("L3_H0",))})
    for records in (S.healthy(), S.healthy(induction_sets=((),) * 7)):
        for claim, v in judge_model(records, expect).items():
            back = Verdict.from_dict(json.loads(json.dumps(v.to_dict(), allow_nan=False)))
            assert back == v, claim


def test_margins_sit_on_the_holding_side_when_a_claim_holds():
    verdicts = judge_model(S.healthy(), S.HEALTHY_EXPECT)
    assert all(v.margin is not None and v.margin >= 0 for v in verdicts.values()), verdicts
    failing = judge_model(S.NEGATIVE_CONTROLS["ablation_barely_hurts"].records())
    assert failing["causal"].margin < 0


def test_probe_settings_thresholds_come_from_the_spec_table():
    s = ProbeSettings()
    assert (s.induction_threshold, s.label_threshold, s.bos_threshold, s.previous_token_threshold) == (
        SPEC.induction, SPEC.label, SPEC.bos, SPEC.previous_token)
    assert Expectations().min_ratio == SPEC.f3_min_ratio and Expectations(f4_max_fraction=0.5).max_fraction == 0.5


def test_name_helpers():
    assert split_list(["a,b", " c ", ""]) == ["a", "b", "c"] and split_list(None) == []
    assert model_matches("pythia-1b", "EleutherAI/pythia-1b") and model_matches("ELEUTHERAI/PYTHIA-1B", "EleutherAI/pythia-1b")
    assert model_matches("p.m", "org/x", "m", "p.m") and not model_matches("pythia", "EleutherAI/pythia-1b")
    assert did_you_mean("papr", ["paper", "published"]) == " (did you mean 'paper'?)"
    assert did_you_mean("zzz", ["paper"]) == ""
