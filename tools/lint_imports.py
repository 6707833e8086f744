"""Run ``lint-imports`` (import-linter) on the layout the package installs as.

The repository keeps its folders (``probes/``, ``fixtures/``, ``claims/``) and pyproject.toml maps
each onto a sub-package of ``headwatch`` (``[tool.setuptools] package-dir``). import-linter builds
its graph by walking the folder of the root package, where those sub-packages are not. So this
script lays the installed layout out as links in a temporary folder (nothing is copied or
written in the checkout) and runs ``lint-imports`` there, with the contracts of pyproject.toml
(``[tool.importlinter]``). Arguments are passed on (``--verbose``, ``--contract ID``); the exit
status is lint-imports' own: 0 every contract kept, 1 one broken (the output names the imports).
``--graph`` prints instead which part imports which (grimp's graph of the same tree, a module of
``headwatch/`` or a sub-package per row): what docs/DESIGN.md's drawing is redrawn from.

    .venv/bin/python tools/lint_imports.py
    .venv/bin/python tools/lint_imports.py --graph
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def link_tree(root: Path, dest: Path) -> None:
    """Lay out every package of pyproject's ``package-dir`` under ``dest`` as it installs: a folder
    per package holding links to its folder's entries (a sub-package already inside its parent's
    folder, like ``model_organisms``, comes with the parent's links)."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package in sorted(setuptools["package-dir"], key=lambda p: p.count(".")):
        target = dest / package.replace(".", "/")
        if target.exists():
            continue
        target.mkdir(parents=True)
        for entry in (root / setuptools["package-dir"][package]).iterdir():
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)


def part(module: str) -> str:
    """The part a module belongs to: ``headwatch.model_organisms.train`` -> ``fixtures``,
    ``headwatch.validation`` -> ``validation``."""
    names = module.split(".")
    return names[1] if len(names) > 1 else names[0]


def graph_lines(tree: Path) -> list[str]:
    """``part -> the parts it imports``, one line each, from grimp's graph of ``tree``."""
    sys.path.insert(0, str(tree))
    import grimp

    graph = grimp.build_graph("headwatch", include_external_packages=False, cache_dir=None)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if part(imported) != part(module) and imported != "headwatch":
                edges.setdefault(part(module), set()).add(part(imported))
    return [f"{p} -> {', '.join(sorted(edges[p]))}" for p in sorted(edges)]


def main(argv: list[str]) -> int:
    if "--graph" in argv:
        with tempfile.TemporaryDirectory(prefix="headwatch-layout-") as tmp:
            link_tree(ROOT, Path(tmp))
            print("\n".join(graph_lines(Path(tmp))))
        return 0
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        print("lint-imports not found: install the test extra (pip install -e '.[test]')", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="headwatch-layout-") as tmp:
        link_tree(ROOT, Path(tmp))
        # lint-imports puts its working folder first on sys.path: there, ``headwatch`` is the tree;
        # tools/ holds the contract types pyproject registers (import_contracts.py).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(ROOT / "tools")])}
        return subprocess.run([lint, str(ROOT / "pyproject.toml"), "--no-cache", *argv],
                              cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
