"""Benchmark: what the intervals and Sink_1^eps add to a probe run (run by hand; results in docs/benchmarks.md).

    python benchmarks/intervals_overhead.py [--repeats 3] [--threads 1] [--n-examples 2000] [--json OUT]

For each model, ``measure`` over the same N = 2000 batch (``--n-examples``) twice, alternating, ``--repeats`` times:
with the per-example statistics off (``n_bootstrap = 0``, ``sink_examples = 0``: the pass as before,
plus exact top-1 intervals, which cost microseconds) and on (SPEC's defaults: 1000 bootstrap
resamples over examples, Sink_1^eps on the first 64 examples). The minimum of each is reported,
with the overhead and the bootstrap's own seconds (``provenance.intervals_seconds``).

Models: a tiny GPTNeoX (2 layers x 4 heads, d_model 64, T = 256) and an organism-sized one (the
GPTNeoX organism recipe: 4 layers x 4 heads, d_model 128, T = 68, random init; ablations on, as at
a final revision). The bootstrap's cost grows with the number of heads, not with the model: it is
also timed alone on per-example arrays shaped like the paper's models (Pythia 1B: 16 x 8 heads,
OLMo 1B: 16 x 16), whose forward passes take minutes on a CPU and tens of seconds on a GPU.
``--n-examples 16 --repeats 1`` runs it all in seconds (a check that it runs; PR and Sink^eps then
take the whole batch).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from headwatch.model_organisms import ORGANISMS, PROBE
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testing"))  # the test harness: not installed
from headwatch_testing.tiny import tiny_model  # noqa: E402
from headwatch.probes.intervals import record_intervals  # noqa: E402
from headwatch.probes.measure import measure  # noqa: E402
from headwatch.probes.record import HEAD_CLASSES, ProbeSettings, TaskMetrics  # noqa: E402
from headwatch.spec import SPEC  # noqa: E402

OFF = {"n_bootstrap": 0, "sink_examples": 0}


def time_measure(model, settings: ProbeSettings) -> tuple[float, float]:
    t0 = time.perf_counter()
    rec = measure(model, settings, model_name="bench", revision="r", progress=False)
    return time.perf_counter() - t0, float(rec.provenance["intervals_seconds"])


def compare(name: str, model, settings: ProbeSettings, repeats: int) -> dict:
    off, on, boot = [], [], []
    for _ in range(repeats):
        off.append(time_measure(model, dataclasses.replace(settings, **OFF))[0])
        seconds, intervals = time_measure(model, settings)
        on.append(seconds)
        boot.append(intervals)
    row = {"model": name, "n_examples": settings.n_examples, "seq_len": settings.seq_len,
           "ablation": settings.ablation, "without_s": round(min(off), 3), "with_s": round(min(on), 3),
           "overhead_pct": round(100 * (min(on) / min(off) - 1), 1), "bootstrap_s": round(min(boot), 3)}
    print(json.dumps(row), flush=True)
    return row


def sized(settings: ProbeSettings, n: int) -> ProbeSettings:
    """``settings`` over ``n`` examples; PR and Sink^eps on at most the whole batch."""
    return dataclasses.replace(settings, n_examples=n, n_pr=min(settings.n_pr, n),
                               sink_examples=min(settings.sink_examples, n))


def bootstrap_alone(name: str, n_layers: int, n_heads: int, repeats: int, n: int) -> dict:
    rng = np.random.default_rng(0)
    values = rng.random((n, len(HEAD_CLASSES), n_layers, n_heads), dtype=np.float32)
    baseline = rng.random((n, n_layers, n_heads), dtype=np.float32) + 0.01
    task = TaskMetrics(1.0, 0.04, 0.08, 1.0, n=n, top1_count=round(0.04 * n))  # top-1 0.04, as above
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        record_intervals(values, baseline, np.ones(n, bool), task=task, ablations={"induction_circuit": task},
                         n_resamples=SPEC.n_bootstrap, seed=0, level=SPEC.interval_level,
                         induction_threshold=SPEC.induction, bos_threshold=SPEC.bos)
        times.append(time.perf_counter() - t0)
    row = {"model": name, "heads": n_layers * n_heads, "bootstrap_s": round(min(times), 3)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-examples", type=int, default=2000, help="examples N (default: SPEC's 2000)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    n = args.n_examples
    torch.set_num_threads(args.threads)
    rows = []
    tiny = tiny_model("gpt_neox", seed=0)
    rows.append(compare("tiny GPTNeoX (2 x 4 heads, d 64)", tiny,
                        sized(ProbeSettings(seq_len=256, vocab_lo=10, vocab_hi=300, ablation=False), n), args.repeats))
    organism = ORGANISMS["gptneox"].recipe.build_model(seed=0).eval()
    rows.append(compare("organism-sized GPTNeoX (4 x 4 heads, d 128)", organism, sized(PROBE, n), args.repeats))
    rows.append(bootstrap_alone("Pythia 1B shape (16 x 8 heads)", 16, 8, args.repeats, n))
    rows.append(bootstrap_alone("OLMo 1B shape (16 x 16 heads)", 16, 16, args.repeats, n))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "n_examples": n, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
