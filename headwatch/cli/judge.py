"""``headwatch judge``: judge every registered claim (F1-F5, causal, your own), print the verdicts, write them as JSON.

The models are :mod:`headwatch.selection`'s (the options pytest takes: ``--panel``, ``--models``,
``--revisions``, ``--reference-dir``, ...); their records come through one
:class:`~headwatch.fixtures.provider.Provider`: the published files, a ``--reference-dir`` folder
(``DIR/<model>/<revision>.json``, converted or written by ``headwatch measure --out``), or the
measurement cache, measuring what is missing. The verdicts are
:func:`headwatch.claims.judge.judge_model`'s, the same the claim tests assert; ``--json`` writes
each as :meth:`headwatch.claims.verdict.Verdict.to_dict`. A panel's populations follow
(claims/population.py: each claim over the reference members, k of n with its exact interval, and
each candidate's place among them), under ``populations`` in the JSON.

What is missing follows the policy every front end shares (:data:`headwatch.selection.MISSING_OPTIONS`):
an organism that is not trained is trained with ``--train`` (the training step,
:func:`headwatch.selection.ensure_organisms`), a Hub checkpoint missing from the local Hub cache is
downloaded unless ``--offline``; what stays missing is listed with the command that fills it, and
the command exits 2 after judging the rest.
"""
from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from headwatch import selection
from headwatch.cli import jobs
from headwatch.files import check_output_file, write_json_atomic
from headwatch.fixtures.loading import NotInCache
from headwatch.fixtures.preflight import CHECKED
from headwatch.fixtures.panels import populations
from headwatch.fixtures.provider import NeedsMeasuring, OrganismNotTrained, Provider
from headwatch.fixtures.reference import NO_PANEL
from headwatch.formatting import terminal_text
from headwatch.validation import InputError

log = logging.getLogger("headwatch.judge")

EXAMPLES = """examples:
  headwatch judge --panel published                          the author's own measurements (seconds)
  headwatch judge --panel organisms --train                  train the organisms first if they are missing
  headwatch judge --panel my-seed.toml --json verdicts.json  your checkpoints; the verdicts as JSON too
  headwatch judge --panel paper --cache-dir /shared/hw --offline   from a shared cache, nothing downloaded
  headwatch judge --panel polypythia --offline --jobs 4      a seed suite's cached records, four models at a time
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    selection.add_options(parser.add_argument, selection.PANEL_OPTIONS + selection.MISSING_OPTIONS
                          + selection.CLAIM_OPTIONS)
    parser.add_argument("--json", default=None, metavar="OUT",
                        help="write the verdicts to OUT as JSON; '-' writes them to stdout and the verdict "
                             "lines to stderr (default: no JSON). Checked before anything is judged")
    jobs.add_option(parser)


def package_line(package: Any) -> str:
    """The verdict table's line saying where a packaged model's weights came from (a record's
    ``provenance["package"]``): the GGUF's sha256 (checked against the package's published one when
    converted), and whether the measured checkpoint's files matched the provenance file
    (``preflight.CHECKED``: set only when they were checked, as they are now before any measurement)."""
    p = package if isinstance(package, dict) else {}
    get = lambda k: p.get(k, "?")  # noqa: E731 - a record's damaged provenance is shown, never a KeyError
    checked = ("the checkpoint's files matched its provenance file's sha256 when measured" if p.get(CHECKED) is True
               else "the checkpoint's files were not checked against its provenance file when measured")
    return terminal_text(f"  weights   {get('package')} {get('version')}, {get('gguf_file')} (GGUF sha256 "
                         f"{get('gguf_sha256')}, checked when converted), {get('weights')}; {checked}")


def chosen(args: argparse.Namespace) -> selection.Selection:
    """The selection the arguments ask for."""
    return selection.select(selection.choices_from_args(args), progress=False, resolve=True)


def chosen_claims(args: argparse.Namespace) -> list[Any]:
    """The claims to judge: the registry's (built-ins, installed entry points', ``--claims-module``'s),
    narrowed by ``--claims`` (an unknown name: exit 2 with a did-you-mean). Loaded before any panel is
    read: a panel's ``xfail`` may name a researcher's claim."""
    from headwatch.claims.registry import load, select_claims  # deferred: the claims import numpy and scipy

    choices = selection.choices_from_args(args)
    load(choices.claims_module)
    return select_claims(choices.claims)


class Judging:
    """What each model's work needs: the provider and the claims. A worker process gets a copy
    (:mod:`headwatch.cli.jobs`) without the claims themselves (their negative controls need not
    pickle): it loads them as this process did (entry points, ``--claims-module``) and takes the
    same ones by name."""

    def __init__(self, provider: Provider, claims: list[Any], modules: tuple[str, ...] = ()) -> None:
        self.provider, self.modules = provider, tuple(modules)
        self.names = [c.name for c in claims]
        self._claims: list[Any] | None = list(claims)

    @classmethod
    def of(cls, args: argparse.Namespace, provider: Provider, claims: list[Any]) -> tuple["Judging", "Judging"]:
        """(this process's, the workers')."""
        modules = tuple(selection.choices_from_args(args).claims_module)
        return cls(provider, claims, modules), cls(provider.worker_copy(), claims, modules)

    @property
    def claims(self) -> list[Any]:
        if self._claims is None:
            from headwatch.claims.registry import get_claim, load  # deferred: numpy and scipy

            load(self.modules)
            self._claims = [get_claim(n) for n in self.names]
        return self._claims

    def __getstate__(self) -> dict[str, Any]:
        return {"provider": self.provider, "modules": self.modules, "names": self.names, "_claims": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


@dataclass
class Judged:
    """One model's part of ``judge``'s output, as its work returns it (in a worker process or here)."""

    verdicts: dict[str, Any] | None  # claim -> Verdict; None: the model is missing
    revisions: int = 0
    package: Any = None  # a packaged model's provenance["package"]
    member: Any = None  # claims/population.py Member, for a population member
    #: Missing: why (the error's text), what an organism lacks (OrganismNotTrained.what), whether a download would fill it.
    missing: str | None = None
    untrained: str | None = None
    not_downloaded: bool = False


def judge_one(judging: Judging, entry: Any) -> Judged:
    """Read one model's records, judge its claims, keep what the output needs of them (its verdicts, a
    population member's quantities), drop the records: the work ``--jobs`` spreads."""
    from headwatch.claims.judge import judge_model  # deferred: numpy and scipy
    from headwatch.claims.population import member_from_verdicts

    provider = judging.provider
    try:
        records = provider.model_records(entry)
    except (OrganismNotTrained, NotInCache) as e:  # listed with the command that fills it
        return Judged(None, missing=str(e), untrained=e.what if isinstance(e, OrganismNotTrained) else None,
                      not_downloaded=isinstance(e, NotInCache))
    if not records:
        raise InputError(f"no measurement records for {entry.repo}")
    verdicts = judge_model(records, entry.expect, entry.total_tokens, claims=judging.claims)
    member = member_from_verdicts(entry, records, verdicts) if entry.member is not None else None
    out = Judged(verdicts, len(records), records[-1].provenance.get("package"), member)
    provider.forget(entry)
    return out


def get_organisms(picked: selection.Selection) -> list[str]:
    """The training step for what ``picked`` needs (with --train); the command that trains what stays
    missing (--no-train: those models are then listed as missing), else []."""
    try:
        selection.ensure_organisms(picked, train=picked.choices.train)
    except selection.OrganismsNotTrained as e:
        return e.command
    return []


def fill_missing(untrained: list[str], not_downloaded: bool) -> list[str]:
    """What fills what stayed missing: the training step's command (or --train) for organisms, a
    rerun that may download for Hub checkpoints the local Hub cache lacks."""
    lines = []
    if untrained:
        lines.append(f"to train the organisms: {shlex.join(untrained)} (or rerun with --train)")
    if not_downloaded:
        lines.append("to download the checkpoints: rerun without --offline, with HF_HUB_OFFLINE unset")
    return lines


def _populations(models: list[Any], members: dict[str, Any], result: dict[str, Any], out: Any) -> int:
    """Print each population among the judged models (claims over its reference members, candidates'
    places: claims/population.py) and add it to ``result``; the number of placements that fail (an outlier
    beyond the Bonferroni bound at SPEC.population_outlier_alpha; a flag does not count)."""
    from headwatch.claims.population import population_report, population_table  # deferred: numpy, scipy

    failing = 0
    for pop in populations(m for m in models if m.id in members):
        judged = [members[m.id] for m in pop.members if m.id in members]
        if not any(m.role != "candidate" for m in judged):
            continue
        report = population_report(pop.id, judged, rule=pop.placement)
        print(terminal_text(population_table(report), newlines=True), file=out)
        result.setdefault("populations", {})[pop.id] = report.to_dict()
        failing += report.failing_candidates  # an outlier flag is not news; a failing placement is
    return failing


def run(args: argparse.Namespace) -> int:
    """Print every model's verdicts, then each population's; 1 if a claim fails that the panel did not
    declare (or a declared deviation did not occur, or does not match what was measured; or an organism
    did not form; or a population's candidate fails its placement among the reference members: an
    outlier beyond SPEC.population_outlier_alpha, not a flag);
    2 on bad input or when something to judge is missing (listed with the command that fills it)."""
    # Deferred: the claims import numpy and scipy; `headwatch judge --help` need not.
    from headwatch.claims.judge import status_word, surprises
    from headwatch.claims.verdict import Status

    json_path = check_output_file(args.json, "--json") if args.json is not None else None
    to_stdout = args.json == "-"
    out = sys.stderr if to_stdout else sys.stdout
    claims = chosen_claims(args)
    picked = chosen(args)
    try:
        untrained = get_organisms(picked)
    except Exception as e:
        if not selection.training_failed(e):
            raise
        print(terminal_text(f"headwatch judge: {e}", newlines=True), file=sys.stderr)
        return 1
    result: dict[str, Any] = {"models": {}}
    unexpected = 0
    crashed: list[str] = []
    missing: list[str] = []
    not_downloaded = False
    members: dict[str, Any] = {}  # population members: model id -> claims/population.py Member
    # One model at a time per process: read, judge, keep its verdicts (and a member's quantities), drop
    # its records; a population of 7,854 full-size records is never held at once. --jobs
    # spreads the models over processes; their results come back here in the panel's order.
    models = list(picked.models)
    here, there = Judging.of(args, picked.provider, claims)
    with jobs.InOrder(judge_one, models, jobs.jobs_for(args.jobs, models), context=here, worker_context=there,
                      run_here=(NeedsMeasuring,), label=lambda m: m.id,
                      progress=jobs.Progress(len(models), log)) as judged:
        for entry, j in zip(models, judged):
            if j.verdicts is None:
                # the organisms: one command trains them all (printed once, below), not one per model
                missing.append(f"{entry.id}: {j.untrained if j.untrained is not None and untrained else j.missing}")
                not_downloaded |= j.not_downloaded
                continue
            verdicts = j.verdicts
            result["models"][entry.repo] = {claim: v.to_dict() for claim, v in verdicts.items()}
            print(terminal_text(f"== {entry.repo}" + (f" ({entry.name}, panel {entry.panel})" if entry.panel != NO_PANEL
                                                       else "") + f": {j.revisions} revisions"), file=out)
            if j.package:  # a packaged model (fixtures/packaged.py): where its weights came from
                print(package_line(j.package), file=out)
            width = max([9, *map(len, verdicts)])  # a user's claim may have a longer name than F1 ... formation
            for claim, v in verdicts.items():  # formation first where declared, then CLAIMS in order
                print(terminal_text(f"  {claim:<{width}} {status_word(v):<27} {v.key:<34} {v.message}"), file=out)
            unexpected += surprises(verdicts)
            crashed += [f"{entry.id}: {v.message}" for v in verdicts.values() if v.status is Status.CRASHED]
            if j.member is not None:
                members[entry.id] = j.member
    unexpected += _populations(list(picked.models), members, result, out)
    if missing:
        result["missing"] = missing
    if to_stdout:
        json.dump(result, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    elif json_path is not None:
        write_json_atomic(json_path, result)
        log.info("wrote %s", json_path)
    if crashed:  # a crash is not a finding: exit 3 (headwatch.cli.EXIT_CODES), after every other claim was judged
        print(f"{len(crashed)} verdict(s) crashed (a claim's judge raised; the log has the traceback):", file=sys.stderr)
        for line in crashed:
            print(f"  {line}", file=sys.stderr)
    if missing:
        print(f"not judged, {len(missing)} model(s) missing:", file=sys.stderr)
        for line in missing:
            print(terminal_text(f"  {line}"), file=sys.stderr)
        for line in fill_missing(untrained, not_downloaded):
            print(terminal_text(line), file=sys.stderr)
        return 2
    return 3 if crashed else 1 if unexpected else 0
