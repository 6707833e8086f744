"""The benchmarks' smoke tier (issue 48): every script under benchmarks/ runs as a user runs it (a
process of its own, from the command line) at its smallest size, in seconds, so that a change which
breaks a benchmark breaks the test run. Each test asserts only that the script completes and writes
the figures docs/benchmarks.md (or the doc that holds its table) reports: the keys of its JSON and
the columns of its table, never their values (speed is measured, not asserted).

Everything a benchmark writes goes under the test's tmp_path (its output options, and the
HEADWATCH_* caches pointed there); docs/benchmarks/*.json are never written. Benchmarks whose
resource is absent skip with a reason naming it: real_tiny needs a packaged model already made
ready (the test never downloads). full_size runs the paper models' miniatures (``--miniature``) and
the organism benchmarks miniature recipes (``--smoke``); cold_run is checked in its dry mode only
(a real one is the whole CI run).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"

pytestmark = pytest.mark.slow  # each starts processes that import torch


def run_benchmark(tmp_path: Path, script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> <args>`` in ``tmp_path``, one torch thread, headwatch's caches
    under ``tmp_path`` (the packaged models' cache excepted: read only, by real_tiny); asserts exit 0."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1",
           "HEADWATCH_CACHE_DIR": str(tmp_path / "caches" / "measurements"),
           "HEADWATCH_ORGANISMS_CACHE": str(tmp_path / "caches" / "organisms"),
           "HEADWATCH_FULL_SIZE_CACHE": str(tmp_path / "caches" / "full-size")}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (f"{script} {' '.join(args)} exited {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}")
    return proc


def table_header(stdout: str, first_column: str) -> list[str]:
    """The columns of the Markdown table in ``stdout`` whose first column is ``first_column``."""
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_column:
            return cells
    raise AssertionError(f"no table whose first column is {first_column!r} in:\n{stdout[-3000:]}")


def has_keys(mapping: dict, keys: set[str], what: str) -> None:
    missing = keys - set(mapping)
    assert not missing, f"{what}: missing {sorted(missing)} (has {sorted(mapping)})"


def test_every_benchmark_has_a_smoke_test():
    """A new script under benchmarks/ needs its smoke test here."""
    tested = {name.removeprefix("test_").removesuffix("_smoke") + ".py"
              for name in globals() if name.startswith("test_") and name.endswith("_smoke")}
    assert tested == {p.name for p in BENCHMARKS.glob("*.py")}


def test_probe_pipeline_smoke(tmp_path):
    out = tmp_path / "probe.json"
    proc = run_benchmark(tmp_path, "probe_pipeline.py", "--examples", "8", "--seq-len", "64", "--batch-size", "4",
                         "--json", str(out))
    summary = json.loads(out.read_text())
    has_keys(summary, {"settings", "load_seconds", "results", "c_over_a", "c_over_b", "load_before", "load_after"},
             "probe_pipeline JSON")
    assert set(summary["results"]) == {"a", "b", "c"}
    for way in summary["results"].values():
        has_keys(way, {"seconds", "peak_rss_mib"}, "probe_pipeline way")
    assert "(c)/(a) =" in proc.stdout and "(c)/(b) =" in proc.stdout


def test_fanout_smoke(tmp_path):
    out = tmp_path / "fanout.json"
    # The sequential way only: the executors' ways run `headwatch measure-panel`, which
    # tests/test_fanout.py and tests/test_fanout_engines.py run for real (a pool, Ray, submitit).
    proc = run_benchmark(tmp_path, "fanout.py", "--n", "1", "--ways", "seq", "--json", str(out))
    data = json.loads(out.read_text())
    has_keys(data, {"n", "config", "probe", "cpus", "rows"}, "fanout JSON")
    assert [r["way"] for r in data["rows"]] == ["seq"]
    for row in data["rows"]:
        has_keys(row, {"workers", "tasks", "wall_s", "measuring_s", "overhead_per_task_s", "peak_tree_rss_mib",
                       "peak_worker_rss_mib", "load_before", "load_after"}, "fanout row")
    assert table_header(proc.stdout, "way")[1:4] == ["workers", "wall", "vs seq"]


def test_intervals_overhead_smoke(tmp_path):
    out = tmp_path / "intervals.json"
    run_benchmark(tmp_path, "intervals_overhead.py", "--n-examples", "16", "--repeats", "1", "--json", str(out))
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 4
    for row in rows[:2]:  # the two models: without, with, overhead, bootstrap alone
        has_keys(row, {"model", "without_s", "with_s", "overhead_pct", "bootstrap_s"}, "intervals row")
    for row in rows[2:]:  # the paper models' shapes: the bootstrap alone
        has_keys(row, {"model", "heads", "bootstrap_s"}, "bootstrap row")


def test_full_size_smoke(tmp_path):
    """The paper's MoE model's miniature (no GBs here): build, load + hash, screen, FLOP count."""
    out = tmp_path / "full_size.json"
    proc = run_benchmark(tmp_path, "full_size.py", "--miniature", "--models", "olmoe-1b-7b-0924", "--n-examples", "2",
                         "--seq-len", "64", "--batch-size", "2", "--folder", str(tmp_path / "checkpoints"),
                         "--json", str(out))
    (row,) = json.loads(out.read_text())["rows"]
    has_keys(row, {"params_total", "params_active_non_embedding", "checkpoint_bytes", "memory_plan", "build_seconds",
                   "load_seconds", "measure_seconds", "peak_rss_mib", "flops_counted", "flops_floor",
                   "counted_over_floor", "floor_seconds_at_gemm_rate", "measure_over_floor_time"}, "full_size row")
    assert "measure/floor time" in table_header(proc.stdout, "model")
    assert (tmp_path / "checkpoints" / "olmoe-1b-7b-0924" / "random-init-miniature").is_dir()


def test_real_tiny_smoke(tmp_path):
    """Where SmolLM2 is made ready in the packages cache (the test never downloads ~340 MB)."""
    from headwatch.fixtures.packaged import NotFetched, ensure_converted

    name = "smollm2-135m-instruct"
    try:
        ensure_converted(name, fetch=False)
    except NotFetched as e:
        pytest.skip(f"real_tiny needs {name} made ready (gguf extra, PyPI): {e}")
    out = tmp_path / "real_tiny.json"
    proc = run_benchmark(tmp_path, "real_tiny.py", "--models", name, "--n-examples", "4", "--json", str(out))
    (row,) = json.loads(out.read_text())
    has_keys(row, {"passes", "lowest_ablated_layer", "flops_floor", "gemm_flops_per_s", "floor_seconds_at_gemm_rate",
                   "measure_seconds", "cpu_seconds", "load_before", "load_after", "measure_over_floor_time"},
             "real_tiny row")
    assert "wall / floor time" in table_header(proc.stdout, "model")


def test_population_scale_smoke(tmp_path):
    out = tmp_path / "scale.json"
    run_benchmark(tmp_path, "population_scale.py", "--sizes", "160m", "--seeds", "2", "--revisions", "2",
                  "--work", str(tmp_path / "work"), "--jobs", "2", "--json", str(out))
    data = json.loads(out.read_text())
    has_keys(data, {"records", "models", "revisions", "runs", "jobs"}, "population_scale JSON")
    assert set(data["runs"]) == {f"{name} --jobs {n}" for name in ("judge", "report") for n in (1, 2)}
    for run in data["runs"].values():
        has_keys(run, {"wall_s", "cpu_s", "peak_rss_mib_largest_process", "peak_rss_mib_tree", "warning_lines",
                       "output_lines", "load_before", "load_after"}, "population_scale run")
    assert "report_mb" in data["runs"]["report --jobs 2"]
    for name in ("judge", "report"):  # the output with two jobs is the output with one
        has_keys(data["jobs"][name], {"speedup_wall", "identical", "differences"}, "population_scale --jobs")
        assert data["jobs"][name]["identical"], data["jobs"][name]["differences"]


def test_organisms_train_smoke(tmp_path):
    out = tmp_path / "train.json"
    run_benchmark(tmp_path, "organisms_train.py", "--smoke", "--family", "gptneox", "--probe",
                  "--cache-dir", str(tmp_path / "organisms"), "--measure-dir", str(tmp_path / "measurements"),
                  "--json", str(out))
    family = json.loads(out.read_text())["families"]["gptneox"]
    has_keys(family, {"steps", "train_seconds", "probe_seconds", "threads", "cache_mb", "load_before", "load_after",
                      "trajectory"}, "organisms_train family")
    assert len(family["trajectory"]) == 3  # the miniature's checkpoints
    for row in family["trajectory"]:
        has_keys(row, {"revision", "tokens_seen", "induction_heads", "best_induction", "top1", "bos_fraction",
                       "bos_heads"}, "organisms_train trajectory row")


def test_organisms_matrix_smoke(tmp_path):
    out = tmp_path / "matrix"
    proc = run_benchmark(tmp_path, "organisms_matrix.py", "--smoke", "--out", str(out), "--families", "gptneox",
                         "--native-seeds", "0", "--other-seeds", "none", "--paths", "")
    (cell,) = json.loads((out / "matrix.json").read_text())
    has_keys(cell["verdict"], {"heads_final", "none_at_first", "first_formed", "top1_final", "bos_heads_layers_0_1",
                               "meets_bar"}, "organisms_matrix verdict")
    assert table_header((out / "matrix.md").read_text(), "family")[-1] == "meets bar"
    assert "cells meet the bar" in proc.stdout


def test_organisms_population_smoke(tmp_path):
    """A population of one miniature seed and a candidate (the shipped panel trains six organisms)."""
    panel = tmp_path / "smoke-seeds.toml"
    panel.write_text('[panel]\nname = "smoke-seeds"\ndescription = "a miniature seed and a candidate"\n\n'
                     '[[models]]\nname = "olmoe"\nsource = "organism"\nseeds = [0]\n[models.organism]\nfamily = "olmoe"\n\n'
                     '[[models]]\nname = "olmoe-halflr-seed0"\nsource = "organism"\npopulation = "olmoe"\n'
                     'role = "candidate"\n[models.organism]\nfamily = "olmoe-halflr"\nseed = 0\n')
    out = tmp_path / "population.json"
    run_benchmark(tmp_path, "organisms_population.py", "--smoke", "--panel", str(panel),
                  "--organisms-cache", str(tmp_path / "organisms"), "--cache-dir", str(tmp_path / "measurements"),
                  "--json", str(out))
    data = json.loads(out.read_text())
    has_keys(data, {"train_wall_seconds", "train_load", "measure_seconds", "measure_load", "judge_seconds", "members",
                    "populations"}, "organisms_population JSON")
    assert set(data["members"]) == {"olmoe-seed0", "olmoe-halflr-seed0"} and set(data["populations"]) == {"olmoe"}
    for member in data["members"].values():
        has_keys(member, {"train_seconds", "steps", "measure_seconds"}, "organisms_population member")


def test_trainloop_cost_smoke(tmp_path):
    out = tmp_path / "cost.json"
    proc = run_benchmark(tmp_path, "trainloop_cost.py", "--steps", "4", "--save-steps", "2", "--n", "32",
                         "--repeat", "1", "--out", str(tmp_path / "runs"), "--json", str(out))
    rows = [line for line in proc.stdout.splitlines() if line.startswith("|") and line.split("|")[1].strip().isdigit()]
    assert [int(r.split("|")[1]) for r in rows] == [32]
    assert "probe share of CPU" in table_header(proc.stdout, "N")
    for row in json.loads(out.read_text()):
        has_keys(row, {"n", "cpu", "wall", "probe_cpu", "probe_wall", "measurements", "load"}, "trainloop_cost row")


def test_cold_run_smoke(tmp_path):
    """Its dry mode and argument handling only: a real cold run is the whole CI run (about 15 minutes)."""
    proc = run_benchmark(tmp_path, "cold_run.py", "--dry-run")
    plan = json.loads(proc.stdout)
    has_keys(plan, {"commit", "clone_of", "command", "environment_left_out"}, "cold_run plan")
    assert plan["command"] == "bash .ci/run" and len(plan["commit"]) == 40
    bad = subprocess.run([sys.executable, str(BENCHMARKS / "cold_run.py"), "--dry-run", "--commit", "no-such-commit"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--commit 'no-such-commit': not a commit" in bad.stderr


def test_negligible_heads_smoke(tmp_path):
    from headwatch_testing.tiny import tiny_model

    tiny_model("llama", seed=1).save_pretrained(tmp_path / "ckpt" / "step0", safe_serialization=True)
    out = tmp_path / "negligible.json"
    proc = run_benchmark(tmp_path, "negligible_heads.py", str(tmp_path / "ckpt" / "step0"), "--n", "4", "8",
                         "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300", "--json", str(out))
    assert table_header(proc.stdout, "N") == ["N", "induction heads, no floor", "induction heads, floor",
                                              "induction: not counted", "BOS heads, no floor", "BOS heads, floor",
                                              "BOS: not counted", "seconds"]
    rows = json.loads(out.read_text())["rows"]
    assert [r["n"] for r in rows] == [4, 8]
    for r in rows:
        has_keys(r, {"induction_no_floor", "induction_floor", "induction_not_counted", "bos_no_floor", "bos_floor",
                     "bos_not_counted", "floor", "seconds"}, "negligible_heads row")


def test_verdict_rules_smoke(tmp_path):
    """Its --quick grid (about 3 s): the three tables docs/statistics.md shows, each with its rows old and new."""
    proc = run_benchmark(tmp_path, "verdict_rules.py", "--quick")
    for heading in ("## The causal bar", "## The control", "## A candidate among reference seeds"):
        assert heading in proc.stdout, proc.stdout[-2000:]
    for rule in ("conditional binomial (before)", "exact unconditional (now)", "Fisher (before)", "Boschloo (now)",
                 "rank + Bonferroni (before)", "rank + permutation min-p (now, default)", "log-normal + Holm"):
        assert rule in proc.stdout, rule


def test_causal_readings_smoke(tmp_path):
    """On a planted record with a copyable-position reading: its table with both readings' columns."""
    from headwatch.claims.synthetic import healthy
    from headwatch.probes.record import CopyReading

    record = healthy()[-1]
    record.copy_reading = CopyReading(n_sequences=12, half=64, seed=7, positions_per_sequence=63,
                                      hits={"baseline": (60,) * 12, "induction_circuit": (1,) * 12,
                                            "matched_random": (58,) * 12})
    record.to_json(tmp_path / "planted.json")
    proc = run_benchmark(tmp_path, "causal_readings.py", f"planted={tmp_path / 'planted.json'}")
    columns = table_header(proc.stdout, "model")
    assert {"query verdict", "copyable verdict", "circuit share [95% interval]"} <= set(columns), columns
    assert "holds" in proc.stdout.splitlines()[-1]
