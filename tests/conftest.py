"""Helpers shared by the files in tests/ (pytest loads this file by path; nothing imports it).

- torch runs on one thread here (below: why).
- Ray, wherever a test imports it, keeps its clusters on loopback (below: why).
- The test harness ``headwatch_testing`` (``testing/``, not installed) is on ``sys.path`` through
  pyproject's ``pythonpath``; here it goes on ``PYTHONPATH`` too, so that the processes tests start
  (pool, Ray and submitit workers that unpickle a fault, ``python -c`` and pytest children) find it.

- ``capture_parity``: the one parity check of the capture pass, used by ``test_capture.py`` (the
  tiny models of every architecture) and ``test_miniatures.py`` (the config-faithful miniatures of
  the paper's models).
- ``measure_step0``: a saved miniature measured the way the suite measures any local checkpoint,
  used by ``test_miniatures.py`` and ``test_memory.py``.
- ``tiny_probe``: the ``[models.probe]`` table of a panel over the tiny models.
- the command line in this process (``headwatch_cli``), a folder nobody can write to, a tiny
  checkpoint, a tiny local run and a panel naming it, and a guard that no organism trains.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import headwatch_testing
import pytest
import torch
from headwatch_testing.tinypanel import TINY_PROBE_TOML

from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch.probes.architectures import head_geometry, out_proj_modules
from headwatch.probes.capture import capturing
from headwatch.probes.record import MeasurementRecord

# The tests' models are tiny: a second intra-op thread only spins. Measured on the 2-core machine,
# `pytest tests -m "not slow"` took 62 s of CPU with torch's default two threads and 42 s with one.
# One thread in this process, as each xdist worker of `-n 2` gets from the plugin anyway.
torch.set_num_threads(1)

# Ray reads this once, when it is first imported; a cluster started later in the process obeys what
# it read then, and even ray.init(_node_ip_address="127.0.0.1") came up on the default route's address
# (measured: 192.0.2.2) after an earlier import without it. Any test may be the first to import Ray
# in its xdist worker (tests that need no organism run in whatever order the scheduler frees them),
# so it is set for the whole session: the suite's Ray clusters are all local.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
    [str(headwatch_testing.PATH_ENTRY), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))

def pytest_collection_modifyitems(config, items):
    """The real-tiny tier (tests marked ``real_tiny``: minutes each, PyPI downloads on first use) runs only
    when ``-m`` names it (``pytest tests -m real_tiny``); any other run leaves it out, deselected."""
    if "real_tiny" in (config.option.markexpr or ""):
        return
    keep = [item for item in items if item.get_closest_marker("real_tiny") is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("real_tiny")])
        items[:] = keep


#: The parity bound (float32) on attention rows and head outputs: issue 16, every architecture.
PARITY_BOUND = 1e-5
#: Logits pass through every later layer and the head: a looser bound.
LOGITS_BOUND = 1e-4


@dataclass(frozen=True)
class CaptureParity:
    """Max |difference| of the capture pass against the eager references, on one batch."""

    bound: ClassVar[float] = PARITY_BOUND
    #: Query-row attention [B, L, H, T] vs eager ``output_attentions``.
    rows_vs_eager: float
    #: Head outputs [B, L, H, D] vs an out-projection forward pre-hook on the eager pass.
    heads_vs_eager_hook: float
    #: Head outputs vs the same hook on the capture pass itself.
    heads_vs_capture_hook: float
    #: Logits [B, T, V] of the capture pass vs the eager pass.
    logits_vs_eager: float
    #: Shape of the captured rows, [B, L, H, T].
    rows_shape: tuple[int, ...]
    #: max |head output| of the capture pass (what a head-output difference is relative to).
    head_output_scale: float

    def assert_within(self) -> None:
        """Rows and head outputs within ``bound``, logits within ``LOGITS_BOUND``."""
        for name in ("rows_vs_eager", "heads_vs_eager_hook", "heads_vs_capture_hook"):
            assert getattr(self, name) <= self.bound, (name, self)
        assert self.logits_vs_eager <= LOGITS_BOUND, self


def capture_parity(model, tokens: torch.Tensor) -> CaptureParity:
    """Run ``model`` on ``tokens`` [B, T] eagerly (``output_attentions``, out-projection hooks) and
    through ``capturing``, and compare; the model's attention implementation is restored."""
    g = head_geometry(model)
    B = tokens.shape[0]
    hooked: dict[int, torch.Tensor] = {}

    def hook_all():
        return [proj.register_forward_pre_hook(lambda _m, args, i=i: hooked.__setitem__(i, args[0][:, -1].clone()))
                for i, proj in enumerate(out_proj_modules(model))]

    def stacked_hooks() -> torch.Tensor:
        return torch.stack([hooked[l].view(B, g.n_heads, g.d_head) for l in range(g.n_layers)], dim=1)

    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    handles = hook_all()
    with torch.no_grad():
        eager = model(tokens, output_attentions=True)
    for h in handles:
        h.remove()
    eager_hooks = stacked_hooks()
    hooked.clear()
    handles = hook_all()
    with torch.no_grad(), capturing(model) as recorder:
        logits = model(tokens).logits
    for h in handles:
        h.remove()
    model.set_attn_implementation(previous)
    rows, outputs = recorder.stacked(g.n_layers)
    eager_rows = torch.stack([a[:, :, -1, :] for a in eager.attentions], dim=1)
    return CaptureParity(
        rows_vs_eager=float((rows - eager_rows).abs().max()),
        heads_vs_eager_hook=float((outputs - eager_hooks).abs().max()),
        heads_vs_capture_hook=float((outputs - stacked_hooks()).abs().max()),
        logits_vs_eager=float((logits - eager.logits).abs().max()),
        rows_shape=tuple(rows.shape),
        head_output_scale=float(outputs.abs().max()),
    )


@pytest.fixture(name="capture_parity")
def capture_parity_fixture():
    """:func:`capture_parity` (a test file cannot import this conftest under importlib mode)."""
    return capture_parity




@pytest.fixture(name="tiny_probe")
def tiny_probe_fixture() -> str:
    """:data:`TINY_PROBE_TOML`, the ``[models.probe]`` table of a panel over tiny models."""
    return TINY_PROBE_TOML


#: Probe settings for the miniatures: the paper's token range (ids 100-9999, which the real
#: vocabulary holds), 12 examples of 64 tokens.
MINIATURE_PROBE = """
[models.probe]
n_examples = 12
seq_len = 64
vocab_lo = 100
vocab_hi = 10000
n_pr = 12
batch_size = 6
"""


def measure_step0(folder: Path, cache_dir: Path) -> MeasurementRecord:
    """The record of the checkpoint saved in ``folder/step0``, measured on the CPU through a
    one-model local panel (written beside ``cache_dir``) by a fresh session caching in ``cache_dir``."""
    panel = cache_dir.with_suffix(".toml")
    panel.write_text(f'[[models]]\nname = "{folder.name}"\nrepo = "{folder}"\nsource = "local"\n'
                     f'revisions = ["step0"]\ntokens = {{ per_step = 1 }}\n{MINIATURE_PROBE}')
    session = Provider(ProviderOptions(cache_dir=cache_dir, device="cpu", progress=False))
    (record,) = session.model_records(load_panel(panel).models[0])
    return record


@pytest.fixture(name="measure_step0")
def measure_step0_fixture():
    """:func:`measure_step0`."""
    return measure_step0

# ---- the command line and folders a user cannot write (fail-loud tests) ---------------------------


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def headwatch_cli(capsys):
    """``headwatch ARGV`` in this process, as a user runs it: (exit code, stdout, stderr), argparse's
    own exits included."""
    from headwatch.cli import main

    def run(*argv: str) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@contextmanager
def sigint_ignored():
    """SIGINT ignored in this process meanwhile, so that the processes started inside inherit it
    ignored: as every process of a background job of a non-interactive shell (``cmd &`` in a
    script, ``nohup``-style CI runners) does, where Python raises no KeyboardInterrupt."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(name="sigint_ignored")
def sigint_ignored_fixture():
    return sigint_ignored


@contextmanager
def interrupted_once(ready, timeout: float = 240.0):
    """Run the block with SIGINT ignored (inherited so by the processes it starts, as from a
    background job) and interrupt it once ``ready()`` holds: SIGTERM to this process, taken as
    Ctrl-C (KeyboardInterrupt), as a front end or CI stops a run whose SIGINT never arrives."""
    def as_ctrl_c(signum, frame):
        raise KeyboardInterrupt

    def interrupt() -> None:
        deadline = time.monotonic() + timeout
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, as_ctrl_c)
    try:
        with sigint_ignored():
            threading.Thread(target=interrupt, daemon=True).start()
            yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(name="interrupted_once")
def interrupted_once_fixture():
    return interrupted_once


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie nobody reaped does not: it holds nothing)."""
    if not Path("/proc/self/stat").is_file():  # no /proc: ask the kernel (a zombie counts as alive)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):  # every thread: a zombie leader may have live ones
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:
            continue
    return any(state not in ("Z", "X") for state in states)


@pytest.fixture(name="pid_alive")
def pid_alive_fixture():
    return pid_alive


@pytest.fixture
def unwritable_dir(tmp_path):
    """A folder no new file can be made in: mode 0500 for an ordinary user; root writes anywhere,
    so for root the folder is made immutable (chattr +i)."""
    folder = tmp_path / "unwritable"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
        yield folder
        folder.chmod(0o700)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("running as root, and `chattr +i` (needed to make a folder root cannot write) is unavailable")
    try:
        yield folder
    finally:
        subprocess.run([chattr, "-i", str(folder)], capture_output=True)


@pytest.fixture
def read_only_tree():
    """``make(root)``: no file can be created or removed anywhere under ``root`` any more (folders
    0555 for an ordinary user; for root, which writes anywhere, every folder ``chattr +i``), as on a
    read-only mount; undone after the test."""
    done: list[Path] = []
    chattr = shutil.which("chattr")

    def make(root: Path) -> None:
        folders = [root, *(p for p in root.rglob("*") if p.is_dir())]
        for folder in folders:
            if os.geteuid() != 0:
                folder.chmod(0o555)
            elif chattr is None or subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode != 0:
                pytest.skip("running as root, and `chattr +i` (needed to make a folder root cannot write) is unavailable")
            done.append(folder)

    yield make
    for folder in reversed(done):
        if os.geteuid() != 0:
            folder.chmod(0o755)
        else:
            subprocess.run([chattr, "-i", str(folder)], capture_output=True)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny GPTNeoX saved as a local checkpoint folder (``.../run/step0``) for the CLI tests."""
    from headwatch_testing.tiny import tiny_model

    folder = tmp_path_factory.mktemp("run") / "step0"
    tiny_model("gpt_neox", seed=0, attn_implementation="eager").save_pretrained(folder)
    return folder


def copied_local_panel(folder: Path, checkpoint: Path, revisions: tuple[str, ...] = ("step0",)) -> Path:
    """A local panel ``folder/p.toml`` over copies of ``checkpoint`` as ``folder/run/<revision>``
    (one per revision, so that they can be broken or measured apart), probed with :data:`TINY_PROBE_TOML`."""
    import json

    for r in revisions:
        if not (folder / "run" / r).exists():
            shutil.copytree(checkpoint, folder / "run" / r)
    path = folder / "p.toml"
    path.write_text(f'[[models]]\nname = "tiny"\nrepo = "{folder / "run"}"\nsource = "local"\n'
                    f'revisions = {json.dumps(list(revisions))}\ntokens = {{ per_step = 10 }}\n{TINY_PROBE_TOML}')
    return path


@pytest.fixture(name="copied_local_panel")
def copied_local_panel_fixture():
    """:func:`copied_local_panel`."""
    return copied_local_panel


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    """A local training run of two tiny GPTNeoX checkpoints, ``.../step0`` and ``.../step100``
    (headwatch_testing.tinypanel.save_local_run)."""
    from headwatch_testing.tinypanel import save_local_run

    return save_local_run(tmp_path_factory.mktemp("run"))


@pytest.fixture
def local_panel_file(tmp_path, local_run) -> Path:
    """A panel file naming :func:`local_run` (source = "local", probe settings that fit it)."""
    from headwatch_testing.tinypanel import local_panel_text

    path = tmp_path / "p.toml"
    path.write_text(local_panel_text(local_run, panel_name="exits-local"))
    return path


@pytest.fixture
def never_trains(monkeypatch):
    """Fail the test if an organism starts training (in this process, or as a step of its own)."""
    from headwatch.model_organisms import runner

    def train(*args, **kwargs):
        raise AssertionError("an organism started training without --train")

    monkeypatch.setattr(runner, "train_in_subprocesses", train)
    monkeypatch.setattr(runner.TrainingStep, "start", train)
