"""``headwatch panels``: the shipped panels, one line each (their models, what a run costs);
``headwatch panels check FILE``: a panel file checked as every front end reads it, and what it selects.

A panel's cost is told from what is on this machine: published records read in seconds; organisms
already trained read their measurements, missing ones are the training step first (its estimate,
:func:`headwatch.selection.training_cost`); Hub checkpoints are an estimate from their published
configs (``headwatch.fixtures.estimate``: GB to download, time on one GPU). Nothing is trained,
downloaded or measured. A bad panel file is exit 2, with the message every front end gives.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from headwatch import selection
from headwatch.fixtures.estimate import estimate_models
from headwatch.fixtures.panels import available_panels, default_panels, load_panel, populations
from headwatch.fixtures.provider import Provider
from headwatch.formatting import terminal_text
from headwatch.names import compact
from headwatch.validation import InputError

EXAMPLES = """examples:
  headwatch panels                                  every shipped panel: models, what a run costs
  headwatch panels check my-seed.toml               check a panel file, print what it selects
  headwatch panels check my-seed.toml --models pythia-1b-seed1 --revisions step1000
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("verb", nargs="?", choices=["list", "check"], default="list",
                        help="list: the shipped panels, one line each; check FILE: check a panel file and print what "
                             "it selects (default: list)")
    parser.add_argument("file", nargs="?", metavar="FILE", help="the panel file (or shipped name) to check")
    selection.add_options(parser.add_argument, ("models", "revisions", "seeds", "organisms_cache_dir"))


def _cost(models: list[Any], provider: Any) -> str:
    """What a run of ``models`` costs on this machine, in a few words (``provider`` says where organisms live)."""
    parts = []
    if any(m.origin.reads_records for m in models):
        parts.append("published records: read in seconds")
    organisms = [m for m in models if m.origin.trains]
    if organisms:
        from headwatch.model_organisms import missing_organisms  # deferred: the recipes, for organisms only

        keys = {provider.organism_key(m) for m in organisms}
        missing = missing_organisms(sorted(keys, key=str))
        parts.append(f"{len(keys)} organism(s), " + (
            f"{len(missing)} to train first ({selection.training_cost([family for family, _, _ in missing])}; "
            "`headwatch organisms train`, or --train)" if missing else "trained: their measurements are read"))
    hub = [m for m in models if m.origin.downloads]
    if hub:
        cost = estimate_models(hub)
        parts.append(f"{cost.checkpoints} Hub checkpoint(s), {cost.download_bytes / 1e9:,.0f} GB to download, about "
                     f"{cost.duration} on one GPU (an estimate)"
                     + (f"; {len(cost.unsized)} model(s) without a published config not counted" if cost.unsized else ""))
    parts += dict.fromkeys(m.origin.first_use for m in models if m.origin.first_use)  # local, packaged
    return "; ".join(parts) or "nothing to read"


def _revisions(m: Any) -> str:
    if m.revision_query:
        return "revisions " + ", ".join(f"{k} = {v}" for k, v in m.revision_query.items()) + " (chosen from its branches)"
    return f"{len(m.revisions)} revision(s) ({compact(m.sorted_revisions, limit=4)})"


def _expects(m: Any) -> str:
    e = m.expect
    said = [f"bos_shape {e.bos_shape}"] if e.bos_shape else []
    said += ["dclm"] if e.dclm else []
    said += [f"xfail {', '.join(sorted(e.xfail))}"] if e.xfail else []
    said += ["formation"] if e.formation is not None else []
    return "expects " + ", ".join(said) if said else "no expectations"


def run(args: argparse.Namespace) -> int:
    choices = selection.choices_from_args(args)
    provider = Provider(selection.provider_options(choices, progress=False))
    if args.verb == "list":
        if args.file is not None:
            raise InputError(f"headwatch panels list takes no file (got {args.file!r}); to check one: "
                             f"headwatch panels check {args.file}")
        default = set(default_panels())
        for name in available_panels():
            panel = load_panel(name)
            needs = [w for w, n in (("network", panel.needs_network), ("a GPU", panel.needs_gpu)) if n]
            print(terminal_text(f"{name:<16} {len(panel.models)} model(s) ({compact([m.name for m in panel.models], limit=4)}): "
                                f"{_cost(list(panel.models), provider)}" + (f"; needs {' and '.join(needs)}" if needs else "")
                                + ("; runs without --panel" if name in default else "")))
        return 0
    if args.file is None:
        raise InputError("headwatch panels check: give the panel file to check (headwatch panels check FILE)")
    picked = selection.select(replace(choices, panels=(args.file,)), resolve=False, progress=False)
    picked.resolve(list_branches=False)  # --revisions applied; the Hub is not asked
    panel = picked.panels[0]
    needs = [w for w, n in (("network", panel.needs_network), ("a GPU", panel.needs_gpu)) if n]
    # every field from the file is written through terminal_text: a description may hold escape sequences
    print(terminal_text(f"{args.file}: panel {panel.name!r}" + (f" ({panel.description})" if panel.description else "")
                        + f"; {len(panel.models)} model(s), {len(picked.models)} selected"
                        + (f"; needs {' and '.join(needs)}" if needs else "; needs neither network nor a GPU")))
    for m in picked.models:
        where = f"organism {m.organism.family} seed {m.organism.seed}" if m.organism else f"{m.source} {m.repo}"
        role = f", {m.member.population} {'candidate' if m.member.is_candidate else 'member'}" if m.member else ""
        print(terminal_text(f"  {m.id}: {where}{role}; {_revisions(m)}; {_expects(m)}"))
    for pop in populations(picked.models):
        print(terminal_text(f"  population {pop.id}: {len(pop.reference)} reference member(s), "
                            f"{len(pop.candidates)} candidate(s)"))
    print(terminal_text(f"cost: {_cost(picked.models, picked.provider)}"))
    return 0


__all__ = ["EXAMPLES", "add_arguments", "run"]
