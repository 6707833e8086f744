"""The headwatch pytest plugin: the claim tests' fixtures, xdist, the report, the exit status.

Its options and what they select (panels, models, revisions, the provider), and the policy for what
is missing (``--train/--no-train``, ``--offline``), are :mod:`headwatch.selection`'s, the same the
CLI's subcommands take.

Registered through the ``pytest11`` entry point, so pytest loads it wherever headwatch is installed.
It stays inert for anyone else's tests: nothing is parsed, trained, measured or printed unless a
headwatch option is given or headwatch's claim tests (``headwatch.claims``, the repository's
``claims/``) are among the paths pytest was asked to run, or are collected after all.

The contract the claim tests code against:

- a claim test (a module of ``headwatch.claims``, or any test marked ``@pytest.mark.headwatch``)
  that requests ``model_entry`` runs once per selected model (id ``pythia-1b``); one that requests
  ``revision`` runs once per (model, revision) (id ``pythia-1b@step3000``) and gets ``model_entry``
  too. ``model_entry`` is a :class:`headwatch.fixtures.panels.PanelModel`.
- session fixtures ``model_records`` (list of MeasurementRecord of the model, sorted by tokens)
  and ``revision_record`` (the MeasurementRecord of that revision).
- a test that requests ``population`` runs once per selected population (a panel entry over seeds:
  ``headwatch.fixtures.panels.Population``, id its name); one that requests ``candidate`` once per
  candidate member (id the member's), ``population`` being its own; ``population_records`` maps
  each member's id to its records.
- under xdist (``--dist load``, pyproject's) a model's tests may run on any worker: each revision
  is measured once all the same (the measurement cache's per-entry lock); worker ``gwN`` measures on
  ``cuda:(N mod GPUs)`` with ``--device cuda/auto``. Each claim test carries ``xdist_group(model)``
  for ``--dist loadgroup`` where xdist can honour it.
- a claim module may narrow the models it runs on with a module attribute
  ``headwatch_models = (what the model must have, predicate(PanelModel) -> bool)``
  (claims/test_formation.py: models that declare formation); with none left, its test is one
  skip naming what no selected model has.
- the formation tests (claims/test_formation.py) run before every other claim test of their
  models; the tests that read a model organism run after every test that does not.
- organisms the collected tests need and the cache lacks: with ``--train``, the process that talks
  to the terminal starts the training step (``headwatch organisms train``, a process of its own:
  :func:`headwatch.selection.ensure_organisms`) once the tests are collected, relaying one line per
  checkpoint; the tests that need no organism run meanwhile at a lower CPU priority, and a test that
  reads one waits for its training to end (its lock). Without ``--train``: a usage error (exit 4)
  naming the command, before any test runs. Interrupted, the step stops; a rerun resumes it. The
  step's handling is :class:`headwatch.training_session.TrainingSession`, registered only with ``--train``.
- what ran (panels, models, revisions, device, dtype, cache hits vs fresh runs): :func:`run_info`,
  merged from all workers on the xdist controller.
- a crash is not a failed claim: in a claim test, an exception that is not an assertion (a bug in
  headwatch, or bad input found while measuring) is reported as an ERROR, not a FAILED claim, and
  the session's exit status says which (:data:`EXIT_STATUS`); every option is checked by
  headwatch.validation's rules at configure time (a usage error, exit 4).
"""
from __future__ import annotations

# This module is imported by every pytest run in the environment, and must cost a foreign test suite
# nothing (no panels, no torch): at its top only headwatch's options and rules (selection, validation,
# paths: the standard library beneath them); fixtures, claims and torch inside the hook that needs them.
import importlib.util
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from headwatch import __version__, selection, threads
from headwatch.paths import source_checkout
from headwatch.training_session import (TRAINING_PLUGIN, TrainingSession, needs_organism, organisms_of_ids,
                                        organisms_of_items)
from headwatch.validation import InputError, input_error_from

#: The folder of the claim tests: the repository's claims/ in a checkout, site-packages otherwise.
CLAIMS_DIR = Path(importlib.util.find_spec("headwatch.claims").origin).resolve().parent

_STATE = pytest.StashKey["HeadwatchSession"]()
_WANTED = pytest.StashKey[bool]()

#: pytest's exit status in a headwatch run. pytest's own codes are kept (2 interrupted, 5 nothing
#: collected); headwatch sets 3 and 4 when a claim test errored instead of judging: a crash beats
#: bad input, which beats a failed test, because the verdicts of such a run are incomplete.
EXIT_STATUS = {
    0: "every test passed (skips and declared deviations included)",
    1: "a claim failed (or one of headwatch's own tests)",
    3: "headwatch crashed in a claim test or its fixtures (a bug: please report it); also pytest's INTERNALERROR",
    4: "bad input: an option or panel (before any test ran), or a checkpoint, record, cache or the machine (a "
       "full disk, a permission) found bad while measuring",
}
#: user_properties key marking a claim test's report that is an error, with "crash" or "input".
ERROR_PROPERTY = "headwatch_error"


@dataclass
class HeadwatchSession:
    """Everything the plugin knows about one pytest session (on each process)."""

    #: The user's selection (headwatch.selection.Selection): panels, models, the provider and its RunInfo.
    chosen: Any
    #: the organisms the collected tests need were asked for (once per session, on the process with the terminal)
    organisms_asked: bool = False
    #: the claims judged (headwatch.claims.claim.Claim, the registry's order): --claims, else every registered one
    claims: list[Any] = field(default_factory=list)
    #: --claims was given (the claim tests of the others are deselected)
    claims_chosen: bool = False

    @property
    def options(self):  # ProviderOptions
        return self.chosen.options

    @property
    def panels(self) -> list[Any]:  # Panel
        return self.chosen.panels

    @property
    def selection(self) -> list[Any]:  # PanelModel, revisions resolved once ``resolved``
        return self.chosen.models

    @property
    def resolved(self) -> bool:
        return self.chosen.resolved

    @property
    def provider(self):  # Provider, which owns the session's RunInfo
        return self.chosen.provider

    @property
    def run(self):
        return self.provider.run


# ---- options ----------------------------------------------------------------------------------

#: The selection options pytest takes (headwatch.selection.OPTIONS: the CLI's flags, meaning the same).
SELECTION_OPTIONS = ("panel", "models", "revisions", "seeds", "device", "dtype", "n_examples", "cache_dir",
                     "hub_cache_dir", "organisms_cache_dir", "reference_dir", "refresh", "train", "offline",
                     *selection.CLAIM_OPTIONS)
#: headwatch's options live under this prefix in pytest's namespace (``config.getoption("headwatch_panel")``).
DEST = "headwatch_"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("headwatch", "headwatch panels and measurements")
    selection.add_options(g.addoption, SELECTION_OPTIONS, dest_prefix=DEST, device={
        "help": selection.OPTIONS["device"].kwargs["help"] + " (pytest -n: worker gwN takes cuda:N mod the GPU count)"})


def _get(config: pytest.Config) -> Any:
    return lambda dest: config.getoption(DEST + dest, None)


# ---- when the plugin acts ---------------------------------------------------------------------


def is_claim_test(path: Path | str) -> bool:
    """Whether a test file is one of headwatch's claim tests."""
    p = Path(path).resolve()
    return p == CLAIMS_DIR or CLAIMS_DIR in p.parents


def _headwatch_option_given(config: pytest.Config) -> bool:
    return selection.option_given(_get(config), SELECTION_OPTIONS)


def _arg_paths(config: pytest.Config) -> list[Path]:
    """The paths pytest was asked to collect (``--pyargs`` modules resolved to their files)."""
    from_testpaths = getattr(config, "args_source", None) == pytest.Config.ArgsSource.TESTPATHS
    base = config.rootpath if from_testpaths else config.invocation_params.dir
    out = []
    for arg in config.args:
        arg = str(arg).split("::")[0]
        if config.option.pyargs:
            try:
                spec = importlib.util.find_spec(arg)
            except (ImportError, ValueError):
                spec = None
            if spec is not None and spec.origin:
                out.append(Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin))
                continue
        out.append(base / arg)
    return out


def _claims_requested(config: pytest.Config) -> bool:
    """Whether the collection paths include headwatch's claim tests (a folder above them counts
    unless the way down passes a hidden folder or a site-packages, which pytest does not collect)."""
    for p in _arg_paths(config):
        p = p.resolve()
        if is_claim_test(p):
            return True
        if p in CLAIMS_DIR.parents:
            rel = CLAIMS_DIR.relative_to(p).parts
            if not any(part.startswith(".") or part == "site-packages" for part in rel):
                return True
    return False


def wanted(config: pytest.Config) -> bool:
    """Whether headwatch acts in this session (decided once, at configure time)."""
    if _WANTED not in config.stash:
        config.stash[_WANTED] = _headwatch_option_given(config) or _claims_requested(config)
    return config.stash[_WANTED]


def state(config: pytest.Config) -> HeadwatchSession:
    """The session's headwatch state, set up (panels parsed, options checked) on first use."""
    if _STATE not in config.stash:
        config.stash[_STATE] = _setup(config)
    return config.stash[_STATE]


def run_info(config: pytest.Config):
    """The session's RunInfo (on an xdist controller: merged from the workers), or None if inert."""
    s = config.stash.get(_STATE, None)
    return s.run if s is not None else None


def _test_processes(config: pytest.Config) -> int:
    """How many processes run the tests: the xdist workers (on a worker or its controller), else 1."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0) or 0)
    if workers:
        return workers
    n = getattr(config.option, "numprocesses", None)
    return int(n) if isinstance(n, int) and n > 0 and getattr(config.option, "dist", "no") != "no" else 1


def _runs_tests(config: pytest.Config) -> bool:
    """Whether this process runs tests (an xdist controller only hands them out)."""
    return getattr(config, "workerinput", None) is not None or _test_processes(config) == 1


def _share_cpu_threads(config: pytest.Config) -> None:
    """Give each test process its share of the usable cores (headwatch.threads: plain pytest and
    xdist workers by one rule, one thread on an already loaded machine)."""
    if not _runs_tests(config):
        return
    choice = threads.choose_threads(_test_processes(config), threads.usable_cores(), threads.machine_load())
    threads.set_torch_threads(choice.threads)


def _setup(config: pytest.Config) -> HeadwatchSession:
    """The user's selection (headwatch.selection: panels, models, provider); bad input is a usage error."""
    _share_cpu_threads(config)
    workerinput = getattr(config, "workerinput", None)
    refresh = bool(config.getoption(DEST + "refresh"))
    if workerinput is not None and "headwatch_refresh_since" in workerinput:  # the controller's start, on a worker
        since = workerinput["headwatch_refresh_since"]
    else:
        since = time.time() if refresh else None
    try:
        choices = selection.read_choices(_get(config))
        claims = _load_claims(choices)  # before the panels: their xfail keys may name a researcher's claim
        chosen = selection.select(choices, resolve=False, refresh_since=since)
        chosen.check_measuring()
    except InputError as e:
        raise pytest.UsageError(str(e)) from None
    s = HeadwatchSession(chosen, claims=claims, claims_chosen=bool(choices.claims))
    config.stash[_STATE] = s
    if not any(m.revision_query for m in chosen.models):
        select_revisions(config)  # cheap here: bad --revisions fail as usage errors, before collection
    return s


def _load_claims(choices: Any) -> list[Any]:
    """The claims this session judges: the registry's (built-ins, a conftest.py's, installed entry
    points', ``--claims-module``'s), narrowed by ``--claims``."""
    from headwatch.claims.registry import load, select_claims  # deferred: the claims import numpy and scipy

    load(choices.claims_module)
    return select_claims(choices.claims)


def select_revisions(config: pytest.Config) -> list[Any]:
    """The selected models with concrete revisions (headwatch.selection.Selection.resolve).

    Log-spaced panels list branches (Hub, cache, or an organism's training), so they resolve
    lazily at collection; explicit lists resolve at configure time.
    """
    s = state(config)
    try:
        return s.chosen.resolve()
    except InputError as e:  # PanelError, LoadingError, ...
        raise pytest.UsageError(str(e)) from None


# ---- configure, parametrise ---------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)  # before pytest-html reads --self-contained-html
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xdist_group(name): keep a model's tests on one xdist worker")
    config.addinivalue_line("markers", "mostly_waits: the test spends its time waiting on other processes (a "
                                       "cluster, daemons); it runs first, before its process yields the CPU to "
                                       "organism training (--train), so that what it starts comes up in time")
    config.addinivalue_line("markers", "headwatch: a test written against headwatch's claim-test contract "
                                       "(model_entry, revision, model_records, revision_record)")
    if not wanted(config):
        return
    state(config)  # parse now, so bad input fails before collection
    if getattr(config, "workerinput", None) is None:  # the process that owns the terminal and the exit status
        config.pluginmanager.register(ErrorTally(), "headwatch-error-tally")
    if state(config).chosen.choices.train:  # the training step beside the tests, only when asked for
        config.pluginmanager.register(TrainingSession(config, state(config).chosen), TRAINING_PLUGIN)
    if config.getoption("htmlpath", None):
        config.option.self_contained_html = True  # the user's command has no --self-contained-html
        if getattr(config, "workerinput", None) is None:  # the report is written on the controller only
            from headwatch.claims.html_report import HeadwatchReport  # deferred: matplotlib (the figures)

            config.pluginmanager.register(HeadwatchReport(config, state(config)), "headwatch-html-report")


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """Before anything starts: the torch threads each test process takes (headwatch.threads), and what
    the selected Hub models cost to download and measure (an estimate from their published configs,
    fixtures/estimate.py; no line for panels without Hub models)."""
    if not wanted(config) or getattr(config, "workerinput", None) is not None:
        return None
    processes = _test_processes(config)
    choice = threads.choose_threads(processes, threads.usable_cores(), threads.machine_load())
    lines = [f"headwatch: torch threads {choice.threads}" + (" per worker" if processes > 1 else "") + f" ({choice.reason})"]
    s = state(config)
    hub = [m for m in s.selection if m.origin.downloads]
    if hub:
        from headwatch.fixtures.estimate import estimate_models  # deferred: a foreign run imports no fixtures

        cost = estimate_models(hub, n_examples=s.options.n_examples)
        lines.append("headwatch: " + cost.describe("at most (revisions already cached cost nothing)"))
    return lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    ours = is_claim_test(metafunc.definition.path) or metafunc.definition.get_closest_marker("headwatch")
    if ours and {"population", "candidate"} & set(names):
        _parametrize_populations(metafunc)
        return
    if ours and "registered_claim" in names:
        _parametrize_claims(metafunc)
        return
    if not ({"model_entry", "revision"} & set(names)) or not ours:
        return  # someone else's test (or a copy of a claim module elsewhere): not ours to parametrise
    models = select_revisions(metafunc.config)
    narrowed = getattr(metafunc.module, "headwatch_models", None)
    if narrowed is not None:
        what, keep = narrowed
        models = [m for m in models if keep(m)]
        if not models:
            mark = pytest.mark.skip(reason=f"no selected model {what}")
            if "revision" in names:
                metafunc.parametrize(("model_entry", "revision"), [pytest.param(None, None, id="none", marks=mark)],
                                     scope="session")
            else:
                metafunc.parametrize("model_entry", [pytest.param(None, id="none", marks=mark)], scope="session")
            return
    if "revision" in names:
        params = [pytest.param(m, r, id=f"{m.id}@{r}", marks=pytest.mark.xdist_group(m.id))
                  for m in models for r in m.sorted_revisions]
        metafunc.parametrize(("model_entry", "revision"), params, scope="session")
    else:
        params = [pytest.param(m, id=m.id, marks=pytest.mark.xdist_group(m.id)) for m in models]
        metafunc.parametrize("model_entry", params, scope="session")


def _parametrize_claims(metafunc: pytest.Metafunc) -> None:
    """The generic claim tests (claims/test_registered_claims.py) over every selected claim that has no
    test module of its own (a researcher's): one per (claim, model), per (claim, model, revision) where
    the claim judges a revision, and per (claim, negative control); ids ``claim-model[@revision]`` and
    ``claim-control``."""
    names = metafunc.fixturenames
    claims = [c for c in state(metafunc.config).claims if not c.test_module]
    if "negative_control" in names:
        argnames: tuple[str, ...] = ("registered_claim", "negative_control")
        params = [pytest.param(c, n, id=f"{c.name}-{n.name}") for c in claims for n in c.negative_controls]
    elif "revision" in names:
        argnames = ("registered_claim", "model_entry", "revision")
        params = [pytest.param(c, m, r, id=f"{c.name}-{m.id}@{r}", marks=pytest.mark.xdist_group(m.id))
                  for c in claims if c.judge_revision is not None for m in select_revisions(metafunc.config)
                  for r in m.sorted_revisions]
    else:
        argnames = ("registered_claim", "model_entry")
        params = [pytest.param(c, m, id=f"{c.name}-{m.id}", marks=pytest.mark.xdist_group(m.id))
                  for c in claims for m in select_revisions(metafunc.config)]
    if not params:
        mark = pytest.mark.skip(reason="no selected claim without a test module of its own (a researcher's claim: "
                                       "a conftest.py, --claims-module or an installed entry point; docs/claims.md)"
                                       + (" judges a revision" if "revision" in names else ""))
        params = [pytest.param(*(None,) * len(argnames), id="none", marks=mark)]
    metafunc.parametrize(argnames, params, scope="session")


def _parametrize_populations(metafunc: pytest.Metafunc) -> None:
    """A test requesting ``population`` runs once per selected population (id: its name); one requesting
    ``candidate`` once per candidate member (id: the member's), with ``population`` set to its own."""
    from headwatch.fixtures.panels import populations  # deferred: a foreign run imports no panels

    pops = populations(select_revisions(metafunc.config))
    if "candidate" in metafunc.fixturenames:
        params = [pytest.param(p, c, id=c.id, marks=pytest.mark.xdist_group(p.id)) for p in pops for c in p.candidates]
        what = "candidate of a population"
        argnames: tuple[str, ...] = ("population", "candidate")
    else:
        params = [pytest.param(p, id=p.id, marks=pytest.mark.xdist_group(p.id)) for p in pops]
        what = "population (a panel entry with seeds = [...], or models joined by population = ...)"
        argnames = ("population",)
    if not params:
        mark = pytest.mark.skip(reason=f"no selected {what}")
        params = [pytest.param(*(None,) * len(argnames), id="none", marks=mark)]
    metafunc.parametrize(argnames if len(argnames) > 1 else argnames[0], params, scope="session")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``mostly_waits`` first, the tests that read a model organism last (beside its
    training the others run first; xdist's ``--dist load`` hands tests out in this order), and among
    each kind the formation tests first: an organism that did not form is reported before its claims
    are judged.
    Tests that would meet the placeholder ``model_entry`` (another copy of the claim tests) are one
    usage error naming which claims folder is active."""
    _refuse_other_claim_copies(items)
    if not wanted(config):
        return
    _deselect_unchosen_claims(config, items)

    def rank(item: pytest.Item) -> tuple[bool, bool, bool]:
        return (item.get_closest_marker("mostly_waits") is None, needs_organism(item),
                not (is_claim_test(item.path) and item.path.name == "test_formation.py"))

    items[:] = sorted(items, key=rank)


def _deselect_unchosen_claims(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--claims``: deselect the claim tests of the claims not chosen (a claim's own test module, its
    population test); the gate's (formation's) tests stay."""
    s = state(config)
    if not s.claims_chosen:
        return
    from headwatch.claims.registry import all_claims  # deferred: the claims import numpy and scipy

    chosen = {c.name for c in s.claims}
    module_of = {c.test_module: c.name for c in all_claims() if c.test_module}
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        claim = module_of.get(item.path.name) if is_claim_test(item.path) else None
        if claim is None and is_claim_test(item.path) and isinstance(params.get("claim"), str):
            claim = params["claim"]  # the population test of one claim
        (drop if claim is not None and claim not in chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _refuse_other_claim_copies(items: list[pytest.Item]) -> None:
    """Claim tests of another copy of headwatch (a second clone of the repository) request this
    plugin's ``model_entry`` / ``revision``, which it parametrises only for the installed copy's
    claims: say which claims folder is active, once, instead of an error per test."""
    def placeholder(item: pytest.Item) -> bool:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or "model_entry" in getattr(getattr(item, "callspec", None), "params", {}):
            return False
        defs = info.name2fixturedefs.get("model_entry") or info.name2fixturedefs.get("revision") or ()
        return bool(defs) and getattr(defs[-1].func, "__module__", None) == __name__  # not a foreign fixture
    stray = [item for item in items if placeholder(item)]
    if not stray:
        return
    folders = sorted({str(Path(item.path).parent) for item in stray})
    installed = source_checkout()
    raise pytest.UsageError(
        f"{len(stray)} test(s) in {', '.join(folders)} are claim tests of another copy of headwatch: the headwatch "
        f"installed here ({__version__}, {'from the checkout ' + str(installed) if installed else 'a wheel'}) runs "
        f"the claim tests in {CLAIMS_DIR}, the active claims folder, and parametrises only those. Run `pytest "
        f"{CLAIMS_DIR}` to judge with it, or install this copy (`pip install -e <its root>` in its own virtual "
        "environment) to judge with that one")


# ---- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def provider_options(pytestconfig: pytest.Config):
    """Where and how measurements are made (from the command line)."""
    return state(pytestconfig).options


@pytest.fixture(scope="session")
def panel_models(pytestconfig: pytest.Config) -> list[Any]:
    """Every selected model (for tests that look across models)."""
    return select_revisions(pytestconfig)


@pytest.fixture(scope="session")
def model_entry():  # replaced by parametrisation in pytest_generate_tests
    raise pytest.UsageError("model_entry is parametrised by headwatch for its claim tests; request it from one")


@pytest.fixture(scope="session")
def revision(model_entry):  # replaced by parametrisation; depends on model_entry so both are set
    raise pytest.UsageError("revision is parametrised by headwatch for its claim tests; request it from one")


@pytest.fixture(scope="session")
def registered_claim():  # replaced by parametrisation in pytest_generate_tests
    raise pytest.UsageError("registered_claim is parametrised by headwatch for its generic claim tests; request it "
                            "from one")


@pytest.fixture(scope="session")
def negative_control(registered_claim):  # replaced by parametrisation; depends on registered_claim so both are set
    raise pytest.UsageError("negative_control is parametrised by headwatch for its generic claim tests; request it "
                            "from one")


@pytest.fixture(scope="session")
def population():  # replaced by parametrisation in pytest_generate_tests
    raise pytest.UsageError("population is parametrised by headwatch for its population tests; request it from one")


@pytest.fixture(scope="session")
def candidate(population):  # replaced by parametrisation; depends on population so both are set
    raise pytest.UsageError("candidate is parametrised by headwatch for its population tests; request it from one")


@pytest.fixture(scope="session")
def population_records(pytestconfig: pytest.Config, population):
    """Member id -> that member's records (sorted by tokens), for every member of the population; each
    read when asked (a population of thousands of full-size records is judged one member at a time)."""
    return state(pytestconfig).provider.records_of(population.members)


@pytest.fixture(scope="session")
def model_records(pytestconfig: pytest.Config, model_entry):
    """All records of the model, sorted by tokens seen (cache, published files, or fresh runs)."""
    return state(pytestconfig).provider.model_records(model_entry)


@pytest.fixture(scope="session")
def revision_record(pytestconfig: pytest.Config, model_entry, revision):
    """The record of one (model, revision)."""
    return state(pytestconfig).provider.revision_record(model_entry, revision)


# ---- organisms: what the collected tests need, handed to the training session -------------------


def _organisms_needed(config: pytest.Config, model_ids: set[str]) -> None:
    """Once the tests are collected, on the process that owns the terminal: the organisms they need
    (``model_ids``: models and populations) go to the training session where ``--train`` registered
    one (:class:`headwatch.training_session.TrainingSession`: the step beside the tests); without it a
    missing organism is a usage error naming the command that trains it, before any test runs."""
    s = config.stash.get(_STATE, None)
    if s is None or s.organisms_asked or config.option.collectonly:
        return
    s.organisms_asked = True
    if not model_ids:
        return
    training = config.pluginmanager.get_plugin(TRAINING_PLUGIN)
    try:
        if training is not None:
            training.start(model_ids)
        else:
            selection.ensure_organisms(s.chosen, train=False, model_ids=model_ids)
    except InputError as e:  # --no-train and missing, or more than one run trains unconfirmed
        raise pytest.UsageError(str(e)) from None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist: the organisms the collected tests need, before they run."""
    config = session.config
    if getattr(config, "workerinput", None) is not None or _STATE not in config.stash:
        return
    _organisms_needed(config, organisms_of_items(session.items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    """On the xdist controller, once the first worker has collected (before any test is handed out):
    the organisms its tests need."""
    config = node.config
    if _STATE not in config.stash:  # not a headwatch session: import nothing (a foreign suite's run)
        return
    s = state(config)
    if s.organisms_asked:
        return
    if not s.resolved and any(m.revision_query for m in s.selection):  # revisions resolve on the workers
        _organisms_needed(config, {m.id for m in s.selection if m.origin.trains})
        return
    _organisms_needed(config, organisms_of_ids(select_revisions(config), ids))


# ---- xdist: refresh time to workers, run info back to the controller ---------------------------


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    if _STATE in node.config.stash:
        node.workerinput["headwatch_refresh_since"] = state(node.config).options.refresh_since


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    out = getattr(node, "workeroutput", {}) or {}
    if "headwatch_runinfo" in out:
        state(node.config).run.merge(out["headwatch_runinfo"])


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and _STATE in session.config.stash:
        workeroutput["headwatch_runinfo"] = state(session.config).run.to_dict()


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    """One line on what was measured and what came from the cache, plus any weight-hash alarms."""
    if getattr(config, "workerinput", None) is not None:
        return
    info = run_info(config)
    if info is None or not info.entries:
        return
    parts = [f"{n} {status}" for status, n in sorted(info.counts().items())]
    terminalreporter.write_sep("-", "headwatch measurements")
    terminalreporter.write_line(
        f"panels {', '.join(info.panels)}; {len(info.models)} model(s), {len(info.entries)} revision(s): "
        + ", ".join(parts) + f"; cache {info.cache_dir}"
    )
    for g in info.identical_weights:
        terminalreporter.write_line(
            f"WARNING {g['model']}: revisions {', '.join(g['revisions'])} have identical weights "
            f"(sha256 {g['weights_hash'][:12]}): the Hub may serve the wrong checkpoint (pythia issues 205/206)",
            yellow=True,
        )


# ---- a crash is not a failed claim ----------------------------------------------------------------


def _is_headwatch_test(item: pytest.Item) -> bool:
    return is_claim_test(item.path) or item.get_closest_marker("headwatch") is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Mark a claim test's report whose exception is not a verdict: bad input (an InputError, shown
    as its message) or a crash (traceback kept). Assertions are the claims' verdicts; pytest's own
    outcomes (skip, xfail, fail) pass through untouched."""
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or call.excinfo is None or hasattr(rep, "wasxfail") or not _is_headwatch_test(item):
        return
    exc = call.excinfo.value
    if isinstance(exc, (AssertionError, pytest.fail.Exception)) and rep.when == "call":
        return  # a claim that does not hold: the finding
    problem = input_error_from(exc)  # InputError, or the user's machine (a full disk, a permission)
    if problem is not None:
        rep.user_properties.append((ERROR_PROPERTY, "input"))
        rep.longrepr = f"bad input: {problem}"  # the message says what to do; a traceback would bury it
    else:
        rep.user_properties.append((ERROR_PROPERTY, "crash"))
        rep.sections.append(("headwatch", "internal error: this exception is a bug in headwatch, not a finding "
                                          "about the model; please report it with the traceback above"))


def _error_kind(report) -> str | None:
    return next((v for k, v in getattr(report, "user_properties", ()) if k == ERROR_PROPERTY), None)


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config: pytest.Config):
    """A marked claim-test report reads ERROR, never FAILED (setup errors already do)."""
    if report.when == "call" and report.failed and _error_kind(report):
        return "error", "E", "ERROR"
    return None


class ErrorTally:
    """Counts the claim tests that errored instead of judging (on the process that owns the terminal:
    every worker's reports pass through it), sets the exit status (:data:`EXIT_STATUS`) and says
    what happened at the end of the summary. Registered only in sessions where headwatch acts."""

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {"crash": [], "input": []}

    def pytest_runtest_logreport(self, report) -> None:
        kind = _error_kind(report)
        if kind and report.failed and report.nodeid not in self.errors[kind]:
            self.errors[kind].append(report.nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if session.exitstatus != pytest.ExitCode.TESTS_FAILED:
            return  # passed, interrupted, usage error, nothing collected: pytest's status stands
        if self.errors["crash"]:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        elif self.errors["input"]:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter) -> None:
        crash, bad = self.errors["crash"], self.errors["input"]
        if not (crash or bad):
            return
        terminalreporter.write_sep("-", "headwatch: tests that errored instead of judging")
        if crash:
            terminalreporter.write_line(
                f"{len(crash)} claim test(s) crashed inside headwatch (exit status 3): a bug in headwatch, not a "
                "finding about the model; please report it with the traceback", red=True)
        if bad:
            terminalreporter.write_line(
                f"{len(bad)} claim test(s) met bad input while measuring (exit status {3 if crash else 4}): "
                "the ERROR lines say what and what to do", red=True)
