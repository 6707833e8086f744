"""``headwatch measure-panel`` with the local pool, the Slurm array's parameters, eviction, and record
folders (``headwatch measure --out DIR/<model>/<rev>.json``) read by judge, report and pytest.

Ray and submitit's real engines: tests/test_fanout_engines.py.
"""
from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from headwatch.cli import main
from headwatch.fixtures import loading
from headwatch.fanout.executors import LocalPool, MeasureJob, SlurmArray
from headwatch.fanout.tasks import measured_content, measurement_differences, plan_panel, run_task
from headwatch_testing.faults import DieMidWrite
from headwatch.hubcache import cached_revisions
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch_testing.tinypanel import write_tiny_hub_panel

REVISIONS = ["step0", "step10", "step20", "step30"]


@pytest.fixture(scope="module")
def tiny_panel(tmp_path_factory) -> Path:
    """Four tiny GPTNeoX revisions in a Hub-format cache, and the panel that names them."""
    return write_tiny_hub_panel(tmp_path_factory.mktemp("panel"), n=len(REVISIONS))


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "measurements").glob("*/*.json"))


def sequential(panel: Path, cache_dir: Path) -> dict[str, dict]:
    """The records of a plain, in-process run (what pytest would measure), by revision."""
    pm = load_panel(panel).models[0]
    provider = Provider(ProviderOptions(cache_dir=cache_dir, device="cpu", progress=False))
    return {r.revision: measured_content(r) for r in provider.model_records(pm)}


def cached(panel: Path, cache_dir: Path, monkeypatch) -> dict[str, dict]:
    """The records a new session reads from ``cache_dir``, with model loading forbidden."""
    def no_loading(*a, **k):
        raise AssertionError("the claims must run from the cache without loading a model")

    monkeypatch.setattr(loading, "load_checkpoint", no_loading)
    pm = load_panel(panel).models[0]
    provider = Provider(ProviderOptions(cache_dir=cache_dir, device="cpu", progress=False))
    records = provider.model_records(pm)
    assert provider.run.counts() == {"hit": len(REVISIONS)}
    return {r.revision: measured_content(r) for r in records}


# ---- the command and the local pool ---------------------------------------------------------------


@pytest.mark.slow
def test_measure_panel_local_then_the_claims_load_no_model(tiny_panel, tmp_path, capsys, monkeypatch):
    cache = tmp_path / "c"
    argv = ["measure-panel", "--panel", str(tiny_panel), "--cache-dir", str(cache), "--device", "cpu"]
    assert main([*argv, "--dry-run"]) == 0
    assert "0 already in the cache, 4 to measure" in capsys.readouterr().out and not entries(cache)

    assert main([*argv, "--workers", "2", "--revisions", "step0,step20"]) == 0  # part of the panel
    out = capsys.readouterr().out
    assert "[2/2]" in out and "2 measured" in out and len(entries(cache)) == 2
    assert main([*argv, "--workers", "2"]) == 0  # the rest only
    out = capsys.readouterr().out
    assert "2 already in the cache, 2 to measure" in out and "tiny@step10" in out and "tiny@step0:" not in out
    assert main(argv) == 0
    assert "nothing to measure" in capsys.readouterr().out
    summary = json.loads(next((cache / "fanout").glob("*/summary.json")).read_text())
    assert summary["executor"] == "local" and all(r["status"] == "computed" for r in summary["results"])

    expected = sequential(tiny_panel, tmp_path / "seq")
    assert not measurement_differences(cached(tiny_panel, cache, monkeypatch), expected)


@pytest.mark.slow
def test_local_pool_retries_a_task_killed_mid_write(tiny_panel, tmp_path, monkeypatch):
    """A worker killed while writing an entry: the pool runs the task again; every record once,
    equal to a sequential run's; the dead writer's half temporary is nobody's entry."""
    cache = tmp_path / "c"
    options = ProviderOptions(cache_dir=cache, device="cpu", progress=False,
                              measure_fn=DieMidWrite(str(tmp_path / "died"), ("step10",)))
    plan = plan_panel(load_panel(tiny_panel).models, options)
    results = LocalPool(workers=2).run(plan.tasks, report=lambda r: None)
    assert [r.ok for r in results] == [True] * 4, [r.error for r in results]
    by_label = {r.label: r for r in results}
    assert (tmp_path / "died" / "step10.died").exists() and by_label["tiny@step10"].attempt == 2
    assert len(entries(cache)) == 4  # each once
    # The half-written temporary stays and is nobody's entry; the other worker's task, lost with the
    # broken pool, may have left one more if it was writing at that moment (seen under load).
    assert 1 <= len(list((cache / "measurements").glob("*/.*.tmp"))) <= 2
    expected = sequential(tiny_panel, tmp_path / "seq")
    assert not measurement_differences(cached(tiny_panel, cache, monkeypatch), expected)


@pytest.mark.slow
def test_an_interrupted_local_pool_ends_its_workers_without_sigint(tiny_panel, tmp_path, interrupted_once, pid_alive):
    """Interrupted mid-measurement, the pool ends its workers at once, not after their tasks, though
    they inherited SIGINT ignored (a run started from a background job: a terminal's Ctrl-C never
    reaches them)."""
    import time

    from headwatch_testing.faults import SlowMeasure

    log = tmp_path / "starts.log"
    options = ProviderOptions(cache_dir=tmp_path / "c", device="cpu", progress=False,
                              measure_fn=SlowMeasure(str(log), delay=0, gate=str(tmp_path / "never"), gate_seconds=600))
    plan = plan_panel(load_panel(tiny_panel).models, options, revisions=["step0", "step10"])

    def worker_pids() -> list[int]:
        return [int(line.split()[2]) for line in log.read_text().splitlines()] if log.exists() else []

    with pytest.raises(KeyboardInterrupt), interrupted_once(lambda: len(worker_pids()) == 2):
        LocalPool(workers=2).run(plan.tasks, report=lambda r: None)
    stopped = time.monotonic()
    assert len(worker_pids()) == 2  # both were mid-measurement, waiting for a gate that never opens
    assert not any(pid_alive(pid) for pid in worker_pids())
    assert time.monotonic() - stopped < 1 and not entries(tmp_path / "c")


def test_a_task_that_cannot_succeed_is_listed_with_its_reason(tiny_panel, tmp_path, capsys):
    """The checkpoint vanishes after planning: the task fails, the others finish, exit 1."""
    cache = tmp_path / "c"
    options = ProviderOptions(cache_dir=cache, device="cpu", progress=False)
    pm = load_panel(tiny_panel).models[0]
    plan = plan_panel([pm], options, revisions=["step0"])
    broken = replace(plan.tasks[0], model=replace(pm, hub_cache_dir=str(tmp_path / "nowhere")))
    result = run_task(broken)
    assert result.status == "failed" and "NotInCache" in result.error and "hf download" in result.error
    assert not entries(cache)


def test_bad_input_is_refused_before_anything_runs(tiny_panel, tmp_path, capsys):
    base = ["measure-panel", "--panel", str(tiny_panel), "--cache-dir", str(tmp_path / "c")]
    assert main([*base, "--revisions", "step15"]) == 2
    assert "unknown revision 'step15'" in capsys.readouterr().err
    assert main([*base, "--address", "auto"]) == 2
    assert "--address is for --executor ray" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # argparse refuses it, with headwatch.validation's rule
        main([*base, "--workers", "0"])
    assert usage.value.code == 2 and "--workers: got 0; allowed: an integer >= 1" in capsys.readouterr().err
    assert main([*base, "--executor", "slurm", "--slurm-option", "account"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["measure-panel", "--panel", "no-such-panel"]) == 2
    assert "unknown panel" in capsys.readouterr().err
    assert not entries(tmp_path / "c")


# ---- eviction ------------------------------------------------------------------------------------


def test_evict_deletes_the_measured_checkpoint_and_the_claims_still_read_it(tmp_path, monkeypatch, recwarn):
    panel = write_tiny_hub_panel(tmp_path / "p", n=2)
    hub = tmp_path / "p" / "hub"
    cache = tmp_path / "c"
    options = ProviderOptions(cache_dir=cache, device="cpu", progress=False)
    plan = plan_panel(load_panel(panel).models, options, revisions=["step0"], evict=True)
    result = run_task(plan.tasks[0])
    assert result.ok and result.evicted_bytes > 0
    assert list(cached_revisions(hub, "tiny-org/fanout")) == ["step10"]  # step0's snapshot and ref are gone
    assert len(entries(cache)) == 1
    # offline, the evicted revision still counts as measured (its entry is found without its commit)
    again = plan_panel(load_panel(panel).models, options, evict=True)
    assert again.cached == ["tiny@step0"] and [t.revision for t in again.tasks] == ["step10"]


# ---- Slurm: the array job's parameters (a fake sbatch records them) ---------------------------------


def test_slurm_array_job_parameters(tiny_panel, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\ncp \"$1\" {tmp_path}/submitted.sh\necho 'Submitted batch job 4242'\n")
    for f in bin_dir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    options = ProviderOptions(cache_dir=tmp_path / "c", device="cuda", progress=False)
    plan = plan_panel(load_panel(tiny_panel).models, options)
    array = SlurmArray(folder=tmp_path / "logs", workers=3, partition="gpu", time_min=90, mem_gb=64, cpus_per_task=8,
                       gpus_per_task=1, setup=["source /shared/venv/bin/activate"], extra={"account": "proj"})
    jobs = array.submit(plan.tasks)
    assert [j.job_id for j in jobs] == [f"4242_{i}" for i in range(4)]  # one array job, one task per revision
    script = (tmp_path / "submitted.sh").read_text()
    for line in ["--array=0-3%3", "--gpus-per-node=1", "--cpus-per-task=8", "--partition=gpu", "--time=90",
                 "--mem=64GB", "--requeue", "--account=proj", "--signal=USR2@90", "--job-name=headwatch-measure",
                 "--ntasks-per-node=1"]:
        assert f"#SBATCH {line}\n" in script, line
    assert "source /shared/venv/bin/activate" in script
    assert "%A_%a_0_log.out" in script  # one log per array task
    # requeue on preemption/timeout: the job is checkpointable and resubmits the same task
    delayed = MeasureJob().checkpoint(plan.tasks[2])
    assert delayed.args == (plan.tasks[2],) and isinstance(delayed.function, MeasureJob)


def test_slurm_needs_a_slurm_cluster(tiny_panel, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun here
    pytest.importorskip("submitit", reason="submitit (the slurm extra) is not installed")
    code = main(["measure-panel", "--panel", str(tiny_panel), "--cache-dir", str(tmp_path / "c"),
                 "--executor", "slurm", "--device", "cpu"])
    assert code == 2
    assert "Slurm login node" in capsys.readouterr().err


# ---- records from `headwatch measure --out DIR/<model>/<rev>.json` work everywhere ----------------------


@pytest.fixture(scope="module")
def record_folder(tiny_panel, tmp_path_factory) -> Path:
    """A job array's output: ``headwatch measure`` per revision into DIR/tiny/<rev>.json, without tokens."""
    out = tmp_path_factory.mktemp("records")
    hub = tiny_panel.parent / "hub"
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    try:
        for rev in REVISIONS:
            assert main(["measure", "--model", "tiny-org/fanout", "--revision", rev, "--hub-cache-dir", str(hub),
                         "--out", str(out / "tiny" / f"{rev}.json"), "--device", "cpu", "--n-examples", "16",
                         "--seq-len", "64", "--vocab-lo", "16", "--vocab-hi", "300", "--n-pr", "16"]) == 0
    finally:
        mp.undo()
    return out


def judge(*argv: str) -> int:
    """``headwatch judge ARGV`` as a user runs it (bad input is exit 2 with the message on stderr)."""
    from headwatch.cli import main

    return main(["judge", *argv])


@pytest.mark.slow
def test_judge_takes_tokens_from_the_panel(record_folder, tiny_panel, tmp_path, capsys):
    assert json.loads((record_folder / "tiny" / "step10.json").read_text())["tokens_seen"] is None
    out = tmp_path / "v.json"
    assert judge("--reference-dir", str(record_folder), "--panel", str(tiny_panel), "--json", str(out)) in (0, 1)
    printed = capsys.readouterr()
    assert "== tiny-org/fanout (tiny, panel tiny): 4 revisions" in printed.out, printed.err
    assert set(json.loads(out.read_text())["models"]) == {"tiny-org/fanout"}


@pytest.mark.slow
def test_judge_without_tokens_anywhere_says_how_to_supply_them(record_folder, capsys):
    assert judge("--reference-dir", str(record_folder)) == 2  # no panel has this model: no tokens rule
    err = capsys.readouterr().err
    assert "step0.json records no tokens seen" in err and "--tokens-seen" in err and "--panel" in err


@pytest.mark.slow
def test_report_reads_a_record_folder(record_folder, tiny_panel, tmp_path, capsys):
    from headwatch.cli import report as report_cli

    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    args = parser.parse_args(["--panel", str(tiny_panel), "--out", str(tmp_path / "r"), "--no-figures",
                              "--reference-dir", str(record_folder), "--cache-dir", str(tmp_path / "empty")])
    assert report_cli.run(args) == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["models"]["tiny"]["revisions"] == REVISIONS and summary["models"]["tiny"]["missing"] == []


@pytest.mark.slow
def test_pytest_claims_read_a_record_folder_without_measuring(record_folder, tiny_panel, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HEADWATCH_CACHE_DIR": str(tmp_path / "empty")}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "--pyargs",
         "headwatch.claims", "--panel", str(tiny_panel), "--reference-dir", str(record_folder), "-rs"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode in (0, 1), out.stdout[-3000:] + out.stderr[-3000:]
    assert "4 reference" in out.stdout and "computed" not in out.stdout.split("headwatch measurements")[-1]
    assert not (tmp_path / "empty" / "measurements").exists() or not entries(tmp_path / "empty")


def test_a_plan_lists_untrained_organisms_and_trains_nothing(tmp_path, never_trains):
    """The plan never trains (the training step does, before it): an organism the cache lacks is
    listed, its checkpoints to be measured as it trains, and no task is planned for it."""
    from headwatch.fanout import tasks as fanout

    models = load_panel("organisms").models
    plan = fanout.plan_panel(models, ProviderOptions(cache_dir=tmp_path / "hw", organisms_cache_dir=str(tmp_path / "org")))
    assert plan.untrained == [m.id for m in models] and not plan.tasks
    assert "organisms not trained yet (the training step would train them first" in plan.describe()
    assert "organisms trained first (once, before any task): olmo seed 0" in fanout.Plan(trained=["olmo seed 0"]).describe()


def test_measure_panel_dry_run_trains_nothing_and_without_train_refuses(tmp_path, monkeypatch, capsys, never_trains):
    """``--dry-run`` prints the plan, untrained organisms named, and trains nothing even with --train;
    without --dry-run and without --train a missing organism is refused with the training step's command."""
    monkeypatch.setenv("HEADWATCH_ORGANISMS_CACHE", str(tmp_path / "org"))
    base = ["measure-panel", "--panel", "organisms", "--models", "organism-olmo", "--cache-dir", str(tmp_path / "hw")]
    assert main([*base, "--dry-run", "--train"]) == 0
    out = capsys.readouterr().out
    assert "organisms not trained yet" in out and "organism-olmo" in out and "0 to measure" in out
    assert "headwatch organisms train --panel organisms --models organism-olmo" in out and "nothing to measure" not in out
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "headwatch organisms train --panel organisms --models organism-olmo --cache-dir" in err and "--train" in err
    assert not (tmp_path / "org").exists() or not any((tmp_path / "org").rglob("*.safetensors"))
