"""``headwatch judge``: the verdicts it prints and writes are the claim tests' judge's."""
from __future__ import annotations

import json

import pytest

from headwatch.claims.judge import judge_model
from headwatch.claims.registry import all_claims
from headwatch.claims.registry import negative_controls
from headwatch.claims.synthetic import healthy
from headwatch.claims.verdict import Verdict
from headwatch.fixtures.reference import PUBLISHED_DIR, load_published, model_slug

#: The built-in claims (the gate, formation, apart), in report order.
CLAIMS = [c.name for c in all_claims() if not c.gate]


def write_records(records_by_model, dest) -> None:
    """A converted folder: ``dest/<org--name>/<revision>.json``."""
    for model, records in records_by_model.items():
        for r in records:
            r.to_json(dest / model_slug(model) / f"{r.revision}.json")


def judge(*argv: str) -> int:
    """``headwatch judge ARGV`` as a user runs it (exit codes included)."""
    from headwatch.cli import main

    return main(["judge", *argv])


def test_published_panel_verdicts_json(tmp_path, capsys):
    out = tmp_path / "verdicts.json"
    assert judge("--panel", "published", "--json", str(out)) == 0
    data = json.loads(out.read_text())
    assert sorted(data["models"]) == ["EleutherAI/pythia-1b", "allenai/OLMo-1B-0724-hf"]
    olmo = data["models"]["allenai/OLMo-1B-0724-hf"]
    assert set(CLAIMS) <= set(olmo)
    assert olmo["F2"]["details"]["shape"] == "step" and olmo["F3"]["details"]["ratio"] == pytest.approx(11.478, abs=1e-3)
    # the vocabulary: OLMo's F3 passes at the point (11.5x) but the revision grid allows (5.09, 26.4)
    assert olmo["F3"]["status"] == "consistent_not_established" and olmo["F3"]["status_words"] == "consistent, not established"
    assert olmo["F3"]["key"] == "11.5x (5.09, 26.4)" and olmo["F3"]["margin"] == pytest.approx(1.478, abs=1e-3)
    assert olmo["F3"]["figure"]["interval"] == pytest.approx([5.087, 26.4], abs=1e-3)
    assert olmo["F1"]["figure"]["method"] == "no interval: published means"
    assert data["models"]["EleutherAI/pythia-1b"]["F3"]["status"] == "not_applicable"  # not DCLM
    # causal p-values keep significant digits (1 vs 27 of 2000: p ~ 1e-7 must not print as 0)
    pythia = data["models"]["EleutherAI/pythia-1b"]["causal"]
    assert pythia["status"] == "consistent_not_established" and pythia["details"]["p_vs_random"] == pytest.approx(0.1002, abs=5e-4)
    assert 1e-8 < olmo["causal"]["details"]["p_vs_random"] < 1e-6
    # the key figure (share of baseline) carries the bar's exact test: 1 vs 20 of 2000, p = 0.0576 (issue 33)
    assert olmo["causal"]["status"] == "holds" and olmo["causal"]["figure"]["p_value"] == 0.04595  # issue 43: was 0.05765
    assert olmo["causal"]["details"]["p_vs_bar"] == olmo["causal"]["figure"]["p_value"]
    # the same judge as the tests
    from headwatch.fixtures.panels import load_panel

    entry = load_panel("published").model("olmo-1b")
    direct = judge_model(load_published(entry.repo), entry.expect, entry.total_tokens)
    assert {c: json.loads(json.dumps(v.to_dict())) for c, v in direct.items()} == olmo
    assert {c: Verdict.from_dict(d) for c, d in olmo.items()} == direct  # one JSON form, both ways
    printed = capsys.readouterr().out
    assert "F3        consistent, not established 11.5x (5.09, 26.4)" in printed and "264B / 23B = 11.5" in printed


def test_reference_dir_matches_panel_entries_by_repo_id(capsys):
    assert judge("--reference-dir", str(PUBLISHED_DIR), "--models", "olmo-1b") == 0
    out = capsys.readouterr().out
    assert "allenai/OLMo-1B-0724-hf (olmo-1b, panel published)" in out and "pythia" not in out


def test_unknown_model_is_judged_without_expectations_and_failures_set_the_exit_code(tmp_path, capsys):
    write_records({"planted/model": negative_controls()["bos_head_in_layer_0"].records()}, tmp_path)
    out = tmp_path / "v.json"
    assert judge("--reference-dir", str(tmp_path), "--json", str(out)) == 1
    v = json.loads(out.read_text())["models"]["planted/model"]
    assert v["F1"]["status"] == "fails" and v["F1"]["details"]["violations"][0]["heads"] == ["L0_H1"]
    assert v["F2"]["status"] == v["F3"]["status"] == "not_applicable"  # no panel entry: no expectations
    assert "F1        fails" in capsys.readouterr().out


def test_healthy_planted_model_exits_zero(tmp_path):
    write_records({"planted/model": healthy()}, tmp_path)
    assert judge("--reference-dir", str(tmp_path)) == 0


def test_a_reference_dir_that_holds_no_records_says_what_it_should_hold(tmp_path, capsys):
    """(A missing folder and an unknown panel: test_cli.py's exit codes.)"""
    assert judge("--reference-dir", str(tmp_path)) == 2  # an empty folder
    assert "no converted measurement records" in capsys.readouterr().err
    (tmp_path / "x_mechinterp_step1.json").write_text("{}")
    assert judge("--reference-dir", str(tmp_path)) == 2  # the author's own format: convert it first
    assert "tools/convert_reference.py convert" in capsys.readouterr().err


def test_models_filter_happens_before_anything_is_measured(tmp_path, capsys):
    """An unselected organism must not be trained or measured just to be filtered out afterwards."""
    from headwatch.cli import main

    code = main(["judge", "--panel", "organisms", "--models", "no-such-model,other", "--cache-dir", str(tmp_path)])
    assert code == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err
    assert not any(tmp_path.rglob("*.json"))


def test_json_dash_writes_the_verdicts_to_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert judge("--json", "-", "--models", "olmo-1b") == 0
    out, err = capsys.readouterr()
    data = json.loads(out)  # stdout is the JSON alone; the verdict lines went to stderr
    assert list(data["models"]) == ["allenai/OLMo-1B-0724-hf"] and data["models"]["allenai/OLMo-1B-0724-hf"]["F4"]["status"] == "holds"
    assert "F4        holds" in err
    assert not (tmp_path / "-").exists()


def test_a_deviation_that_fails_otherwise_than_declared_sets_the_exit_code(tmp_path, capsys):
    """Declared F1 at heads L0_H0, measured L0_H1: news, exit 1; declared as measured: exit 0."""
    write_records({"planted/model": negative_controls()["bos_head_in_layer_0"].records()}, tmp_path / "ref")
    for heads, code, word in (("L0_H0", 1, "does NOT match"), ("L0_H1", 0, "declared known deviation")):
        panel = tmp_path / f"{heads}.toml"
        panel.write_text('[[models]]\nname = "planted"\nrepo = "planted/model"\nsource = "reference"\n'
                         f'[models.expect.xfail]\nF1 = {{ reason = "planted", heads = ["{heads}"] }}\n')
        assert judge("--reference-dir", str(tmp_path / "ref"), "--panel", str(panel)) == code
        assert word in capsys.readouterr().out
