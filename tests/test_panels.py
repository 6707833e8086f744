"""Panels as data: the shipped files, the schema's errors, selection, and the conftest contract."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headwatch.fixtures.panels import (
    PanelError,
    available_panels,
    default_panels,
    load_panel,
    log_spaced,
    parse_panel,
    select,
)
from headwatch.spec import Deviation, Formation, FormationWindow

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "SPEC.md"

PAPER = {
    "EleutherAI/pythia-1b": ["step1", "step4", "step16", "step64", "step256", "step512", "step3000",
                             "step10000", "step38000", "step143000"],
    "allenai/OLMo-1B-0724-hf": ["step1000-tokens2B", "step2000-tokens4B", "step5000-tokens10B",
                                "step11000-tokens23B", "step25000-tokens52B", "step56000-tokens117B",
                                "step126000-tokens264B", "step285000-tokens597B", "step644000-tokens1350B",
                                "step1454000-tokens3048B"],
    "allenai/OLMoE-1B-7B-0924": ["step5000-tokens20B", "step10000-tokens41B", "step25000-tokens104B",
                                 "step50000-tokens209B", "step100000-tokens419B", "step200000-tokens838B",
                                 "step400000-tokens1677B", "step600000-tokens2516B", "step800000-tokens3355B",
                                 "step1220000-tokens5117B"],
}


def parse(text: str):
    return parse_panel(textwrap.dedent(text), name="t", path=Path("/x/t.toml"))


MINIMAL = """
[[models]]
name = "m"
repo = "org/m"
revisions = ["step1", "step2"]
tokens = { per_step = 10 }
"""


# ---- shipped panels ------------------------------------------------------------------------------


def test_shipped_panels_load():
    assert {"paper", "published", "organisms"} <= set(available_panels())
    for name in available_panels():
        assert load_panel(name).models


def test_paper_panel_is_spec_7():
    panel = load_panel("paper")
    assert {m.repo: list(m.revisions) for m in panel.models} == PAPER
    assert panel.needs_network and panel.needs_gpu
    assert all(m.source == "hub" and m.dtype == "float32" and not m.trust_remote_code for m in panel.models)
    pythia, olmo, olmoe = panel.models
    assert (pythia.expect.bos_shape, olmo.expect.bos_shape, olmoe.expect.bos_shape) == ("ramp", "step", "ramp")
    assert (pythia.expect.dclm, olmo.expect.dclm, olmoe.expect.dclm) == (False, True, True)
    assert pythia.tokens_seen["step3000"] == 3000 * 2_097_152
    assert olmo.tokens_seen["step11000-tokens23B"] == 23e9
    assert olmoe.total_tokens == 5117e9 and olmoe.final_revision == "step1220000-tokens5117B"
    assert pythia.settings_for("step1").n_examples == 2000 and pythia.settings_for("step1").n_pr == 500


def test_paper_panel_matches_spec_text():
    """paper.toml lists exactly docs/SPEC.md §7's revisions."""
    section = SPEC.read_text().split("## 7.")[1].split("## 8.")[0]
    for repo, revisions in PAPER.items():
        block = section.split(repo + ":")[1].split(". 16")[0]
        assert re.findall(r"step\d+(?:-tokens\d+B)?", block) == revisions


def test_published_panel_uses_reference_records():
    panel = load_panel("published")
    assert [m.source for m in panel.models] == ["reference", "reference"]
    assert {m.repo: list(m.revisions) for m in panel.models} == {k: v for k, v in PAPER.items() if "OLMoE" not in k}
    assert not panel.needs_network and not panel.needs_gpu


def test_organisms_panel_schema():
    for m in load_panel("organisms").models:
        assert m.source == "organism" and m.organism.family and isinstance(m.organism.seed, int)
        s = m.settings_for(m.revisions[0])
        assert s.vocab_hi <= 4096 and s.seq_len >= 57  # in-distribution, room for 50 baseline positions


def test_organisms_panel_takes_its_checkpoints_from_the_recipes():
    organisms = pytest.importorskip("headwatch.fixtures.organisms")
    for m in load_panel("organisms").models:
        org = organisms.ORGANISMS[m.organism.family]
        assert m.repo == org.repo_id(m.organism.seed)
        assert list(m.revisions) == org.revisions()
        assert all(m.tokens_seen[r] == org.tokens_seen(r) for r in m.revisions)
        settings = m.settings_for(m.final_revision)
        for f in ("n_examples", "seq_len", "vocab_lo", "vocab_hi", "seed", "n_pr"):
            assert getattr(settings, f) == getattr(org.probe, f), f


def test_an_organism_entry_may_override_its_recipe(tmp_path):
    panel = tmp_path / "p.toml"
    panel.write_text(
        '[panel]\nname = "p"\n[[models]]\nname = "o"\nsource = "organism"\nrevisions = ["step0"]\n'
        '[models.organism]\nfamily = "olmo"\nseed = 3\n[models.probe]\nn_examples = 64\n'
    )
    (m,) = load_panel(str(panel)).models
    assert m.repo.endswith("olmo-seed3") and list(m.revisions) == ["step0"]
    assert m.settings_for("step0").n_examples == 64



def test_the_audit_example_is_a_second_seed_of_a_shipped_organism():
    """docs/examples/audit-seed1.toml (README "Auditing a new seed") parses and names seed 1."""
    organisms = pytest.importorskip("headwatch.fixtures.organisms")
    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "audit-seed1.toml"
    (m,) = load_panel(str(example)).models
    org = organisms.ORGANISMS[m.organism.family]
    assert m.organism.seed == 1 and m.repo == org.repo_id(1) != org.repo_id(0)
    assert list(m.revisions) == org.revisions()
    assert set(m.expect.xfail) == {"F4"}


def test_the_sink_example_declares_its_sinks():
    """docs/examples/sink-organism-seed1.toml: the grown OLMoE, seed 1, with the sink conditions."""
    organisms = pytest.importorskip("headwatch.fixtures.organisms")
    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "sink-organism-seed1.toml"
    (m,) = load_panel(str(example)).models
    org = organisms.ORGANISMS[m.organism.family]
    assert org.recipe.growth is not None and m.repo == org.repo_id(1) == "headwatch-organisms/olmoe-grown-seed1"
    assert list(m.revisions) == org.revisions() and m.total_tokens == org.tokens_seen("step4500")
    f = m.expect.formation
    assert f.min_bos_heads_final == 1 and f.bos_after_induction and f.bos_persists


def test_default_panels_need_neither_network_nor_gpu():
    assert default_panels() == ["organisms", "published"]


# ---- schema errors -------------------------------------------------------------------------------


def test_unknown_panel():
    with pytest.raises(PanelError, match=r"unknown panel 'papr'.*shipped panels: .*paper.*did you mean 'paper'"):
        load_panel("papr")
    with pytest.raises(PanelError, match="does not exist"):
        load_panel("/nowhere/mine.toml")


def test_malformed_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[models]]\nname = 'm\n")
    with pytest.raises(PanelError, match=r"bad\.toml.*is not valid TOML"):
        load_panel(bad)


@pytest.mark.parametrize("text, message", [
    ("[panel]\nname = 'x'\n", "lists no models"),
    (MINIMAL.replace('repo = "org/m"', ""), "missing required key 'repo'"),
    (MINIMAL.replace("revisions", "revisons"), r"unknown key\(s\) revisons.*did you mean 'revisions'"),
    (MINIMAL + "source = 'ftp'\n", "source 'ftp' is not one of"),
    (MINIMAL + "[models.expect]\nbos_shape = 'cliff'\n", "bos_shape: 'cliff' is not one of ramp, step"),
    (MINIMAL + "[models.expect]\ndclm = 'yes'\n", "dclm: expected true or false"),
    (MINIMAL + "[models.expect]\npaper_f4_token = 1e9\n", r"unknown key\(s\) paper_f4_token.*did you mean 'paper_f4_tokens'"),
    (MINIMAL + "[models.probe]\ninduction_threshold = 40\n", r"unknown key\(s\) induction_threshold"),
    (MINIMAL + "[models.probe]\nn_exampels = 5\n", r"unknown key\(s\) n_exampels.*did you mean 'n_examples'"),
    (MINIMAL + "dtype = 'fp8'\n", "dtype: 'fp8' is not one of"),
    (MINIMAL.replace('["step1", "step2"]', '["step1", "step1"]'), "revisions listed twice"),
    (MINIMAL.replace('["step1", "step2"]', "{ log_spaced = 0 }"), "log_spaced must be a positive integer"),
    (MINIMAL.replace('tokens = { per_step = 10 }', "tokens = {}"), "give per_step, from_name = true, or a table"),
    (MINIMAL.replace('name = "m"', 'name = "m m"'), "used in test ids"),
    (MINIMAL + MINIMAL, "model names used twice: m"),
    (MINIMAL.replace('repo = "org/m"', 'repo = "org/m"\nsource = "organism"'), "needs \\[models.organism\\]"),
    # declared deviations name what they expect (issue 11): a bare reason is refused with the table form
    (MINIMAL + "[models.expect.xfail]\nF4 = 'why'\n",
     r"xfail.F4: a declared deviation must say what it expects.*\{ reason = \"\.\.\.\", key = \[lo, hi\] \}"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'why' }\n", "must name what it expects: add key"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { key = [0, 1] }\n", "missing 'reason'"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'r', key = [1, 0] }\n", r"range \[1, 0\] is empty"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'r', key = [1] }\n", r"key: expected \[lo, hi\]"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'r', revisions = ['step9'] }\n", "'step9' is not one of the model's revisions"),
    (MINIMAL + "[models.expect.xfail]\nF1 = { reason = 'r', heads = ['head0'] }\n", "L<layer>_H<head>"),
    (MINIMAL + "[models.expect.xfail]\nF6 = { reason = 'r', key = [0, 1] }\n", "'F6' names no claim"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'r', keys = [0, 1] }\n", r"unknown key\(s\) keys.*did you mean 'key'"),
    (MINIMAL + "[models.expect.xfail]\n\"F1@step7\" = { reason = 'r', heads = ['L0_H0'] }\n", "'step7' is not one of"),
    # formation
    (MINIMAL + "[models.expect.formation]\n", "declares nothing"),
    (MINIMAL + "[models.expect.formation]\nmin_induction_heads_final = 0\n", "must be >= 1"),
    (MINIMAL + "[models.expect.formation]\nmin_top1_final = 2\n", r"lies in \[0, 1\]"),
    (MINIMAL + "[models.expect.formation]\nformed_within = { revisions = ['step1'] }\n", "expected two revisions"),
    (MINIMAL + "[models.expect.formation]\nformed_within = { revisions = ['step1', 'step5'] }\n", "'step5' is not one of"),
    (MINIMAL + "[models.expect.formation]\nformed_within = { fraction = [0.1, 1.5] }\n", r"lie in \[0, 1\]"),
    (MINIMAL + "[models.expect.formation]\nformed_within = { fraction = [0.1, 0.5], revisions = ['step1', 'step2'] }\n",
     "exactly one of revisions or fraction"),
    (MINIMAL + "[models.expect.formation]\nmin_heads = 3\n", r"unknown key\(s\) min_heads"),
    (MINIMAL + "[models.expect.formation]\nmin_bos_heads_final = 0\n", "min_bos_heads_final: must be >= 1"),
    (MINIMAL + "[models.expect.formation]\nbos_after_induction = 'yes'\n", "bos_after_induction.*true or false"),
])
def test_schema_errors_say_what_is_wrong(text, message):
    with pytest.raises(PanelError, match=message):
        parse(text)


# ---- schema features -----------------------------------------------------------------------------


def test_tokens_rules_and_order():
    m = parse(MINIMAL.replace('["step1", "step2"]', '["step20", "step3", "main"]')
              .replace("tokens = { per_step = 10 }", "tokens = { per_step = 10, table = { main = 1e6 } }")).models[0]
    assert m.tokens_seen == {"step20": 200.0, "step3": 30.0, "main": 1e6}
    assert m.sorted_revisions == ["step3", "step20", "main"] and m.final_revision == "main"
    assert m.total_tokens == 1e6
    olmo = parse(MINIMAL.replace("tokens = { per_step = 10 }", "tokens = { from_name = true }")
                 .replace('["step1", "step2"]', '["step5000-tokens20B", "step1-tokens4M"]')).models[0]
    assert olmo.tokens_seen == {"step5000-tokens20B": 20e9, "step1-tokens4M": 4e6}


def test_expectations_and_probe_overrides():
    m = parse(MINIMAL + textwrap.dedent("""
        ablation = "final"
        [models.probe]
        n_examples = 300
        [models.expect]
        bos_shape = "step"
        dclm = true
        paper_f4_tokens = 10e9
        [models.expect.xfail]
        F4 = { reason = "table says 10B, files say 23B", key = [0.005, 0.01] }
        F1 = { reason = "a BOS head", revisions = ["step2"], heads = ["L0_H3"] }
        [models.expect.formation]
        min_induction_heads_final = 3
        formed_within = { revisions = ["step1", "step2"] }
        none_at_first = true
        min_top1_final = 0.5
        min_bos_heads_final = 2
        bos_after_induction = true
        bos_persists = true
    """)).models[0]
    assert m.expect.bos_shape == "step" and m.expect.dclm
    assert m.expect.xfail == {"F4": Deviation("table says 10B, files say 23B", key=(0.005, 0.01)),
                              "F1": Deviation("a BOS head", revisions=("step2",), heads=("L0_H3",))}
    assert m.expect.formation == Formation(3, FormationWindow(revisions=("step1", "step2")), True, 0.5, 2, True, True)
    assert m.expect.declared("F4").expected() == "key in [0.005, 0.01]"
    assert m.expect.paper_f4_tokens == 10e9 and m.expect.min_ratio == 10.0  # the SPEC's bar unless declared
    s1, s2 = m.settings_for("step1"), m.settings_for("step2")
    assert (s1.ablation, s2.ablation) == (False, True)  # ablations at the final revision only
    assert s1.n_examples == 300 and s1.n_pr == 300  # the default n_pr (500) is capped at the batch
    assert m.settings_for("step2", n_examples=50, dtype="float16").n_examples == 50
    assert m.settings_for("step2", dtype="float16").dtype == "float16"


def test_log_spaced_choice():
    branches = [f"step{i}" for i in range(0, 1001)] + ["main"]
    chosen = log_spaced(branches, 5)
    assert chosen[0] == "step0" and chosen[-1] == "step1000" and len(chosen) == 5
    assert chosen == ["step0", "step1", "step10", "step100", "step1000"]
    assert log_spaced(["step1", "step2"], 8) == ["step1", "step2"]


def test_log_spaced_panel_resolved_by_selection():
    panel = parse(MINIMAL.replace('["step1", "step2"]', "{ log_spaced = 3 }"))
    assert panel.models[0].revisions == ()
    [m] = select([panel], list_branches=lambda m: ["step0", "step10", "step100", "step1000", "main"])
    assert m.revisions == ("step0", "step10", "step1000")


def test_selection_filters_and_disambiguates():
    a = parse(MINIMAL)
    b = parse_panel(MINIMAL.replace("org/m", "org/m2"), name="other", path=Path("/x/o.toml"))
    both = select([a, b])
    assert [m.id for m in both] == ["t.m", "other.m"]
    assert [m.repo for m in select([a, b], models=["org/m2"])] == ["org/m2"]
    [m] = select([a], revisions=["step2"])
    assert m.revisions == ("step2",)
    with pytest.raises(PanelError, match=r"unknown revision 'step3'.*did you mean"):
        select([a], revisions=["step3"])
    with pytest.raises(PanelError, match=r"unknown model 'x'"):
        select([a], models=["x"])


# ---- the conftest contract (a subprocess pytest run, as users run it) -----------------------------

DEMO_TEST = """
import json, os
import pytest

pytestmark = pytest.mark.headwatch  # the claim-test contract, outside headwatch.claims

def test_model(model_entry, model_records):
    tokens = [r.tokens_seen for r in model_records]
    assert tokens == sorted(tokens) and len(model_records) == len(model_entry.revisions)
    assert model_entry.expect.bos_shape in ("ramp", "step")

def test_revision(model_entry, revision, revision_record, request):
    assert revision_record.revision == revision and revision in model_entry.revisions
    mark = request.node.get_closest_marker("xdist_group")
    with open(os.environ["DEMO_LOG"], "a") as f:
        f.write(json.dumps([model_entry.id, revision, os.environ.get("PYTEST_XDIST_WORKER"), mark.args[0]]) + "\\n")
"""

DUMP_PLUGIN = """
import json, os
from headwatch.plugin import run_info

def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        with open(os.environ["DEMO_INFO"], "w") as f:
            json.dump(run_info(session.config).to_dict(), f)
"""


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_demo.py").write_text(DEMO_TEST)
    (tmp_path / "demo_dump.py").write_text(DUMP_PLUGIN)
    env = {**os.environ, "DEMO_LOG": str(tmp_path / "log"), "DEMO_INFO": str(tmp_path / "info.json"),
           "PYTHONPATH": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "demo_dump", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), *args, str(tmp_path / "test_demo.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )


def test_contract_ids_groups_and_run_info_under_xdist(tmp_path):
    out = run_pytest(tmp_path, "--panel", "published", "-n", "2", "--dist", "loadgroup", "-q",
                     "--cache-dir", str(tmp_path / "c"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "22 passed" in out.stdout
    rows = [json.loads(line) for line in (tmp_path / "log").read_text().splitlines()]
    assert len(rows) == 20
    assert {(m, r) for m, r, _, _ in rows} == {(m.name, r) for m in load_panel("published").models for r in m.revisions}
    for model in ("pythia-1b", "olmo-1b"):
        assert len({w for m, _, w, _ in rows if m == model}) == 1  # one model, one worker
        assert {g for m, _, _, g in rows if m == model} == {model}
    info = json.loads((tmp_path / "info.json").read_text())
    assert info["panels"] == ["published"] and info["device"] == "auto"
    assert set(info["models"]) == {"pythia-1b", "olmo-1b"}
    assert info["counts"] == {"reference": 20}


def test_contract_test_ids_and_filters(tmp_path):
    out = run_pytest(tmp_path, "--panel", "published", "--collect-only", "-q", "-p", "no:xdist",
                     "--models", "olmo-1b", "--revisions", "step5000-tokens10B,step1454000-tokens3048B")
    assert out.returncode == 0, out.stdout + out.stderr
    ids = re.findall(r"::(test_\w+\[[^\]]+\])", out.stdout)
    assert ids == ["test_model[olmo-1b]", "test_revision[olmo-1b@step5000-tokens10B]",
                   "test_revision[olmo-1b@step1454000-tokens3048B]"]


@pytest.mark.parametrize("args, message", [
    (["--panel", "papr"], "unknown panel 'papr'"),
    (["--panel", "published", "--models", "pythia-2b"], "unknown model 'pythia-2b'"),
    (["--panel", "published", "--revisions", "step3001"], "unknown revision 'step3001'"),
])
def test_contract_bad_options_are_usage_errors(tmp_path, args, message):
    out = run_pytest(tmp_path, "--collect-only", "-q", "-p", "no:xdist", *args)
    assert out.returncode == 4, out.stdout + out.stderr
    assert message in out.stderr


def test_model_scope_of_test_ids():
    from headwatch.fixtures.scheduling import model_scope

    ids = ["pythia-1b", "pythia-1b-deduped", "olmo-1b", "t.m"]
    assert model_scope("c/test_f1.py::test_f1[pythia-1b@step3000]", ids) == "pythia-1b"
    assert model_scope("c/test_f2.py::test_f2[pythia-1b]", ids) == "pythia-1b"
    assert model_scope("c/test_f2.py::test_f2[pythia-1b-deduped@step1]", ids) == "pythia-1b-deduped"
    assert model_scope("c/test_f5.py::test_f5[0.1-olmo-1b]", ids) == "olmo-1b"
    assert model_scope("c/test_f5.py::test_f5[olmo-1b-0.2]", ids) == "olmo-1b"
    assert model_scope("c/test_x.py::test_x[t.m@step2]", ids) == "t.m"
    assert model_scope("c/test_x.py::test_x[xolmo-1b]", ids) is None
    assert model_scope("c/test_x.py::test_x", ids) is None


def test_run_info_merges_worker_reports():
    from headwatch.fixtures.runinfo import EntryInfo, RunInfo

    a, b = RunInfo(panels=["organisms"], device="auto"), RunInfo(panels=["organisms"], device="auto")
    a.add_entry(EntryInfo("m1", "org/m1", "step1", "computed", worker="gw0"))
    a.add_entry(EntryInfo("m1", "org/m1", "step1", "hit", worker="gw0"))  # same entry again: kept once
    b.add_entry(EntryInfo("m2", "org/m2", "step1", "hit", worker="gw1"))
    b.identical_weights.append({"model": "m2", "revisions": ["step1", "step2"], "weights_hash": "ab"})
    merged = RunInfo()
    for w in (a, b):
        merged.merge(json.loads(json.dumps(w.to_dict())))  # what travels through xdist
    assert merged.panels == ["organisms"] and merged.device == "auto"
    assert merged.counts() == {"computed": 1, "hit": 1}
    assert merged.identical_weights == b.identical_weights
