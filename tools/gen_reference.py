"""Write docs/reference.md from the code: commands and options, exit codes, panel keys.

Every row comes from where the behaviour is defined, so the page cannot say something the code
does not do: the ``headwatch`` options from ``headwatch.cli.build_parser`` (one subcommand at a
time, as ``headwatch COMMAND --help`` builds them), the pytest options from
``headwatch.plugin.pytest_addoption``, the exit codes from ``headwatch.cli.EXIT_CODES`` and
``headwatch.plugin.EXIT_STATUS`` (with pytest's own ``pytest.ExitCode``), and the panel keys from
the annotated example in ``headwatch.fixtures.panels``' docstring (their meaning), the key sets
the parser accepts and the dataclasses it fills (their type and default). A key the parser accepts
that the example does not document, or the other way round, stops the generator.
tests/test_docs.py fails when the checked-in page differs from what this writes.

    .venv/bin/python tools/gen_reference.py           # write docs/reference.md
    .venv/bin/python tools/gen_reference.py --check   # exit 1, saying so, when the page is stale
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference.md"
#: What regenerates the page (the docs test's message names it).
COMMAND = "python tools/gen_reference.py"


# ---- tables ---------------------------------------------------------------------------------


def _cell(text: Any) -> str:
    """One table cell: one line, pipes escaped, reStructuredText's ``code`` as Markdown's `code`."""
    return " ".join(str(text).split()).replace("``", "`").replace("|", "\\|")


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _value(value: Any) -> str:
    """A default as a user would type it (TOML / command line); unset values read "unset"."""
    if value is None or value == [] or value == {} or value == ():
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`' if value == "" else f"`{value}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


# ---- command-line options -------------------------------------------------------------------


def _option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    """(option as --help shows it, default, help) for every argument but -h and subcommands."""
    formatter = argparse.HelpFormatter(parser.prog)
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            default = "on" if action.default else "off"
        elif isinstance(action, argparse._VersionAction) or action.default is argparse.SUPPRESS:
            default = ""
        elif isinstance(action, argparse._CountAction):
            default = f"`{action.default}`"
        else:
            default = "required" if action.required else _value(action.default)
        help_text = formatter._expand_help(action) if action.help else ""
        rows.append((f"`{formatter._format_action_invocation(action)}`", default, help_text))
    return rows


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def cli_section() -> str:
    from headwatch import cli

    header = ("option", "default", "meaning")
    parts = ["## `headwatch` commands and options", "",
             "Every command also takes `-h`/`--help`, which prints the same options.", "",
             "### `headwatch`", "", _table(header, _option_rows(cli.build_parser(None)))]
    for name, (_module, help_text) in cli.SUBCOMMANDS.items():
        sub = _subparser(cli.build_parser(name), name)
        parts += ["", f"### `headwatch {name}`", "", help_text[0].upper() + help_text[1:] + ".", "",
                  _table(header, _option_rows(sub))]
    return "\n".join(parts)


class _OptionRecorder:
    """What ``pytest_addoption`` is handed here: a parser whose groups are argparse parsers, so the
    plugin's options read exactly like the CLI's. An ini value would not be documented: it stops."""

    def __init__(self) -> None:
        self.groups: dict[str, tuple[str, argparse.ArgumentParser]] = {}

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> "_Group":
        if name not in self.groups:
            self.groups[name] = (description, argparse.ArgumentParser(prog="pytest", add_help=False))
        return _Group(self.groups[name][1])

    def addoption(self, *names: str, **attrs: Any) -> None:
        self.getgroup("general").addoption(*names, **attrs)

    def addini(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("the plugin registers an ini value: teach tools/gen_reference.py to list it")


@dataclasses.dataclass
class _Group:
    parser: argparse.ArgumentParser

    def addoption(self, *names: str, **attrs: Any) -> None:
        self.parser.add_argument(*names, **attrs)


def pytest_section() -> str:
    from headwatch import plugin

    recorder = _OptionRecorder()
    plugin.pytest_addoption(recorder)
    parts = ["## pytest options", ""]
    for name, (description, parser) in recorder.groups.items():
        parts += [f'Group "{name}" in `pytest --help`' + (f" ({description})" if description else "") + ".", "",
                  _table(("option", "default", "meaning"), _option_rows(parser)), ""]
    return "\n".join(parts).rstrip()


# ---- exit codes -----------------------------------------------------------------------------


def exit_section() -> str:
    import pytest

    from headwatch import cli, plugin

    pytest_rows = [(code, text) for code, text in plugin.EXIT_STATUS.items()]
    # pytest's own codes 0-5 (every pytest since 5.0 has them; a newer one's extra codes would make
    # this page depend on the installed version).
    pytest_rows += [(int(c), f"pytest's own: {c.name.lower().replace('_', ' ')}") for c in pytest.ExitCode
                    if int(c) <= 5 and int(c) not in plugin.EXIT_STATUS]
    return "\n".join([
        "## Exit codes", "",
        "### `headwatch` (every command)", "",
        _table(("code", "meaning"), sorted(cli.EXIT_CODES.items())), "",
        "### `pytest` (a run that includes headwatch's claim tests)", "",
        _table(("code", "meaning"), sorted(pytest_rows)),
    ])


# ---- panel files ----------------------------------------------------------------------------


@dataclasses.dataclass
class _Documented:
    """One key of the annotated example: its table, and the comment that says what it means."""

    table: str
    key: str
    meaning: str


def panel_example() -> tuple[str, str]:
    """The annotated example of ``headwatch.fixtures.panels``' docstring, and the prose after it."""
    from headwatch.fixtures import panels

    doc = panels.__doc__ or ""
    head, rest = doc.split("::\n", 1)
    example, after = rest.split("\nSources:", 1)
    return textwrap.dedent(example).strip("\n"), "Sources:" + after.rstrip()


_TABLE_RE = re.compile(r"^\[\[?([\w.]+)\]\]?\s*(?:#\s?(.*))?$")
_KEY_RE = re.compile(r'^("?[\w@.-]+"?)\s*=\s*.*?\s{2,}#\s?(.*)$')
_MORE_RE = re.compile(r"^\s+#\s*(.*)$")


def _normal_table(name: str) -> str:
    """``models.expect.xfail.F4`` -> ``models.expect.xfail.<claim>``: the example's claim is one of many."""
    return re.sub(r"^(models\.expect\.xfail)\..+$", r"\1.<claim>", name)


def parse_example(example: str) -> tuple[dict[str, str], list[_Documented]]:
    """Table comments and documented keys, in order, from the annotated example."""
    tables: dict[str, str] = {}
    keys: list[_Documented] = []
    table, last = "", None
    for line in example.splitlines():
        if m := _TABLE_RE.match(line):
            table, last = _normal_table(m.group(1)), None
            tables[table] = m.group(2) or ""
        elif m := _KEY_RE.match(line):
            last = _Documented(table, m.group(1).strip('"'), m.group(2))
            keys.append(last)
        elif m := _MORE_RE.match(line):
            if last is None:
                tables[table] += " " + m.group(1)
            else:
                last.meaning += " " + m.group(1)
    return tables, keys


def _field_comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment above each field of a dataclass, from its source."""
    lines = inspect.getsource(cls).splitlines()
    out = {}
    for node in ast.parse(textwrap.dedent("\n".join(lines))).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            comment, i = [], node.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#:"):
                comment.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            out[node.target.id] = " ".join(comment)
    return out


_WORDS = {"str": "string", "bool": "boolean", "int": "integer", "float": "number"}


def toml_type(annotation: str) -> str:
    """A dataclass field's annotation as a TOML user reads it: ``tuple[str, ...] | None`` -> array of strings, optional."""
    optional = annotation.endswith(" | None")
    base = annotation.removesuffix(" | None")
    if base in _WORDS:
        text = _WORDS[base]
    elif m := re.fullmatch(r"(?:tuple|list)\[(\w+), \.\.\.\]", base):
        text = f"array of {_WORDS.get(m.group(1), m.group(1))}s"
    elif m := re.fullmatch(r"tuple\[(\w+)(?:, \1)+\]", base):
        text = f"array of {base.count(',') + 1} {_WORDS.get(m.group(1), m.group(1))}s"
    else:
        text = "table"
    return text + (", optional" if optional else "")


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return _value(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return _value(field.default_factory())
    return "—"


def shipped_panels() -> str:
    """The panels in ``fixtures/panels/``: name, description, needs, models (read as TOML: loading one
    would train or download)."""
    import tomllib

    from headwatch.fixtures import panels

    rows = []
    for path in sorted(panels.PANEL_DIR.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        head = data.get("panel", {})
        needs = [w for w, key in (("network", "needs_network"), ("GPU", "needs_gpu")) if head.get(key)]
        rows.append((f"`{head.get('name', path.stem)}`", head.get("description", ""),
                     ", ".join(needs) or "nothing", ", ".join(m["name"] for m in data.get("models", []))))
    return _table(("panel", "what it is", "needs", "models"), rows)


def panel_section() -> str:
    from headwatch.fixtures import panels
    from headwatch.probes.record import ProbeSettings
    from headwatch.spec import DEVIATION_KEYS, EXPECT_KEYS, FORMATION_KEYS, Deviation, Expectations, Formation

    probe_keys = set(ProbeSettings.__dataclass_fields__) - panels._SPEC_PROBE_FIELDS
    #: table -> (keys the parser accepts there, the dataclass it fills, key -> field where they differ)
    schema: dict[str, tuple[set[str], type, dict[str, str]]] = {
        "panel": (set(panels._PANEL_KEYS), panels.Panel, {}),
        "models": (set(panels._MODEL_KEYS | panels._POPULATION_KEYS) - {"tokens", "probe", "expect", "organism"},
                   panels.PanelModel, {"total_tokens": "total_tokens_declared"}),
        "models.tokens": (set(panels._TOKENS_KEYS), panels.TokensRule, {}),
        "models.probe": (probe_keys, ProbeSettings, {}),
        "models.expect": (set(EXPECT_KEYS) - {"xfail", "formation"}, Expectations, {}),
        "models.expect.xfail.<claim>": (set(DEVIATION_KEYS), Deviation, {}),
        "models.expect.formation": (set(FORMATION_KEYS), Formation, {}),
        "models.organism": (set(panels._ORGANISM_KEYS), panels.OrganismSpec, {}),
    }
    example, sources = panel_example()
    tables, documented = parse_example(example)
    problems = [f"[{t}] is in the example but the parser has no such table" for t in tables if t not in schema]
    for table, (accepted, _cls, _names) in schema.items():
        have = {d.key for d in documented if d.table == table}
        if table == "models.probe":  # the example shows one; every field is listed from ProbeSettings
            problems += [f"[{table}] {k}: in the example, not accepted" for k in sorted(have - accepted)]
            continue
        problems += [f"[{table}] {k}: accepted by the parser, not in the example" for k in sorted(accepted - have)]
        problems += [f"[{table}] {k}: in the example, not accepted by the parser" for k in sorted(have - accepted)]
    if problems:
        raise SystemExit("fixtures/panels.py's docstring and its parser disagree:\n  " + "\n  ".join(problems))

    parts = ["## Panel files", "",
             "A panel is a TOML file: a shipped name (`fixtures/panels/<name>.toml`) or any path given to "
             "`--panel`. The shipped ones (without `--panel`, those needing neither network nor GPU run):", "",
             shipped_panels(), "",
             "Every key a panel may hold, in the order of `headwatch.fixtures.panels`' docstring, "
             "which is where they are documented:", "", "```toml", example, "```", "",
             sources.replace("``", "`"), ""]
    for table, (_accepted, cls, names) in schema.items():
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if table == "models":  # a population's keys are read into a PopulationSpec, then expanded
            fields.update({f.name: f for f in dataclasses.fields(panels.PopulationSpec)})
        if table == "models.probe":
            comments = _field_comments(ProbeSettings)
            rows = [(f"`{k}`", toml_type(fields[k].type), _default(fields[k]), comments.get(k, ""))
                    for k in fields if k in probe_keys]
        else:
            rows = [(f"`{d.key}`", toml_type(fields[names.get(d.key, d.key)].type),
                     _default(fields[names.get(d.key, d.key)]), d.meaning)
                    for d in documented if d.table == table]
        title = f"[[{table}]]" if table == "models" else f"[{table}]"
        intro = tables.get(table, "")
        parts += [f"### `{title}`", ""] + ([_cell(intro[0].upper() + intro[1:]) + ".", ""] if intro else [])
        parts += [_table(("key", "type", "default", "meaning"), rows), ""]
    parts.append("A default of — has no fixed value: the meaning says what applies (for an organism, "
                 "its recipe fills `repo`, `revisions`, `tokens` and `[models.probe]`).")
    return "\n".join(parts)


# ---- the page -------------------------------------------------------------------------------


def render() -> str:
    return "\n".join([
        "# Reference: commands, options, exit codes, panel files", "",
        f"Written from the code by `{COMMAND}`; do not edit it by hand (tests/test_docs.py fails when it "
        "differs from what the code says).", "",
        exit_section(), "", cli_section(), "", pytest_section(), "", panel_section(), "",
    ])


def main(argv: list[str]) -> int:
    check = "--check" in argv
    text = render()
    if check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is not what the code says: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
