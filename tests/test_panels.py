"""Panels as data: the shipped files, the schema's errors, every value checked when a panel loads,
selection, and the claim-test contract (docs/hostile-inputs.md, "Panel files")."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from headwatch.fixtures import loading
from headwatch.fixtures.panels import (
    PanelError,
    available_panels,
    default_panels,
    load_panel,
    log_spaced,
    parse_panel,
    select,
)
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch.spec import Deviation, Formation, FormationWindow
from headwatch_testing.tinypanel import local_panel_text

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
    organisms = pytest.importorskip("headwatch.model_organisms")
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
    organisms = pytest.importorskip("headwatch.model_organisms")
    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "audit-seed1.toml"
    (m,) = load_panel(str(example)).models
    org = organisms.ORGANISMS[m.organism.family]
    assert m.organism.seed == 1 and m.repo == org.repo_id(1) != org.repo_id(0)
    assert list(m.revisions) == org.revisions()
    assert set(m.expect.xfail) == {"F4"}


def test_the_sink_example_declares_its_sinks():
    """docs/examples/sink-organism-seed1.toml: the grown OLMoE, seed 1, with the sink conditions."""
    organisms = pytest.importorskip("headwatch.model_organisms")
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
    (MINIMAL + "source = 'ftp'\n", "source: 'ftp' is not one of"),
    (MINIMAL + "[models.expect]\nbos_shape = 'cliff'\n", "bos_shape: 'cliff' is not one of ramp, step"),
    (MINIMAL + "[models.expect]\ndclm = 'yes'\n", "dclm: expected true or false"),
    (MINIMAL + "[models.expect]\npaper_f4_token = 1e9\n", r"unknown key\(s\) paper_f4_token.*did you mean 'paper_f4_tokens'"),
    (MINIMAL + "[models.probe]\ninduction_threshold = 40\n", r"unknown key\(s\) induction_threshold"),
    (MINIMAL + "[models.probe]\nn_exampels = 5\n", r"unknown key\(s\) n_exampels.*did you mean 'n_examples'"),
    (MINIMAL + "dtype = 'fp8'\n", "dtype: 'fp8' is not one of"),
    (MINIMAL.replace('["step1", "step2"]', '["step1", "step1"]'), "revisions listed twice"),
    (MINIMAL.replace('["step1", "step2"]', "{ log_spaced = 0 }"), r"log_spaced: got 0; allowed: a positive integer"),
    (MINIMAL.replace('tokens = { per_step = 10 }', "tokens = {}"), "give per_step, from_name = true, or a table"),
    (MINIMAL.replace('name = "m"', 'name = "m m"'), "used in test ids"),
    (MINIMAL + MINIMAL, "model names used twice: m"),
    (MINIMAL.replace('repo = "org/m"', 'repo = "org/m"\nsource = "organism"'), "needs \\[models.organism\\]"),
    # declared deviations name what they expect (issue 11): a bare reason is refused with the table form
    (MINIMAL + "[models.expect.xfail]\nF4 = 'why'\n",
     r"xfail.F4: expected a table naming what the deviation looks like, not only why: "
     r"\{ reason = \"\.\.\.\", key = \[lo, hi\] \}"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'why' }\n", "must name what it expects: add key"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { key = [0, 1] }\n", "missing required key 'reason': why the deviation is expected"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'r', key = [1, 0] }\n", r"range \[1, 0\] is empty"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'r', key = [1] }\n", r"key: expected \[lo, hi\]"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'r', revisions = ['step9'] }\n", "'step9' is not one of the model's revisions"),
    (MINIMAL + "[models.expect.xfail]\nF1 = { reason = 'r', heads = ['head0'] }\n", "L<layer>_H<head>"),
    (MINIMAL + "[models.expect.xfail]\nF6 = { reason = 'r', key = [0, 1] }\n", "'F6' names no claim"),
    (MINIMAL + "[models.expect.xfail]\nF4 = { reason = 'r', keys = [0, 1] }\n", r"unknown key\(s\) keys.*did you mean 'key'"),
    (MINIMAL + "[models.expect.xfail]\n\"F1@step7\" = { reason = 'r', heads = ['L0_H0'] }\n", "'step7' is not one of"),
    # formation
    (MINIMAL + "[models.expect.formation]\n", "declares nothing"),
    (MINIMAL + "[models.expect.formation]\nmin_induction_heads_final = 0\n", "allowed: an integer >= 1"),
    (MINIMAL + "[models.expect.formation]\nmin_top1_final = 2\n", r"lies in \[0, 1\]"),
    (MINIMAL + "[models.expect.formation]\nformed_within = { revisions = ['step1'] }\n", "expected two revisions"),
    (MINIMAL + "[models.expect.formation]\nformed_within = { revisions = ['step1', 'step5'] }\n", "'step5' is not one of"),
    (MINIMAL + "[models.expect.formation]\nformed_within = { fraction = [0.1, 1.5] }\n", r"lie in \[0, 1\]"),
    (MINIMAL + "[models.expect.formation]\nformed_within = { fraction = [0.1, 0.5], revisions = ['step1', 'step2'] }\n",
     "exactly one of revisions or fraction"),
    (MINIMAL + "[models.expect.formation]\nmin_heads = 3\n", r"unknown key\(s\) min_heads"),
    (MINIMAL + "[models.expect.formation]\nmin_bos_heads_final = 0\n", "min_bos_heads_final: got 0; allowed: an integer >= 1"),
    (MINIMAL + "[models.expect.formation]\nbos_after_induction = 'yes'\n", "bos_after_induction.*true or false"),
])
def test_schema_errors_say_what_is_wrong(text, message):
    with pytest.raises(PanelError, match=message):
        parse(text)


# ---- every panel value is checked by the one rule set when the panel loads (docs/hostile-inputs.md, "Panel files") ----


REFERENCE = """\
[panel]
name = "p"
[[models]]
name = "pythia-1b"
repo = "EleutherAI/pythia-1b"
source = "reference"
revisions = ["step1", "step256", "step3000", "step143000"]
{tokens}
{model}
[models.expect]
{expect}
"""


#: (where the bad value goes, the TOML, what the message must name)
BAD_VALUES = {
    "per_step negative": ("tokens", "tokens = { per_step = -2097152 }", "per_step"),
    "per_step zero": ("tokens", "tokens = { per_step = 0 }", "per_step"),
    "per_step nan": ("tokens", "tokens = { per_step = nan }", "per_step"),
    "table negative": ("tokens", "tokens = { table = { step1 = -5, step256 = 1, step3000 = 2, step143000 = 3 } }", "table"),
    "step_pattern not a regex": ("tokens", 'tokens = { per_step = 1, step_pattern = "step(" }', "step_pattern"),
    "step_pattern without group": ("tokens", 'tokens = { per_step = 1, step_pattern = "step\\\\d+" }', "step_pattern"),
    "step_pattern of letters": ("tokens", 'tokens = { per_step = 1, step_pattern = "(step)" }', "step_pattern"),
    "total_tokens negative": ("model", "total_tokens = -5", "total_tokens"),
    "hub_cache_dir not a string": ("model", "hub_cache_dir = 5", "hub_cache_dir"),
    "attn_implementation unknown": ("model", 'attn_implementation = "flash"', "attn_implementation"),
    "description not a string": ("model", "description = 5", "description"),
    "f3_min_ratio negative": ("expect", "f3_min_ratio = -1", "f3_min_ratio"),
    "f4_max_fraction above 1": ("expect", "f4_max_fraction = 2", "f4_max_fraction"),
    "f4_max_fraction nan": ("expect", "f4_max_fraction = nan", "f4_max_fraction"),
    "causal_reading unknown": ("expect", 'causal_reading = "copy"', "causal_reading.*copyable"),
}


#: Probe values in a local panel: (the TOML line, what the message must name).
BAD_PROBES = {
    "string": ('seq_len = "64"', "seq_len"),
    "float": ("n_examples = 16.5", "n_examples"),
    "n_pr 0": ("n_pr = 0", "n_pr"),
    "n_pr above n": ("n_pr = 32", "n_pr"),
    "seq_len 10": ("seq_len = 10", "seq_len"),
    "vocab 3 ids": ("vocab_hi = 13", "valid"),
    "batch 0": ("batch_size = 0", "batch_size"),
    "seed negative": ("seed = -1", "seed"),
    "ablation string": ('ablation = "yes"', "ablation"),
    "dtype": ('dtype = "float64"', "dtype"),
    "copy_half 1": ("copy_half = 1", "copy_half"),
    "copy_sequences negative": ("copy_sequences = -1", "copy_sequences"),
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def reference_panel(tmp_path, tokens="tokens = { per_step = 2097152 }", model="", expect='bos_shape = "ramp"') -> Path:
    return _write(tmp_path, REFERENCE.format(tokens=tokens, model=model, expect=expect))


def local_panel(tmp_path, root, probe="", model="") -> Path:
    return _write(tmp_path, local_panel_text(root, panel_name="p", model_lines=model, probe_lines=probe))


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_panel_values_are_refused_with_what_is_allowed(case, tmp_path):
    where, toml, names = BAD_VALUES[case]
    path = reference_panel(tmp_path, **{where: toml})
    with pytest.raises(PanelError, match=names.replace("\\", "\\\\")):
        load_panel(str(path))


@pytest.mark.parametrize("case", sorted(BAD_PROBES))
def test_probe_values_in_a_panel_are_refused(case, tmp_path, local_run):
    toml, names = BAD_PROBES[case]
    with pytest.raises(PanelError, match=names):
        load_panel(str(local_panel(tmp_path, local_run, probe=toml)))


@pytest.mark.parametrize("text, names", [
    ('[panel]\nname = 5\n[[models]]\nname = "m"\nrepo = "o/m"\nsource = "reference"\n', "name"),
    ('[panel]\nname = ""\n[[models]]\nname = "m"\nrepo = "o/m"\nsource = "reference"\n', "name"),
    ('[panel]\nname = "p"\n[[models]]\nname = "m"\nrepo = "o/m"\nsource = "reference"\nrevisions = []\n', "empty"),
    ('[panel]\nname = "p"\n[[models]]\nname = "m"\nrepo = "o/m"\nsource = "reference"\nrevisions = ["a", ""]\n', "revisions"),
    ('[[models]]\nname = "o"\nsource = "organism"\n[models.organism]\nfamily = "olmo"\nseed = -1\n', "seed"),
    ('[[models]]\nname = "o"\nsource = "organism"\n[models.organism]\nfamily = "olmo"\ncache_dir = 5\n', "cache_dir"),
    ('[[models]]\nname = "t"\nrepo = "nowhere/runs"\nsource = "local"\nrevisions = ["step0"]\ntokens = { per_step = 1 }\n', "no folder"),
])
def test_panel_structure_is_refused(text, names, tmp_path):
    with pytest.raises(PanelError, match=names):
        load_panel(str(_write(tmp_path, text)))


def test_tokens_must_follow_for_every_revision_and_total_must_cover_them(tmp_path, local_run):
    """An unknown token count sorted a revision last; a short total put revisions past the end of training."""
    no_rule = local_panel_text(local_run, panel_name="p").replace("{ per_step = 1000 }", "{ from_name = true }")
    with pytest.raises(PanelError, match="cannot tell the tokens"):
        load_panel(str(_write(tmp_path, no_rule)))
    with pytest.raises(PanelError, match="total_tokens"):
        load_panel(str(local_panel(tmp_path, local_run, model="total_tokens = 500")))


def test_a_panel_that_is_not_a_file_or_not_text_is_named(tmp_path):
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(PanelError, match="folder"):
        load_panel(str(tmp_path / "folder.toml"))
    (tmp_path / "latin.toml").write_bytes(b'[panel]\nname = "caf\xe9"\n')
    with pytest.raises(PanelError, match="UTF-8"):
        load_panel(str(tmp_path / "latin.toml"))


@pytest.mark.parametrize("probe, names", [("vocab_hi = 400", "300 ids"), ("seq_len = 600", "512 positions")])
def test_model_dependent_panel_settings_error_before_the_weights(probe, names, tmp_path, local_run, monkeypatch):
    """A panel's settings that do not fit its model are refused from config.json, no weights loaded."""
    def load(*args, **kwargs):
        raise AssertionError("weights were loaded before the settings were checked against the config")

    monkeypatch.setattr(loading, "load_checkpoint", load)
    (pm,) = load_panel(str(local_panel(tmp_path, local_run, probe=probe))).models
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "cache", progress=False))
    with pytest.raises(ValueError, match=names):  # headwatch.validation.InputError
        provider.revision_record(pm, "step0")


def test_a_correct_local_panel_still_runs(tmp_path, local_run):
    (pm,) = load_panel(str(local_panel(tmp_path, local_run))).models
    records = Provider(ProviderOptions(cache_dir=tmp_path / "cache", progress=False)).model_records(pm)
    assert [r.revision for r in records] == ["step0", "step100"]
    assert all(r.settings.n_pr == 16 and r.n_examples_valid == 16 for r in records)


def test_the_reference_templates_parse(tmp_path):
    """The valid templates above are valid: each refusal is the bad value's doing."""
    assert load_panel(str(reference_panel(tmp_path))).models
    text = textwrap.dedent(REFERENCE.format(tokens="tokens = { per_step = 2097152 }", model="", expect=""))
    assert load_panel(str(_write(tmp_path, text))).models


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
