"""The command line: --help and --version at once, every option's help and default, the exit codes
(a crash is not a failed claim, bad input is not a crash), and nothing trained unless asked
(docs/hostile-inputs.md, "`headwatch judge` / `headwatch report` / `headwatch organisms`" and "Exit
codes, file modes, interruptions")."""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from headwatch import __version__
from headwatch.cli import EXIT_CODES, SUBCOMMANDS, build_parser
from headwatch.fixtures.reference import PUBLISHED_DIR


def test_help_and_version_are_fast_and_import_no_torch():
    """Help costs under a CPU-second (CPU time, not wall time: the suite's processes may run at a low
    priority beside organism training, and a loaded machine must not fail this)."""
    code = ("import sys, time; t0 = time.process_time(); from headwatch.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('seconds', time.process_time() - t0); print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=300)
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "False False", out.stdout  # nothing heavy is imported to print help
    assert float(lines[-2].split()[1]) < 1.0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    version = subprocess.run([sys.executable, "-P", "-m", "headwatch", "--version"], capture_output=True, text=True,
                             timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert version.stdout.strip() == f"headwatch {__version__}" and cpu < 5, cpu


def test_no_command_help_imports_torch():
    """Each command's --help imports its module (its options, its examples), not torch, transformers or
    matplotlib: those wait for the command to run (its deferred imports)."""
    code = ("import sys; from headwatch.cli import SUBCOMMANDS, main\n"
            "for command in SUBCOMMANDS:\n    try:\n        main([command, '--help'])\n    except SystemExit:\n"
            "        pass\n"
            "print(all(module in sys.modules for module, _ in SUBCOMMANDS.values()))\n"
            "print(sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-2:] == ["True", "[]"], out.stdout[-2000:] + out.stderr[-2000:]


def test_judging_recorded_measurements_loads_no_torch(tmp_path):
    """Judging a panel without organisms reads records and loads no torch (a population of 7,854 cached
    records is judged in a few hundred MiB: docs/benchmarks.md); a training step's failure is still
    recognised (``selection.training_failed``) without importing its runner."""
    code = ("import sys; from headwatch.cli import main\n"
            f"code = main(['judge', '--panel', 'published', '--cache-dir', {str(tmp_path / 'c')!r}])\n"
            "print(code, sorted(m for m in ('torch', 'transformers', 'headwatch.model_organisms') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout[-2000:] + out.stderr[-2000:]
    from headwatch import selection
    from headwatch.model_organisms import runner

    assert selection.training_failed(runner.TrainingCancelled("stopped"))
    assert not selection.training_failed(RuntimeError("a bug"))


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_option_has_help_and_shows_its_default(command):
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings or action.help == argparse.SUPPRESS:
            continue  # a suppressed option is an old spelling, refused with the one to use
        assert action.help, f"{command} {action.option_strings} has no help text"
        rendered = sub.formatter_class(prog="x")._get_help_string(action)
        assert action.required or "default" in rendered, f"{command} {action.option_strings}: {rendered!r}"


# ---- exit codes: a crash is not a failed claim, bad input is not a crash; nothing trains unless asked ----


PYTHIA = PUBLISHED_DIR / "EleutherAI--pythia-1b"


def _failing_reference(tmp_path: Path) -> Path:
    """The published Pythia records with a first-token head planted in layer 0 at the last revision: F1 fails."""
    ref = tmp_path / "ref"
    shutil.copytree(PYTHIA, ref / PYTHIA.name)
    path = ref / PYTHIA.name / "step143000.json"
    record = json.loads(path.read_text())
    record["all_head_selectivity"]["L0_H1"]["first-token"] = 500.0
    path.write_text(json.dumps(record))
    return ref


@pytest.mark.parametrize("command", [None, *sorted(SUBCOMMANDS)])
def test_the_exit_code_table_is_printed_once_by_the_top_level_help(command, headwatch_cli):
    """The one table (EXIT_CODES) in ``headwatch --help``; a command's --help names the codes and points
    there instead of printing the table again. The docs' copies are written from it."""
    r = headwatch_cli(*([command] if command else []), "--help")
    assert r.code == 0
    help_text = " ".join(r.out.split())
    for code, text in EXIT_CODES.items():
        assert (f"{code} {' '.join(text.split())}" in help_text) is (command is None), (command, code)
    if command is not None:
        assert "exit codes: 0, 1, 2, 3, 130 (what each means: headwatch --help)" in help_text


#: What each command needs besides an argument it does not take, so that only that argument is wrong.
NEEDS = {"measure": ("--model", "m", "--out", "-"), "organisms": ("train",), "report": ("--out", "r")}


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_an_argument_a_command_does_not_take_prints_that_commands_usage(command, headwatch_cli):
    r = headwatch_cli(command, *NEEDS.get(command, ()), "--bogus")
    assert r.code == 2
    assert r.err.startswith(f"usage: headwatch {command} ") and "unrecognized arguments: --bogus" in r.err, r.err


def test_each_command_shows_its_own_options_and_defaults(headwatch_cli):
    """An option's help speaks of the command it is shown in: --seeds says nothing of `organisms train`
    in judge or panels; `organisms train --panel` gives its own default (none: --family's recipes)."""
    def option_help(command: str, flag: str) -> str:
        """The help of ``flag`` in ``command --help`` (its block among the options, on one line)."""
        blocks = re.split(r"\n  (?=-)", headwatch_cli(command, "--help").out.split("options:", 1)[1])
        return " ".join(next(b for b in blocks if b.startswith(flag + " ")).split())

    for command in ("judge", "panels", "report"):
        seeds_help = option_help(command, "--seeds")
        assert "organisms train" not in seeds_help and "every member" in seeds_help, (command, seeds_help)
    panel_help = option_help("organisms", "--panel")
    assert "published and organisms" not in panel_help and "--family" in panel_help, panel_help
    seeds_help = option_help("organisms", "--seeds")
    assert "--family" in seeds_help, seeds_help


@pytest.mark.parametrize("case", ["no command", "bad flag", "models unknown", "panel unknown", "reference missing",
                                  "cache dir a file", "claim fails", "claims hold", "crash"])
def test_exit_codes_of_the_cli(case, tmp_path, headwatch_cli, monkeypatch, local_panel_file, never_trains):
    """Each exit status for what it means, and a message that names what was wrong."""
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "cache"))
    if case == "crash":  # a bug in headwatch, anywhere below the command: exit 3, the traceback, a plea
        import headwatch.cli.judge as judge_cli

        def boom(*args):
            raise RuntimeError("a bug planted by the test")

        monkeypatch.setattr(judge_cli, "_populations", boom)
    (tmp_path / "afile").write_text("x")
    argv, code, says = {
        "no command": ([], 2, "required"),
        "bad flag": (["judge", "--bogus"], 2, "--bogus"),
        "models unknown": (["judge", "--models", "nope"], 2, "nope"),
        "panel unknown": (["judge", "--panel", "nope"], 2, "unknown panel 'nope'"),
        "reference missing": (["judge", "--reference-dir", tmp_path / "nope"], 2, "nope"),
        "cache dir a file": (["judge", "--panel", local_panel_file, "--cache-dir", tmp_path / "afile"], 2, "afile"),
        "claim fails": (["judge", "--reference-dir", _failing_reference(tmp_path) if case == "claim fails" else ""],
                        1, " fails "),
        "claims hold": (["judge", "--models", "pythia-1b"], 0, "F1"),
        "crash": (["judge", "--models", "pythia-1b"], 3, "Please report it"),
    }[case]
    r = headwatch_cli(*argv)
    assert r.code == code, (r.code, r.err[-2000:])
    assert says in r.out + r.err, r.err[-2000:]
    if code == 2:
        assert "Traceback" not in r.err, r.err
    if case == "crash":
        assert "Traceback" in r.err and "RuntimeError: a bug planted by the test" in r.err
    if case == "cache dir a file":
        assert (tmp_path / "afile").read_text() == "x"  # refused, not replaced, and nothing measured


@pytest.mark.parametrize("case", ["judge", "report", "organism cache a file"])
def test_judge_and_report_train_nothing_unless_asked(case, tmp_path, headwatch_cli, monkeypatch, never_trains):
    """A missing organism is listed with the training step's command (exit 2); nothing trains without --train."""
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "cache"))
    organism_cache = tmp_path / "org"
    if case == "organism cache a file":
        organism_cache = tmp_path / "afile"
        organism_cache.write_text("x")
    monkeypatch.setenv("HEADWATCH_ORGANISMS_CACHE", str(organism_cache))
    if case == "report":
        r = headwatch_cli("report", "--panel", "organisms", "--no-figures", "--out", tmp_path / "rep")
    else:
        r = headwatch_cli("judge", "--panel", "organisms", "--models", "organism-olmo")
    assert r.code == 2, (r.code, r.err[-2000:])
    # a file given as the cache is named as such (not "train it with ...", which would fail again)
    assert ("not a folder" if case == "organism cache a file" else "--train") in r.err, r.err[-2000:]
    assert "Traceback" not in r.err, r.err[-2000:]
    if case == "judge":
        assert "headwatch organisms train --panel organisms --models organism-olmo" in r.err, r.err
        # one "not trained" error naming one command, not one per model beside the selection's
        assert r.err.count("headwatch organisms train") == 1 and "--family" not in r.err, r.err
    if case == "report":
        assert "headwatch organisms train --panel organisms" in r.err, r.err
    if case == "organism cache a file":
        assert str(organism_cache) in r.err and organism_cache.read_text() == "x", r.err
    if organism_cache.is_dir():
        assert not any(organism_cache.rglob("*.safetensors")), "an organism was trained"


# ---- headwatch panels ------------------------------------------------------------------------------


PANELS_IN_A_CHILD = """
import contextlib, io, json, resource, sys
from headwatch.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(["panels"])
usage = resource.getrusage(resource.RUSAGE_SELF)
heavy = sorted(m for m in ("torch", "transformers", "scipy", "matplotlib") if m in sys.modules)
print(json.dumps({"code": code, "cpu": usage.ru_utime + usage.ru_stime, "heavy": heavy, "lines": out.getvalue().count(chr(10))}))
"""


@pytest.mark.slow
def test_panels_imports_no_torch_and_takes_under_a_second_of_cpu(tmp_path):
    """``headwatch panels`` tells every shipped panel's cost (organisms' training from their recipes,
    Hub runs from the written parameter counts) without torch or transformers, in under 1 s of CPU
    (the second of two runs: the first may compile the modules' bytecode)."""
    env = {**os.environ, "HEADWATCH_ORGANISMS_CACHE": str(tmp_path / "org"), "HEADWATCH_CACHE_DIR": str(tmp_path / "c")}
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", PANELS_IN_A_CHILD], capture_output=True, text=True, env=env,
                           timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["code"] == 0 and got["lines"] >= 8 and got["heavy"] == [], got
    assert got["cpu"] < 1.0, got


def test_panels_lists_every_shipped_panel_with_its_models_and_cost(headwatch_cli, tmp_path, monkeypatch, never_trains):
    from headwatch.fixtures.panels import available_panels

    monkeypatch.setenv("HEADWATCH_ORGANISMS_CACHE", str(tmp_path / "org"))
    r = headwatch_cli("panels")
    assert r.code == 0, r.err[-2000:]
    lines = {line.split()[0]: line for line in r.out.splitlines()}
    assert sorted(lines) == available_panels()
    assert "2 model(s) (pythia-1b, olmo-1b): published records: read in seconds; runs without --panel" in lines["published"]
    assert "3 organism(s), 3 to train first (about " in lines["organisms"] and "runs without --panel" in lines["organisms"]
    assert "30 Hub checkpoint(s), " in lines["paper"] and " GB to download" in lines["paper"]
    assert lines["paper"].endswith("needs network and a GPU")


def test_panels_check_prints_what_a_file_selects_and_refuses_a_bad_one(headwatch_cli, tmp_path, local_panel_file):
    r = headwatch_cli("panels", "check", local_panel_file)
    assert r.code == 0, r.err[-2000:]
    assert r.out.startswith(f"{local_panel_file}: panel 'exits-local'") and "1 selected" in r.out
    assert "local checkpoints: measured on first use" in r.out
    bad = tmp_path / "bad.toml"
    bad.write_text(local_panel_file.read_text().replace("revisions =", "revisons ="))
    r = headwatch_cli("panels", "check", bad)
    assert r.code == 2 and "revisons" in r.err and "Traceback" not in r.err, r.err[-2000:]
    assert headwatch_cli("panels", "check").code == 2


def test_offline_names_what_to_download_and_downloads_nothing(headwatch_cli, tmp_path):
    """--offline, the one flag every front end takes: a checkpoint missing from the Hub cache is listed
    with the command that fetches it (exit 2); nothing is downloaded."""
    r = headwatch_cli("judge", "--panel", "paper", "--models", "pythia-1b", "--offline", "--cache-dir", tmp_path / "hw",
                      "--hub-cache-dir", tmp_path / "hub")
    assert r.code == 2, r.err[-2000:]
    assert "the run is offline (--offline or HF_HUB_OFFLINE)" in r.err and "hf download EleutherAI/pythia-1b" in r.err
    assert "rerun without --offline" in r.err and not any((tmp_path / "hub").rglob("*.safetensors"))


@pytest.mark.parametrize("command", [None, *sorted(SUBCOMMANDS)])
def test_every_help_shows_examples(command, headwatch_cli):
    """Each --help ends with examples of the command (its module's EXAMPLES), before the exit codes."""
    r = headwatch_cli(*([command] if command else []), "--help")
    assert r.code == 0 and "\nexamples:\n  headwatch " in r.out, r.out[-1500:]
    assert r.out.index("examples:") < r.out.index("exit codes:")
