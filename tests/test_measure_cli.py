"""``headwatch measure`` end to end: Hub-format cache offline, local folders, and bad input (every argument
and the checkpoint's location checked before any model loads; docs/hostile-inputs.md, "Probe settings"
and "Where the checkpoint is")."""
import json

import pytest

from headwatch.cli import main
from headwatch.fixtures import loading
from headwatch.hubcache import save_revision
from headwatch_testing.tiny import tiny_model

#: Probe settings that fit the tiny models and run in a second.
SMALL = {"--n-examples": "8", "--n-pr": "8", "--seq-len": "64", "--vocab-lo": "10", "--vocab-hi": "300",
         "--batch-size": "4", "--device": "cpu"}
ARGS = [x for kv in SMALL.items() for x in kv]


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


# ---- every argument is checked before any model loads (headwatch.validation's rules), the flag named ----


@pytest.fixture
def never_loads(monkeypatch):
    """Fail the test if any checkpoint's weights are loaded."""
    def load(*args, **kwargs):
        raise AssertionError("a model was loaded before the bad input was refused")

    monkeypatch.setattr(loading, "load_checkpoint", load)


def measure_args(checkpoint, out, **changes: str | None) -> list[str]:
    args = {**SMALL, **{f"--{k.replace('_', '-')}": v for k, v in changes.items()}}
    flat = [x for k, v in args.items() if v is not None for x in (k, v)]
    return ["measure", "--model", str(checkpoint), "--out", str(out), *flat]


#: (setting changes, what the message must name): each wrote a record of garbage or crashed on main.
REFUSED = {
    "n-pr 0": ({"n_pr": "0"}, "--n-pr"),
    "n-pr negative": ({"n_pr": "-5"}, "--n-pr"),
    "n-pr above n": ({"n_pr": "9"}, "--n-pr"),
    "n-examples 0": ({"n_examples": "0"}, "--n-examples"),
    "batch 0": ({"batch_size": "0"}, "--batch-size"),
    "batch negative": ({"batch_size": "-2"}, "--batch-size"),
    "seq 30": ({"seq_len": "30"}, "--seq-len"),
    "seq 50 (baseline)": ({"seq_len": "50"}, "--seq-len"),
    "vocab-lo negative": ({"vocab_lo": "-5"}, "--vocab-lo"),
    "vocab 3 ids": ({"vocab_lo": "10", "vocab_hi": "13"}, "valid"),
    "vocab 8 ids": ({"vocab_lo": "10", "vocab_hi": "18"}, "valid"),
    "vocab inverted": ({"vocab_lo": "200", "vocab_hi": "100"}, "--vocab-hi"),
    "tokens nan": ({"tokens_seen": "nan"}, "--tokens-seen"),
    "tokens negative": ({"tokens_seen": "-1"}, "--tokens-seen"),
    "device gpu": ({"device": "gpu"}, "--device"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_cli_probe_settings_are_refused_before_loading(case, checkpoint, tmp_path, never_loads, headwatch_cli):
    changes, names = REFUSED[case]
    r = headwatch_cli(*measure_args(checkpoint, tmp_path / "o.json", **changes))
    assert r.code == 2, r.err
    assert names in r.err and "allowed" in r.err and "Traceback" not in r.err, r.err
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("changes, names", [({"seq_len": "600"}, "512 positions"), ({"vocab_hi": "400"}, "300 ids")])
def test_settings_that_do_not_fit_the_model_are_refused_before_the_weights(changes, names, checkpoint, tmp_path,
                                                                            never_loads, headwatch_cli):
    """Checked right after config.json is read: the weights are never loaded."""
    r = headwatch_cli(*measure_args(checkpoint, tmp_path / "o.json", **changes))
    assert r.code == 2 and names in r.err, r.err


def test_default_n_pr_is_capped_and_recorded_as_used(checkpoint, tmp_path, headwatch_cli):
    """`--n-examples 8` without `--n-pr`: main recorded n_pr 500 while using 8."""
    r = headwatch_cli(*measure_args(checkpoint, tmp_path / "o.json", n_pr=None))
    assert r.code == 0, r.err
    record = json.loads((tmp_path / "o.json").read_text())
    assert record["settings"]["n_pr"] == 8 and record["n_examples_valid"] == 8


@pytest.mark.parametrize("argv, names", [
    (["--model", "./runs/nope"], "no folder"),
    (["--model", "{tmp}/gone/step0"], "no folder"),
    (["--model", "{ckpt}/config.json"], "is a file"),
    (["--model", ""], "--model"),
    (["--model", "a/b/c"], "not a Hub repo id"),
])
def test_checkpoint_locations_are_checked(argv, names, checkpoint, tmp_path, headwatch_cli, monkeypatch):
    """A path that does not exist is not looked up on the Hub (main: a traceback about repo ids)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{ckpt}", str(checkpoint)) for a in argv]
    r = headwatch_cli("measure", *argv, "--out", tmp_path / "o.json", *ARGS)
    assert r.code == 2 and names in r.err and "Traceback" not in r.err, r.err


# ---- one measuring path: headwatch measure and the provider write records of one shape -------------


def test_measure_and_the_provider_write_records_with_the_same_keys(local_panel_file, local_run, tmp_path):
    """``headwatch measure`` and the provider measure a checkpoint through one function
    (``provider.measure_checkpoint``): their records have the same keys, provenance included
    (``resolved_from``, ``panel``: None outside a panel, ``probe_version``, ``device``); the
    provider's names its panel."""
    from headwatch.fixtures.panels import load_panel
    from headwatch.fixtures.provider import Provider, ProviderOptions
    from headwatch_testing.tinypanel import LOCAL_PROBE

    out = tmp_path / "measured.json"
    flags = [x for k, v in LOCAL_PROBE.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    assert main(["measure", "--model", str(local_run), "--revision", "step100", "--out", str(out),
                 "--device", "cpu", *flags]) == 0
    by_cli = json.loads(out.read_text())
    pm = load_panel(str(local_panel_file)).models[0]
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "hw-cache", device="cpu", progress=False))
    by_provider = provider.revision_record(pm, "step100").to_dict()
    assert set(by_cli) == set(by_provider)
    assert set(by_cli["provenance"]) == set(by_provider["provenance"]), \
        set(by_cli["provenance"]) ^ set(by_provider["provenance"])
    assert by_cli["provenance"]["resolved_from"] == by_provider["provenance"]["resolved_from"] == "local"
    assert by_cli["provenance"]["panel"] is None and by_provider["provenance"]["panel"] == "exits-local"


def test_measure_takes_the_shared_n_examples_with_its_own_default():
    """``--n-examples`` is the option every front end shares (headwatch.selection.OPTIONS: one rule, one
    flag), with measure's default (ProbeSettings') since one checkpoint has no panel to take it from."""
    from headwatch import selection
    from headwatch.cli import build_parser
    from headwatch.probes.record import ProbeSettings

    parser = build_parser("measure").commands["measure"]
    (action,) = [a for a in parser._actions if "--n-examples" in a.option_strings]
    assert action.type is selection.OPTIONS["n_examples"].kwargs["type"]
    assert action.default == ProbeSettings().n_examples
