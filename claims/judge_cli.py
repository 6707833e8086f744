"""``headwatch judge``: judge F1-F5 and the causal check, print the verdicts, write them as JSON.

Records come from the panel (``--panel``, default ``published``: the author's measurements in
fixtures/published; other sources through fixtures.provider, i.e. the measurement cache, measuring
what is missing) or from a folder (``--reference-dir DIR``) in the author's format or our
converted one. A model from a folder is matched to its panel entry by repo id, which supplies its
expectations; an unmatched model is judged with none (shape and DCLM claims then say n/a).
The verdicts are :func:`claims.judge.judge_model`'s, the same the claim tests assert.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from probes.record import MeasurementRecord, write_json_atomic

from .judge import CLAIMS, judge_model, status

DEFAULT_PANEL = "published"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--panel", default=None,
                        help=f"panel name or TOML path (default: {DEFAULT_PANEL}; with --reference-dir, "
                             "the panel whose entries supply expectations, default: all shipped panels)")
    parser.add_argument("--reference-dir", default=None, metavar="DIR",
                        help="judge the models in DIR (the author's file format, or a converted copy)")
    parser.add_argument("--models", nargs="+", default=None, metavar="M",
                        help="only these models (short names or repo ids; comma lists too); others are not measured")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="headwatch cache for models that are measured, not published (default as in pytest)")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the verdicts to OUT as JSON")


def _panel_entries(panel_arg: str | None) -> list[Any]:
    """Panel models that can supply expectations, the named panel's first."""
    from fixtures.panels import available_panels, load_panel

    names = [panel_arg] if panel_arg else [DEFAULT_PANEL] + [p for p in available_panels() if p != DEFAULT_PANEL]
    return [m for name in names for m in load_panel(name).models]


def _records_from_reference(src: str, panel_arg: str | None) -> list[tuple[str, list[MeasurementRecord], Any]]:
    from fixtures.reference import load_reference

    entries = _panel_entries(panel_arg)
    out = []
    for repo, records in load_reference(src).items():
        entry = next((m for m in entries if m.repo == repo), None)
        if entry is None:
            print(f"note: {repo} is in no panel; judged without expectations", file=sys.stderr)
        out.append((repo, records, entry))
    return out


def _wanted(models: list[str] | None) -> set[str]:
    """--models values, each of which may be a comma list."""
    return {m.strip() for item in models or [] for m in item.split(",") if m.strip()}


def _is_wanted(wanted: set[str], repo: str, entry: Any) -> bool:
    return not wanted or repo in wanted or (entry is not None and entry.name in wanted) or repo.split("/")[-1] in wanted


def _records_from_panel(panel_arg: str | None, cache_dir: str | None,
                        wanted: set[str] = frozenset()) -> list[tuple[str, list[MeasurementRecord], Any]]:
    """Records of the selected panel models through the same provider the claim tests use: published
    files for ``reference`` models, the measurement cache (measuring what is missing) for the others.
    Unselected models are never measured (or trained)."""
    from fixtures import provider
    from fixtures.panels import load_panel

    options = provider.ProviderOptions(
        cache_dir=Path(cache_dir).expanduser().resolve() if cache_dir else provider.default_cache_dir())
    return [(m.repo, provider.model_records(m, options), m) for m in load_panel(panel_arg or DEFAULT_PANEL).models
            if _is_wanted(wanted, m.repo, m)]


def run(args: argparse.Namespace) -> int:
    """Print every model's verdicts; return 1 if a claim fails that the panel did not declare."""
    from fixtures.cache import CacheError
    from fixtures.loading import LoadingError
    from fixtures.panels import PanelError
    from fixtures.reference import ReferenceFormatError

    try:
        if args.reference_dir:
            if not Path(args.reference_dir).is_dir():
                print(f"error: --reference-dir {args.reference_dir} is not a folder", file=sys.stderr)
                return 2
            models = _records_from_reference(args.reference_dir, args.panel)
        else:
            models = _records_from_panel(args.panel, args.cache_dir, _wanted(args.models))
    except (PanelError, ReferenceFormatError, LoadingError, CacheError, KeyError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.models:
        wanted = _wanted(args.models)
        models = [(repo, recs, e) for repo, recs, e in models if _is_wanted(wanted, repo, e)]
        if not models:
            print(f"error: none of {sorted(wanted)} is among the models judged", file=sys.stderr)
            return 2

    result: dict[str, Any] = {"models": {}}
    unexpected = 0
    for repo, records, entry in models:
        if not records:
            print(f"error: no measurement records for {repo}", file=sys.stderr)
            return 2
        verdicts = judge_model(records, entry.expect if entry else None, entry.total_tokens if entry else None)
        result["models"][repo] = verdicts
        print(f"== {repo}" + (f" ({entry.name}, panel {entry.panel})" if entry else "")
              + f": {len(records)} revisions")
        for claim in CLAIMS:
            v = verdicts[claim]
            print(f"  {claim:<6} {status(v):<10} {v['message']}")
            if v["holds"] is False and not v.get("declared_xfail"):
                unexpected += 1
            if v["holds"] is True and v.get("declared_xfail"):
                unexpected += 1  # a declared known deviation that did not occur is news too
    if args.json:
        write_json_atomic(args.json, result)
        print(f"wrote {args.json}")
    return 1 if unexpected else 0
