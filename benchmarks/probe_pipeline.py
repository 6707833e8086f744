"""Benchmark: the cost of probing one checkpoint, three ways (run by hand; results in docs/benchmarks.md).

    python benchmarks/probe_pipeline.py [--examples 256] [--seq-len 256] [--batch-size 16] [--json OUT]

Same model (GPTNeoX, 6 layers, d_model 256, 8 heads, vocab 10000, random init, saved as
safetensors) and batch (N examples of length T) for each way:

Every way's time includes its own model loads.

(a) floor: load once, a plain SDPA forward pass over the batch, no capture;
(b) the author's published pipeline: load, eager attention with output_attentions=True at batch
    size 4 for the screen, then a second load and a hooked pass for the PR outputs;
(c) headwatch ``measure``: load once, one captured pass for screen, PR and task metrics, at SPEC's
    defaults otherwise (its bootstrap intervals and Sink_1^eps included), no ablation pass.

PR is computed over the first ``min(500, N)`` examples (SPEC's 500, or the whole batch when smaller)
in (b) and (c) alike.

Each way runs in a fresh subprocess so its peak resident memory (ru_maxrss) is its own.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from headwatch.probes.architectures import head_geometry, out_proj_modules
from headwatch.probes.batch import induction_batch
from headwatch.probes.measure import measure
from headwatch.probes.participation import participation_ratio
from headwatch.probes.record import ProbeSettings
from headwatch.probes.selectivity import SelectivityAccumulator, baseline_positions

WAYS = {
    "a": "plain forward (SDPA, no capture): the floor",
    "b": "author's pipeline (eager output_attentions at batch 4, then reload + hooked PR pass)",
    "c": "headwatch measure (load once, one captured pass)",
}


def build_model(folder: Path) -> None:
    from transformers import AutoModelForCausalLM, GPTNeoXConfig

    torch.manual_seed(0)
    config = GPTNeoXConfig(hidden_size=256, num_attention_heads=8, num_hidden_layers=6,
                           intermediate_size=1024, vocab_size=10000, rotary_pct=1.0,
                           max_position_embeddings=512)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder, safe_serialization=True)


def load(folder: Path, attn: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attn, use_safetensors=True).eval()


def way_a(folder: Path, settings: ProbeSettings) -> None:
    batch = induction_batch(settings.n_examples, settings.seq_len, settings.vocab_lo, settings.vocab_hi, settings.seed)
    model = load(folder, "sdpa")
    with torch.inference_mode():
        for start in range(0, len(batch), settings.batch_size):
            model(input_ids=batch.tokens[start:start + settings.batch_size], use_cache=False)


def way_b(folder: Path, settings: ProbeSettings) -> None:
    batch = induction_batch(settings.n_examples, settings.seq_len, settings.vocab_lo, settings.vocab_hi, settings.seed)
    model = load(folder, "eager")
    g = head_geometry(model)
    T = settings.seq_len
    acc = SelectivityAccumulator(g.n_layers, g.n_heads, T, baseline_positions(T, 50, 0))
    with torch.inference_mode():
        for start in range(0, len(batch), 4):
            part = batch.slice(start, start + 4)
            out = model(input_ids=part.tokens, output_attentions=True, use_cache=False)
            rows = torch.stack([a[:, :, -1, :] for a in out.attentions], dim=1)
            acc.update(rows, part.ab, part.valid)
    acc.selectivity()
    del model
    model = load(folder, "sdpa")  # the author's PR script loads the model again
    outputs: dict[int, list[torch.Tensor]] = {l: [] for l in range(g.n_layers)}
    handles = [p.register_forward_pre_hook(lambda _m, a, l=l: outputs[l].append(a[0][:, -1].clone()))
               for l, p in enumerate(out_proj_modules(model))]
    n_pr = min(settings.n_pr, len(batch))
    with torch.inference_mode():
        for start in range(0, n_pr, settings.batch_size):
            model(input_ids=batch.tokens[start:min(start + settings.batch_size, n_pr)], use_cache=False)
    for h in handles:
        h.remove()
    stacked = torch.stack([torch.cat(outputs[l]).view(n_pr, g.n_heads, g.d_head).transpose(0, 1)
                           for l in range(g.n_layers)])
    participation_ratio(stacked)


def way_c(folder: Path, settings: ProbeSettings) -> None:
    model = load(folder, "sdpa")
    measure(model, settings, model_name="bench", revision="r", progress=False)


def child(way: str, folder: Path, settings: ProbeSettings) -> dict:
    start = time.perf_counter()
    {"a": way_a, "b": way_b, "c": way_c}[way](folder, settings)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"way": way, "seconds": round(seconds, 2), "peak_rss_mib": round(peak_mib)}


def load_seconds(folder: Path) -> float:
    start = time.perf_counter()
    load(folder, "sdpa")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", choices=sorted(WAYS), help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    # SPEC's 500 PR examples and 64 Sink^eps examples, or the whole batch when it is smaller (measure
    # refuses more than the batch).
    settings = ProbeSettings(n_examples=args.examples, seq_len=args.seq_len,
                             n_pr=min(ProbeSettings.n_pr, args.examples),
                             sink_examples=min(ProbeSettings.sink_examples, args.examples),
                             batch_size=args.batch_size, ablation=False)
    if args.child:
        print(json.dumps(child(args.child, args.folder, settings)))
        return
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        build_model(folder)
        load_s = load_seconds(folder)
        results = {}
        for way in WAYS:
            out = subprocess.run(
                [sys.executable, __file__, "--child", way, "--folder", str(folder), "--examples", str(args.examples),
                 "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size)],
                check=True, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"},
            )
            results[way] = json.loads(out.stdout.strip().splitlines()[-1])
    a, b, c = (results[w]["seconds"] for w in "abc")
    summary = {
        "settings": {"examples": args.examples, "seq_len": args.seq_len, "batch_size": args.batch_size,
                     "threads": torch.get_num_threads(), "torch": torch.__version__},
        "load_seconds": round(load_s, 2),
        "results": results,
        "c_over_a": round(c / a, 3),
        "c_over_b": round(c / b, 3),
        # the machine may be shared: the ratios, measured side by side, are what to read
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(f"{'way':<4} {'seconds':>8} {'peak RSS MiB':>13}  what")
    for way, text in WAYS.items():
        r = results[way]
        print(f"({way})  {r['seconds']:>8.2f} {r['peak_rss_mib']:>13}  {text}")
    print(f"one extra load: {load_s:.2f} s; (c)/(a) = {summary['c_over_a']} (each way includes its load(s); target <= 1.15); "
          f"(c)/(b) = {summary['c_over_b']} (target <= 0.6); load average {load_before[0]:.1f} -> "
          f"{summary['load_after'][0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
