"""Converter of the paper author's published result files (docs/SPEC.md §9) into measurement records.

Not part of the installed package: it made ``fixtures/published/`` (shipped as
``headwatch.fixtures/published``) once, and regenerates it byte for byte::

    python tools/convert_reference.py convert ../shared/reference fixtures/published

The suite reads the converted copy with :mod:`headwatch.fixtures.reference`.

The author (repository ``skydancerosel/spectral-probe-circuits``) released three kinds of JSON file:

- per-revision screens ``*_mechinterp_<revision>.json``: ``model``, ``revision``, ``n_examples``,
  ``n_examples_valid``, ``selectivity_threshold`` and ``all_head_selectivity`` ("L{l}_H{h}" -> the six
  class selectivities);
- PR trajectories ``*_phase1_trajectory.json``: ``model``, ``revisions``, ``ckpt_tokens_B``,
  ``n_examples`` (500), ``dtype`` (fp16), ``head_dim`` and ``pr`` ("L{l}_H{h}" -> PR per revision);
- group ablations ``*_ablation*.json``: ``model``, ``revision`` and ``results``, a list of
  ``{name, spec: {layer: [heads]}, loss, acc_top1, acc_top5, mean_logit_B}``.

:func:`import_reference` turns any folder holding files in that format into one sorted list of
:class:`~headwatch.probes.record.MeasurementRecord` per model (repo id); :func:`convert` writes them
as the project's JSON under DEST with a PROVENANCE.md beside them.

What it never does: remove or write anything outside a folder it creates. The copy is written into
a new temporary folder beside DEST and renamed into place; DEST must be new, empty or an earlier
converted copy (replaced whole, unless it holds a model SRC lacks), never SRC, inside SRC or holding
it, a file or a symlink. A ``model`` or revision name that is not a plain name (``..``, ``.``, a
separator, an absolute path) is refused, since it names a folder or file of the copy. Every file is
read through :mod:`headwatch.files`' bounded reader (a FIFO, a device, a file over 64 MB, text that is
not UTF-8 or JSON nested too deep is named), links to folders are not followed, and folders may nest
32 deep. Refusals exit 2 with a message naming the file or folder.
"""
from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import hashlib
import json
import math
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwatch.files import (
    MAX_BYTES,
    UnreadableFile,
    honour_umask,
    inside,
    kind_of,
    not_a_folder,
    parse_json,
    read_bounded,
    write_atomic,
)
from headwatch.fixtures import reference as reader
from headwatch.fixtures.panels import tokens_from_name
from headwatch.fixtures.reference import model_slug
from headwatch.probes.record import (
    HEAD_CLASSES,
    AblationResult,
    MeasurementRecord,
    ProbeSettings,
    TaskMetrics,
    head_key,
    parse_head_key,
)
from headwatch.validation import InputError, input_error_from

#: Tokens per optimizer step of every Pythia model (batch 1024 x sequence 2048).
PYTHIA_TOKENS_PER_STEP = 2_097_152

#: The author's ablation result names -> ours (DESIGN "measurement record"). The author's
#: matched-random and full-layers controls are built from the top-45 PR-integral set, not from the
#: induction circuit; :data:`ABLATION_RELATIVE_TO` records that in each record's provenance.
ABLATION_NAME_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^ablate_induction_screen"), "induction_circuit"),
    (re.compile(r"^ablate_matched_random"), "matched_random"),
    (re.compile(r"^ablate_full_spec_layers"), "circuit_layers"),
)
ABLATION_RELATIVE_TO = {
    "induction_circuit": "heads with induction selectivity >= 50 on the ablated revision",
    "matched_random": (
        "the author's top-45 set (ranked by PR integral), NOT the induction circuit: same layers "
        "as that set, disjoint from it"
    ),
    "circuit_layers": "all heads of the layers of the author's top-45 set (NOT the induction circuit's layers)",
}

#: Which commit of the author's repository each file came from, by path prefix inside the
#: reference folder (the longest matching prefix wins). From ../shared/reference/README.md.
AUTHOR_REPOSITORY = "skydancerosel/spectral-probe-circuits"
AUTHOR_COMMITS_BY_PREFIX = {
    "cross_architecture/results/per_revision_mechinterp/": "0ce7e272",
    "cross_architecture/results/": "d45ba5ef",
    "results/": "2a5f1a50",
}
PAPER = "arXiv:2606.02378 (Xu 2026), When Do Attention Circuits Form?"


class ReferenceFormatError(reader.ReferenceFormatError):
    """A file in a reference folder does not have the author's format; the message names it."""


# ---- tokens ----------------------------------------------------------------------------------

_STEP = re.compile(r"^step(\d+)$")


def tokens_from_revision(model: str, revision: str) -> float | None:
    """Tokens seen at ``revision``, from its name, or None when the name does not say.

    ``stepN-tokens23B`` (OLMo, OLMoE) -> 23e9 (headwatch.fixtures.panels.tokens_from_name);
    ``stepN`` of a Pythia model -> N x 2,097,152.
    """
    tokens = tokens_from_name(revision)
    if tokens is not None:
        return tokens
    m = _STEP.match(revision)
    if m and "pythia" in model.lower():
        return int(m.group(1)) * PYTHIA_TOKENS_PER_STEP
    return None


# ---- reading the author's files ---------------------------------------------------------------


#: The largest author's file the converter reads (theirs are at most a few hundred KB).
MAX_SOURCE_BYTES = MAX_BYTES["record"]
#: How deep folders may nest under SRC (the author's layout nests three deep).
MAX_FOLDER_DEPTH = 32
#: A repository id (``org/name``) or a revision name: letters, digits, ``_``, ``-``, ``.`` and ``+``,
#: not starting with a dot; the converter names folders and files after them, so ``..``, ``.``, a
#: separator or an absolute path (which would leave DEST) never match.
_NAME_PART = r"[\w][\w.+-]*"
_MODEL_NAME = re.compile(rf"{_NAME_PART}(/{_NAME_PART})?")
_REVISION_NAME = re.compile(_NAME_PART)


def _load_json(path: Path) -> tuple[dict[str, Any], str]:
    """The JSON object in ``path`` and the sha256 of its bytes, read once through the package's bounded
    reader: a FIFO, a device, a file over :data:`MAX_SOURCE_BYTES`, text that is not UTF-8 or JSON nested
    deeper than any result file is named, never waited on or parsed."""
    try:
        data = read_bounded(path, "reference file", MAX_SOURCE_BYTES)
        obj = parse_json(data.decode("utf-8"), str(path), finite=False)
    except UnreadableFile as e:
        raise ReferenceFormatError(str(e)) from None
    except UnicodeDecodeError as e:
        raise ReferenceFormatError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); the author's files "
                                   "are UTF-8 JSON") from None
    except json.JSONDecodeError as e:
        raise ReferenceFormatError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ReferenceFormatError(f"{path}: expected a JSON object at the top level, got {type(obj).__name__}")
    return obj, hashlib.sha256(data).hexdigest()


def _name(value: str, pattern: re.Pattern[str], what: str, example: str, path: Path) -> str:
    """``value`` when it can name a folder or file inside DEST; ReferenceFormatError otherwise."""
    if not pattern.fullmatch(value):
        raise ReferenceFormatError(
            f"{path}: {what} {value[:80]!r} cannot name a file of the converted copy: it must be like {example!r} "
            "(letters, digits, '_', '-', '.', '+'; no '..', '.', separators or absolute paths, which would "
            "leave the destination folder)")
    return value


def _require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: Path) -> Any:
    if key not in obj:
        raise ReferenceFormatError(f"{path}: missing key {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ReferenceFormatError(f"{path}: {key!r} should be {names}, got {type(value).__name__}")
    return value


def _finite(value: Any, where: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ReferenceFormatError(f"{path}: {where} should be a finite number, got {value!r}")
    return float(value)


@dataclass
class ScreenFile:
    """One ``*_mechinterp_<revision>.json``."""

    path: Path
    sha256: str
    model: str
    revision: str
    n_examples: int
    n_examples_valid: int | None
    label_threshold: float
    selectivity: dict[str, dict[str, float]]
    n_layers: int
    n_heads: int


@dataclass
class TrajectoryFile:
    """One ``*_phase1_trajectory.json``: PR of every head at every listed revision."""

    path: Path
    sha256: str
    model: str
    revisions: list[str]
    tokens_b: list[float] | None
    n_examples: int
    seq_len: int | None
    seed: int | None
    dtype: str | None
    head_dim: int
    pr: dict[str, list[float]]


@dataclass
class AblationFile:
    """One ``*_ablation*.json``: group ablations on one revision."""

    path: Path
    sha256: str
    model: str
    revision: str
    n_examples: int | None
    induction_threshold: float | None
    results: list[dict[str, Any]]


def read_screen(path: Path) -> ScreenFile:
    """Parse and validate a per-revision screen."""
    d, sha = _load_json(path)
    model = _name(_require(d, "model", str, path), _MODEL_NAME, "model", "EleutherAI/pythia-1b", path)
    revision = _name(_require(d, "revision", str, path), _REVISION_NAME, "revision", "step3000", path)
    table = _require(d, "all_head_selectivity", dict, path)
    if not table:
        raise ReferenceFormatError(f"{path}: 'all_head_selectivity' is empty")
    selectivity: dict[str, dict[str, float]] = {}
    layers, heads = set(), set()
    for key, sel in table.items():
        try:
            layer, head = parse_head_key(key)
        except ValueError as e:
            raise ReferenceFormatError(f"{path}: {e}") from None
        if not isinstance(sel, dict):
            raise ReferenceFormatError(f"{path}: selectivities of {key} should be an object")
        missing = [c for c in HEAD_CLASSES if c not in sel]
        if missing:
            raise ReferenceFormatError(f"{path}: head {key} lacks classes {missing}")
        selectivity[key] = {c: _finite(sel[c], f"{key}[{c!r}]", path) for c in HEAD_CLASSES}
        layers.add(layer)
        heads.add(head)
    n_layers, n_heads = max(layers) + 1, max(heads) + 1
    grid = [head_key(l, h) for l in range(n_layers) for h in range(n_heads)]
    missing = [k for k in grid if k not in selectivity]
    if missing:
        raise ReferenceFormatError(
            f"{path}: {len(selectivity)} heads in 'all_head_selectivity', expected a full "
            f"{n_layers} x {n_heads} grid (layers 0-{n_layers - 1}, heads 0-{n_heads - 1}); it lacks "
            f"{', '.join(missing[:8])}{f' and {len(missing) - 8} more' if len(missing) > 8 else ''}"
        )
    return ScreenFile(
        path=path,
        sha256=sha,
        model=model,
        revision=revision,
        n_examples=int(_require(d, "n_examples", int, path)),
        n_examples_valid=d.get("n_examples_valid"),
        label_threshold=float(d.get("selectivity_threshold", 30.0)),
        selectivity=selectivity,
        n_layers=n_layers,
        n_heads=n_heads,
    )


def read_trajectory(path: Path) -> TrajectoryFile:
    """Parse and validate a PR trajectory; every head needs one PR per listed revision."""
    d, sha = _load_json(path)
    model = _require(d, "model", str, path)
    revisions = _require(d, "revisions", list, path)
    if not revisions or not all(isinstance(r, str) for r in revisions):
        raise ReferenceFormatError(f"{path}: 'revisions' should be a non-empty list of names")
    if len(set(revisions)) != len(revisions):
        raise ReferenceFormatError(f"{path}: 'revisions' lists a revision twice")
    tokens_b = d.get("ckpt_tokens_B")
    if tokens_b is not None:
        if not isinstance(tokens_b, list) or len(tokens_b) != len(revisions):
            raise ReferenceFormatError(
                f"{path}: 'ckpt_tokens_B' should list one number per revision ({len(revisions)})"
            )
        tokens_b = [_finite(t, "ckpt_tokens_B entry", path) for t in tokens_b]
    pr_table = _require(d, "pr", dict, path)
    pr: dict[str, list[float]] = {}
    for key, values in pr_table.items():
        try:
            parse_head_key(key)
        except ValueError as e:
            raise ReferenceFormatError(f"{path}: {e}") from None
        if not isinstance(values, list) or len(values) != len(revisions):
            raise ReferenceFormatError(
                f"{path}: PR of {key} should list one value per revision ({len(revisions)}), "
                f"got {len(values) if isinstance(values, list) else type(values).__name__}"
            )
        pr[key] = [_finite(v, f"PR of {key}", path) for v in values]
    return TrajectoryFile(
        path=path,
        sha256=sha,
        model=model,
        revisions=list(revisions),
        tokens_b=tokens_b,
        n_examples=int(_require(d, "n_examples", int, path)),
        seq_len=d.get("seq_len"),
        seed=d.get("seed"),
        dtype=d.get("dtype"),
        head_dim=int(_require(d, "head_dim", int, path)),
        pr=pr,
    )


def read_ablation(path: Path) -> AblationFile:
    """Parse and validate a group-ablation file."""
    d, sha = _load_json(path)
    results = _require(d, "results", list, path)
    for i, r in enumerate(results):
        if not isinstance(r, dict):
            raise ReferenceFormatError(f"{path}: results[{i}] should be an object")
        for key in ("name", "loss", "acc_top1", "acc_top5", "mean_logit_B"):
            if key not in r:
                raise ReferenceFormatError(f"{path}: results[{i}] ({r.get('name', '?')}) lacks {key!r}")
        if not isinstance(r.get("spec", {}), dict):
            raise ReferenceFormatError(f"{path}: results[{i}].spec should map layer -> [heads]")
    if not any(r["name"] == "baseline" for r in results):
        raise ReferenceFormatError(f"{path}: no 'baseline' entry among the results")
    return AblationFile(
        path=path,
        sha256=sha,
        model=_require(d, "model", str, path),
        revision=_require(d, "revision", str, path),
        n_examples=d.get("n_examples"),
        induction_threshold=d.get("induction_threshold"),
        results=results,
    )


def _metrics(r: Mapping[str, Any], path: Path) -> TaskMetrics:
    name = r["name"]
    return TaskMetrics(
        loss=_finite(r["loss"], f"{name}.loss", path),
        top1=_finite(r["acc_top1"], f"{name}.acc_top1", path),
        top5=_finite(r["acc_top5"], f"{name}.acc_top5", path),
        mean_logit_target=_finite(r["mean_logit_B"], f"{name}.mean_logit_B", path),
    )


def _spec_heads(spec: Mapping[str, Any], where: str, path: Path) -> tuple[str, ...]:
    heads = []
    for layer, hs in spec.items():
        if not str(layer).isdigit() or not isinstance(hs, list) or not all(isinstance(h, int) for h in hs):
            raise ReferenceFormatError(f"{path}: {where}.spec should map layer numbers to lists of heads")
        heads += [head_key(int(layer), h) for h in hs]
    return tuple(sorted(heads, key=parse_head_key))


def our_ablation_name(author_name: str) -> str:
    """Our name for one of the author's ablation results (others keep their own name)."""
    for pattern, ours in ABLATION_NAME_RULES:
        if pattern.search(author_name):
            return ours
    return author_name


# ---- assembling records -----------------------------------------------------------------------


@dataclass
class SourceInfo:
    """Where a reference folder came from, stamped into every record's provenance."""

    repository: str | None = None
    commits_by_prefix: dict[str, str] = field(default_factory=dict)
    paper: str | None = None

    def commit_of(self, relpath: str) -> str | None:
        best = max((p for p in self.commits_by_prefix if relpath.startswith(p)), key=len, default=None)
        return self.commits_by_prefix.get(best) if best is not None else None


#: The provenance of ../shared/reference (see its README).
AUTHOR_SOURCE = SourceInfo(AUTHOR_REPOSITORY, dict(AUTHOR_COMMITS_BY_PREFIX), PAPER)


def _file_note(source_file: ScreenFile | TrajectoryFile | AblationFile, root: Path, source: SourceInfo) -> dict[str, Any]:
    rel = source_file.path.relative_to(root).as_posix()
    note: dict[str, Any] = {"path": rel, "sha256": source_file.sha256}
    commit = source.commit_of(rel)
    if commit:
        note["commit"] = commit
    return note


def _walk(root: Path) -> Iterator[Path]:
    """Every entry under ``root`` that is not a folder (files, links to files, FIFOs: the reader names
    what they are), without following links to folders (a link loop never ends) and at most
    :data:`MAX_FOLDER_DEPTH` folders deep."""
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as entries:
                found = list(entries)
        except OSError as e:
            problem = input_error_from(e, f"reading the folder {folder}")
            raise ReferenceFormatError(str(problem) if problem else f"{folder}: cannot be read ({e})") from None
        for entry in found:
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 > MAX_FOLDER_DEPTH:
                    raise ReferenceFormatError(
                        f"{entry.path}: folders nest more than {MAX_FOLDER_DEPTH} deep under {root}; the author's "
                        "folders nest a few levels: give the folder that holds their files")
                stack.append((Path(entry.path), depth + 1))
            elif not (entry.is_symlink() and os.path.isdir(entry.path)):  # links to folders are not followed
                yield Path(entry.path)


def discover(src: str | Path) -> tuple[list[Path], list[Path], list[Path]]:
    """(screens, trajectories, ablations) under ``src``, searched recursively, sorted by path."""
    root = Path(src)
    if not root.is_dir():
        raise ReferenceFormatError(f"reference folder {root} does not exist or is not a folder")
    files = sorted(_walk(root))

    def named(pattern: str) -> list[Path]:
        return [p for p in files if fnmatch.fnmatchcase(p.name, pattern)]

    screens, trajectories, ablations = named("*_mechinterp_*.json"), named("*_phase1_trajectory.json"), named("*_ablation*.json")
    if not screens:
        raise ReferenceFormatError(
            f"no per-revision screens (*_mechinterp_*.json) under {root}: not a folder in the "
            "author's format (docs/SPEC.md §9)"
        )
    return screens, trajectories, ablations


def import_reference(
    src: str | Path, source: SourceInfo | None = None
) -> dict[str, list[MeasurementRecord]]:
    """Read every model under ``src`` into records sorted by tokens seen, keyed by repo id.

    A model's PR comes from its trajectory file at the matching revision name; its ablations
    (and ``task``, the author's "baseline") from its ablation file, attached to the revision that
    file names, or to the last revision when it names ``main``.
    """
    root = Path(src)
    source = source or SourceInfo()
    screen_paths, trajectory_paths, ablation_paths = discover(root)

    screens: dict[str, dict[str, ScreenFile]] = {}
    for p in screen_paths:
        s = read_screen(p)
        by_rev = screens.setdefault(s.model, {})
        if s.revision in by_rev:
            raise ReferenceFormatError(
                f"two screens of {s.model} at revision {s.revision}: {by_rev[s.revision].path} and {p}"
            )
        by_rev[s.revision] = s

    trajectories: dict[str, TrajectoryFile] = {}
    for p in trajectory_paths:
        t = read_trajectory(p)
        if t.model in trajectories:
            raise ReferenceFormatError(f"two PR trajectories of {t.model}: {trajectories[t.model].path} and {p}")
        trajectories[t.model] = t

    ablations: dict[str, AblationFile] = {}
    for p in ablation_paths:
        a = read_ablation(p)
        if a.model in ablations:
            raise ReferenceFormatError(f"two ablation files of {a.model}: {ablations[a.model].path} and {p}")
        ablations[a.model] = a

    for model in set(trajectories) | set(ablations):
        if model not in screens:
            orphan = (trajectories.get(model) or ablations[model]).path
            raise ReferenceFormatError(f"{orphan}: model {model} has no per-revision screens in {root}")

    return {
        model: _model_records(model, by_rev, trajectories.get(model), ablations.get(model), root, source)
        for model, by_rev in sorted(screens.items())
    }


def _model_records(
    model: str,
    screens: dict[str, ScreenFile],
    trajectory: TrajectoryFile | None,
    ablation: AblationFile | None,
    root: Path,
    source: SourceInfo,
) -> list[MeasurementRecord]:
    traj_index = {r: i for i, r in enumerate(trajectory.revisions)} if trajectory else {}
    if trajectory:
        missing = [r for r in trajectory.revisions if r not in screens]
        if missing:
            raise ReferenceFormatError(
                f"{trajectory.path}: revisions {missing} have PR but no per-revision screen"
            )

    records: list[MeasurementRecord] = []
    for revision, s in screens.items():
        tokens = tokens_from_revision(model, revision)
        tokens_rule = "from the revision name"
        if tokens is None and trajectory and trajectory.tokens_b and revision in traj_index:
            tokens = trajectory.tokens_b[traj_index[revision]] * 1e9
            tokens_rule = "ckpt_tokens_B of the PR trajectory"
        elif trajectory and trajectory.tokens_b and revision in traj_index:
            # The name and the file must agree (to rounding: the file gives billions to about 3 decimals, sometimes truncated).
            stated = trajectory.tokens_b[traj_index[revision]] * 1e9
            if abs(stated - tokens) > max(0.01 * tokens, 1e6):
                raise ReferenceFormatError(
                    f"{trajectory.path}: ckpt_tokens_B says {stated:.4g} tokens at {revision}, the "
                    f"revision name says {tokens:.4g}"
                )
        if tokens is None:
            raise ReferenceFormatError(
                f"{s.path}: cannot tell tokens seen at revision {revision!r} of {model} (no "
                "'-tokensNB' suffix, not a Pythia step, and no ckpt_tokens_B for it)"
            )
        pr = None
        if revision in traj_index:
            assert trajectory is not None
            i = traj_index[revision]
            pr = {k: v[i] for k, v in trajectory.pr.items()}
            if set(pr) != set(s.selectivity):
                raise ReferenceFormatError(
                    f"{trajectory.path}: PR heads do not match the screen's heads in {s.path}"
                )
            if trajectory.head_dim <= 0:
                raise ReferenceFormatError(f"{trajectory.path}: head_dim should be positive")
        provenance: dict[str, Any] = {
            "source": "published",
            "tokens_seen_rule": tokens_rule,
            "screen_file": _file_note(s, root, source),
            "screen_dtype": "not stated in the file (docs/SPEC.md §2: fp32, eager attention)",
        }
        if source.repository:
            provenance["repository"] = source.repository
        if source.paper:
            provenance["paper"] = source.paper
        if trajectory is not None:
            provenance["pr_file"] = _file_note(trajectory, root, source)
            provenance["pr_dtype"] = trajectory.dtype
            provenance["pr_n_examples"] = trajectory.n_examples
            if revision not in traj_index:
                provenance["pr_missing"] = "revision not in the PR trajectory"
        settings = ProbeSettings(
            n_examples=s.n_examples,
            seq_len=(trajectory.seq_len if trajectory and trajectory.seq_len else ProbeSettings.seq_len),
            seed=(trajectory.seed if trajectory and trajectory.seed is not None else ProbeSettings.seed),
            n_pr=trajectory.n_examples if trajectory else ProbeSettings.n_pr,
            label_threshold=s.label_threshold,
            ablation=False,
            # The author's files give means only: no bootstrap, no Sink_1^eps (the verdicts say
            # "no interval: published means"), no copyable-position reading, no attention mass.
            n_bootstrap=0,
            sink_examples=0,
            copy_sequences=0,
        )
        records.append(
            MeasurementRecord(
                model=model,
                revision=revision,
                tokens_seen=float(tokens),
                n_layers=s.n_layers,
                n_heads=s.n_heads,
                # 0 = unknown: only the PR trajectory states the head dimension.
                d_head=trajectory.head_dim if trajectory else 0,
                all_head_selectivity=s.selectivity,
                pr=pr,
                settings=settings,
                n_examples_valid=s.n_examples_valid,
                provenance=provenance,
            )
        )
    records.sort(key=lambda r: r.tokens_seen)
    if len({r.tokens_seen for r in records}) != len(records):
        raise ReferenceFormatError(f"two revisions of {model} have the same tokens seen")
    if ablation is not None:
        _attach_ablation(records, ablation, root, source)
    return records


def _attach_ablation(
    records: list[MeasurementRecord], ablation: AblationFile, root: Path, source: SourceInfo
) -> None:
    by_rev = {r.revision: r for r in records}
    note = _file_note(ablation, root, source)
    if ablation.revision in by_rev:
        target = by_rev[ablation.revision]
    elif ablation.revision == "main":
        # The author ran the OLMo ablation on `main`; the final screened revision stands for it.
        target = records[-1]
        note["revision_in_file"] = "main"
        note["attached_to"] = f"{target.revision} (the last screened revision stands for 'main')"
    else:
        raise ReferenceFormatError(
            f"{ablation.path}: ablation revision {ablation.revision!r} is not among the screened "
            f"revisions of {ablation.model} ({', '.join(by_rev)})"
        )
    author_names: dict[str, str] = {}
    results: list[AblationResult] = []
    for r in ablation.results:
        metrics = _metrics(r, ablation.path)
        if r["name"] == "baseline":
            target.task = metrics
            continue
        ours = our_ablation_name(r["name"])
        if ours in author_names:
            raise ReferenceFormatError(
                f"{ablation.path}: both {author_names[ours]!r} and {r['name']!r} map to {ours!r}"
            )
        author_names[ours] = r["name"]
        results.append(AblationResult(ours, _spec_heads(r.get("spec", {}), r["name"], ablation.path), metrics))
    target.ablations = results
    if target.settings is not None:
        target.settings = dataclasses.replace(target.settings, ablation=True)
    note["names"] = {ours: author for ours, author in author_names.items()}
    note["relative_to"] = {k: v for k, v in ABLATION_RELATIVE_TO.items() if k in author_names}
    note["n_examples"] = ablation.n_examples
    target.provenance["ablation_file"] = note


# ---- the converted copy in the repository -----------------------------------------------------


#: The first line of the PROVENANCE.md the converter writes: how it knows a folder as its own output.
PROVENANCE_TITLE = "# Provenance of these measurement records"


def write_records(records_by_model: Mapping[str, Sequence[MeasurementRecord]], dest: str | Path) -> list[Path]:
    """One JSON per (model, revision) under ``dest/<org--name>/<revision>.json``; returns the paths.

    ``dest`` is a folder :func:`convert` has just created (nothing else is in it); every name is
    checked to stay inside it, and two models that would share a folder are refused."""
    dest = Path(dest)
    written = []
    slugs: dict[str, str] = {}
    for model, records in records_by_model.items():
        slug = model_slug(model)
        if slug in slugs:
            raise ReferenceFormatError(f"models {slugs[slug]!r} and {model!r} would both be written to the folder "
                                       f"{slug!r}: rename one of them in its files")
        slugs[slug] = model
        folder = inside(dest, slug, "the folder of model")
        for r in records:
            path = inside(folder, f"{r.revision}.json", "the record of revision")
            r.to_json(path)
            written.append(path)
    return written


def _kind(path: Path) -> str:
    """What is at ``path`` (which exists or is a link), for messages."""
    return kind_of(path.lstat().st_mode)


def _previous_copy(dest: Path) -> set[str] | None:
    """The model folders of ``dest`` when it is empty (an empty set) or the converter's own earlier
    output: a PROVENANCE.md it wrote, and only folders of ``*.json`` regular files beside it. None
    otherwise: then ``dest`` holds something else, which the converter never replaces."""
    entries = list(dest.iterdir())
    if not entries:
        return set()
    provenance = dest / "PROVENANCE.md"
    try:
        first = read_bounded(provenance, "PROVENANCE.md", 1 << 20).split(b"\n", 1)[0].decode("utf-8", "replace")
    except InputError:
        return None
    if first.strip() != PROVENANCE_TITLE:
        return None
    models = set()
    for entry in entries:
        if entry == provenance:
            continue
        if entry.is_symlink() or not entry.is_dir():
            return None
        for f in entry.iterdir():
            if f.is_symlink() or not f.is_file() or f.suffix != ".json":
                return None
        models.add(entry.name)
    return models


def check_places(src: str | Path, dest: str | Path) -> tuple[Path, Path]:
    """(SRC, DEST) made absolute, once both are fit to convert from and into; InputError otherwise.

    SRC must be a folder. DEST must not be SRC, inside it, or hold it (the converted copy would mix
    with, or replace, the files it is made from), must not be a symlink, a file or anything but a
    folder, and where it exists it must be empty or an earlier output of this converter (which
    :func:`convert` replaces as a whole; anything else there is never touched)."""
    if not str(src).strip() or not str(dest).strip():
        raise InputError("SRC and DEST must both be folder names (got an empty one)")
    source = Path(src).expanduser()
    if not source.is_dir():
        what = "does not exist" if not (source.exists() or source.is_symlink()) else f"is {_kind(source)}, not a folder"
        raise ReferenceFormatError(f"reference folder {source} {what}; give the folder holding the author's files")
    target = Path(dest).expanduser()
    src_real, dest_real = source.resolve(), target.resolve()
    if dest_real == src_real or src_real in dest_real.parents:
        raise InputError(f"DEST {target} is {'SRC itself' if dest_real == src_real else 'inside SRC'} ({source}); "
                         "the converted copy must go to a folder outside the author's files, e.g. fixtures/published")
    if dest_real in src_real.parents:
        raise InputError(f"DEST {target} holds SRC ({source}); converting into it would replace the author's files: "
                         "give a folder outside them, e.g. a new folder beside SRC")
    if target.is_symlink():
        raise InputError(f"DEST {target} is a symlink; the converter replaces DEST as a whole and would replace the "
                         f"link: give the real path ({dest_real})")
    blocker = not_a_folder(target.parent)
    if blocker is not None:
        raise InputError(f"DEST {target} cannot be created: {blocker} is {_kind(blocker)}, not a folder; give a "
                         "path through folders")
    if target.exists():
        if not target.is_dir():
            raise InputError(f"DEST {target} exists and is {_kind(target)}, not a folder; give a new folder, or an "
                             "earlier converted copy to regenerate")
        if _previous_copy(target) is None:
            raise InputError(f"DEST {target} is a folder that holds files the converter did not write (it is not "
                             "empty, and not an earlier converted copy with its PROVENANCE.md); the converter never "
                             "replaces such a folder: give a new folder")
    return source.absolute(), target.absolute()


def _swap_in(staging: Path, dest: Path) -> None:
    """Put the finished ``staging`` folder at ``dest``: a rename when ``dest`` is new; else the earlier
    converted copy is renamed aside, the new one renamed in, and the old one removed once it is shown
    again to be only the converter's own output (it is put back if the second rename fails)."""
    if not dest.exists():
        os.rename(staging, dest)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{dest.name}.previous-", dir=dest.parent))
    os.rename(dest, aside)  # onto the empty folder mkdtemp made
    try:
        os.rename(staging, dest)
    except BaseException:
        os.rename(aside, dest)
        raise
    if _previous_copy(aside) is not None:
        shutil.rmtree(aside)
    else:  # something was added to it while converting: kept, and said
        print(f"note: the earlier copy was left at {aside}: files were added to it while converting", file=sys.stderr)


def convert(src: str | Path, dest: str | Path, source: SourceInfo | None = None) -> list[Path]:
    """Import ``src`` and write it as ``dest`` with a PROVENANCE.md; returns the written paths.

    Nothing outside a folder the converter creates is written or removed: the copy is written into a
    new temporary folder beside ``dest``, then renamed into place (:func:`check_places` says which
    DEST it accepts; an earlier converted copy there is replaced as a whole). An earlier copy that
    holds a model the source does not is refused, not dropped."""
    source = source or SourceInfo()
    src, dest = check_places(src, dest)
    records = import_reference(src, source)
    previous = _previous_copy(dest) if dest.exists() else set()
    dropped = sorted((previous or set()) - {model_slug(m) for m in records})
    if dropped:
        raise InputError(f"DEST {dest} is a converted copy holding model(s) {', '.join(dropped)} that {src} does not; "
                         "converting would drop them: give a new folder, or convert a source that holds them too")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.converting-", dir=dest.parent))
    except OSError as e:
        raise input_error_from(e, f"creating a folder beside {dest}") or e from None
    try:
        written = write_records(records, staging)
        write_atomic(staging / "PROVENANCE.md", provenance_markdown(src, records, source))
        honour_umask(staging)  # mkdtemp made it 0700
        _swap_in(staging, dest)
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)  # the converter's own temporary folder, nothing else
        if isinstance(e, OSError) and input_error_from(e, f"writing {dest}") is not None:
            raise input_error_from(e, f"writing {dest}") from None
        raise
    return [dest / p.relative_to(staging) for p in written]


def provenance_markdown(
    src: str | Path, records: Mapping[str, Sequence[MeasurementRecord]], source: SourceInfo
) -> str:
    """The PROVENANCE.md written beside a converted copy."""
    lines = [
        PROVENANCE_TITLE,
        "",
        "Generated by `python tools/convert_reference.py convert SRC DEST`; do not edit",
        "by hand: rerun the command on the source folder to regenerate this folder byte for byte.",
        "",
    ]
    if source.paper:
        lines += [f"- Paper: {source.paper}."]
    if source.repository:
        lines += [f"- Source repository: `{source.repository}`; commits by path (from the reference README):"]
        lines += [f"  - `{p}`: {c}" for p, c in sorted(source.commits_by_prefix.items())]
    lines += [
        f"- Source folder at conversion: `{Path(src).resolve().name}` (the project's ../shared/reference); every record",
        "  names its source files with their sha256 under `provenance`.",
        "",
        "## What was converted, and how",
        "",
        "- `all_head_selectivity` of each per-revision screen (`*_mechinterp_*.json`) is copied unchanged;",
        "  the screens' `classifications` (top-45 summaries) are not converted: they are derived from it.",
        "- `pr` comes from the PR trajectory (`*_phase1_trajectory.json`) at the same revision name. The",
        "  author computed it on the first 500 examples in fp16 (docs/SPEC.md §3 says 2000 in the paper's text):",
        "  `settings.n_pr` = 500 and `provenance.pr_dtype` = fp16 say so. `d_head` is the file's `head_dim`.",
        "- `tokens_seen` (tokens, not billions): Pythia `stepN` x 2,097,152; OLMo from `stepN-tokensNB`.",
        "- Ablations (`*_ablation*.json`) go on the revision the file names; the OLMo file names `main`,",
        "  so they go on the last screened revision (step1454000-tokens3048B), noted in provenance.",
        "  The author's `baseline` becomes `task`; result names map to ours:",
        "  `ablate_induction_screen_>=50x (3h)` -> `induction_circuit`,",
        "  `ablate_matched_random_same_layers` -> `matched_random`,",
        "  `ablate_full_spec_layers (upper bound)` -> `circuit_layers`; the rest keep their own names.",
        "- **Caveat**: the author's matched-random control (and the full-layers one) is matched to the",
        "  top-45 set ranked by PR integral, not to the induction circuit as docs/SPEC.md §4 defines it. The causal",
        "  verdict on these records says so.",
        "- Not converted: `*_phase1_features.json` (integral, final/max/min PR per head: derived from `pr`).",
        "- Means only: the author's files carry no per-example data, so the records have no intervals",
        "  (`intervals` null, `settings.n_bootstrap` 0; verdicts say \"no interval: published means\") and",
        "  top-1 as rates; the causal check's exact tests reconstruct counts as rate x N (N = 2000) and say so;",
        "  no copyable-position reading of the ablations (`settings.copy_sequences` 0).",
        "",
        "## Records",
        "",
        "| model | revisions | tokens (first -> last) | PR | ablations on |",
        "|---|---|---|---|---|",
    ]
    for model, recs in records.items():
        abl = [r.revision for r in recs if r.ablations]
        has_pr = sum(r.pr is not None for r in recs)
        lines.append(
            f"| {model} | {len(recs)} | {recs[0].tokens_seen:.4g} -> {recs[-1].tokens_seen:.4g} | "
            f"{has_pr}/{len(recs)} | {', '.join(abl) or '-'} |"
        )
    return "\n".join(lines) + "\n"


# ---- command line -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/convert_reference.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="convert a folder of the author's files into measurement records")
    c.add_argument("src", help="folder in the author's format, e.g. ../shared/reference")
    c.add_argument("dest", help="output folder, e.g. fixtures/published: a new folder, or an earlier converted copy "
                                "(replaced whole); never inside SRC")
    c.add_argument(
        "--not-author-source",
        action="store_true",
        help="do not stamp the author's repository and commits (for folders that are not ../shared/reference)",
    )
    args = parser.parse_args(argv)
    try:
        written = convert(args.src, args.dest, None if args.not_author_source else AUTHOR_SOURCE)
    except InputError as e:  # ReferenceFormatError too: the user's files, folders or machine
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        problem = input_error_from(e)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} records and PROVENANCE.md under {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
