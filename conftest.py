"""Root conftest: command-line options, the panel selection, and the fixtures the claim tests use.

The contract (claims/ codes against it):

- a test that requests ``model_entry`` runs once per selected model (id ``pythia-1b``); one that
  requests ``revision`` runs once per (model, revision) (id ``pythia-1b@step3000``) and gets
  ``model_entry`` too. ``model_entry`` is a :class:`fixtures.panels.PanelModel`.
- session fixtures ``model_records`` (list of MeasurementRecord of the model, sorted by tokens)
  and ``revision_record`` (the MeasurementRecord of that revision).
- with ``--dist loadgroup`` (pyproject's default) one model's tests stay on one worker: every such
  test carries ``xdist_group(<model id>)``, and since pytest 9.2 defeats xdist's mark-based grouping
  a scheduler groups by the model id in the test id (fixtures/scheduling.py); worker ``gwN``
  measures on ``cuda:(N mod GPUs)`` with ``--device cuda/auto``.
- what ran (panels, models, revisions, device, dtype, cache hits vs fresh runs):
  ``fixtures.runinfo.run_info(config)``, merged from all workers on the xdist controller.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fixtures import panels as panels_mod
from fixtures import provider, runinfo
from fixtures.cache import CacheError, ensure_writable
from fixtures.loading import LoadingError

pytest_plugins = ["claims.html_report"]

_SELECTION = pytest.StashKey[list]()
_OPTIONS = pytest.StashKey[provider.ProviderOptions]()
_PANELS = pytest.StashKey[list]()
_RESOLVED = pytest.StashKey[bool]()


def _split(values: list[str] | None) -> list[str]:
    """Repeatable options that also accept comma lists: ['a,b', 'c'] -> ['a', 'b', 'c']."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("headwatch", "headwatch panels and measurements")
    g.addoption("--panel", action="append", default=[], metavar="NAME|FILE",
                help="panel(s) to judge: a shipped name (paper, published, organisms) or a TOML file; "
                     "repeatable or comma list. Default: the panels needing neither network nor GPU.")
    g.addoption("--models", action="append", default=[], metavar="NAMES",
                help="only these models (short names or repo ids; comma list)")
    g.addoption("--revisions", action="append", default=[], metavar="REVS",
                help="only these revisions (branch names; comma list)")
    g.addoption("--device", default="auto",
                help="cpu, cuda, cuda:N or auto (xdist worker gwN takes cuda:N mod GPU count). Default auto.")
    g.addoption("--dtype", default=None, choices=["float32", "float16", "bfloat16"],
                help="load and probe dtype (default: each panel model's own, float32 for the paper)")
    g.addoption("--cache-dir", default=None, metavar="DIR",
                help="measurement cache folder (default $HEADWATCH_CACHE_DIR or .cache/headwatch); "
                     "organism checkpoints stay in $HEADWATCH_ORGANISMS_CACHE or .cache/organisms")
    g.addoption("--n-examples", type=int, default=None, metavar="N",
                help="examples in the induction batch (default: the panel's, 2000 for the paper)")
    g.addoption("--refresh", action="store_true", default=False,
                help="recompute cached measurements of the selected models")
    g.addoption("--reference-dir", default=None, metavar="DIR",
                help="read 'reference' models from DIR (the author's file format) instead of fixtures/published")


def _options(config: pytest.Config) -> provider.ProviderOptions:
    refresh = bool(config.getoption("--refresh"))
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "headwatch_refresh_since" in workerinput:
        since = workerinput["headwatch_refresh_since"]
    else:
        since = time.time() if refresh else None
    cache_dir = config.getoption("--cache-dir")
    n = config.getoption("--n-examples")
    if n is not None and n < 1:
        raise pytest.UsageError(f"--n-examples must be a positive integer, got {n}")
    return provider.ProviderOptions(
        cache_dir=Path(cache_dir).expanduser().resolve() if cache_dir else provider.default_cache_dir(),
        device=config.getoption("--device"),
        dtype=config.getoption("--dtype"),
        n_examples=n,
        refresh=refresh,
        refresh_since=since,
        reference_dir=config.getoption("--reference-dir"),
    )


def _share_cpu_threads(config: pytest.Config) -> None:
    """Give each xdist worker its share of the cores.

    Each worker's torch would otherwise start one thread per core; with two workers on two cores
    the small matrix products of probing and organism training then run about 4x slower than with
    one thread each (measured: 15.5 s vs 4.0 s for one tiny-model probe run).
    """
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0) or 0)
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def pytest_configure(config: pytest.Config) -> None:
    """Parse the panels and the user's selection now, so bad input fails before collection."""
    _share_cpu_threads(config)
    config.addinivalue_line("markers", "xdist_group(name): keep a model's tests on one xdist worker")
    options = _options(config)
    config.stash[_OPTIONS] = options
    names = _split(config.getoption("--panel")) or panels_mod.default_panels()
    try:
        loaded = [panels_mod.load_panel(n) for n in names]
        selection = panels_mod.select(loaded, models=_split(config.getoption("--models")) or None)
    except panels_mod.PanelError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[_PANELS] = loaded
    config.stash[_SELECTION] = selection
    if any(m.needs_model for m in selection):
        try:
            ensure_writable(options.measurement_dir)
        except CacheError as e:
            raise pytest.UsageError(str(e)) from None
    info = runinfo.current()
    info.panels = [p.name for p in loaded]
    info.device, info.dtype = options.device, options.dtype
    info.cache_dir, info.refresh, info.n_examples = str(options.cache_dir), options.refresh, options.n_examples
    config.stash[runinfo.stash_key()] = info
    if not any(m.revision_query for m in selection):
        select_revisions(config)  # cheap here: bad --revisions fail as usage errors, before collection


def select_revisions(config: pytest.Config) -> list[panels_mod.PanelModel]:
    """The selected models with concrete revisions (log-spaced specs and --revisions applied).

    Log-spaced panels list branches (Hub, cache, or an organism's training), so they resolve
    lazily at collection; explicit lists resolve in pytest_configure.
    """
    if not config.stash.get(_RESOLVED, False):
        options = config.stash[_OPTIONS]
        models = config.stash[_SELECTION]
        if options.reference_dir:  # a reference folder brings its own revisions
            try:
                models = [m.with_revisions(provider.list_revisions(m, options)) if m.source == "reference" else m
                          for m in models]
            except (KeyError, ValueError, OSError) as e:
                raise pytest.UsageError(f"--reference-dir {options.reference_dir}: {e}") from None
        try:
            models = panels_mod.select(
                [panels_mod.Panel("selection", Path("."), tuple(models))],
                revisions=_split(config.getoption("--revisions")) or None,
                list_branches=lambda m: provider.list_revisions(m, options),
            )
        except (panels_mod.PanelError, LoadingError) as e:
            raise pytest.UsageError(str(e)) from None
        config.stash[_SELECTION] = models
        config.stash[_RESOLVED] = True
        info = runinfo.current()
        for m in models:
            info.models[m.id] = {"repo": m.repo, "panel": m.panel, "source": m.source,
                                 "revisions": list(m.sorted_revisions)}
    return config.stash[_SELECTION]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    if "revision" in names:
        params = [
            pytest.param(m, r, id=f"{m.id}@{r}", marks=pytest.mark.xdist_group(m.id))
            for m in select_revisions(metafunc.config) for r in m.sorted_revisions
        ]
        metafunc.parametrize(("model_entry", "revision"), params, scope="session")
    elif "model_entry" in names:
        params = [pytest.param(m, id=m.id, marks=pytest.mark.xdist_group(m.id))
                  for m in select_revisions(metafunc.config)]
        metafunc.parametrize("model_entry", params, scope="session")


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def provider_options(pytestconfig: pytest.Config) -> provider.ProviderOptions:
    """Where and how measurements are made (from the command line)."""
    return pytestconfig.stash[_OPTIONS]


@pytest.fixture(scope="session")
def panel_models(pytestconfig: pytest.Config) -> list[panels_mod.PanelModel]:
    """Every selected model (for tests that look across models)."""
    return select_revisions(pytestconfig)


@pytest.fixture(scope="session")
def model_entry():  # replaced by parametrisation in pytest_generate_tests
    raise pytest.UsageError("model_entry is parametrised by the root conftest; request it from a test")


@pytest.fixture(scope="session")
def revision(model_entry):  # replaced by parametrisation; depends on model_entry so both are set
    raise pytest.UsageError("revision is parametrised by the root conftest; request it from a test")


@pytest.fixture(scope="session")
def model_records(model_entry, provider_options):
    """All records of the model, sorted by tokens seen (cache, published files, or fresh runs)."""
    return provider.model_records(model_entry, provider_options)


@pytest.fixture(scope="session")
def revision_record(model_entry, revision, provider_options):
    """The record of one (model, revision)."""
    return provider.revision_record(model_entry, revision, provider_options)


# ---- xdist: refresh time to workers, run info back to the controller ---------------------------


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """With ``--dist loadgroup``: group by model on the controller (see fixtures/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from fixtures.scheduling import make_scheduler

    return make_scheduler(config, log, [m.id for m in config.stash[_SELECTION]])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    options = node.config.stash[_OPTIONS]
    node.workerinput["headwatch_refresh_since"] = options.refresh_since


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    out = getattr(node, "workeroutput", {}) or {}
    if "headwatch_runinfo" in out:
        runinfo.run_info(node.config).merge(out["headwatch_runinfo"])


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["headwatch_runinfo"] = runinfo.current().to_dict()


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    """One line on what was measured and what came from the cache, plus any weight-hash alarms."""
    if getattr(config, "workerinput", None) is not None:
        return
    info = runinfo.run_info(config)
    if not info.entries:
        return
    counts = info.counts()
    parts = [f"{n} {status}" for status, n in sorted(counts.items())]
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
