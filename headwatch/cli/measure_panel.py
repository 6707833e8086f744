"""``headwatch measure-panel``: measure what a panel still lacks, as parallel tasks, into the cache.

    headwatch measure-panel --panel paper --executor ray --address auto --evict
    headwatch measure-panel --panel paper --executor slurm --workers 8 --slurm-partition gpu \\
        --slurm-setup 'source /shared/venv/bin/activate' --cache-dir /shared/hw --hub-cache-dir /local/hf --evict
    headwatch measure-panel --panel organisms --train --executor local --workers 2

One task per (model, revision) whose measurement is not in the cache (``headwatch.fanout.tasks``);
each resolves, downloads, measures, writes its cache entry and, with ``--evict``, deletes its
checkpoint. The claims then run from the cache with no model loaded: ``pytest claims --panel P``,
``headwatch judge --panel P``, ``headwatch report --panel P`` (the same :mod:`headwatch.selection`
options, the same ``--cache-dir``). A rerun measures only what is still missing. Exit codes:
:data:`headwatch.cli.EXIT_CODES`. Executors: ``headwatch.fanout.executors``; the cluster recipes:
docs/scale-out.md.
"""
from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
from pathlib import Path

from headwatch import selection, validation
from headwatch.files import check_folder, check_output_dir
from headwatch.fixtures.estimate import estimate
from headwatch.fanout.executors import ExecutorError, LocalPool, RayExecutor, SlurmArray, visible_gpus
from headwatch.fanout.tasks import plan_panel
from headwatch.fixtures.loading import LoadingError
from headwatch.formatting import terminal_text
from headwatch.names import duration
from headwatch.probes.record import write_json_atomic
from headwatch.validation import InputError, argtype

log = logging.getLogger("headwatch.measure_panel")

EXAMPLES = """examples:
  headwatch measure-panel --panel paper --dry-run                        what is cached, what would run (nothing runs)
  headwatch measure-panel --panel paper --executor ray --address auto --cache-dir /shared/hw --evict
  headwatch measure-panel --panel paper --executor slurm --workers 8 --slurm-partition gpu \\
      --slurm-setup 'source /shared/venv/bin/activate' --cache-dir /shared/hw --evict
  headwatch measure-panel --panel organisms --train --workers 2          train the organisms first, then measure
"""

EXECUTORS = ("local", "ray", "slurm", "submitit-local")


def add_arguments(p: argparse.ArgumentParser) -> None:
    selection.add_options(p.add_argument, ("panel", "models", "revisions", "seeds"))
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: a process pool here; ray: a Ray cluster (--address, else a local one); slurm: one "
                        "Slurm array job through submitit; submitit-local: the Slurm jobs run here by submitit's "
                        "local executor (to try the Slurm path without a cluster)")
    p.add_argument("--workers", type=argtype(validation.POSITIVE_INT, "--workers"), default=None, metavar="N",
                   help="tasks at a time: pool processes (default: one per GPU, else 1), a local Ray cluster's "
                        "CPUs and Ray's tasks in flight (default: all the cluster fits), the Slurm array's "
                        "%%N (default: no limit)")
    p.add_argument("--address", default=None,
                   help="Ray: the cluster to join ('auto', or host:port of `ray start --head`); default: start a "
                        "local cluster on 127.0.0.1 for this run")
    p.add_argument("--evict", action="store_true",
                   help="delete each Hub checkpoint from the Hub cache once measured (disk bounded by the tasks "
                        "in flight; organisms and local folders are never deleted)")
    selection.add_options(p.add_argument, ("hub_cache_dir", "cache_dir", "organisms_cache_dir", "device", "dtype",
                                           "n_examples") + selection.MISSING_OPTIONS)
    p.add_argument("--cpus-per-task", type=argtype(validation.POSITIVE_INT, "--cpus-per-task"), default=None, metavar="N",
                   help="CPUs (torch threads) per task on Ray and Slurm (default: 1 on Ray, 4 on Slurm, this "
                        "machine's cores / --workers for submitit-local)")
    p.add_argument("--gpus-per-task", type=argtype(validation.integer(0), "--gpus-per-task"), default=None, metavar="N",
                   help="GPUs per task on Ray and Slurm (default: Ray 1 if the cluster has GPUs and --device is "
                        "not cpu, else 0; Slurm 1, 0 with --device cpu)")
    p.add_argument("--retries", type=argtype(validation.integer(0), "--retries"), default=2, metavar="N",
                   help="run a task again this many times when its worker dies (killed, out of memory, node lost)")
    p.add_argument("--log-dir", default=None, metavar="DIR",
                   help="the run's summary.json and submitit's per-task logs (default: <cache-dir>/fanout/<time>-<executor>)")
    p.add_argument("--slurm-partition", default=None, help="Slurm partition (default: the cluster's)")
    p.add_argument("--slurm-time-min", type=argtype(validation.POSITIVE_INT, "--slurm-time-min"), default=120, help="time limit of one array task, minutes")
    p.add_argument("--slurm-mem-gb", type=float, default=None, help="memory of one array task, GB (default: the cluster's)")
    p.add_argument("--slurm-setup", action="append", default=[], metavar="LINE",
                   help="shell line run before each task (repeatable), e.g. 'source /shared/venv/bin/activate'")
    p.add_argument("--slurm-option", action="append", default=[], metavar="KEY=VALUE",
                   help="another sbatch option (repeatable), e.g. account=myproj or qos=low")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (what is cached, what would run, organisms --train would train first) and stop: "
                        "nothing is trained, downloaded or measured")


def _slurm_options(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--slurm-option {pair!r} is not KEY=VALUE (e.g. account=myproj)")
        out[key.strip().replace("-", "_")] = value.strip()
    return out


def build_executor(args: argparse.Namespace, log_dir: Path):
    """The executor the arguments ask for (nothing is started yet)."""
    if args.executor == "local":
        workers = args.workers or (max(1, len(visible_gpus())) if args.device != "cpu" else 1)
        return LocalPool(workers=workers, retries=args.retries)
    if args.executor == "ray":
        return RayExecutor(address=args.address, workers=args.workers, cpus_per_task=float(args.cpus_per_task or 1),
                           gpus_per_task=args.gpus_per_task, retries=args.retries)
    gpus = args.gpus_per_task if args.gpus_per_task is not None else (0 if args.device == "cpu" else 1)
    local = args.executor == "submitit-local"
    # Slurm: 4 CPUs a task; this machine: its cores shared by the tasks at a time
    cpus = args.cpus_per_task or (max(1, (os.cpu_count() or 1) // (args.workers or 1)) if local else 4)
    return SlurmArray(folder=log_dir / "submitit", workers=args.workers, partition=args.slurm_partition,
                      time_min=args.slurm_time_min, mem_gb=args.slurm_mem_gb, cpus_per_task=cpus,
                      gpus_per_task=gpus, setup=list(args.slurm_setup), extra=_slurm_options(args.slurm_option),
                      retries=args.retries, local=local,
                      name=args.executor)


def run(args: argparse.Namespace) -> int:
    if args.address and args.executor != "ray":
        raise InputError(f"--address is for --executor ray, not {args.executor}")
    _slurm_options(args.slurm_option)  # checked before anything starts; build_executor reads them
    if args.log_dir:  # written after the tasks: a file there must fail now, not after hours of work
        check_folder(args.log_dir, "--log-dir")
    picked = selection.select(selection.choices_from_args(args), progress=False, resolve=False)
    picked.check_measuring()
    models = picked.resolve()
    options, cache_dir, panels = picked.options, picked.options.cache_dir, picked.panels

    t0 = time.perf_counter()
    trained: list[str] = []
    if not args.dry_run:  # the training step first (--train), or the refusal naming its command
        try:
            trained = selection.ensure_organisms(picked, train=picked.choices.train, say=log.info).missing
        except Exception as e:
            if not selection.training_failed(e):
                raise
            print(terminal_text(f"headwatch measure-panel: training the organisms failed: {e}", newlines=True),
                  file=sys.stderr)
            return 1
    try:
        plan = plan_panel(models, options, evict=args.evict)
    except LoadingError as e:
        raise InputError(f"{e} (nothing was started)") from None
    plan.trained = trained
    print(terminal_text(f"panel {', '.join(p.name for p in panels)}, cache {options.measurement_dir}: {plan.describe()}"))
    if plan.tasks:  # what the tasks will download and take, before any starts (fixtures/estimate.py)
        by_model: dict = {}  # model id -> (panel model, its revisions to measure)
        for t in plan.tasks:
            by_model.setdefault(t.model.id, (t.model, []))[1].append(t.revision)
        print(estimate(by_model.values(), n_examples=args.n_examples).describe("the tasks to run"))
    if args.dry_run or not plan.tasks:
        if plan.untrained:  # a dry run: the training step would come first
            command = selection.training_command(picked, selection.organism_models(picked, plan.untrained))
            print(f"the organisms would train first ({shlex.join(command)}, or this command with --train)")
        elif not plan.tasks:
            print("nothing to measure: the claims can run from the cache")
        return 0

    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_dir = Path(args.log_dir).expanduser() if args.log_dir else cache_dir / "fanout" / f"{stamp}-{args.executor}"
    check_output_dir(log_dir, "--log-dir")  # made now and proven writable, before any task runs
    executor = build_executor(args, log_dir)
    print(f"running {len(plan.tasks)} task(s) on {executor.name}"
          + (f", {args.workers} at a time" if args.workers else "") + f"; logs and summary in {log_dir}", flush=True)
    done = 0

    def report(r) -> None:
        nonlocal done
        done += 1
        what = (f"{r.status} in {r.seconds:.1f} s (measuring {r.measure_seconds:.1f} s)" if r.ok
                else f"FAILED: {r.error}")
        left = (time.perf_counter() - started) / done * (len(plan.tasks) - done)  # at this pace
        print(terminal_text(f"[{done}/{len(plan.tasks)}] {r.label}: {what}"
                            + (f" (attempt {r.attempt}: retried {r.attempt - 1} time(s))" if r.attempt > 1 else "")
                            + (f" on {r.host} pid {r.pid}" if r.pid else "")
                            + (f", evicted {r.evicted_bytes / 2**20:.0f} MiB" if r.evicted_bytes else "")
                            + (f"; about {duration(left)} left" if done < len(plan.tasks) else "")), flush=True)

    started = time.perf_counter()
    try:
        results = executor.run(plan.tasks, report)
    except ExecutorError as e:
        raise InputError(str(e)) from None
    wall = time.perf_counter() - t0
    failed = [r for r in results if not r.ok]
    write_json_atomic(log_dir / "summary.json", {
        "panels": [p.name for p in panels], "executor": args.executor, "workers": args.workers,
        "cache_dir": str(cache_dir), "wall_seconds": round(wall, 3), "cached_before": plan.cached,
        "trained_first": plan.trained, "results": [r.to_dict() for r in results],
    })
    measured = sum(r.status == "computed" for r in results)
    print(f"done in {wall:.0f} s: {measured} measured, {len(results) - measured - len(failed)} found in the cache "
          f"meanwhile, {len(failed)} failed, {len(plan.cached)} cached before; summary {log_dir / 'summary.json'}")
    if failed:
        print(f"{len(failed)} task(s) failed (rerun the same command to retry them; the rest is kept):", file=sys.stderr)
        for r in failed:
            print(terminal_text(f"  {r.label}: {r.error}"), file=sys.stderr)
        return 1
    return 0


__all__ = ["add_arguments", "run", "build_executor", "EXECUTORS"]
