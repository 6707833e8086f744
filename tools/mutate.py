"""Mutation run over the judge and its statistics: every mutant must turn a test red.

    .venv/bin/python tools/mutate.py                      # the judge, the claims, populations, stats (docs/statistics.md)
    .venv/bin/python tools/mutate.py --spec               # SPEC's table: each constant moved 5% each way
    .venv/bin/python tools/mutate.py --jobs 2 --out FILE  # two mutants at a time; the table also into FILE
    .venv/bin/python tools/mutate.py --only judge_f3      # mutants whose id contains a string
    .venv/bin/python tools/mutate.py --list               # the mutants, run nothing

Operators (standard library only: ``ast``), applied one at a time to the files of :data:`TARGETS` (the
judge, the built-in claims' modules, the trajectory functions, verdicts, populations, formatting and
statistics):

- comparisons: ``<`` <-> ``<=`` and ``>`` <-> ``>=`` (the boundary), and each comparison negated
  (``<`` -> ``>=``, ``==`` -> ``!=``, ``is`` -> ``is not``, ``in`` -> ``not in``);
- ``and`` <-> ``or``; each operand of an ``and``/``or`` dropped; ``not x`` -> ``x``;
- ``+`` <-> ``-``;
- numeric constants: an integer n -> n + 1, a float x -> 1.05 x (0.0 -> 0.5);
- dropped conditions: the test of each ``if`` / ``elif`` and conditional expression -> ``True``.

Not mutated: the text of messages (anything inside an f-string), ``raise`` and ``assert``
statements, annotations, decorators (a cache's size), functions that draw a figure (``*_figure``: a
picture, whose pixels no test reads), a claim's negative controls (planted data,
each shown false by its own test: a 5% nudge leaves it false by design), and the precision argument
of the display helpers (``_round(x, 4)``, ``_sig``, ``_pct``, ``round``, ``format``). ``--spec`` moves each field of ``Thresholds`` in
headwatch/spec.py 5% each way (an integer by 1, a tuple of integers by its last element) and
runs tests/test_tolerances.py.

How it runs: the tracked tree is copied into a temporary folder (one copy per job) and every
mutant is written there, never into this checkout, so a killed run leaves the checkout as it was.
One process imports the heavy libraries once; each mutant runs in a forked child that imports
``headwatch`` from its copy (the package map of pyproject.toml) and runs pytest on the tests that
execute the mutated lines (a line-coverage map recorded once, with ``sys.settrace``, from the
fast tests), in the order fastest first, stopping at the first failure. A mutant no fast test
executes survives. Mutants listed in :data:`EQUIVALENT` (with the reason each cannot change any
result) are run all the same and reported as equivalent only if they survive. Prints a Markdown
table; exits 1 if a mutant that is not listed as equivalent survives.
"""
from __future__ import annotations

import argparse
import ast
import collections
import importlib.abc
import importlib.util
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("claims/judge.py", *sorted(f"claims/builtin/{p.name}" for p in (ROOT / "claims" / "builtin").glob("[!_]*.py")),
           "claims/trajectory.py", "claims/verdict.py", "claims/population.py", "headwatch/formatting.py",
           "headwatch/stats.py")
#: The fast tests a mutant must turn red (all of them, with the published panel: about two minutes).
FAST_TESTS = ("tests/test_judge_boundaries.py", "tests/test_verdict.py", "tests/test_stats.py",
              "tests/test_trajectory.py", "tests/test_tolerances.py", "tests/test_published_figures.py",
              "claims", "tests/test_claim_tests_on_planted.py", "tests/test_negligible.py", "tests/test_populations.py",
              "tests/test_copyable_reading.py", "tests/test_one_revision.py")
PYTEST_ARGS = ("--panel", "published", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:html", "-p", "no:metadata",
               "-p", "no:xdist", "-p", "no:anyio", "-q", "-rfE", "--no-header")
SPEC_FILE, SPEC_TESTS = "headwatch/spec.py", ("tests/test_tolerances.py",)
#: Calls whose numeric arguments after the first are display precision, not verdict logic.
DISPLAY_HELPERS = {"_round", "_sig", "fmt_pct", "round", "format"}

#: Mutants that cannot change any result, by id, with the reason. Reported as equivalent only if
#: they survive; one that is caught is reported as caught.
EQUIVALENT: dict[str, str] = {
    "claims/builtin/f4_early_convergence.py::judge_f4::at is not None and c is not None and "
    "(c.revision == at.point.revision) -> at is not None and c.revision == at.point.revision":
        "a reading's recall point (c) is None only when its final circuit is empty; the final circuit at the "
        "induction threshold is then empty as well (the label threshold's holds it), so the recall series the "
        "paper's revision (at) is looked up in is empty, at is None and the dropped test is never reached",
    "headwatch/stats.py::_staircase::1 -> 2#3":
        "the staircase's start below every x1 becomes -2 instead of -1: both mean 'no x1' to its one reader, "
        "binom.cdf, which is 0 at every negative count",
    "headwatch/stats.py::_staircase::1 -> 2#5":
        "the bisection's start above every x1 becomes n1 + 2 instead of n1 + 1: a probe there is clipped to n1, so a "
        "row can end at n1 + 1 instead of n1, and binom.cdf is 1 at every count >= n1",
    "headwatch/stats.py::prediction_p::t <= 0 -> t < 0":
        "at t = 0 (a censored bound at the mean) both return 1: the censored branch says 1.0, the two-sided p "
        "2 sf(0) is 1 as well",
    "headwatch/stats.py::prediction_p::1.0 -> 1.05#2":
        "the cap of the two-sided p never binds: sf(|t|) <= 1/2, so 2 sf(|t|) <= 1 < 1.05",
    "headwatch/stats.py::holm_adjusted::1.0 -> 1.05":
        "the list's initial values are never read: the loop assigns every index once",
    "claims/population.py::min_members_to_fail::1 -> 2":
        "the least n is never 1: with n = 1 the test is family x 2 / 2 = family >= 1 > alpha, so a search "
        "starting at 2 finds the same n",
    "claims/population.py::audit::p.outlier -> True":
        "a placement that is no outlier has side '', and the flag it would be the same event as must be an "
        "outlier on the same side, whose side is never '': the search finds nothing either way",
    'headwatch/stats.py::prediction_p::n < 2 or candidate <= 0 or (not np.all(np.isfinite(logs))) -> candidate <= 0 or not np.all(np.isfinite(logs))':
        'with one value the sample standard deviation (ddof 1) is nan, and the next check (not s > 0) returns None as well',
    'headwatch/stats.py::prediction_p::n < 2 or candidate <= 0 or (not np.all(np.isfinite(logs))) -> n < 2 or candidate <= 0':
        'a non-finite log makes the standard deviation nan (or the mean infinite with it), and the next check (not s > 0) returns None as well',
    "claims/population.py::place::used == 'rank' and rule == 'rank' -> rule == 'rank'":
        "used is 'rank' whenever rule is 'rank': only the log-normal rule sets it to anything else",
    'claims/population.py::place::p_extreme == 2 / (n + 1) -> True':
        'the sentence is reached by outliers only, beyond every member (below or above = n), whose p is 2 x 1/(n + 1), which equals 2/(n + 1) to the bit (doubling is exact) and is under the cap for n >= 2',
    'claims/population.py::audit::1e-12 -> 1.05e-12':
        'rank p-values are 2k/(n + 1) or 1; two that differ differ by far more than 1e-12 for any n a population has',
    'claims/population.py::audit::compared -> True':
        "with nothing compared, Holm's adjustment of no p-values assigns nothing",
    'claims/population.py::audit::a < alpha -> a <= alpha':
        'a Holm-adjusted p equal to alpha to the last bit: an integer times a t tail probability, which no set of positive values can be built to hit exactly, so < and <= never differ on data',
    'claims/population.py::audit::first[c].outlier and first[c].side == side -> first[c].side == side':
        "side is an outlier's side ('above' or 'below'); a placement that is no outlier has side '', so the side test alone already requires an outlier",
    'claims/population.py::audit::first[q].p_extreme <= p_c + 1e-12 -> first[q].p_extreme < p_c + 1e-12':
        "p_c is the smallest of the p_extreme values, so a quantity's p_extreme equals p_c + 1e-12 only if two rank p-values differ by exactly 1e-12, which 2k/(n + 1) values never do",
    "headwatch/formatting.py::fmt_share::abs(x - num / den) < 1e-09 -> abs(x - num / den) <= 1e-09":
        "no float lies exactly 1e-9 from a fraction num/den with den <= 10: near such a fraction (>= 0.1) floats "
        "are multiples of 2^-56 or coarser, and 1e-9 is not one, so < and <= never differ",
}


# ---- mutants ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    lines: tuple[int, int]
    before: str
    after: str
    source: str = field(repr=False)


_SWAP_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_NEGATE = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
           ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def _skipped(tree: ast.AST) -> set[int]:
    """Ids of nodes never mutated: inside f-strings, raise / assert, annotations, display precision."""
    out: set[int] = set()

    def all_of(node: ast.AST | None) -> None:
        if node is not None:
            out.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.JoinedStr, ast.Raise, ast.Assert)):
            all_of(node)
        elif isinstance(node, ast.arg):
            all_of(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            all_of(node.returns)
            for d in node.decorator_list:  # a cache's size: speed, not a result
                all_of(d)
            if node.name.endswith("_figure"):  # a picture: tests check that it is drawn, not its pixels
                all_of(node)
        elif isinstance(node, ast.AnnAssign):
            all_of(node.annotation)
        elif _call_name(node) == "NegativeControl":  # planted data: its own test shows the claim false on it
            all_of(node)
        elif _call_name(node) in DISPLAY_HELPERS:
            for a in node.args[1:]:  # type: ignore[attr-defined]
                all_of(a)
    return out


def _operators(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(the node replaced, its replacement) for every mutation of ``node``."""
    out: list[tuple[ast.AST, ast.AST]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for table in (_SWAP_BOUNDARY, _NEGATE):
                if type(op) in table:
                    ops = list(node.ops)
                    ops[i] = table[type(op)]()
                    out.append((node, ast.Compare(node.left, ops, node.comparators)))
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        out.append((node, ast.BoolOp(other, node.values)))
        for i in range(len(node.values)):
            rest = node.values[:i] + node.values[i + 1:]
            out.append((node, rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest)))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append((node, node.operand))
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        other = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        out.append((node, ast.BinOp(node.left, other, node.right)))
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        v = node.value
        new = v + 1 if isinstance(v, int) else (0.5 if v == 0 else v * 1.05)
        out.append((node, ast.Constant(new)))
    elif isinstance(node, (ast.If, ast.IfExp)) and not (isinstance(node.test, ast.Constant)):
        out.append((node.test, ast.Constant(True)))
    return out


class _Qualnames(ast.NodeVisitor):
    """Each node's enclosing function or class, dotted ('judge_f3', 'Milestone.bracket', '<module>')."""

    def __init__(self) -> None:
        self.of: dict[int, str] = {}
        self.stack: list[str] = []

    def generic_visit(self, node: ast.AST) -> None:
        self.of[id(node)] = ".".join(self.stack) or "<module>"
        named = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if named:
            self.stack.append(node.name)  # type: ignore[attr-defined]
        super().generic_visit(node)
        if named:
            self.stack.pop()


def _offset(lines: list[bytes], lineno: int, col: int) -> int:
    return sum(len(l) for l in lines[: lineno - 1]) + col


def mutants_of(rel: str, text: str) -> list[Mutant]:
    """Every mutant of one file, in source order, each with a stable id:
    ``file::qualname::before -> after`` (``#2``... where the same text repeats in a function)."""
    tree = ast.parse(text)
    skip = _skipped(tree)
    names = _Qualnames()
    names.visit(tree)
    raw = text.encode()
    lines = raw.splitlines(keepends=True)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        for target, replacement in _operators(node):
            if id(target) in skip:
                continue
            start = _offset(lines, target.lineno, target.col_offset)  # type: ignore[attr-defined]
            end = _offset(lines, target.end_lineno, target.end_col_offset)  # type: ignore[attr-defined]
            before, after = ast.unparse(target), ast.unparse(replacement)
            source = (raw[:start] + f"({after})".encode() + raw[end:]).decode()
            found.append((start, names.of.get(id(node), "<module>"), before, after,
                          (target.lineno, target.end_lineno), source))  # type: ignore[attr-defined]
    found.sort(key=lambda m: m[0])
    out, seen = [], collections.Counter()
    for _, qual, before, after, span, source in found:
        key = f"{rel}::{qual}::{before} -> {after}"
        seen[key] += 1
        out.append(Mutant(key if seen[key] == 1 else f"{key}#{seen[key]}", rel, span, before, after, source))
    return out


def spec_mutants(text: str) -> list[Mutant]:
    """SPEC's table: each field of ``Thresholds`` moved 5% each way (an int by 1, an int tuple by its last)."""
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Thresholds")
    raw = text.encode()
    lines = raw.splitlines(keepends=True)
    out = []
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None):
            continue
        # literals and literal arithmetic (2 / 3) only: no names, no builtins
        value = eval(compile(ast.Expression(stmt.value), SPEC_FILE, "eval"), {"__builtins__": {}})
        if isinstance(value, bool):
            news = [not value]
        elif isinstance(value, int):
            news = [value - 1, value + 1]
        elif isinstance(value, float):
            news = [value * 0.95, value * 1.05]
        elif isinstance(value, tuple) and all(isinstance(v, int) for v in value):
            news = [value[:-1], value + (value[-1] + 1,)]
        elif isinstance(value, tuple):
            news = [tuple(v * 0.95 for v in value), tuple(v * 1.05 for v in value)]
        else:
            raise ValueError(f"no mutation rule for {stmt.target.id} = {ast.unparse(stmt.value)}")
        start = _offset(lines, stmt.value.lineno, stmt.value.col_offset)
        end = _offset(lines, stmt.value.end_lineno, stmt.value.end_col_offset)  # type: ignore[arg-type]
        for new in news:
            source = (raw[:start] + repr(new).encode() + raw[end:]).decode()
            out.append(Mutant(f"{SPEC_FILE}::Thresholds.{stmt.target.id}::{ast.unparse(stmt.value)} -> {new!r}",
                              SPEC_FILE, (stmt.lineno, stmt.end_lineno or stmt.lineno),  # type: ignore[arg-type]
                              ast.unparse(stmt.value), repr(new), source))
    return out


# ---- the copies, the import map and the forked runs ---------------------------------------------


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def copy_tree(dest: Path, files: list[str]) -> None:
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)


def package_map(tree: Path) -> dict[str, Path]:
    """pyproject.toml's ``package-dir``: installed package name -> folder in ``tree``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {name: tree / folder for name, folder in config["tool"]["setuptools"]["package-dir"].items()}


class CopyFinder(importlib.abc.MetaPathFinder):
    """Imports ``headwatch`` (and its mapped sub-packages) from one copy of the tree, ahead of the
    editable install (which points at this checkout)."""

    packages: dict[str, Path] = {}

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[override]
        folder = self.packages.get(fullname)
        if folder is not None:
            return importlib.util.spec_from_file_location(fullname, folder / "__init__.py")
        parent, _, child = fullname.rpartition(".")
        if parent in self.packages and parent + "." + child not in self.packages:
            candidate = self.packages[parent] / f"{child}.py"
            if candidate.is_file():
                return importlib.util.spec_from_file_location(fullname, candidate)
        return None


def use_copy(tree: Path) -> None:
    CopyFinder.packages = package_map(tree)
    os.chdir(tree)


def purge_headwatch() -> None:
    for name in [m for m in sys.modules if m == "headwatch" or m.startswith("headwatch.")]:
        del sys.modules[name]


def warm_imports(tree: Path) -> None:
    """Import the heavy libraries once (torch, scipy, matplotlib, pytest, hypothesis) through
    headwatch's own modules, then forget headwatch so each child imports its copy afresh."""
    use_copy(tree)
    import pytest  # noqa: F401
    import _pytest.pytester  # noqa: F401
    import hypothesis  # noqa: F401

    for mod in ("headwatch.plugin", "headwatch.claims.judge", "headwatch.claims.figures",
                "headwatch.claims.report_render", "headwatch.claims.check", "headwatch.probes.sink"):
        __import__(mod)
    for mod in ("headwatch.probes.capture", "headwatch.probes.intervals", "headwatch.fixtures.provider",
                "headwatch.fixtures.reference", "headwatch.fixtures.panels"):  # what tests/conftest.py imports
        __import__(mod)
    from importlib.metadata import entry_points

    for ep in entry_points(group="pytest11"):  # pytest's plugins (xdist, html, hypothesis, ...)
        if not ep.value.startswith("headwatch"):
            __import__(ep.value.split(":")[0])
    import torch

    torch.set_num_threads(1)
    purge_headwatch()
    import gc

    gc.collect()
    gc.freeze()  # the warm heap is never collected again: each child's collections stay cheap


class Coverage:
    """Per test: the lines of the target files it executes (``sys.settrace``); lines executed
    outside any test (imports, class bodies, defaults) under ``None``."""

    def __init__(self, tree: Path, targets: list[str]):
        self.files = {str(tree / t): t for t in targets}
        self.current: str | None = None
        self.hits: dict[str | None, set[tuple[str, int]]] = collections.defaultdict(set)
        self.seconds: dict[str, float] = collections.defaultdict(float)

    def tracer(self, frame, event, arg):  # noqa: ANN001
        rel = self.files.get(frame.f_code.co_filename)
        if rel is None:
            return None
        hits = self.hits[self.current]
        hits.add((rel, frame.f_lineno))

        def local(frame, event, arg):  # noqa: ANN001
            if event == "line":
                hits.add((rel, frame.f_lineno))
            return local
        return local

    # pytest hook: which test is running
    def pytest_runtest_protocol(self, item, nextitem):  # noqa: ANN001

        self.current = item.nodeid
        t0 = time.monotonic()
        outcome = yield
        self.seconds[item.nodeid] += time.monotonic() - t0
        self.current = None
        return outcome

    pytest_runtest_protocol.hookwrapper = True  # type: ignore[attr-defined]


def _child_pytest(tree: Path, args: list[str], log: Path, timeout: int, plugins: list | None = None) -> None:
    """In a forked child: import from ``tree``, run pytest, exit with its code (never returns)."""
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), line_buffering=True)
        sys.stderr = sys.stdout
        signal.alarm(timeout)
        use_copy(tree)
        import pytest

        code = int(pytest.main(args, plugins=plugins or []))
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 99
    os._exit(code)


def record_coverage(tree: Path, targets: list[str], tests: list[str], log: Path, timeout: int) -> tuple[int, dict, dict]:
    """Run the fast tests once, traced; (pytest's exit code, {(file, line): [tests]}, {test: seconds})."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        cov = Coverage(tree, targets)
        sys.settrace(cov.tracer)
        import threading

        threading.settrace(cov.tracer)
        import json

        code = 99
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            use_copy(tree)
            import pytest

            code = int(pytest.main([*tests, *PYTEST_ARGS], plugins=[cov]))  # every test: no -x
        except BaseException:  # noqa: BLE001
            import traceback

            traceback.print_exc()
        sys.settrace(None)
        payload = json.dumps({"code": code, "hits": {str(k): sorted(v) for k, v in cov.hits.items()},
                              "seconds": cov.seconds}).encode()
        with os.fdopen(write, "wb") as w:
            w.write(payload)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as r:
        data = r.read()
    os.waitpid(pid, 0)
    import json

    payload = json.loads(data)
    by_line: dict[tuple[str, int], list[str]] = collections.defaultdict(list)
    for test, hits in payload["hits"].items():
        for rel, line in hits:
            by_line[(rel, line)].append(test)
    return payload["code"], by_line, payload["seconds"]


@dataclass
class Result:
    mutant: Mutant
    outcome: str  # "caught", "survived", "not covered", "equivalent", "timeout"
    by: str = ""
    seconds: float = 0.0


def first_failure(log: Path) -> str:
    text = log.read_text(errors="replace")
    for line in text.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split()[1].split(" - ")[0]
    tail = [l for l in text.splitlines() if l.strip()]
    return tail[-1][:120] if tail else "no output"


# ---- the run ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", action="store_true", help="mutate SPEC's table instead (tests/test_tolerances.py)")
    parser.add_argument("--files", nargs="+", default=None, help=f"files to mutate (default: {', '.join(TARGETS)})")
    parser.add_argument("--tests", nargs="+", default=None, help="tests to run (default: the fast tests)")
    parser.add_argument("--only", nargs="+", default=None, help="only mutants whose id contains one of these")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at a time (default 1)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds a mutant's tests may take (default 900)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    args = parser.parse_args(argv)

    files = [SPEC_FILE] if args.spec else list(args.files or TARGETS)
    tests = list(args.tests or (SPEC_TESTS if args.spec else FAST_TESTS))
    originals = {f: (ROOT / f).read_text() for f in files}
    mutants = [m for f in files for m in (spec_mutants(originals[f]) if args.spec else mutants_of(f, originals[f]))]
    if args.only:
        mutants = [m for m in mutants if any(s in m.id for s in args.only)]
    if args.list:
        for m in mutants:
            print(f"{m.id}  (line {m.lines[0]})")
        print(f"{len(mutants)} mutants", file=sys.stderr)
        return 0

    scratch = Path(tempfile.mkdtemp(prefix="headwatch-mutate-"))
    # SIGTERM (kill PID) runs the clean-up below too; the checkout itself is never written.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        tracked = tracked_files()
        trees = []
        for j in range(max(1, args.jobs)):
            tree = scratch / f"tree{j}"
            copy_tree(tree, tracked)
            trees.append(tree)
        os.environ.update({"CI": "1", "HEADWATCH_CACHE_DIR": str(scratch / "cache")})
        # Compiled files go to the scratch folder; a mutated file's is deleted before each run
        # (an mtime-and-size check could take a mutant written within the same second for another).
        sys.pycache_prefix = str(scratch / "pyc")
        sys.meta_path.insert(0, CopyFinder())
        t0 = time.monotonic()
        warm_imports(trees[0])
        print(f"imports warm in {time.monotonic() - t0:.0f} s; recording coverage of {len(tests)} test paths ...",
              file=sys.stderr, flush=True)
        t0 = time.monotonic()
        code, by_line, seconds = record_coverage(trees[0], files, tests, scratch / "coverage.log", args.timeout * 4)
        if code != 0:
            print(f"error: the tests are red before any mutation (pytest exit {code}); see the log:\n"
                  + (scratch / "coverage.log").read_text(errors="replace")[-3000:], file=sys.stderr)
            return 2
        print(f"coverage recorded in {time.monotonic() - t0:.0f} s ({len(seconds)} tests); {len(mutants)} mutants",
              file=sys.stderr, flush=True)
        results = run_mutants(mutants, trees, originals, tests, by_line, seconds, args.timeout, scratch)
    finally:
        for pid in list(RUNNING):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        shutil.rmtree(scratch, ignore_errors=True)
    table = render(results, tests)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    bad = [r for r in results if r.outcome in ("survived", "not covered")]
    print(f"{len(bad)} mutant(s) survived that are not listed as equivalent", file=sys.stderr)
    return 1 if bad else 0


def _selected(m: Mutant, by_line: dict, seconds: dict, tests: list[str]) -> list[str] | None:
    """The tests executing the mutant's lines, fastest first; every test where a line runs at import."""
    chosen: set[str] = set()
    for line in range(m.lines[0], m.lines[1] + 1):
        for t in by_line.get((m.file, line), ()):
            if t == "None":
                return list(tests)
            chosen.add(t)
    if not chosen:
        return None
    return sorted(chosen, key=lambda t: (seconds.get(t, 0.0), t))


#: The forked children running mutants now (killed if the run is stopped).
RUNNING: dict[int, tuple[int, int, float]] = {}


def _write(path: Path, text: str) -> None:
    """Write a source file and drop its compiled file, so the next import compiles this text."""
    path.write_text(text)
    cached = Path(importlib.util.cache_from_source(str(path)))
    cached.unlink(missing_ok=True)


def run_mutants(mutants: list[Mutant], trees: list[Path], originals: dict[str, str], tests: list[str],
                by_line: dict, seconds: dict, timeout: int, scratch: Path) -> list[Result]:
    results: dict[int, Result] = {}
    queue = list(enumerate(mutants))
    running = RUNNING  # pid -> (mutant index, tree index, start)
    free = list(range(len(trees)))
    done = 0
    while queue or running:
        while queue and free:
            i, m = queue.pop(0)
            selected = _selected(m, by_line, seconds, tests)
            if selected is None:
                results[i] = Result(m, "not covered")
                continue
            j = free.pop()
            _write(trees[j] / m.file, m.source)
            log = scratch / f"mutant{j}.log"
            pid = os.fork()
            if pid == 0:
                _child_pytest(trees[j], [*selected, *PYTEST_ARGS, "-x"], log, timeout)
            running[pid] = (i, j, time.monotonic())
        pid, status = os.wait()
        if pid not in running:
            continue
        i, j, start = running.pop(pid)
        m = mutants[i]
        _write(trees[j] / m.file, originals[m.file])
        log = scratch / f"mutant{j}.log"
        took = time.monotonic() - start
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
            results[i] = Result(m, "timeout", f"no result in {timeout} s", took)
        elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            results[i] = Result(m, "equivalent" if m.id in EQUIVALENT else "survived", "", took)
        else:
            results[i] = Result(m, "caught", first_failure(log), took)
        free.append(j)
        done += 1
        r = results[i]
        print(f"[{len(results)}/{len(mutants)}] {r.outcome:<10} {took:5.1f} s  {m.id}  {r.by}", file=sys.stderr, flush=True)
    return [results[i] for i in sorted(results)]


def render(results: list[Result], tests: list[str]) -> str:
    counts = collections.Counter((r.mutant.file, r.outcome) for r in results)
    files = list(dict.fromkeys(r.mutant.file for r in results))
    outcomes = ("caught", "timeout", "equivalent", "survived", "not covered")
    rows = ["| file | mutants | " + " | ".join(outcomes) + " |", "| --- | ---: |" + " ---: |" * len(outcomes)]
    for f in files:
        rows.append(f"| `{f}` | {sum(counts[(f, o)] for o in outcomes)} | "
                    + " | ".join(str(counts[(f, o)]) for o in outcomes) + " |")
    rows.append(f"| all | {len(results)} | " + " | ".join(str(sum(counts[(f, o)] for f in files)) for o in outcomes) + " |")
    out = ["Tests: `pytest " + " ".join(tests) + " " + " ".join(PYTEST_ARGS[:2]) + "`", "", *rows]
    eq = [r for r in results if r.outcome == "equivalent"]
    if eq:
        out += ["", "Equivalent mutants (no test can tell them apart):", "", "| mutant | why it cannot change a result |",
                "| --- | --- |"]
        out += [f"| `{r.mutant.id}` | {EQUIVALENT[r.mutant.id]} |" for r in eq]
    bad = [r for r in results if r.outcome in ("survived", "not covered")]
    if bad:
        out += ["", "Surviving mutants:", "", "| mutant | line | outcome |", "| --- | ---: | --- |"]
        out += [f"| `{r.mutant.id}` | {r.mutant.lines[0]} | {r.outcome} |" for r in bad]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
