"""The HTML report's pytest side: turns pytest-html's report into one a researcher reads.

Registered by the headwatch plugin (headwatch/plugin.py) when ``--html`` is given and headwatch is
active, on the process that writes the report. It names the report and opens pytest-html's summary
with the claims: a verdict table (claim x model, status and key number, plus the claim tests'
outcomes), then per model the judge's messages and figures, then the run environment.

Why the controller re-reads the records instead of receiving them from the tests: under xdist the
tests run on workers, and the report is written on the controller after they finish. By then every
measurement the workers made is in the cache, so the controller reads the same records read-only
(:meth:`headwatch.fixtures.provider.Provider.cached_records`: published files or cache, never a
fresh probe run) and judges them with the same judge. This also covers models whose tests were
deselected, and needs no large payload through xdist. The claim tests' outcomes arrive as ordinary
test reports.
"""
from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import replace
from html import escape
from typing import Any

import pytest

from headwatch.fixtures.provider import Provider

from headwatch.claims.check import PYTEST_OUTCOME
from headwatch.claims.registry import all_claims
from headwatch.claims.report_data import (
    FAILS, HOLDS, MISMATCH, VACUOUS, XFAIL, XPASS, draws_member_figures, model_report, population_parts, verdict_cell,
)
from headwatch.claims.report_render import fragment

#: The test module of every registered claim without one of its own (claims/test_registered_claims.py).
GENERIC_TEST_MODULE = "test_registered_claims.py"
_OUTCOME_ORDER = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


# ---- which claim and model a test report belongs to ---------------------------------------------


def classify(nodeid: str) -> tuple[str, str | None, bool] | None:
    """(claim, model id or None, is a negative control) for a claim test's node id, else None.

    ``claims/test_f1_x.py::test_f1_y[olmo-1b@step1000-tokens2B]`` -> ("F1", "olmo-1b", False): a claim's
    own test module (its ``test_module``); ``claims/test_registered_claims.py::test_claim[my_claim-olmo-1b]``
    -> ("my_claim", "olmo-1b", False): the generic test of every other registered claim.
    """
    path, _, rest = nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    func, _, param = rest.partition("[")
    param = param.rstrip("]")
    control = func.split("::")[-1].startswith("test_negative_control")
    claims = all_claims()
    own = next((c.name for c in claims if c.test_module and c.test_module == module), None)
    if own is not None:
        model = param.split("@")[0] if param and not control else None
        return own, model, control
    if module != GENERIC_TEST_MODULE or not param:
        return None
    claim = max((c.name for c in claims if param == c.name or param.startswith(c.name + "-")), key=len, default=None)
    if claim is None:
        return None
    rest_param = param[len(claim) + 1:]
    return claim, (rest_param.split("@")[0] or None) if not control else None, control


def outcome_of(rep: pytest.TestReport) -> str | None:
    """One word per test (from whichever phase decides it), or None for a phase that does not."""
    if rep.when == "call":
        if hasattr(rep, "wasxfail"):
            return "xfailed" if rep.skipped else "xpassed"
        return rep.outcome
    if rep.skipped:
        return "skipped"
    if rep.failed:
        return "error"
    return None


def tests_line(counts: Counter) -> str:
    return ", ".join(f"{counts[o]} {o}" for o in _OUTCOME_ORDER if counts.get(o))


def disagrees(status: str, counts: Counter) -> bool:
    """Whether the tests' outcomes contradict the judge's verdict (a bug somewhere: flag it)."""
    bad = counts.get("failed", 0) + counts.get("error", 0)
    if status in (HOLDS, VACUOUS):
        return bool(bad or counts.get("xfailed"))
    if status in (FAILS, XPASS, MISMATCH):
        return not bad
    if status == XFAIL:
        return not counts.get("xfailed")
    if status in {s.words for s, o in PYTEST_OUTCOME.items() if o == "skip"}:  # a pass or a failure would contradict them
        return bool(bad or counts.get("passed"))
    return False


# ---- the plugin ---------------------------------------------------------------------------------


class HeadwatchReport:
    """Collects claim-test outcomes during the run; builds the claims section at session end.

    ``session`` is the plugin's :class:`headwatch.plugin.HeadwatchSession` (panels, options, the run).
    """

    def __init__(self, config: pytest.Config, session: Any):
        self.config = config
        self.session = session
        self.tests: dict[tuple[str, str], Counter] = {}
        self.controls: Counter = Counter()
        self.html: str | None = None

    # -- during the run ------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        c = classify(report.nodeid)
        outcome = outcome_of(report)
        if c is None or outcome is None:
            return
        claim, model, control = c
        if control:
            self.controls[outcome] += 1
        elif model is not None:
            self.tests.setdefault((claim, model), Counter())[outcome] += 1

    # -- at the end ----------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_html_report_title(self, report: Any) -> None:
        report.title = "headwatch: when do attention circuits form? (claims of arXiv 2606.02378)"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        try:
            self.html = self.build()
        except Exception:  # the test results must still be written; show what went wrong instead
            self.html = ('<div id="headwatch"><h2>Claims</h2><pre style="color:#a8140e">the headwatch report '
                         f"could not be built:\n{_escape(traceback.format_exc())}</pre></div>")

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list, summary: list, postfix: list, session: Any) -> None:
        if self.html:
            prefix.append(self.html)

    def build(self) -> str:
        # the run as the tests saw it; the report reads through a provider of its own (read only),
        # one model at a time: its records are dropped once judged and drawn
        env = self.session.run.to_dict()
        reader = Provider(replace(self.session.options, progress=False))
        models = self.selected_models(env)
        draw_members = draws_member_figures(models)
        claims = getattr(self.session, "claims", None) or None  # --claims; None: every registered claim
        reports = [model_report(pm, reader, figures=pm.member is None or draw_members, release=True, claims=claims)
                   for pm in models]
        errors = [r.figure_error for r in reports if r.figure_error]
        tests, mismatches = {}, {}
        for r in reports:
            for (claim, model), counts in self.tests.items():
                if model == r.id:
                    tests[(claim, model)] = tests_line(counts)
                    mismatches[(claim, model)] = disagrees(verdict_cell(claim, r).status, counts)
        pops, pop_figs = population_parts(models, reports, errors)
        return fragment(reports, None, env, tests, mismatches, tests_line(self.controls) or None, errors,
                        populations=pops, population_figs=pop_figs)

    def selected_models(self, env: dict[str, Any]) -> list[Any]:
        """The session's selected PanelModels, with the revisions the run used.

        From the run info (``models``: id -> panel, repo, revisions; on the controller merged from
        the workers, which resolve log-spaced revisions), matched to the session's panels.
        """
        out = []
        for model_id, info in (env.get("models") or {}).items():
            entry = next((m for p in self.session.panels for m in p.models
                          if m.panel == info.get("panel") and m.repo == info.get("repo")), None)
            if entry is None:
                continue
            revisions = info.get("revisions") or list(entry.revisions)
            out.append(replace(entry.with_revisions(revisions), id=model_id))
        return out


def _escape(text: str) -> str:
    return escape(text)
