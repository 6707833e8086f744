"""The training step beside a pytest session: started, yielded to, waited for or stopped.

The pytest plugin (``headwatch/plugin.py``) only wires: with ``--train`` it registers one
:class:`TrainingSession` (``config.pluginmanager.register(..., TRAINING_PLUGIN)``, as pytest-xdist
registers its session object only with ``-n``), and hands it the organisms the collected tests
need once they are collected (:meth:`TrainingSession.start`). Without ``--train`` nothing here is
registered; a missing organism is refused by :func:`headwatch.selection.ensure_organisms`.

The session object, on each process of the run:

- on the process that owns the terminal, :meth:`~TrainingSession.start` runs the training step
  (``headwatch organisms train``, a process of its own: :func:`headwatch.selection.ensure_organisms`
  with ``background``), relaying one line per checkpoint; it returns once the step holds every
  organism's lock, so that a test that reads one waits for its training to end (the provider waits
  on the lock);
- before each process's first test not marked ``mostly_waits``, it lowers the process's CPU
  priority while organisms of the selection train (:data:`YIELD_NICENESS`);
- at the end of the session it waits for the step, or stops it when the session was interrupted
  (the organisms resume from their last saved state next time).

Which organisms the collected tests need is read from their parameters (:func:`organisms_of_items`),
or, on the xdist controller, from the workers' test ids (:func:`model_scope`).

No pytest import: hooks are matched by name (pluggy), the markers come from pluggy.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import Any

import pluggy

from headwatch import selection

#: The name the plugin registers the session object under (``config.pluginmanager.get_plugin(...)``).
TRAINING_PLUGIN = "headwatch-training"

#: pytest's hook markers, without importing pytest (pluggy is what pytest's own ``hookimpl`` is).
hookimpl = pluggy.HookimplMarker("pytest")

#: ``pytest.ExitCode.INTERRUPTED``: a session ended by Ctrl-C.
_INTERRUPTED = 2

#: The niceness a test process takes while organisms train: the training step's children (one core
#: each, the longest of them the critical path of a cold run) get the cores first, the tests what
#: they leave (measured: tests competing as equals made the longest child 1.5x slower, and
#: the cores idled at the end while it trained alone). 7, not 19: beside three children on two cores
#: a test still gets about an eighth of a core, so that a subprocess with a timeout finishes; a model
#: of the cold run's sharing (CFS weights) keeps the cores busy to the end from about 300 CPU-seconds
#: of tests (a warm run takes about 420). Tests that start daemons are ``mostly_waits``: run first,
#: before their process yields.
YIELD_NICENESS = 7


# ---- which organisms the collected tests need ------------------------------------------------------


def needs_organism(item: Any) -> bool:
    """Whether a collected test (a ``pytest.Item``) reads a model organism (its model, or a member of
    its population)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    entry, population = params.get("model_entry"), params.get("population")
    return (getattr(getattr(entry, "origin", None), "trains", False)
            or any(m.origin.trains for m in getattr(population, "members", ())))


def model_scope_of(item: Any) -> str | None:
    """The model or population id of a collected claim test (None for any other test)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    found = params.get("model_entry") or params.get("population")
    return getattr(found, "id", None)


def organisms_of_items(items: Iterable[Any]) -> set[str]:
    """The model and population ids of the collected tests that read an organism."""
    return {model_scope_of(item) for item in items if needs_organism(item)} - {None}


def model_scope(nodeid: str, model_ids: Iterable[str]) -> str | None:
    """The model (or population) id a test node id belongs to, or None.

    ``model_ids`` are the selected ids. Inside the node id's last ``[...]``, an id must stand
    between boundaries (start, ``-``, ``[``) and (``@``, ``-``, end); the longest match wins, so
    ``pythia-1b`` never claims ``pythia-1b-deduped``'s tests.
    """
    if "[" not in nodeid or not nodeid.endswith("]"):
        return None
    params = nodeid[nodeid.index("[") + 1 : -1]
    best = None
    for mid in model_ids:
        for m in re.finditer(re.escape(mid), params):
            before = params[m.start() - 1] if m.start() > 0 else ""
            after = params[m.end()] if m.end() < len(params) else ""
            if before in ("", "-") and after in ("", "@", "-") and (best is None or len(mid) > len(best)):
                best = mid
    return best


def organisms_of_ids(models: list[Any], ids: Iterable[str]) -> set[str]:
    """On the xdist controller: the ids of the organism models and populations (of ``models``, the
    selection with its revisions resolved) that the workers' collected test ``ids`` belong to."""
    from headwatch.fixtures.panels import populations  # deferred: a foreign run imports no panels

    organisms = [m.id for m in models if m.origin.trains]
    organisms += [p.id for p in populations(models) if any(m.origin.trains for m in p.members)]
    return {mid for i in ids if (mid := model_scope(i, organisms)) is not None}


# ---- the session object ------------------------------------------------------------------------------


def terminal_say(config: Any) -> Callable[..., None]:
    """One line to the terminal, on a line of its own (the xdist controller's progress dots may
    have left the current line open), through pytest's terminal reporter where there is one."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return lambda text, **kw: print(text)

    def say(text: str, **markup) -> None:
        if getattr(getattr(tr, "_tw", None), "width_of_current_line", 0):
            tr.write("\n")
        tr.write_line(text, **markup)

    return say


class TrainingSession:
    """The training step of one pytest session run with ``--train`` (registered on every process of
    the run: the controller starts and ends the step, every test process yields the CPU to it)."""

    def __init__(self, config: Any, chosen: Any) -> None:
        self.config = config
        #: the user's selection (headwatch.selection.Selection)
        self.chosen = chosen
        #: the training step running beside the tests (a headwatch.selection.OrganismStep), on the terminal's process
        self.training: Any = None
        #: this process has decided whether to yield the CPU to training (before its first test)
        self.yield_checked = False

    def start(self, model_ids: set[str]) -> None:
        """On the process that owns the terminal, once the tests are collected: the training step for
        the organisms ``model_ids`` (models and populations) need, as a process of its own beside the
        tests (:func:`headwatch.selection.ensure_organisms`); returns once it holds every organism's
        lock. Raises :class:`~headwatch.validation.InputError` where it may not train (more organisms
        than one run trains unconfirmed)."""
        plain, tr, started = terminal_say(self.config), self.config.pluginmanager.get_plugin("terminalreporter"), []

        def say(text: str, **markup) -> None:  # the step's lines, under one heading
            if not started and tr is not None:
                tr.write_sep("-", "headwatch: training model organisms")
            started.append(True)
            plain(text, **markup)

        def report(p) -> None:
            say(f"organism {p.describe()}", red=p.event == "failed")

        step = selection.ensure_organisms(self.chosen, train=True, model_ids=model_ids, background=True,
                                          report=report, say=say)
        if step.running is None:
            return
        say(f"the training step (`{' '.join(step.command)}`) holds {', '.join(step.missing)}: the tests that need "
            "no organism run meanwhile, the others wait for it")
        self.training = step

    def finish(self, stop: bool) -> None:
        """On the process that started the training step: wait for it to end (every test that needed an
        organism has waited for it already), or ``stop`` it (an interrupted session: the organisms resume
        from their last saved state next time); say how it ended."""
        if self.training is None:
            return
        step, self.training = self.training.running, None
        error = step.stop() if stop else step.wait()
        say = terminal_say(self.config)
        if error is not None:
            say(f"headwatch: {error}" + ("" if stop else "; the tests that needed these organisms failed"), red=True)
        else:
            say(f"organisms trained in {step.seconds:.0f} s")

    # ---- pytest hooks (matched by name) ----

    @hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: Any) -> None:
        """Before this process's first test not marked ``mostly_waits``: where organisms of the selection
        are training now (a step holds their locks: this session's, or anyone's), lower this process's
        CPU priority for the rest of the session, so that the tests beside training take the cores it
        leaves. A test marked ``mostly_waits`` (it starts daemons, a cluster, and waits on them; ordered
        first) runs before that, at the priority it started with, so that its daemons come up in time."""
        if self.yield_checked or item.get_closest_marker("mostly_waits") is not None:
            return
        self.yield_checked = True
        keys = {self.chosen.provider.organism_key(m) for m in self.chosen.models
                if m.origin.trains and m.organism is not None}
        if not keys or not hasattr(os, "nice"):
            return
        from headwatch.model_organisms.runner import training_now  # deferred: torch (the organisms package)

        if training_now(keys):
            os.nice(YIELD_NICENESS)

    @hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        self.finish(stop=exitstatus == _INTERRUPTED or bool(session.shouldstop) or bool(session.shouldfail))

    def pytest_unconfigure(self, config: Any) -> None:
        self.finish(stop=True)  # a session that ended before sessionfinish: stop the children


__all__ = ["TRAINING_PLUGIN", "YIELD_NICENESS", "TrainingSession", "model_scope", "model_scope_of", "needs_organism",
           "organisms_of_ids", "organisms_of_items", "terminal_say"]
