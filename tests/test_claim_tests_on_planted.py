"""Each negative control makes its claim TEST fail, not just the judge.

With ``pytester``, the claim module itself runs against a stand-in conftest that provides the
contract fixtures (``model_entry``, ``revision``, ``model_records``, ``revision_record``) from a
planted trajectory. The healthy trajectory must pass every claim test; each negative control must
fail exactly its own claim's test; a declared known deviation must xfail, strictly, and only when
the measurement matches the declaration; an organism that did not form fails its formation test
and has every claim test skipped as "not judged".
"""
from __future__ import annotations

from pathlib import Path

import pytest

# Imported here, not first inside an inner run: pytester drops what an inner run imported, and a
# C extension (scipy's, through the judge) cannot be imported a second time in one process.
import headwatch.claims.judge  # noqa: F401
from headwatch.claims.registry import negative_controls

pytest_plugins = ["pytester"]

CLAIMS_DIR = Path(__file__).resolve().parent.parent / "claims"
MODULE_OF = {
    "F1": "test_f1_zero_bos_floor.py",
    "F2": "test_f2_bos_shape.py",
    "F3": "test_f3_induction_before_bos.py",
    "F4": "test_f4_early_convergence.py",
    "F5": "test_f5_pr_precedes_threshold.py",
    "causal": "test_causal_ablation.py",
    "formation": "test_formation.py",
}

STAND_IN_CONFTEST = '''
import dataclasses
import types
import pytest
from headwatch.claims import trajectory as T
from headwatch.claims.registry import negative_controls
from headwatch.claims.synthetic import FORMATION_EXPECT, HEALTHY_EXPECT, healthy
from headwatch.spec import Deviation

CASE = {case!r}
XFAIL = {{k: Deviation(**{{f: tuple(v) if isinstance(v, list) else v for f, v in d.items()}})
         for k, d in {xfail!r}.items()}}
#: planted organisms: "formed" (healthy, declared to form), "never_forms" (no induction head ever)
ORGANISMS = {{"formed": healthy, "never_forms": lambda: healthy(induction_sets=((),) * 7)}}

def _records():
    if CASE in ORGANISMS:
        return ORGANISMS[CASE]()
    return healthy() if CASE == "healthy" else negative_controls()[CASE].records()

BASE = FORMATION_EXPECT if CASE in ORGANISMS else HEALTHY_EXPECT if CASE == "healthy" else negative_controls()[CASE].expect
EXPECT = dataclasses.replace(BASE, xfail=XFAIL)
ENTRY = types.SimpleNamespace(name="planted", id="planted", repo="planted/model", expect=EXPECT,
                              total_tokens=None)

def pytest_generate_tests(metafunc):
    if "revision" in metafunc.fixturenames:
        revs = [r.revision for r in T.by_tokens(_records())]
        metafunc.parametrize(("model_entry", "revision"), [(ENTRY, r) for r in revs],
                             ids=[f"planted@{{r}}" for r in revs])
    elif "model_entry" in metafunc.fixturenames:
        metafunc.parametrize("model_entry", [ENTRY], ids=["planted"])

def pytest_collection_modifyitems(config, items):
    # only the claim-contract tests (they take model_entry): the modules' own planted unit tests
    # (negative controls, boundaries) are run directly elsewhere
    items[:] = [i for i in items if "model_entry" in getattr(i, "fixturenames", ())]

@pytest.fixture
def model_records(model_entry):
    return T.by_tokens(_records())

@pytest.fixture
def revision_record(model_entry, revision):
    return next(r for r in _records() if r.revision == revision)
'''


def run_claim_module(pytester: pytest.Pytester, claim: str | list[str], case: str, xfail: dict | None = None):
    pytester.makeconftest(STAND_IN_CONFTEST.format(case=case, xfail=xfail or {}))
    for c in [claim] if isinstance(claim, str) else claim:
        name = MODULE_OF[c]
        pytester.makepyfile(**{name[:-3]: (CLAIMS_DIR / name).read_text()})
    # The hypothesis plugin's terminal summary costs seconds per inner run and is not needed here.
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q", "-rs")


@pytest.mark.parametrize("claim", sorted(set(MODULE_OF) - {"formation"}))
def test_claim_test_passes_on_the_healthy_trajectory(pytester, claim):
    result = run_claim_module(pytester, claim, "healthy")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1 and "failed" not in outcomes, result.stdout.str()


@pytest.mark.parametrize("case", sorted(negative_controls()))
def test_negative_control_fails_its_claim_test(pytester, case):
    control = negative_controls()[case]
    result = run_claim_module(pytester, control.claim, case)
    outcomes = result.parseoutcomes()
    # F1 has a per-revision test (only the planted revision fails) and a model-level one.
    assert outcomes.get("failed") == (2 if control.claim == "F1" else 1), result.stdout.str()
    out = result.stdout.str()
    assert f"{control.claim} fails for planted" in out  # the failure message names claim and model


def test_declared_deviation_xfails_strictly(pytester):
    """A panel-declared known deviation that matches the measurement turns the failure into an xfail..."""
    result = run_claim_module(pytester, "F2", "step_for_declared_ramp", {"F2": {"reason": "planted step", "key": [0.6, 0.9]}})
    assert result.parseoutcomes().get("xfailed") == 1, result.stdout.str()


def test_declared_deviation_that_does_not_occur_fails(pytester):
    """...a declared deviation that does not happen fails the run (strict xfail)..."""
    result = run_claim_module(pytester, "F2", "healthy", {"F2": {"reason": "expected a step", "key": [0.6, 0.9]}})
    assert result.parseoutcomes().get("failed") == 1, result.stdout.str()
    assert "XPASS(strict)" in result.stdout.str()


def test_declared_deviation_that_fails_otherwise_fails_with_declared_vs_measured(pytester):
    """...and a failure other than the declared one is a failure, not an xfail: the step's share is
    0.75, outside the declared [0.1, 0.4]."""
    result = run_claim_module(pytester, "F2", "step_for_declared_ramp", {"F2": {"reason": "a mild step", "key": [0.1, 0.4]}})
    assert result.parseoutcomes().get("failed") == 1 and "xfailed" not in result.parseoutcomes(), result.stdout.str()
    assert "not as the panel declares: declared key in [0.1, 0.4]; measured key 0.75" in result.stdout.str()


def test_model_wide_f1_deviation_xfails_only_where_it_occurs(pytester):
    """A model-wide F1 deviation naming its revision and head xfails that revision (and the
    model-level test); the other revisions still pass rather than XPASS."""
    declared = {"F1": {"reason": "planted BOS head", "revisions": ["step2"], "heads": ["L0_H1"]}}
    result = run_claim_module(pytester, "F1", "bos_head_in_layer_0", declared)
    outcomes = result.parseoutcomes()
    assert outcomes.get("xfailed") == 2 and outcomes.get("passed") == 6, result.stdout.str()
    assert "failed" not in outcomes


def test_model_wide_f1_deviation_with_other_heads_fails(pytester):
    """The OLMoE case of issue 11: declared L0_H0, measured L0_H1: both F1 tests fail, naming both."""
    declared = {"F1": {"reason": "a layer-0 first-token head", "revisions": ["step2"], "heads": ["L0_H0"]}}
    result = run_claim_module(pytester, "F1", "bos_head_in_layer_0", declared)
    assert result.parseoutcomes().get("failed") == 2, result.stdout.str()
    assert "declared revisions step2; heads L0_H0; measured revisions step2; heads L0_H1" in result.stdout.str()


def test_per_revision_deviation_is_strict(pytester):
    result = run_claim_module(pytester, "F1", "healthy", {"F1@step3": {"reason": "does not occur", "heads": ["L0_H1"]}})
    assert result.parseoutcomes().get("failed") == 1, result.stdout.str()


def test_organism_that_did_not_form_fails_formation_and_no_claim_is_judged(pytester):
    """Negative control of issue 11: the formation test fails red with the numbers; every claim
    test skips as "not judged: organism did not form", none passes."""
    result = run_claim_module(pytester, sorted(MODULE_OF), "never_forms")
    outcomes, out = result.parseoutcomes(), result.stdout.str()
    assert outcomes.get("failed") == 1 and "passed" not in outcomes and "xfailed" not in outcomes, out
    assert "formation fails for planted: did not form as declared: 0 heads >= 50x at step6 (needs >= 3)" in out
    assert outcomes.get("skipped") == 6 + 7  # six model-level claim tests, F1 at each of 7 revisions
    assert out.count("not judged: organism did not form") >= 1 and "SKIPPED" in out


def test_organism_that_formed_is_judged(pytester):
    result = run_claim_module(pytester, sorted(MODULE_OF), "formed")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and outcomes.get("passed", 0) >= 14, result.stdout.str()
