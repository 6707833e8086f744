"""One rule for every failure: the user's input, files or machine is bad input (headwatch exits 2,
pytest 4) with a message naming the thing and what to do; exit 3 only for a defect of headwatch.

- :func:`test_every_raise_site_is_bad_input_or_a_declared_defect` walks every ``raise`` of the
  installed package (its syntax tree): each raises an ``InputError`` subclass (or pytest's / argparse's
  usage error), or is listed in :data:`DEFECTS` with why no user can reach it with bad input.
- The OSError kinds that are the machine's doing (a full disk, a permission, a read-only file
  system, a symlink loop) and running out of memory are classed at one place,
  ``headwatch.validation.input_error_from``, which the CLI, the plugin and ``write_atomic`` ask.
- Then the failures the hostile-input catalogue found classed as crashes: non-finite weights, a file
  system that fills up while writing, an environment variable it cannot hold, a folder option
  given a file (docs/hostile-inputs.md, "Exit classes").
"""
from __future__ import annotations

import argparse
import ast
import builtins
import errno
import importlib
import os
import typing
from pathlib import Path

import pytest

from headwatch.validation import EnvironmentProblem, InputError, input_error_from

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
#: The installed namespace's folders (pyproject's package-dir).
PACKAGES = {"headwatch": "headwatch", "probes": "headwatch.probes", "fixtures": "headwatch.fixtures",
            "model_organisms": "headwatch.model_organisms", "training": "headwatch.training", "fanout": "headwatch.fanout",
            "claims": "headwatch.claims"}

#: Raise sites of exceptions that are not bad input, each with why it is a defect (a broken promise
#: between headwatch's own parts) and never the answer to something a user gave. Keyed by
#: (file, enclosing function, what is raised). A new raise that a user's input can reach must raise
#: an InputError subclass instead.
DEFECTS: dict[tuple[str, str, str], str] = {
    # the standard library's own contract checks, on values headwatch computed
    ("headwatch/paths.py", "default_cache_dir", "ValueError"): "kind is one of headwatch's constants",
    ("headwatch/stats.py", "clopper_pearson", "ValueError"): "counts computed by headwatch from validated records",
    ("headwatch/stats.py", "sequence_bootstrap_totals", "ValueError"):
        "hits of a CopyReading, which record validation checks for one count per sequence",
    ("probes/copying.py", "repeated_batch", "ValueError"): "measure() passes a half capped at the token range (effective_half)",
    ("headwatch/stats.py", "fisher_less", "ValueError"): "counts computed by headwatch from validated records",
    ("headwatch/stats.py", "ratio_below", "ValueError"): "counts from validated records; the ratio is SPEC's",
    ("headwatch/stats.py", "_check_counts", "ValueError"): "counts computed by headwatch from validated records",
    ("headwatch/stats.py", "ratio_below_unconditional", "ValueError"): "the ratio is SPEC's ablation_max_share",
    ("headwatch/stats.py", "mcnemar_less", "ValueError"): "discordant counts headwatch computes from paired outcomes",
    ("headwatch/stats.py", "paired_ratio_below", "ValueError"): "paired counts headwatch computes; the ratio is SPEC's",
    ("claims/population.py", "audit", "ValueError"): "the rule comes from a panel key the schema restricts to "
                                                     "PLACEMENT_RULES (fixtures/panels/schema.py)",
    ("headwatch/stats.py", "count_from_rate", "ValueError"): "its one caller with user data (claims/trajectory.py:"
                                                           "top1_count) turns it into an InputError",
    ("headwatch/stats.py", "bootstrap_weights", "ValueError"): "sizes from a validated ProbeSettings",
    ("headwatch/stats.py", "nested_draw_probability", "ValueError"): "set sizes claims/trajectory counts from one "
                                                                      "validated record",
    ("headwatch/schema.py", "_convert", "TypeError"): "a type hint from_data was not written for: a schema's class",
    ("claims/check.py", "check_verdict", "ClaimCrashed"): "a claim's judge raised (its verdict 'crashed'): a bug in "
                                                          "that claim, an ERROR in pytest, never a finding",
    ("headwatch/files.py", "refuse_non_finite", "ValueError"): "json's parse hook; every reader turns it into a "
                                                               "RecordError or a corrupt cache entry",
    ("headwatch/__main__.py", "", "SystemExit"): "python -m headwatch passing main()'s exit status on",
    # the probe engine's internal contracts (settings are validated before a model is loaded)
    ("probes/ablation.py", "ablated", "ValueError"): "heads come from the screen of the same model",
    ("probes/ablation.py", "prefix_output.stop", "_PrefixDone"): "ends a forward pass on purpose; caught in prefix_output",
    ("probes/ablation.py", "prefix_output", "RuntimeError"): "the forward pass and the layer table disagree",
    ("probes/architectures.py", "residual_writer_parameters", "ValueError"): "the architecture table itself (organism growth)",
    ("probes/capture.py", "CaptureRecorder.stacked", "RuntimeError"): "the capture hooks and the forward pass disagree",
    ("probes/capture.py", "CaptureRecorder.first_position", "RuntimeError"): "asked before it was recorded",
    ("probes/intervals.py", "attention_replicates", "ValueError"): "array shapes of one screen",
    ("probes/record.py", "negligible_heads", "ValueError"): "a class name of headwatch's screen and the seq_len of "
                                                            "validated settings",
    ("probes/participation.py", "participation_ratio", "ValueError"): "tensor shape of one screen",
    ("probes/selectivity.py", "baseline_positions", "ValueError"): "validation.check_probe_settings bounds seq_len first",
    ("probes/selectivity.py", "SelectivityAccumulator.examples", "ValueError"): "asked without keep_examples",
    ("probes/selectivity.py", "SelectivityAccumulator.attention", "ValueError"): "measure() refuses an empty batch first",
    ("probes/selectivity.py", "bos_fraction", "ValueError"): "records are validated to n_layers, n_heads >= 1",
    ("probes/record.py", "parse_head_key", "ValueError"): "caught on the next line and raised as an InputError",
    # the cache reader's own signals: caught in _read, the entry moved aside and recomputed
    ("fixtures/cache.py", "MeasurementCache._read", "ValueError"): "caught by _read: a corrupt entry, recomputed",
    ("fixtures/panels/sources.py", "Source.locate", "ValueError"): "callers locate only models whose source has "
                                                                      "checkpoints (not one that reads records)",
    # organisms: recipes are code, not input (model_organisms/recipes.py), checked when defined
    ("model_organisms/recipes.py", "Organism.tokens_seen", "ValueError"): "revisions of the recipe's own schedule",
    ("model_organisms/__init__.py", "__getattr__", "AttributeError"): "Python's protocol for an attribute a "
                                                                          "module lacks (the runner loads on demand)",
    ("model_organisms/specs.py", "DataSpec.__post_init__", "ValueError"): "a recipe constant",
    ("model_organisms/specs.py", "GrowthSpec.__post_init__", "ValueError"): "a recipe constant",
    ("model_organisms/head_dropout.py", "HeadDropout.__init__", "ValueError"): "a recipe constant",
    ("model_organisms/invariant.py", "compose_layer_norms", "ValueError"): "the architectures organisms train",
    ("model_organisms/numerics.py", "path_environ", "ValueError"): "names from NAMED_PATHS (benchmarks)",
    ("model_organisms/specs.py", "log_schedule", "ValueError"): "a recipe constant",
    ("model_organisms/specs.py", "Recipe.__post_init__", "ValueError"): "a recipe constant",
    ("model_organisms/specs.py", "Recipe.model_class", "NotImplementedError"): "an abstract method",
    ("model_organisms/specs.py", "Recipe.model_config", "NotImplementedError"): "an abstract method",
    ("model_organisms/specs.py", "Recipe.build_model", "RuntimeError"): "growth and the architecture table disagree",
    ("model_organisms/specs.py", "_check_choice", "ValueError"): "a recipe constant",
    ("model_organisms/runner.py", "train_in_subprocesses", "TrainingError"):
        "a training child failed; its own error and log lines are printed above (the class is the child's)",
    ("model_organisms/runner.py", "TrainingStep.start", "TrainingError"):
        "the training step ended before holding its locks: its own output (a failed child, a crash) comes with it; "
        "bad input was refused by the caller, which checked the same selection before starting it",
    ("headwatch/cli/organisms.py", "_Renamed.__call__", "ArgumentError"):
        "argparse's own usage error (--seed for --seeds): argparse prints it and exits 2",
    ("headwatch/cli/organisms.py", "run.interrupted", "KeyboardInterrupt"):
        "SIGTERM (a front end stopping the step) taken as Ctrl-C: the interrupt path, exit 130, children stopped",
    # --jobs: what a worker process raised, raised again in the main process in its model's turn
    ("headwatch/cli/jobs.py", "InOrder.__iter__", "outcome.failed.error"):
        "the exception the model's work raised in a worker: its class is the one --jobs 1 raises (bad input stays "
        "bad input, exit 2; a defect stays one, exit 3)",
    ("headwatch/cli/jobs.py", "InOrder._wait", "_portable"):
        "a result that could not cross processes, as its class of error (_portable: an InputError for bad input)",
    ("fixtures/provider.py", "Provider.revision_record.compute", "NeedsMeasuring"):
        "a read-only provider's signal to the --jobs machinery, which measures that model in the main process",
    # test helpers shipped in the package (tiny models, planted data)
    ("claims/synthetic.py", "planted_trajectory", "ValueError"): "planted data of the negative controls",
    ("claims/synthetic_population.py", "member_records", "ValueError"): "planted data of the negative controls",
    ("claims/figures.py", "population_trajectory_figure", "ValueError"): "quantity is one of its two callers' constants",
    ("training/trainloop.py", "_toml", "TypeError"): "the panel a run writes from its own validated settings",
    # the judge's quantities on records the provider validated and ordered
    ("claims/trajectory.py", "by_tokens", "ValueError"): "the provider fills tokens or refuses the record",
    ("claims/trajectory.py", "series_shape", "ValueError"): "a trajectory has >= 1 revision",
    ("claims/trajectory.py", "head_lead", "ValueError"): "d_head > 1: judge_f5 asks has_pr first",
}

#: Raises of a name bound to an InputError another way than an ``except`` clause.
INPUT_ERRORS_BY_NAME: dict[tuple[str, str, str], str] = {
    ("fixtures/provider.py", "Provider.revision_record", "e"): "the LoadingError try_resolve returned",
    ("headwatch/files.py", "write_atomic", "problem"): "input_error_from's EnvironmentProblem",
}

def _usage_types() -> tuple[type, ...]:
    """Bad input, and the usage errors of pytest (exit 4) and argparse (exit 2)."""
    return (InputError, pytest.UsageError, argparse.ArgumentTypeError)


class _Raises(ast.NodeVisitor):
    """Every ``raise X`` with its enclosing function's qualified name and the except clauses around it."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.handlers: list[ast.ExceptHandler] = []
        self.found: list[tuple[str, ast.Raise, list[ast.ExceptHandler]]] = []

    def _scoped(self, node) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self.handlers.append(node)
        self.generic_visit(node)
        self.handlers.pop()

    def visit_Raise(self, node: ast.Raise) -> None:
        if node.exc is not None:
            self.found.append((".".join(self.scope), node, list(self.handlers)))
        self.generic_visit(node)


def _raised_type(expr: ast.expr, module, handlers: list[ast.ExceptHandler], local_imports: dict):
    """The class ``expr`` raises (a call's function, a name, ``type(e)``), or None when it cannot be
    told from the module: a local name that no except clause binds."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    if isinstance(target, ast.Call) and ast.unparse(target.func) == "type" and target.args:  # raise type(e)(...)
        target = target.args[0]
    if isinstance(target, ast.Name):
        for h in reversed(handlers):
            if h.name == target.id and h.type is not None:  # except T as e: raise e / type(e)(...)
                caught = eval(ast.unparse(h.type), vars(module))  # noqa: S307 - our own module's names
                return caught if isinstance(caught, tuple) else (caught,)
    try:
        value = eval(ast.unparse(target), {**vars(module), **local_imports})  # noqa: S307 - our own names
    except NameError:
        return None
    if isinstance(value, type):
        return (value,)
    hints = typing.get_type_hints(value) if callable(value) else {}
    return (hints["return"],) if isinstance(hints.get("return"), type) else None  # a factory: _missing_extra


def _sites():
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.parent.name == "claims" and path.name.startswith("test_"):
                continue  # claim tests: their verdicts are assertions
            dotted = package + "." + ".".join(path.relative_to(ROOT / folder).with_suffix("").parts)
            # __main__ runs the CLI when imported: its names are the builtins'
            module = builtins if path.name == "__main__.py" else importlib.import_module(dotted.removesuffix(".__init__"))
            tree = ast.parse(path.read_text(encoding="utf-8"))
            walker = _Raises()
            walker.visit(tree)
            for scope, node, handlers in walker.found:
                yield rel, scope, node, handlers, module, _imports_in_functions(tree, dotted.rsplit(".", 1)[0])


def _imports_in_functions(tree: ast.Module, package: str) -> dict:
    """Names bound by imports anywhere in the file (deferred imports inside functions included)."""
    names: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = importlib.import_module(("." * node.level) + (node.module or ""), package) if node.level \
                else importlib.import_module(node.module)
            for a in node.names:  # a name the module has (even a falsy one: TYPE_CHECKING), else a submodule
                names[a.asname or a.name] = (getattr(source, a.name) if hasattr(source, a.name)
                                             else importlib.import_module(f"{source.__name__}.{a.name}"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = importlib.import_module(a.name if a.asname else a.name.split(".")[0])
    return names


def test_every_raise_site_is_bad_input_or_a_declared_defect():
    usage = _usage_types()
    undeclared, used = [], set()
    for rel, scope, node, handlers, module, local_imports in _sites():
        types = _raised_type(node.exc, module, handlers, local_imports)
        what = ast.unparse(node.exc.func if isinstance(node.exc, ast.Call) else node.exc)
        if types is not None and all(isinstance(t, type) and issubclass(t, usage) for t in types):
            continue
        for key in ((rel, scope, what), (rel, scope, what.rsplit(".", 1)[-1])):
            if key in DEFECTS or key in INPUT_ERRORS_BY_NAME:
                used.add(key)
                break
        else:
            undeclared.append(f"{rel}:{node.lineno} in {scope or '<module>'}: raise {what}")
    assert not undeclared, ("raise sites of exceptions that are not bad input and not declared defects (raise an "
                            "InputError subclass, or add the site to DEFECTS with why no user reaches it):\n  "
                            + "\n  ".join(undeclared))
    stale = sorted((set(DEFECTS) | set(INPUT_ERRORS_BY_NAME)) - used)
    assert not stale, f"entries of DEFECTS / INPUT_ERRORS_BY_NAME with no such raise site any more: {stale}"


# ---- one place classes the machine's refusals -------------------------------------------------------


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.ENOTDIR, errno.ELOOP])
def test_os_errors_of_the_machine_are_bad_input_naming_the_path(code):
    problem = input_error_from(OSError(code, os.strerror(code), "/data/out.json"))
    assert isinstance(problem, EnvironmentProblem) and "/data/out.json" in str(problem)
    assert errno.errorcode[code] in str(problem)


@pytest.mark.parametrize("exc", [OSError(errno.ENOENT, "No such file or directory"), KeyError("x"), RuntimeError("bug"),
                                 OSError(errno.EBADF, "Bad file descriptor")])
def test_other_exceptions_stay_defects(exc):
    assert input_error_from(exc) is None


def test_running_out_of_memory_is_the_machine():
    class OutOfMemoryError(RuntimeError):  # torch's, matched by name (torch is not imported for it)
        pass

    assert "GPU ran out of memory" in str(input_error_from(OutOfMemoryError("CUDA out of memory")))
    assert "ran out of memory" in str(input_error_from(MemoryError()))


# ---- the catalogue's crashes that were the user's doing ----------------------------------------------

MEASURE = ["measure", "--n-examples", "8", "--n-pr", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300",
           "--batch-size", "4", "--device", "cpu"]


@pytest.fixture(scope="module")
def nan_checkpoint(tmp_path_factory) -> Path:
    """A tiny GPTNeoX whose first attention weight holds one NaN."""
    from safetensors.torch import load_file, save_file

    from headwatch_testing.tiny import tiny_model

    folder = tmp_path_factory.mktemp("nan") / "step0"
    tiny_model("gpt_neox", seed=0, attn_implementation="eager").save_pretrained(folder)
    weights = load_file(str(folder / "model.safetensors"))
    key = next(k for k in weights if k.endswith("layers.0.attention.query_key_value.weight"))
    weights[key][0, 0] = float("nan")
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def test_non_finite_weights_are_bad_input_naming_the_tensor(headwatch_cli, nan_checkpoint, tmp_path):
    r = headwatch_cli(*MEASURE, "--model", nan_checkpoint, "--out", tmp_path / "o.json")
    assert r.code == 2, r.err[-2000:]
    assert "query_key_value.weight" in r.err and "NaN or inf" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "o.json").exists()


def test_a_disk_that_fills_up_while_writing_is_bad_input_naming_the_file(headwatch_cli, checkpoint, tmp_path,
                                                                           monkeypatch):
    import headwatch.files as files

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    r = headwatch_cli(*MEASURE, "--model", checkpoint, "--out", tmp_path / "o.json")
    assert r.code == 2, r.err[-2000:]
    assert f"writing {tmp_path / 'o.json'}" in r.err and "ENOSPC" in r.err and "Traceback" not in r.err
    assert list(tmp_path.iterdir()) == [], "no temporary left behind"


@pytest.mark.parametrize("value,says", [("abc", "not a memory size"), ("9" * 30 + "TiB", "more bytes than")])
def test_an_environment_variable_it_cannot_hold_is_named(headwatch_cli, checkpoint, tmp_path, monkeypatch, value, says):
    monkeypatch.setenv("HEADWATCH_MEMORY_LIMIT", value)
    r = headwatch_cli(*MEASURE, "--model", checkpoint, "--out", tmp_path / "o.json")
    assert r.code == 2 and "HEADWATCH_MEMORY_LIMIT" in r.err and says in r.err, r.err[-2000:]


def test_the_training_numerics_variable_is_named(monkeypatch):
    from headwatch.model_organisms import numerics

    monkeypatch.setenv(numerics.MODE_ENV, "fast")
    with pytest.raises(InputError, match="HEADWATCH_TRAIN_NUMERICS='fast'"):
        numerics.mode()


@pytest.mark.parametrize("option", ["--cache-dir", "--log-dir", "--hub-cache-dir"])
def test_a_folder_option_given_a_file_is_named_before_any_work(headwatch_cli, tmp_path, monkeypatch, option):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "cache"))
    r = headwatch_cli("measure-panel", "--panel", "published", "--dry-run", option, tmp_path / "afile")
    assert r.code == 2, r.err[-2000:]
    assert f"{tmp_path / 'afile'} is a regular file, not a folder" in r.err and "Traceback" not in r.err
    assert (tmp_path / "afile").read_text() == "x"


def test_a_folder_option_under_a_file_names_the_file(tmp_path):
    from headwatch.files import check_folder

    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError) as e:
        check_folder(tmp_path / "afile" / "sub" / "deeper", "--cache-dir")
    assert f"cannot be created: {tmp_path / 'afile'} is a file, not a folder" in str(e.value)
    assert check_folder(tmp_path / "new" / "sub", "--cache-dir") == tmp_path / "new" / "sub"  # missing: fine


def test_a_cache_folder_variable_naming_a_file_is_named(headwatch_cli, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "afile"))
    r = headwatch_cli("judge", "--models", "pythia-1b")
    assert r.code == 2 and "HEADWATCH_CACHE_DIR" in r.err and "not a folder" in r.err, r.err[-2000:]


def test_the_hub_cache_of_measure_given_a_file_is_named(headwatch_cli, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = headwatch_cli(*MEASURE, "--model", "tiny-org/neox", "--hub-cache-dir", tmp_path / "afile", "--out", tmp_path / "o.json")
    assert r.code == 2 and "the Hub cache" in r.err and "not a folder" in r.err, r.err[-2000:]


# ---- a second clone of the repository --------------------------------------------------------------


def test_claim_tests_of_another_clone_name_the_active_claims_folder(pytester, tmp_path):
    """``pytest claims`` in a second clone used to error per test with "model_entry is parametrised by
    headwatch ... request it from one"; it is one usage error (exit 4) naming the active claims folder."""
    import shutil

    from headwatch import plugin

    clone = pytester.path / "clone2" / "claims"
    shutil.copytree(plugin.CLAIMS_DIR, clone, ignore=shutil.ignore_patterns("__pycache__"))
    ini = pytester.makeini("[pytest]\n")
    result = pytester.runpytest_inprocess(str(clone), "-c", str(ini), "--rootdir", str(pytester.path), "-q",
                                          "-p", "no:xdist", "-p", "no:cacheprovider", "--import-mode=importlib",
                                          "--panel", "published")
    err = result.stderr.str()
    assert result.ret == 4, (result.ret, err[-2000:], result.stdout.str()[-2000:])
    assert f"claim tests in {plugin.CLAIMS_DIR}, the active claims folder" in err and str(clone) in err, err[-2000:]
    assert "request it from one" not in result.stdout.str()
