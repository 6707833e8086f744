"""``headwatch measure``: probe one checkpoint and write its measurement record as JSON.

    headwatch measure --model EleutherAI/pythia-1b --revision step3000 --out pythia-step3000.json
    headwatch measure --model runs/seed1 --revision step512 --out seed1-step512.json   # DIR/<revision>/
    headwatch measure --model runs/seed1/step512 --out seed1-step512.json             # one folder

A job array writing ``--out DIR/<model>/<revision>.json`` makes a folder that ``headwatch judge``,
``headwatch report`` and ``pytest claims`` read with ``--reference-dir DIR`` (docs/scale-out.md).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from headwatch.fixtures import loading
from headwatch.probes.record import ProbeSettings


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="Hub repo id (org/name) or a local folder")
    p.add_argument("--revision", help="branch, tag or commit (Hub), or DIR/<revision> (local); default: main")
    p.add_argument("--out", required=True, type=Path, help="where to write the record (JSON)")
    p.add_argument("--tokens-seen", type=float,
                   help="training tokens at this checkpoint, recorded as is (default: unknown; judge, report and "
                        "pytest --reference-dir then take them from the panel's tokens rule)")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="load and probe dtype (fp16 underflows the baseline attention of early checkpoints)")
    p.add_argument("--cache-dir", help="Hub cache folder (default: huggingface_hub's own)")
    p.add_argument("--n-examples", type=int, default=ProbeSettings.n_examples, help="examples in the induction batch")
    p.add_argument("--n-pr", type=int, default=ProbeSettings.n_pr, help="examples whose head outputs enter PR")
    p.add_argument("--batch-size", type=int, default=ProbeSettings.batch_size,
                   help="examples per forward pass (memory only: the numbers do not depend on it)")
    p.add_argument("--seq-len", type=int, default=ProbeSettings.seq_len, help="sequence length T of the batch")
    p.add_argument("--vocab-lo", type=int, default=ProbeSettings.vocab_lo, help="lowest token id drawn")
    p.add_argument("--vocab-hi", type=int, default=ProbeSettings.vocab_hi, help="token ids drawn are below this")
    p.add_argument("--no-ablation", action="store_true", help="skip the three group-ablation passes")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run the repo's own modelling code (only for repos you trust)")


def settings_from_args(args: argparse.Namespace) -> ProbeSettings:
    defaults = {f.name: getattr(ProbeSettings(), f.name) for f in fields(ProbeSettings)}
    return ProbeSettings(**{
        **defaults,
        "n_examples": args.n_examples, "n_pr": args.n_pr, "batch_size": args.batch_size,
        "seq_len": args.seq_len, "vocab_lo": args.vocab_lo, "vocab_hi": args.vocab_hi,
        "dtype": args.dtype, "ablation": not args.no_ablation,
    })


def resolve(args: argparse.Namespace) -> loading.ResolvedRevision:
    folder = Path(args.model)
    if folder.is_dir():
        if (folder / "config.json").is_file():
            if args.revision:
                raise loading.LoadingError(f"{folder} is a single checkpoint; drop --revision or pass its parent folder")
            return loading.resolve_local(folder.parent, folder.name)
        if not args.revision:
            raise loading.LoadingError(f"{folder} has no config.json; pass --revision to pick {folder}/<revision>/")
        return loading.resolve_local(folder, args.revision)
    return loading.resolve_revision(args.model, args.revision or "main", cache_dir=args.cache_dir)


def run(args: argparse.Namespace) -> int:
    from headwatch.probes.measure import measure  # deferred: torch and transformers

    settings = settings_from_args(args)
    try:
        resolved = resolve(args)
        checkpoint = loading.load_checkpoint(
            resolved, dtype=args.dtype, device=loading.pick_device(args.device),
            attn_implementation="sdpa", trust_remote_code=args.trust_remote_code,
        )
    except loading.LoadingError as e:
        print(f"headwatch measure: {e}", file=sys.stderr)
        return 2
    # A local run is named by its absolute folder (what a panel's repo = "DIR" resolves to), so a record
    # folder written from anywhere matches its panel entry; a Hub model by its repo id.
    model_name = str(Path(resolved.repo).resolve()) if resolved.kind == "local" else args.model
    record = measure(checkpoint.model, settings, model_name=model_name, revision=resolved.revision,
                     tokens_seen=args.tokens_seen)
    record.provenance.update(weights_hash=checkpoint.weights_hash, identity=resolved.identity,
                             commit=resolved.commit, load_seconds=round(checkpoint.load_seconds, 3))
    if checkpoint.plan is not None:
        record.provenance.update(checkpoint.plan.provenance())
    record.to_json(args.out)
    circuit = [a.heads for a in record.ablations if a.name == "induction_circuit"]
    print(f"wrote {args.out}: {record.n_layers}x{record.n_heads} heads, top-1 {record.task.top1:.3f}, "
          f"induction circuit {list(circuit[0]) if circuit else '[]'}, {record.provenance['seconds']:.1f} s")
    return 0
