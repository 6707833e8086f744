"""A researcher's own claim, exactly as first-class as F1 (issue 42): registered outside the repository,
from a file (``--claims-module``), a ``conftest.py`` or an installed package's entry point, it appears
in ``headwatch judge`` (table and JSON), ``headwatch report`` (its grid column), the population table,
pytest's parametrised claim tests and ``--claims`` selection; a judge that raises is that claim's crash,
the others judged; a claim without negative controls is refused; nothing in headwatch names a built-in
claim by string outside the claim's own modules.

Everything the researcher writes lives in ``tmp_path`` (outside the repository); each front end runs
as a process of its own there, as a user runs it.
"""
from __future__ import annotations

import ast
import csv
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headwatch.claims import Claim, ClaimError, NegativeControl, register_claim
from headwatch.claims.registry import all_claims, is_builtin, unregister_claim
from headwatch.claims.synthetic import HEALTHY_EXPECT, healthy

ROOT = Path(__file__).resolve().parent.parent

#: A claim of the researcher's: at least three induction heads at the final revision (a plain-dict
#: details type, a population quantity, a negative control).
MY_CLAIMS = '''
from headwatch.claims import Claim, GridValue, KeyFigure, NegativeControl, Quantity, Status, Verdict, register_claim
from headwatch.claims.synthetic import HEALTHY_EXPECT, healthy
from headwatch.probes.selectivity import induction_circuit


def heads(records, spec):
    return len(induction_circuit(records[-1].all_head_selectivity, spec.induction))


def judge(records, expect, spec, *, total_tokens=None):
    n = heads(records, spec)
    status = Status.HOLDS if n >= 3 else Status.FAILS
    return Verdict("three_heads", status, f"{n} induction heads at {records[-1].revision}", {"heads": n},
                   key=f"{n} heads", figure=KeyFigure("induction heads at the final revision", float(n), 3.0))


CLAIM = register_claim(Claim(
    name="three_heads", title="three induction heads", question="Has the model at least 3 induction heads at the end?",
    judge=judge, reads=("induction",),
    placed_on=Quantity("final_heads", "final induction heads", lambda recs, total, spec: GridValue(float(heads(recs, spec))),
                       unit="ratio", grows_with_time=False),
    negative_controls=(NegativeControl("no_heads", "no induction head at any revision",
                                       lambda: healthy(induction_sets=((),) * 7), HEALTHY_EXPECT),),
))
'''

CRASHING = '''
from headwatch.claims import Claim, NegativeControl, register_claim
from headwatch.claims.synthetic import healthy

def judge(records, expect, spec, *, total_tokens=None):
    return 1 / 0

register_claim(Claim(name="crashes", title="a claim with a bug", question="?", judge=judge,
                     negative_controls=(NegativeControl("any", "anything", healthy),)))
'''

NO_CONTROLS = '''
from headwatch.claims import Claim, register_claim

register_claim(Claim(name="untested", title="a claim that cannot fail", question="?",
                     judge=lambda records, expect, spec, *, total_tokens=None: None))
'''


def run(tmp: Path, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``argv`` (``headwatch ...`` or ``pytest ...``) run from ``tmp``, outside the repository."""
    exe = {"headwatch": [sys.executable, "-m", "headwatch"], "pytest": [sys.executable, "-m", "pytest"],
           "python": [sys.executable]}[argv[0]]
    full = {**os.environ, **(env or {})}
    full.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([*exe, *argv[1:]], cwd=tmp, env=full, capture_output=True, text=True, timeout=600)


@pytest.fixture
def researcher(tmp_path: Path) -> Path:
    """A researcher's folder outside the repository: my_claims.py, a conftest.py that loads it, a bad module."""
    assert ROOT not in tmp_path.parents
    (tmp_path / "my_claims.py").write_text(MY_CLAIMS)
    (tmp_path / "crashing.py").write_text(CRASHING)
    (tmp_path / "no_controls.py").write_text(NO_CONTROLS)
    return tmp_path


@pytest.mark.slow
def test_a_claims_module_is_judged_reported_and_selected(researcher):
    out = researcher / "verdicts.json"
    done = run(researcher, "headwatch", "judge", "--panel", "published", "--claims-module", "my_claims.py",
               "--json", str(out))
    assert done.returncode in (0, 1), done.stderr
    models = json.loads(out.read_text())["models"]
    for verdicts in models.values():
        assert list(verdicts)[-1] == "three_heads" and "F1" in verdicts  # after the built-ins
        assert verdicts["three_heads"]["status"] in ("holds", "fails") and verdicts["three_heads"]["details"]["heads"] >= 0
    assert "three_heads" in done.stdout  # the table
    # its columns: the status starts where the built-ins' does, though the name is longer than theirs
    starts = {re.match(r"  (\S+) +", line).end() for line in done.stdout.splitlines()
              if line.startswith(("  F1 ", "  causal ", "  three_heads "))}
    assert len(starts) == 1, done.stdout
    # --claims selects: only the researcher's claim
    done = run(researcher, "headwatch", "judge", "--panel", "published", "--claims-module", "my_claims.py",
               "--claims", "three_heads", "--json", "-")
    assert {tuple(v) for v in json.loads(done.stdout)["models"].values()} == {("three_heads",)}, done.stderr
    # an unknown name is bad input, with a did-you-mean
    done = run(researcher, "headwatch", "judge", "--panel", "published", "--claims-module", "my_claims.py",
               "--claims", "three_head")
    assert done.returncode == 2 and "did you mean 'three_heads'" in done.stderr, done.stderr
    # the report: a grid column, its rows in the CSV, its sensitivity rows
    done = run(researcher, "headwatch", "report", "--panel", "published", "--claims-module", "my_claims.py",
               "--out", "report", "--no-figures")
    assert done.returncode in (0, 1), done.stderr
    assert "three_heads=" in done.stdout
    rows = list(csv.DictReader((researcher / "report" / "summary.csv").open()))
    assert {r["model"] for r in rows if r["claim"] == "three_heads"} == {"pythia-1b", "olmo-1b"}
    page = (researcher / "report" / "report.html").read_text()
    assert "<th>three induction heads</th>" in page and 'data-claim="three_heads"' in page


@pytest.mark.slow
def test_a_conftest_claim_is_parametrised_by_pytest_and_selected(researcher):
    (researcher / "conftest.py").write_text("import my_claims  # registers three_heads\n")
    done = run(researcher, "pytest", "--pyargs", "headwatch.claims", "--panel", "published", "-p", "no:randomly",
               "-p", "no:cacheprovider", "-q", "-rA", "-k", "registered or f1_no_bos_head_in_layers_0_1_at_any",
               "--html", "claims.html")
    out = done.stdout
    assert done.returncode == 0, out[-3000:]
    for test in ("test_claim[three_heads-pythia-1b]", "test_claim[three_heads-olmo-1b]",
                 "test_negative_control[three_heads-no_heads]"):
        assert f"PASSED test_registered_claims.py::{test}" in out, out[-3000:]
    page = (researcher / "claims.html").read_text()  # the pytest-html section: its column, its tests' outcomes
    assert "<th>three induction heads</th>" in page and 'data-claim="three_heads"' in page
    assert "1 passed" in page.split('data-claim="three_heads"', 1)[1].split("</td>", 1)[0]
    # --claims: only the chosen claim's tests run
    done = run(researcher, "pytest", "--pyargs", "headwatch.claims", "--panel", "published", "-p", "no:randomly",
               "-p", "no:cacheprovider", "-q", "-rA", "--claims", "three_heads")
    assert done.returncode == 0 and "test_claim[three_heads-pythia-1b]" in done.stdout, done.stdout[-3000:]
    assert "test_f1_" not in done.stdout and "deselected" in done.stdout


@pytest.mark.slow
def test_an_entry_point_claim_is_judged_and_may_be_declared(tmp_path):
    """An installed package (a dist-info folder on the path) listing a claim in the group headwatch.claims."""
    site = tmp_path / "site"
    (site / "userclaims").mkdir(parents=True)
    (site / "userclaims" / "__init__.py").write_text(MY_CLAIMS.replace("three_heads", "three_heads_ep"))
    info = site / "userclaims-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: userclaims\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[headwatch.claims]\nthree_heads_ep = userclaims:CLAIM\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    done = run(tmp_path, "headwatch", "judge", "--panel", "published", "--json", "-", env=env)
    assert done.returncode in (0, 1), done.stderr
    assert all("three_heads_ep" in v for v in json.loads(done.stdout)["models"].values())
    # a panel may declare it a known deviation: its name is known from the metadata before it is imported
    done = run(tmp_path, "python", "-c", "from headwatch.spec import claim_names; print(claim_names())", env=env)
    assert "three_heads_ep" in done.stdout, done.stderr


@pytest.mark.slow
def test_the_population_table_holds_a_registered_claim(researcher):
    script = textwrap.dedent('''
        import my_claims
        from headwatch.claims.population import population_report, population_table
        from headwatch.claims.synthetic_population import SIBLING_ONSETS, planted_population
        report = population_report("planted", planted_population(SIBLING_ONSETS, candidates=[4]))
        print(population_table(report))
        print("K_OF_N", report.claims["three_heads"].key)
        print("PLACED", report.placements["seed4"]["final_heads"].status.value)
    ''')
    done = run(researcher, "python", "-c", script)
    assert done.returncode == 0, done.stderr
    assert "  three_heads" in done.stdout and "K_OF_N 4/4" in done.stdout, done.stdout
    assert "final_heads: median" in done.stdout and "PLACED consistent_not_established" in done.stdout, done.stdout


@pytest.mark.slow
def test_a_judge_that_raises_is_its_claims_crash_and_the_others_are_judged(researcher):
    out = researcher / "verdicts.json"
    done = run(researcher, "headwatch", "judge", "--panel", "published", "--claims-module", "crashing.py",
               "--json", str(out))
    assert done.returncode == 3, done.stderr  # a crash is not a finding (headwatch.cli.EXIT_CODES)
    for verdicts in json.loads(out.read_text())["models"].values():
        assert verdicts["crashes"]["status"] == "crashed" and "ZeroDivisionError" in verdicts["crashes"]["message"]
        assert verdicts["F1"]["status"] == "holds"  # the others judged all the same
    assert "crashed" in done.stderr


def test_a_claim_without_negative_controls_is_refused(researcher):
    with pytest.raises(ClaimError, match="has no negative controls"):
        register_claim(Claim("untested", "t", "?", judge=lambda records, expect, spec, **kw: None))
    assert "untested" not in {c.name for c in all_claims()}


@pytest.mark.slow
def test_a_claims_module_without_negative_controls_is_bad_input(researcher):
    done = run(researcher, "headwatch", "judge", "--panel", "published", "--claims-module", "no_controls.py")
    assert done.returncode == 2 and "has no negative controls" in done.stderr, done.stderr


def test_registration_refuses_a_taken_name_a_bad_name_and_an_unknown_knob():
    control = NegativeControl("x", "x", healthy, HEALTHY_EXPECT)
    judge = lambda records, expect, spec, **kw: None  # noqa: E731 - never called
    with pytest.raises(ClaimError, match="registered already"):
        register_claim(Claim("F1", "t", "?", judge=judge, negative_controls=(control,)))
    with pytest.raises(ClaimError, match="no '@'"):
        register_claim(Claim("F1@step1", "t", "?", judge=judge, negative_controls=(control,)))
    with pytest.raises(ClaimError, match="not sensitivity knobs"):
        register_claim(Claim("mine", "t", "?", judge=judge, reads=("bos_level",), negative_controls=(control,)))


def test_builtins_come_first_in_order():
    names = [c.name for c in all_claims()]
    assert names[:7] == ["formation", "F1", "F2", "F3", "F4", "F5", "causal"]
    assert all(is_builtin(c) for c in all_claims()[:7])


#: The panel key ``[models.expect.formation]`` (the Expectations field), not the claim: the two places
#: that name that key by its field name.
PANEL_KEY_USES = {("headwatch/cli/panels.py", "formation"), ("fixtures/panels/schema.py", "formation")}


def test_no_built_in_claim_is_named_by_string_outside_its_own_modules():
    """A built-in claim's name as a string literal (docstrings aside) appears only in its own module
    (claims/builtin/<claim>.py) and its own test module: everything else looks claims up in the registry."""
    builtins = [c for c in all_claims() if is_builtin(c)]
    names = {c.name for c in builtins}
    own = {name: {sys.modules[c.judge.__module__].__file__, str(ROOT / "claims" / c.test_module)}
           for c in builtins for name in [c.name]}
    places = []
    for folder in ("headwatch", "claims", "fixtures", "probes"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            docs = {id(n.body[0].value) for n in ast.walk(tree)
                    if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                    and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
                    continue
                claim = node.value.split("@", 1)[0]
                if claim in names and str(path) not in {str(Path(p).resolve()) for p in own[claim]} \
                        and (rel, node.value) not in PANEL_KEY_USES:
                    places.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert places == [], "\n".join(places)


def test_a_claims_figures_and_grid_rows_reach_the_report():
    """A claim that declares figures gets them in the model's report; its sensitivity rows (it reads
    the induction threshold) are in the grid; unregistered, it is gone from every list."""
    from types import SimpleNamespace

    from headwatch.claims.figures import Figure
    from headwatch.claims.report_data import model_report, rows_of
    from headwatch.claims.verdict import Status, Verdict

    def judge(records, expect, spec, *, total_tokens=None):
        return Verdict("with_figure", Status.HOLDS, "holds", {"induction": spec.induction}, key="ok")

    claim = register_claim(Claim(
        "with_figure", "a claim with a figure", "?", judge=judge, reads=("induction",),
        figures=lambda records, verdict, model: [Figure("mine", "Mine", f"{model}: {verdict.key}", b"png")],
        negative_controls=(NegativeControl("x", "x", healthy, HEALTHY_EXPECT),)))
    try:
        pm = SimpleNamespace(id="planted", repo="planted/model", panel="test", expect=HEALTHY_EXPECT,
                             total_tokens=None, member=None)
        provider = SimpleNamespace(cached_records=lambda m: (healthy(), []))
        report = model_report(pm, provider, figures=True)
        assert report.figures[-1].name == "mine" and report.figures[-1].caption == "planted: ok"
        assert "with_figure" in rows_of([report]) and report.grid.robust["with_figure"]
        assert {r.knob for r in report.grid.rows if "with_figure" in r.statuses} >= {"induction", "bos"}
    finally:
        unregister_claim(claim.name)
    assert "with_figure" not in {c.name for c in all_claims()}
    with pytest.raises(ClaimError, match="built-in"):
        unregister_claim("F1")
