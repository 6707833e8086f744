"""``headwatch measure`` end to end: Hub-format cache offline, local folders, and bad input."""
import json

import pytest

from headwatch.fixtures.hubcache import save_revision
from headwatch.fixtures.tiny import tiny_model
from headwatch.cli import main

ARGS = ["--n-examples", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300", "--n-pr", "8",
        "--batch-size", "4", "--device", "cpu"]


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hub"
    save_revision(cache, "tiny-org/neox", "step0", tiny_model("gpt_neox", seed=0))
    save_revision(cache, "tiny-org/neox", "step100", tiny_model("gpt_neox", seed=1))
    return cache


def test_measure_by_repo_and_revision_offline(hub_cache, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["measure", "--model", "tiny-org/neox", "--revision", "step100", "--out", str(out),
                 "--hub-cache-dir", str(hub_cache), "--tokens-seen", "1e6", *ARGS])
    assert code == 0
    record = json.loads(out.read_text())
    assert record["model"] == "tiny-org/neox" and record["revision"] == "step100"
    assert record["tokens_seen"] == 1e6
    assert set(record["all_head_selectivity"]) == {f"L{l}_H{h}" for l in range(2) for h in range(4)}
    assert len(record["provenance"]["weights_hash"]) >= 16
    assert "wrote" in capsys.readouterr().out


def test_missing_revision_names_the_closest(hub_cache, tmp_path, capsys):
    code = main(["measure", "--model", "tiny-org/neox", "--revision", "step10", "--out", str(tmp_path / "x.json"),
                 "--hub-cache-dir", str(hub_cache), *ARGS])
    assert code == 2
    err = capsys.readouterr().err
    assert "step10" in err and "step100" in err
    assert not (tmp_path / "x.json").exists()


def test_measure_a_local_folder(tmp_path):
    tiny_model("olmo", seed=3).save_pretrained(tmp_path / "run" / "step5")
    out = tmp_path / "r.json"
    assert main(["measure", "--model", str(tmp_path / "run"), "--revision", "step5", "--out", str(out), *ARGS]) == 0
    assert main(["measure", "--model", str(tmp_path / "run" / "step5"), "--out", str(tmp_path / "s.json"), *ARGS]) == 0
    a, b = json.loads(out.read_text()), json.loads((tmp_path / "s.json").read_text())
    assert a["all_head_selectivity"] == b["all_head_selectivity"]


def test_folder_without_config_needs_a_revision(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["measure", "--model", str(tmp_path / "empty"), "--out", str(tmp_path / "x.json"), *ARGS]) == 2
    assert "no config.json" in capsys.readouterr().err
