"""Benchmark: one full-size random-init checkpoint of each paper model, probed the way the suite does.

    python benchmarks/full_size.py                                   # CPU, N = 8, T = 256
    python benchmarks/full_size.py --device cuda --n-examples 2000 --batch-size 64 --json out.json   # GPU
    python benchmarks/full_size.py --miniature --n-examples 2 --seq-len 64 --folder DIR   # seconds: a check

The architecture is exact (the published configs, ``fixtures/realconfigs.py``), the weights are
random (no machine here reaches the Hub). Per model, each step in its own process so that its
peak memory is its own:

1. build (cached in ``--folder``, default ``.cache/full-size`` in a checkout: ``headwatch.paths``):
   a random-init checkpoint in the stored dtype (Pythia float16, OLMo float32, OLMoE bfloat16),
   written one layer at a time (``testing/headwatch_testing/random_checkpoint.py``); ``--in-memory`` skips the
   checkpoint and builds the float32 model on the device instead (no load, no hash: for a GPU
   lease short of time);
2. load through ``headwatch.fixtures.loading.load_checkpoint``: memory plan (OLMoE in less than
   ~28 GB of memory runs as bfloat16 weights computed in float32 layer by layer),
   ``from_pretrained``, weights hash, move to the device;
3. ``headwatch.probes.measure.measure`` over N examples of length T in float32: the screen pass
   (selectivity, PR, task metrics). Random weights form no induction circuit, so no ablation pass
   runs; at a checkpoint with a circuit add three plain forward passes (about 3x the screen);
4. FLOPs: one 2-example ``measure`` under torch's ``FlopCounterMode`` (with two ops torch does not
   count added: CPU SDPA, with torch's own SDPA formula, and ``_grouped_mm``, transformers' default
   experts kernel), scaled to N; against the FLOP floor 2 x active non-embedding parameters x N x T
   (``headwatch.probes.architectures.parameter_counts``), and the floor's time at the fp32 matmul
   rate this machine reaches right now (a GEMM timed in the same process).

``--miniature`` runs the same path on the miniatures of the same configs (``testing/headwatch_testing/tiny.py``:
two layers, the published flags; built in ``--folder``/NAME/random-init-miniature): seconds, to
check that the benchmark runs.

Prints a markdown table; ``--json`` writes every number.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from headwatch.fixtures.realconfigs import PAPER_MODELS, REAL_MODELS, real_config
from headwatch.names import did_you_mean, split_list
from headwatch.paths import default_cache_dir

MODELS = tuple(REAL_MODELS)


def _peak_rss_mib() -> int:
    """Peak resident set (ru_maxrss): anonymous memory plus mapped file pages (safetensors are mmapped)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _rss_split_mib() -> dict[str, int]:
    """Resident now, split into anonymous memory and mapped (reclaimable) file pages (Linux)."""
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                out[key.lower() + "_mib"] = round(int(value.split()[0]) / 1024)
    except OSError:
        pass
    return out


def gemm_rate(device: str, size: int = 2048, seconds: float = 2.0) -> float:
    """fp32 matmul FLOP/s this process reaches now on ``device`` (square GEMMs for ~``seconds``)."""
    import torch

    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    (a @ b).sum().item()  # warm up
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        c = a @ b
        n += 1
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    c.sum().item()
    return 2 * size**3 * n / (time.perf_counter() - start)


def count_flops(model, settings) -> float:
    """FLOPs of ``measure`` on ``settings`` (CPU SDPA added to torch's flop registry)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

    from headwatch.probes.measure import measure

    def cpu_sdpa_flops(query_shape, key_shape, value_shape, *_args, out_shape=None, **_kwargs) -> int:
        return sdpa_flop_count(query_shape, key_shape, value_shape)  # torch's formula (full T x T)

    def grouped_mm_flops(a_shape, b_shape, *_args, out_shape=None, **_kwargs) -> int:
        """transformers' experts (``grouped_mm``): tokens [M, K] x experts [G, K, N] -> 2 M K N."""
        if len(a_shape) == 2 and len(b_shape) == 3:
            return 2 * a_shape[0] * a_shape[1] * b_shape[2]
        if len(a_shape) == 3 and len(b_shape) == 3:
            return 2 * a_shape[0] * a_shape[1] * a_shape[2] * b_shape[2]
        return 2 * a_shape[0] * a_shape[-1] * b_shape[-1]

    custom = {}
    for op_name, formula in (("_scaled_dot_product_flash_attention_for_cpu", cpu_sdpa_flops),
                             ("_grouped_mm", grouped_mm_flops)):
        op = getattr(torch.ops.aten, op_name, None)
        if op is not None:  # not in torch's flop registry (torch 2.13)
            custom[op] = formula
    with FlopCounterMode(display=False, custom_mapping=custom) as counter:
        measure(model, settings, model_name="flops", revision="r", progress=False)
    return float(counter.get_total_flops())


# ---- children -------------------------------------------------------------------------------------


def model_config(name: str, miniature: bool):
    """The published config of ``name``, or its miniature (``--miniature``: sizes shrunk, flags kept)."""
    if miniature:
        from headwatch_testing.tiny import miniature_config

        return miniature_config(name)
    return real_config(name)


def checkpoint_folder(args, name: str) -> Path:
    """Where ``name``'s random checkpoint is built (a miniature's beside, never over, the full-size one)."""
    return args.folder / name / ("random-init-miniature" if args.miniature else "random-init")


def child_build(name: str, folder: Path, miniature: bool) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testing"))  # the test harness: not installed
    from headwatch_testing.random_checkpoint import write_random_checkpoint

    info = write_random_checkpoint(model_config(name, miniature), folder, seed=0,
                                   progress=lambda msg: print(f"  {name}: {msg}", file=sys.stderr, flush=True))
    return {"build_seconds": round(info.seconds, 1), "checkpoint_bytes": info.n_bytes,
            "build_peak_rss_mib": _peak_rss_mib()}


def child_measure(name: str, folder: Path | None, args) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from headwatch.fixtures import loading
    from headwatch.probes.architectures import parameter_counts
    from headwatch.probes.measure import measure
    from headwatch.probes.record import ProbeSettings

    device = loading.pick_device(args.device)
    out: dict = {"model": name, "device": device, "threads": torch.get_num_threads(),
                 "load_average": os.getloadavg()[0], "n_examples": args.n_examples, "seq_len": args.seq_len,
                 "batch_size": args.batch_size}
    if device.startswith("cuda"):
        out["gpu"] = torch.cuda.get_device_name(device)
    out["gemm_flops_per_s"] = gemm_rate(device, size=8192 if device.startswith("cuda") else 2048,
                                        seconds=0.2 if args.miniature else 2.0)
    t0 = time.perf_counter()
    if folder is None:  # --in-memory: random float32 model built on the device
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(model_config(name, args.miniature), dtype=torch.float32,
                                                     attn_implementation="sdpa").eval()
        out.update(load_seconds=round(time.perf_counter() - t0, 1), memory_plan="in memory (float32 on the device)")
    else:
        resolved = loading.resolve_local(folder.parent, folder.name)
        loaded = loading.load_checkpoint(resolved, dtype="float32", device=device, attn_implementation="sdpa")
        model = loaded.model
        out.update(load_seconds=round(loaded.load_seconds, 1),
                   memory_plan=loaded.plan.mode if loaded.plan is not None else "unchecked",
                   memory_plan_need_gib=round(loaded.plan.need_bytes / (1 << 30), 1) if loaded.plan else None)
    out["rss_after_load_mib"] = _peak_rss_mib()
    out.update({f"after_load_{k}": v for k, v in _rss_split_mib().items()})
    settings = ProbeSettings(n_examples=args.n_examples, seq_len=args.seq_len, n_pr=min(500, args.n_examples),
                             batch_size=args.batch_size)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    record = measure(model, settings, model_name=name, revision="random-init", progress=args.progress)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        out["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated(device) / (1 << 20))
    measure_seconds = time.perf_counter() - t0  # unrounded for the rates: a miniature's pass rounds to 0.0
    out["measure_seconds"] = round(measure_seconds, 1)
    out["n_ablation_passes"] = len(record.ablations)
    counts = parameter_counts(model)
    small = ProbeSettings(n_examples=2, seq_len=args.seq_len, n_pr=2, batch_size=2)
    counted = count_flops(model, small) * args.n_examples / 2
    floor = counts.probe_pass_floor(args.n_examples, args.seq_len)
    out.update(
        params_total=counts.total, params_active_non_embedding=counts.active_non_embedding,
        flops_counted=counted, flops_floor=floor, counted_over_floor=round(counted / floor, 3),
        achieved_flops_per_s=counted / measure_seconds,
        floor_seconds_at_gemm_rate=round(floor / out["gemm_flops_per_s"], 1),
        measure_over_floor_time=round(measure_seconds / (floor / out["gemm_flops_per_s"]), 2),
        peak_rss_mib=_peak_rss_mib(),
        **{f"after_measure_{k}": v for k, v in _rss_split_mib().items()},
    )
    return out


# ---- driver ------------------------------------------------------------------------------------------


def run_child(kind: str, name: str, args, folder: Path | None) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--models", name, "--device", args.device,
           "--n-examples", str(args.n_examples), "--seq-len", str(args.seq_len),
           "--batch-size", str(args.batch_size), "--folder", str(args.folder)]
    if args.in_memory:
        cmd.append("--in-memory")
    if args.miniature:
        cmd.append("--miniature")
    if args.progress:
        cmd.append("--progress")
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "TQDM_DISABLE": "" if args.progress else "1"})
    if out.returncode != 0:
        raise SystemExit(f"{kind} of {name} failed (exit {out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    lines = ["| model | device | plan | N x T | load s | measure s | peak memory MiB: RSS (anon after load) or GPU | FLOPs counted | FLOP floor | counted/floor | floor s at GEMM rate | measure/floor time |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        mem = r.get("peak_gpu_mib", r["peak_rss_mib"])
        anon = r.get("after_load_rssanon_mib")
        lines.append(
            f"| {r['model']} | {r.get('gpu', r['device'])} ({r['threads']} thr) | {r['memory_plan']} | {r['n_examples']} x {r['seq_len']} "
            f"| {r['load_seconds']} | {r['measure_seconds']} | {mem}{f' ({anon})' if anon is not None else ''} | {r['flops_counted']:.3g} "
            f"| {r['flops_floor']:.3g} | {r['counted_over_floor']} | {r['floor_seconds_at_gemm_rate']} "
            f"| {r['measure_over_floor_time']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(PAPER_MODELS),
                        help=f"comma list of {', '.join(MODELS)} (default: the paper's three)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--n-examples", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--folder", type=Path, default=default_cache_dir("full-size"),
                        help="where the random checkpoints are built and kept (default: %(default)s)")
    parser.add_argument("--in-memory", action="store_true", help="no checkpoint: build float32 on the device")
    parser.add_argument("--miniature", action="store_true",
                        help="the miniatures of the same configs (two layers, published flags): seconds, a check")
    parser.add_argument("--clean", action="store_true", help="delete each checkpoint after measuring it")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--json", type=Path, help="also write every number here")
    parser.add_argument("--child", choices=["build", "measure"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = split_list(args.models)
    for name in names:
        if name not in MODELS:
            parser.error(f"unknown model {name!r}{did_you_mean(name, MODELS)}; known: {', '.join(MODELS)}")
    if args.child:
        (name,) = names
        folder = checkpoint_folder(args, name)
        result = child_build(name, folder, args.miniature) if args.child == "build" else \
            child_measure(name, None if args.in_memory else folder, args)
        print(json.dumps(result))
        return
    rows = []
    for name in names:
        folder = checkpoint_folder(args, name)
        built = {}
        if not args.in_memory and not folder.exists():
            print(f"{name}: building the random checkpoint in {folder} ...", file=sys.stderr, flush=True)
            built = run_child("build", name, args, folder)
        print(f"{name}: loading and measuring on {args.device} ...", file=sys.stderr, flush=True)
        row = {**run_child("measure", name, args, folder), **built}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        if args.clean and folder.exists():
            shutil.rmtree(folder)  # the checkpoint this tool builds, not the folder around it (the user's)
            with contextlib.suppress(OSError):
                folder.parent.rmdir()  # only when nothing else is in it
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv[1:], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
