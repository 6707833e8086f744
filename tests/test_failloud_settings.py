"""Every probe setting and CLI argument is checked by one rule set before any model loads.

Catalogue: docs/hostile-inputs.md, "Probe settings" and "Where the checkpoint is". On main's code
(before issue 14) `--n-pr 0`, a 3-id vocabulary, `--n-pr` above N and a sequence beyond the
model's positions wrote records of garbage with exit 0; short sequences, negative ids and zero
batch sizes ended in tracebacks; a missing folder was looked up on the Hub.
"""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from headwatch.fixtures import loading
from headwatch.fixtures.tiny import tiny_model

SMALL = {"--n-examples": "8", "--n-pr": "8", "--seq-len": "64", "--vocab-lo": "10", "--vocab-hi": "300",
         "--batch-size": "4", "--device": "cpu"}


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


@pytest.mark.parametrize("flag", ["--n-examples", "--dtype"])
def test_report_takes_the_same_rules(flag, tmp_path, headwatch_cli):
    r = headwatch_cli("report", flag, "0", "--out", tmp_path / "rep")
    assert r.code == 2 and flag in r.err, r.err
    assert not (tmp_path / "rep").exists()


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


def test_measure_itself_refuses_settings_the_record_would_misstate():
    """The probes check again where the numbers are made, whoever calls them."""
    from headwatch.probes.measure import measure
    from headwatch.probes.record import ProbeSettings
    from headwatch.validation import InputError

    model = tiny_model("gpt_neox")
    base = ProbeSettings(n_examples=8, n_pr=8, seq_len=64, vocab_lo=10, vocab_hi=300, batch_size=4)
    for bad in ({"n_pr": 9}, {"n_pr": 0}, {"vocab_hi": 13}, {"seq_len": 600}):
        with pytest.raises(InputError):
            measure(model, dataclasses.replace(base, **bad), model_name="t", revision="r", progress=False)


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
    r = headwatch_cli("measure", *argv, "--out", tmp_path / "o.json", *[x for kv in SMALL.items() for x in kv])
    assert r.code == 2 and names in r.err and "Traceback" not in r.err, r.err


@pytest.mark.parametrize("argv, names", [(["--seed", "-1"], "--seed"), (["--threads", "0"], "--threads"),
                                         (["--cache-dir", "{file}"], "a-file")])
def test_organisms_train_arguments_are_checked(argv, names, tmp_path, headwatch_cli, monkeypatch):
    """Refused before any child process starts (main started training with them)."""
    from headwatch.fixtures.organisms import runner

    def train(*args, **kwargs):
        raise AssertionError("training started with bad arguments")

    monkeypatch.setattr(runner, "train_in_subprocesses", train)
    (tmp_path / "a-file").write_text("")
    argv = [a.replace("{file}", str(tmp_path / "a-file")) for a in argv]
    if "--cache-dir" not in argv:
        argv += ["--cache-dir", str(tmp_path / "org")]
    r = headwatch_cli("organisms", "train", "--family", "olmo", *argv)
    assert r.code == 2 and names in r.err, r.err


# ---- the rules themselves ------------------------------------------------------------------------


def test_one_rule_per_probe_setting():
    from headwatch.probes.record import ProbeSettings
    from headwatch.validation import PROBE_RULES, check_probe_settings

    assert set(PROBE_RULES) == {f.name for f in dataclasses.fields(ProbeSettings)}
    check_probe_settings(dataclasses.asdict(ProbeSettings()))  # the paper's defaults pass
    from headwatch.fixtures.organisms import PROBE

    check_probe_settings(dataclasses.asdict(PROBE))  # and the organisms'


@pytest.mark.parametrize("seq_len, lo, hi", [(64, 10, 18), (64, 10, 20), (256, 100, 130), (68, 16, 512)])
def test_expected_valid_share_matches_the_generator(seq_len, lo, hi, monkeypatch):
    """The share of valid examples is computed before generating the batch; it matches the generator."""
    from headwatch.probes import batch as batch_mod
    from headwatch.validation import expected_valid_fraction

    monkeypatch.setattr(batch_mod, "check_batch_settings", lambda *a, **k: None)  # generate below the bar too
    b = batch_mod.induction_batch(1000, seq_len, lo, hi, 42)
    assert float(b.valid.float().mean()) == pytest.approx(expected_valid_fraction(seq_len, lo, hi), abs=0.05)
    assert torch.equal(b.valid, (b.tokens[:, :-1] == b.b[:, None]).sum(1) == 1)
