"""The import contracts of pyproject.toml hold on this tree, and the one contract type the project
adds (tools/import_contracts.py, ``acyclic``) sees a cycle import-linter's own types let pass: a
package and its own module importing each other (a deferred import counts)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _contracts_module():
    spec = importlib.util.spec_from_file_location("import_contracts", ROOT / "tools" / "import_contracts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(root: Path, name: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _check(tmp_path: Path, files: dict[str, str]) -> object:
    grimp = pytest.importorskip("grimp", reason="needs grimp (the test extra's import-linter)")
    name = f"cyclepkg_{abs(hash(str(tmp_path))) % 10**8}"
    _package(tmp_path, name, files)
    sys.path.insert(0, str(tmp_path))
    try:
        graph = grimp.build_graph(name, cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    contract = _contracts_module().AcyclicContract("acyclic", {}, {"containers": [name]})
    return contract.check(graph, verbose=False)


def test_a_package_and_its_module_importing_each_other_break_the_acyclic_contract(tmp_path):
    check = _check(tmp_path, {
        "__init__.py": "from . import runner\nRECIPES = {}\n",
        "runner.py": "def main():\n    from . import RECIPES  # deferred: still an import\n    return RECIPES\n",
    })
    assert not check.kept
    (cycle,) = check.metadata["cycles"]
    assert cycle[0] == cycle[-1] and {m.rsplit(".", 1)[-1] for m in cycle} == {"runner", cycle[0].rsplit(".", 1)[-1]}
    assert len(set(cycle)) == 2  # the package and its module


def test_the_same_package_reading_its_recipes_from_a_module_keeps_it(tmp_path):
    check = _check(tmp_path, {
        "__init__.py": "from . import runner\nfrom .recipes import RECIPES\n",
        "recipes.py": "RECIPES = {}\n",
        "runner.py": "def main():\n    from .recipes import RECIPES\n    return RECIPES\n",
    })
    assert check.kept and check.metadata["cycles"] == []


@pytest.mark.slow
def test_the_repository_keeps_every_contract():
    if importlib.util.find_spec("importlinter") is None:
        pytest.skip("needs import-linter (the test extra)")
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "lint_imports.py")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


# ---- deferred imports (docs/DESIGN.md): only to defer something heavy, each saying why ----------------


def _deferred_module():
    spec = importlib.util.spec_from_file_location("deferred_imports", ROOT / "tools" / "deferred_imports.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_every_deferred_import_says_why():
    found = _deferred_module().collect(ROOT)
    assert found, "no deferred import found: the counter reads nothing"
    unexplained = [str(d) for d in found if not d.explained]
    assert not unexplained, "a deferred import without a comment (move it to the top, or say what it defers):\n" + \
        "\n".join(unexplained)


def test_the_counter_flags_an_unexplained_import_and_knows_a_heavy_one(tmp_path):
    """A negative control for the test above, on a planted package: a light import inside a function with
    no comment is flagged; a comment above a run of imports (one of them over several lines) explains the
    run; a module of a package whose ``__init__`` imports a heavy package counts as heavy."""
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackage-dir = { "pkg" = "pkg" }\n')
    _package(tmp_path, "pkg", {
        "__init__.py": "",
        "heavy/__init__.py": "import torch\n",
        "heavy/light.py": "X = 1\n",
        "a.py": """
            def light():
                import json
                return json

            def explained():
                # deferred: torch
                from os import (path,
                                sep)
                from pkg.heavy.light import X
                return path, sep, X
            """,
    })
    found = {(d.function, d.module): d for d in _deferred_module().collect(tmp_path)}
    assert set(found) == {("light", "json"), ("explained", "os"), ("explained", "pkg.heavy.light")}
    assert not found["light", "json"].explained and not found["light", "json"].heavy
    assert found["explained", "os"].explained and found["explained", "pkg.heavy.light"].explained
    assert found["explained", "pkg.heavy.light"].heavy and not found["explained", "os"].heavy
