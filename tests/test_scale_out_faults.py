"""The fan-out's failures end in a clear answer (docs/hostile-inputs.md, "Scale-out").

- ``--executor slurm`` where no Slurm cluster answers: bad input (exit 2) saying so, and no false
  "jobs keep running ... scancel" line (nothing was submitted).
- ``--executor ray`` without ``--address`` while a ``ray start`` cluster runs on the machine: this
  run starts its own local cluster (plain ``ray.init()`` joined that one and refused ``num_cpus``:
  exit 3).
- A task Ray retried reports its real attempt count (``summary.json``): see
  tests/test_fanout_engines.py::test_ray_reruns_a_task_whose_worker_was_killed_mid_task.
- A 502 from the weights host keeps its status and URL in the task's reason: see
  tests/test_hub_server.py::test_a_failing_weights_host_keeps_its_status_and_url_in_the_task_reason.
- The Slurm executor against a real one-node Slurm: tests/test_slurm.py.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from headwatch.fanout.executors import ExecutorError, SlurmArray
from headwatch.fanout.tasks import MeasureTask
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import ProviderOptions

def test_slurm_without_a_cluster_is_bad_input_without_a_false_scancel_line(headwatch_cli, tmp_path, checkpoint,
                                                                           monkeypatch, copied_local_panel):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no srun, no sbatch on this PATH: no Slurm here
    panel = copied_local_panel(tmp_path, checkpoint)
    r = headwatch_cli("measure-panel", "--panel", panel, "--executor", "slurm", "--device", "cpu",
                      "--cache-dir", tmp_path / "cache", "--log-dir", tmp_path / "logs")
    assert r.code == 2, r.err[-2000:]
    assert "srun" in r.err and "Slurm login node" in r.err and "Traceback" not in r.err, r.err[-2000:]
    assert "scancel" not in r.err and "keep running" not in r.err, r.err


def test_a_failed_submission_is_named_and_no_job_is_said_to_keep_running(tmp_path, capsys, monkeypatch, checkpoint,
                                                                         copied_local_panel):
    pm = load_panel(copied_local_panel(tmp_path, checkpoint)).models[0]
    task = MeasureTask(pm, "step0", ProviderOptions(cache_dir=tmp_path / "c", device="cpu", progress=False))
    array = SlurmArray(folder=tmp_path / "logs", poll_seconds=0)

    def refused(n_tasks):
        raise ExecutorError("Slurm refused the array job (sbatch: error: Unable to contact slurm controller)")

    monkeypatch.setattr(array, "executor", refused)
    with pytest.raises(ExecutorError, match="Unable to contact slurm controller"):
        array.run([task], report=lambda r: None)
    assert "keep running" not in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.mostly_waits  # on `ray start` and its cluster: it runs first, beside organism training, unniced
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'headwatch[ray]')")
def test_ray_without_address_starts_its_own_cluster_beside_a_ray_start_one(tmp_path, checkpoint, copied_local_panel):
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        pytest.skip(f"the ray command is not installed beside {sys.executable}")
    # Ray's address file and sockets live under RAY_TMPDIR: this test's own, so that no other run on
    # the machine finds this cluster (and the socket paths stay short enough for Unix sockets).
    ray_tmp = tempfile.mkdtemp(prefix="hwray", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "HF_HUB_OFFLINE": "1"}
    head = subprocess.Popen([str(ray_bin), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", "0",
                             "--num-cpus", "1", "--include-dashboard", "false", "--block"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        address_file = Path(ray_tmp) / "ray" / "ray_current_cluster"
        deadline = time.time() + 240
        while not address_file.exists() and time.time() < deadline:
            assert head.poll() is None, head.stderr.read().decode()[-2000:]
            time.sleep(0.5)
        assert address_file.exists(), "ray start did not come up"
        panel = copied_local_panel(tmp_path, checkpoint, ("step0", "step10"))
        run = subprocess.run([str(Path(sys.executable).with_name("headwatch")), "measure-panel", "--panel", str(panel),
                              "--executor", "ray", "--workers", "1", "--device", "cpu", "--cache-dir",
                              str(tmp_path / "cache"), "--log-dir", str(tmp_path / "logs")],
                             env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
        summary = json.loads((tmp_path / "logs" / "summary.json").read_text())
        assert [r["status"] for r in summary["results"]] == ["computed", "computed"]
        assert [r["attempt"] for r in summary["results"]] == [1, 1]
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'headwatch[ray]')")
def test_an_address_where_nothing_answers_is_refused_at_once():
    """ray.init on a dead host:port retried for minutes; nothing listening there is named in seconds."""
    from headwatch.fanout.executors import RayExecutor

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    started = time.monotonic()
    with pytest.raises(ExecutorError, match=f"--address 127.0.0.1:{port}: nothing answers there"):
        RayExecutor(address=f"127.0.0.1:{port}")._init()
    assert time.monotonic() - started < 30
