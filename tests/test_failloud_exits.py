"""Exit codes: a crash is not a failed claim, bad input is not a crash; nothing trains unless asked.

Catalogue: docs/hostile-inputs.md, "pytest options", "Environment variables", "`headwatch judge` /
`headwatch report` / `headwatch organisms`" and "Exit codes, file modes, interruptions". On main's
code (before issue 14) an unhandled exception exited 1, the same as a failed claim; a bad pytest
option or panel crashed pytest (INTERNALERROR) or passed validation and failed nine tests with a raw
TypeError; ``headwatch judge`` trained a missing organism for about 13 minutes without a word.

headwatch: 0 claims hold, 1 a claim fails, 2 bad input or usage, 3 internal error.
pytest:    0 passed, 1 a claim failed, 3 a claim test crashed, 4 bad input (pytest's usage error).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from headwatch import plugin
from headwatch.cli import EXIT_CODES
from headwatch.fixtures import organisms  # imported before pytester's in-process runs snapshot sys.modules
from headwatch.fixtures.organisms import runner
from headwatch.fixtures.reference import PUBLISHED_DIR
from headwatch_testing.tinypanel import local_panel_text, save_local_run

pytest_plugins = ["pytester"]

PYTHIA = PUBLISHED_DIR / "EleutherAI--pythia-1b"



@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    """A local training run of two tiny checkpoints (nothing in these tests gets as far as measuring it)."""
    return save_local_run(tmp_path_factory.mktemp("run"))


@pytest.fixture
def local_panel(tmp_path, local_run) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(local_panel_text(local_run, panel_name="exits-local"))
    return path


@pytest.fixture
def never_trains(monkeypatch):
    """Fail the test if an organism starts training."""
    def train(*args, **kwargs):
        raise AssertionError("an organism started training without --train-missing")

    monkeypatch.setattr(runner, "train_in_subprocesses", train)
    monkeypatch.setattr(organisms, "ensure_trained", train)


def _failing_reference(tmp_path: Path) -> Path:
    """The published Pythia records with a first-token head planted in layer 0 at the last revision: F1 fails."""
    ref = tmp_path / "ref"
    shutil.copytree(PYTHIA, ref / PYTHIA.name)
    path = ref / PYTHIA.name / "step143000.json"
    record = json.loads(path.read_text())
    record["all_head_selectivity"]["L0_H1"]["first-token"] = 500.0
    path.write_text(json.dumps(record))
    return ref


# ---- headwatch ------------------------------------------------------------------------------------------


def test_exit_codes_are_documented_in_help_and_readme(headwatch_cli):
    r = headwatch_cli("--help")
    assert r.code == 0
    help_text = " ".join(r.out.split())
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for code in (0, 1, 2, 3):
        assert f"{code} {' '.join(EXIT_CODES[code].split())}" in help_text, code
        assert f"{code}" in readme
    assert "internal error" in readme and "bad input" in readme


@pytest.mark.parametrize("case", ["no command", "bad flag", "models unknown", "panel unknown", "reference missing",
                                  "cache dir a file", "claim fails", "claims hold", "crash"])
def test_exit_codes_of_the_cli(case, tmp_path, headwatch_cli, monkeypatch, local_panel, never_trains):
    """Each exit status for what it means, and a message that names what was wrong."""
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "cache"))
    if case == "crash":  # a bug in headwatch, anywhere below the command: exit 3, the traceback, a plea
        import headwatch.cli.judge as judge_cli

        def boom(args):
            raise RuntimeError("a bug planted by the test")

        monkeypatch.setattr(judge_cli, "_records", boom)
    (tmp_path / "afile").write_text("x")
    argv, code, says = {
        "no command": ([], 2, "required"),
        "bad flag": (["judge", "--bogus"], 2, "--bogus"),
        "models unknown": (["judge", "--models", "nope"], 2, "nope"),
        "panel unknown": (["judge", "--panel", "nope"], 2, "unknown panel 'nope'"),
        "reference missing": (["judge", "--reference-dir", tmp_path / "nope"], 2, "nope"),
        "cache dir a file": (["judge", "--panel", local_panel, "--cache-dir", tmp_path / "afile"], 2, "afile"),
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
    """A missing organism is listed with the command that fills it (exit 2); nothing trains."""
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
    assert "--train-missing" in r.err and "Traceback" not in r.err, r.err[-2000:]
    if case == "judge":
        assert "headwatch organisms train --family olmo" in r.err, r.err
    if case == "organism cache a file":
        assert str(organism_cache) in r.err and organism_cache.read_text() == "x", r.err
    if organism_cache.is_dir():
        assert not any(organism_cache.rglob("*.safetensors")), "an organism was trained"


# ---- pytest ---------------------------------------------------------------------------------------------


def _runpytest(pytester, *args: str):
    """The claim tests run in this process, with an ini of their own (the repository's addopts want xdist)."""
    ini = pytester.makeini("[pytest]\n")
    return pytester.runpytest_inprocess(str(plugin.CLAIMS_DIR), "-c", str(ini), "--rootdir", str(pytester.path),
                                        "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                                        *args)


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


OPTIONS = {
    # case: (arguments, what the message must name); {panel} a local panel, {tmp} the test's folder
    "n-examples 0": (["--n-examples", "0"], "--n-examples"),
    "n-examples text": (["--n-examples", "abc"], "--n-examples"),
    "device gpu": (["--device", "gpu", "--panel", "{panel}"], "--device"),
    "device cuda without a GPU": (["--device", "cuda", "--panel", "{panel}"], "cuda"),
    "models unknown": (["--panel", "published", "--models", "nope"], "nope"),
    "revisions unknown": (["--panel", "published", "--revisions", "step7"], "step7"),
    "dtype": (["--dtype", "float64"], "--dtype"),
    "panel empty": (["--panel", ""], "--panel"),
    "panel unknown": (["--panel", "nope"], "nope"),
    "cache dir a file": (["--cache-dir", "{tmp}/afile", "--panel", "{panel}"], "afile"),
    "cache dir a file, from the environment": (["--panel", "{panel}"], "afile"),
    "reference dir missing": (["--panel", "published", "--reference-dir", "{tmp}/nope"], "nope"),
}


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_pytest_options_are_usage_errors(case, pytester, tmp_path, local_panel, monkeypatch, never_trains):
    """Every bad option or environment value stops pytest before any test (exit 4), naming it; no traceback."""
    if case == "device cuda without a GPU" and _has_cuda():
        pytest.skip("needs a machine without a CUDA device (this one has one, so --device cuda is valid)")
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / ("afile" if "environment" in case else "cache")))
    monkeypatch.setenv("HEADWATCH_ORGANISMS_CACHE", str(tmp_path / "org"))
    args, says = OPTIONS[case]
    result = _runpytest(pytester, *(a.replace("{panel}", str(local_panel)).replace("{tmp}", str(tmp_path))
                                    for a in args))
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4, (result.ret, out[-3000:])
    assert says in out and "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    assert " passed" not in out and " failed" not in out, out[-3000:]


def _subprocess_pytest(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """pytest in a child (Hub variables are read when huggingface_hub is imported: this process has)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HEADWATCH_", "PYTEST_", "HF_"))}
    clean.update(OMP_NUM_THREADS="1", HF_HOME=str(tmp_path / "hf-home"), HEADWATCH_CACHE_DIR=str(tmp_path / "cache"),
                 **env)
    return subprocess.run([sys.executable, "-m", "pytest", str(plugin.CLAIMS_DIR), "-q", "-n", "0", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), *args],
                          cwd=str(Path(__file__).resolve().parents[1]), env=clean, capture_output=True, text=True,
                          timeout=600)


def test_no_train_errors_with_the_command_that_trains(tmp_path):
    """``--no-train``: the tests of a missing organism are ERRORs naming the command (exit 4), never FAILED claims."""
    r = _subprocess_pytest(tmp_path, "--panel", "organisms", "--models", "organism-olmo", "--no-train", "-k", "F2",
                           env={"HEADWATCH_ORGANISMS_CACHE": str(tmp_path / "org")})
    out = r.stdout + r.stderr
    assert r.returncode == 4, (r.returncode, out[-3000:])
    assert "headwatch organisms train --family olmo" in out and " failed" not in out, out[-3000:]
    assert not (tmp_path / "org").exists() or not any((tmp_path / "org").rglob("*.safetensors"))


def test_bad_input_in_a_fixture_is_an_error_with_exit_4(tmp_path):
    """Offline, a Hub checkpoint missing from the Hub cache is found while measuring: an ERROR saying how to
    download it (exit 4), not a failed claim and not a crash."""
    r = _subprocess_pytest(tmp_path, "--panel", "paper", "--models", "pythia-1b", "-k", "F2",
                           env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")})
    out = r.stdout + r.stderr
    assert r.returncode == 4, (r.returncode, out[-3000:])
    assert "hf download" in out and " failed" not in out and "INTERNALERROR" not in out, out[-3000:]
