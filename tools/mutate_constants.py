"""Mutation check of SPEC's table: move each constant slightly, both ways, and show a test turns red.

For every field of ``Thresholds`` in headwatch/spec.py: a float x 0.95 and x 1.05, an int - 1 and
+ 1, a tuple of floats scaled by 0.95 and 1.05, a tuple of ints shortened by its last element and
extended by one more. Each mutant is written into headwatch/spec.py (the editable install reads the
checkout), ``pytest tests/test_tolerances.py -x`` runs against it, and the original file is put back
(also on Ctrl-C). Prints a Markdown table (constant, value, mutant, the first red test or GREEN) and
exits 1 if any mutant leaves every test green.

    .venv/bin/python tools/mutate_constants.py [--only NAME ...] [--tests PATH ...] [--out FILE]

Refuses to run when headwatch/spec.py has uncommitted changes (it restores the committed text).
"""
from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC_FILE = ROOT / "headwatch" / "spec.py"
FIELD = re.compile(r"^    (?P<name>[a-z_0-9]+): (?P<type>[^=]+?) = (?P<value>.+)$")


def fields(text: str) -> list[tuple[int, str, str, str]]:
    """(line index, name, type, value source) of each field of ``class Thresholds``."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("class Thresholds"))
    out = []
    for i in range(start + 1, len(lines)):
        if lines[i] and not lines[i].startswith((" ", "#")):
            break
        m = FIELD.match(lines[i])
        if m:
            out.append((i, m["name"], m["type"].strip(), m["value"].strip()))
    return out


def mutants(type_: str, value_src: str) -> list[str]:
    """Source text of the two mutants of one value (down, up)."""
    value = eval(compile(ast.parse(value_src, mode="eval"), "<spec>", "eval"), {"__builtins__": {}})  # literals, 2 / 3
    if isinstance(value, bool):
        return [repr(not value)]
    if isinstance(value, int):
        return [repr(value - 1), repr(value + 1)]
    if isinstance(value, float):
        return [repr(value * 0.95), repr(value * 1.05)]
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return [repr(value[:-1]), repr(value + (value[-1] + 1,))]
    if isinstance(value, tuple):
        return [repr(tuple(v * 0.95 for v in value)), repr(tuple(v * 1.05 for v in value))]
    raise ValueError(f"no mutation rule for {type_} = {value_src}")


def run_tests(tests: list[str]) -> tuple[bool, str]:
    """(all green, the first failing test id or the last output line)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "-rf"], cwd=ROOT, capture_output=True, text=True)
    failed = [l.split()[1] for l in proc.stdout.splitlines() if l.startswith(("FAILED ", "ERROR "))]
    if proc.returncode == 0:
        return True, ""
    return False, failed[0].split("::")[-1] if failed else proc.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=None, help="only these constants (default: all)")
    parser.add_argument("--tests", nargs="+", default=["tests/test_tolerances.py"], help="tests to run per mutant")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    if subprocess.run(["git", "diff", "--quiet", "--", str(SPEC_FILE)], cwd=ROOT).returncode != 0:
        print(f"error: {SPEC_FILE} has uncommitted changes; commit them first (this tool restores the file)",
              file=sys.stderr)
        return 2
    original = SPEC_FILE.read_text()
    ok, why = run_tests(args.tests)
    if not ok:
        print(f"error: the tests are red before any mutation ({why})", file=sys.stderr)
        return 2
    rows, green = ["| constant | value | mutant | first red test |", "| --- | --- | --- | --- |"], 0
    try:
        for index, name, type_, value in fields(original):
            if args.only and name not in args.only:
                continue
            for mutant in mutants(type_, value):
                lines = original.splitlines(keepends=True)
                lines[index] = lines[index].replace(f"= {value}", f"= {mutant}", 1)
                SPEC_FILE.write_text("".join(lines))
                t0 = time.monotonic()
                ok, why = run_tests(args.tests)
                green += ok
                rows.append(f"| `{name}` | {value} | {mutant} | {'**GREEN**' if ok else why} |")
                print(rows[-1] + f"  ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    finally:
        SPEC_FILE.write_text(original)
    table = "\n".join(rows)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    print(f"{green} mutant(s) left every test green", file=sys.stderr)
    return 1 if green else 0


if __name__ == "__main__":
    sys.exit(main())
