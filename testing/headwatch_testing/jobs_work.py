"""Work for ``headwatch.cli.jobs.InOrder``'s tests: importable by name, so a spawned worker finds it.

:func:`work` multiplies an item by the context and says so on the side (a warning, a log line, a
printed line); some items misbehave on purpose: ``"raise"`` raises ValueError, ``"bad input"`` an
InputError, ``"unpicklable"`` an exception that does not cross processes, ``"die"`` kills its own
process, ``"here"`` raises :class:`RunHere` in a worker (done again in the main process).
"""
from __future__ import annotations

import logging
import os
import signal
import warnings

from headwatch.validation import InputError

log = logging.getLogger("headwatch.jobs_test")


class RunHere(Exception):
    """What a worker cannot do: the main process does it."""


class Unpicklable(Exception):
    def __init__(self, message: str, handle: object) -> None:
        super().__init__(message)
        self.handle = handle


class Context:
    def __init__(self, factor: int, worker: bool = False) -> None:
        self.factor, self.worker = factor, worker


def work(context: Context, item: object) -> object:
    if item == "raise":
        raise ValueError("planted defect")
    if item == "bad input":
        raise InputError("planted bad input")
    if item == "unpicklable":
        raise Unpicklable("cannot cross", lambda: None)
    if item == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if item == "here":
        if context.worker:
            raise RunHere("needs the main process")
        return "done here"
    warnings.warn(f"item {item}", UserWarning)
    log.info("log %s", item)
    print(f"printed {item}")
    return item * context.factor
