"""Rules of the house that a reader of the code relies on, checked over the shipped packages' source
(pyproject's ``package-dir``): no code compares a source's name outside the sources
(``fixtures/panels/sources.py``: each source carries its behaviour), and every import is absolute
(docs/DESIGN.md). Each checker is shown a planted violation first, so that it can fail."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shipped_files() -> list[Path]:
    """The .py files of every shipped package (pyproject's ``[tool.setuptools] package-dir``)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {ROOT / folder for folder in setuptools["package-dir"].values()}
    return sorted({p for folder in folders for p in folder.rglob("*.py")})


def _source_names() -> set[str]:
    from headwatch.fixtures.panels.sources import SOURCES

    return set(SOURCES)


def _names_a_source_attribute(node: ast.AST) -> bool:
    """``x.source`` / ``x.kind``, a bare ``source`` / ``kind``, or ``getattr(x, "source"...)``."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("source", "kind")
    if isinstance(node, ast.Name):
        return node.id in ("source", "kind")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in ("source", "kind")
    return False


def _constants(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def source_name_compares(text: str, names: set[str]) -> list[int]:
    """Lines of ``text`` that compare a source's (or a location's) name with a string: ``m.source ==
    "local"``, ``resolved.kind != "hub"``, ``source in ("hub", "package")``."""
    names = names | {"hub-cache"}  # the kinds of a resolved revision beside the sources' names
    lines = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if any(_names_a_source_attribute(s) for s in sides) and any(_constants(s) & names for s in sides):
            lines.append(node.lineno)
    return lines


#: Where a source's or a resolved revision's name may be compared: the one home of each.
NAME_HOMES = ("fixtures/panels/sources.py", "fixtures/resolved.py")


def test_the_scan_finds_a_planted_source_name_compare():
    planted = ("def f(m, resolved, source):\n"
               "    a = m.source == 'organism'\n"
               "    b = resolved.kind != 'hub'\n"
               "    c = getattr(m, 'source', None) in ('local', 'package')\n"
               "    d = args.executor == 'local'\n"  # an executor named local: not a source
               "    return m.origin.trains\n")
    assert source_name_compares(planted, _source_names()) == [2, 3, 4]


def test_no_source_name_is_compared_outside_the_sources():
    """Code asks a panel model's source (``pm.origin``) or a resolved revision (``in_folder``,
    ``offline``) what it does, never compares its name (docs/DESIGN.md)."""
    names = _source_names()
    found = [f"{p.relative_to(ROOT)}:{line}" for p in shipped_files()
             if p.relative_to(ROOT).as_posix() not in NAME_HOMES
             for line in source_name_compares(p.read_text(), names)]
    assert not found, found


# ---- every import is absolute ------------------------------------------------------------------------


def relative_imports(text: str) -> list[int]:
    """Lines of ``text`` with a relative import (``from .x import y``, ``from .. import z``)."""
    return [node.lineno for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ImportFrom) and node.level > 0]


def test_the_checker_finds_a_planted_relative_import():
    assert relative_imports("from . import a\nfrom headwatch.b import c\nfrom ..d import e\nimport f\n") == [1, 3]


def test_every_import_is_absolute():
    found = [f"{p.relative_to(ROOT)}:{line}" for p in shipped_files() for line in relative_imports(p.read_text())]
    assert not found, f"{len(found)} relative imports: {found[:10]}"
