"""The fan-out on the real engines: a local Ray cluster (127.0.0.1) and submitit's LocalExecutor (real
subprocesses). Faults: a Ray worker killed mid-task, a task killed mid-write (Ray and submitit), and
two executors writing one cache at once. In every case the run (or its rerun) completes with every
record present exactly once, equal to a sequential run's.

Ray and submitit are in the ``test`` extra; without them these tests skip, naming the package.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from headwatch.fanout.executors import RayExecutor, SlurmArray
from headwatch.fanout.tasks import TIMING_FIELDS, measured_content, measurement_differences, plan_panel
from headwatch_testing.faults import DieMidWrite, SlowMeasure
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch_testing.tinypanel import write_tiny_hub_panel

# find_spec, not import: Ray must be imported only after RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 is set,
# or its local cluster binds to the machine's network address instead of 127.0.0.1.
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray is not installed (pip install 'headwatch[ray]')")
needs_submitit = pytest.mark.skipif(importlib.util.find_spec("submitit") is None,
                                    reason="submitit is not installed (pip install 'headwatch[slurm]')")
# A Ray cluster and submitit's local jobs: they run first, beside organism training, before the
# process yields the CPU to it (a starved raylet times out while starting).
pytestmark = [pytest.mark.slow, pytest.mark.mostly_waits]

N = 4


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> Path:
    return write_tiny_hub_panel(tmp_path_factory.mktemp("panel"), n=N)


@pytest.fixture(scope="module")
def expected(panel, tmp_path_factory) -> dict[str, dict]:
    """A sequential, in-process run's records (what pytest alone would measure), by revision."""
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    try:
        provider = Provider(ProviderOptions(cache_dir=tmp_path_factory.mktemp("seq"), device="cpu", progress=False))
        return {r.revision: measured_content(r) for r in provider.model_records(load_panel(panel).models[0])}
    finally:
        mp.undo()


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster on 127.0.0.1 for this module's tests, shut down afterwards."""
    # The cluster's workers inherit this process's environment; set it for the module only, so later
    # tests in this xdist worker do not run offline by accident.
    mp = pytest.MonkeyPatch()
    mp.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before the first import of ray
    mp.setenv("HF_HUB_OFFLINE", "1")
    import ray

    # Its own cluster (never one a `ray start` left running), on loopback: left to itself Ray picks the
    # address of the default route's interface.
    ray.init(address="local", _node_ip_address="127.0.0.1", num_cpus=2, include_dashboard=False,
             log_to_driver=False, object_store_memory=128 * 2**20, configure_logging=False)
    try:
        assert ray.util.get_node_ip_address() == "127.0.0.1"
        yield ray
    finally:
        ray.shutdown()
        mp.undo()


def check_cache(cache: Path, expected: dict[str, dict]) -> None:
    """Every record once, each a whole entry equal to the sequential run's."""
    files = sorted((cache / "measurements").glob("*/*.json"))
    assert len(files) == N, [f.name for f in files]
    got = {}
    for f in files:
        rec = json.loads(f.read_text())["record"]
        rec["provenance"] = {k: v for k, v in rec["provenance"].items() if k not in TIMING_FIELDS}
        assert rec["revision"] not in got, f"two entries for {rec['revision']}"
        got[rec["revision"]] = rec
    assert not measurement_differences(got, expected), measurement_differences(got, expected)[:5]


def options(cache: Path, measure_fn=None) -> ProviderOptions:
    return ProviderOptions(cache_dir=cache, device="cpu", progress=False, measure_fn=measure_fn)


# ---- Ray --------------------------------------------------------------------------------------------


@needs_ray
def test_ray_reruns_a_task_whose_worker_was_killed_mid_task(ray_cluster, panel, expected, tmp_path):
    cache, log = tmp_path / "c", tmp_path / "starts.log"
    plan = plan_panel(load_panel(panel).models, options(cache, SlowMeasure(str(log), delay=3.0)))
    killed: list[str] = []

    def kill_the_first_started_task() -> None:
        deadline = time.time() + 240
        while time.time() < deadline:
            lines = log.read_text().split("\n") if log.exists() else []
            if lines and lines[0]:
                _, revision, pid = lines[0].split()
                os.kill(int(pid), signal.SIGKILL)  # the Ray worker process, mid-measurement
                killed.append(revision)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_first_started_task)
    killer.start()
    results = RayExecutor(workers=2, retries=2).run(plan.tasks, report=lambda r: None)
    killer.join()
    assert killed, "no task started"
    assert all(r.ok for r in results), [r.error for r in results]
    starts = [line.split()[1] for line in log.read_text().splitlines()]
    assert starts.count(killed[0]) == 2  # Ray ran the killed task again
    attempts = {r.label.split("@")[1]: r.attempt for r in results}
    assert attempts[killed[0]] == 2 and sorted(attempts.values()) == [1] * (N - 1) + [2], attempts  # summary.json's
    check_cache(cache, expected)


@needs_ray
def test_ray_task_killed_mid_write_then_a_rerun_completes(ray_cluster, panel, expected, tmp_path):
    cache = tmp_path / "c"
    plan = plan_panel(load_panel(panel).models, options(cache, DieMidWrite(str(tmp_path / "died"), ("step20",))))
    results = RayExecutor(workers=2, retries=0).run(plan.tasks, report=lambda r: None)  # no retry: it fails
    failed = [r for r in results if not r.ok]
    assert [r.label for r in failed] == ["tiny@step20"] and "Ray gave up" in failed[0].error
    assert len(list((cache / "measurements").glob("*/*.json"))) == N - 1  # nothing of step20 but a temporary

    rerun = plan_panel(load_panel(panel).models, options(cache))  # a rerun plans only what is missing
    assert [t.revision for t in rerun.tasks] == ["step20"]
    assert all(r.ok for r in RayExecutor(workers=2).run(rerun.tasks, report=lambda r: None))
    check_cache(cache, expected)


# ---- submitit's local executor: the Slurm path with real subprocesses -----------------------------------


@needs_submitit
def test_submitit_local_resubmits_a_task_killed_mid_write(panel, expected, tmp_path):
    cache = tmp_path / "c"
    plan = plan_panel(load_panel(panel).models, options(cache, DieMidWrite(str(tmp_path / "died"), ("step10",))))
    array = SlurmArray(folder=tmp_path / "logs", workers=2, cpus_per_task=1, gpus_per_task=0, retries=1,
                       local=True, poll_seconds=0.5)
    results = array.run(plan.tasks, report=lambda r: None)
    assert all(r.ok for r in results), [r.error for r in results]
    assert {r.label: r.attempt for r in results}["tiny@step10"] == 2
    assert len({r.pid for r in results}) == N + 0  # one process per task, as one array task each
    assert len(list((tmp_path / "logs").glob("*_log.err"))) >= N  # per-task logs
    check_cache(cache, expected)


@needs_submitit
def test_submitit_local_interrupted_ends_its_jobs_without_sigint(panel, tmp_path, interrupted_once, pid_alive):
    """Interrupted mid-measurement, the local jobs end (controllers and the tasks they run), though
    they inherited SIGINT ignored, the signal submitit's own cancel sends: the driver kills each
    controller after a grace, and its task, which watches it, ends with it."""
    log = tmp_path / "starts.log"
    plan = plan_panel(load_panel(panel).models[:1], options(tmp_path / "c", SlowMeasure(
        str(log), delay=0, gate=str(tmp_path / "never"), gate_seconds=600)))
    tasks = [t for t in plan.tasks if t.revision in ("step0", "step10")]
    array = SlurmArray(folder=tmp_path / "logs", workers=2, cpus_per_task=1, gpus_per_task=0, local=True,
                       poll_seconds=0.5)

    def task_pids() -> list[int]:
        return [int(line.split()[2]) for line in log.read_text().splitlines()] if log.exists() else []

    with pytest.raises(KeyboardInterrupt), interrupted_once(lambda: len(task_pids()) == 2):
        array.run(tasks, report=lambda r: None)
    assert len(task_pids()) == 2
    deadline = time.monotonic() + 10  # each task sees its controller gone within a second
    while any(pid_alive(pid) for pid in task_pids()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(pid) for pid in task_pids())


# ---- two executors, one cache -----------------------------------------------------------------------


RACER = """
import json, sys
from headwatch.fanout.executors import RayExecutor, SlurmArray
from headwatch.fanout.tasks import plan_panel
from headwatch_testing.faults import SlowMeasure
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import ProviderOptions
kind, panel, cache, log, gate, logs = sys.argv[1:]
opts = ProviderOptions(cache_dir=cache, device="cpu", progress=False, measure_fn=SlowMeasure(log, delay=0, gate=gate))
plan = plan_panel(load_panel(panel).models, opts)
ex = RayExecutor(workers=2) if kind == "ray" else SlurmArray(folder=logs, workers=2, cpus_per_task=1, gpus_per_task=0,
                                                            local=True, poll_seconds=0.5)
print(json.dumps([r.to_dict() for r in ex.run(plan.tasks, lambda r: None)]))
"""


@needs_ray
@needs_submitit
def test_two_executors_writing_one_cache_at_once(panel, expected, tmp_path):
    """Ray and submitit's local executor measure the same panel into the same cache at the same time,
    each as if on its own machine (separate lock folders). Both plan every revision; the first two
    tasks of each are held mid-measurement until all four are in flight, so both write step0 and
    step10. The cache ends with one whole entry per revision and no partial file."""
    cache, log, gate = tmp_path / "c", tmp_path / "starts.log", tmp_path / "go"
    procs = []
    for kind in ("ray", "submitit"):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HEADWATCH_LOCK_DIR": str(tmp_path / f"locks-{kind}")}
        procs.append(subprocess.Popen(
            [sys.executable, "-c", RACER, kind, str(panel), str(cache), str(log), str(gate), str(tmp_path / "logs")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.time() + 400
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 4):
        assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs]
        time.sleep(0.2)
    gate.write_text("")  # four tasks in flight, two per executor: let them all write
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    results = [r for out, _ in outs for r in json.loads(out.strip().splitlines()[-1])]
    assert all(r["status"] != "failed" for r in results), results
    written = sum(r["status"] == "computed" for r in results)
    assert written >= N + 2, written  # step0 and step10 at least were written by both
    assert not list((cache / "measurements").glob("*/.*.tmp"))  # no partial file left
    check_cache(cache, expected)
