"""Count the imports made inside functions (deferred imports) in the installed package's folders.

docs/DESIGN.md keeps a deferred import only where it defers something heavy (torch, transformers,
matplotlib and the like: what ``--help``, the plugin in a foreign test run, or a panel without
organisms must not pay for), each with a comment saying so. This prints how many there are, how
many defer a heavy package, and how many carry a comment (on the line, or above the run of imports
it belongs to); ``--list`` names the light ones and the unexplained heavy ones, file by file: the
ones to move to the top of their module, or to explain.

    python tools/deferred_imports.py                 # the counts
    python tools/deferred_imports.py --list          # and every deferred import of a light module
    python tools/deferred_imports.py --root /other/checkout
"""
from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Packages whose import costs a good part of a second or more, or is an optional extra: deferring
#: them is what a deferred import is for. headwatch's own modules that import one of them at their
#: top (directly or through each other) count as heavy too (:func:`heavy_modules`).
HEAVY = frozenset({"torch", "transformers", "matplotlib", "huggingface_hub", "safetensors", "accelerate", "ray",
                   "submitit", "scipy", "numpy", "pytest", "_pytest", "xdist", "pytest_html", "grimp", "importlinter"})


@dataclass(frozen=True)
class Deferred:
    path: str
    line: int
    function: str
    module: str
    heavy: bool
    explained: bool

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.function}: {self.module}" + ("" if self.explained else " (no comment)")


def package_folders(root: Path) -> dict[str, Path]:
    """Installed package -> its folder in the checkout (pyproject's ``package-dir``)."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {package: root / folder for package, folder in setuptools["package-dir"].items()}


def _resolve(node: ast.ImportFrom | ast.Import, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level == 0:
        return [node.module or ""]
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return [f"{base}.{node.module}" if node.module else base]


def _with_parents(name: str) -> list[str]:
    """``a.b.c`` and the packages importing it runs first: ``a``, ``a.b``."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def module_files(root: Path) -> dict[str, tuple[Path, str]]:
    """Module name -> (its file, the package its relative imports start from)."""
    out: dict[str, tuple[Path, str]] = {}
    for package, folder in sorted(package_folders(root).items(), key=lambda kv: len(kv[0])):
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                name = ".".join([package, *parts[:-1]])
                out.setdefault(name, (path, name))
            else:
                out.setdefault(".".join([package, *parts]), (path, ".".join([package, *parts[:-1]])))
    return out


def heavy_modules(root: Path) -> set[str]:
    """headwatch's modules whose import (their top level) imports a heavy package, directly or through
    another such module (importing a module imports the packages above it first)."""
    top: dict[str, set[str]] = {}
    for name, (path, package) in module_files(root).items():
        imported: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imported.update(_resolve(node, package))
                if isinstance(node, ast.ImportFrom):  # "from . import x": x may be a module
                    imported.update(f"{m}.{a.name}" for m in _resolve(node, package) for a in node.names)
        top[name] = imported
    heavy = {n for n, imps in top.items() if any(i.split(".")[0] in HEAVY for i in imps)}
    while True:
        more = {n for n, imps in top.items()
                if n not in heavy and any(p in heavy for i in imps for p in _with_parents(i))}
        if not more:
            return heavy
        heavy |= more


def _run_starts(tree: ast.AST) -> dict[ast.AST, int]:
    """Each import statement -> the first line of the run of consecutive import statements it ends
    (a statement spanning lines, ``from x import (a,\n b)``, is one statement of the run)."""
    starts: dict[ast.AST, int] = {}
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            start = None
            for stmt in body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    start = stmt.lineno if start is None else start
                    starts[stmt] = start
                else:
                    start = None
    return starts


def deferred_in(path: Path, package: str, root: Path, heavy_own: set[str]) -> list[Deferred]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    starts = _run_starts(tree)
    out: list[Deferred] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = child.name if function is None else f"{function}.{child.name}"
            if function is not None and isinstance(child, (ast.Import, ast.ImportFrom)):
                # a comment on its lines, on an import above it in its run, or above the run (blank lines between)
                first = starts.get(child, child.lineno)
                commented = any("#" in line for line in lines[first - 1:child.end_lineno])
                i = first - 2
                while i >= 0 and not lines[i].strip():
                    i -= 1
                explained = commented or (i >= 0 and lines[i].strip().startswith("#"))
                for module in _resolve(child, package):
                    names = [module] + ([f"{module}.{a.name}" for a in child.names]
                                        if isinstance(child, ast.ImportFrom) else [])
                    heavy = module.split(".")[0] in HEAVY or any(
                        p in heavy_own for n in names for p in _with_parents(n))
                    out.append(Deferred(str(path.relative_to(root)), child.lineno, function, module, heavy, explained))
            visit(child, name)

    visit(tree, None)
    return out


def collect(root: Path = ROOT) -> list[Deferred]:
    heavy_own = heavy_modules(root)
    found = [d for path, package in module_files(root).values() for d in deferred_in(path, package, root, heavy_own)]
    return sorted(found, key=lambda d: (d.path, d.line))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="a checkout (default: this one)")
    parser.add_argument("--list", action="store_true", help="name every deferred import of a light module")
    args = parser.parse_args(argv)
    found = collect(args.root)
    heavy = [d for d in found if d.heavy]
    light = [d for d in found if not d.heavy]
    print(f"deferred imports: {len(found)} ({sum(not d.explained for d in found)} without a comment)")
    print(f"  of heavy packages (torch, transformers, matplotlib, ...): {len(heavy)} "
          f"({sum(not d.explained for d in heavy)} without a comment)")
    print(f"  of light modules (standard library, headwatch's own light modules): {len(light)} "
          f"({sum(not d.explained for d in light)} without a comment)")
    if args.list:
        for d in light:
            print(f"    {d}")
        for d in heavy:
            if not d.explained:
                print(f"    {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
