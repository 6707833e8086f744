"""Do the organisms form their circuits on every numeric path and every seed? Train and probe a matrix.

    python benchmarks/organisms_matrix.py --out docs/organisms-matrix
        [--families gptneox,olmo,olmoe] [--native-seeds 0-4] [--other-seeds 0-2]
        [--paths avx2,default] [--parallel 2] [--smoke]

Each cell (family, seed, numeric path) trains the shipped recipe (``ORGANISMS``) in a child process on
that path (``numerics.NAMED_PATHS``: "native" is this machine's own; "avx2" and "default" are what
other x86 machines compute; set with ``HEADWATCH_TRAIN_NUMERICS=native``), then probes every
checkpoint under the organism's probe settings. Per cell it records: induction
heads (selectivity >= 50) at the final checkpoint, none at step 0, the first checkpoint with >= 3
(strictly inside the run), final top-1 against chance, and the BOS heads. Each checkpoint is measured
in its training process as it is saved (headwatch.training.trainloop), into ``OUT/measurements``; a
checkpoint without a record there (training resumed past it) is loaded and measured afterwards.
Results go to ``OUT/cells/*.json`` (one per cell, written atomically), ``OUT/matrix.json`` and
``OUT/matrix.md``; checkpoints to ``OUT/cache/<path>``. A rerun skips finished cells and resumes
unfinished training. ``--smoke`` trains miniatures of the recipes instead (4 steps, a 32-example
probe: the test harness's ``headwatch_testing.tiny_organisms``), to check the benchmark runs, in
seconds; their cells do not meet the bar, which then does not set the exit status.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from headwatch.model_organisms import FAMILIES, ORGANISMS, numerics  # noqa: E402
from headwatch.fixtures.panels import organism_panel_model  # noqa: E402
from headwatch.model_organisms.runner import CHILD_MODULE, TrainingJob, train_in_subprocesses  # noqa: E402
from headwatch.model_organisms.train import missing_revisions, read_checkpoint_meta, repo_id  # noqa: E402
from headwatch.fixtures.provider import Provider, ProviderOptions  # noqa: E402
from headwatch.probes.record import write_json_atomic  # noqa: E402
from headwatch.spec import SPEC  # noqa: E402

log = logging.getLogger("organisms_matrix")
ROOT = Path(__file__).resolve().parents[1]


def seeds(text: str) -> list[int]:
    """'0-4' -> [0, 1, 2, 3, 4]; '0,2' -> [0, 2]; '' or 'none' -> []."""
    out: list[int] = []
    if text.strip().lower() in ("", "none"):
        return out
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def probe_cell(family: str, seed: int, cache: Path, measurements: Path) -> dict:
    """Every checkpoint's record of one trained organism (from the measurement cache, where training
    wrote it; measured now where it is missing); the per-checkpoint rows and the cell's verdict."""
    from headwatch.probes.selectivity import bos_fraction_of, bos_heads_of, circuit_of

    org = ORGANISMS[family]
    repo = repo_id(family, seed)
    rows = []
    revisions = org.revisions()
    provider = Provider(ProviderOptions(cache_dir=measurements, progress=False))
    for rec in provider.model_records(organism_panel_model(family, seed, cache)):
        rev = rec.revision
        final = rev == revisions[-1]
        table = rec.all_head_selectivity
        heads = sorted(circuit_of(rec, SPEC.induction))
        bos = sorted(bos_heads_of(rec, SPEC.bos))
        best = max(table, key=lambda h: table[h]["induction"])
        rows.append({
            "revision": rev, "step": int(rev.removeprefix("step")), "tokens_seen": rec.tokens_seen,
            "induction_heads": {h: round(table[h]["induction"], 1) for h in heads},
            "best_induction": [best, round(table[best]["induction"], 1)],
            "top1": rec.task.top1, "bos_fraction": bos_fraction_of(rec, SPEC.bos), "bos_heads": bos,
            **({"ablations": {a.name: a.metrics.top1 for a in rec.ablations}} if final else {}),
        })
    first = next((r for r in rows if len(r["induction_heads"]) >= SPEC.induction_min_heads), None)
    final = rows[-1]
    chance = 1.0 / (org.probe.vocab_hi - org.probe.vocab_lo)
    verdict = {
        "heads_final": len(final["induction_heads"]),
        "none_at_first": not rows[0]["induction_heads"],
        "first_formed": first["revision"] if first else None,
        "formed_inside": first is not None and first is not rows[0] and first is not rows[-1],
        "top1_final": final["top1"], "chance": chance,
        "bos_heads_layers_0_1": sorted({h for r in rows for h in r["bos_heads"] if h.startswith(("L0_", "L1_"))}),
        # For sink organisms: when the first BOS head appeared, and how many are left at the end.
        "first_bos": next((r["revision"] for r in rows if r["bos_heads"]), None),
        "bos_heads_final": len(final["bos_heads"]),
    }
    verdict["meets_bar"] = (verdict["heads_final"] >= SPEC.induction_min_heads and verdict["none_at_first"]
                            and verdict["formed_inside"] and final["top1"] >= 10 * chance)
    return {"rows": rows, "verdict": verdict,
            "training": read_checkpoint_meta(cache, repo, revisions[-1]).get("training")}


def table(cells: list[dict]) -> str:
    lines = ["| family | seed | path (ATen capability) | heads >= 50 at final (best) | first >= 3 | final top-1 | BOS heads in L0-1 | meets bar |",
             "| --- | ---: | --- | --- | --- | ---: | --- | --- |"]
    for c in cells:
        v, final = c["verdict"], c["rows"][-1]
        best = max(final["induction_heads"].values(), default=final["best_induction"][1])
        lines.append(f"| {c['family']} | {c['seed']} | {c['path']} ({(c['training'] or {}).get('aten_capability')}) | "
                     f"{v['heads_final']} ({best:.1f}) | {v['first_formed'] or 'never'} | {v['top1_final']:.3f} | "
                     f"{', '.join(v['bos_heads_layers_0_1']) or 'none'} | {'yes' if v['meets_bar'] else '**NO**'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for cells, tables and checkpoints")
    p.add_argument("--families", default=",".join(FAMILIES),
                   help=f"comma list of ORGANISMS keys (default: the three families; also: "
                        f"{', '.join(k for k in ORGANISMS if k not in FAMILIES)})")
    p.add_argument("--native-seeds", default="0-4", help="seeds on this machine's own path (default: 0-4)")
    p.add_argument("--other-seeds", default="0-2", help="seeds on every other path (default: 0-2)")
    p.add_argument("--paths", default="avx2,default",
                   help=f"other paths, comma list of {', '.join(n for n in numerics.NAMED_PATHS if n != 'native')} "
                        "(default: avx2,default; add avx512 on a machine whose own path is not AVX-512)")
    p.add_argument("--parallel", type=int, default=max(1, os.cpu_count() or 1),
                   help="training children at a time, one thread each (default: the core count)")
    p.add_argument("--smoke", action="store_true",
                   help="miniature recipes (4 steps, 32 probe examples): checks the benchmark runs, in seconds")
    args = p.parse_args(argv)
    child_module = CHILD_MODULE
    if args.smoke:
        sys.path.insert(0, str(ROOT / "testing"))  # the test harness: not installed
        from headwatch_testing.tiny_organisms import use_miniatures

        child_module = use_miniatures()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    out = Path(args.out)
    plan = [(f, s, "native") for f in args.families.split(",") for s in seeds(args.native_seeds)]
    plan += [(f, s, path) for path in args.paths.split(",") if path for f in args.families.split(",")
             for s in seeds(args.other_seeds)]
    for _, _, path in plan:
        numerics.path_environ(path)  # unknown names fail before anything runs
    todo = [c for c in plan if not (out / "cells" / f"{c[0]}-s{c[1]}-{c[2]}.json").is_file()]
    log.info("%d cells, %d to do", len(plan), len(todo))
    measurements = out / "measurements"
    jobs = [TrainingJob(f, s, out / "cache" / path, environ=numerics.path_environ(path),
                        measure=Provider(ProviderOptions(cache_dir=measurements)).measure_plan(
                            organism_panel_model(f, s, out / "cache" / path)))
            for f, s, path in todo if missing_revisions(ORGANISMS[f].recipe, s, out / "cache" / path)]
    t0 = time.perf_counter()
    if jobs:
        train_in_subprocesses(jobs, parallel=args.parallel, module=child_module)
    log.info("training done in %.0f s", time.perf_counter() - t0)
    for family, seed, path in todo:
        cell = {"family": family, "seed": seed, "path": path,
                **probe_cell(family, seed, out / "cache" / path, measurements)}
        write_json_atomic(out / "cells" / f"{family}-s{seed}-{path}.json", cell)
        log.info("%s seed %d on %s: %s", family, seed, path, cell["verdict"])
    cells = [json.loads((out / "cells" / f"{f}-s{s}-{path}.json").read_text()) for f, s, path in plan]
    write_json_atomic(out / "matrix.json", cells)
    (out / "matrix.md").write_text(table(cells))
    print(table(cells))
    missed = [c for c in cells if not c["verdict"]["meets_bar"]]
    print(f"{len(cells) - len(missed)} of {len(cells)} cells meet the bar")
    return 1 if missed and not args.smoke else 0  # a miniature never meets the bar


if __name__ == "__main__":
    raise SystemExit(main())
