"""``headwatch measure``: probe one checkpoint and write its measurement record as JSON.

    headwatch measure --model EleutherAI/pythia-1b --revision step3000 --out pythia-step3000.json
    headwatch measure --model runs/seed1 --revision step512 --out seed1-step512.json   # DIR/<revision>/
    headwatch measure --model runs/seed1/step512 --out seed1-step512.json             # one folder
    headwatch measure --model runs/seed1/step512 --out -                              # JSON to stdout

Everything is checked before the compute, in this order: every argument (headwatch.validation's
rules, as argparse types, then the rules that tie settings together), the output path, the
device, the checkpoint's location, its config.json against the settings (vocabulary, positions),
its weight files; the weights must then cover the model (fixtures/preflight.py).

A job array writing ``--out DIR/<model>/<revision>.json`` makes a folder that ``headwatch judge``,
``headwatch report`` and ``pytest claims`` read with ``--reference-dir DIR`` (docs/scale-out.md).
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from pathlib import Path

from headwatch import selection, validation
from headwatch.files import check_output_file, json_text
from headwatch.fixtures import loading
from headwatch.fixtures.provider import measure_checkpoint
from headwatch.probes.record import ProbeSettings
from headwatch.validation import CLI_FLAGS, InputError, argtype


EXAMPLES = """examples:
  headwatch measure --model EleutherAI/pythia-1b --revision step3000 --out pythia-step3000.json
  headwatch measure --model runs/seed1 --revision step512 --out seed1-step512.json   DIR/<revision>/
  headwatch measure --model runs/seed1/step512 --out -                              one folder; JSON to stdout
"""


def flag(field: str) -> str:
    """How this command spells a ProbeSettings field in messages."""
    return CLI_FLAGS.get(field, field)


def add_arguments(p: argparse.ArgumentParser) -> None:
    defaults = ProbeSettings()
    p.add_argument("--model", required=True, help="Hub repo id (org/name) or a local folder")
    p.add_argument("--revision", help="branch, tag or commit (Hub), or DIR/<revision> (local); default: main")
    p.add_argument("--out", required=True,
                   help="where to write the record (JSON); '-' writes it to stdout. Checked before the compute: "
                        "an existing symlink, FIFO, device or folder is refused")
    p.add_argument("--tokens-seen", type=argtype(validation.TOKENS, "--tokens-seen"),
                   help="training tokens at this checkpoint, recorded as is (default: unknown; judge, report and "
                        "pytest --reference-dir then take them from the panel's tokens rule)")
    # The shared options, as every command takes them; a single checkpoint has no panel to default to.
    selection.add_options(p.add_argument, ("device", "dtype", "n_examples", "hub_cache_dir"), dtype={
        "default": defaults.dtype,
        "help": "load and probe dtype (fp16 underflows the baseline attention of early checkpoints)"}, n_examples={
        "default": defaults.n_examples, "help": "examples in the induction batch"})
    for field, text in (("n_pr", "examples whose head outputs enter PR (1 to --n-examples)"),
                        ("batch_size", "examples per forward pass (memory only: the numbers do not depend on it)"),
                        ("seq_len", "sequence length T of the batch (42 or more, and within the model's positions)"),
                        ("vocab_lo", "lowest token id drawn"),
                        ("vocab_hi", "token ids drawn are below this (within the model's vocabulary)")):
        p.add_argument(CLI_FLAGS[field], type=argtype(field, CLI_FLAGS[field]),
                       default=None if field == "n_pr" else getattr(defaults, field),
                       help=text + (f" (default: {defaults.n_pr}, or --n-examples if fewer)" if field == "n_pr" else ""))
    p.add_argument("--no-ablation", action="store_true", help="skip the three group-ablation passes")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run the repo's own modelling code (only for repos you trust)")
    p.add_argument("--allow-pickle", action="store_true",
                   help="read a revision whose only weights are a pickle (pytorch_model.bin) through "
                        "torch.load(weights_only=True), which rebuilds tensors and refuses anything else; "
                        "safetensors are still read wherever the revision has them")


def settings_from_args(args: argparse.Namespace) -> ProbeSettings:
    """The probe settings the arguments ask for, checked against every rule that needs no model."""
    given = {"n_examples": args.n_examples, "batch_size": args.batch_size,
             "seq_len": args.seq_len, "vocab_lo": args.vocab_lo, "vocab_hi": args.vocab_hi,
             "dtype": args.dtype, "ablation": not args.no_ablation}
    if args.n_pr is not None:
        given["n_pr"] = args.n_pr
    validation.check_probe_settings(given, flag)
    n_pr = given.get("n_pr", min(ProbeSettings.n_pr, args.n_examples))  # the default is capped at the batch
    return ProbeSettings(**{**asdict(ProbeSettings()), **given, "n_pr": n_pr})


def _looks_like_a_path(text: str) -> bool:
    """A --model that cannot be a Hub repo id (``org/name``): absolute, ./ ../ ~, or not one slash."""
    return text.startswith(("/", ".", "~")) or text.count("/") != 1 or os.sep != "/" and os.sep in text


def resolve(args: argparse.Namespace) -> loading.ResolvedRevision:
    model = validation.nonempty_text(args.model, "--model")
    folder = Path(model).expanduser()
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--model: {folder} is a file; give the checkpoint's folder (holding config.json and "
                         "*.safetensors), its parent with --revision, or a Hub repo id (org/name)")
    if folder.is_dir():
        if (folder / "config.json").is_file():
            if args.revision:
                raise loading.LoadingError(f"{folder} is a single checkpoint; drop --revision or pass its parent folder")
            return loading.resolve_local(folder.parent, folder.name, allow_pickle=args.allow_pickle)
        if not args.revision:
            raise loading.LoadingError(f"{folder} has no config.json; pass --revision to pick {folder}/<revision>/")
        return loading.resolve_local(folder, args.revision, allow_pickle=args.allow_pickle)
    if _looks_like_a_path(model):
        raise InputError(f"--model: no folder {folder} (from {Path.cwd()}), and {model!r} is not a Hub repo id "
                         "(org/name); give an existing checkpoint folder or a repo id")
    try:
        hub_cache = str(Path(args.hub_cache_dir).expanduser()) if args.hub_cache_dir else None
        return loading.resolve_revision(model, args.revision or "main", cache_dir=hub_cache,
                                        allow_pickle=args.allow_pickle)
    except loading.LoadingError as e:
        raise type(e)(f"{e} (and there is no local folder {model!r} in {Path.cwd()})") from None


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)  # the checks that need nothing come before any heavy import
    out = check_output_file(args.out, "--out")  # None: stdout

    device = loading.pick_device(args.device)
    resolved = resolve(args)
    # A local run is named by its absolute folder (what a panel's repo = "DIR" resolves to), so a record
    # folder written from anywhere matches its panel entry; a Hub model by its repo id.
    model_name = str(Path(resolved.repo).resolve()) if resolved.in_folder else args.model
    # the provider's way, with no panel: one record shape whichever front end measured it
    record = measure_checkpoint(resolved, settings, device=device, model_name=model_name, tokens_seen=args.tokens_seen,
                                attn_implementation="sdpa", trust_remote_code=args.trust_remote_code, setting_name=flag,
                                progress=sys.stderr.isatty())
    if out is None:
        sys.stdout.write(json_text(record.to_dict()))
        sys.stdout.flush()
    else:
        record.to_json(out)
    circuit = [a.heads for a in record.ablations if a.name == "induction_circuit"]
    print(f"wrote {out if out is not None else 'stdout'}: {record.n_layers}x{record.n_heads} heads, "
          f"top-1 {record.task.top1:.3f}, induction circuit {list(circuit[0]) if circuit else '[]'}, "
          f"{record.n_examples_valid} of {settings.n_examples} examples valid, {record.provenance['seconds']:.1f} s",
          file=sys.stdout if out is not None else sys.stderr)
    return 0
