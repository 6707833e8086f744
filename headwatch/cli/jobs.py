"""``--jobs``: a command's independent per-model work spread over processes, its output as with one.

``headwatch judge`` and ``headwatch report`` read each model's records and judge its claims on their
own; nothing a model's work needs comes from another model. :class:`InOrder` runs that work, one
model per task, in a pool of worker processes and hands the results back in the models' order, so
the caller prints, gathers and writes exactly what it does with ``--jobs 1``, which runs the same
work in this process, one model after the other. Whatever needs several models (a population's
claims over its members, a report's tables) runs afterwards, here, on the gathered results.

What a worker's work says on the side (warnings, log lines, a claim that prints) is kept with its
result and said here, in its turn, as one process would say it. A model whose work raises raises
here in its turn: the same error and exit code as with one process. A model the work cannot finish
in a worker (:class:`~headwatch.fixtures.provider.NeedsMeasuring`: a revision to measure, which
loads a checkpoint) is done here, as with one process.

Workers are forked where that is safe (Linux, this process has one thread and has not imported
torch: the judge does not need it), so they start at once with what this process loaded; else
spawned. They ignore SIGINT (a terminal's Ctrl-C reaches this process, which stops them), end on
SIGTERM whatever they inherited, and end with this process if it is killed
(:mod:`headwatch.processes`): none outlives the command.
"""
from __future__ import annotations

import contextlib
import io
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from headwatch import validation
from headwatch.names import duration
from headwatch.processes import default_sigterm, end_pool_workers, watch_parent
from headwatch.validation import EnvironmentProblem, InputError, input_error_from

#: Below this many revisions in a selection the default is one process: starting workers would cost
#: about what they save (a spawned worker imports the claims for about 2 s; a record judges in about 5 ms).
PARALLEL_FROM_REVISIONS = 1000
#: A run says how far it got once it has taken this long (seconds), then every PROGRESS_SECONDS.
PROGRESS_AFTER = 10.0
PROGRESS_SECONDS = 10.0
#: Seconds stopped workers get to end on SIGTERM before they are killed.
STOP_GRACE = 5.0

#: What --jobs may be.
JOBS = validation.integer(1, allowed="a number of processes >= 1 (1: everything in this process)")
JOBS_HELP = ("processes that read and judge models at once, one model each (the output is the same as with 1, "
             "which judges in this process); default: one per usable core, at most one per model, and 1 for a "
             f"selection of fewer than {PARALLEL_FROM_REVISIONS:,} revisions")


def add_option(parser: Any) -> None:
    """``--jobs N`` (judge and report take the same)."""
    parser.add_argument("--jobs", type=validation.argtype(JOBS, "--jobs"), default=None,
                        metavar="N", help=JOBS_HELP)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask; the machine's count where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def jobs_for(requested: int | None, models: Sequence[Any]) -> int:
    """How many processes judge ``models`` (panel models): ``requested`` (``--jobs``), at most one per
    model; by default one per usable core for a selection of at least :data:`PARALLEL_FROM_REVISIONS`
    revisions, else 1."""
    if requested is None:
        revisions = sum(len(m.sorted_revisions) for m in models)
        requested = usable_cores() if revisions >= PARALLEL_FROM_REVISIONS else 1
    return max(1, min(requested, len(models)))


def start_method() -> str:
    """``fork`` where a forked worker is safe and starts at once with what this process loaded: Linux,
    one thread here (a lock another thread holds would stay locked in the child), torch not imported
    (its thread pools do not survive a fork); else ``spawn``."""
    if (sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
            and threading.active_count() == 1 and "torch" not in sys.modules):
        return "fork"
    return "spawn"


# ---- progress ---------------------------------------------------------------------------------


class Progress:
    """A long run's progress, one plain line at a time on the command's logger (stderr; no cursor
    escapes, so a CI log reads the same): from :data:`PROGRESS_AFTER` seconds on, every
    :data:`PROGRESS_SECONDS`, "judged 12 of 51 models, about 30 s left"."""

    def __init__(self, total: int, log: logging.Logger, what: str = "judged", unit: str = "models") -> None:
        self.total, self.log, self.what, self.unit = total, log, what, unit
        self.done = 0
        self.started = time.perf_counter()
        self.said = self.started + PROGRESS_AFTER - PROGRESS_SECONDS  # the first line at PROGRESS_AFTER

    def update(self, done: int) -> None:
        self.done = done
        now = time.perf_counter()
        if now - self.said < PROGRESS_SECONDS or not 0 < done < self.total:
            return
        self.said = now
        left = (now - self.started) / done * (self.total - done)
        self.log.info("%s %d of %d %s, about %s left", self.what, done, self.total, self.unit, duration(left))


# ---- what a worker says on the side -------------------------------------------------------------


class _Said:
    """One task's warnings, log records and printed text, in the order it said them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []


class _Stream(io.TextIOBase):
    """A worker's stdout or stderr during a task: kept with the task's result."""

    def __init__(self, name: str, said: _Said) -> None:
        self.name, self.said = name, said

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            self.said.events.append((self.name, text))
        return len(text)


class _Keep(logging.Handler):
    """The worker's log records, kept with the current task's result (formatted here: their args may not pickle)."""

    said: _Said | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.said is None:
            return
        record.msg, record.args = record.getMessage(), None
        if record.exc_info:
            record.exc_text = record.exc_text or logging.Formatter().formatException(record.exc_info)
        record.exc_info = record.stack_info = None
        self.said.events.append(("log", record))


_KEEP = _Keep()


def _module_of(filename: str) -> str | None:
    """The module a warning came from (the filters name modules), found by its file."""
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == filename:
            return name
    return None


@contextlib.contextmanager
def _kept(said: _Said) -> Iterator[None]:
    """Keep what a task says on the side in ``said``: every warning (the main process's filters decide
    which are shown, as they would for its own), log records, stdout and stderr."""
    def keep_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001 - showwarning's
        said.events.append(("warning", (str(message), category, filename, lineno, _module_of(filename))))

    _KEEP.said = said
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(_Stream("stdout", said)), \
                contextlib.redirect_stderr(_Stream("stderr", said)):
            warnings.simplefilter("always")
            warnings.showwarning = keep_warning
            yield
    finally:
        _KEEP.said = None


def _say(said: _Said, registry: dict) -> None:
    """Say here what a worker's task said, in its order: as this process would have said it."""
    for kind, value in said.events:
        if kind == "stdout":
            sys.stdout.write(value)
        elif kind == "stderr":
            sys.stderr.write(value)
        elif kind == "log":
            logger = logging.getLogger(value.name)
            if not logger.disabled:
                logger.handle(value)
        else:
            text, category, filename, lineno, module = value
            warnings.warn_explicit(text, category, filename, lineno, module=module, registry=registry)


# ---- the worker ---------------------------------------------------------------------------------


@dataclass
class _Failed:
    """A task's exception, sent back as its result (one that would not pickle: its class of error and text)."""

    error: BaseException
    trace: str


class RemoteTraceback(Exception):
    """Where a worker's exception was raised: its traceback, as the cause of the same exception here."""

    def __str__(self) -> str:
        return self.args[0]


class WorkerDied(EnvironmentProblem):
    """A worker process ended without a result (killed, or out of memory): the machine, not a finding."""


@dataclass
class _Outcome:
    value: Any = None
    failed: _Failed | None = None
    said: _Said = field(default_factory=_Said)


_CONTEXT: Any = None  # the worker's copy of the caller's context


def _init_worker(driver: int, context: Any, levels: dict[str, int]) -> None:
    """A worker's set-up: SIGINT ignored (the main process takes a terminal's Ctrl-C and stops it),
    SIGTERM ends it, it ends with ``driver``; its log records kept with its results; the context."""
    global _CONTEXT
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    default_sigterm()
    watch_parent(driver)
    for logger in [v for v in logging.root.manager.loggerDict.values() if isinstance(v, logging.Logger)]:
        logger.handlers[:] = []  # a forked worker's copies of the main process's handlers: every record is kept
        logger.propagate = True
    logging.root.handlers[:] = [_KEEP]
    for name, level in levels.items():
        logging.getLogger(name or None).setLevel(level)
    _CONTEXT = context


def _portable(error: BaseException) -> BaseException:
    """``error`` if it crosses to the main process intact; else one of its class of error with its text."""
    try:
        copy = pickle.loads(pickle.dumps(error))
        if type(copy) is type(error) and str(copy) == str(error):
            return error
    except Exception:  # noqa: BLE001 - any exception class: one that does not pickle is replaced
        pass
    problem = input_error_from(error)
    if problem is not None:
        return InputError(str(problem))
    return RuntimeError(f"{type(error).__name__}: {error}")


def _run_task(work: Callable[[Any, Any], Any], item: Any) -> _Outcome:
    out = _Outcome()
    with _kept(out.said):
        try:
            out.value = work(_CONTEXT, item)
        except Exception as e:  # noqa: BLE001 - raised in the main process, in the model's turn
            out.failed = _Failed(_portable(e), traceback.format_exc())
    return out


# ---- the pool, in order -----------------------------------------------------------------------------


class InOrder:
    """``work(context, item)`` for each of ``items``, the results in ``items``' order.

    With ``jobs`` 1, each is done in this process when asked for (as before there were jobs). With
    more, in ``jobs`` worker processes, each with its own copy of ``worker_context``; what a task
    said on the side is said here before its result is handed over; a task that raised raises here,
    in its turn (with its traceback as the cause); one raising ``run_here`` (a model that needs this
    process) is done again here, with ``context``. Use it as a context manager: leaving it stops
    the workers (on an error or Ctrl-C at once). ``progress`` hears how many tasks are done.
    """

    def __init__(self, work: Callable[[Any, Any], Any], items: Sequence[Any], jobs: int, *, context: Any,
                 worker_context: Any = None, run_here: tuple[type[BaseException], ...] = (),
                 label: Callable[[Any], str] = str, progress: Progress | None = None,
                 method: str | None = None) -> None:
        self.work, self.items, self.jobs = work, list(items), max(1, min(jobs, len(items) or 1))
        self.context = context
        self.worker_context = context if worker_context is None else worker_context
        self.run_here, self.label, self.progress = run_here, label, progress
        self.method = method or start_method()
        self.pool: ProcessPoolExecutor | None = None
        self.processes: list[Any] = []
        self.finished = not self.items  # every result handed over (else leaving stops the workers at once)
        self._registry: dict = {}  # the warnings said for workers, as a module's registry: each once

    def __enter__(self) -> "InOrder":
        return self

    def __exit__(self, kind, error, tb) -> None:  # noqa: ANN001 - the context-manager protocol
        self.close(at_once=kind is not None or not self.finished)

    def __iter__(self) -> Iterator[Any]:
        if self.jobs == 1:
            for i, item in enumerate(self.items):
                value = self.work(self.context, item)
                self._done(i + 1)
                self.finished = i == len(self.items) - 1
                yield value
            return
        futures = self._start()
        for i, future in enumerate(futures):
            outcome = self._wait(future, i, futures)
            if outcome.failed is not None and isinstance(outcome.failed.error, self.run_here):
                value = self.work(self.context, self.items[i])  # measured here: what it says is its own
            else:
                _say(outcome.said, self._registry)
                if outcome.failed is not None:
                    raise outcome.failed.error from RemoteTraceback(outcome.failed.trace)
                value = outcome.value
            self.finished = i == len(futures) - 1
            yield value

    def _done(self, n: int) -> None:
        if self.progress is not None:
            self.progress.update(n)

    def _start(self) -> list[Future]:
        loggers = [v for v in logging.root.manager.loggerDict.values() if isinstance(v, logging.Logger)]
        levels = {"": logging.root.level, **{v.name: v.level for v in loggers if v.level != logging.NOTSET}}
        self.pool = ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context(self.method),
                                        initializer=_init_worker,
                                        initargs=(os.getpid(), self.worker_context, levels))
        futures = [self.pool.submit(_run_task, self.work, item) for item in self.items]
        self.processes = list((getattr(self.pool, "_processes", None) or {}).values())  # shutdown forgets them
        return futures

    def _wait(self, future: Future, i: int, futures: list[Future]) -> _Outcome:
        """Task ``i``'s outcome; progress meanwhile; a dead worker as :class:`WorkerDied`."""
        while not future.done():
            wait([future], timeout=1.0)
            self._done(sum(f.done() for f in futures))
        self._done(sum(f.done() for f in futures))
        try:
            return future.result()
        except BrokenProcessPool:
            raise WorkerDied(f"a worker process ended without a result while {self.label(self.items[i])} (or a model "
                             "beside it) was being judged: killed, or out of memory; run again with fewer --jobs "
                             "(--jobs 1 judges in this process)") from None
        except Exception as e:  # noqa: BLE001 - the result did not cross (pickling): raised in its turn all the same
            raise _portable(e) from None

    def close(self, at_once: bool = False) -> None:
        """Stop the workers: once done, waiting for them; on an error or interrupt, at once (SIGTERM,
        then SIGKILL after a grace): nothing is left running."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        if not at_once:
            pool.shutdown(wait=True)
            return
        end_pool_workers(self.processes or list((getattr(pool, "_processes", None) or {}).values()), STOP_GRACE)
        pool.shutdown(wait=True, cancel_futures=True)  # its own thread reaps the ended workers
