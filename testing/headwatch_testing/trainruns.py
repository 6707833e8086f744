"""Tiny training runs measured while they train, as separate processes (tests/test_trainloop.py).

``python -m headwatch_testing.trainruns KIND --out DIR [...]`` trains a two-layer GPTNeoX of 64
tokens for a few steps and measures its checkpoints with headwatch:

- ``trainer``: a ``transformers.Trainer`` run with :class:`HeadwatchCallback` (dropout on, AdamW),
  saving every ``--save-steps``; ``--resume`` resumes from the latest checkpoint;
- ``loop``: a hand-written loop (plain SGD, so a checkpoint's weights are its whole state) that
  saves ``DIR/step<N>/`` and measures it, and resumes from the latest saved step;
- ``ddp``: one rank of a two-process gloo DistributedDataParallel loop (``--rank``, ``--world``,
  ``--init`` a file for the rendezvous): every rank calls the probe, rank 0 saves.

``--kill-at N`` sends the process SIGKILL at step N's save: after the probe measured it, or
before (``--kill-before-measure``), as a scheduler or an out-of-memory killer would stop a run.
Each run writes what it did as JSON to ``DIR/<kind>-<rank or 'run'>-<pid>.json``. A run that is not
killed may also be called in a test's own process (:func:`main`), as a resumed run is.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import torch

from headwatch.probes.record import ProbeSettings

#: A probe a 64-token tiny model answers in well under a second.
PROBE = ProbeSettings(n_examples=32, seq_len=64, vocab_lo=4, vocab_hi=64, n_pr=16, batch_size=16, n_bootstrap=50)
#: Tokens per optimizer step: 4 rows of 24.
TOKENS_PER_STEP = 96


def tiny_model(dropout: float = 0.1):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    return GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                            intermediate_size=64, max_position_embeddings=128, hidden_dropout=dropout,
                                            attention_dropout=dropout))


def rows_at(step: int, n: int = 4) -> torch.Tensor:
    """The training batch of ``step``: a pure function of the step, so a resumed loop sees the same data."""
    return torch.randint(4, 64, (n, 24), generator=torch.Generator().manual_seed(1000 + step))


@contextlib.contextmanager
def _log_lines() -> Iterator[list[str]]:
    """The lines headwatch's probe logs within the block, as a list that grows."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("headwatch.trainloop")
    handler, level = Collect(), logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _write(out: Path, name: str, what: dict) -> None:
    (out / f"{name}-{os.getpid()}.json").write_text(json.dumps(what, indent=1))


def trainer(args) -> None:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from headwatch.training.trainer_callback import HeadwatchCallback

    class KillAt(TrainerCallback):
        def on_save(self, a, state, control, **kwargs):
            if state.global_step == args.kill_at:
                _kill()

    callback = HeadwatchCallback("resumed-run", PROBE, tokens_per_step=TOKENS_PER_STEP, every_n_steps=args.every_n_steps)
    callbacks = [KillAt(), callback] if args.kill_before_measure else [callback, KillAt()]
    g = torch.Generator().manual_seed(1)
    data = [{"input_ids": (r := torch.randint(4, 64, (24,), generator=g)), "labels": r} for _ in range(64)]
    training = TrainingArguments(
        output_dir=str(args.out), max_steps=args.steps, per_device_train_batch_size=4, learning_rate=1e-2,
        save_strategy="steps", save_steps=args.save_steps, logging_strategy="no", report_to=[], use_cpu=True,
        seed=3, data_seed=4, dataloader_num_workers=0, disable_tqdm=True,
        restore_callback_states_from_checkpoint=args.restore_states)
    run = Trainer(model=tiny_model(), args=training, train_dataset=data, callbacks=callbacks)
    callback.bind(run)
    with _log_lines() as lines:  # through logging: a copy the Trainer restores reports there too
        run.train(resume_from_checkpoint=True if args.resume else None)
    live = next(c for c in run.callback_handler.callbacks if isinstance(c, HeadwatchCallback))
    _write(args.out, "trainer-run", {"lines": lines, "measured": sorted(live.probe.measured),
                                     "kept": sorted(r for r, m in live.probe.measured.items() if m.kept),
                                     "restored_copy": live is not callback,
                                     "log_history": run.state.log_history})


def loop(args) -> None:
    from transformers import GPTNeoXForCausalLM

    from headwatch.training.trainloop import TrainingProbe

    lines: list[str] = []
    saved = sorted((int(p.name.removeprefix("step")) for p in args.out.glob("step*") if (p / "config.json").is_file()))
    start = saved[-1] if saved else 0
    model = GPTNeoXForCausalLM.from_pretrained(args.out / f"step{start}") if saved else tiny_model(dropout=0.0)
    model.train()
    probe = TrainingProbe.for_run("loop-run", args.out, PROBE, report=lines.append)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)  # no state beyond the weights
    for step in range(start, args.steps + 1):
        if step % args.save_steps == 0:
            if not (args.out / f"step{step}").is_dir():
                model.save_pretrained(args.out / f"step{step}")
            if step == args.kill_at and args.kill_before_measure:
                _kill()
            probe.measure(model, f"step{step}", tokens_seen=step * TOKENS_PER_STEP, final=step == args.steps)
            probe.write_panel()
            if step == args.kill_at:
                _kill()
        if step == args.steps:
            break
        rows = rows_at(step)
        loss = model(input_ids=rows, labels=rows).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _write(args.out, "loop-run", {"lines": lines, "measured": sorted(probe.measured),
                                  "kept": sorted(r for r, m in probe.measured.items() if m.kept)})


def ddp(args) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from headwatch.fixtures import loading
    from headwatch.training.trainloop import TrainingProbe

    dist.init_process_group("gloo", init_method=f"file://{args.init}", rank=args.rank, world_size=args.world)
    if args.rank != 0:  # a rank that is not 0 must not read a checkpoint rank 0 may be writing
        def refuse(*a, **k):
            raise AssertionError(f"rank {args.rank} read a checkpoint")

        loading.resolve_local = refuse
        loading.files_hash = refuse
    lines: list[str] = []
    model = tiny_model(dropout=0.0)
    wrapped = DistributedDataParallel(model)
    probe = TrainingProbe.for_run("ddp-run", args.out, PROBE, report=lines.append)
    opt = torch.optim.AdamW(wrapped.parameters(), lr=1e-2)
    measured = []
    for step in range(args.steps + 1):
        if step % args.save_steps == 0:
            if args.rank == 0:
                model.save_pretrained(args.out / f"step{step}")
            done = probe.measure(wrapped, f"step{step}", tokens_seen=step * TOKENS_PER_STEP * args.world,
                                 final=step == args.steps)
            if done is not None:
                measured.append(done.revision)
                probe.write_panel()
        if step == args.steps:
            break
        rows = rows_at(step * args.world + args.rank)
        loss = wrapped(input_ids=rows, labels=rows).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    from headwatch.fixtures.loading import weights_hash

    _write(args.out, f"ddp-{args.rank}", {"lines": lines, "measured": measured, "weights": weights_hash(model)})
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=["trainer", "loop", "ddp"])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--save-steps", type=int, default=2)
    p.add_argument("--kill-at", type=int, default=None)
    p.add_argument("--kill-before-measure", action="store_true")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--restore-states", action="store_true")
    p.add_argument("--every-n-steps", type=int, default=None)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--init", default="")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # as the test processes run (tests/conftest.py)
    args.out.mkdir(parents=True, exist_ok=True)
    {"trainer": trainer, "loop": loop, "ddp": ddp}[args.kind](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
