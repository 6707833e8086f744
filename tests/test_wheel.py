"""The built wheel, installed in a fresh virtual environment outside the repository, beside PyPI's
``fixtures`` package: it installs only the ``headwatch`` namespace, ships the panels and the
published records, and runs ``headwatch judge`` and the claim tests from any folder.

Slow (it builds and installs a wheel: tens of seconds), and part of every CI run all the same.
The fresh environment reuses this one's dependencies through a ``.pth`` file rather than
downloading them again; only the wheel itself is installed into it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("wheel")
    # Build from a copy of the source (what a clone holds), not from the working tree's build leftovers.
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".cache", "reports", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp / "dist"), str(src)])
    (wheel,) = (tmp / "dist").glob("headwatch-*.whl")

    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "reuse-dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)])

    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "HEADWATCH_CACHE_DIR", "HEADWATCH_ORGANISMS_CACHE", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp / "home")
    return {"wheel": wheel, "venv": venv, "python": python, "cwd": elsewhere, "env": env, "home": tmp / "home"}


def test_the_wheel_installs_one_namespace_with_its_data(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"headwatch"}, sorted(tops)
    for needed in ("headwatch/fixtures/panels/published.toml", "headwatch/fixtures/panels/organisms.toml",
                   "headwatch/fixtures/published/PROVENANCE.md",
                   "headwatch/fixtures/published/allenai--OLMo-1B-0724-hf/step11000-tokens23B.json",
                   "headwatch/claims/test_f1_zero_bos_floor.py", "headwatch/plugin.py", "headwatch/selection.py",
                   "headwatch/cli/__init__.py", "headwatch/cli/judge.py",
                   "headwatch/model_organisms/__main__.py"):
        assert needed in names, needed
    assert not any(n.startswith(("tools/", "tests/", "testing/", "benchmarks/", "headwatch/tools")) for n in names)
    # The test harness (testing/headwatch_testing) is not installed, nor its pieces under their old names.
    harness = [n for n in names if n.rsplit("/", 1)[-1] in (
        "faults.py", "tinypanel.py", "random_checkpoint.py", "broken.py") or "headwatch_testing" in n]
    assert not harness, harness
    # nor the tiny models and miniatures only tests, benchmarks and tools build (headwatch_testing.tiny)
    assert not [n for n in names if n.endswith("/tiny.py")], names
    assert b"save_tiny_revisions" not in zipfile.ZipFile(installed["wheel"]).read("headwatch/hubcache.py")
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "headwatch = headwatch.plugin" in zipfile.ZipFile(installed["wheel"]).read(entry_points).decode()


def test_pypi_fixtures_stays_importable_beside_it(installed):
    code = ("import fixtures, headwatch, headwatch.fixtures; print(fixtures.Fixture.__module__); "
            "print(headwatch.__file__); print(headwatch.fixtures.__file__)")
    out = _run([str(installed["python"]), "-c", code], cwd=installed["cwd"], env=installed["env"]).stdout.split()
    assert out[0].startswith("fixtures.")  # PyPI's testtools fixtures, not headwatch's folder
    venv = str(installed["venv"])
    assert out[1].startswith(venv) and out[2].startswith(venv)  # the wheel's headwatch, not the checkout


def test_installed_judge_runs_from_anywhere(installed):
    out = _run([str(installed["venv"] / "bin" / "headwatch"), "judge", "--panel", "published"],
               cwd=installed["cwd"], env=installed["env"])
    assert "allenai/OLMo-1B-0724-hf (olmo-1b, panel published)" in out.stdout and "F3        consistent, not established 11.5x (5.09, 26.4)" in out.stdout
    cache = _run([str(installed["python"]), "-c", "from headwatch.paths import default_cache_dir as d; "
                  "print(d()); print(d('organisms'))"], cwd=installed["cwd"], env=installed["env"]).stdout.split()
    home = str(installed["home"] / ".cache" / "headwatch")
    assert cache == [home, home + "/organisms"]  # a user cache folder, never site-packages


@pytest.mark.parametrize("panel", ["published", "run.toml"], ids=["shipped", "a file of the user's"])
def test_installed_claim_tests_run_from_the_users_own_folder(installed, panel):
    """What the docs tell users outside the checkout: ``pytest --pyargs headwatch.claims --panel P``, from
    their own folder, with a shipped panel or a panel file of theirs there (``pytest claims`` would be
    "file or directory not found: claims")."""
    if panel == "run.toml":
        (installed["cwd"] / panel).write_text((ROOT / "fixtures" / "panels" / "published.toml").read_text())
    out = _run([str(installed["python"]), "-m", "pytest", "--pyargs", "headwatch.claims", "--panel", panel,
                "-p", "no:cacheprovider", "-q"], cwd=installed["cwd"], env=installed["env"])
    assert " passed" in out.stdout and "failed" not in out.stdout
    assert "2 model(s), 20 revision(s): 20 reference" in out.stdout
