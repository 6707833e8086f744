"""Benchmark: one panel of tiny checkpoints measured sequentially and fanned out (run by hand; results
go in docs/scale-out.md and a headline in README).

    python benchmarks/fanout.py [--n 24] [--workers 2] [--ways seq,seq1,local,ray,submitit] [--json OUT]

Builds ``n`` random-init GPTNeoX checkpoints (4 layers x 8 heads, d_model 128) as branches of one repo
in a Hub-format cache, and a panel probing each with 128 examples of length 128; then measures the
whole panel into a fresh cache once per way, each in its own process tree:

- ``seq``: the local sequential path (``Provider.model_records``, what ``pytest claims`` does
  without xdist), torch's default threads; ``seq1``: the same with one thread;
- ``local``, ``ray``, ``submitit``: ``headwatch measure-panel --executor local | ray | submitit-local
  --workers W`` (one torch thread per task; Ray starts its own local cluster on 127.0.0.1).

Reported per way: wall time (process start to exit, Ray's start-up and shutdown included), its ratio
to ``seq``, the time inside measuring (load + probes, summed over tasks), the per-task overhead
``(wall x workers - measuring) / n``, and peak memory: the whole process tree's resident memory
(sampled every 0.2 s from /proc: driver, Ray's daemons and workers, submitit's controllers) and the
largest worker's own peak. The load average before and after each way says how busy the machine was.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testing"))  # the test harness: not installed
from headwatch_testing.tinypanel import write_tiny_hub_panel  # noqa: E402

CONFIG = dict(n_layers=4, n_heads=8, d_model=128)
PROBE = dict(n_examples=128, seq_len=128, n_pr=128, vocab_lo=16, vocab_hi=300, batch_size=16)
EXECUTOR = {"local": "local", "ray": "ray", "submitit": "submitit-local"}

SEQUENTIAL = """
import json, sys, time
import torch
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
panel, cache, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
if threads:
    torch.set_num_threads(threads)
provider = Provider(ProviderOptions(cache_dir=cache, device="cpu", progress=False))
provider.model_records(load_panel(panel).models[0])
print(json.dumps({"measure_seconds": [e.seconds for e in provider.run.entries], "threads": torch.get_num_threads()}))
"""


def tree_rss(root: int) -> int:
    """Resident bytes of process ``root`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    total, todo, page = 0, [root], os.sysconf("SC_PAGE_SIZE")
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            pass
        todo += children.get(pid, [])
    return total


def run_way(way: str, panel: Path, work: Path, workers: int) -> dict:
    cache, logs = work / f"cache-{way}", work / f"logs-{way}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if way in ("seq", "seq1"):
        cmd = [sys.executable, "-c", SEQUENTIAL, str(panel), str(cache), "1" if way == "seq1" else "0"]
    else:
        cmd = [sys.executable, "-m", "headwatch", "measure-panel", "--panel", str(panel), "--cache-dir", str(cache),
               "--device", "cpu", "--executor", EXECUTOR[way], "--workers", str(workers), "--cpus-per-task", "1",
               "--log-dir", str(logs)]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], tree_rss(proc.pid))
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{way} failed ({proc.returncode}):\n{err[-3000:]}")
    if way in ("seq", "seq1"):
        data = json.loads(out.strip().splitlines()[-1])
        measuring, n, worker_peak, w = sum(data["measure_seconds"]), len(data["measure_seconds"]), None, 1
    else:
        results = json.loads((logs / "summary.json").read_text())["results"]
        assert all(r["status"] == "computed" for r in results), results
        measuring, n, w = sum(r["measure_seconds"] for r in results), len(results), workers
        worker_peak = max(r["peak_rss_mib"] for r in results)
    entries = len(list((cache / "measurements").glob("*/*.json")))
    assert entries == n, (way, entries, n)
    return {"way": way, "workers": w, "tasks": n, "wall_s": round(wall, 1), "measuring_s": round(measuring, 1),
            "overhead_per_task_s": round((wall * w - measuring) / n, 2), "peak_tree_rss_mib": round(peak[0] / 2**20),
            "peak_worker_rss_mib": round(worker_peak) if worker_peak else None,
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=24, help="checkpoints in the panel")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ways", default="seq,seq1,local,ray,submitit")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-fanout-bench-") as tmp:
        work = Path(tmp)
        panel = write_tiny_hub_panel(work / "panel", n=args.n, repo="bench-org/tiny", name="bench", probe=PROBE,
                                     **CONFIG)
        rows = []
        for way in args.ways.split(","):
            rows.append(run_way(way, panel, work, args.workers))
            print(json.dumps(rows[-1]), flush=True)
    seq = next((r["wall_s"] for r in rows if r["way"] == "seq"), None)
    print("\n| way | workers | wall | vs seq | measuring (sum) | overhead / task | peak RSS, tree | peak RSS, worker | load before -> after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ratio = f"{seq / r['wall_s']:.2f}x" if seq else "-"
        print(f"| {r['way']} | {r['workers']} | {r['wall_s']} s | {ratio} | {r['measuring_s']} s | "
              f"{r['overhead_per_task_s']} s | {r['peak_tree_rss_mib']} MiB | {r['peak_worker_rss_mib'] or '-'} MiB | "
              f"{r['load_before'][0]} -> {r['load_after'][0]} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"n": args.n, "config": CONFIG, "probe": PROBE, "cpus": os.cpu_count(),
                                               "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
