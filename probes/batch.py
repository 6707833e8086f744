"""The synthetic induction batch of docs/SPEC.md §1, bit-for-bit with the author's generator.

Each example is random tokens with one planted pair ``a b`` at positions (ab, ab+1) and ``a``
again at the last position, so a model that copies what followed the earlier ``a`` predicts ``b``.
No BOS token is prepended: "first-token" attention means attention to position 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from headwatch.validation import check_batch_settings


@dataclass(frozen=True)
class InductionBatch:
    """tokens: [N, T] int64; ab, a, b: [N] int64; valid: [N] bool.

    ``valid`` marks examples where b occurs exactly once in tokens[:-1] (always, for this
    generator; the author's screen recomputes it, so we do too).
    """

    tokens: torch.Tensor
    ab: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    valid: torch.Tensor

    @property
    def query_position(self) -> int:
        return self.tokens.shape[1] - 1

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def slice(self, start: int, stop: int) -> "InductionBatch":
        return InductionBatch(*(t[start:stop] for t in (self.tokens, self.ab, self.a, self.b, self.valid)))


def induction_batch(
    n_examples: int = 2000,
    seq_len: int = 256,
    vocab_lo: int = 100,
    vocab_hi: int = 10000,
    seed: int = 42,
) -> InductionBatch:
    """Generate the batch with one ``RandomState(seed)`` in the author's call order.

    The arguments are checked first (headwatch.validation.check_batch_settings: InputError), including
    that the token range leaves enough valid examples at this length.
    """
    check_batch_settings(dict(n_examples=n_examples, seq_len=seq_len, vocab_lo=vocab_lo, vocab_hi=vocab_hi, seed=seed))
    T = seq_len
    rng = np.random.RandomState(seed)
    tokens = np.empty((n_examples, T), dtype=np.int64)
    ab = np.empty(n_examples, dtype=np.int64)
    a_ids = np.empty(n_examples, dtype=np.int64)
    b_ids = np.empty(n_examples, dtype=np.int64)
    pool = np.arange(vocab_lo, vocab_hi)
    for i in range(n_examples):
        seq = rng.randint(vocab_lo, vocab_hi, size=T)
        a, b = rng.choice(pool, size=2, replace=False)
        pos = rng.randint(20, T // 2)
        seq[pos] = a
        seq[pos + 1] = b
        # Redraw stray copies so a and b occur only where planted (a first, then b: author's order).
        for token, keep in ((a, pos), (b, pos + 1)):
            for j in range(T):
                if j != keep and seq[j] == token:
                    seq[j] = rng.randint(vocab_lo, vocab_hi)
        seq[-1] = a
        tokens[i], ab[i], a_ids[i], b_ids[i] = seq, pos, a, b
    valid = (tokens[:, :-1] == b_ids[:, None]).sum(1) == 1
    return InductionBatch(
        tokens=torch.from_numpy(tokens),
        ab=torch.from_numpy(ab),
        a=torch.from_numpy(a_ids),
        b=torch.from_numpy(b_ids),
        valid=torch.from_numpy(valid),
    )
