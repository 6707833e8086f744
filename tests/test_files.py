"""Files headwatch writes (headwatch/files.py): output paths are checked before the compute; files and
folders honour the umask; a kill leaves no torn file.

Catalogue: docs/hostile-inputs.md, "Output paths" and "Exit codes, file modes, interruptions". On
main's code (before issue 14) an unwritable or folder ``--out`` was found after the compute (the
measurement was lost), a symlink, FIFO or device given as ``--out`` was replaced by a file, and
files were written 0600 and organism folders 0700 whatever the umask.
"""
from __future__ import annotations

import json
import os
import select
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from headwatch_testing.tiny import tiny_model
from headwatch.probes.record import SCHEMA

SMALL = ("--n-examples", "8", "--n-pr", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300",
         "--batch-size", "4", "--device", "cpu")


@pytest.fixture
def never_measures(monkeypatch):
    """Fail the test if a probe run starts."""
    import headwatch.probes.measure as measure_mod

    def measure(*args, **kwargs):
        raise AssertionError("the compute started before the output path was checked")

    monkeypatch.setattr(measure_mod, "measure", measure)


def _special(tmp_path: Path, kind: str) -> Path:
    """An existing output path of ``kind``."""
    if kind == "folder":
        (tmp_path / "out").mkdir()
        return tmp_path / "out"
    if kind == "symlink":
        (tmp_path / "target.json").write_text("{}")
        (tmp_path / "out.json").symlink_to(tmp_path / "target.json")
        return tmp_path / "out.json"
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo"
    if kind == "device":
        return Path("/dev/null")
    if kind == "under a file":
        (tmp_path / "a-file").write_text("")
        return tmp_path / "a-file" / "out.json"
    raise ValueError(kind)


KINDS = ["folder", "symlink", "fifo", "device", "under a file"]


@pytest.mark.parametrize("kind", KINDS)
def test_output_paths_are_checked_before_the_compute(kind, checkpoint, tmp_path, never_measures, headwatch_cli):
    out = _special(tmp_path, kind)
    r = headwatch_cli("measure", "--model", checkpoint, "--out", out, *SMALL)
    assert r.code == 2 and "--out" in r.err and "Traceback" not in r.err, r.err
    if kind == "symlink":
        assert out.is_symlink() and (tmp_path / "target.json").read_text() == "{}"


def test_an_unwritable_output_folder_is_refused_before_the_compute(checkpoint, unwritable_dir, never_measures,
                                                                   headwatch_cli):
    r = headwatch_cli("measure", "--model", checkpoint, "--out", unwritable_dir / "o.json", *SMALL)
    assert r.code == 2 and "cannot write" in r.err, r.err


@pytest.mark.parametrize("out", ["", "newdir/"])
def test_output_names_that_are_not_files_are_refused(out, checkpoint, tmp_path, never_measures, headwatch_cli,
                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = headwatch_cli("measure", "--model", checkpoint, "--out", out, *SMALL)
    assert r.code == 2 and "--out" in r.err, r.err
    assert not (tmp_path / "newdir").exists()


@pytest.mark.parametrize("kind", ["folder", "symlink", "fifo"])
def test_judge_json_is_checked_before_judging(kind, tmp_path, headwatch_cli, monkeypatch):
    from headwatch.claims import judge

    def judge_model(*args, **kwargs):
        raise AssertionError("judged before the output path was checked")

    monkeypatch.setattr(judge, "judge_model", judge_model)
    out = _special(tmp_path, kind)
    r = headwatch_cli("judge", "--models", "olmo-1b", "--json", out)
    assert r.code == 2 and "--json" in r.err, r.err


def test_report_out_must_be_a_folder(tmp_path, headwatch_cli):
    (tmp_path / "a-file").write_text("x")
    r = headwatch_cli("report", "--no-figures", "--out", tmp_path / "a-file")
    assert r.code == 2 and "not a folder" in r.err, r.err
    assert (tmp_path / "a-file").read_text() == "x"


def test_out_dash_writes_the_record_to_stdout(checkpoint, tmp_path, headwatch_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = headwatch_cli("measure", "--model", checkpoint, "--out", "-", *SMALL)
    assert r.code == 0, r.err
    assert json.loads(r.out)["schema"] == SCHEMA and "wrote stdout" in r.err
    assert not (tmp_path / "-").exists()


# ---- modes ---------------------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o077], ids=["umask022", "umask077"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_files_and_folders_honour_the_umask(umask, tmp_path, checkpoint, headwatch_cli):
    """Records, cache entries, report files and Hub-format snapshots (organisms) get 0666/0777 less the
    umask: 0644/0755 under 022, 0600/0700 under 077."""
    from headwatch.fixtures.cache import CacheKey, MeasurementCache
    from headwatch.hubcache import save_revision
    from headwatch.probes.record import ProbeSettings, write_json_atomic

    want_file, want_dir = 0o666 & ~umask, 0o777 & ~umask
    write_json_atomic(tmp_path / "plain.json", {"a": 1})
    assert _mode(tmp_path / "plain.json") == want_file

    assert headwatch_cli("measure", "--model", checkpoint, "--out", tmp_path / "o.json", *SMALL).code == 0
    assert _mode(tmp_path / "o.json") == want_file

    import copy
    record = json.loads((tmp_path / "o.json").read_text())
    from headwatch.probes.record import MeasurementRecord

    cache = MeasurementCache(tmp_path / "cache")
    entry = cache.get_or_compute(CacheKey.make("org/m", "step0", "c" * 40, ProbeSettings()),
                                 lambda: MeasurementRecord.from_dict(copy.deepcopy(record)))
    assert _mode(entry.path) == want_file and _mode(entry.path.parent) == want_dir

    save_revision(tmp_path / "hub", "org/tiny", "step0", tiny_model("gpt_neox"))
    snapshot = next((tmp_path / "hub" / "models--org--tiny" / "snapshots").iterdir())
    assert _mode(snapshot) == want_dir
    assert {p.name: _mode(p) for p in snapshot.iterdir()} == {p.name: want_file for p in snapshot.iterdir()}

    assert headwatch_cli("report", "--panel", "published", "--no-figures", "--out", tmp_path / "rep").code == 0
    assert {p.name: _mode(p) for p in (tmp_path / "rep").iterdir()} == {
        p.name: want_file for p in (tmp_path / "rep").iterdir()}


def test_organism_training_state_honours_the_umask(umask, tmp_path):
    """The organisms' own training state (safetensors writes 0600 whatever the umask)."""
    from headwatch.model_organisms import ORGANISMS
    from headwatch.model_organisms.train import TrainLog, _make_optimizer, _save_state

    recipe = ORGANISMS["olmo"].recipe
    model = recipe.build_model(0)
    _save_state(tmp_path / "state", model, _make_optimizer(recipe, model), TrainLog("olmo", 0, recipe.fingerprint()))
    assert {p.name: _mode(p) for p in (tmp_path / "state").iterdir()} == {
        p.name: 0o666 & ~umask for p in (tmp_path / "state").iterdir()}


# ---- kill -9 ----------------------------------------------------------------------------------------------


#: ``headwatch measure`` in a child that says when the compute has begun (its readiness signal).
ANNOUNCED_MEASURE = """
import sys
import headwatch.probes.measure as probes
from headwatch.cli import main

real = probes.measure

def announced(*args, **kwargs):
    print("measuring", flush=True)
    return real(*args, **kwargs)

probes.measure = announced  # the command imports it when it runs
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_killed_write_leaves_no_partial_file(checkpoint, tmp_path):
    """kill -9 in the middle of a measurement: no record, no temporary file. (This held on main too,
    and must keep holding.)"""
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "-c", ANNOUNCED_MEASURE, "measure", "--model", str(checkpoint), "--out", str(out / "o.json"),
           "--n-examples", "20000", "--n-pr", "500", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300",
           "--device", "cpu"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    said: list[str] = []
    try:
        while "measuring" not in said and select.select([proc.stdout], [], [], 300)[0]:
            line = proc.stdout.readline()
            if not line:  # the child ended without measuring
                break
            said.append(line.strip())
        assert "measuring" in said, f"the child did not start measuring: {said[-20:]}"
        assert proc.poll() is None, "the measurement finished before the kill: give it more examples"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(out.iterdir()) == []
