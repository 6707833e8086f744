"""What the attention floor changes on one checkpoint, at several example counts (run by hand).

    python benchmarks/negligible_heads.py CHECKPOINT [--n 16 48 256] [--seq-len 256] [--vocab-lo 100]
        [--vocab-hi 10000] [--batch-size 16] [--device auto] [--json OUT]

CHECKPOINT is a local folder holding config.json and *.safetensors. For each N the screen is measured
once (headwatch's ``measure``: ablation off, no bootstrap, no Sink_1^eps; the first N examples of
SPEC's seed-42 batch, so a larger N extends a smaller one) and its head sets are taken with and
without the attention floor (docs/statistics.md#negligible-attention): the induction circuit (heads
>= 50x) and the BOS heads (first-token >= 30x). A pure sink head (nearly all its attention on
position 0) can cross 50x induction on two negligible masses at one N and not at another; with the
floor it is not counted at any N. Prints a Markdown table (and, with --json, every head set and
each left-out head's selectivity and attention).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from headwatch.fixtures import loading
from headwatch.probes.measure import measure
from headwatch.probes.record import MeasurementRecord, ProbeSettings, attention_floor_value
from headwatch.probes.selectivity import bos_heads, bos_heads_of, circuit_of, induction_circuit
from headwatch.spec import SPEC

COLUMNS = ("N", "induction heads, no floor", "induction heads, floor", "induction: not counted",
           "BOS heads, no floor", "BOS heads, floor", "BOS: not counted", "seconds")


def left_out(record: MeasurementRecord, cls: str, heads: frozenset[str]) -> list[dict]:
    """The heads of ``heads`` the floor leaves out: selectivity and attention to the ``cls`` target."""
    return [{"head": h, "selectivity": record.all_head_selectivity[h][cls], "attention": record.attention[h][cls]}
            for h in sorted(heads)]  # type: ignore[index]


def row(record: MeasurementRecord, seconds: float) -> dict:
    """One N's head sets with and without the floor."""
    table = record.all_head_selectivity
    ind_all, ind = induction_circuit(table, SPEC.induction), circuit_of(record, SPEC.induction)
    bos_all, bos = bos_heads(table, SPEC.bos), bos_heads_of(record, SPEC.bos)
    return {"n": record.settings.n_examples, "n_valid": record.n_examples_valid,  # type: ignore[union-attr]
            "floor": attention_floor_value(record.settings.seq_len, SPEC.attention_floor),  # type: ignore[union-attr]
            "induction_no_floor": sorted(ind_all), "induction_floor": sorted(ind),
            "induction_not_counted": left_out(record, "induction", ind_all - ind),
            "bos_no_floor": sorted(bos_all), "bos_floor": sorted(bos),
            "bos_not_counted": left_out(record, "first-token", bos_all - bos), "seconds": round(seconds, 1)}


def _heads(heads: list[str]) -> str:
    return f"{len(heads)}" + (f" ({', '.join(heads)})" if 0 < len(heads) <= 8 else "")


def _left_out(entries: list[dict]) -> str:
    return ", ".join(f"{e['head']} {e['selectivity']:.3g}x at {e['attention']:.1e}" for e in entries) or "none"


def markdown(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---:" if c in ("N", "seconds") else "---"
                                                                for c in COLUMNS) + " |"]
    for r in rows:
        lines.append(f"| {r['n']} | {_heads(r['induction_no_floor'])} | {_heads(r['induction_floor'])} | "
                     f"{_left_out(r['induction_not_counted'])} | {len(r['bos_no_floor'])} | {len(r['bos_floor'])} | "
                     f"{_left_out(r['bos_not_counted'])} | {r['seconds']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", help="a local checkpoint folder (config.json and *.safetensors)")
    p.add_argument("--n", type=int, nargs="+", default=[16, 48, 256], help="example counts N (default 16 48 256)")
    p.add_argument("--seq-len", type=int, default=ProbeSettings.seq_len)
    p.add_argument("--vocab-lo", type=int, default=ProbeSettings.vocab_lo)
    p.add_argument("--vocab-hi", type=int, default=ProbeSettings.vocab_hi)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device", default="auto")
    p.add_argument("--json", default=None, help="also write every row to this file")
    args = p.parse_args(argv)

    folder = Path(args.checkpoint).expanduser().resolve()
    resolved = loading.resolve_local(folder.parent, folder.name)
    device = loading.pick_device(args.device)
    loaded = loading.load_checkpoint(resolved, dtype="float32", device=device, attn_implementation="sdpa")
    rows = []
    for n in sorted(set(args.n)):
        settings = ProbeSettings(n_examples=n, seq_len=args.seq_len, vocab_lo=args.vocab_lo, vocab_hi=args.vocab_hi,
                                 n_pr=min(n, ProbeSettings.n_pr), batch_size=args.batch_size, ablation=False,
                                 n_bootstrap=0, sink_examples=0)
        started = time.perf_counter()
        record = measure(loaded.model, settings, model_name=str(folder), revision=folder.name, progress=False)
        rows.append(row(record, time.perf_counter() - started))
        print(f"N = {n}: {len(rows[-1]['induction_floor'])} induction heads with the floor, "
              f"{len(rows[-1]['induction_no_floor'])} without", file=sys.stderr, flush=True)
    print(f"{folder} on {device}; floor {rows[0]['floor']:.1e} attention (= {SPEC.attention_floor:g}/T, "
          f"T = {args.seq_len}); induction >= {SPEC.induction:g}x, BOS >= {SPEC.bos:g}x; 'not counted': selectivity at "
          "its attention to the target\n")
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"checkpoint": str(folder), "device": device, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
