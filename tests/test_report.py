"""The report (issue 6): figures on planted records, verdict cells, the pytest-html plugin under xdist
(a generated claims.html parsed for its verdict table and every figure), and ``headwatch report``."""
from __future__ import annotations

import base64
import csv
import json
import os
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from headwatch.claims import synthetic as S
from headwatch.claims.registry import negative_controls
from headwatch.claims.figures import ablation_figure, bos_figure, label_grid_figure, model_figures, pr_figure
from headwatch.claims.html_report import classify, disagrees, outcome_of
from headwatch.claims.judge import judge_model
from headwatch.claims.registry import all_claims
from headwatch.claims.report_data import (
    CONSISTENT, FAILS, HOLDS, MISMATCH, MISSING, NA, NOT_JUDGED, XFAIL, XPASS, ModelReport, verdict_cell,
)
from headwatch.claims.report_render import fragment
from headwatch.spec import Deviation, Expectations

#: The built-in claims (the gate, formation, apart), in report order.
CLAIMS = [c.name for c in all_claims() if not c.gate]

ROOT = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIGURE_NAMES = ["bos_fraction", "induction_heads", "pr_lead", "label_grid", "ablation"]
PUBLISHED_MODELS = ["pythia-1b", "olmo-1b"]


def _png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_MAGIC), "not a PNG"
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _report(records, expect=S.HEALTHY_EXPECT, model="planted") -> ModelReport:
    return ModelReport(model, "planted/model", "test", records, judge_model(records, expect))


# ---- figures on planted records -------------------------------------------------------------------


def test_model_figures_draws_every_figure_on_the_healthy_trajectory():
    recs = S.healthy()
    figs = model_figures(recs, judge_model(recs, S.HEALTHY_EXPECT), "planted")
    assert [f.name for f in figs] == FIGURE_NAMES
    for f in figs:
        w, h = _png_size(f.png)
        assert 150 < w < 1300 and 80 < h < 1000, (f.name, w, h)
        assert len(f.png) < 150_000, f"{f.name} is {len(f.png)} bytes: keep figures small"


def test_figures_differ_with_the_data():
    """A figure that ignores its input cannot fail: the step and ramp BOS curves must draw differently."""
    ramp = S.healthy()
    step = S.healthy(bos_fractions=(0.0, 0.0, 0.0, 0.0625, 0.625, 0.6875, 0.75))
    assert bos_figure(ramp, judge_model(ramp)) != bos_figure(step, judge_model(step))


def test_figures_handle_a_revision_at_zero_tokens():
    recs = S.healthy(tokens=(0.0, 1e9, 3e9, 1e10, 2e10, 1e11, 1e12))
    for f in model_figures(recs, judge_model(recs, S.HEALTHY_EXPECT), "zero"):
        _png_size(f.png)


def test_missing_pr_and_missing_ablation_give_a_message_figure_not_an_error():
    recs = S.healthy(with_pr=False, ablations=None)
    verdicts = judge_model(recs)
    no_pr, no_abl = pr_figure(recs, verdicts), ablation_figure(verdicts)
    full = S.healthy()
    assert _png_size(no_pr)[1] < _png_size(pr_figure(full, judge_model(full)))[1]  # a one-line notice
    assert _png_size(no_abl)[1] < _png_size(ablation_figure(judge_model(full)))[1]


def test_label_grid_marks_early_layer_bos_heads():
    clean = S.healthy()[-1]
    dirty = S.healthy(extra_bos={6: ("L0_H1",)})[-1]
    assert label_grid_figure(clean) != label_grid_figure(dirty)


# ---- verdict cells ----------------------------------------------------------------------------------


def test_cells_of_the_healthy_trajectory_hold_with_key_numbers():
    r = _report(S.healthy())
    cells = {c: verdict_cell(c, r) for c in CLAIMS}
    assert {c.status for c in cells.values()} == {HOLDS}
    assert cells["F1"].key == "0 of 8 heads; max 1x"  # 2 layers x 4 heads in the planted model
    assert cells["F3"].key == "100x (20, 1000)"  # t_bos50 1e11 / t_induction 1e9; grid (2e10/1e9, 1e11/1e8)
    assert cells["F4"].key.startswith("67% at 0.1")
    # A, B elevated by their crossing (2 of 32 heads), C with A, B (3): 3 random heads all pass with p = 6.7e-5
    # by layer: each is the one head of its layer (of 4) elevated by then: (1/4)^3 = 0.016
    assert cells["F5"].key == "3 of 3 heads (2 before, 1 at); null p 6.7e-05, by layer 0.016"
    # 4 of 2000 against baseline 100 (the bar's exact test) and random 80
    assert cells["causal"].key == "4.0% of base, p=8.1e-07 (rand 80.0%, p=4.2e-20)"


@pytest.mark.parametrize("control", list(negative_controls().values()), ids=lambda c: c.name)
def test_cells_of_negative_controls_fail(control):
    r = _report(control.records(), control.expect)
    assert verdict_cell(control.claim, r).status == FAILS


def test_declared_deviation_cells():
    recs = negative_controls()["circuit_only_at_end"].records()
    known = {"F4": Deviation("known", key=(0.9, 1.0))}
    failing = _report(recs, replace(S.HEALTHY_EXPECT, xfail=known))
    assert verdict_cell("F4", failing).status == XFAIL
    otherwise = _report(recs, replace(S.HEALTHY_EXPECT, xfail={"F4": Deviation("known", key=(0.1, 0.5))}))
    assert verdict_cell("F4", otherwise).status == MISMATCH
    assert "expects key in [0.1, 0.5]; measured key 1" in verdict_cell("F4", otherwise).message
    gone = _report(S.healthy(), replace(S.HEALTHY_EXPECT, xfail=known))
    assert verdict_cell("F4", gone).status == XPASS
    not_dclm = _report(S.healthy(), Expectations(bos_shape="ramp"))
    assert verdict_cell("F3", not_dclm).status == NA and verdict_cell("F3", not_dclm).key.endswith("(not DCLM)")
    empty = ModelReport("m", "r", "p", [], error=None)
    assert verdict_cell("F1", empty).status == MISSING


@pytest.mark.parametrize("case", ["healthy", "pythia-1b", "olmo-1b", *negative_controls()], ids=str)
def test_the_grid_rejudges_only_the_claims_that_read_the_knob(case):
    """Each grid row re-judges only the claims that read its knob (``sensitivity.READS``; issue 33:
    a 154-revision grid re-judged whole was most of a population report's time). Every row equals a
    whole re-judge, with and without formation declared."""
    import dataclasses

    from headwatch.claims.judge import judge_model
    from headwatch.claims.sensitivity import sensitivity_grid
    from headwatch.spec import SPEC

    if case in ("pythia-1b", "olmo-1b"):  # the published files: rows where verdicts do change
        from headwatch.fixtures.panels import load_panel
        from headwatch.fixtures.reference import load_published

        entry = load_panel("published").model(case)
        recs, expect = load_published(entry.repo), entry.expect
    else:
        recs, expect = (S.healthy(), S.HEALTHY_EXPECT) if case == "healthy" else (
            negative_controls()[case].records(), negative_controls()[case].expect)
    for with_formation in (expect, dataclasses.replace(expect, formation=S.FORMATION_EXPECT.formation)):
        grid = sensitivity_grid(recs, with_formation)
        rows = [r for r in grid.rows if r.knob is not None]
        assert len(rows) == 8
        for r in rows:
            whole = judge_model(recs, with_formation, None, dataclasses.replace(SPEC, **{r.knob: r.value}))
            assert dict(r.statuses) == {c: v.status.value for c, v in whole.items()}, (r.label, case)


# ---- the plugin's bookkeeping -----------------------------------------------------------------------


def test_classify_test_ids():
    assert classify("claims/test_f1_zero_bos_floor.py::test_f1_no_bos[olmo-1b@step1000-tokens2B]") == ("F1", "olmo-1b", False)
    assert classify("claims/test_causal_ablation.py::test_causal[pythia-1b]") == ("causal", "pythia-1b", False)
    assert classify("claims/test_f4_early_convergence.py::test_negative_control_f4_fails[circuit_only_at_end]") == (
        "F4", None, True)
    assert classify("claims/test_f4_x.py::test_f4[pythia-1b]") is None  # a claim's own module is its test_module
    assert classify("tests/test_report.py::test_classify_test_ids") is None
    # the generic test of a claim without a module of its own: the claim is the id's first part
    assert classify("claims/test_registered_claims.py::test_claim[F2-olmo-1b]") == ("F2", "olmo-1b", False)
    assert classify("claims/test_registered_claims.py::test_claim_at_revision[F1-olmo-1b@step1]") == (
        "F1", "olmo-1b", False)
    assert classify("claims/test_registered_claims.py::test_negative_control[F1-bos_head_in_layer_0]") == (
        "F1", None, True)


def test_outcomes_and_disagreement():
    rep = lambda **kw: SimpleNamespace(**{"when": "call", "outcome": "passed", "skipped": False, "failed": False, **kw})
    assert outcome_of(rep()) == "passed"
    assert outcome_of(rep(outcome="skipped", skipped=True, wasxfail="r")) == "xfailed"
    assert outcome_of(rep(when="setup", outcome="skipped", skipped=True)) == "skipped"
    assert outcome_of(rep(when="setup")) is None
    assert not disagrees(HOLDS, Counter(passed=11))
    assert disagrees(HOLDS, Counter(passed=10, failed=1))
    assert disagrees(FAILS, Counter(passed=1))
    assert not disagrees(XFAIL, Counter(xfailed=1))
    assert disagrees(NA, Counter(passed=1))


def test_fragment_flags_tests_that_contradict_the_judge():
    r = _report(S.healthy())
    html = fragment([r], {}, {}, tests={("F1", "planted"): "1 failed"}, mismatches={("F1", "planted"): True})
    assert 'class="tests mismatch">tests: 1 failed' in html


# ---- a generated claims.html, under xdist -------------------------------------------------------------


class _ReportParser(HTMLParser):
    """Collects the verdict cells, the figures and the environment table of a claims.html."""

    def __init__(self):
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}
        self.figures: dict[str, bytes] = {}
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "td" and "data-claim" in a:
            self.cells[(a["data-claim"], a["data-model"])] = a["data-status"]
        if tag == "img" and "data-figure" in a:
            prefix = "data:image/png;base64,"
            assert a["src"].startswith(prefix), f"{a['data-figure']} is not embedded"
            self.figures[a["data-figure"]] = base64.b64decode(a["src"][len(prefix):])
        if tag in ("link", "script", "img") and (a.get("href") or a.get("src") or "").split(":")[0] not in ("", "data"):
            self.links.append(a.get("href") or a.get("src"))


@pytest.fixture(scope="module")
def claims_html(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The user's command (-n 2, --html, no --self-contained-html) on the published panel, a few tests."""
    out = tmp_path_factory.mktemp("report") / "claims.html"
    cmd = [sys.executable, "-P", "-m", "pytest", "claims", "-n", "2", "--panel", "published", f"--html={out}",
           "-k", "f2 or causal", "-p", "no:cacheprovider", "-q"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc


@pytest.mark.slow
def test_claims_html_has_the_verdict_table_and_every_figure(claims_html):
    path, _ = claims_html
    text = path.read_text(encoding="utf-8")
    p = _ReportParser()
    p.feed(text)
    assert {"headwatch-verdicts", "headwatch-environment"} <= p.ids
    assert set(p.cells) == {(c, m) for c in CLAIMS for m in PUBLISHED_MODELS}
    assert p.cells[("F3", "olmo-1b")] == CONSISTENT and p.cells[("F3", "pythia-1b")] == NA
    for m in PUBLISHED_MODELS:
        for name in FIGURE_NAMES:
            _png_size(p.figures[f"{m}/{name}"])
    # the verdict table opens the report: before pytest-html's own environment table and test list
    assert text.index('id="headwatch-verdicts"') < text.index('id="results-table"')
    assert "11.5x (5.09, 26.4)" in text and "0 of 32 heads; max 28.1x" in text
    assert 'data-grid="olmo-1b"' in text and "Sink<sub>1</sub>" in text  # sensitivity grid, sinks two ways


@pytest.mark.slow
def test_claims_html_is_self_contained_and_small(claims_html):
    path, _ = claims_html
    p = _ReportParser()
    p.feed(path.read_text(encoding="utf-8"))
    assert p.links == [], f"external resources: {p.links}"
    assert not (path.parent / "assets").exists()
    assert path.stat().st_size < 10 * 2**20


@pytest.mark.slow
def test_claims_html_shows_test_outcomes_and_the_run(claims_html):
    path, _ = claims_html
    text = path.read_text(encoding="utf-8")
    assert "tests: 1 passed" in text  # F2 and causal ran (-k) on the workers; outcomes reached the controller
    assert "Negative controls" in text
    assert "reference" in text and "python" in text and "torch" in text  # sources and versions


# ---- headwatch report ------------------------------------------------------------------------------


def _cli(*argv: str) -> int:
    from headwatch.cli import main

    return main(["report", *argv])


@pytest.mark.slow
def test_report_cli_writes_figures_csv_and_json(tmp_path):
    assert _cli("--panel", "published", "--out", str(tmp_path)) == 0
    rows = list(csv.DictReader(open(tmp_path / "summary.csv", encoding="utf-8")))
    assert len(rows) == len(CLAIMS) * len(PUBLISHED_MODELS)
    olmo_f3 = next(r for r in rows if r["model"] == "olmo-1b" and r["claim"] == "F3")
    assert olmo_f3["status"] == CONSISTENT and olmo_f3["key"] == "11.5x (5.09, 26.4)"
    assert olmo_f3["interval"] == "(5.09, 26.4)" and olmo_f3["interval_method"].startswith("revision grid")
    assert olmo_f3["robust"] == "False"  # at the 30x induction threshold F3 is established, at 100x it fails
    olmo_causal = next(r for r in rows if r["model"] == "olmo-1b" and r["claim"] == "causal")
    assert olmo_causal["key"].endswith("\u2020")  # the author's control is matched to the top-45 set
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["models"]["olmo-1b"]["verdicts"]["F3"]["details"]["ratio"] == pytest.approx(11.48, abs=0.01)
    for m in PUBLISHED_MODELS:
        for name in FIGURE_NAMES:
            _png_size((tmp_path / m / f"{name}.png").read_bytes())
    p = _ReportParser()
    p.feed((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert len(p.figures) == len(FIGURE_NAMES) * len(PUBLISHED_MODELS) and len(p.cells) == len(CLAIMS) * 2


@pytest.mark.parametrize("trained", [False, True], ids=["untrained", "trained"])
def test_report_cli_measures_nothing_and_lists_what_is_missing(trained, tmp_path, capsys, monkeypatch, never_trains):
    """An empty measurement cache: the organisms are listed as not measured, with the command that
    trains them (where they are not) and the one that measures them, never trained or probed (exit 2)."""
    from headwatch import selection

    monkeypatch.setenv("HEADWATCH_ORGANISMS_CACHE", str(tmp_path / "org"))
    if trained:
        monkeypatch.setattr(selection, "missing_organisms", lambda picked, models: [])
    out = tmp_path / "out"
    assert _cli("--panel", "organisms", "--out", str(out), "--cache-dir", str(tmp_path / "empty")) == 2
    err = capsys.readouterr().err
    assert "not measured yet: step0" in err and "nothing was measured" in err
    assert ("headwatch organisms train --panel organisms" in err) is not trained and ("--train" in err) is not trained
    assert "to measure the rest: headwatch judge --panel organisms --cache-dir" in err
    assert not (tmp_path / "empty" / "hub").exists()
    rows = list(csv.DictReader(open(out / "summary.csv", encoding="utf-8")))
    assert {r["status"] for r in rows} == {MISSING}


def test_report_cli_bad_panel_is_a_usage_error(tmp_path, capsys):
    assert _cli("--panel", "nosuchpanel", "--out", str(tmp_path)) == 2
    assert "unknown panel" in capsys.readouterr().err


def _plant_organism_cache(cache_dir: Path) -> list[str]:
    """The organisms panel's revisions as planted records in a measurement cache (no training)."""
    from headwatch.fixtures.cache import CacheKey, MeasurementCache
    from headwatch.fixtures.panels import load_panel

    cache = MeasurementCache(cache_dir / "measurements")
    ids = []
    for pm in load_panel("organisms").models:
        revs = pm.sorted_revisions
        tokens = [pm.tokens_rule.tokens(r) for r in revs]
        n = len(revs)  # stretch the healthy knobs over the panel's revisions
        idx = [min(6, round(6 * i / (n - 1))) for i in range(n)]  # healthy has 7 revisions
        recs = S.planted_trajectory(
            tokens, model=pm.repo, bos_fractions=[S.HEALTHY["bos_fractions"][i] for i in idx],
            induction_sets=[S.HEALTHY["induction_sets"][i] for i in idx],
            pr={h: [v[i] for i in idx] for h, v in S.HEALTHY["pr"].items()})
        for rev, rec in zip(revs, recs):
            rec.revision = rev
            key = CacheKey.make(pm.repo, rev, "planted", pm.settings_for(rev))
            cache.get_or_compute(key, lambda rec=rec: rec)
        ids.append(pm.id)
    return ids


@pytest.mark.slow
def test_report_cli_reads_the_measurement_cache(tmp_path):
    """Cached (not published) models: records found by model/revision/settings, judged, drawn; and the
    default panels' report stays far below 10 MB. The planted organisms do not form: a finding, exit 1
    (as ``headwatch judge``)."""
    ids = _plant_organism_cache(tmp_path / "cache")
    out = tmp_path / "out"
    assert _cli("--panel", "organisms,published", "--out", str(out), "--cache-dir", str(tmp_path / "cache")) == 1
    summary = json.loads((out / "summary.json").read_text())
    for m in ids:
        assert summary["models"][m]["missing"] == [] and len(summary["models"][m]["revisions"]) >= 5
        # the planted organisms copy at top-1 0.05, below the panel's formation floor (0.1): not judged
        verdicts = summary["models"][m]["verdicts"]
        assert verdicts["formation"]["status"] == "fails" and "top-1 0.05" in verdicts["formation"]["message"]
        assert verdicts["F5"]["status"] == "not_judged" and verdicts["F5"]["message"].startswith("not judged")
        for name in FIGURE_NAMES:
            _png_size((out / m / f"{name}.png").read_bytes())
    size = (out / "report.html").stat().st_size
    assert size < 3 * 2**20, f"report of 5 models is {size} bytes"
