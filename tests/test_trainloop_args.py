"""The training-loop API's arguments (issue 44.5): every one checked when the object is built, a
misspelt settings key named with the allowed ones, booleans refused as counts; a later run of the
same folder measured with another example count refused; a resumed run whose token counter
restarted at 0 refused before it drops the revisions measured before the stop. Each beside its
control (the same run, told right, measures)."""
from __future__ import annotations

import pytest
import torch

from headwatch.training.trainloop import TrainingProbe
from headwatch.validation import InputError
from headwatch_testing import trainruns

TINY_PROBE = trainruns.PROBE


#: (keyword arguments, what the refusal names): each was accepted when built and failed (or was
#: taken as 1) only when training began.
REFUSED = {
    "n_examples negative": ({"n_examples": -5}, "n_examples: got -5"),
    "n_examples a bool": ({"n_examples": True}, "n_examples: got True"),
    "max_share 0": ({"max_share": 0}, "max_share: got 0"),
    "max_share a bool": ({"max_share": True}, "max_share: got True"),
    "both counts": ({"n_examples": 100, "max_share": 0.1}, "not both"),
    "misspelt setting": ({"settings": {"seq_lne": 64}}, "no setting 'seq_lne' (did you mean 'seq_len'"),
    "SPEC's threshold": ({"settings": {"induction_threshold": 20.0}}, "SPEC's thresholds"),
    "settings a list": ({"settings": [64]}, "settings: got a list"),
    "tokens_per_step a bool": ({"tokens_per_step": True}, "tokens_per_step: got True"),
    "tokens_per_step 0": ({"tokens_per_step": 0}, "tokens_per_step: got 0"),
    "every_n_steps a bool": ({"every_n_steps": True}, "every_n_steps: got True"),
    "every_n_steps 0": ({"every_n_steps": 0}, "every_n_steps: got 0"),
    "measure_initial 1": ({"measure_initial": 1}, "measure_initial"),
    "name with a space": ({"name": "my run"}, "run name 'my run'"),
    "expect a list": ({"expect": ["ramp"]}, "expect: got a list"),
    "report not callable": ({"report": "log"}, "report: got a str"),
    "panel_file empty": ({"panel_file": ""}, "panel_file"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_trainer_callback_checks_every_argument_when_built(case):
    pytest.importorskip("transformers")
    from headwatch.training.trainer_callback import HeadwatchCallback

    kwargs, says = REFUSED[case]
    with pytest.raises(InputError) as e:
        HeadwatchCallback(**kwargs)
    assert says in str(e.value)


def test_the_callbacks_control_arguments_are_taken():
    pytest.importorskip("transformers")
    from headwatch.training.trainer_callback import HeadwatchCallback

    callback = HeadwatchCallback("run-1", {"seq_len": 64, "vocab_lo": 4, "vocab_hi": 64}, n_examples=100,
                                 tokens_per_step=96, every_n_steps=5, measure_initial=False, expect={"bos_shape": "ramp"},
                                 report=print)
    assert callback.settings.seq_len == 64 and callback.tokens_per_step == 96
    assert HeadwatchCallback(max_share=0.1, tokens_per_step=96.5).max_share == 0.1


def test_a_hand_written_loops_counts_are_refused_as_booleans(tmp_path):
    with pytest.raises(InputError, match="n_examples: got True"):
        TrainingProbe.for_run("x", tmp_path, TINY_PROBE, n_examples=True)
    with pytest.raises(InputError, match="max_share: got True"):
        TrainingProbe.for_run("x", tmp_path, TINY_PROBE, max_share=True)
    with pytest.raises(InputError, match="no setting 'seq_lne'"):
        TrainingProbe.for_run("x", tmp_path, {"seq_lne": 64})


# ---- a run's folder measured again: one count, no revision dropped --------------------------------------


def _measured_run(folder, steps=(0, 1, 2), **probe_args) -> list[str]:
    """A run saved and measured at ``steps`` (96 tokens a step), its panel file written."""
    model = trainruns.tiny_model(dropout=0.0)
    probe = TrainingProbe.for_run("run", folder, TINY_PROBE, report=lambda line: None, **probe_args)
    for step in steps:
        with torch.no_grad():
            next(model.parameters()).add_(0.01)  # other weights at every step
        model.save_pretrained(folder / f"step{step}")
        probe.measure(model, f"step{step}", tokens_seen=step * trainruns.TOKENS_PER_STEP, final=False)
        probe.write_panel()
    return [f"step{s}" for s in steps]


def _resume(folder, step: int, tokens: float, **probe_args):
    """A second process on the same folder: measures ``step{step}`` (loaded from its checkpoint) at ``tokens``."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder / f"step{step}") if (folder / f"step{step}").is_dir() \
        else trainruns.tiny_model(dropout=0.0)
    if not (folder / f"step{step}").is_dir():
        model.save_pretrained(folder / f"step{step}")
    probe = TrainingProbe.for_run("run", folder, TINY_PROBE, report=lambda line: None, **probe_args)
    return probe, probe.measure(model, f"step{step}", tokens_seen=tokens)


def test_a_later_run_of_the_folder_with_another_example_count_is_refused(tmp_path):
    folder = tmp_path / "run"
    _measured_run(folder)
    with pytest.raises(InputError, match="measured with 32 .*one run keeps one count"):
        _resume(folder, 2, 2 * trainruns.TOKENS_PER_STEP, n_examples=48)
    probe, done = _resume(folder, 2, 2 * trainruns.TOKENS_PER_STEP)  # the control: the run's own count
    assert done.kept and done.n_examples == 32
    probe, done = _resume(folder, 2, 2 * trainruns.TOKENS_PER_STEP, max_share=0.5)  # max_share adopts it
    assert done.kept and done.n_examples == 32


def test_a_resumed_run_whose_token_counter_restarted_drops_nothing(tmp_path):
    """Three revisions measured; a second process measuring step3 at 0 tokens (its counter restarted)
    dropped all three from the panel, and the judge ran on one. Refused; the controls: resuming from a
    measured checkpoint at its tokens keeps what came before it, and going on past them keeps all."""
    folder = tmp_path / "run"
    measured = _measured_run(folder)
    with pytest.raises(InputError, match=r"step3 at 0 tokens would drop .*step0 at 0, step1 at 96, step2 at 192"):
        _resume(folder, 3, 0.0)
    with pytest.raises(InputError, match="records step1 at 96 tokens"):
        _resume(folder, 1, 0.0)  # the checkpoint it resumed from, at other tokens
    probe, done = _resume(folder, 1, 96.0)  # resumed from step1: step0 kept, step2 is trained again
    assert done.kept and probe.panel_revisions() == {"step0": 0.0, "step1": 96.0}
    probe, done = _resume(folder, 3, 3 * 96.0)  # goes on past them: all kept
    assert set(probe.panel_revisions()) == {*measured, "step3"}
