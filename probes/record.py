"""Measurement records: what one probe run of one (model, revision) produced.

A record is the stable interface between the probes (which fill it), the fixtures (which cache it
as JSON) and the claims (which judge sequences of them). The JSON keeps the paper author's own
keys (`all_head_selectivity`, `pr`) so records compare directly with the published files.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from headwatch.spec import SPEC

SCHEMA = "headwatch.measurement/2"
#: Older schemas this module still reads: /1 records have no intervals, counts or sink score.
READABLE_SCHEMAS: tuple[str, ...] = (SCHEMA, "headwatch.measurement/1")

#: Bump when a change to the probes changes measured numbers: it is part of every cache key (as
#: ``v<N>``). It lives here, beside the record, so that reading the cache imports no torch.
#: 3: records carry intervals, top-1 counts and Sink_1^eps (schema /2).
PROBE_VERSION = "3"

#: ``provenance[TRAINING_PROVENANCE]``: optional, how the measured checkpoint was trained, as its
#: trainer states it (for model organisms: the numeric path, e.g. CPU capability, MKL mode, torch
#: version, threads, from the checkpoint's metadata). Free-form JSON; the formation verdict shows it.
TRAINING_PROVENANCE = "training"

#: The six head classes of the selectivity screen, in the author's spelling.
HEAD_CLASSES: tuple[str, ...] = (
    "induction",
    "previous-token",
    "duplicate-token",
    "first-token",
    "self",
    "local",
)
UNCLASSIFIED = "unclassified"


def head_key(layer: int, head: int) -> str:
    """The author's head name: ``L{layer}_H{head}``."""
    return f"L{layer}_H{head}"


def parse_head_key(key: str) -> tuple[int, int]:
    """Inverse of :func:`head_key`; raises ValueError naming the bad key."""
    try:
        layer_part, head_part = key.split("_")
        if layer_part[0] != "L" or head_part[0] != "H":
            raise ValueError
        return int(layer_part[1:]), int(head_part[1:])
    except (ValueError, IndexError):
        raise ValueError(f"not a head key of the form 'L<layer>_H<head>': {key!r}") from None


@dataclass(frozen=True)
class ProbeSettings:
    """Everything that determines a probe run's numbers (docs/SPEC.md §1-§4).

    Defaults are the paper's: 2000 examples of length 256 over token ids [100, 10000), seed 42.
    """

    n_examples: int = 2000
    seq_len: int = 256
    vocab_lo: int = 100
    vocab_hi: int = 10000
    seed: int = 42
    #: Examples (the first n_pr of the batch) whose head outputs enter the participation ratio.
    n_pr: int = 500
    batch_size: int = 16
    dtype: str = "float32"
    baseline_positions: int = 50
    baseline_seed: int = 0
    #: The SPEC's thresholds (headwatch.spec, which says why they are recorded here too).
    label_threshold: float = SPEC.label
    induction_threshold: float = SPEC.induction
    previous_token_threshold: float = SPEC.previous_token
    bos_threshold: float = SPEC.bos
    #: Run the group ablations of docs/SPEC.md §4 (final revisions need them; early ones may skip).
    ablation: bool = True
    ablation_seed: int = 123
    #: Intervals (headwatch.stats): level, bootstrap resamples over examples (0: no bootstrap
    #: intervals; exact top-1 intervals are always given) and the resampling seed.
    interval_level: float = SPEC.interval_level
    n_bootstrap: int = SPEC.n_bootstrap
    bootstrap_seed: int = SPEC.bootstrap_seed
    #: Examples (the first ones of the batch) on which Sink_1^eps is computed (0: not computed).
    sink_examples: int = SPEC.sink_examples

    def cache_fields(self) -> dict[str, Any]:
        """Fields that change measured numbers (batch_size does not), for cache keys."""
        d = asdict(self)
        d.pop("batch_size")
        return d


@dataclass(frozen=True)
class TaskMetrics:
    """Next-token metrics at the query position (T-1) against the induction target b.

    ``n`` and ``top1_count`` (examples scored, examples whose top-1 is b) are what exact tests
    need; records of schema /1 and the published files have rates only (None here).
    """

    loss: float
    top1: float
    top5: float
    mean_logit_target: float
    n: int | None = None
    top1_count: int | None = None


Bounds = tuple[float, float]


@dataclass(frozen=True)
class RecordIntervals:
    """Intervals of a record's numbers at ``level`` (no per-example data is kept).

    ``methods`` names the method of each quantity (headwatch.stats): ``selectivity``,
    ``bos_fraction`` and ``induction_heads`` by a seeded percentile bootstrap over examples
    (ratio of means, recomputed per resample; the head counts from each resample's table),
    ``top1`` (task and ablations) by the exact Clopper-Pearson interval.
    ``selectivity[head][class]`` = (lo, hi); ``induction_heads`` is a count of heads at induction
    selectivity >= the record's threshold; ``ablation_top1[name]`` per ablation.
    """

    level: float
    methods: dict[str, str]
    selectivity: dict[str, dict[str, Bounds]] = field(default_factory=dict)
    bos_fraction: Bounds | None = None
    induction_heads: Bounds | None = None
    task_top1: Bounds | None = None
    ablation_top1: dict[str, Bounds] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RecordIntervals":
        def pair(v: Any) -> Bounds | None:
            return None if v is None else (float(v[0]), float(v[1]))

        return cls(
            level=float(d["level"]), methods=dict(d["methods"]),
            selectivity={h: {c: pair(b) for c, b in cls_.items()} for h, cls_ in d.get("selectivity", {}).items()},
            bos_fraction=pair(d.get("bos_fraction")), induction_heads=pair(d.get("induction_heads")),
            task_top1=pair(d.get("task_top1")),
            ablation_top1={k: pair(v) for k, v in d.get("ablation_top1", {}).items()},
        )


@dataclass(frozen=True)
class SinkScore:
    """Gu et al.'s Sink_1^eps (arXiv 2410.10781) on the first ``n_examples`` of the batch.

    ``first_position_attention[head]``: the head's attention to position 0, averaged over query
    positions 1..T-1 and the sub-batch (whole attention rows: hence a sub-batch); ``share``: the
    share of heads where it exceeds ``eps``. Reported beside the BOS fraction, never asserted.
    """

    eps: float
    n_examples: int
    share: float
    first_position_attention: dict[str, float] = field(default_factory=dict)

    def share_at(self, eps: float) -> float:
        """Sink_1^eps at another eps, from the stored per-head attention."""
        values = list(self.first_position_attention.values())
        return sum(v > eps for v in values) / len(values) if values else float("nan")


@dataclass(frozen=True)
class AblationResult:
    """Task metrics with a group of heads zeroed at the output-projection input."""

    name: str
    heads: tuple[str, ...]
    metrics: TaskMetrics


@dataclass
class MeasurementRecord:
    """One probe run of one checkpoint.

    ``all_head_selectivity[head][cls]`` is attention to the class target over the baseline
    (docs/SPEC.md §2); ``pr[head]`` is the participation ratio of the head's output (docs/SPEC.md §3), or absent.
    """

    model: str
    revision: str
    tokens_seen: float | None
    n_layers: int
    n_heads: int
    d_head: int
    all_head_selectivity: dict[str, dict[str, float]]
    pr: dict[str, float] | None = None
    task: TaskMetrics | None = None
    ablations: list[AblationResult] = field(default_factory=list)
    settings: ProbeSettings | None = None
    n_examples_valid: int | None = None
    #: Where the numbers came from: versions, device, dtype, seconds, weights hash, source files;
    #: optionally ``provenance["training"]`` (:data:`TRAINING_PROVENANCE`).
    provenance: dict[str, Any] = field(default_factory=dict)
    #: Intervals of the numbers above (None: schema /1, published means, or intervals turned off).
    intervals: RecordIntervals | None = None
    #: Sink_1^eps on a sub-batch (None where not computed).
    sink: SinkScore | None = None

    # ---- JSON round trip -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = SCHEMA
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MeasurementRecord":
        if d.get("schema") not in READABLE_SCHEMAS:
            raise ValueError(
                f"not a headwatch measurement record (schema {d.get('schema')!r}, expected one of "
                f"{', '.join(READABLE_SCHEMAS)})"
            )
        d = dict(d)
        d.pop("schema")
        task = d.pop("task")
        settings = d.pop("settings")
        ablations = d.pop("ablations", [])
        intervals = d.pop("intervals", None)
        sink = d.pop("sink", None)
        return cls(
            **d,
            task=TaskMetrics(**task) if task else None,
            settings=ProbeSettings(**settings) if settings else None,
            ablations=[
                AblationResult(a["name"], tuple(a["heads"]), TaskMetrics(**a["metrics"]))
                for a in ablations
            ],
            intervals=RecordIntervals.from_dict(intervals) if intervals else None,
            sink=SinkScore(**sink) if sink else None,
        )

    def to_json(self, path: str | os.PathLike) -> None:
        """Write atomically: a reader never sees a half-written record."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "MeasurementRecord":
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    # ---- convenience -----------------------------------------------------------------------
    def heads(self) -> list[str]:
        """All head keys in (layer, head) order."""
        return [head_key(l, h) for l in range(self.n_layers) for h in range(self.n_heads)]

    def ablation(self, name: str) -> AblationResult | None:
        return next((a for a in self.ablations if a.name == name), None)

    def selectivity_interval(self, head: str, cls: str) -> Bounds | None:
        """The interval of one selectivity, or None where the record carries none."""
        if self.intervals is None:
            return None
        return self.intervals.selectivity.get(head, {}).get(cls)

    @property
    def is_published(self) -> bool:
        """Whether the numbers are the paper author's published means (converted files)."""
        return self.provenance.get("source") == "published"

    def no_interval_reason(self) -> str:
        """Why this record has no intervals, in the words a verdict uses."""
        if self.is_published:
            return "no interval: published means"
        if self.intervals is None:
            return "no interval: record measured without intervals (schema /1 or n_bootstrap = 0)"
        return "no interval for this quantity in the record"


def sort_by_tokens(records: list[MeasurementRecord]) -> list[MeasurementRecord]:
    """Token order; records without a token count keep their order, last."""
    return [r for _, r in sorted(enumerate(records),
                                 key=lambda ir: (ir[1].tokens_seen is None, ir[1].tokens_seen or 0.0, ir[0]))]


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write JSON to a unique temporary file beside ``path`` (``.<name>.<random>.tmp``) and rename
    it into place: readers see the old file or the new one, never part of one (also on NFS)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, sort_keys=False, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())  # the bytes reach the disk (or the file server) before the name does
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
