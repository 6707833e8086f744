"""A PolyPythia-sized population audit from the cache, no model loaded: CPU, memory, report size.

Builds (once, in ``--work``) a panel shaped like the PolyPythias (5 sizes x 10 seeds, one candidate
of pythia-160m, every one of the suite's 154 revisions: 51 models, 7,854 records) and a measurement
cache of planted full-size records for it (claims/synthetic_population.py: every head's six
selectivities with intervals, PR, sink attention; ablations where the panel measures them), with
an empty Hub cache and HF_HUB_OFFLINE=1: every checkpoint reads as evicted, as after
``headwatch measure-panel --evict``. Then runs, each as its own process, and measures:

- ``headwatch judge --panel P --json OUT``
- ``headwatch report --panel P --out DIR``
- with ``--pytest``: ``pytest claims -n 2 --panel P --html`` (the per-revision tests: slow)

and prints, per command: wall seconds, CPU seconds (user + system, the process and its children),
peak resident memory (the largest single process, and the process tree's sum sampled every 0.2 s),
the lines of warnings it printed, the report's size, and the load average before and after (the
machine may be shared: CPU seconds are the number to compare). ``--json`` writes the numbers; the
exit status is 1 when a command failed.

With ``--jobs N``, judge and report each run twice, with ``--jobs 1`` and ``--jobs N``, writing to
the same paths in turn (each run's output is moved aside after it), and the two runs' outputs are
compared byte for byte: stdout, the verdicts JSON, every file of the report (figures included), and
stderr without its progress lines (their estimates are the clock's); it prints each run's wall and
CPU seconds, the wall-time speed-up and whether the outputs are identical (exit 1 if not).

    python benchmarks/population_scale.py                       # build (~2 min once), judge, report
    python benchmarks/population_scale.py --jobs 2              # --jobs 1 against --jobs 2: speed-up, identical?
    python benchmarks/population_scale.py --pytest --json scale.json
    python benchmarks/population_scale.py --seeds 3 --revisions 40   # smaller: check linearity
    python benchmarks/population_scale.py --sizes 160m --seeds 2 --revisions 2 --work DIR   # seconds: a check
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"14m": (6, 4, 32), "31m": (6, 8, 32), "70m": (6, 8, 64), "160m": (12, 12, 64), "410m": (24, 16, 64)}


def panel_text(sizes: list[str], seeds: list[int], revisions: list[str]) -> str:
    revs = ", ".join(f'"{r}"' for r in revisions)
    return f"""[panel]
name = "scale"
description = "planted PolyPythia-shaped population (benchmarks/population_scale.py)"

[[models]]
name = "pythia-{{size}}"
source = "hub"
sizes = {json.dumps(sizes)}
seeds = {json.dumps(seeds)}
repo = "EleutherAI/pythia-{{size}}-seed{{seed}}"
seed_repos = {{ 1234 = "EleutherAI/pythia-{{size}}" }}
revisions = [{revs}]
tokens = {{ per_step = 2097152 }}
[models.expect]
dclm = false

[[models]]
name = "pythia-160m-data-seed{{seed}}"
source = "hub"
population = "pythia-160m"
role = "candidate"
seeds = [1]
repo = "EleutherAI/pythia-160m-data-seed{{seed}}"
revisions = [{revs}]
tokens = {{ per_step = 2097152 }}
[models.expect]
dclm = false
"""


def build(work: Path, sizes: list[str], seeds: list[int], revisions: list[str]) -> tuple[Path, int]:
    """The panel file and its planted cache (skipped when built before with the same shape)."""
    from headwatch.claims.synthetic_population import suite_records
    from headwatch.fixtures.cache import MeasurementCache
    from headwatch.fixtures.panels import load_panel
    from headwatch.fixtures.provider import ProviderOptions, measurement_key

    panel = work / "scale.toml"
    shape = {"sizes": sizes, "seeds": seeds, "revisions": revisions}
    marker = work / "built.json"
    panel.parent.mkdir(parents=True, exist_ok=True)
    if marker.is_file() and json.loads(marker.read_text()) == shape:
        return panel, json.loads((work / "count.json").read_text())
    panel.write_text(panel_text(sizes, seeds, revisions))
    options = ProviderOptions(cache_dir=work / "cache", progress=False)
    cache = MeasurementCache(options.measurement_dir)
    models = load_panel(panel).models
    t0, count = time.perf_counter(), 0
    for i, pm in enumerate(models):
        size = next(s for s in SIZES if f"-{s}" in pm.repo)
        layers, heads, d_head = SIZES[size]
        revs = [(r, float(pm.tokens_rule.tokens(r))) for r in pm.sorted_revisions]
        settings = [pm.settings_for(r) for r, _ in revs]
        seed = pm.member.seed if pm.member and pm.member.seed is not None else i
        onset = 2e9 * (1.5 if pm.member and pm.member.is_candidate else 1.0) * (1 + 0.1 * (seed % 5))
        for rec in suite_records(pm.repo, layers, heads, d_head, revs, settings, seed=1000 + i, onset=onset,
                                 bos_at_end=0.3 + 0.04 * (seed % 7)):
            cache.write_entry(measurement_key(pm, rec.revision, "planted-commit", options), rec)
            count += 1
        print(f"  built {pm.id}: {len(revs)} records ({count} so far, {time.perf_counter() - t0:.0f} s)", flush=True)
    (work / "count.json").write_text(json.dumps(count))
    marker.write_text(json.dumps(shape))
    return panel, count


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid, ppid = int(d.name), int(fields.get("PPid", "0").strip() or 0)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024 if "VmRSS" in fields else 0
    total, stack = 0, [root]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack += children.get(p, [])
    return total


def measure(argv: list[str], env: dict[str, str], log: Path, err_log: Path | None = None) -> dict:
    """Run ``argv``; its wall and CPU seconds, peak memory, and how many lines of warnings it printed
    (stdout and stderr into ``log``, or stderr into ``err_log`` where given)."""
    load = os.getloadavg()
    t0 = time.perf_counter()
    with open(log, "w") as out, open(err_log or os.devnull, "w") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err if err_log else subprocess.STDOUT, env=env, cwd=ROOT)
        peak = [0]

        def sample() -> None:
            while proc.poll() is None:
                peak[0] = max(peak[0], _tree_rss(proc.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.join()
    wall = time.perf_counter() - t0
    text = log.read_text(errors="replace") + (err_log.read_text(errors="replace") if err_log else "")
    return {"argv": argv[1:4], "exit": proc.returncode, "wall_s": round(wall, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "peak_rss_mib_largest_process": round(usage.ru_maxrss / 1024),
            "peak_rss_mib_tree": round(peak[0] / 2**20), "output_lines": text.count("\n"),
            "warning_lines": sum("not resolvable" in line for line in text.splitlines()),
            "load_before": [round(x, 2) for x in load], "load_after": [round(x, 2) for x in os.getloadavg()]}


#: A progress line (headwatch/cli/jobs.py): its estimate is the clock's, so it is left out of the comparison.
PROGRESS_LINE = re.compile(r"^(judged|reported) \d+ of \d+ models, about .* left$")


def _without_progress(path: Path) -> list[str]:
    return [line for line in path.read_text(errors="replace").splitlines() if not PROGRESS_LINE.match(line)]


def differences(a: Path, b: Path) -> list[str]:
    """What differs between two runs' kept outputs (folders of the same layout): files byte for byte,
    stderr without its progress lines."""
    found = []
    names = sorted({p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
                   | {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()})
    for name in names:
        x, y = a / name, b / name
        if not (x.is_file() and y.is_file()):
            found.append(f"{name}: only in {'the first' if x.is_file() else 'the second'} run")
        elif name == "stderr":
            if _without_progress(x) != _without_progress(y):
                found.append(f"{name}: stderr differs (progress lines aside)")
        elif not filecmp.cmp(x, y, shallow=False):
            found.append(f"{name}: differs")
    return found


def compare_jobs(runs: dict[str, list[str]], outputs: dict[str, list[Path]], jobs: int, env: dict[str, str],
                 work: Path) -> dict:
    """Each command at --jobs 1 and --jobs ``jobs``, its outputs moved aside after each run and compared."""
    out = {}
    for name, argv in runs.items():
        kept = {}
        for n in (1, jobs):
            folder = work / f"jobs-{n}" / name
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            for path in outputs[name]:
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
            r = measure(argv + ["--jobs", str(n)], env, folder / "stdout", folder / "stderr")
            for path in outputs[name]:
                if path.exists():
                    shutil.move(str(path), str(folder / path.name))
            if (folder / "report" / "report.html").is_file():
                r["report_mb"] = round((folder / "report" / "report.html").stat().st_size / 1e6, 2)
            kept[n] = r
            print(f"{name} --jobs {n}: exit {r['exit']}, {r['wall_s']} s wall, {r['cpu_s']} s CPU, peak "
                  f"{r['peak_rss_mib_tree']} MiB (largest process {r['peak_rss_mib_largest_process']} MiB); "
                  f"load {r['load_before'][0]} -> {r['load_after'][0]}", flush=True)
        diff = differences(work / "jobs-1" / name, work / f"jobs-{jobs}" / name)
        speedup = round(kept[1]["wall_s"] / kept[jobs]["wall_s"], 2) if kept[jobs]["wall_s"] else None
        out[name] = {"runs": {str(n): r for n, r in kept.items()}, "speedup_wall": speedup,
                     "identical": not diff, "differences": diff}
    print(f"\n| command | wall s, --jobs 1 | wall s, --jobs {jobs} | CPU s, 1 / {jobs} | speed-up | identical |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, c in out.items():
        one, many = c["runs"]["1"], c["runs"][str(jobs)]
        print(f"| {name} | {one['wall_s']} | {many['wall_s']} | {one['cpu_s']} / {many['cpu_s']} | "
              f"{c['speedup_wall']}x | {'yes' if c['identical'] else 'NO: ' + '; '.join(c['differences'][:5])} |")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", default=str(ROOT / ".cache" / "population-scale"), help="where the panel and cache go")
    p.add_argument("--sizes", default=",".join(SIZES), help="comma-separated sizes (default: all five)")
    p.add_argument("--seeds", type=int, default=10, help="seeds per size: 1..N-1 and the original 1234 (default 10)")
    p.add_argument("--revisions", type=int, default=154, help="the first N of the suite's 154 revisions, spread "
                                                               "evenly (default: all)")
    p.add_argument("--pytest", action="store_true", help="also time pytest claims -n 2 --html (slow)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="run judge and report with --jobs 1 and --jobs N and compare their outputs byte for byte "
                        "(default: each once, at its default --jobs)")
    p.add_argument("--json", default=None, help="write the numbers here")
    args = p.parse_args()

    sys.path.insert(0, str(ROOT))
    from headwatch.fixtures.realconfigs import PYTHIA_SCHEDULE

    branches = list(PYTHIA_SCHEDULE.branches)
    step = max(1, len(branches) // args.revisions)
    revisions = sorted(set(branches[::step][: args.revisions - 1] + [branches[-1]]), key=branches.index)
    sizes = args.sizes.split(",")
    seeds = list(range(1, args.seeds)) + [1234]
    work = Path(args.work).expanduser().resolve()
    print(f"building {len(sizes)} size(s) x {len(seeds)} seed(s) + 1 candidate x {len(revisions)} revisions in {work}")
    t0 = time.perf_counter()
    panel, records = build(work, sizes, seeds, revisions)
    print(f"{records} records ready ({time.perf_counter() - t0:.0f} s)")

    hub = work / "hub-empty"
    hub.mkdir(exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub), "HEADWATCH_CACHE_DIR": str(work / "cache"),
           "PYTHONWARNINGS": "default"}
    bin_dir = Path(sys.executable).parent
    runs = {
        "judge": [str(bin_dir / "headwatch"), "judge", "--panel", str(panel), "--json", str(work / "verdicts.json")],
        "report": [str(bin_dir / "headwatch"), "report", "--panel", str(panel), "--out", str(work / "report")],
    }
    if args.pytest:
        runs["pytest -n 2"] = [str(bin_dir / "pytest"), "claims", "-n", "2", "--panel", str(panel), "-q",
                               "-p", "no:randomly", "--html", str(work / "pytest.html"), "--self-contained-html"]
    results = {"records": records, "models": len(sizes) * len(seeds) + 1, "revisions": len(revisions),
               "cpu_count": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)), "runs": {}}
    if args.jobs is not None:
        outputs = {"judge": [work / "verdicts.json"], "report": [work / "report"]}
        results["jobs"] = compare_jobs({k: v for k, v in runs.items() if k in outputs}, outputs, args.jobs, env, work)
        runs = {k: v for k, v in runs.items() if k not in outputs}
        for name, c in results["jobs"].items():
            for n, r in c["runs"].items():
                results["runs"][f"{name} --jobs {n}"] = r
    for name, argv in runs.items():
        r = measure(argv, env, work / f"{name.split()[0]}.log")
        if name == "report":
            r["report_mb"] = round((work / "report" / "report.html").stat().st_size / 1e6, 2)
        if name.startswith("pytest"):
            r["html_mb"] = round((work / "pytest.html").stat().st_size / 1e6, 2)
        results["runs"][name] = r
        print(f"{name}: exit {r['exit']}, {r['wall_s']} s wall, {r['cpu_s']} s CPU, peak "
              f"{r['peak_rss_mib_tree']} MiB (largest process {r['peak_rss_mib_largest_process']} MiB), "
              f"{r['warning_lines']} warning line(s), {r['output_lines']} output lines"
              + (f", report {r['report_mb']} MB" if "report_mb" in r else "")
              + (f", html {r['html_mb']} MB" if "html_mb" in r else "")
              + f"; load {r['load_before'][0]} -> {r['load_after'][0]}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    failed = [name for name, r in results["runs"].items() if r["exit"] != 0]
    if failed:  # its numbers time a failure: say so, and where its output is
        print(f"failed: {', '.join(failed)} (output in {work}/<name>.log, or jobs-N/<name>/)", file=sys.stderr)
        return 1
    differ = [name for name, c in results.get("jobs", {}).items() if not c["identical"]]
    if differ:
        print(f"--jobs changed the output of: {', '.join(differ)} (kept in {work}/jobs-N/)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
