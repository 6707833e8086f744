"""Time the cold first run: ``.ci/run`` on a clean clone (set-up, then the README's test command,
whose ``--train`` trains the organisms beside the tests that need none).

    python benchmarks/cold_run.py [--commit HEAD] [--keep] [--json OUT.json] [--dry-run]

Clones the repository at ``--commit`` into a fresh temporary folder, puts ``../shared`` beside it
(a link to this checkout's), and runs ``CI=true bash .ci/run`` there with a clean environment (no
HEADWATCH_* caches: the organisms train from scratch into the clone). Every output line is stamped
with the seconds since the start, so the report gives: the wall time, the children's CPU time (user +
sys), the whole machine's busy and idle core-seconds (``/proc/stat``: what the children's count
misses, such as daemons a test starts that outlive their parent, and the cores left idle), the
load average before, during (sampled each 30 s) and after, each phase's start (the
``== set-up / import layers / tests / done`` lines), when each organism finished training, and
pytest's summary line. The 15-minute target of a cold run is for a quiet 2-core machine: a shared one
inflates every number here (compare the CPU time with the wall time, and read the load).
``--dry-run`` prints what would run (the commit, the command, the environment it leaves out) and
runs nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASE_RE = re.compile(r"^== (set-up|slurm|import layers|tests|done)\b")
DONE_RE = re.compile(r"^organism (\S+) seed (\d+): done")
SUMMARY_RE = re.compile(r"^=*\s*\d+ (passed|failed)")


def clone(commit: str, where: Path) -> Path:
    repo = where / "headwatch"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    subprocess.run(["git", "checkout", "-q", commit], cwd=repo, check=True)
    shared = (ROOT / ".." / "shared").resolve()
    if shared.is_dir():
        (where / "shared").symlink_to(shared)
    return repo


#: What the clean environment leaves out: headwatch's caches (so the organisms train from scratch),
#: pytest's and a virtualenv's settings.
DROPPED_ENV = ("HEADWATCH_", "PYTEST_", "VIRTUAL_ENV")
COMMAND = ["bash", ".ci/run"]


def clean_environ() -> dict[str, str]:
    """The environment ``.ci/run`` gets: this one without DROPPED_ENV, as CI, unbuffered."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_ENV)}
    env["CI"] = "true"
    env["PYTHONUNBUFFERED"] = "1"  # pytest's lines as they happen, so that their stamps are true
    return env


def machine_cpu() -> tuple[float, float] | None:
    """The whole machine's (busy, idle) core-seconds since boot, from ``/proc/stat`` (None elsewhere).
    Busy counts user, nice, system, irq, softirq and steal; idle counts idle and iowait."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    if fields[0] != "cpu":
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / tick, (idle + iowait) / tick


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commit", default="HEAD", help="the commit to clone (default: HEAD of this checkout)")
    p.add_argument("--keep", action="store_true", help="keep the clone (default: delete it)")
    p.add_argument("--json", default=None, metavar="OUT", help="write the numbers as JSON too")
    p.add_argument("--dry-run", action="store_true", help="print what would run, as JSON, and run nothing")
    args = p.parse_args(argv)
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.commit}^{{commit}}"], cwd=ROOT,
                           capture_output=True, text=True)
    if found.returncode != 0:
        p.error(f"--commit {args.commit!r}: not a commit of {ROOT}; give a commit id, branch or tag it has "
                "(default: HEAD)")
    commit = found.stdout.strip()
    env = clean_environ()
    if args.dry_run:
        print(json.dumps({"commit": commit, "clone_of": str(ROOT), "command": " ".join(COMMAND),
                          "shared_beside": (ROOT / ".." / "shared").resolve().is_dir(),
                          "environment_left_out": sorted(k for k in os.environ if k.startswith(DROPPED_ENV)),
                          "keep": args.keep, "json": args.json}, indent=1))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="headwatch-cold-"))
    repo = clone(commit, tmp)
    loads: list[tuple[float, float]] = []
    stop = threading.Event()
    t0 = time.monotonic()

    def sample() -> None:
        while not stop.wait(30):
            loads.append((round(time.monotonic() - t0), os.getloadavg()[0]))

    threading.Thread(target=sample, daemon=True).start()
    before = os.getloadavg()
    machine_before = machine_cpu()
    phases, organisms, summary = {}, {}, ""
    with open(tmp / "ci.log", "w", buffering=1) as log:
        proc = subprocess.Popen(COMMAND, cwd=repo, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            at = time.monotonic() - t0
            log.write(f"{at:7.1f} {line}")
            if (m := PHASE_RE.match(line)) is not None:
                phases[m.group(1)] = round(at, 1)
            elif (m := DONE_RE.match(line)) is not None:
                organisms[f"{m.group(1)} seed {m.group(2)}"] = round(at, 1)
            elif SUMMARY_RE.match(line):
                summary = line.strip(" =\n")
        code = proc.wait()
    stop.set()
    wall = time.monotonic() - t0
    machine_after = machine_cpu()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "commit": commit, "exit": code, "wall_seconds": round(wall, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1), "cores": os.cpu_count(),
        "load_before": [round(x, 2) for x in before], "load_after": [round(x, 2) for x in os.getloadavg()],
        "load_during_max": max((x for _, x in loads), default=None), "load_samples": loads,
        "phases_start_seconds": phases, "organisms_done_seconds": organisms, "pytest_summary": summary,
        "log": str(tmp / "ci.log"),
    }
    if machine_before is not None and machine_after is not None:
        busy, idle = (round(b - a, 1) for a, b in zip(machine_before, machine_after))
        result["machine_busy_cpu_seconds"], result["machine_idle_cpu_seconds"] = busy, idle
        # What ran outside the children's count: daemons that outlived their parent, anything else.
        result["uncounted_cpu_seconds"] = round(busy - result["cpu_seconds"], 1)
    if "tests" in phases:
        result["tests_seconds"] = round((phases.get("done", wall) - phases["tests"]), 1)
    print(json.dumps(result, indent=1))
    print(f"cold run of {commit[:7]}: {wall / 60:.1f} min wall ({result['cpu_seconds'] / 60:.1f} CPU-min on "
          f"{os.cpu_count()} cores; the machine busy {result.get('machine_busy_cpu_seconds', '?')} and idle "
          f"{result.get('machine_idle_cpu_seconds', '?')} core-s), exit {code}; set-up until {phases.get('import layers', '?')} s, tests "
          f"{result.get('tests_seconds', '?')} s; organisms done at {organisms}; load {before[0]:.1f} -> "
          f"max {result['load_during_max']}; {summary}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if not args.keep:
        subprocess.run(["rm", "-rf", str(repo)], check=False)
    return code


if __name__ == "__main__":
    sys.exit(main())
