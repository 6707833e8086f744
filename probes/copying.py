"""The copyable-position reading of the causal check: greedy top-1 on every position of a repeated
sequence whose next token a copy can predict, with each ablation group zeroed (docs/statistics.md).

SPEC's causal check scores one position per example (the query, docs/SPEC.md §4): on a pretrained
model whose top-1 there is a few percent, the "<= 25% of baseline" bar has almost no signal. This
reading scores the same ablations where copying is the whole task: each sequence is ``half`` random
token ids (distinct, so every earlier occurrence is unique) followed by the same ids again. At every
position t of the repeated half but its last, the next token is the one that followed the earlier
occurrence of token t: ``half - 1`` copyable positions per sequence. Positions of one sequence are
not independent (a model that locks onto a sequence copies all of it), so the record keeps the hits
per sequence and the judge resamples whole sequences (:func:`headwatch.stats.cluster_bootstrap`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from headwatch.probes import ablation as ablation_lib
from headwatch.probes.record import CopyReading

#: Most bytes one chunk's logits may take ([sequences, half, vocabulary] float32): Gemma 3's 262,144-id
#: vocabulary at half 64 is 67 MB a sequence, so a chunk holds a few sequences, not a whole batch.
LOGIT_BYTES = 256 << 20


@dataclass(frozen=True)
class RepeatedBatch:
    """tokens: [S, 2 * half] int64, each row ``half`` distinct ids then the same ids again."""

    tokens: torch.Tensor
    half: int

    @property
    def positions_per_sequence(self) -> int:
        """Copyable positions per sequence: half .. 2 * half - 2 (the last has no next token)."""
        return self.half - 1

    def __len__(self) -> int:
        return self.tokens.shape[0]


def effective_half(copy_half: int, vocab_lo: int, vocab_hi: int, max_positions: int | None) -> int:
    """``copy_half`` capped at the ids the token range holds and at half the model's positions (a
    tiny model of 64 positions reads sequences of 2 x 32); the record's ``CopyReading.half`` says
    what was used. Below 2 there is no copyable position (the reading is then not measured)."""
    limits = [copy_half, vocab_hi - vocab_lo] + ([max_positions // 2] if max_positions else [])
    return min(limits)


def repeated_batch(n_sequences: int, half: int, vocab_lo: int, vocab_hi: int, seed: int) -> RepeatedBatch:
    """``n_sequences`` rows of ``half`` ids drawn without replacement from [vocab_lo, vocab_hi), each
    row drawn by one ``RandomState(seed)`` in turn, then repeated. The caller checked the settings
    (headwatch.validation: the range holds at least ``half`` ids)."""
    if vocab_hi - vocab_lo < half:
        raise ValueError(f"[{vocab_lo}, {vocab_hi}) holds {vocab_hi - vocab_lo} ids, fewer than half = {half}")
    rng = np.random.RandomState(seed)
    first = np.stack([rng.choice(np.arange(vocab_lo, vocab_hi), size=half, replace=False) for _ in range(n_sequences)])
    tokens = np.concatenate([first, first], axis=1).astype(np.int64)
    return RepeatedBatch(torch.from_numpy(tokens), half)


def _hits(model: nn.Module, tokens: torch.Tensor, half: int) -> torch.Tensor:
    """Greedy top-1 hits per sequence on the copyable positions: [B] int64.

    tokens: [B, 2 * half]. The logits of the last ``half`` positions ([B, half, V]) are computed; the
    first ``half - 1`` of them (positions half .. 2 * half - 2) predict tokens half + 1 .. 2 * half - 1.
    """
    logits = model(input_ids=tokens, logits_to_keep=half, use_cache=False).logits[:, : half - 1]
    targets = tokens[:, half + 1:]
    return (logits.argmax(-1) == targets).sum(1).cpu()


def copy_reading(model: nn.Module, batch: RepeatedBatch, groups: dict[str, list[str]], device: torch.device,
                 seed: int, progress: Callable[[int], None] | None = None) -> CopyReading:
    """Hits per sequence with nothing ablated ("baseline") and with each group's heads zeroed.

    The passes run the whole model (no query-position shortcut: every position of the repeated half
    is read). ``groups``: name -> head keys, as the query-position ablations use them."""
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    per_sequence = batch.half * max(vocab, 1) * 4
    chunk = max(1, min(len(batch), LOGIT_BYTES // per_sequence))
    conditions: dict[str, Iterable[str]] = {"baseline": (), **groups}
    hits: dict[str, tuple[int, ...]] = {}
    with torch.inference_mode():
        for name, heads in conditions.items():
            parts = []
            with ablation_lib.ablated(model, heads):
                for start in range(0, len(batch), chunk):
                    part = batch.tokens[start:start + chunk].to(device)
                    parts.append(_hits(model, part, batch.half))
                    if progress:
                        progress(len(part))
            hits[name] = tuple(int(h) for h in torch.cat(parts))
    return CopyReading(n_sequences=len(batch), half=batch.half, seed=seed,
                       positions_per_sequence=batch.positions_per_sequence, hits=hits)
