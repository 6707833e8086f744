"""headwatch inside a ``transformers.Trainer`` run: train a tiny model, measure every checkpoint as
it is saved, then judge the run from the measurement cache with no model loaded.

    pip install 'headwatch[trainer]'                       # transformers.Trainer needs accelerate
    python docs/examples/trainer_run.py --out runs/trainer-example
    pytest claims --panel runs/trainer-example/headwatch-panel.toml --html=reports/trainer-example.html
    headwatch judge --panel runs/trainer-example/headwatch-panel.toml

The model is a 2-layer GPTNeoX (d_model 64, 4 heads) trained from random init on rows of a random
span tiled end to end (the model organisms' data, headwatch.fixtures.organisms.data). In 400 steps it
learns to copy short spans but forms no induction head yet, and the audit says so (the induction
claims are "not applicable", never passed: docs/training-loop.md). ``HeadwatchCallback`` saves and
measures step 0, measures each checkpoint the Trainer saves (every 50 steps), saves and measures the
last step (with the group ablations), prints each measurement's share of the time since the previous
save, and writes ``<out>/headwatch-panel.toml`` naming the checkpoints, their tokens and the probe
settings. The probe uses 500 examples, not SPEC's 2000: a quarter of the time, wider intervals
(every record's settings and intervals say so).
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import Dataset
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, Trainer, TrainingArguments

from headwatch.fixtures.organisms.data import DataSpec, tiled_span_rows
from headwatch.fixtures.trainer_callback import HeadwatchCallback
from headwatch.probes.record import ProbeSettings

DATA = DataSpec(seq_len=72, batch_size=32, vocab_lo=16, vocab_hi=512, span_lo=2, span_hi=48, span_dist="loguniform")
#: The organisms' probe (token ids and length inside what training covers), on 500 examples.
PROBE = ProbeSettings(n_examples=500, seq_len=68, vocab_lo=16, vocab_hi=512, n_pr=250, seed=42)


class TiledSpans(Dataset):
    """Row ``i`` of the organisms' data stream (rows are a pure function of (seed, index))."""

    def __init__(self, n_rows: int, seed: int = 0):
        self.n_rows, self.seed = n_rows, seed

    def __len__(self) -> int:
        return self.n_rows

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        row = tiled_span_rows(DataSpec(**{**DATA.__dict__, "batch_size": 1}), self.seed, i)[0]
        return {"input_ids": row, "labels": row}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/trainer-example", help="the Trainer's output_dir (default: %(default)s)")
    p.add_argument("--steps", type=int, default=400, help="optimizer steps (default: %(default)s)")
    p.add_argument("--save-steps", type=int, default=50, help="save (and measure) every N steps (default: %(default)s)")
    p.add_argument("--cache-dir", default=None, help="measurement cache (default: headwatch's, as --cache-dir)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    config = GPTNeoXConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=256, max_position_embeddings=128, rotary_pct=1.0,
                           hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=False)
    model = GPTNeoXForCausalLM(config)
    training = TrainingArguments(
        output_dir=args.out, max_steps=args.steps, per_device_train_batch_size=DATA.batch_size,
        learning_rate=3e-3, lr_scheduler_type="constant_with_warmup", warmup_steps=20, weight_decay=0.0,
        save_strategy="steps", save_steps=args.save_steps, logging_steps=50, report_to=[], use_cpu=True,
        seed=0, dataloader_num_workers=0, disable_tqdm=True)
    callback = HeadwatchCallback(
        "trainer-example", PROBE, cache_dir=args.cache_dir, tokens_per_step=DATA.batch_size * DATA.seq_len,
        expect={"dclm": False})
    t0 = time.perf_counter()
    Trainer(model=model, args=training, train_dataset=TiledSpans(args.steps * DATA.batch_size),
            callbacks=[callback]).train()
    print(f"trained and measured in {time.perf_counter() - t0:.0f} s; panel: {callback.panel_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
