"""headwatch inside a ``transformers.Trainer`` run: train a tiny model, measure every checkpoint as
it is saved, then judge the run from the records it keeps with no model loaded.

    pip install 'headwatch[trainer]'                       # transformers.Trainer needs accelerate
    python docs/examples/trainer_run.py --out runs/trainer-example
    pytest claims --panel runs/trainer-example/headwatch-panel.toml --html=reports/trainer-example.html
    headwatch judge --panel runs/trainer-example/headwatch-panel.toml

The model is a 2-layer GPTNeoX (d_model 64, 4 heads) trained from random init on rows of a random
span tiled end to end (the model organisms' data, headwatch.model_organisms.data). In 400 steps it
learns to copy short spans but forms no induction head yet, and the audit says so (the induction
claims are "not applicable", never passed: docs/training-loop.md). ``HeadwatchCallback`` saves and
measures step 0, measures each checkpoint the Trainer saves (every 50 steps), saves and measures the
last step (with the group ablations), logs each checkpoint's figures through the Trainer's log and
its cost (CPU and wall time against the training since the previous save) through ``logging``, and
writes ``<out>/headwatch-panel.toml`` naming the checkpoints, their tokens and the probe settings;
the records stay in ``<out>/.headwatch/``, so the folder can be moved or copied and judged as it is.
The probe uses the training default of examples (``trainloop.TRAINING_EXAMPLES``, not SPEC's 2000:
a tenth of the time, wider intervals; every record's settings and intervals say so); ``--n-examples``
sets another count. Stopped, it resumes with ``--resume`` (the panel keeps every revision, once).
"""
from __future__ import annotations

import argparse
import logging
import time

import torch
from torch.utils.data import Dataset
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, Trainer, TrainingArguments

from headwatch.model_organisms.data import DataSpec, tiled_span_rows
from headwatch.training.trainer_callback import HeadwatchCallback
from headwatch.probes.record import ProbeSettings

DATA = DataSpec(seq_len=72, batch_size=32, vocab_lo=16, vocab_hi=512, span_lo=2, span_hi=48, span_dist="loguniform")
#: The organisms' probe (token ids and length inside what training covers); the count is the training default.
PROBE = ProbeSettings(seq_len=68, vocab_lo=16, vocab_hi=512, seed=42)


class TiledSpans(Dataset):
    """Row ``i`` of the organisms' data stream (rows are a pure function of (seed, index))."""

    def __init__(self, n_rows: int, seed: int = 0):
        self.n_rows, self.seed = n_rows, seed

    def __len__(self) -> int:
        return self.n_rows

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        row = tiled_span_rows(DataSpec(**{**DATA.__dict__, "batch_size": 1}), self.seed, i)[0]
        return {"input_ids": row, "labels": row}


def run(out: str, *, steps: int = 400, save_steps: int = 50, n_examples: int | None = None,
        resume: bool = False, measure: bool = True) -> HeadwatchCallback | None:
    """Train and measure the example run into ``out``; the callback (its probe holds the costs).
    ``measure=False``: the same run without headwatch (what benchmarks/trainloop_cost.py compares with)."""
    torch.manual_seed(0)
    config = GPTNeoXConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=256, max_position_embeddings=128, rotary_pct=1.0,
                           hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=False)
    model = GPTNeoXForCausalLM(config)
    training = TrainingArguments(
        output_dir=out, max_steps=steps, per_device_train_batch_size=DATA.batch_size,
        learning_rate=3e-3, lr_scheduler_type="constant_with_warmup", warmup_steps=20, weight_decay=0.0,
        save_strategy="steps", save_steps=save_steps, logging_steps=50, report_to=[], use_cpu=True,
        seed=0, dataloader_num_workers=0, disable_tqdm=True)
    callback = HeadwatchCallback("trainer-example", PROBE, n_examples=n_examples,
                                 tokens_per_step=DATA.batch_size * DATA.seq_len, expect={"dclm": False})
    trainer = Trainer(model=model, args=training, train_dataset=TiledSpans(steps * DATA.batch_size),
                      callbacks=[callback] if measure else [])
    callback.bind(trainer)  # the figures go through trainer.log (report_to: TensorBoard, W&B, trackio)
    trainer.train(resume_from_checkpoint=True if resume else None)
    # a resumed run may hold a copy the Trainer restored (restore_callback_states_from_checkpoint)
    return next((c for c in trainer.callback_handler.callbacks if isinstance(c, HeadwatchCallback)), None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/trainer-example", help="the Trainer's output_dir (default: %(default)s)")
    p.add_argument("--steps", type=int, default=400, help="optimizer steps (default: %(default)s)")
    p.add_argument("--save-steps", type=int, default=50, help="save (and measure) every N steps (default: %(default)s)")
    p.add_argument("--n-examples", type=int, default=None, help="probe examples per checkpoint (default: the training default)")
    p.add_argument("--resume", action="store_true", help="resume from the latest checkpoint in --out")
    args = p.parse_args(argv)
    logging.basicConfig(format="%(message)s")
    logging.getLogger("headwatch").setLevel(logging.INFO)  # headwatch's lines go through logging
    t0 = time.perf_counter()
    callback = run(args.out, steps=args.steps, save_steps=args.save_steps, n_examples=args.n_examples,
                   resume=args.resume)
    print(f"trained and measured in {time.perf_counter() - t0:.0f} s; panel: {callback.panel_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
