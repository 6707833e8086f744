"""The induction batch of docs/SPEC.md §1: structure, determinism, and the author's draw order."""
import numpy as np
import pytest
import torch

from headwatch.probes.batch import induction_batch


@pytest.fixture(scope="module")
def batch():
    return induction_batch(n_examples=200, seq_len=256, vocab_lo=100, vocab_hi=10000, seed=42)


def test_planted_tokens_occur_only_where_planted(batch):
    T = batch.tokens.shape[1]
    for i in range(len(batch)):
        seq, ab = batch.tokens[i], int(batch.ab[i])
        a_positions = (seq == batch.a[i]).nonzero().flatten().tolist()
        b_positions = (seq == batch.b[i]).nonzero().flatten().tolist()
        assert a_positions == [ab, T - 1]
        assert b_positions == [ab + 1]
        assert 20 <= ab < T // 2


def test_ids_in_range_and_all_valid(batch):
    assert int(batch.tokens.min()) >= 100 and int(batch.tokens.max()) < 10000
    assert bool(batch.valid.all())


def test_identical_across_runs(batch):
    again = induction_batch(n_examples=200, seq_len=256, vocab_lo=100, vocab_hi=10000, seed=42)
    assert torch.equal(batch.tokens, again.tokens) and torch.equal(batch.ab, again.ab)
    other = induction_batch(n_examples=200, seq_len=256, vocab_lo=100, vocab_hi=10000, seed=43)
    assert not torch.equal(batch.tokens, other.tokens)


def _reference_first_rows(n, T=256, lo=100, hi=10000, seed=42):
    """docs/SPEC.md §1 written out independently of probes/batch.py, as plain lists."""
    rng = np.random.RandomState(seed)
    rows = []
    for _ in range(n):
        seq = list(rng.randint(lo, hi, size=T))
        a, b = rng.choice(np.arange(lo, hi), size=2, replace=False)
        ab = rng.randint(20, T // 2)
        seq[ab], seq[ab + 1] = a, b
        for k in range(T):
            if seq[k] == a and k != ab:
                seq[k] = rng.randint(lo, hi)
        for k in range(T):
            if seq[k] == b and k != ab + 1:
                seq[k] = rng.randint(lo, hi)
        seq[-1] = a
        rows.append((seq, ab, int(b)))
    return rows


def test_first_rows_match_spec(batch):
    for i, (seq, ab, b) in enumerate(_reference_first_rows(5)):
        assert batch.tokens[i].tolist() == [int(x) for x in seq]
        assert int(batch.ab[i]) == ab and int(batch.b[i]) == b


def test_small_vocab_parameters():
    small = induction_batch(n_examples=50, seq_len=64, vocab_lo=4, vocab_hi=40, seed=1)
    assert small.tokens.shape == (50, 64)
    assert int(small.tokens.min()) >= 4 and int(small.tokens.max()) < 40
    assert bool(small.valid.all())


@pytest.mark.parametrize("kwargs, message", [
    (dict(seq_len=10), "seq_len"),
    (dict(vocab_lo=5, vocab_hi=6), "token id"),
    (dict(n_examples=0), "n_examples"),
])
def test_bad_parameters_are_explained(kwargs, message):
    with pytest.raises(ValueError, match=message):
        induction_batch(**kwargs)


# ---- the share of valid examples, known before the batch is drawn ----


@pytest.mark.parametrize("seq_len, lo, hi", [(64, 10, 18), (64, 10, 20), (256, 100, 130), (68, 16, 512)])
def test_expected_valid_share_matches_the_generator(seq_len, lo, hi, monkeypatch):
    """The share of valid examples is computed before generating the batch; it matches the generator."""
    from headwatch.probes import batch as batch_mod
    from headwatch.validation import expected_valid_fraction

    monkeypatch.setattr(batch_mod, "check_batch_settings", lambda *a, **k: None)  # generate below the bar too
    b = batch_mod.induction_batch(1000, seq_len, lo, hi, 42)
    assert float(b.valid.float().mean()) == pytest.approx(expected_valid_fraction(seq_len, lo, hi), abs=0.05)
    assert torch.equal(b.valid, (b.tokens[:, :-1] == b.b[:, None]).sum(1) == 1)
