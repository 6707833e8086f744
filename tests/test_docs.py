"""Docs that cannot drift from the code, and carry nothing of the machine they were written on.

- docs/reference.md (exit codes, every option, the panel keys) is what tools/gen_reference.py
  writes from the code now;
- no tracked Markdown, TOML or JSON file holds a placeholder token (``BENCH-HEADLINE``) or an
  absolute path of a machine (``/work/...``, ``/root/...``, ``/home/<user>/...``, ``/tmp/...``);
- every relative link of README.md, docs/ and notes/ resolves inside the repository (to a heading
  that exists, where it names one), and every repository path docs/ and README.md quote in
  backticks exists;
- README.md is a user's page: at most 150 lines;
- docs/README.md, the docs index, lists every page of docs/ (and links nothing that is not there).

Each checker is also run on planted text that it must reject.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 150

#: Upper-case words joined by hyphens: a placeholder left for a number or a name (BENCH-HEADLINE).
PLACEHOLDER_RE = re.compile(r"\b[A-Z][A-Z0-9]*(?:-[A-Z][A-Z0-9]*)+\b")
#: Such tokens that are words: the claims' ranges (F1-F5).
KNOWN_TOKENS_RE = re.compile(r"F\d(?:-F\d)+")
#: A path that starts at the root of a machine's file system; a path inside another (``a/tmp/x``),
#: a URL's path and ``~/...`` do not count.
MACHINE_PATH_RE = re.compile(r"(?<![\w./~$-])/(?:work|root|tmp)/[\w.-]|(?<![\w./~$-])/home/[a-z_][\w-]*/")
LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
#: Backticked text that names a file or folder of this repository.
REPO_PATH_RE = re.compile(r"`((?:docs|fixtures|probes|claims|headwatch|tests|tools|benchmarks|notes)/[\w./-]*)`")


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "tools" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def tracked(*patterns: str) -> list[Path]:
    """The files git tracks here (and the new ones it does not ignore) matching ``patterns``."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout of headwatch (git ls-files): not one here")
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in out.splitlines() if (ROOT / line).is_file()]


# ---- the checkers -------------------------------------------------------------------------------


def placeholders(text: str) -> list[str]:
    return [m.group(0) for m in PLACEHOLDER_RE.finditer(text) if not KNOWN_TOKENS_RE.fullmatch(m.group(0))]


def machine_paths(text: str) -> list[str]:
    """Each machine path, with a little of the line around it."""
    return [line[max(m.start() - 40, 0):m.end() + 40].strip() for line in text.splitlines()
            for m in MACHINE_PATH_RE.finditer(line)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", markdown, re.MULTILINE)}


def broken_links(path: Path, text: str, root: Path = ROOT) -> list[str]:
    """Relative links of ``path`` that leave ``root``, name nothing, or name a missing heading."""
    out = []
    for target in LINK_RE.findall(re.sub(r"```.*?```", "", text, flags=re.DOTALL)):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.is_relative_to(root.resolve()) or not dest.exists():
            out.append(f"{target}: no such file in the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            out.append(f"{target}: no heading with that anchor in {dest.name}")
    return out


def missing_repo_paths(text: str, root: Path = ROOT) -> list[str]:
    """Repository paths quoted in backticks that do not exist (patterns and placeholders aside)."""
    return [p for p in REPO_PATH_RE.findall(text) if not (root / p.rstrip("/")).exists()]


# ---- the repository -----------------------------------------------------------------------------


def test_reference_page_is_what_the_code_says():
    gen = _load_generator()
    page = ROOT / "docs" / "reference.md"
    assert page.exists(), f"docs/reference.md is missing: run `{gen.COMMAND}`"
    assert page.read_text() == gen.render(), (
        f"docs/reference.md differs from what the code says (options, exit codes or panel keys changed): "
        f"run `{gen.COMMAND}` and commit the page")


def test_the_panel_example_is_a_table_the_schema_accepts():
    """docs/reference.md's annotated panel example is written from the schema's metadata; the schema's
    own converter must accept it (every key, type and allowed value), and refuse it with one key misspelt."""
    import tomllib

    from headwatch.fixtures.panels import PanelError
    from headwatch.fixtures.panels.parse import convert
    from headwatch.fixtures.panels.schema import ModelEntry, PanelHeader

    example = tomllib.loads(_load_generator().panel_example())
    assert convert(PanelHeader, example["panel"], "[panel]").name == "paper"
    (entry,) = example["models"]
    model = convert(ModelEntry, entry, "[[models]]")
    assert set(entry) == {"name", "description", "repo", "source", "revisions", "total_tokens", "dtype",
                          "attn_implementation", "trust_remote_code", "allow_pickle", "hub_cache_dir", "ablation",
                          "config", "seeds", "sizes", "seed_repos", "population", "role", "placement", "candidates", "tokens",
                          "probe", "expect", "organism"}, "a key of the schema is missing from the example"
    assert model.expect.xfail["F4"].key == (0.4, 0.8) and model.expect.formation.min_top1_final == 0.5
    misspelt = {**entry, "expect": {**entry["expect"], "bos_shap": "ramp"}}
    with pytest.raises(PanelError, match=r"unknown key\(s\) bos_shap.*did you mean 'bos_shape'"):
        convert(ModelEntry, misspelt, "[[models]]")


def test_no_placeholder_tokens():
    found = {str(p.relative_to(ROOT)): hits for p in tracked("*.md", "*.toml", "*.json")
             if (hits := placeholders(p.read_text(errors="replace")))}
    assert not found, f"placeholder tokens (put the measured number or name in their place): {found}"


def test_no_machine_paths():
    found = {str(p.relative_to(ROOT)): f"{len(hits)}: {hits[:3]}" for p in tracked("*.md", "*.toml", "*.json")
             if (hits := machine_paths(p.read_text(errors="replace")))}
    assert not found, f"absolute paths of a machine (write them relative to the repository): {found}"


def test_relative_links_resolve():
    found = {str(p.relative_to(ROOT)): bad for p in tracked("README.md", "docs/*.md", "notes/*.md")
             if (bad := broken_links(p, p.read_text()))}
    assert not found, f"links that lead nowhere: {found}"


def test_quoted_repository_paths_exist():
    found = {str(p.relative_to(ROOT)): bad for p in tracked("README.md", "docs/*.md")
             if (bad := missing_repo_paths(p.read_text()))}
    assert not found, f"files or folders the docs name that the repository does not have: {found}"


def test_readme_is_a_users_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, more than {README_MAX_LINES}: move details to docs/")


# ---- negative controls: each checker rejects planted text ---------------------------------------


def test_ci_runs_the_readmes_set_up_and_test_command():
    """.ci/run is the cold first run a user makes: the README's set-up, then its test command, verbatim."""
    readme, ci = (ROOT / "README.md").read_text(encoding="utf-8"), (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    setup = re.search(r"^python3 -m venv \.venv && \.venv/bin/pip install -e '\.\[test\]'$", readme, re.M)
    command = re.search(r"^(\.venv/bin/pytest tests claims [^#\n]*?)\s+# everything: what \.ci/run runs$", readme, re.M)
    assert setup and command, "README lost its set-up or its 'everything' test command"
    # the README's install: quiet, and byte-compiling left to the imports (flags that install nothing else)
    assert "python3 -m venv .venv && .venv/bin/pip install -q --no-compile -e '.[test]'" in ci
    assert re.search(rf"^{re.escape(command.group(1))} \|\| status=\$\?$", ci, re.M), (command.group(1), ci)


def unlisted_docs(index: str, pages: list[str]) -> list[str]:
    """The ``pages`` (names of docs/*.md) the index ``index`` does not link."""
    linked = {target.split("#")[0] for target in LINK_RE.findall(index)}
    return [p for p in pages if p not in linked]


def test_the_docs_index_lists_every_doc():
    pages = sorted(p.name for p in tracked("docs/*.md") if p.name != "README.md")
    assert pages and not unlisted_docs((ROOT / "docs" / "README.md").read_text(encoding="utf-8"), pages), (
        "docs/README.md, the docs index, does not list these pages: add one line each")
    assert unlisted_docs("| [a.md](a.md) | a |", ["a.md", "b.md"]) == ["b.md"]


def test_checkers_reject_planted_text(tmp_path):
    assert placeholders("Here (2 cores) BENCH-HEADLINE.") == ["BENCH-HEADLINE"]
    assert placeholders("F1-F5 hold; AVX-512, UTF-8 and X-Repo-Commit are words") == []
    assert machine_paths("cache at /work/cache/organisms") and machine_paths("wrote /tmp/hw-x/o.json")
    assert machine_paths("see /home/alice/runs/") and machine_paths("(`/root/.cache`)")
    assert machine_paths("--cache-dir /shared/hw, ~/tmp/x, docs/tmp/x, https://h.org/work/x") == []

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A title (here)\n")
    page = tmp_path / "README.md"
    text = "[ok](docs/a.md) [ok](docs/a.md#a-title-here) [web](https://x.org/y) [gone](docs/b.md) " \
           "[out](../elsewhere.md) [anchor](docs/a.md#nope)"
    assert broken_links(page, text, tmp_path) == [
        "docs/b.md: no such file in the repository",
        "../elsewhere.md: no such file in the repository",
        "docs/a.md#nope: no heading with that anchor in a.md",
    ]
    assert missing_repo_paths("`docs/a.md`, `docs/b.md`, `fixtures/panels/<name>.toml`", tmp_path) == ["docs/b.md"]


def test_the_paper_panels_time_is_the_estimators_everywhere():
    """One estimator, one number: the paper panel's time on one GPU that README, benchmarks.md,
    scale-out.md and populations.md give is ``RunCost.duration`` of the estimate ``headwatch panels``
    prints (fixtures/estimate.py), not a figure written down apart from it."""
    from headwatch.fixtures.estimate import estimate_models
    from headwatch.fixtures.panels import load_panel

    said = estimate_models(load_panel("paper").models).duration
    assert re.fullmatch(r"[0-9.]+ (s|min|h)", said), said
    for doc, text in (("README.md", f"about {said} on one GPU"), ("docs/benchmarks.md", f"about {said} on one GPU"),
                      ("docs/scale-out.md", f"about {said} on one GPU"), ("docs/populations.md", f"| ~{said} |")):
        assert text in (ROOT / doc).read_text(), (doc, text)
        assert "1-2 hours" not in (ROOT / doc).read_text(), doc


def test_docs_for_users_outside_the_checkout_name_the_claims_by_package():
    """A user judging their own run works in their own folder, where ``pytest claims`` finds no folder
    ``claims``: the pages written for them say ``pytest --pyargs headwatch.claims`` (tests/test_wheel.py
    runs it from outside the checkout)."""
    training_loop = (ROOT / "docs" / "training-loop.md").read_text()
    assert "pytest claims --panel" not in training_loop and "pytest --pyargs headwatch.claims --panel" in training_loop
    auditing = (ROOT / "README.md").read_text().split("## Auditing a seed", 1)[1].split("\n## ", 1)[0]
    assert "pytest --pyargs headwatch.claims --panel my-seed.toml" in auditing
