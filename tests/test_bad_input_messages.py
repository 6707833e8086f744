"""What a user is told about input that headwatch refuses (issue 35, round five): each message names
what was found and what to do, the exit status is bad input (2), never an internal error (3), and
nothing is judged on input that contradicts itself.

Beside these: the converter's refusals (tests/test_reference.py), damaged pickles
(tests/test_pickle_weights.py), a read-only or damaged measurement cache (tests/test_cache.py).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from headwatch.fixtures import reference
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions, measurement_key
from headwatch.fixtures.cache import CorruptCacheEntry, MeasurementCache
from headwatch.probes.record import MeasurementRecord
from headwatch.validation import InputError, check_settings_for_model
from headwatch.claims.synthetic import planted_record
from headwatch.probes.record import ProbeSettings

PYTHIA_DIR = reference.PUBLISHED_DIR / "EleutherAI--pythia-1b"

REF_PANEL = """\
[panel]
name = "messages"
[[models]]
name = "pythia-1b"
repo = "EleutherAI/pythia-1b"
source = "reference"
revisions = ["step1", "step256", "step3000", "step143000"]
tokens = { per_step = 2097152 }
[models.expect]
bos_shape = "ramp"
"""


def refused(r, *says: str) -> None:
    """A CLI result: exit 2 (bad input), no traceback, a message holding each of ``says``."""
    assert r.code == 2, (r.code, r.err[-2000:])
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err[-2000:]
    for s in says:
        assert s in r.err, r.err[-2000:]


@pytest.mark.parametrize("command", ["organisms train", "report --out", "measure-panel --log-dir"])
def test_a_regular_file_where_a_folder_is_expected_is_called_one(tmp_path, headwatch_cli, never_trains,
                                                                  local_panel_file, command):
    """It was described as "exists and is not a regular file"."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    argv = {"organisms train": ["organisms", "train", "--family", "olmo", "--organisms-cache-dir", afile],
            "report --out": ["report", "--panel", "published", "--no-figures", "--out", afile],
            "measure-panel --log-dir": ["measure-panel", "--panel", local_panel_file, "--device", "cpu",
                                        "--log-dir", afile]}[command]
    r = headwatch_cli(*argv)
    refused(r, str(afile), "a regular file, not a folder")
    assert "not a regular file" not in r.err and afile.read_text() == "x"


def test_a_report_output_colliding_with_a_file_is_named(tmp_path, headwatch_cli, monkeypatch):
    """A file where the report puts a model's figures (``OUT/<model>/``) ended in FileExistsError (exit 3)."""
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "rep"
    out.mkdir()
    (out / "pythia-1b").write_text("the user's own file")
    r = headwatch_cli("report", "--panel", "published", "--models", "pythia-1b", "--out", out)
    refused(r, str(out / "pythia-1b"), "is a regular file where a folder is needed")
    assert (out / "pythia-1b").read_text() == "the user's own file"


def test_a_panel_file_starting_with_a_bom_is_read(tmp_path):
    """Some editors start a UTF-8 file with a byte order mark; TOML has no use for it."""
    plain, bom = tmp_path / "plain.toml", tmp_path / "bom.toml"
    plain.write_text(REF_PANEL, encoding="utf-8")
    bom.write_text(REF_PANEL, encoding="utf-8-sig")
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf")
    def seen(path: Path) -> list:
        return [(m.name, m.repo, m.revisions, m.tokens_rule, m.expect) for m in load_panel(path).models]

    assert seen(bom) == seen(plain)


@pytest.mark.parametrize("key, value", [("vocab_size", -5), ("vocab_size", 0), ("max_position_embeddings", -1),
                                        ("vocab_size", "300"), ("vocab_size", True)])
def test_a_config_with_sizes_no_model_has_is_named(key, value):
    """``vocab_size = -5`` answered "allowed: <= -5", as if the probe setting were wrong."""
    with pytest.raises(InputError) as e:
        check_settings_for_model(ProbeSettings(), {"vocab_size": 50000, "max_position_embeddings": 2048, key: value},
                                 "org/m@step1")
    assert f"its config says {key} = {value!r}" in str(e.value) and "allowed: <=" not in str(e.value)


def test_measure_names_a_config_with_a_negative_vocabulary(tmp_path, checkpoint, headwatch_cli):
    folder = tmp_path / "step0"
    shutil.copytree(checkpoint, folder)
    config = json.loads((folder / "config.json").read_text())
    config["vocab_size"] = -5
    (folder / "config.json").write_text(json.dumps(config))
    r = headwatch_cli("measure", "--model", folder, "--out", tmp_path / "o.json", "--n-examples", "8", "--n-pr", "8",
                      "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300", "--device", "cpu")
    refused(r, "vocab_size = -5", "config.json")
    assert "allowed: <= -5" not in r.err and not (tmp_path / "o.json").exists()


@pytest.fixture
def reference_dir(tmp_path) -> Path:
    shutil.copytree(PYTHIA_DIR, tmp_path / "ref" / PYTHIA_DIR.name)
    return tmp_path / "ref"


def test_a_record_of_other_heads_among_a_models_records_is_refused(reference_dir, headwatch_cli):
    """A 500 x 100-head record among the 16 x 8-head records of Pythia was judged without a word."""
    step256 = json.loads((PYTHIA_DIR / "step256.json").read_text())
    odd = planted_record("step256", step256["tokens_seen"], model=step256["model"], n_layers=500, n_heads=100)
    odd.to_json(reference_dir / PYTHIA_DIR.name / "step256.json")
    for argv in (["judge", "--reference-dir", reference_dir],
                 ["judge", "--panel", "published", "--models", "pythia-1b", "--reference-dir", reference_dir]):
        refused(headwatch_cli(*argv), "do not all have the same heads", "9 have 16 layers x 8 heads",
                "step256 (500 x 100)")


def test_records_of_one_geometry_pass():
    recs = [planted_record(f"step{i}", i + 1) for i in range(3)]
    from headwatch.probes.record import refuse_mixed_geometry

    refuse_mixed_geometry(recs, "model m")  # the control: nothing raised
    recs[1] = planted_record("step1", 2, n_layers=3)
    with pytest.raises(InputError, match=r"model m: its records do not all have the same heads"):
        refuse_mixed_geometry(recs, "model m")


@pytest.mark.parametrize("edit, says", [
    ("tokens = { per_step = 1 }", "gives 1 for 'step1'"),
    ("tokens = { per_step = 2097152 }\ntotal_tokens = 1000", "beyond 100% of training"),
])
def test_a_token_rule_that_contradicts_the_records_is_refused(tmp_path, headwatch_cli, edit, says):
    """A per_step the records contradict reported F4 at 879923% of training."""
    panel = tmp_path / "p.toml"
    panel.write_text(REF_PANEL.replace("tokens = { per_step = 2097152 }", edit))
    r = headwatch_cli("judge", "--panel", panel)
    refused(r, "EleutherAI/pythia-1b@step1 records 2.097e+06 tokens seen", says)
    assert "F4" not in r.out


def test_a_missing_revision_is_named_though_later_published_ones_exceed_the_panels_run(tmp_path, headwatch_cli):
    """Only the revisions a panel judges are held to its run's total: a panel of step1 and a step2 the
    published files lack is refused naming step2, not for step4's tokens, which it never judges."""
    panel = tmp_path / "p.toml"
    panel.write_text(REF_PANEL.replace('"step1", "step256", "step3000", "step143000"', '"step1", "step2"'))
    r = headwatch_cli("judge", "--panel", panel)
    refused(r, "step2")
    assert "beyond 100% of training" not in r.err
    # the control: a judged revision beyond the run's total is still refused
    panel.write_text(REF_PANEL.replace('"step1", "step256", "step3000", "step143000"', '"step1", "step4"')
                     .replace("tokens = { per_step = 2097152 }", "tokens = { per_step = 2097152 }\ntotal_tokens = 4194304"))
    refused(headwatch_cli("judge", "--panel", panel), "step4 records 8.389e+06 tokens seen", "beyond 100% of training")


def test_a_token_rule_that_agrees_with_the_records_is_judged(tmp_path, headwatch_cli):
    panel = tmp_path / "p.toml"
    panel.write_text(REF_PANEL)
    r = headwatch_cli("judge", "--panel", panel)
    assert r.code in (0, 1) and "F4" in r.out, r.err[-2000:]


def test_measured_records_take_the_panels_tokens(local_panel_file):
    """A cached measurement keeps the count of the rule it was measured under; the panel's rule now
    is what places it (tokens are not measured), where a record read from a file must agree."""
    pm = load_panel(local_panel_file).models[0]
    stale = planted_record("step100", 123.0, model=pm.repo)
    (filled,) = reference.fill_tokens([stale], pm, measured=True)
    assert filled.tokens_seen == pm.tokens_rule.tokens("step100") != 123.0
    with pytest.raises(reference.TokensContradiction, match="gives"):
        reference.fill_tokens([planted_record("step100", 123.0, model=pm.repo)], pm)


def test_the_report_names_a_corrupt_cache_entry(tmp_path, local_panel_file, headwatch_cli):
    """A revision whose entry cannot be read is named with the file, not listed as never measured."""
    pm = load_panel(local_panel_file).models[0]
    options = ProviderOptions(cache_dir=tmp_path / "cache", device="cpu", progress=False)
    cache = MeasurementCache(options.measurement_dir)
    paths = {}
    for i, rev in enumerate(pm.revisions):
        rec = planted_record(rev, pm.tokens_rule.tokens(rev), model=pm.repo)
        paths[rev] = cache.write_entry(measurement_key(pm, rev, f"identity-{i}", options), rec)
    records, missing = Provider(options).cached_records(pm)
    assert [r.revision for r in records] == list(pm.sorted_revisions) and not missing  # the control
    broken = paths[pm.revisions[-1]]
    broken.write_text("{ torn")
    with pytest.raises(CorruptCacheEntry, match=f"its measurement cache entry {broken} cannot be read"):
        Provider(options).cached_records(pm)
    r = headwatch_cli("report", "--panel", local_panel_file, "--cache-dir", tmp_path / "cache", "--no-figures",
                      "--out", tmp_path / "rep")
    assert r.code == 2 and str(broken) in r.out + r.err and "Traceback" not in r.err, r.err[-2000:]
    assert broken.read_text() == "{ torn"  # the report measures and moves nothing


@pytest.mark.slow
def test_a_complete_cache_on_a_read_only_mount_is_judged(tmp_path, local_panel_file, headwatch_cli, read_only_tree):
    """``headwatch judge`` and the claim tests read a complete cache on a read-only mount (both refused
    it as "not writable"); nothing is measured again, nothing written."""
    import subprocess
    import sys

    from headwatch import plugin

    cache = tmp_path / "cache"
    first = headwatch_cli("judge", "--panel", local_panel_file, "--cache-dir", cache)
    assert first.code in (0, 1), first.err[-2000:]
    read_only_tree(cache)
    again = headwatch_cli("judge", "--panel", local_panel_file, "--cache-dir", cache)
    assert again.code == first.code and "F1" in again.out, again.err[-2000:]  # a miss would be refused: cannot keep it
    run = subprocess.run([sys.executable, "-m", "pytest", str(plugin.CLAIMS_DIR), "-q", "-n", "0", "-p", "no:cacheprovider",
                          "--panel", str(local_panel_file), "--cache-dir", str(cache), "-k", "F1"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and " passed" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]


def test_a_damaged_training_log_is_named(tmp_path):
    """An organism's log.json is read through the bounded reader: damage is named, never a traceback."""
    from headwatch.model_organisms.train import TrainLog

    log = tmp_path / "log.json"
    for damage in ("{ torn", '{"family": "olmo"}', "[1, 2]"):
        log.write_text(damage)
        with pytest.raises(InputError, match=f"training log {log} cannot be read"):
            TrainLog.load(log)


def test_the_hostile_inputs_tool_never_removes_a_folder_it_did_not_make(tmp_path):
    """``hostile_inputs.py base DIR`` used to remove DIR whole when it held no finished base."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("hostile_inputs", root / "tools" / "hostile_inputs.py")
    tool = importlib.util.module_from_spec(spec)
    sys.modules["hostile_inputs"] = tool
    spec.loader.exec_module(tool)
    (tmp_path / "mine.txt").write_text("a user's file")
    with pytest.raises(SystemExit, match="did not make"):
        tool.build_base(tmp_path, sys.executable)
    assert (tmp_path / "mine.txt").read_text() == "a user's file"
