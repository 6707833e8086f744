"""Panel values are checked against the one rule set when the panel loads, before anything runs.

Catalogue: docs/hostile-inputs.md, "Panel files". On main's code (before issue 14) a negative
``per_step`` reversed a trajectory, ``revisions = []`` showed up as failed claims, a bad
``step_pattern`` or a non-string panel name crashed pytest with INTERNALERROR, and string or float
probe values failed later in nine tests with a raw TypeError.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from headwatch.fixtures import loading
from headwatch.fixtures.panels import PanelError, load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch_testing.tinypanel import local_panel_text, save_local_run

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
    "xfail names no claim": ("expect", 'xfail = { F9 = "why" }', "F9"),
    "xfail names no revision": ("expect", 'xfail = { "F1@step999" = "why" }', "step999"),
    "xfail without a reason": ("expect", 'xfail = { F4 = "" }', "F4"),
    "f3_min_ratio negative": ("expect", "f3_min_ratio = -1", "f3_min_ratio"),
    "f4_max_fraction above 1": ("expect", "f4_max_fraction = 2", "f4_max_fraction"),
    "f4_max_fraction nan": ("expect", "f4_max_fraction = nan", "f4_max_fraction"),
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
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def reference_panel(tmp_path, tokens="tokens = { per_step = 2097152 }", model="", expect='bos_shape = "ramp"') -> Path:
    return _write(tmp_path, REFERENCE.format(tokens=tokens, model=model, expect=expect))


@pytest.fixture(scope="module")
def run_root(tmp_path_factory) -> Path:
    return save_local_run(tmp_path_factory.mktemp("run"))


def local_panel(tmp_path, root, probe="", model="") -> Path:
    return _write(tmp_path, local_panel_text(root, panel_name="p", model_lines=model, probe_lines=probe))


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_panel_values_are_refused_with_what_is_allowed(case, tmp_path):
    where, toml, names = BAD_VALUES[case]
    path = reference_panel(tmp_path, **{where: toml})
    with pytest.raises(PanelError, match=names.replace("\\", "\\\\")):
        load_panel(str(path))


@pytest.mark.parametrize("case", sorted(BAD_PROBES))
def test_probe_values_in_a_panel_are_refused(case, tmp_path, run_root):
    toml, names = BAD_PROBES[case]
    with pytest.raises(PanelError, match=names):
        load_panel(str(local_panel(tmp_path, run_root, probe=toml)))


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


def test_tokens_must_follow_for_every_revision_and_total_must_cover_them(tmp_path, run_root):
    """An unknown token count sorted a revision last; a short total put revisions past the end of training."""
    no_rule = local_panel_text(run_root, panel_name="p").replace("{ per_step = 1000 }", "{ from_name = true }")
    with pytest.raises(PanelError, match="cannot tell the tokens"):
        load_panel(str(_write(tmp_path, no_rule)))
    with pytest.raises(PanelError, match="total_tokens"):
        load_panel(str(local_panel(tmp_path, run_root, model="total_tokens = 500")))


def test_a_panel_that_is_not_a_file_or_not_text_is_named(tmp_path):
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(PanelError, match="folder"):
        load_panel(str(tmp_path / "folder.toml"))
    (tmp_path / "latin.toml").write_bytes(b'[panel]\nname = "caf\xe9"\n')
    with pytest.raises(PanelError, match="UTF-8"):
        load_panel(str(tmp_path / "latin.toml"))


@pytest.mark.parametrize("probe, names", [("vocab_hi = 400", "300 ids"), ("seq_len = 600", "512 positions")])
def test_model_dependent_panel_settings_error_before_the_weights(probe, names, tmp_path, run_root, monkeypatch):
    """A panel's settings that do not fit its model are refused from config.json, no weights loaded."""
    def load(*args, **kwargs):
        raise AssertionError("weights were loaded before the settings were checked against the config")

    monkeypatch.setattr(loading, "load_checkpoint", load)
    (pm,) = load_panel(str(local_panel(tmp_path, run_root, probe=probe))).models
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "cache", progress=False))
    with pytest.raises(ValueError, match=names):  # headwatch.validation.InputError
        provider.revision_record(pm, "step0")


def test_a_correct_local_panel_still_runs(tmp_path, run_root):
    (pm,) = load_panel(str(local_panel(tmp_path, run_root))).models
    records = Provider(ProviderOptions(cache_dir=tmp_path / "cache", progress=False)).model_records(pm)
    assert [r.revision for r in records] == ["step0", "step100"]
    assert all(r.settings.n_pr == 16 and r.n_examples_valid == 16 for r in records)


def test_shipped_panels_pass_every_rule():
    for name in ("published", "organisms", "paper"):
        assert load_panel(name).models
    example = Path(__file__).resolve().parents[1] / "docs" / "examples" / "audit-seed1.toml"
    assert load_panel(str(example)).models


def test_the_reference_templates_parse(tmp_path):
    """The valid templates above are valid: each refusal is the bad value's doing."""
    assert load_panel(str(reference_panel(tmp_path))).models
    text = textwrap.dedent(REFERENCE.format(tokens="tokens = { per_step = 2097152 }", model="", expect=""))
    assert load_panel(str(_write(tmp_path, text))).models
