"""Each negative control makes its claim TEST fail, not just the judge.

With ``pytester``, the claim module itself runs against a stand-in conftest that provides the
contract fixtures (``model_entry``, ``revision``, ``model_records``, ``revision_record``) from a
planted trajectory. The healthy trajectory must pass every claim test; each negative control must
fail exactly its own claim's test; a declared known deviation must xfail, and strictly.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from headwatch.claims.synthetic import NEGATIVE_CONTROLS

pytest_plugins = ["pytester"]

CLAIMS_DIR = Path(__file__).resolve().parent.parent / "claims"
MODULE_OF = {
    "F1": "test_f1_zero_bos_floor.py",
    "F2": "test_f2_bos_shape.py",
    "F3": "test_f3_induction_before_bos.py",
    "F4": "test_f4_early_convergence.py",
    "F5": "test_f5_pr_precedes_threshold.py",
    "causal": "test_causal_ablation.py",
}

STAND_IN_CONFTEST = '''
import dataclasses
import types
import pytest
from headwatch.claims import trajectory as T
from headwatch.claims.synthetic import HEALTHY_EXPECT, NEGATIVE_CONTROLS, healthy

CASE = {case!r}
XFAIL = {xfail!r}

def _records():
    return healthy() if CASE == "healthy" else NEGATIVE_CONTROLS[CASE].records()

EXPECT = dataclasses.replace(HEALTHY_EXPECT if CASE == "healthy" else NEGATIVE_CONTROLS[CASE].expect, xfail=XFAIL)
ENTRY = types.SimpleNamespace(name="planted", id="planted", repo="planted/model", expect=EXPECT,
                              total_tokens=None)

def pytest_generate_tests(metafunc):
    if "revision" in metafunc.fixturenames:
        revs = [r.revision for r in T.by_tokens(_records())]
        metafunc.parametrize(("model_entry", "revision"), [(ENTRY, r) for r in revs],
                             ids=[f"planted@{{r}}" for r in revs])
    elif "model_entry" in metafunc.fixturenames:
        metafunc.parametrize("model_entry", [ENTRY], ids=["planted"])

@pytest.fixture
def model_records(model_entry):
    return T.by_tokens(_records())

@pytest.fixture
def revision_record(model_entry, revision):
    return next(r for r in _records() if r.revision == revision)
'''


def run_claim_module(pytester: pytest.Pytester, claim: str, case: str, xfail: dict | None = None):
    pytester.makeconftest(STAND_IN_CONFTEST.format(case=case, xfail=xfail or {}))
    name = MODULE_OF[claim]
    pytester.makepyfile(**{name[:-3]: (CLAIMS_DIR / name).read_text()})
    # The hypothesis plugin's terminal summary costs seconds per inner run and is not needed here.
    return pytester.runpytest_inprocess("-k", "not negative_control", "-p", "no:cacheprovider",
                                        "-p", "no:hypothesispytest", "-q")


@pytest.mark.parametrize("claim", sorted(MODULE_OF))
def test_claim_test_passes_on_the_healthy_trajectory(pytester, claim):
    result = run_claim_module(pytester, claim, "healthy")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1 and "failed" not in outcomes, result.stdout.str()


@pytest.mark.parametrize("case", sorted(NEGATIVE_CONTROLS))
def test_negative_control_fails_its_claim_test(pytester, case):
    control = NEGATIVE_CONTROLS[case]
    result = run_claim_module(pytester, control.claim, case)
    outcomes = result.parseoutcomes()
    # F1 has a per-revision test (only the planted revision fails) and a model-level one.
    assert outcomes.get("failed") == (2 if control.claim == "F1" else 1), result.stdout.str()
    out = result.stdout.str()
    assert f"{control.claim} fails for planted" in out  # the failure message names claim and model


def test_declared_deviation_xfails_strictly(pytester):
    """A panel-declared known deviation turns the failure into an xfail carrying the measurement..."""
    result = run_claim_module(pytester, "F2", "step_for_declared_ramp", {"F2": "planted step"})
    assert result.parseoutcomes().get("xfailed") == 1, result.stdout.str()


def test_declared_deviation_that_does_not_occur_fails(pytester):
    """...and a declared deviation that does not happen fails the run (strict xfail)."""
    result = run_claim_module(pytester, "F2", "healthy", {"F2": "expected a step"})
    assert result.parseoutcomes().get("failed") == 1, result.stdout.str()
    assert "XPASS(strict)" in result.stdout.str()


def test_model_wide_f1_deviation_xfails_only_where_it_occurs(pytester):
    """A model-wide F1 deviation xfails the revision that has it (and the model-level test); the
    other revisions still pass rather than XPASS."""
    result = run_claim_module(pytester, "F1", "bos_head_in_layer_0", {"F1": "planted BOS head"})
    outcomes = result.parseoutcomes()
    assert outcomes.get("xfailed") == 2 and outcomes.get("passed") == 6, result.stdout.str()
    assert "failed" not in outcomes


def test_per_revision_deviation_is_strict(pytester):
    result = run_claim_module(pytester, "F1", "healthy", {"F1@step3": "a deviation that does not occur"})
    assert result.parseoutcomes().get("failed") == 1, result.stdout.str()
