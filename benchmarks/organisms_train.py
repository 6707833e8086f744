"""Time each organism's training from scratch, then (optionally) probe every checkpoint.

    python benchmarks/organisms_train.py [--family all] [--seed 0] [--cache-dir DIR]
                                         [--probe] [--json OUT.json] [--smoke]

Trains into a fresh temporary cache unless --cache-dir is given (an existing complete organism there
is not retrained, and its recorded training time is reported instead). Prints one row per family:
training seconds, steps, seconds per step and the machine's load average before and after (the CPU
is often shared, which inflates the time). With --probe, every checkpoint is measured in the
training process as it is saved (headwatch.training.trainloop, as the suite's first run does), into
``--measure-dir`` (default: a folder beside the cache), the probe's seconds and share of the run are
printed, and a per-checkpoint trajectory: tokens seen, induction heads (selectivity >= 50), best
induction selectivity, top-1 on the target, BOS fraction and BOS heads in layers 0-1.
``--smoke`` trains miniatures of the recipes instead (4 steps, a 32-example probe: the test
harness's ``headwatch_testing.tiny_organisms``), to check the benchmark runs, in seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# Checkpoints load from the local Hub-format cache only.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from headwatch.hubcache import repo_folder
from headwatch.model_organisms import FAMILIES, ORGANISMS, TRAIN_THREADS, missing_jobs, runner
from headwatch.fixtures.panels import organism_panel_model
from headwatch.model_organisms.train import TrainLog, repo_id, state_folder
from headwatch.fixtures.provider import Provider, ProviderOptions

ROOT = Path(__file__).resolve().parents[1]


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def probe_trajectory(provider: Provider, family: str, seed: int, cache_dir: Path) -> list[dict]:
    """Every checkpoint's record (written in training; measured now where missing); one summary row each."""
    from headwatch.probes.selectivity import bos_fraction_of, bos_heads_of, circuit_of

    org = ORGANISMS[family]
    rows = []
    for rec in provider.model_records(organism_panel_model(family, seed, cache_dir)):
        rev = rec.revision
        final = rev == org.revisions()[-1]
        settings = rec.settings
        table = rec.all_head_selectivity
        ind = sorted(circuit_of(rec, settings.induction_threshold))
        bos = sorted(bos_heads_of(rec, settings.bos_threshold))
        best = max(table, key=lambda h: table[h]["induction"])
        row = {
            "revision": rev,
            "tokens_seen": rec.tokens_seen,
            "induction_heads": ind,
            "best_induction": [best, round(table[best]["induction"], 1)],
            "top1": rec.task.top1,
            "loss": round(rec.task.loss, 3),
            "bos_fraction": round(bos_fraction_of(rec, settings.bos_threshold), 4),
            "bos_heads": bos,
            "bos_heads_layers_0_1": [h for h in bos if h.startswith(("L0_", "L1_"))],
        }
        if final:
            row["ablations"] = {a.name: a.metrics.top1 for a in rec.ablations}
        rows.append(row)
        print(f"  {rev:>9} {rec.tokens_seen:>9,} tok  ind={len(ind)} {ind}  best={row['best_induction']}  "
              f"top1={rec.task.top1:.3f}  BOS={row['bos_fraction']:.3f} {bos}", flush=True)
    return rows


def time_steps(family: str, seed: int, n: int, threads: int) -> float:
    """Seconds per training step over ``n`` steps (after 5 warm-up steps), no checkpointing."""
    import torch

    from headwatch.model_organisms.data import tiled_span_rows

    torch.set_num_threads(threads)
    recipe = ORGANISMS[family].recipe
    model = recipe.build_model(seed)
    o = recipe.optim
    opt = torch.optim.AdamW(model.parameters(), lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)
    t0 = 0.0
    for step in range(n + 5):
        if step == 5:
            t0 = time.perf_counter()
        rows = tiled_span_rows(recipe.data, seed, step)
        loss = recipe.training_loss(model, rows)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return (time.perf_counter() - t0) / n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default="all", choices=[*FAMILIES, "all"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--threads", type=int, default=TRAIN_THREADS,
                   help="torch threads for --time-steps only; real training is always one thread on the pinned "
                        "numeric path (docs/numerics.md)")
    p.add_argument("--probe", action="store_true", help="measure every checkpoint in training (and print the trajectory)")
    p.add_argument("--measure-dir", default=None, help="measurement cache for --probe (default: <cache-dir>-measurements)")
    p.add_argument("--json", default=None, help="write all numbers to this JSON file")
    p.add_argument("--time-steps", type=int, default=0, metavar="N",
                   help="only time N training steps per family and extrapolate to the full run")
    p.add_argument("--smoke", action="store_true",
                   help="miniature recipes (4 steps, 32 probe examples): checks the benchmark runs, in seconds")
    args = p.parse_args(argv)
    child_module = runner.CHILD_MODULE
    if args.smoke:
        sys.path.insert(0, str(ROOT / "testing"))  # the test harness: not installed
        from headwatch_testing.tiny_organisms import use_miniatures

        child_module = use_miniatures()
    if args.time_steps:
        families = FAMILIES if args.family == "all" else (args.family,)
        print(f"{'family':8} {'ms/step':>8} {'steps':>6} {'est. s':>7} {'threads':>7}  load before -> after")
        for family in families:
            before = load_average()
            per = time_steps(family, args.seed, args.time_steps, args.threads)
            total = ORGANISMS[family].recipe.total_steps
            print(f"{family:8} {1000 * per:>8.0f} {total:>6} {per * total:>7.0f} {args.threads:>7}  {before} -> {load_average()}",
                  flush=True)
        return 0
    cache_dir = Path(args.cache_dir or tempfile.mkdtemp(prefix="headwatch-organisms-"))
    families = FAMILIES if args.family == "all" else (args.family,)
    provider = Provider(ProviderOptions(cache_dir=Path(args.measure_dir or f"{cache_dir}-measurements"), progress=False))
    results = {}
    for family in families:
        before = load_average()
        t0 = time.perf_counter()
        plan = provider.measure_plan(organism_panel_model(family, args.seed, cache_dir)) if args.probe else None
        key = (family, args.seed, cache_dir)
        runner.train_in_subprocesses(missing_jobs([key], measure={key: plan}), threads=TRAIN_THREADS, parallel=1,
                                     module=child_module)
        repo = repo_id(family, args.seed)
        wall = time.perf_counter() - t0
        log = TrainLog.load(state_folder(cache_dir, family, args.seed) / "log.json")
        results[family] = {
            "repo": repo, "steps": log.step, "train_seconds": round(log.train_seconds, 1),
            "probe_seconds": round(log.probe_seconds, 1),
            "wall_seconds_this_call": round(wall, 1), "threads": log.threads,
            "load_before": before, "load_after": load_average(),
            "checkpoints": log.checkpoints,
            "cache_mb": round(folder_mb(repo_folder(cache_dir, repo)), 1),
        }
        share = log.probe_seconds / (log.train_seconds + log.probe_seconds) if log.probe_seconds else 0.0
        print(f"{family}: {log.step} steps, {log.train_seconds:.0f} s training "
              f"({1000 * log.train_seconds / max(log.step, 1):.0f} ms/step), {log.probe_seconds:.0f} s measuring "
              f"{len(log.checkpoints)} checkpoints in training ({100 * share:.1f}%), load {before} -> {load_average()}",
              flush=True)
        if args.probe:
            results[family]["trajectory"] = probe_trajectory(provider, family, args.seed, cache_dir)
    print()
    print(f"{'family':8} {'steps':>6} {'train s':>8} {'ms/step':>8} {'probe s':>8} {'threads':>7} {'MB':>6}  "
          "load (1/5/15 min) before -> after")
    for family, r in results.items():
        print(f"{family:8} {r['steps']:>6} {r['train_seconds']:>8.0f} {1000 * r['train_seconds'] / max(r['steps'], 1):>8.0f} "
              f"{r['probe_seconds']:>8.0f} {r['threads']:>7} {r['cache_mb']:>6.1f}  {r['load_before']} -> {r['load_after']}")
    total = folder_mb(cache_dir)
    print(f"whole cache {cache_dir}: {total:.1f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps({"cache_mb": round(total, 1), "families": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
