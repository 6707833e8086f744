"""A run that would take hours by mistake is refused up front; one that is long on purpose says how
long after its first batch, then keeps saying where it is (docs/hostile-inputs.md, "Resource bombs").

Millions of examples used to run with no progress and no estimate (the terminal bar only, and no
bar at all in a log file). The design: one run measures at most ``RUN_BOUNDS`` examples (50x the
paper's 2000) unless ``HEADWATCH_MAX_EXAMPLES`` confirms more; a run estimated at more than a minute
after its first batch logs the estimate, then a line a minute.
"""
from __future__ import annotations

import logging

import pytest

from headwatch import validation
from headwatch.fixtures.panels import PanelError, parse_panel
from headwatch.names import duration
from headwatch.probes import measure as measure_mod
from headwatch.probes.record import ProbeSettings

SMALL = ["--n-pr", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300", "--batch-size", "4", "--device", "cpu"]


def test_millions_of_examples_are_refused_naming_how_to_confirm(headwatch_cli, checkpoint, tmp_path, monkeypatch):
    monkeypatch.delenv(validation.MAX_EXAMPLES_ENV, raising=False)
    r = headwatch_cli("measure", "--model", checkpoint, "--n-examples", "5000000", *SMALL, "--out", tmp_path / "o.json")
    assert r.code == 2, r.err[-2000:]
    assert "5,000,000, more than the 100,000" in r.err and "HEADWATCH_MAX_EXAMPLES=5000000" in r.err
    assert not (tmp_path / "o.json").exists()


def test_a_panel_asking_for_millions_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv(validation.MAX_EXAMPLES_ENV, raising=False)
    text = (f'[[models]]\nname = "m"\nrepo = "{tmp_path}"\nsource = "local"\nrevisions = ["step0"]\n'
            "tokens = { per_step = 1 }\n[models.probe]\nn_examples = 5000000\nn_bootstrap = 10\n")
    with pytest.raises(PanelError, match="probe.n_examples: got 5,000,000"):
        parse_panel(text, name="p", path=tmp_path / "p.toml")
    with pytest.raises(PanelError, match="n_bootstrap: got 2,000,000"):
        parse_panel(text.replace("5000000", "16").replace("n_bootstrap = 10", "n_bootstrap = 2000000"),
                    name="p", path=tmp_path / "p.toml")


def test_the_bound_is_confirmed_by_the_environment_and_its_value_checked(monkeypatch):
    monkeypatch.setenv(validation.MAX_EXAMPLES_ENV, "6000000")
    validation.check_probe_settings({"n_examples": 5_000_000, "n_pr": 10})
    monkeypatch.setenv(validation.MAX_EXAMPLES_ENV, "lots")
    with pytest.raises(validation.InputError, match="HEADWATCH_MAX_EXAMPLES: got 'lots'"):
        validation.check_probe_settings({"n_examples": 10})


def test_records_measured_with_more_stay_readable(monkeypatch):
    """The bound is on runs, not records: a record made under a raised bound is read as it is."""
    from headwatch.schema import from_data

    monkeypatch.delenv(validation.MAX_EXAMPLES_ENV, raising=False)
    settings = from_data(ProbeSettings, {"n_examples": 5_000_000}, "record.settings")
    assert settings.n_examples == 5_000_000


def test_a_long_run_logs_an_estimate_then_progress(checkpoint, monkeypatch, caplog):
    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(measure_mod, "LONG_RUN_SECONDS", 0.0)  # every run counts as long here
    monkeypatch.setattr(measure_mod, "PROGRESS_SECONDS", 0.0)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, attn_implementation="eager")
    settings = ProbeSettings(n_examples=16, n_pr=8, seq_len=64, vocab_lo=10, vocab_hi=300, batch_size=4, n_bootstrap=0,
                            copy_sequences=0)
    with caplog.at_level(logging.INFO, logger="headwatch.probes.measure"):
        measure_mod.measure(model, settings, model_name="tiny", revision="step0", progress=False)
    lines = [r.getMessage() for r in caplog.records]
    assert any("tiny@step0: 64 example passes; the first 4 took" in line and "in all" in line for line in lines), lines
    assert any("of 64 example passes" in line and "left" in line for line in lines), lines


@pytest.mark.parametrize("seconds,text", [(12.3, "12 s"), (95, "1 min 35 s"), (3725, "1 h 02 min"), (-1, "0 s")])
def test_durations_read_as_people_say_them(seconds, text):
    assert duration(seconds) == text
