"""How many torch threads a test process takes: one rule for plain pytest and for xdist workers.

torch starts one thread per core in every process. Two xdist workers on two cores would each run
two threads (probing's small matrix products then run about 4x slower than with one thread each),
and on a machine already busy with other work even one process's two threads lose: OpenMP threads
spin at every parallel region while the other core is taken (docs/benchmarks.md, "Where the time
goes": at load 7-11 two threads took 0.88-1.77 CPU-s per example pass, one thread 0.49-0.54). So a
process takes its share of the usable cores, and one thread when the machine is already loaded.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from dataclasses import dataclass

#: An explicit thread count in the environment wins over the rule (the user chose).
THREAD_ENV = ("HEADWATCH_THREADS", "OMP_NUM_THREADS")


@dataclass(frozen=True)
class ThreadChoice:
    """The threads chosen and why, for the session header."""

    threads: int
    reason: str


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, which a container or taskset narrows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def choose_threads(processes: int, cores: int, load: float | None, env: dict[str, str] | None = None) -> ThreadChoice:
    """The torch threads for one of ``processes`` test processes on ``cores`` usable cores, with
    the machine's one-minute load average ``load`` taken before the session starts (None: unknown).

    An explicit count in :data:`THREAD_ENV` is kept. Otherwise each process takes cores // processes
    (at least 1), and 1 where the load already fills the cores.
    """
    env = os.environ if env is None else env
    for name in THREAD_ENV:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) >= 1:
            return ThreadChoice(int(value), f"{name}={value}")
    processes = max(1, processes)
    share = max(1, cores // processes)
    if share > 1 and load is not None and load >= cores:
        return ThreadChoice(1, f"{cores} usable cores already loaded (load {load:.1f}): one thread is faster")
    return ThreadChoice(share, f"{cores} usable cores / {processes} process{'es' if processes > 1 else ''}")


def machine_load() -> float | None:
    """The one-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


class _ThreadsOnImport(importlib.abc.MetaPathFinder):
    """Sets torch's threads the moment torch is imported (once), by wrapping its loader."""

    def __init__(self, threads: int):
        self.threads = threads

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 - importlib's protocol
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load, threads = spec.loader.exec_module, self.threads

        def exec_module(module):  # noqa: ANN001, ANN202
            load(module)
            module.set_num_threads(threads)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def set_torch_threads(threads: int) -> None:
    """torch takes ``threads`` threads in this process: now if torch is imported, else as it is imported.

    A process that never uses torch (pytest judging recorded measurements) so never pays its import
    (about 1.3 CPU-s) just to set a count.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
        return
    for finder in [f for f in sys.meta_path if isinstance(f, _ThreadsOnImport)]:
        sys.meta_path.remove(finder)  # the latest choice wins
    sys.meta_path.insert(0, _ThreadsOnImport(threads))
