"""The organisms as a seed population: train, measure, judge, and time each part.

    python benchmarks/organisms_population.py [--panel organisms-seeds] [--organisms-cache DIR]
                                              [--cache-dir DIR] [--parallel 2] [--json OUT.json] [--smoke]

Takes the population panel (default: the shipped ``organisms-seeds``: the OLMoE organism, seeds 0-4,
and the candidate trained at half its learning rate), trains the members the organism cache lacks
(``--parallel`` at a time, one thread each, on the pinned numeric path, as ``headwatch organisms
train --seed 0-4`` does), measures every checkpoint into the measurement cache (what the claim tests
read), then judges the population (claims/population.py) and prints its table: per claim k of n with
the exact interval, t_induction per seed, and the candidate's place among the seeds. Times: each
member's training (its own log: seconds in forward/backward/step), the measuring, the judging, with
the load average before and after (the machine is often shared). ``--json`` keeps every number.
``--smoke`` trains miniatures of the recipes instead (4 steps, a 32-example probe: the test
harness's ``headwatch_testing.tiny_organisms``), to check the benchmark runs, in seconds (give it a
small panel of organisms, and caches of its own).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

# Checkpoints load from the local Hub-format cache only.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from headwatch.claims.population import judge_population, population_table
from headwatch.model_organisms import TRAIN_THREADS, missing_jobs
from headwatch.model_organisms.runner import CHILD_MODULE, train_in_subprocesses
from headwatch.model_organisms.train import TrainLog, state_folder
from headwatch.fixtures.panels import load_panel, populations
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch.paths import default_cache_dir

ROOT = Path(__file__).resolve().parents[1]


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--panel", default="organisms-seeds", help="a panel whose members are organisms")
    p.add_argument("--organisms-cache", default=None,
                   help="organism cache (default: $HEADWATCH_ORGANISMS_CACHE, else the usual default)")
    p.add_argument("--cache-dir", default=None, help="measurement cache (default: headwatch's)")
    p.add_argument("--parallel", type=int, default=2, help="organisms trained at a time (one thread each)")
    p.add_argument("--json", default=None, help="write every number to this JSON file")
    p.add_argument("--smoke", action="store_true",
                   help="miniature recipes (4 steps, 32 probe examples): checks the benchmark runs, in seconds")
    args = p.parse_args(argv)
    child_module = CHILD_MODULE
    if args.smoke:
        sys.path.insert(0, str(ROOT / "testing"))  # the test harness: not installed
        from headwatch_testing.tiny_organisms import use_miniatures

        child_module = use_miniatures()

    organisms = Path(args.organisms_cache).expanduser() if args.organisms_cache else default_cache_dir("organisms")
    options = ProviderOptions(cache_dir=Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir(),
                              organisms_cache_dir=str(organisms), device="cpu", progress=False)
    panel = load_panel(args.panel)
    models = [dataclasses.replace(m, organism=dataclasses.replace(m.organism, cache_dir=str(organisms)))
              if m.organism else m for m in panel.models]
    out: dict = {"panel": panel.name, "organisms_cache": str(organisms), "members": {}}

    jobs = missing_jobs([(m.organism.family, m.organism.seed, organisms) for m in models if m.organism])
    before = load_average()
    t0 = time.perf_counter()
    if jobs:
        print(f"training {len(jobs)} organism(s), {args.parallel} at a time: {', '.join(j.name for j in jobs)}",
              flush=True)
        train_in_subprocesses(jobs, threads=TRAIN_THREADS, parallel=args.parallel, module=child_module)
    out["train_wall_seconds"] = round(time.perf_counter() - t0, 1)
    out["train_load"] = [before, load_average()]
    for m in models:
        if m.organism:
            log = TrainLog.load(state_folder(organisms, m.organism.family, m.organism.seed) / "log.json")
            out["members"][m.id] = {"repo": m.repo, "train_seconds": round(log.train_seconds, 1), "steps": log.step}

    provider = Provider(options)
    before = load_average()
    t0 = time.perf_counter()
    records = {}
    for m in models:
        t1 = time.perf_counter()
        records[m.id] = provider.model_records(m)
        out["members"].setdefault(m.id, {})["measure_seconds"] = round(time.perf_counter() - t1, 1)
    out["measure_seconds"] = round(time.perf_counter() - t0, 1)
    out["measure_load"] = [before, load_average()]

    t0 = time.perf_counter()
    reports = [judge_population(pop, records) for pop in populations(models)]
    out["judge_seconds"] = round(time.perf_counter() - t0, 2)
    out["populations"] = {r.name: r.to_dict() for r in reports}
    for r in reports:
        print(population_table(r))
    print(f"training {out['train_wall_seconds']:.0f} s wall (load {' -> '.join(out['train_load'])}); "
          f"measuring {out['measure_seconds']:.0f} s (load {' -> '.join(out['measure_load'])}); "
          f"judging {out['judge_seconds']:.2f} s")
    for mid, row in out["members"].items():
        print(f"  {mid}: training {row.get('train_seconds', '-')} s, measuring {row.get('measure_seconds', '-')} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
