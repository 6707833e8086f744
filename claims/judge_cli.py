"""``headwatch judge``: judge F1-F5 and the causal check, print the verdicts, write them as JSON.

Records come from the panel (``--panel``, default ``published``: the author's measurements shipped
in headwatch.fixtures; other sources through :class:`headwatch.fixtures.provider.Provider`, i.e. the
measurement cache, measuring what is missing) or from a folder of records (``--reference-dir DIR``:
``DIR/<model>/<revision>.json``, converted, or written by ``headwatch measure --out``). A model from
a folder is matched to its panel entry (repo id, short name or folder name:
:func:`headwatch.fixtures.reference.folder_matches`), which supplies its expectations and the
tokens seen of records that lack them; an unmatched model is judged with none (shape and DCLM
claims then say n/a), and must carry its tokens. The verdicts are :func:`headwatch.claims.judge.judge_model`'s, the same the claim tests
assert; ``--json`` writes each as :meth:`headwatch.claims.verdict.Verdict.to_dict`. A panel's
populations follow (claims/population.py: each claim over the reference members, k of n with its
exact interval, and each candidate's place among them), under ``populations`` in the JSON.

Nothing is trained or downloaded unless ``--train-missing`` says so: an organism that is not
trained, or a Hub checkpoint that is not in the local Hub cache, is listed with the command that
fills it, and the command exits 2 after judging the rest.
"""
from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Any

from headwatch.files import check_output_file, write_json_atomic
from headwatch.fixtures.loading import NotInCache
from headwatch.fixtures.panels import available_panels, load_panel, populations, select_seeds
from headwatch.fixtures.provider import OrganismNotTrained, Provider, ProviderOptions
from headwatch.fixtures.reference import fill_tokens, folder_matches, load_record_folders
from headwatch.names import model_matches, split_list
from headwatch.paths import default_cache_dir
from headwatch.spec import Expectations
from headwatch.validation import InputError, argtype, seed_list

log = logging.getLogger("headwatch.judge")

DEFAULT_PANEL = "published"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--panel", default=None,
                        help=f"panel name or TOML path (default: {DEFAULT_PANEL}; with --reference-dir, "
                             "the panel whose entries supply expectations, default: all shipped panels)")
    parser.add_argument("--reference-dir", default=None, metavar="DIR",
                        help="judge the models in DIR, a folder of records (<model>/<revision>.json, converted or "
                             "written by `headwatch measure --out`); records without tokens take them from the "
                             "panel (default: none, the panel's own sources)")
    parser.add_argument("--models", nargs="+", default=None, metavar="M",
                        help="only these models (short names or repo ids; comma lists too); others are not "
                             "measured (default: every model of the panel)")
    parser.add_argument("--seeds", default=None, metavar="SEEDS", type=argtype(seed_list, "--seeds"),
                        help="only the population members with these seeds, e.g. 1-3,1234 (docs/populations.md; default: every member)")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="headwatch cache for models that are measured, not published (default: "
                             "$HEADWATCH_CACHE_DIR, else .cache/headwatch in a checkout, else ~/.cache/headwatch)")
    parser.add_argument("--json", default=None, metavar="OUT",
                        help="write the verdicts to OUT as JSON; '-' writes them to stdout and the verdict "
                             "lines to stderr (default: no JSON). Checked before anything is judged")
    parser.add_argument("--train-missing", action="store_true",
                        help="train organisms the organism cache lacks and download Hub checkpoints the Hub cache "
                             "lacks, then measure them (default: list them with the command that fills them, exit 2)")


def fill_command(args: argparse.Namespace) -> str:
    """This command again, with --train-missing: what fills everything it found missing."""
    words = ["headwatch", "judge"]
    for flag, value in (("--panel", args.panel), ("--cache-dir", args.cache_dir)):
        if value:
            words += [flag, value]
    if args.models:
        words += ["--models", *args.models]
    if args.seeds:
        words += ["--seeds", ",".join(map(str, args.seeds))]
    return shlex.join([*words, "--train-missing"])


def _records(args: argparse.Namespace) -> tuple[list[tuple[str, list[Any], Any]], list[str]]:
    """(repo, records, panel entry or None) of every model to judge, measuring only the selected
    ones; and a line for each model whose checkpoints are missing (not trained, not downloaded)."""
    wanted = split_list(args.models)

    def is_wanted(repo: str, entry: Any) -> bool:
        return not wanted or any(entry.matches(w) if entry is not None else model_matches(w, repo) for w in wanted)

    if args.reference_dir:
        if not Path(args.reference_dir).is_dir():
            raise InputError(f"--reference-dir {args.reference_dir} is not a folder")
        names = [args.panel] if args.panel else [DEFAULT_PANEL] + [p for p in available_panels() if p != DEFAULT_PANEL]
        entries = [m for name in names for m in load_panel(name).models]
        picked = select_seeds(entries, args.seeds)
        out = []
        for folder in load_record_folders(args.reference_dir):
            entry = next((m for m in entries if folder_matches(folder, m)), None)
            repo = entry.repo if entry is not None else folder.model
            if not is_wanted(repo, entry) or (args.seeds is not None and entry not in picked):
                continue
            if entry is None:
                log.warning("note: %s is in no panel; judged without expectations", folder.model)
            out.append((repo, fill_tokens(folder.records, entry, where=str(folder.folder)), entry))
        return out, []
    cache_dir = Path(args.cache_dir).expanduser().resolve() if args.cache_dir else default_cache_dir()
    # Without --train-missing: nothing is trained, and Hub checkpoints resolve from the local cache only.
    provider = Provider(ProviderOptions(cache_dir=cache_dir, train_missing=args.train_missing,
                                        offline=None if args.train_missing else True))
    out, missing = [], []
    for m in select_seeds(load_panel(args.panel or DEFAULT_PANEL).models, args.seeds):
        if not is_wanted(m.repo, m):
            continue
        try:
            out.append((m.repo, provider.model_records(m), m))
        except (OrganismNotTrained, NotInCache) as e:
            missing.append(f"{m.id}: {e}")
    return out, missing


def _populations(judged: dict[str, tuple[Any, list[Any], dict[str, Any]]], result: dict[str, Any], out: Any) -> int:
    """Print each population among the judged models (claims over its reference members, candidates'
    places: claims/population.py) and add it to ``result``; the number of candidates that are outliers."""
    # Deferred like the judge: the population module imports it (and through it torch).
    from .population import member_from_verdicts, population_report, population_table

    outliers = 0
    for pop in populations(e for e, _, _ in judged.values()):
        members = [member_from_verdicts(m, judged[m.id][1], judged[m.id][2]) for m in pop.members]
        if not any(m.role != "candidate" for m in members):
            continue
        report = population_report(pop.id, members)
        print(population_table(report), file=out)
        result.setdefault("populations", {})[pop.id] = report.to_dict()
        outliers += sum(p.outlier for places in report.placements.values() for p in places.values())
    return outliers


def run(args: argparse.Namespace) -> int:
    """Print every model's verdicts, then each population's; 1 if a claim fails that the panel did not
    declare (or a declared deviation did not occur, or does not match what was measured; or an organism
    did not form; or a population's candidate is an outlier among its reference members);
    2 on bad input or when something to judge is missing (listed with the command that fills it)."""
    # Deferred: the judge imports torch (through the probes' head sets); `headwatch judge --help` need not.
    from .judge import judge_model, status_word, surprises

    json_path = check_output_file(args.json, "--json") if args.json is not None else None
    to_stdout = args.json == "-"
    out = sys.stderr if to_stdout else sys.stdout
    models, missing = _records(args)
    if args.models and not models and not missing:
        raise InputError(f"none of {args.models} is among the models judged")

    result: dict[str, Any] = {"models": {}}
    unexpected = 0
    judged: dict[str, tuple[Any, list[Any], dict[str, Any]]] = {}  # model id -> (entry, records, verdicts)
    for repo, records, entry in models:
        if not records:
            raise InputError(f"no measurement records for {repo}")
        verdicts = judge_model(records, entry.expect if entry else Expectations(),
                               entry.total_tokens if entry else None)
        result["models"][repo] = {claim: v.to_dict() for claim, v in verdicts.items()}
        print(f"== {repo}" + (f" ({entry.name}, panel {entry.panel})" if entry else "")
              + f": {len(records)} revisions", file=out)
        for claim, v in verdicts.items():  # formation first where declared, then CLAIMS in order
            print(f"  {claim:<9} {status_word(v):<27} {v.key:<34} {v.message}", file=out)
        unexpected += surprises(verdicts)
        if entry is not None:
            judged[entry.id] = (entry, records, verdicts)
    unexpected += _populations(judged, result, out)
    if missing:
        result["missing"] = missing
    if to_stdout:
        json.dump(result, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    elif json_path is not None:
        write_json_atomic(json_path, result)
        log.info("wrote %s", json_path)
    if missing:
        print(f"not judged, {len(missing)} model(s) missing (nothing was trained or downloaded):", file=sys.stderr)
        for line in missing:
            print(f"  {line}", file=sys.stderr)
        print(f"to train and download what is missing, then judge: {fill_command(args)}", file=sys.stderr)
        return 2
    return 1 if unexpected else 0
