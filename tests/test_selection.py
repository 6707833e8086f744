"""One way in (headwatch/selection.py): every front end takes the same options, meaning the same,
with the same defaults, and they select the same panels, models, revisions and records."""
from __future__ import annotations

import argparse
import json
import shutil

import pytest

from headwatch import plugin, selection
from headwatch.cli import SUBCOMMANDS, build_parser
from headwatch.fixtures.panels import default_panels, load_panel
from headwatch.fixtures.reference import NO_PANEL, PUBLISHED_DIR
from headwatch.probes.record import ProbeSettings
from headwatch.validation import DTYPES, InputError


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]


def _flags(command: str) -> dict[str, argparse.Action]:
    return {flag: a for a in _subparser(command)._actions for flag in a.option_strings}


def _pytest_flags() -> dict[str, dict]:
    """What the plugin registers: flag -> addoption's keywords."""
    got: dict[str, dict] = {}

    class Group:
        def addoption(self, flag, **kwargs):
            got[flag] = kwargs

    class Parser:
        def getgroup(self, *args):
            return Group()

    plugin.pytest_addoption(Parser())
    return got


#: Help a front end words for itself (what the flag selects there, its own default, a note only it needs,
#: issue 45); the flag's type and default stay the shared ones.
OWN_HELP = {("organisms", "--panel"), ("organisms", "--models"), ("organisms", "--seeds"), ("pytest", "--device")}


def test_a_flag_means_the_same_in_every_front_end():
    """Each shared flag has one definition: the same help, type and default in every subcommand that
    takes it and in pytest (measure's --dtype and --n-examples default to ProbeSettings': it has no panel
    to defer to), except the help a front end words for itself (OWN_HELP)."""
    fronts = {name: _flags(name) for name in SUBCOMMANDS} | {"pytest": _pytest_flags()}
    seen = 0
    for option in selection.OPTIONS.values():
        for front, flags in fronts.items():
            if option.flag not in flags:
                continue
            seen += 1
            given = flags[option.flag]
            help_text = given["help"] if isinstance(given, dict) else given.help
            default = given.get("default") if isinstance(given, dict) else given.default
            if front == "measure" and option.dest in ("dtype", "n_examples"):  # a probe setting of its own
                assert default == getattr(ProbeSettings(), option.dest)
                continue
            assert (help_text == option.kwargs["help"]) is ((front, option.flag) not in OWN_HELP), (front, option.flag)
            assert default == option.kwargs.get("default"), (front, option.flag)
    assert seen >= 4 * 9  # judge, report and pytest take nearly all of them; measure-panel most


def test_no_flag_has_two_meanings():
    """--cache-dir is the measurement cache wherever it is taken; the Hub cache and the organisms'
    cache have names of their own."""
    for name in SUBCOMMANDS:
        flags = _flags(name)
        if "--cache-dir" in flags:
            assert flags["--cache-dir"].help == selection.OPTIONS["cache_dir"].kwargs["help"], name
    assert "--cache-dir" not in _flags("measure") and "--hub-cache-dir" in _flags("measure")
    assert "--hub-cache-dir" not in _flags("organisms") and "--organisms-cache-dir" in _flags("organisms")
    assert _flags("judge")["--dtype"].choices == DTYPES == tuple(_pytest_flags()["--dtype"]["choices"])


@pytest.mark.parametrize("command", ["judge", "report", "measure-panel"])
def test_panels_models_and_revisions_parse_the_same_way(command):
    """Repeatable, and comma lists, in every command (and pytest: the same Option)."""
    argv = [command, "--panel", "published", "--panel", "organisms,paper", "--models", "a,b", "--models", "c",
            "--revisions", "step1"] + (["--out", "x"] if command == "report" else [])
    args = build_parser(command).parse_args(argv)
    choices = selection.choices_from_args(args)
    assert choices.panels == ("published", "organisms", "paper") and choices.models == ("a", "b", "c")
    assert choices.revisions == ("step1",)


def test_every_front_end_has_the_same_default_panels():
    picked = selection.select(selection.Choices(), resolve=False)
    assert [p.name for p in picked.panels] == default_panels() == selection.default_panel_names()


def test_an_empty_list_is_refused_not_read_as_the_default():
    values = {o.dest: None for o in selection.OPTIONS.values()} | {"panel": [""]}
    with pytest.raises(InputError, match="--panel: got an empty value"):
        selection.read_choices(values.get)


def test_revisions_select_part_of_the_panel_measured_as_in_the_whole():
    """--revisions narrows the trajectory without changing how a revision is measured: the panel's
    final revision keeps the ablations, and the training's total tokens stay the panel's."""
    (whole,) = selection.select(selection.Choices(panels=("organisms",), models=("organism-olmo",)),
                                resolve=False).models
    first, last = whole.sorted_revisions[0], whole.final_revision
    middle = whole.sorted_revisions[len(whole.revisions) // 2]
    for wanted in ((first, middle), (first, last)):
        (part,) = selection.select(selection.Choices(panels=("organisms",), models=("organism-olmo",),
                                                     revisions=wanted)).models
        assert part.revisions == wanted and part.total_tokens == whole.total_tokens
        for r in wanted:
            assert part.settings_for(r) == whole.settings_for(r), r
    assert whole.settings_for(last).ablation and not whole.settings_for(middle).ablation


def test_reference_dir_without_a_panel_selects_the_models_it_holds(tmp_path):
    """The folder's models, each with its shipped entry's expectations; one in no panel is judged
    without them; its records are read through the provider, not measured."""
    shutil.copytree(PUBLISHED_DIR / "allenai--OLMo-1B-0724-hf", tmp_path / "olmo")
    shutil.copytree(PUBLISHED_DIR / "EleutherAI--pythia-1b", tmp_path / "pythia")
    stranger = tmp_path / "somebody--model"
    stranger.mkdir()
    for f in sorted((PUBLISHED_DIR / "EleutherAI--pythia-1b").glob("*.json"))[:3]:
        record = json.loads(f.read_text())
        (stranger / f.name).write_text(json.dumps({**record, "model": "somebody/model"}))
    picked = selection.select(selection.Choices(reference_dir=str(tmp_path)))
    olmo, pythia, other = picked.models
    assert (olmo.id, olmo.panel, olmo.expect) == ("olmo-1b", "published", load_panel("published").model("olmo-1b").expect)
    assert (other.repo, other.panel, other.expect.bos_shape) == ("somebody/model", NO_PANEL, None)
    assert len(other.revisions) == 3 and len(picked.provider.model_records(other)) == 3
    assert [m.id for m in selection.select(selection.Choices(reference_dir=str(tmp_path), models=("model",))).models] \
        == ["somebody--model"]
    assert picked.run.counts() == {"reference": 3} and pythia.id == "pythia-1b"
    with_panel = selection.select(selection.Choices(panels=("published",), reference_dir=str(tmp_path)))
    assert [m.id for m in with_panel.models] == ["pythia-1b", "olmo-1b", "somebody--model"]


def test_the_command_that_fills_what_is_missing_repeats_the_choices():
    choices = selection.Choices(panels=("organisms", "my panel.toml"), models=("organism-olmo",), dtype="bfloat16",
                                cache_dir="/c", refresh=True)
    argv = selection.as_argv(choices)
    assert argv == ["--panel", "organisms", "--panel", "my panel.toml", "--models", "organism-olmo",
                    "--dtype", "bfloat16", "--cache-dir", "/c", "--refresh"]
    again = selection.choices_from_args(build_parser("judge").parse_args(["judge", *argv[:-1]]))
    assert again == selection.Choices(**{**choices.__dict__, "refresh": False})


# ---- a shared option is checked by one rule, whichever front end takes it ----


@pytest.mark.parametrize("flag", ["--n-examples", "--dtype"])
def test_report_takes_the_same_rules(flag, tmp_path, headwatch_cli):
    r = headwatch_cli("report", flag, "0", "--out", tmp_path / "rep")
    assert r.code == 2 and flag in r.err, r.err
    assert not (tmp_path / "rep").exists()
