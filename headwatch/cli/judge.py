"""``headwatch judge``: judge F1-F5 and the causal check, print the verdicts, write them as JSON.

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
from typing import Any

from headwatch import selection
from headwatch.files import check_output_file, write_json_atomic
from headwatch.fixtures.loading import NotInCache
from headwatch.fixtures.panels import populations
from headwatch.fixtures.provider import OrganismNotTrained
from headwatch.fixtures.reference import NO_PANEL
from headwatch.validation import InputError

log = logging.getLogger("headwatch.judge")

EXAMPLES = """examples:
  headwatch judge --panel published                          the author's own measurements (seconds)
  headwatch judge --panel organisms --train                  train the organisms first if they are missing
  headwatch judge --panel my-seed.toml --json verdicts.json  your checkpoints; the verdicts as JSON too
  headwatch judge --panel paper --cache-dir /shared/hw --offline   from a shared cache, nothing downloaded
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    selection.add_options(parser.add_argument, selection.PANEL_OPTIONS + selection.MISSING_OPTIONS)
    parser.add_argument("--json", default=None, metavar="OUT",
                        help="write the verdicts to OUT as JSON; '-' writes them to stdout and the verdict "
                             "lines to stderr (default: no JSON). Checked before anything is judged")


def chosen(args: argparse.Namespace) -> selection.Selection:
    """The selection the arguments ask for."""
    return selection.select(selection.choices_from_args(args), progress=False, resolve=True)


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
        print(population_table(report), file=out)
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
    from headwatch.claims.judge import judge_model, status_word, surprises
    from headwatch.claims.population import member_from_verdicts

    json_path = check_output_file(args.json, "--json") if args.json is not None else None
    to_stdout = args.json == "-"
    out = sys.stderr if to_stdout else sys.stdout
    picked = chosen(args)
    try:
        untrained = get_organisms(picked)
    except Exception as e:
        if not selection.training_failed(e):
            raise
        print(f"headwatch judge: {e}", file=sys.stderr)
        return 1
    result: dict[str, Any] = {"models": {}}
    unexpected = 0
    missing: list[str] = []
    not_downloaded = False
    members: dict[str, Any] = {}  # population members: model id -> claims/population.py Member
    # One model at a time: read, judge, print, keep its verdicts (and a member's quantities), drop its
    # records; a population of 7,854 full-size records is never held at once (issue 33).
    for entry in picked.models:
        try:
            records = picked.provider.model_records(entry)
        except (OrganismNotTrained, NotInCache) as e:  # listed with the command that fills it
            missing.append(f"{entry.id}: {e}")
            not_downloaded |= isinstance(e, NotInCache)
            continue
        if not records:
            raise InputError(f"no measurement records for {entry.repo}")
        verdicts = judge_model(records, entry.expect, entry.total_tokens)
        result["models"][entry.repo] = {claim: v.to_dict() for claim, v in verdicts.items()}
        print(f"== {entry.repo}" + (f" ({entry.name}, panel {entry.panel})" if entry.panel != NO_PANEL else "")
              + f": {len(records)} revisions", file=out)
        package = records[-1].provenance.get("package")
        if package:  # a packaged model (fixtures/packaged.py): where its weights came from
            print(f"  weights   {package['package']} {package['version']}, {package['gguf_file']} (sha256 "
                  f"{package['gguf_sha256']}), {package['weights']}", file=out)
        for claim, v in verdicts.items():  # formation first where declared, then CLAIMS in order
            print(f"  {claim:<9} {status_word(v):<27} {v.key:<34} {v.message}", file=out)
        unexpected += surprises(verdicts)
        if entry.member is not None:
            members[entry.id] = member_from_verdicts(entry, records, verdicts)
        picked.provider.forget(entry)
        del records
    unexpected += _populations(list(picked.models), members, result, out)
    if missing:
        result["missing"] = missing
    if to_stdout:
        json.dump(result, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    elif json_path is not None:
        write_json_atomic(json_path, result)
        log.info("wrote %s", json_path)
    if missing:
        print(f"not judged, {len(missing)} model(s) missing:", file=sys.stderr)
        for line in missing:
            print(f"  {line}", file=sys.stderr)
        for line in fill_missing(untrained, not_downloaded):
            print(line, file=sys.stderr)
        return 2
    return 1 if unexpected else 0
