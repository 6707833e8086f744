"""One way in: the options every front end shares, and what they select.

The pytest plugin (``headwatch/plugin.py``) and every subcommand that reads a panel (``judge``,
``report``, ``measure-panel``; ``headwatch/cli/``) go through this module, in one order:

    options -> panels -> models -> revisions -> provider

- **options**: :data:`OPTIONS`, one definition per option (flag, help, type, default), added to an
  argparse parser or pytest's option group by :func:`add_options`; a front end names the ones it
  takes. The values are read back into one :class:`Choices` (:func:`read_choices`), whoever parsed them.
- **panels**: the ``--panel`` names or files (repeatable, comma lists); without ``--panel``,
  :func:`default_panel_names` (the shipped panels needing neither network nor GPU), except with
  ``--reference-dir`` (below).
- **models**: the panels' models, narrowed by ``--models`` (short names or repo ids; a population's
  name names its members) and ``--seeds`` (population members by seed: ``fixtures.panels.select_seeds``).
- **revisions**: each model's revisions; ``{ log_spaced = n }`` specs resolved by listing its
  branches; a ``--reference-dir`` folder brings its own; ``--revisions`` narrows them
  (:meth:`Selection.resolve`).
- **provider**: one :class:`~headwatch.fixtures.provider.Provider` built from the choices, which
  reads (published files, ``--reference-dir``, the measurement cache) or measures each record.

``--reference-dir DIR``: the models DIR holds read their records there (through the provider, in
every front end). Without ``--panel`` the selection is the models DIR holds, each with the
expectations of the shipped panel entry it matches; with ``--panel``, the panels' models. Either
way a model in DIR that no panel in play lists is judged too, without expectations (its panel is
:data:`~headwatch.fixtures.reference.NO_PANEL`).

Bad input raises :class:`~headwatch.validation.InputError` (the CLI: exit 2; pytest: a usage error).
This module imports only the standard library and headwatch's rules and helpers at import time: the
plugin reads :data:`OPTIONS` in every pytest run of the environment, and ``headwatch --help`` must
stay instant.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from headwatch import validation
from headwatch.names import compact, duration, split_list
from headwatch.paths import default_cache_dir
from headwatch.validation import DTYPES, InputError

log = logging.getLogger("headwatch.selection")

_CACHE_DEFAULT = "$HEADWATCH_CACHE_DIR, else .cache/headwatch in a checkout, else ~/.cache/headwatch"
_ORGANISMS_DEFAULT = ("$HEADWATCH_ORGANISMS_CACHE, else .cache/organisms in a checkout, else "
                      "~/.cache/headwatch/organisms")


@dataclass(frozen=True)
class Option:
    """One option as the user types it: its flag, and argparse's keywords (pytest's addoption takes the same)."""

    flag: str
    dest: str
    kwargs: dict[str, Any]

    def spec(self, **overrides: Any) -> dict[str, Any]:
        return {**self.kwargs, **overrides}


def _option(flag: str, **kwargs: Any) -> Option:
    return Option(flag, flag.lstrip("-").replace("-", "_"), kwargs)


#: Every option the front ends share, by dest. The same flag means the same thing wherever it is taken.
OPTIONS: dict[str, Option] = {o.dest: o for o in (
    _option("--panel", action="append", default=None, metavar="NAME|FILE",
            help="panel(s): a shipped name (paper, published, organisms) or a TOML file; repeatable or comma list "
                 "(default: the shipped panels needing neither network nor GPU: published and organisms)"),
    _option("--models", action="append", default=None, metavar="NAMES",
            help="only these models (short names or repo ids); repeatable or comma list (default: every model "
                 "of the panels)"),
    _option("--revisions", action="append", default=None, metavar="REVS",
            help="only these revisions (branch names); repeatable or comma list (default: every revision of "
                 "the selected models)"),
    _option("--seeds", default=None, metavar="SEEDS", type=validation.argtype(validation.seed_list, "--seeds"),
            help="only the population members with these seeds, e.g. 1-3,1234, in every population entry "
                 "(docs/populations.md) (default: every member)"),
    _option("--device", default="auto", metavar="DEVICE", type=validation.argtype(validation.device, "--device"),
            help="where models that are measured run: cpu, cuda, cuda:N, mps or auto"),
    _option("--dtype", default=None, choices=DTYPES,
            help="load and probe dtype of models that are measured, and of the measurements read from the cache "
                 "(default: each panel model's own, float32 for the paper; fp16 underflows the baseline "
                 "attention of early checkpoints)"),
    _option("--n-examples", default=None, metavar="N", type=validation.argtype("n_examples", "--n-examples"),
            help="examples in the induction batch of models that are measured, and of the measurements read "
                 "from the cache (default: each panel's, 2000 for the paper)"),
    _option("--cache-dir", default=None, metavar="DIR",
            help=f"the measurement cache, read and written (default: {_CACHE_DEFAULT})"),
    _option("--hub-cache-dir", default=None, metavar="DIR",
            help="the Hub cache checkpoints are resolved in and downloaded into (default: a panel model's "
                 "hub_cache_dir, else huggingface_hub's own, HF_HUB_CACHE / HF_HOME aware)"),
    _option("--organisms-cache-dir", default=None, metavar="DIR",
            help=f"the Hub-format cache of the trained model organisms (default: {_ORGANISMS_DEFAULT})"),
    _option("--reference-dir", default=None, metavar="DIR",
            help="read the records of the models DIR holds from DIR (<model>/<revision>.json: converted, or "
                 "written by `headwatch measure --out`), with DIR's revisions, instead of measuring them or "
                 "reading the shipped published copy; records without tokens take them from the panel. Without "
                 "--panel the models judged are those DIR holds; one in no panel is judged without expectations "
                 "(default: none)"),
    _option("--refresh", action="store_true", default=False,
            help="recompute the cached measurements of the selected models"),
    _option("--train", action=argparse.BooleanOptionalAction, default=False,
            help="train the model organisms the selection needs and the organism cache lacks, as a step of its own "
                 "(`headwatch organisms train`: about 10 min on 2 cores for the organisms panel; under pytest beside "
                 "the tests that need no organism). Default --no-train: a missing organism is refused before "
                 "anything runs, naming the command that trains it"),
    _option("--claims", action="append", default=None, metavar="NAMES",
            help="judge only these claims (names: F1, causal, or your own registered claim's); repeatable or comma "
                 "list; formation is judged all the same where a panel declares it (default: every registered claim)"),
    _option("--claims-module", action="append", default=None, metavar="PATH|MODULE",
            help="a Python file or module that registers claims of your own (headwatch.claims.register_claim; "
                 "docs/claims.md); repeatable (default: none beyond the built-ins, a conftest.py and the installed "
                 "packages' entry points, group headwatch.claims)"),
    _option("--offline", action="store_true", default=False,
            help="resolve Hub checkpoints from the local Hub cache only: nothing is downloaded, and a checkpoint "
                 "missing there is refused naming the command that downloads it (default: off, unless HF_HUB_OFFLINE=1)"),
)}

#: What each front end takes (the CLI's ``measure`` takes device, dtype and hub-cache-dir with its own probe flags).
PANEL_OPTIONS = ("panel", "models", "revisions", "seeds", "device", "dtype", "n_examples", "cache_dir", "hub_cache_dir",
                 "organisms_cache_dir", "reference_dir")
#: Which claims a front end judges (pytest, judge, report): a selection, and modules that register more.
CLAIM_OPTIONS = ("claims", "claims_module")
#: What a front end does about a thing it needs that is not there (pytest, judge, report, measure-panel):
#: an organism is trained with --train, else refused; a Hub checkpoint downloaded unless --offline.
MISSING_OPTIONS = ("train", "offline")
#: What the training step (``headwatch organisms train``) takes of a selection: what the organisms it
#: trains and their in-training measurements (the cache keys the claims look up) depend on.
TRAIN_STEP_OPTIONS = ("panel", "models", "seeds", "dtype", "n_examples", "cache_dir", "organisms_cache_dir")


def add_options(add: Callable[..., Any], names: Iterable[str], *, dest_prefix: str = "",
                **overrides: dict[str, Any]) -> None:
    """Add the options ``names`` (keys of :data:`OPTIONS`) with ``add``: an argparse parser's
    ``add_argument`` or a pytest option group's ``addoption``. ``dest_prefix`` keeps pytest's
    namespace apart; ``overrides`` (by name) change an option's keywords for one front end
    (``measure``'s ``--dtype`` defaults to float32, say)."""
    for name in names:
        o = OPTIONS[name]
        add(o.flag, dest=dest_prefix + o.dest, **o.spec(**overrides.get(name, {})))


def option_given(get: Callable[[str], Any], names: Iterable[str] = tuple(OPTIONS)) -> bool:
    """Whether any of ``names`` differs from its default (``get(dest)`` reads a value)."""
    return any(get(OPTIONS[n].dest) != OPTIONS[n].kwargs.get("default") for n in names)


@dataclass(frozen=True)
class Choices:
    """The selection options' values, parsed (comma lists split), whichever front end read them."""

    panels: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    revisions: tuple[str, ...] = ()
    #: --seeds: population members with these seeds (None: every member).
    seeds: tuple[int, ...] | None = None
    device: str = "auto"
    dtype: str | None = None
    n_examples: int | None = None
    cache_dir: str | None = None
    hub_cache_dir: str | None = None
    organisms_cache_dir: str | None = None
    reference_dir: str | None = None
    refresh: bool = False
    #: --train: train the organisms the selection needs that the organism cache lacks (ensure_organisms).
    train: bool = False
    #: --offline: resolve Hub checkpoints from local caches only (False: huggingface_hub's own setting, HF_HUB_OFFLINE).
    offline: bool = False
    #: --claims: judge only these claims (empty: every registered one); checked against the registry by the front end.
    claims: tuple[str, ...] = ()
    #: --claims-module: files or modules that register claims (imported by the front end before anything is judged).
    claims_module: tuple[str, ...] = ()


def read_choices(get: Callable[[str], Any]) -> Choices:
    """:class:`Choices` from parsed options: ``get(dest)`` returns an option's value (None or the
    default where the front end does not take it). An empty ``--panel ""`` is refused, not read as
    "the default panels"."""
    values: dict[str, Any] = {}
    for name, o in OPTIONS.items():
        value = get(o.dest)
        if o.kwargs.get("action") == "append":
            if any(not v.strip(" ,") for v in value or ()):
                raise InputError(f"{o.flag}: got an empty value; give names (a comma list), or leave the option out")
            value = tuple(split_list(value))
        elif isinstance(value, list):  # --seeds: parsed into a list by its rule
            value = tuple(value)
        values[name] = o.kwargs.get("default") if value is None and o.kwargs.get("action") != "append" else value
    panels = values.pop("panel")
    return Choices(panels=panels, **values)


def choices_from_args(args: Any, **kwargs: Any) -> Choices:
    """:func:`read_choices` of an argparse namespace (options a command does not take read as unset)."""
    return read_choices(lambda dest: getattr(args, dest, None), **kwargs)


def as_argv(choices: Choices, names: Iterable[str] | None = None) -> list[str]:
    """The options (of ``names``, default all) that give ``choices`` again, those that differ from
    their defaults, for a command line printed to the user (``... --train``)."""
    out: list[str] = []
    for name, o in OPTIONS.items():
        if names is not None and name not in names:
            continue
        value = getattr(choices, "panels" if name == "panel" else name)
        if o.kwargs.get("action") == "append":
            out += [x for v in value for x in (o.flag, v)]
        elif o.kwargs.get("action") == "store_true":
            out += [o.flag] if value else []
        elif o.kwargs.get("action") is argparse.BooleanOptionalAction:
            out += [] if value == o.kwargs.get("default") else [o.flag if value else "--no-" + o.flag[2:]]
        elif isinstance(value, tuple):  # --seeds
            out += [o.flag, ",".join(map(str, value))]
        elif value != o.kwargs.get("default"):
            out += [o.flag, str(value)]
    return out


def default_panel_names() -> list[str]:
    """The panels that run without ``--panel``: the shipped ones needing neither network nor GPU."""
    from headwatch.fixtures.panels import default_panels  # deferred: no fixtures in a foreign pytest run

    return default_panels()


def provider_options(choices: Choices, **extra: Any):
    """The :class:`~headwatch.fixtures.provider.ProviderOptions` the choices ask for (folders made
    absolute; ``--reference-dir`` must be a folder). ``extra``: options no user types (progress, ...)."""
    from headwatch.fixtures.provider import ProviderOptions  # deferred: no fixtures in a foreign pytest run

    def folder(value: str | None) -> Path | None:
        return Path(value).expanduser().resolve() if value else None

    reference = choices.reference_dir
    if reference is not None and not Path(reference).expanduser().is_dir():
        raise InputError(f"--reference-dir {reference}: no such folder; give a folder of records "
                         "(<model>/<revision>.json, converted or written by `headwatch measure --out`)")
    return ProviderOptions(
        cache_dir=folder(choices.cache_dir) or default_cache_dir(), device=choices.device, dtype=choices.dtype,
        n_examples=choices.n_examples, refresh=choices.refresh, offline=True if choices.offline else None,
        reference_dir=str(Path(reference).expanduser()) if reference else None,
        hub_cache_dir=str(folder(choices.hub_cache_dir)) if choices.hub_cache_dir else None,
        organisms_cache_dir=str(folder(choices.organisms_cache_dir)) if choices.organisms_cache_dir else None,
        **extra,
    )


@dataclass
class Selection:
    """What the choices select: the panels, their models (revisions concrete once :meth:`resolve`
    ran), and the provider that reads or measures their records (its ``run`` says what it did)."""

    choices: Choices
    options: Any  # ProviderOptions
    panels: list[Any]  # Panel; with --reference-dir, the models DIR holds that no panel lists come last
    models: list[Any]  # PanelModel
    provider: Any  # Provider
    resolved: bool = False

    @property
    def run(self):
        return self.provider.run

    @property
    def needs_model(self) -> bool:
        """Whether some selected model is measured (loads checkpoints), not only read."""
        return any(m.needs_model for m in self.models)

    def check_measuring(self) -> None:
        """Where models are to be measured: the cache must be writable and ``--device`` present,
        checked now rather than in every measurement."""
        if not self.needs_model:
            return
        from headwatch.fixtures.cache import MeasurementCache  # deferred: no fixtures in a foreign pytest run

        # writable, or an existing folder on a read-only mount: what it lacks is refused before it is measured
        MeasurementCache(self.options.measurement_dir, read_only_ok=True)
        if self.options.device != "auto":
            from headwatch.fixtures.loading import pick_device  # deferred: no fixtures in a foreign pytest run

            pick_device(self.options.device)

    def resolve(self, *, list_branches: bool = True) -> list[Any]:
        """The selected models with concrete revisions: a ``--reference-dir`` folder's own,
        ``{ log_spaced = n }`` specs chosen from the branches (unless ``list_branches`` is False:
        listing them may train an organism or ask the Hub), ``--revisions`` applied, revisions the
        model's source lacks refused, all at once (``Provider.refuse_missing_revisions``). Idempotent."""
        if self.resolved:
            return self.models
        from headwatch.fixtures import panels  # deferred: no fixtures in a foreign pytest run

        provider, models = self.provider, self.models
        if self.options.reference_dir:  # a reference folder brings its own revisions
            try:
                models = [m.with_revisions(given) if (given := provider.folder_revisions(m)) is not None else m
                          for m in models]
            except (InputError, OSError) as e:
                raise InputError(f"--reference-dir {self.options.reference_dir}: {e}") from None
        models = panels.select([panels.Panel("selection", Path("."), tuple(models))],
                               list_branches=provider.list_revisions if list_branches else None)
        if self.choices.revisions:
            whole = {m.id: m for m in models}
            models = [_part_of(whole[m.id], m) for m in panels.select(
                [panels.Panel("selection", Path("."), tuple(models))], revisions=self.choices.revisions)]
        for m in models:  # revisions the source does not have: one error listing them all, before any work
            if list_branches or m.origin.reads_records:  # otherwise the Hub is not asked
                provider.refuse_missing_revisions(m)
        self.models, self.resolved = models, not any(m.revision_query for m in models)
        for m in models:
            self.run.models[m.id] = {"repo": m.repo, "panel": m.panel, "source": m.source,
                                     "revisions": list(m.sorted_revisions)}
        return models


def select(choices: Choices, *, resolve: bool = True, **extra: Any) -> Selection:
    """Panels, models and the provider for ``choices``; with ``resolve``, the revisions too
    (:meth:`Selection.resolve`). ``extra`` goes to the provider's options (progress, refresh_since)."""
    # deferred: no fixtures in a foreign pytest run
    from headwatch.fixtures import panels, reference
    from headwatch.fixtures.provider import Provider
    from headwatch.fixtures.runinfo import RunInfo

    options = provider_options(choices, **extra)
    names = list(choices.panels)
    folders = None
    if options.reference_dir:
        try:
            folders = reference.load_record_folders(options.reference_dir)
        except InputError as e:
            raise InputError(f"--reference-dir {options.reference_dir}: {e}") from None
    if names or folders is None:
        loaded = [panels.load_panel(n) for n in names or default_panel_names()]
        models = [m for p in loaded for m in p.models]
    else:  # --reference-dir without --panel: the models it holds, with the entries they match in the shipped panels
        shipped = [panels.load_panel(n) for n in dict.fromkeys([*default_panel_names(), *panels.available_panels()])]
        loaded, models = [], []
        for f in folders:
            hit = next(((p, m) for p in shipped for m in p.models if reference.folder_matches(f, m)), None)
            if hit is not None and hit[1] not in models:
                models.append(hit[1])
                loaded += [hit[0]] if hit[0] not in loaded else []
    if folders is not None:  # a model in the folder that no panel in play lists: judged without expectations
        listed = [m for p in loaded for m in p.models] if names else models
        orphans = tuple(folder_model(f) for f in folders if not any(reference.folder_matches(f, m) for m in listed))
        for m in orphans:
            log.warning("note: %s (%s) is in no panel; judged without expectations", m.repo, m.name)
        if orphans:
            loaded.append(panels.Panel(reference.NO_PANEL, Path(options.reference_dir), orphans))
            models += orphans
    chosen = panels.select([panels.Panel("selection", Path("."), tuple(models))],
                           models=choices.models or None)
    chosen = panels.select_seeds(chosen, choices.seeds)
    run = RunInfo(panels=[p.name for p in loaded], device=options.device, dtype=options.dtype,
                  cache_dir=str(options.cache_dir), refresh=options.refresh, n_examples=options.n_examples)
    selection = Selection(choices, options, loaded, chosen, Provider(options, run))
    if resolve:
        selection.resolve()
    return selection


# ---- organisms: the training step the selection depends on ------------------------------------


class OrganismsNotTrained(InputError):
    """Organisms the selection needs are missing from their cache, and training is off (--no-train);
    ``command`` trains them."""

    def __init__(self, message: str, command: list[str]):
        super().__init__(message)
        self.command = command


@dataclass
class OrganismStep:
    """What :func:`ensure_organisms` found and did."""

    #: The organisms that were missing when asked ("olmo seed 0"); empty when every one was trained.
    missing: list[str]
    #: ``headwatch organisms train ...``: the command that trains them (argv), what a refusal names.
    command: list[str]
    #: The step running beside the caller (``background``): a ``runner.TrainingStep``; else None.
    running: Any = None
    #: Wall seconds of training (in the caller's process; a running step keeps its own).
    seconds: float | None = None


def organism_models(chosen: Selection, model_ids: Iterable[str] | None = None) -> list[Any]:
    """The selected organism models (of ``model_ids`` and, for a population id there, its members):
    what the training step trains for this selection."""
    ids = None if model_ids is None else set(model_ids)
    from headwatch.fixtures.panels import populations  # deferred: no fixtures in a foreign pytest run

    if ids is not None:  # a population's tests need each of its members
        ids |= {m.id for p in populations(chosen.models) if p.id in ids for m in p.members}
    return [m for m in chosen.models if m.origin.trains and m.organism is not None
            and (ids is None or m.id in ids)]


def missing_organisms(chosen: Selection, models: Iterable[Any]) -> list[Any]:
    """The training jobs (``runner.TrainingJob``) of ``models`` whose organism cache lacks them, each
    measuring its checkpoints as it saves them, under the keys this selection's provider looks up."""
    from headwatch.model_organisms import missing_jobs  # deferred: torch (the trainer)

    provider = chosen.provider
    first: dict[tuple[str, int, Path], Any] = {}
    for m in models:
        first.setdefault(provider.organism_key(m), m)
    return missing_jobs(list(first), measure={k: provider.measure_plan(m) for k, m in first.items()})


def training_command(chosen: Selection, models: Iterable[Any]) -> list[str]:
    """``headwatch organisms train ...`` for ``models`` of the selection: the user's options that the
    step takes (:data:`TRAIN_STEP_OPTIONS`), ``--panel`` naming the panels they come from and
    ``--models`` narrowed where only some of the selection's organisms are needed."""
    models = list(models)
    choices, needed = chosen.choices, {m.panel for m in models}
    # the panels the models come from, as the user named them (a file by its path), else by name
    given = tuple(arg for arg, p in zip(choices.panels, chosen.panels) if p.name in needed)
    choices = replace(choices, panels=given or tuple(dict.fromkeys(m.panel for m in models)))
    if {m.id for m in models} != {m.id for m in organism_models(chosen)}:
        choices = replace(choices, models=tuple(dict.fromkeys(m.name for m in models)))
    return ["headwatch", "organisms", "train", *as_argv(choices, TRAIN_STEP_OPTIONS)]


def training_cost(organisms: list[str]) -> str:
    """About how long training these organisms (``ORGANISMS`` keys, one per training) takes on this
    machine: one thread each, as many at a time as the runner starts."""
    # deferred: no fixtures in a foreign pytest run (the recipes and the estimate import no torch)
    from headwatch.model_organisms import TRAIN_THREADS, estimated_seconds
    from headwatch.model_organisms.specs import default_parallel, estimate_seconds

    parallel = default_parallel(TRAIN_THREADS, len(organisms))
    seconds = estimate_seconds([estimated_seconds(name) for name in organisms], parallel)
    cores = os.cpu_count() or 1
    return f"about {duration(seconds)} on {cores} core{'s' if cores > 1 else ''}, {parallel} at a time"


def step_argv(command: list[str]) -> list[str]:
    """``command`` (``headwatch organisms train ...``) as this interpreter runs it in the background,
    printing the progress lines a ``runner.TrainingStep`` reads."""
    return [sys.executable, "-m", "headwatch", *command[1:], "--progress-lines"]


def training_failed(error: BaseException) -> bool:
    """Whether ``error`` is the training step's failure (``runner.TrainingError``: a child failed, or the
    step was stopped). Asked without importing the runner, whose package loads torch: where the runner
    was never imported, no training ran and nothing raised it."""
    runner = sys.modules.get("headwatch.model_organisms.runner")
    return runner is not None and isinstance(error, runner.TrainingError)


def ensure_organisms(chosen: Selection, *, train: bool, model_ids: Iterable[str] | None = None,
                     background: bool = False, report: Callable[[Any], None] | None = None,
                     say: Callable[[str], None] = log.info, on_locked: Callable[[], None] | None = None) -> OrganismStep:
    """Make sure the organisms the selection needs (of ``model_ids``, default all) are trained: the
    one way every front end gets them, before anything reads one.

    Nothing missing: nothing to do. Missing and ``train`` off: :class:`OrganismsNotTrained` naming the
    exact command that trains them. Missing and ``train`` on: the training step, refused first where
    it would train more organisms than one run may without being told to
    (``validation.check_training_size``); in this process (``report`` gets each child's progress,
    ``on_locked`` is called once every organism's lock is held), or with ``background`` as a process
    of its own (``headwatch organisms train``, :class:`~headwatch.model_organisms.runner.TrainingStep`)
    that this returns once it holds every lock: whatever asks for one of them from then on (the
    provider, in any process) waits for its training to end. Raises ``runner.TrainingError`` when a
    child fails (the others finish first).
    """
    models = organism_models(chosen, model_ids)
    if not models:
        return OrganismStep([], [])
    jobs = missing_organisms(chosen, models)
    command = training_command(chosen, models)
    if not jobs:
        return OrganismStep([], command)
    from headwatch.model_organisms import TRAIN_THREADS, runner  # deferred: torch (the trainer)

    names = [j.name for j in jobs]
    where = ", ".join(dict.fromkeys(str(j.cache_dir) for j in jobs))
    cost = training_cost([j.family for j in jobs])
    if not train:
        raise OrganismsNotTrained(
            f"{len(jobs)} organism(s) the selection needs are not trained in {where}: {compact(names)}. Train them "
            f"first with `{shlex.join(command)}` ({cost}), or rerun with --train to train them as a step of its own"
            " beside the work that needs none", command)
    validation.check_training_size(len(jobs), cost)
    if background:
        return OrganismStep(names, command, runner.TrainingStep(step_argv(command), report=report, say=say).start())
    parallel = runner.default_parallel(TRAIN_THREADS, len(jobs))
    say(f"training {len(jobs)} organism(s) into {where}: {compact(names)} ({cost}, {TRAIN_THREADS} thread each; "
        "each checkpoint is measured as it is saved)")
    t0 = time.monotonic()
    locks = runner.hold_locks(jobs)
    if on_locked is not None:
        on_locked()
    runner.train_in_subprocesses(jobs, threads=TRAIN_THREADS, parallel=parallel,
                                 report=runner.log_progress if report is None else report, locks=locks)
    return OrganismStep(names, command, seconds=time.monotonic() - t0)


def _part_of(whole: Any, part: Any) -> Any:
    """``part`` (``whole`` narrowed by ``--revisions``) measured and judged as part of ``whole``: the
    training's total tokens stay ``whole``'s, and only ``whole``'s final revision carries the
    ablations, so a revision's measurement (its cache entry) is the same whichever revisions are
    selected with it."""
    if part.revision_query:
        return part
    ablation = part.ablation
    if ablation == "final" and whole.final_revision not in part.revisions:
        ablation = "none"
    return replace(part, ablation=ablation, total_tokens_declared=whole.total_tokens)


_NOT_A_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def folder_model(folder: Any):
    """A :class:`~headwatch.fixtures.panels.PanelModel` for a ``--reference-dir`` folder no panel lists:
    its records as they are (tokens as recorded), no expectations (claims that need one say n/a)."""
    # deferred: no fixtures in a foreign pytest run
    from headwatch.fixtures.panels import PanelModel, TokensRule
    from headwatch.fixtures.reference import NO_PANEL

    name = _NOT_A_NAME.sub("-", folder.folder.name).lstrip("._-") or "model"
    return PanelModel(name, folder.model, "reference", tuple(folder.revisions), TokensRule(), NO_PANEL)


__all__ = ["CLAIM_OPTIONS", "MISSING_OPTIONS", "OPTIONS", "PANEL_OPTIONS", "TRAIN_STEP_OPTIONS", "Choices", "Option", "OrganismStep",
           "OrganismsNotTrained", "Selection", "add_options", "as_argv", "choices_from_args", "default_panel_names",
           "ensure_organisms", "folder_model", "missing_organisms", "step_argv", "option_given", "organism_models",
           "provider_options", "read_choices", "select", "training_command", "training_cost"]
