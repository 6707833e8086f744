"""Verdicts: one typed value with one JSON form; SPEC's one table; the name helpers."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from headwatch.claims import synthetic as S
from headwatch.claims.registry import negative_controls
from headwatch.claims.check import PYTEST_OUTCOME
from headwatch.claims.judge import judge_model
from headwatch.claims.verdict import (
    DETAILS, STATUS_WORDS, WORDS, DeclaredOutcome, KeyFigure, Status, Verdict, check_deviation, declared_outcome,
)
from headwatch.formatting import GRID, OPEN, fmt_interval, fmt_number, fmt_pct, fmt_share
from headwatch.names import did_you_mean, model_matches, split_list
from headwatch.probes.record import ProbeSettings
from headwatch.claims.registry import all_claims
from headwatch.spec import SPEC, Deviation, Expectations

#: The built-in claims (the gate, formation, apart), in report order.
CLAIMS = [c.name for c in all_claims() if not c.gate]


@pytest.mark.parametrize("case", ["healthy", *negative_controls()])
def test_every_verdict_survives_its_json_form(case):
    if case == "healthy":
        records, expect = S.healthy(), S.HEALTHY_EXPECT
    else:
        records, expect = negative_controls()[case].records(), negative_controls()[case].expect
    verdicts = judge_model(records, expect)
    assert [c for c in verdicts if c in CLAIMS] == list(CLAIMS)  # formation first where declared
    for claim, v in verdicts.items():
        text = json.dumps(v.to_dict(), allow_nan=False)
        back = Verdict.from_dict(json.loads(text))
        assert back == v and isinstance(back.details, DETAILS[claim]) and isinstance(back.status, Status)


def test_status_mapping_and_outcomes_are_total():
    assert [Status.of(x) for x in (True, False, None)] == [Status.HOLDS, Status.FAILS, Status.NOT_APPLICABLE]
    assert set(PYTEST_OUTCOME) == set(Status)  # one place decides every status's pytest outcome
    assert {s.value for s in Status} == {"holds", "holds_vacuously", "consistent_not_established", "not_established",
                                         "fails", "not_applicable", "not_judged", "crashed"}
    # never a plain pass unless the claim holds; only "fails" fails; a crash errors; everything else skips
    assert {s for s, o in PYTEST_OUTCOME.items() if o == "pass"} == {Status.HOLDS, Status.HOLDS_VACUOUSLY}
    assert {s for s, o in PYTEST_OUTCOME.items() if o == "fail"} == {Status.FAILS}
    assert {s for s, o in PYTEST_OUTCOME.items() if o == "error"} == {Status.CRASHED}
    assert [s.holds for s in (Status.CONSISTENT_NOT_ESTABLISHED, Status.NOT_ESTABLISHED, Status.NOT_JUDGED)] == [None] * 3


def test_every_word_a_status_is_shown_in_comes_from_one_table():
    from headwatch.claims.judge import status_word
    from headwatch.claims.report_data import CELL_LABEL, cell_status
    from headwatch.claims.report_render import _GRID_WORD, STATUS_LABEL, STATUS_STYLE

    assert set(WORDS) == set(Status) and STATUS_WORDS == {s: w.words for s, w in WORDS.items()}
    assert len({w.words for w in WORDS.values()}) == len(Status)  # words tell statuses apart
    assert STATUS_LABEL is CELL_LABEL and set(STATUS_STYLE) == set(CELL_LABEL)
    assert _GRID_WORD == {s.value: WORDS[s].short for s in Status}
    v = judge_model(S.healthy(), S.HEALTHY_EXPECT)["F2"]
    gone = v.declare(Deviation("expected a step", key=(0.5, 1.0)))
    assert declared_outcome(gone) is DeclaredOutcome.GONE and cell_status(gone) == "deviation gone"
    assert status_word(gone) == "holds (declared deviation did NOT occur)" and cell_status(v) == "holds"
    failing = judge_model(negative_controls()["ramp_for_declared_step"].records(),
                          negative_controls()["ramp_for_declared_step"].expect)["F2"]
    assert status_word(failing.declare(Deviation("r", key=(0.0, 0.5)))) == "fails (declared known deviation)"
    assert status_word(failing.declare(Deviation("r", key=(0.6, 1.0)))) == "fails (declared deviation does NOT match)"
    assert declared_outcome(failing) is None and status_word(failing) == "fails"


def test_interval_notation():
    assert fmt_interval((5.087, 26.4)) == "[5.09, 26.4]" and fmt_interval((5.087, 26.4), ends=OPEN) == "(5.09, 26.4)"
    assert fmt_interval((10.0, 23.0), ends=GRID) == "(10, 23]" and fmt_interval((1000.0, None), ends=OPEN) == "(1000, inf)"
    assert fmt_interval((None, 3.0)) == "(-inf, 3]" and fmt_interval(None) == ""
    assert KeyFigure("q", 1.0, interval=(1.0, None), ends=GRID).interval_text() == "(1, inf)"
    assert [fmt_number(x) for x in (999.4, 1000.0, 999999.0, 1e6, 1.02e6, -2500.0)] == [
        "999", "1000", "999999", "1e+06", "1.02e+06", "-2500"]
    assert fmt_number(1500.5, "g") == "1500.5" and fmt_interval((2.0, 3.0), "g") == "[2, 3]"


def test_skip_reasons_start_with_the_status_in_words():
    from headwatch.claims.check import skip_reason
    from headwatch.claims.judge import judge_formation, judge_model, not_judged

    never = S.healthy(induction_sets=((),) * 7)
    formation = judge_formation(never, S.FORMATION_EXPECT)
    withheld = not_judged(judge_model(never)["F4"], formation)
    assert skip_reason("F4", "m", withheld).startswith("not judged: organism did not form: did not form as declared: 0 heads")
    consistent = judge_model(S.healthy(ablations=S.Ablations(baseline=0.0405, circuit=0.0025, random=0.0055)))["causal"]
    assert skip_reason("causal", "m", consistent).startswith("consistent, not established: causal for m:")
    missing = judge_model(S.healthy(ablations=S.Ablations(random=None)))["causal"]
    assert skip_reason("causal", "m", missing).startswith("not established: causal for m:")
    na = judge_model(S.healthy(), Expectations(dclm=False))["F3"]
    assert skip_reason("F3", "m", na).startswith("F3 not applicable to m: ")


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
    failing = judge_model(negative_controls()["ablation_barely_hurts"].records())
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


def test_figure_captions_take_their_numbers_from_spec(monkeypatch):
    """No caption hard-codes a threshold: with SPEC's numbers changed, every caption changes with them."""
    import dataclasses

    from headwatch.claims import figures

    other = dataclasses.replace(SPEC, induction=77.0, bos=33.0, label=31.0, induction_min_heads=4, bos_level=0.6,
                                recall_level=3 / 4, f4_max_fraction=0.04, f1_layers=(0, 1, 2))
    monkeypatch.setattr(figures, "SPEC", other)
    captions = " ".join(f.caption for f in figures.model_figures(S.healthy(), {}, "planted"))
    for text in ("77x", "33x", "31x", ">= 4 heads", "60%", "first 4% of training", "layers 0/1/2"):
        assert text in captions, text
    for stale in ("50x", "30x", "2.5%", ">= 3 heads", "layers 0/1,"):
        assert stale not in captions, stale


def test_one_percent_formatter_for_every_figure():
    """headwatch.formatting.fmt_pct is the one way a share is written as a percentage (issue 37: three
    formatters became one); its format spec is the only thing a caller chooses."""
    assert [fmt_pct(x) for x in (0.025, 0.5, 1.0, 0.0)] == ["2.5%", "50%", "100%", "0%"]
    assert fmt_pct(0.0405, ".2f") == "4.05%" and fmt_pct(0.05, ".1f") == "5.0%" and fmt_pct(0.00755, ".3g") == "0.755%"
    assert fmt_pct(None) == "?" and fmt_pct(None, ".2f") == "?"
    import headwatch.claims.judge as judge

    assert not [n for n in vars(judge) if n.startswith("_pct")], "a private percent formatter is back in the judge"


def test_fmt_share_writes_simple_fractions_only():
    assert [fmt_share(x) for x in (2 / 3, 0.5, 3 / 4, 0.1, 1 / 11, 0.0, 1.0, 0.5 + 1.02e-9)] == [
        "2/3", "1/2", "3/4", "1/10", "0.0909", "0", "1", "0.5"]


def test_declared_deviation_matching():
    failing = judge_model(negative_controls()["ramp_for_declared_step"].records(),
                          negative_controls()["ramp_for_declared_step"].expect)["F2"]  # key 0.3333, fails
    key = failing.figure.value
    assert check_deviation(failing, Deviation("r", key=(key, 1.0))).matches  # the key at either end matches
    assert check_deviation(failing, Deviation("r", key=(0.0, key))).matches
    assert not check_deviation(failing, Deviation("r", key=(key + 1e-6, 1.0))).matches
    assert check_deviation(failing, Deviation("r", key=(0.9, 1.0)), one_revision_of_many=True).matches  # key not checked
    held = judge_model(S.healthy(), S.HEALTHY_EXPECT)["F2"]
    found = check_deviation(held, Deviation("r", key=(0.0, 1.0), revisions=()))
    assert not found.matches and found.measured == "the claim holds; key 0.3333; revisions none"
    no_figure = replace(failing, figure=None)
    assert not check_deviation(no_figure, Deviation("r", key=(0.0, 1.0))).matches
    assert check_deviation(no_figure, Deviation("r", key=(0.0, 1.0))).measured == "key none"
    f1 = judge_model(negative_controls()["bos_head_in_layer_0"].records())["F1"]  # fails at step2, head L0_H1
    assert check_deviation(f1, Deviation("r", revisions=("step2",), heads=("L0_H1",))).matches
    assert not check_deviation(f1, Deviation("r", revisions=("step2", "step3"))).matches  # exactly these fail
    assert check_deviation(f1, Deviation("r", revisions=("step2", "step3")), one_revision_of_many=True).matches
    assert not check_deviation(held, Deviation("r", revisions=())).matches


def test_json_form_edges():
    from headwatch.claims.verdict import CausalDetails, F1Details, Point
    from headwatch.schema import from_data, to_data
    from headwatch.validation import InputError

    assert to_data(Point) is Point and to_data(Point("s", 1.0)) == {"revision": "s", "tokens": 1.0}
    assert from_data(Point | str, "abc", "v") == "abc"
    older = from_data(F1Details, {"layers": [0, 1], "threshold": 30.0}, "v")  # verdict JSON without the later fields
    assert (older.revisions_checked, older.bos_heads_anywhere, older.vacuous_revisions) == (0, 0, ())
    assert from_data(CausalDetails, {}, "v").n_random_heads == 0 and CausalDetails().counts_reconstructed is False
    # the one converter checks what it reads: a verdict file edited by hand is named, not half-built
    good = judge_model(S.healthy(), S.HEALTHY_EXPECT)["F3"].to_dict()
    for path, bad, says in ((("status",), "hold", "is not one of"), (("claim",), "F9", "F9"),
                            (("details", "ratio"), "big", "details.ratio: expected"), (("margin",), [1], "margin")):
        edited = json.loads(json.dumps(good))
        target = edited
        for k in path[:-1]:
            target = target[k]
        target[path[-1]] = bad
        with pytest.raises(InputError, match=says):
            Verdict.from_dict(edited)


def test_a_judge_must_return_its_own_verdict_else_its_claim_crashed():
    """judge_claim keeps the contract: a Verdict of this claim; anything else is the claim's crash."""
    from headwatch.claims.claim import Claim, NegativeControl
    from headwatch.claims.judge import judge_claim

    def claim_returning(value):
        return Claim("returns", "t", "?", judge=lambda records, expect, spec, **kw: value,
                     negative_controls=(NegativeControl("x", "x", S.healthy, S.HEALTHY_EXPECT),))

    own = Verdict("returns", Status.HOLDS, "holds", None, key="ok")
    assert judge_claim(claim_returning(own), S.healthy()) is own
    for wrong, says in ((None, "returned NoneType, not a Verdict of 'returns'"),
                        (replace(own, claim="F1"), "returned Verdict of claim 'F1'")):
        verdict = judge_claim(claim_returning(wrong), S.healthy())
        assert verdict.status is Status.CRASHED and verdict.claim == "returns" and says in verdict.message


def test_judge_model_judges_every_registered_claim_that_applies():
    """Without ``claims``: the registry's, in its order; a claim whose ``applies`` says no is left out."""
    from headwatch.claims.claim import Claim, NegativeControl
    from headwatch.claims.registry import register_claim, unregister_claim

    judged = judge_model(S.healthy(), S.HEALTHY_EXPECT)
    assert list(judged) == [c.name for c in all_claims() if not c.gate]
    f1 = [c for c in all_claims() if c.name == "F1"]
    assert list(judge_model(S.healthy(), S.HEALTHY_EXPECT, claims=f1)) == ["F1"]  # those only
    control = (NegativeControl("x", "x", S.healthy, S.HEALTHY_EXPECT),)
    never = register_claim(Claim("never_applies", "t", "?", judge=lambda records, expect, spec, **kw: None,
                                 applies=lambda expect: False, negative_controls=control))
    try:
        assert "never_applies" not in judge_model(S.healthy(), S.HEALTHY_EXPECT)
    finally:
        unregister_claim(never.name)
