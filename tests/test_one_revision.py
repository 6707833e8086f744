"""F2-F5 are claims about training: on the records of one revision (a packaged pretrained model, issue
36) they are "not established", never passed or failed; F1 and the causal check judge that revision."""
from __future__ import annotations

import pytest

from headwatch.claims.judge import judge_causal, judge_f1, judge_f2, judge_f3, judge_f4, judge_f5, judge_model
from headwatch.claims.verdict import Status
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.reference import fill_tokens, load_published


@pytest.fixture(scope="module")
def pythia():
    model = load_panel("published").model("pythia-1b")
    return model, fill_tokens(load_published(model.repo), model)


def test_trajectory_claims_on_one_revision_are_not_established(pythia):
    model, records = pythia
    final = [records[-1]]
    for claim, judge in (("F2", lambda r: judge_f2(r, model.expect)), ("F4", lambda r: judge_f4(r, model.expect)),
                         ("F5", judge_f5), ("F3", lambda r: judge_f3(r, model.expect.__class__(dclm=True)))):
        verdict = judge(final)
        assert verdict.status is Status.NOT_ESTABLISHED, (claim, verdict.message)
        assert verdict.message.startswith(f"not established: {claim} is a claim about training")
        assert "step143000" in verdict.message and verdict.margin is None and not verdict.failing_revisions
    # a claim that does not apply stays so, and says there is no trajectory either
    not_dclm = judge_f3(final, model.expect)
    assert not_dclm.status is Status.NOT_APPLICABLE and "one revision (step143000): no trajectory" in not_dclm.message
    no_shape = judge_f2(final, model.expect.__class__())
    assert no_shape.status is Status.NOT_APPLICABLE and no_shape.key == "one revision: no trajectory"
    # F1 and the causal check judge the one revision as they would any final one
    assert judge_f1(final).status is judge_f1(records).status is Status.HOLDS
    assert judge_causal(final, model.expect).status is judge_causal(records, model.expect).status
    verdicts = judge_model(final, model.expect)
    assert {c for c, v in verdicts.items() if v.status is Status.NOT_ESTABLISHED} == {"F2", "F4", "F5"}


def test_two_revisions_are_judged_as_before(pythia):
    """The control: with the whole trajectory the same judges decide (F2 and F4 hold on Pythia 1B)."""
    model, records = pythia
    assert judge_f2(records, model.expect).status is Status.HOLDS
    assert judge_f4(records, model.expect).status is Status.HOLDS
    assert judge_f4(records[-2:], model.expect).status is not Status.NOT_ESTABLISHED
