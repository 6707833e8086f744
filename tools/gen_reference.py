"""Write docs/reference.md from the code: commands and options, exit codes, panel keys.

Every row comes from where the behaviour is defined, so the page cannot say something the code
does not do (the claim API from ``headwatch.claims.Claim``'s fields and the registered built-in
claims): the ``headwatch`` options from ``headwatch.cli.build_parser`` (one subcommand at a
time, as ``headwatch COMMAND --help`` builds them), the pytest options from
``headwatch.plugin.pytest_addoption``, the exit codes from ``headwatch.cli.EXIT_CODES`` and
``headwatch.plugin.EXIT_STATUS`` (with pytest's own ``pytest.ExitCode``), and the panel keys from
the panel schema (``headwatch.fixtures.panels.schema.TABLES``: each key's type, default, allowed
values, meaning and example value are its field's; the annotated example is written from them). A
key without a meaning stops the generator.
tests/test_docs.py fails when the checked-in page differs from what this writes.

    .venv/bin/python tools/gen_reference.py           # write docs/reference.md
    .venv/bin/python tools/gen_reference.py --check   # exit 1, saying so, when the page is stale
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import textwrap
import types
import typing
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

#: The example's comments start at this column, as a person would align them.
_COMMENT_COLUMN = 36
_WIDTH = 116
_WORDS = {str: "string", bool: "boolean", int: "integer", float: "number"}


def toml_type(tp: Any) -> str:
    """A field's type as a TOML user reads it: ``tuple[str, ...] | None`` -> "array of strings, optional"."""
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        kinds = [toml_type(a) for a in args if a is not type(None)]
        return " or ".join(kinds) + (", optional" if type(None) in args else "")
    if tp in _WORDS:
        return _WORDS[tp]
    if origin in (tuple, list):
        items = [a for a in args if a is not Ellipsis]
        word = _WORDS.get(items[0], "table") + "s" if items else "values"
        return f"array of {len(args)} {word}" if Ellipsis not in args and len(args) > 1 else f"array of {word}"
    return "table"


def toml_value(value: Any) -> str:
    """A Python value as TOML writes it (strings with a backslash as literal strings)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"'{value}'" if "\\" in value else json.dumps(value)
    if isinstance(value, float) and (abs(value) >= 1e6 or 0 < abs(value) < 1e-3):
        return f"{value:.6g}".replace("e+0", "e").replace("e+", "e")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _commented(line: str, comment: str) -> list[str]:
    """``line`` with ``comment`` from the comment column, wrapped onto indented comment lines."""
    start = max(_COMMENT_COLUMN, len(line) + 2)
    first, *more = textwrap.wrap(comment, _WIDTH - start - 2) or [""]
    out = [f"{line.ljust(start)}# {first}".rstrip()]
    rest = textwrap.wrap(" ".join(more), _WIDTH - _COMMENT_COLUMN - 5)
    return out + [f"{' ' * _COMMENT_COLUMN}#    {m}" for m in rest]


def _meta(f: dataclasses.Field) -> dict[str, Any]:
    return dict(f.metadata)


def _fields(table: Any) -> list[dataclasses.Field]:
    from headwatch.schema import keys_of

    fields = keys_of(table.schema)
    names = table.keys if table.keys is not None else tuple(fields)
    return [fields[n] for n in names]


def panel_example() -> str:
    """The annotated example: every table, every key with an example value and what it means
    (from the schema's metadata: headwatch.fixtures.panels.schema.TABLES)."""
    from headwatch.fixtures.panels.schema import TABLES
    from headwatch.schema import data_key

    lines: list[str] = []
    for table in TABLES:
        header = f"[[{table.name}]]" if table.array else f"[{table.example_name or table.name}]"
        lines += [""] if lines else []
        lines += _commented(header, table.doc + (f" {table.more}" if table.more else ""))
        for f in _fields(table):
            meta = _meta(f)
            if table.example_keys is not None and data_key(f) not in table.example_keys:
                continue
            if "example" not in meta:  # a table of its own, shown under its own header
                continue
            lines += _commented(f"{data_key(f)} = {toml_value(meta['example'])}", meta.get("doc", ""))
    return "\n".join(lines)


def _allowed(f: dataclasses.Field, owner: type) -> str:
    """What a key may be beyond its type: its choices, bounds or rule (the schema's metadata)."""
    from headwatch.schema import describe, type_hints

    meta = _meta(f)
    rule = meta.get("rule") or getattr(owner, "FIELD_RULES", {}).get(f.name)
    if meta.get("choices"):
        return ", ".join(f"`{c}`" for c in meta["choices"])
    if meta.get("allowed"):
        return meta["allowed"]
    if rule is not None:
        return rule.allowed
    if "min" in meta or "max" in meta:
        lo, hi = meta.get("min"), meta.get("max")
        kind = next(a for a in typing.get_args(type_hints(owner)[f.name]) or (type_hints(owner)[f.name],)
                    if a is not type(None))
        return describe(kind) + " " + " and ".join(
            ([f"{'>' if meta.get('above') else '>='} {lo:g}"] if lo is not None else [])
            + ([f"<= {hi:g}"] if hi is not None else []))
    return ""


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return _value(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return _value(field.default_factory())
    return "required"


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


def undocumented_keys() -> list[str]:
    """Keys of the schema without a meaning (``doc``): the generator refuses to write a page without one."""
    from headwatch.fixtures.panels.schema import TABLES
    from headwatch.schema import data_key

    return [f"[{t.name}] {data_key(f)}" for t in TABLES for f in _fields(t) if not _meta(f).get("doc")]


def panel_section() -> str:
    import importlib

    from headwatch.fixtures.panels.schema import INLINE_TABLES, TABLES
    from headwatch.fixtures.panels.sources import SOURCES
    from headwatch.schema import data_key, type_hints

    populations = importlib.import_module("headwatch.fixtures.panels.populations")  # the package's name is a function

    missing = undocumented_keys()
    if missing:
        raise SystemExit("keys of the panel schema without a meaning (give each field key(doc=...)):\n  "
                         + "\n  ".join(missing))
    source_lines = [f"- `{name}`: {src.doc}." for name, src in SOURCES.items()]
    parts = ["## Panel files", "",
             "A panel is a TOML file: a shipped name (`fixtures/panels/<name>.toml`) or any path given to "
             "`--panel`. The shipped ones (without `--panel`, those needing neither network nor GPU run):", "",
             shipped_panels(), "",
             "Every key a panel may hold, as the schema defines it (`headwatch.fixtures.panels.schema`: one "
             "dataclass per table, each key a field with its type, default, allowed values and meaning), with an "
             "example value:", "", "```toml", panel_example(), "```", "",
             "Sources (`source = ...`, `headwatch.fixtures.panels.sources`):", "", *source_lines, "",
             "`[models.probe]` may not set the SPEC's thresholds (they are the judge's too: headwatch.spec).", "",
             " ".join((populations.__doc__ or "").split()).replace("``", "`"), ""]
    for table in (*TABLES, *INLINE_TABLES):
        hints = type_hints(table.schema)
        rows = [(f"`{data_key(f)}`", toml_type(hints[f.name]), _default(f), _allowed(f, table.schema),
                 _meta(f).get("doc", "")) for f in _fields(table)]
        title = f"[[{table.name}]]" if table.array else (table.title or f"[{table.name}]")
        parts += [f"### `{title}`", "", _cell(table.doc[0].upper() + table.doc[1:]) + ".", ""]
        parts += [_table(("key", "type", "default", "allowed", "meaning"), rows), ""]
    parts.append("A key without default is required; `unset` means the key is absent (the meaning says what "
                 "applies then, e.g. for an organism its recipe fills `repo`, `revisions`, `tokens` and "
                 "`[models.probe]`).")
    return "\n".join(parts)


# ---- claims ---------------------------------------------------------------------------------


def _type_text(tp: Any) -> str:
    text = tp if isinstance(tp, str) else getattr(tp, "__name__", str(tp))
    return text.replace("typing.", "").replace("collections.abc.", "")


def claims_section() -> str:
    """The claim API (``headwatch.claims.Claim`` and what it holds) and every registered built-in claim."""
    from headwatch.claims import Claim, NegativeControl, Quantity, Threshold
    from headwatch.claims.registry import all_claims, is_builtin

    parts = ["## Claims", "",
             "A claim is one `headwatch.claims.Claim`, registered where it is defined "
             "(`headwatch.claims.register_claim`); how to write one: [claims.md](claims.md).", "",
             "### `Claim` fields", "",
             _table(("field", "type", "default", "meaning"),
                    [(f"`{f.name}`", f"`{_type_text(f.type)}`",
                      "required" if f.default is dataclasses.MISSING else f"`{f.default!r}`", f.metadata["doc"])
                     for f in dataclasses.fields(Claim)]), ""]
    for cls in (NegativeControl, Threshold, Quantity):
        doc = " ".join((cls.__doc__ or "").split("\n\n")[0].split())
        fields = ", ".join(f"`{f.name}: {_type_text(f.type)}`" for f in dataclasses.fields(cls))
        parts += [f"### `{cls.__name__}`", "", f"{doc} Fields: {fields}.", ""]
    rows = []
    for c in all_claims():
        if not is_builtin(c):
            continue
        bars = "; ".join(f"{t.name} ({t.field or t.value}, {t.source})" for t in c.thresholds)
        rows.append((f"`{c.name}`", c.title, c.question, bars, ", ".join(c.reads) or "none",
                     c.placed_on.name if c.placed_on else "", ", ".join(n.name for n in c.negative_controls)))
    parts += ["### The built-in claims", "", "In the order every front end shows them (a researcher's follow, in "
              "the order they were registered).", "",
              _table(("name", "title", "question", "thresholds (SPEC field or value, source)", "sensitivity knobs",
                      "population quantity", "negative controls"), rows)]
    return "\n".join(parts)


# ---- the page -------------------------------------------------------------------------------


def render() -> str:
    return "\n".join([
        "# Reference: commands, options, exit codes, panel files", "",
        f"Written from the code by `{COMMAND}`; do not edit it by hand (tests/test_docs.py fails when it "
        "differs from what the code says).", "",
        exit_section(), "", cli_section(), "", pytest_section(), "", panel_section(), "", claims_section(), "",
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
