"""The Slurm executor against a real Slurm: a one-node cluster started here on loopback.

The test writes a ``slurm.conf`` into a temporary folder (its own ports, ``auth/none``: one machine,
one user), starts ``slurmctld`` and ``slurmd`` as child processes and stops them afterwards. Through
``SlurmArray`` (submitit's SlurmExecutor, ``sbatch``) it submits one array job of four measurements
throttled to two at a time (``--array=0-3%2``), requeues one task while it is measuring (``scontrol
requeue``, what preemption does), and checks that the run ends with the cache complete and the
requeued task's result saying it ran twice.

Skipped, naming what is missing, where Slurm's daemons or commands are not installed (Debian:
``apt-get install slurmd slurmctld``) or submitit is not.
"""
from __future__ import annotations

import getpass
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from headwatch.fanout.executors import SlurmArray
from headwatch.fanout.tasks import plan_panel
from headwatch_testing.faults import SlowMeasure
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import ProviderOptions
from headwatch.probes.record import MeasurementRecord

BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "srun", "sinfo", "scancel")
MISSING = [b for b in BINARIES if shutil.which(b) is None]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.mostly_waits,  # on slurmd and the queue: it runs first, beside organism training, unniced
    pytest.mark.skipif(bool(MISSING), reason=f"Slurm is not installed here (no {', '.join(MISSING)}; Debian: "
                                             "apt-get install slurmd slurmctld)"),
    pytest.mark.skipif(importlib.util.find_spec("submitit") is None,
                       reason="submitit is not installed (pip install 'headwatch[slurm]')"),
]

N = 4
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(folder: Path) -> str:
    host = socket.gethostname().split(".")[0]
    user = getpass.getuser()
    return f"""\
ClusterName=headwatch-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/none
CredType=cred/none
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MpiDefault=none
MailProg=/bin/true
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.fixture(scope="module")
def slurm():
    """A one-node Slurm on 127.0.0.1 (its own ports and files), up for this module's tests."""
    folder = Path(tempfile.mkdtemp(prefix="hwslurm", dir="/tmp"))  # short: Slurm's paths, the sockets
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder))
    mp = pytest.MonkeyPatch()
    mp.setenv("SLURM_CONF", str(conf))  # every Slurm command of this process and its children
    daemons = [subprocess.Popen([shutil.which(d), "-D", "-f", str(conf)], stdout=open(folder / f"{d}.out", "w"),
                                stderr=subprocess.STDOUT, start_new_session=True) for d in ("slurmctld", "slurmd")]
    try:
        deadline = time.time() + 90
        while _run("sinfo", "-h", "-o", "%T") != "idle":
            assert all(d.poll() is None for d in daemons), (folder / "slurmctld.out").read_text()[-2000:]
            assert time.time() < deadline, f"the node never came up: {_run('sinfo')}"
            time.sleep(0.5)
        yield SimpleNamespace(folder=folder, conf=conf)
    finally:
        jobs = _run("squeue", "-h", "-o", "%A").split()
        if jobs:
            subprocess.run(["scancel", *sorted(set(jobs))], capture_output=True, timeout=60)
        for d in reversed(daemons):
            d.send_signal(signal.SIGTERM)
            try:
                d.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(d.pid, signal.SIGKILL)
        mp.undo()
        shutil.rmtree(folder, ignore_errors=True)


def test_an_array_job_is_submitted_throttled_and_a_preempted_task_requeued(slurm, tmp_path, checkpoint, monkeypatch,
                                                                            copied_local_panel):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    log = tmp_path / "starts.log"
    options = ProviderOptions(cache_dir=tmp_path / "cache", device="cpu", progress=False,
                              measure_fn=SlowMeasure(str(log), delay=10.0))
    revisions = tuple(f"step{10 * i}" for i in range(N))
    plan = plan_panel(load_panel(copied_local_panel(tmp_path, checkpoint, revisions)).models, options)
    assert len(plan.tasks) == N
    array = SlurmArray(folder=tmp_path / "submitit", workers=2, cpus_per_task=1, gpus_per_task=0, time_min=30,
                       poll_seconds=1.0, retries=0)
    out: dict = {}
    runner = threading.Thread(target=lambda: out.update(results=array.run(plan.tasks, report=lambda r: None)))
    runner.start()

    seen = SimpleNamespace(array=None, throttle=None, most_running=0, requeued=None, released=False)
    deadline = time.time() + 900
    while runner.is_alive() and time.time() < deadline:
        running = _run("squeue", "-h", "-t", "R", "-o", "%i").split()
        seen.most_running = max(seen.most_running, len(running))
        ids = _run("squeue", "-h", "-o", "%F").split()
        if ids and seen.array is None:
            seen.array = ids[0]
            seen.throttle = _run("scontrol", "show", "job", seen.array)
        starts = log.read_text().splitlines() if log.exists() else []
        if seen.requeued is None and running and len(starts) >= len(running):  # all running ones are measuring
            seen.requeued = running[0]
            subprocess.run(["scontrol", "requeue", seen.requeued], check=True, capture_output=True, timeout=60)
        elif seen.requeued and not seen.released:
            # Slurm holds a requeued job back ~2 minutes (its begin time); let it go at once
            reason = _run("squeue", "-h", "-j", seen.requeued, "-o", "%T %r")
            if reason == "PENDING BeginTime":
                subprocess.run(["scontrol", "update", f"JobId={seen.requeued}", "StartTime=now"], capture_output=True,
                               timeout=60)
                seen.released = True
        time.sleep(0.5)
    runner.join(60)
    assert "results" in out, f"the array did not finish in time: {_run('squeue')}"
    results = out["results"]

    assert seen.array is not None and "ArrayTaskThrottle=2" in seen.throttle, seen.throttle
    assert seen.most_running <= 2, seen.most_running  # throttled: never more than --workers at once
    assert seen.requeued is not None and seen.released
    index = int(seen.requeued.split("_")[1])
    requeued_revision = plan.tasks[index].revision
    starts = [line.split()[1] for line in log.read_text().splitlines()]
    assert starts.count(requeued_revision) == 2, starts  # killed mid-measurement, run again by Slurm
    assert all(r.ok for r in results), [r.error for r in results]
    assert {r.label: r.attempt for r in results} == {t.label: 2 if t.revision == requeued_revision else 1
                                                     for t in plan.tasks}
    entries = sorted((tmp_path / "cache" / "measurements").glob("*/*.json"))
    assert len(entries) == N and not list((tmp_path / "cache" / "measurements").glob("*/.*.tmp"))
    revisions = sorted(MeasurementRecord.from_dict(json.loads(e.read_text())["record"]).revision for e in entries)
    assert revisions == sorted(t.revision for t in plan.tasks)
    assert not plan_panel(load_panel(tmp_path / "p.toml").models, options).tasks  # the cache is complete
    print(f"slurm: array job {seen.array} of {N} tasks (%2), at most {seen.most_running} running; requeued "
          f"{seen.requeued} ({requeued_revision}) mid-measurement; starts {starts}; attempts "
          f"{ {r.label: r.attempt for r in results} }; cache entries {[e.name for e in entries]}")


def _cancel_once_measuring(log: Path, runner: threading.Thread, deadline: float) -> str | None:
    """Wait until an array task is measuring (its start logged), then `scancel` that one task; its id."""
    while runner.is_alive() and time.time() < deadline:
        running = _run("squeue", "-h", "-r", "-t", "R", "-o", "%i").split()
        starts = log.read_text().splitlines() if log.exists() else []
        if running and len(starts) >= len(running):
            subprocess.run(["scancel", running[0]], check=True, capture_output=True, timeout=60)
            return running[0]
        time.sleep(0.5)
    return None


def test_a_cancelled_array_task_without_accounting_is_found_retried_and_reported(slurm, tmp_path, checkpoint,
                                                                                 monkeypatch, copied_local_panel):
    """This cluster keeps no accounting (accounting_storage/none): ``sacct`` cannot tell submitit that a
    cancelled array task ended, so the run watches ``squeue``. A task cancelled mid-measurement
    (``scancel 123_0``) is found gone without a result, said in a line, resubmitted, and its result
    says it took two attempts; with no retries left the task is reported failed with the reason,
    and the run ends instead of waiting forever (issue 33)."""
    from headwatch.fanout.executors import slurm_accounting

    has, why = slurm_accounting()
    assert not has and "accounting" in why.lower(), why
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def run_array(revisions: tuple[str, ...], retries: int, name: str):
        log = tmp_path / f"{name}.log"
        options = ProviderOptions(cache_dir=tmp_path / f"cache-{name}", device="cpu", progress=False,
                                  measure_fn=SlowMeasure(str(log), delay=8.0))
        plan = plan_panel(load_panel(copied_local_panel(tmp_path / name, checkpoint, revisions)).models, options)
        said: list[str] = []
        array = SlurmArray(folder=tmp_path / f"submitit-{name}", workers=2, cpus_per_task=1, gpus_per_task=0,
                           time_min=30, poll_seconds=1.0, retries=retries, vanished_seconds=3.0, say=said.append)
        out: dict = {}
        runner = threading.Thread(target=lambda: out.update(results=array.run(plan.tasks, report=lambda r: None)))
        runner.start()
        cancelled = _cancel_once_measuring(log, runner, time.time() + 600)
        runner.join(600)
        assert "results" in out, f"the run did not end: {_run('squeue')}; said {said}"
        return plan, out["results"], cancelled, said

    plan, results, cancelled, said = run_array(("step0", "step10"), retries=1, name="retried")
    assert cancelled is not None
    gone = plan.tasks[int(cancelled.split("_")[1])].label
    assert said[0].startswith("slurm: no job accounting here (") and "squeue is watched instead" in said[0]
    assert any(line.startswith(f"slurm: {gone}: Slurm array task {cancelled} left the queue without a result")
               and line.endswith("resubmitting (attempt 2 of 2)") for line in said), said
    assert all(r.ok for r in results), [r.error for r in results]
    assert {r.label: r.attempt for r in results} == {t.label: 2 if t.label == gone else 1 for t in plan.tasks}

    plan, results, cancelled, said = run_array(("step0",), retries=0, name="reported")
    (only,) = results
    assert cancelled is not None and not only.ok and only.attempt == 1
    assert f"Slurm array task {cancelled} left the queue without a result" in only.error and "tried 1 time(s)" in only.error
    print(f"slurm without accounting: cancelled {cancelled}; said {said}; {only.error}")
