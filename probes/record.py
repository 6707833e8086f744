"""Measurement records: what one probe run of one (model, revision) produced.

A record is the stable interface between the probes (which fill it), the fixtures (which cache it
as JSON) and the claims (which judge sequences of them). The JSON keeps the paper author's own
keys (`all_head_selectivity`, `pr`) so records compare directly with the published files.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from headwatch.files import UnreadableFile, parse_json, read_json, write_json_atomic
from headwatch.spec import PROBE_RUN, SPEC
from headwatch.schema import from_data, key, to_data
from headwatch.validation import PROBE_RULES, InputError, Rule, integer, number

SCHEMA = "headwatch.measurement/2"
#: Older schemas this module still reads: /1 records have no intervals, counts or sink score.
READABLE_SCHEMAS: tuple[str, ...] = (SCHEMA, "headwatch.measurement/1")

#: Bump when a change to the probes changes measured numbers: it is part of every cache key (as
#: ``v<N>``). It lives here, beside the record, so that reading the cache imports no torch.
#: 3: records carry intervals, top-1 counts and Sink_1^eps (schema /2).
#: 4: records carry each head's mean attention (``attention``), and the ablated circuit leaves out
#: heads whose induction attention is negligible (docs/statistics.md#negligible-attention).
PROBE_VERSION = "4"

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
#: The keys of each head's ``MeasurementRecord.attention``: the six classes, then the baseline.
ATTENTION_KEYS: tuple[str, ...] = (*HEAD_CLASSES, "baseline")


def attention_floor_value(seq_len: int, floor_share: float = SPEC.attention_floor) -> float:
    """The attention below which a class target's mass is negligible: ``floor_share`` x a uniform
    head's share of one position, 1/T (docs/statistics.md#negligible-attention)."""
    return floor_share / seq_len


def negligible_heads(attention: Mapping[str, Mapping[str, float]], cls: str, seq_len: int,
                     floor_share: float = SPEC.attention_floor) -> frozenset[str]:
    """Heads whose mean attention to the ``cls`` target is below ``floor_share / seq_len``.

    ``attention[head][cls]``: mean attention of the query position to the class target (a
    probability, per head a scalar; the record's ``attention``). Such a head gives the target less
    than a uniform head would; a selectivity over its threshold is then a ratio of two negligible
    masses (its baseline is smaller still) and the head is not counted in a head set. The one home
    of the rule: :meth:`MeasurementRecord.negligible_heads` and ``headwatch.probes.selectivity``
    (which exports it) call it.
    """
    if cls not in ATTENTION_KEYS:
        raise ValueError(f"unknown class {cls!r}; expected one of {', '.join(ATTENTION_KEYS)}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    floor = attention_floor_value(seq_len, floor_share)
    return frozenset(h for h, att in attention.items() if att[cls] < floor)


def head_key(layer: int, head: int) -> str:
    """The author's head name: ``L{layer}_H{head}``."""
    return f"L{layer}_H{head}"


def parse_head_key(key: str) -> tuple[int, int]:
    """Inverse of :func:`head_key`; raises ValueError naming the bad key."""
    try:
        layer_part, head_part = key.split("_")
        if layer_part[0] != "L" or head_part[0] != "H":
            raise ValueError
        layer, head = int(layer_part[1:]), int(head_part[1:])
        if min(layer, head) < 0 or head_key(layer, head) != key:  # L-1_H0: outside the grid; L01_H0: another L1_H0
            raise ValueError
        return layer, head
    except (ValueError, IndexError):
        raise InputError(f"not a head key of the form 'L<layer>_H<head>' (layer and head numbers from 0, no sign "
                         f"or leading zeros): {key!r}") from None


@dataclass(frozen=True)
class ProbeSettings:
    """Everything that determines a probe run's numbers (docs/SPEC.md §1-§4).

    Defaults are the paper's (``headwatch.spec.PROBE_RUN``): 2000 examples of length 256 over token
    ids [100, 10000), seed 42.
    """

    n_examples: int = key(PROBE_RUN.n_examples, doc="[§1] examples in the induction batch (N)")
    seq_len: int = key(PROBE_RUN.seq_len, doc="[§1] their length T; the query is position T-1")
    vocab_lo: int = key(PROBE_RUN.vocab_lo, doc="[§1] lowest token id drawn")
    vocab_hi: int = key(PROBE_RUN.vocab_hi, doc="[§1] token ids are drawn below this (exclusive)")
    seed: int = key(PROBE_RUN.seed, doc="[§1] numpy RandomState seed of the batch")
    n_pr: int = key(PROBE_RUN.n_pr, doc="[§3] examples (the first n_pr of the batch) whose head outputs enter the "
                                        "participation ratio", example=500)
    batch_size: int = key(16, doc="examples per forward pass: memory, not numbers (not in the cache key)")
    dtype: str = key("float32", doc="the dtype the model computes in")
    baseline_positions: int = key(PROBE_RUN.baseline_positions,
                                  doc="[§2] positions the baseline attention is averaged over")
    baseline_seed: int = key(PROBE_RUN.baseline_seed, doc="[§2] RandomState seed that draws them")
    #: The SPEC's thresholds (headwatch.spec, which says why they are recorded here too); a panel may not set them.
    label_threshold: float = key(SPEC.label, doc="SPEC's head-label threshold")
    induction_threshold: float = key(SPEC.induction, doc="SPEC's induction threshold")
    previous_token_threshold: float = key(SPEC.previous_token, doc="SPEC's previous-token threshold")
    bos_threshold: float = key(SPEC.bos, doc="SPEC's BOS threshold")
    attention_floor: float = key(SPEC.attention_floor, doc="SPEC's attention floor, in units of 1/T: the ablated "
                                                           "circuit leaves out heads whose induction attention is below it")
    ablation: bool = key(True, doc="[§4] run the group ablations (final revisions need them; early ones may skip)")
    ablation_seed: int = key(PROBE_RUN.ablation_seed, doc="[§4] RandomState seed of the matched-random heads")
    interval_level: float = key(SPEC.interval_level, doc="level of every interval (headwatch.stats)")
    n_bootstrap: int = key(SPEC.n_bootstrap, doc="bootstrap resamples over examples (0: no bootstrap intervals; exact "
                                                 "top-1 intervals are always given)")
    bootstrap_seed: int = key(SPEC.bootstrap_seed, doc="seed of the bootstrap's resampling")
    sink_examples: int = key(SPEC.sink_examples, doc="examples (the first ones of the batch) on which Sink_1^eps is "
                                                     "computed (0: not computed)")
    copy_sequences: int = key(PROBE_RUN.copy_sequences, doc="repeated sequences of the copyable-position reading of "
                                                            "the ablations (0: not measured)")
    copy_half: int = key(PROBE_RUN.copy_half, doc="distinct random ids in each repeated sequence's first half (its "
                                                  "copyable positions: copy_half - 1)")
    copy_seed: int = key(PROBE_RUN.copy_seed, doc="RandomState seed of the repeated sequences")

    #: What each field may be (headwatch.validation, the one rule set); checked on reading a record.
    FIELD_RULES: ClassVar[dict[str, Rule]] = PROBE_RULES

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

    FIELD_RULES: ClassVar[dict[str, Rule]] = {
        "loss": number(0), "top1": number(0, max=1), "top5": number(0, max=1),
    }


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
class CopyReading:
    """The copyable-position reading of the ablations (probes/copying.py): greedy top-1 hits on the
    ``positions_per_sequence`` copyable positions of each of ``n_sequences`` repeated sequences
    (``half`` random ids, then again), with nothing ablated (``hits["baseline"]``) and with each
    ablation group zeroed (``hits[group]``, the groups of ``MeasurementRecord.ablations``). Hits are
    kept per sequence because positions of one sequence are not independent (the judge resamples
    sequences)."""

    n_sequences: int
    half: int
    seed: int
    positions_per_sequence: int
    hits: dict[str, tuple[int, ...]] = field(default_factory=dict)

    FIELD_RULES: ClassVar[dict[str, Rule]] = {
        "n_sequences": integer(1), "half": integer(2), "seed": integer(0), "positions_per_sequence": integer(1),
        "hits": integer(0, allowed="a count of hits >= 0"),
    }

    def check(self, where: str) -> None:
        """Every condition holds one count per sequence, none above the positions a sequence has."""
        if self.positions_per_sequence != self.half - 1:
            raise RecordError(f"{where}: positions_per_sequence is {self.positions_per_sequence}, but a repeated "
                              f"sequence of half {self.half} has {self.half - 1} copyable positions")
        for name, counts in self.hits.items():
            if len(counts) != self.n_sequences:
                raise RecordError(f"{where}: hits[{name!r}] holds {len(counts)} counts for {self.n_sequences} sequences")
            if any(c > self.positions_per_sequence for c in counts):
                raise RecordError(f"{where}: hits[{name!r}] has a count above the {self.positions_per_sequence} "
                                  "copyable positions of a sequence")

    def rate(self, name: str) -> float | None:
        """Share of all copyable positions whose top-1 is right under condition ``name`` (None if absent)."""
        counts = self.hits.get(name)
        return None if counts is None else sum(counts) / (self.n_sequences * self.positions_per_sequence)


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
    #: The ablations read on every copyable position of repeated sequences (None where not measured).
    copy_reading: CopyReading | None = None
    #: ``attention[head][cls]``: the head's mean attention to each class target (the six of
    #: HEAD_CLASSES, averaged as the screen averages them) and to the baseline positions
    #: (``"baseline"``). None: not recorded (probe versions before 4, the published files).
    attention: dict[str, dict[str, float]] | None = None

    #: Bounds beyond each field's type, checked on reading (the types come from the fields above).
    FIELD_RULES: ClassVar[dict[str, Rule]] = {
        "tokens_seen": number(0, allowed="a finite number of tokens >= 0, or null"),
        "n_layers": integer(1), "n_heads": integer(1), "d_head": integer(1),
        "all_head_selectivity": number(0, allowed="a finite selectivity >= 0"),
        "pr": number(0, allowed="a finite participation ratio >= 0"),
        "n_examples_valid": integer(0),
        "attention": number(0, max=1, allowed="a mean attention from 0 to 1"),
    }

    # ---- JSON round trip -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The record as JSON data (headwatch.schema.to_data), with its schema."""
        return {**to_data(self), "schema": SCHEMA}

    @classmethod
    def from_dict(cls, d: Any, where: str = "record") -> "MeasurementRecord":
        """The record in ``d``, validated: every field's type and bounds (from the fields and
        ``FIELD_RULES``, so a new field needs no code here), finite numbers, and one selectivity
        entry of the six classes per head of ``n_layers`` x ``n_heads``. Unknown keys are ignored.
        RecordError names ``where`` (the file) and the bad value."""
        if not isinstance(d, dict) or d.get("schema") not in READABLE_SCHEMAS:
            schema = d.get("schema") if isinstance(d, dict) else type(d).__name__
            raise RecordError(f"{where}: not a headwatch measurement record (schema {schema!r}, expected one of "
                              f"{', '.join(READABLE_SCHEMAS)})")
        try:
            record = from_data(cls, d, where)
        except InputError as e:
            raise RecordError(str(e)) from None
        record.check_heads(where)
        if record.copy_reading is not None:
            record.copy_reading.check(f"{where}: copy_reading")
        return record

    def check_heads(self, where: str = "record") -> None:
        """Every head of ``n_layers`` x ``n_heads`` has the six selectivities (and, where the record
        carries attention, the six classes' and the baseline's attention); PR names no other head."""
        heads = set(self.heads())
        self._check_table("all_head_selectivity", self.all_head_selectivity, heads, HEAD_CLASSES,
                          "the six of the screen", where)
        if self.pr is not None and not set(self.pr) <= heads:
            raise RecordError(f"{where}: pr names heads not in the model: {', '.join(sorted(set(self.pr) - heads)[:5])}")
        if self.attention is not None:
            self._check_table("attention", self.attention, heads, ATTENTION_KEYS,
                              "the six classes of the screen and the baseline", where)

    def _check_table(self, name: str, table: dict[str, dict[str, float]], heads: set[str], keys: tuple[str, ...],
                     expected: str, where: str) -> None:
        """RecordError where ``table`` (head -> key -> value) does not hold exactly ``heads``, each with ``keys``."""
        if set(table) != heads:
            extra, missing = sorted(set(table) - heads), sorted(heads - set(table))
            raise RecordError(
                f"{where}: {name} does not match {self.n_layers} layers x {self.n_heads} heads"
                + (f"; missing {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else "") if missing else "")
                + (f"; not in the model: {', '.join(extra[:5])}" if extra else ""))
        for head, classes in table.items():
            if set(classes) != set(keys):
                raise RecordError(f"{where}: {name}[{head!r}] has {'classes' if name == 'all_head_selectivity' else 'keys'} "
                                  f"{sorted(classes)}; expected {expected}: {', '.join(keys)}")

    def to_json(self, path: str | os.PathLike) -> None:
        """Write atomically: a reader never sees a half-written record."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "MeasurementRecord":
        """Read and validate one record file; RecordError names the file and what is wrong."""
        where = f"measurement record {os.fspath(path)}"
        try:
            data = read_json(path, "record")
        except UnicodeDecodeError as e:
            raise RecordError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        except json.JSONDecodeError as e:
            raise RecordError(f"{where}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
                              "a truncated or hand-edited file? restore or regenerate it") from None
        except UnreadableFile as e:  # a FIFO, a device, a folder, a symlink loop, over the bound, too deep
            raise RecordError(str(e)) from None
        except ValueError as e:  # NaN / Infinity
            raise RecordError(f"{where}: {e}") from None
        except OSError as e:
            raise RecordError(f"{where}: cannot be read ({e.strerror or e})") from None
        return cls.from_dict(data, where)

    # ---- convenience -----------------------------------------------------------------------
    def heads(self) -> list[str]:
        """All head keys in (layer, head) order."""
        return [head_key(l, h) for l in range(self.n_layers) for h in range(self.n_heads)]

    def negligible_heads(self, cls: str, floor_share: float = SPEC.attention_floor) -> frozenset[str]:
        """Heads whose mean attention to the ``cls`` target is below ``floor_share`` / T (T: the
        record's seq_len): their ``cls`` selectivity is a ratio of negligible masses and is not
        counted (:func:`negligible_heads`). Empty where the rule cannot apply: no ``attention``
        (older records, the published files) or no ``settings`` to take T from."""
        if self.attention is None or self.settings is None:
            return frozenset()
        return negligible_heads(self.attention, cls, self.settings.seq_len, floor_share)

    @property
    def has_attention(self) -> bool:
        """Whether the attention floor can apply: the record carries attention and its seq_len."""
        return self.attention is not None and self.settings is not None

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


class RecordError(InputError):
    """A measurement record (a file, a cache entry, a reference folder's file) is malformed."""


def refuse_mixed_geometry(records: list[MeasurementRecord], where: str) -> None:
    """RecordError when one model's records do not all have the same heads (layers x heads).

    A model keeps its heads across training (an organism grown part-way holds its later layers from
    the start), so a record of other heads is another model's (a copy from elsewhere, a damaged
    file); judged beside the others, its heads would enter the trajectories as if they were the model's.
    """
    by_shape: dict[tuple[int, int], list[str]] = {}
    for r in records:
        by_shape.setdefault((r.n_layers, r.n_heads), []).append(r.revision)
    if len(by_shape) < 2:
        return
    usual = max(by_shape, key=lambda shape: len(by_shape[shape]))
    odd = "; ".join(f"{', '.join(revs[:5])}{' ...' if len(revs) > 5 else ''} ({n_layers} x {n_heads})"
                    for (n_layers, n_heads), revs in by_shape.items() if (n_layers, n_heads) != usual)
    raise RecordError(
        f"{where}: its records do not all have the same heads: {len(by_shape[usual])} have {usual[0]} layers x "
        f"{usual[1]} heads, but not {odd}. A model keeps its heads across training: those records belong to "
        "another model (or are damaged); remove them, or put them in that model's own folder")


def loads_finite(text: str | bytes, where: str = "JSON text") -> Any:
    """``json.loads`` that refuses NaN and Infinity (ValueError) and nesting deeper than
    ``headwatch.files.MAX_JSON_DEPTH`` (UnreadableFile, a ValueError too)."""
    return parse_json(text, where)
