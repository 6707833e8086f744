"""The six-class all-head selectivity screen (docs/SPEC.md §2).

Two halves: :class:`SelectivityAccumulator` turns captured attention rows of the query position
into per-head selectivities; the plain functions below (labels, circuits, BOS fraction) turn a
selectivity table ``{"L{l}_H{h}": {class: float}}`` into the paper's head sets. The latter work
equally on fresh measurements and on the author's published files; the ``*_of(record)`` forms
also leave out heads whose attention to the class target is negligible (the attention floor,
docs/statistics.md#negligible-attention), where the record carries its attention.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

import numpy as np

from headwatch.spec import SPEC

from headwatch.probes.record import HEAD_CLASSES, UNCLASSIFIED, MeasurementRecord, negligible_heads

if TYPE_CHECKING:
    import torch

SelectivityTable = Mapping[str, Mapping[str, float]]

#: Guard against division by zero for heads that never look at the baseline positions.
BASELINE_FLOOR = 1e-8


def baseline_positions(seq_len: int, count: int = 50, seed: int = 0) -> np.ndarray:
    """Positions whose mean attention is the screen's baseline.

    Drawn one ``RandomState(seed).randint(1, T-1)`` at a time, skipping class targets
    {0, T-1, T-2, T-6..T-3} and repeats, until ``count`` are collected (the author's order).
    """
    T = seq_len
    excluded = {0, T - 1, T - 2, T - 3, T - 4, T - 5, T - 6}
    available = len(set(range(1, T - 1)) - excluded)
    if count > available:
        raise ValueError(
            f"baseline needs {count} distinct positions but seq_len={T} leaves only {available}; "
            "use a longer sequence or fewer baseline positions"
        )
    rng = np.random.RandomState(seed)
    chosen: list[int] = []
    seen: set[int] = set()
    while len(chosen) < count:
        p = int(rng.randint(1, T - 1))
        if p in excluded or p in seen:
            continue
        seen.add(p)
        chosen.append(p)
    return np.array(chosen, dtype=np.int64)


class SelectivityAccumulator:
    """Streams attention rows batch by batch and yields per-head class selectivities.

    Induction and duplicate-token attention average over "valid" examples (b occurs once before
    the query); every other class and the baseline average over all examples (the author's rule).
    With ``keep_examples`` it also keeps each example's class and baseline attention (float32, in
    memory only) for the bootstrap intervals of :mod:`headwatch.probes.intervals`.
    """

    def __init__(self, n_layers: int, n_heads: int, seq_len: int, baseline: np.ndarray, keep_examples: bool = False):
        import torch  # deferred here and below: the judge reads head sets from this module without torch

        self.n_layers, self.n_heads, self.seq_len = n_layers, n_heads, seq_len
        self.baseline = torch.as_tensor(baseline, dtype=torch.long)
        T = seq_len
        self._fixed = {  # class -> target positions whose attention is averaged
            "previous-token": torch.tensor([T - 2]),
            "self": torch.tensor([T - 1]),
            "first-token": torch.tensor([0]),
            "local": torch.tensor([T - 6, T - 5, T - 4, T - 3]),
        }
        shape = (n_layers, n_heads)
        self._sums = {c: torch.zeros(shape, dtype=torch.float64) for c in HEAD_CLASSES}
        self._baseline_sum = torch.zeros(shape, dtype=torch.float64)
        self.n_all = 0
        self.n_valid = 0
        self.keep_examples = keep_examples
        self._examples: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def update(self, rows: torch.Tensor, ab: torch.Tensor, valid: torch.Tensor) -> None:
        """Add one batch.

        rows: [B, n_layers, n_heads, T] attention of the query position (T-1), fp32.
        ab: [B] position of the first ``a``; ``b`` sits at ab+1.
        valid: [B] bool, examples whose induction/duplicate targets count.
        """
        import torch  # deferred: torch

        rows = rows.to(torch.float64)
        B = rows.shape[0]
        per_example = {}  # class -> [B, L, H]
        for cls, pos in self._fixed.items():
            per_example[cls] = rows[..., pos.to(rows.device)].mean(-1)
            self._sums[cls] += per_example[cls].sum(0).cpu()
        baseline = rows[..., self.baseline.to(rows.device)].mean(-1)  # [B, L, H]
        self._baseline_sum += baseline.sum(0).cpu()
        idx = torch.arange(B, device=rows.device)
        ab = ab.to(rows.device)
        v = valid.to(rows.device)
        per_example["induction"] = rows[idx, :, :, ab + 1]  # [B, L, H]
        per_example["duplicate-token"] = rows[idx, :, :, ab]
        self._sums["induction"] += per_example["induction"][v].sum(0).cpu()
        self._sums["duplicate-token"] += per_example["duplicate-token"][v].sum(0).cpu()
        self.n_all += B
        self.n_valid += int(v.sum())
        if self.keep_examples:
            stacked = torch.stack([per_example[c] for c in HEAD_CLASSES], dim=1)  # [B, C, L, H]
            self._examples.append((stacked.float().cpu(), baseline.float().cpu(), v.cpu()))

    def examples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-example attention kept with ``keep_examples``: (class attention [N, C, L, H] in
        HEAD_CLASSES order, baseline attention [N, L, H], valid [N] bool)."""
        if not self._examples:
            raise ValueError("no per-example attention kept: build the accumulator with keep_examples=True")
        import torch  # deferred: torch

        values, baseline, valid = zip(*self._examples)
        return torch.cat(values).numpy(), torch.cat(baseline).numpy(), torch.cat(valid).numpy()

    def attention(self) -> dict[str, np.ndarray]:
        """Mean attention per class (and "baseline"), each [n_layers, n_heads]."""
        if self.n_all == 0:
            raise ValueError("no examples were added to the selectivity screen")
        out = {}
        for cls in HEAD_CLASSES:
            denom = self.n_valid if cls in ("induction", "duplicate-token") else self.n_all
            out[cls] = (self._sums[cls] / max(denom, 1)).numpy()
        out["baseline"] = (self._baseline_sum / self.n_all).numpy()
        return out

    def attention_table(self) -> dict[str, dict[str, float]]:
        """``{"L{l}_H{h}": {class or "baseline": mean attention}}``: :meth:`attention` per head, as the
        record's ``attention`` keeps it."""
        att = self.attention()
        # clipped: a softmax weight rounded in low precision may sit a hair above 1, which a record refuses
        return {f"L{l}_H{h}": {c: min(1.0, max(0.0, float(att[c][l, h]))) for c in (*HEAD_CLASSES, "baseline")}
                for l in range(self.n_layers) for h in range(self.n_heads)}

    def selectivity(self) -> dict[str, dict[str, float]]:
        """``{"L{l}_H{h}": {class: attention / max(baseline, 1e-8)}}``."""
        att = self.attention()
        base = np.maximum(att["baseline"], BASELINE_FLOOR)
        table: dict[str, dict[str, float]] = {}
        for l in range(self.n_layers):
            for h in range(self.n_heads):
                table[f"L{l}_H{h}"] = {c: float(att[c][l, h] / base[l, h]) for c in HEAD_CLASSES}
        return table


# ---- head sets from a selectivity table -------------------------------------------------------
#
# ``negligible``: heads whose attention to the class target is below the attention floor
# (:func:`negligible_heads`; docs/statistics.md#negligible-attention). They are left out of every
# head set, whatever their ratio; the denominators (all heads) stay as they are.


def best_class(selectivities: Mapping[str, float], skip: Collection[str] = ()) -> tuple[str, float]:
    """The class with the highest selectivity (ties go to the earlier class in HEAD_CLASSES), among
    the classes not in ``skip``; ("unclassified", 0.0) where every class is skipped."""
    classes = [c for c in HEAD_CLASSES if c not in skip]
    if not classes:
        return UNCLASSIFIED, 0.0
    best = max(classes, key=lambda c: (selectivities[c], -HEAD_CLASSES.index(c)))
    return best, float(selectivities[best])


def head_labels(table: SelectivityTable, threshold: float = SPEC.label,
                negligible: Mapping[str, Collection[str]] | None = None) -> dict[str, str]:
    """Each head's best class if its selectivity is >= threshold, else "unclassified".

    ``negligible[cls]``: heads whose ``cls`` selectivity does not count (their attention to that
    target is below the floor); the best class is taken among the classes that count."""
    negligible = negligible or {}
    labels = {}
    for head, sel in table.items():
        cls, value = best_class(sel, [c for c, heads in negligible.items() if head in heads])
        labels[head] = cls if value >= threshold else UNCLASSIFIED
    return labels


def induction_circuit(table: SelectivityTable, threshold: float = SPEC.induction,
                      negligible: Collection[str] = frozenset()) -> frozenset[str]:
    """Heads with induction selectivity >= threshold, whatever their best class, except ``negligible``."""
    return frozenset(h for h, sel in table.items() if sel["induction"] >= threshold and h not in negligible)


def previous_token_circuit(table: SelectivityTable, threshold: float = SPEC.previous_token,
                           negligible: Collection[str] = frozenset()) -> frozenset[str]:
    """Heads whose best class is previous-token with selectivity >= threshold, except ``negligible``
    (heads whose previous-token attention is below the floor)."""
    out = set()
    for h, sel in table.items():
        cls, value = best_class(sel)
        if cls == "previous-token" and value >= threshold and h not in negligible:
            out.add(h)
    return frozenset(out)


def bos_heads(table: SelectivityTable, threshold: float = SPEC.bos,
              negligible: Collection[str] = frozenset()) -> frozenset[str]:
    """Heads with first-token (position 0) selectivity >= threshold, whatever their best class,
    except ``negligible``."""
    return frozenset(h for h, sel in table.items() if sel["first-token"] >= threshold and h not in negligible)


def bos_fraction(table: SelectivityTable, threshold: float = SPEC.bos,
                 negligible: Collection[str] = frozenset()) -> float:
    """Share of all heads that are BOS heads (docs/SPEC.md §2; ``negligible`` heads are not BOS heads
    but still count among all heads); 0.0 for an empty table is an error."""
    if not table:
        raise ValueError("empty selectivity table: no heads to take a BOS fraction of")
    return len(bos_heads(table, threshold, negligible)) / len(table)


# ---- head sets of a record: the attention floor applied where the record carries attention ----------


def circuit_of(record: MeasurementRecord, threshold: float = SPEC.induction,
               floor: float = SPEC.attention_floor) -> frozenset[str]:
    """The record's induction circuit; heads with negligible induction attention left out."""
    return induction_circuit(record.all_head_selectivity, threshold, record.negligible_heads("induction", floor))


def bos_heads_of(record: MeasurementRecord, threshold: float = SPEC.bos,
                 floor: float = SPEC.attention_floor) -> frozenset[str]:
    """The record's BOS heads; heads with negligible attention to position 0 left out."""
    return bos_heads(record.all_head_selectivity, threshold, record.negligible_heads("first-token", floor))


def bos_fraction_of(record: MeasurementRecord, threshold: float = SPEC.bos,
                    floor: float = SPEC.attention_floor) -> float:
    """The record's BOS fraction; heads with negligible attention to position 0 are not BOS heads."""
    return bos_fraction(record.all_head_selectivity, threshold, record.negligible_heads("first-token", floor))


def previous_token_circuit_of(record: MeasurementRecord, threshold: float = SPEC.previous_token,
                              floor: float = SPEC.attention_floor) -> frozenset[str]:
    """The record's previous-token circuit; heads with negligible previous-token attention left out."""
    return previous_token_circuit(record.all_head_selectivity, threshold,
                                  record.negligible_heads("previous-token", floor))


def labels_of(record: MeasurementRecord, threshold: float = SPEC.label,
              floor: float = SPEC.attention_floor) -> dict[str, str]:
    """The record's head labels; a class whose target attention is negligible does not label a head."""
    negligible = {c: record.negligible_heads(c, floor) for c in HEAD_CLASSES} if record.has_attention else {}
    return head_labels(record.all_head_selectivity, threshold, negligible)


__all__ = ["BASELINE_FLOOR", "SelectivityAccumulator", "SelectivityTable", "baseline_positions", "best_class",
           "bos_fraction", "bos_fraction_of", "bos_heads", "bos_heads_of", "circuit_of", "head_labels",
           "induction_circuit", "labels_of", "negligible_heads", "previous_token_circuit",
           "previous_token_circuit_of"]
