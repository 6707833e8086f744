"""Benchmark: the probe's share of a training run's CPU time, per number of probe examples N.

    python benchmarks/trainloop_cost.py [--n 100 200 300 500 1000] [--steps 400] [--save-steps 50]
                                        [--threads 1] [--repeat 3] [--out DIR]

Runs the shipped example (docs/examples/trainer_run.py: a 2-layer GPTNeoX, d_model 64, trained
400 steps at batch 32 x 72 tokens, saved and measured every 50 steps, 9 measurements with the
ablations at the last) ``--repeat`` times per N, keeping the run of least CPU time (contention only
ever adds), each in a fresh process on ``--threads`` torch threads (default 1: CPU time then counts
work, not the spinning of idle threads on a shared machine), and as often without the probe. CPU
time is the process's (user + system, every thread: ``time.process_time``); the probe's is what
:class:`~headwatch.training.trainloop.TrainingProbe` counts around its measurements (weights hash,
checkpoint check, the probe run, writing the record). It prints a Markdown table: per N, the
probe's CPU seconds per checkpoint, the probe's and the whole run's CPU seconds, the probe's share
of the run's CPU time, the run's CPU time over the same run without the probe (everything headwatch
adds: also saving checkpoint-0 and the panel file), the probe's share of the wall time, and the load
average beside it (the shares are what to read; seconds on a loaded machine are inflated).
docs/training-loop.md holds the table; the training default (``trainloop.TRAINING_EXAMPLES``) is
chosen from it.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "trainer_run.py"


def _example():
    spec = importlib.util.spec_from_file_location("trainer_run_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_run(n: int, out: str, steps: int, save_steps: int, threads: int) -> dict:
    """The example at N probe examples (0: without the probe), in this process: its costs."""
    import torch

    torch.set_num_threads(threads)
    example = _example()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    callback = example.run(out, steps=steps, save_steps=save_steps, n_examples=n or None, measure=n > 0)
    probe = callback.probe if callback is not None else None
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    cost = probe.cost if probe is not None else None
    return {
        "n": n, "cpu": cpu, "wall": wall,
        "probe_cpu": cost.probe_cpu if cost else 0.0, "probe_wall": cost.probe_seconds if cost else 0.0,
        "measurements": cost.measurements if cost else 0, "load": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[100, 200, 300, 500, 1000], help="probe examples per checkpoint")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--save-steps", type=int, default=50)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3,
                   help="runs per N; the one of least CPU time is kept (contention only ever adds) (default: %(default)s)")
    p.add_argument("--out", default=None, help="where the runs go (default: a temporary folder, removed)")
    p.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # a child: one run, JSON on stdout
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = p.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one_run(args.one, args.out, args.steps, args.save_steps, args.threads)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out) if args.out else Path(tmp)
        runs: dict[int, list[dict]] = {n: [] for n in [0, *args.n]}
        for i in range(args.repeat):  # interleaved, so that a burst of load does not land on one N only
            for n in runs:
                out = root / f"n{n}-{i}"
                cmd = [sys.executable, __file__, "--one", str(n), "--out", str(out), "--steps", str(args.steps),
                       "--save-steps", str(args.save_steps), "--threads", str(args.threads)]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-4000:])
                    return proc.returncode
                runs[n].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(f"N = {n}, run {i + 1}: {runs[n][-1]['cpu']:.1f} s CPU ({runs[n][-1]['probe_cpu']:.1f} s probe), "
                      f"load {runs[n][-1]['load']:.1f}", file=sys.stderr, flush=True)
        rows = [min(rs, key=lambda r: r["cpu"]) for rs in runs.values()]
    base = rows[0]
    print(f"The example: {args.steps} steps, a save every {args.save_steps}; {args.threads} torch thread(s); "
          f"the least CPU of {args.repeat} run(s) per N. Without the probe: {base['cpu']:.1f} s CPU, "
          f"{base['wall']:.1f} s wall.\n")
    print("| N | probe CPU per checkpoint (s) | probe CPU (s) | run CPU (s) | probe share of CPU | "
          "run CPU over the run without probe | probe share of wall | load average |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows[1:]:
        per = r["probe_cpu"] / r["measurements"] if r["measurements"] else 0.0
        print(f"| {r['n']} | {per:.2f} | {r['probe_cpu']:.1f} | {r['cpu']:.1f} | {100 * r['probe_cpu'] / r['cpu']:.1f}% "
              f"| {100 * (r['cpu'] - base['cpu']) / base['cpu']:+.1f}% | {100 * r['probe_wall'] / r['wall']:.1f}% "
              f"| {r['load']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
