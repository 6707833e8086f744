"""Names a user types (models, panels, revisions, keys): comma lists, matching, "did you mean".

One rule each, used by the pytest options, the CLI, the panel parser and the loaders alike.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

#: How alike (difflib ratio) a known name must be to be offered as "did you mean".
CLOSE_CUTOFF = 0.5
#: Where a branch name states its training step (group 1): ``step3000``, ``step11000-tokens23B``.
STEP_PATTERN = r"step(\d+)"


def split_list(values: Iterable[str] | str | None) -> list[str]:
    """Repeatable options that also take comma lists: ``['a,b', ' c']`` -> ``['a', 'b', 'c']``."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def step_number(revision: str, pattern: str = STEP_PATTERN) -> int | None:
    """The training step in a branch name (``step11000-tokens23B`` -> 11000), or None."""
    m = re.search(pattern, revision)
    return int(m.group(1)) if m else None


def model_matches(query: str, repo: str, *aliases: str | None) -> bool:
    """Whether ``query`` names a model: its repo id (``org/name``), the name after the slash, or any
    alias (short name, test id, ``panel.name``), case-insensitively."""
    q = query.strip().casefold()
    names = {repo, repo.rsplit("/", 1)[-1], *(a for a in aliases if a)}
    return q in {n.casefold() for n in names}


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` choices most like ``name``; failing that, those sharing its first ``-`` part
    (a branch's step number, say)."""
    choices = list(dict.fromkeys(choices))
    found = difflib.get_close_matches(name, choices, n=n, cutoff=CLOSE_CUTOFF)
    if not found:
        prefix = name.split("-")[0]
        found = [c for c in choices if prefix and c.startswith(prefix)][:n]
    return found


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'a', 'b'?)`` or an empty string."""
    near = closest(name, choices)
    return f" (did you mean {', '.join(repr(c) for c in near)}?)" if near else ""


def nearest_hint(name: str, choices: Iterable[str]) -> str:
    """``closest existing: a, b`` or, when nothing is close, how many there are and a few of them."""
    choices = list(choices)
    near = closest(name, choices)
    if near:
        return f"closest existing: {', '.join(near)}"
    return f"it has {len(choices)} branch(es)" + (f", e.g. {', '.join(sorted(choices)[:5])}" if choices else "")


_NUMBERED = re.compile(r"(.*?)(\d+)(\D*)")


def compact(names: Iterable[str], limit: int = 8) -> str:
    """Many names in a line: numbered names of one pattern as ranges (``step1..step5000`` for every
    step, ``step0..step9000 every 1000``), others as they are; past ``limit`` parts, the first ones
    and how many more. Order: as given, groups kept together."""
    groups: dict[tuple[str, str], list[int]] = {}
    parts_of: list[tuple[str, str] | str] = []
    for name in dict.fromkeys(names):
        m = _NUMBERED.fullmatch(name)
        if m is None or (len(m.group(2)) > 1 and m.group(2).startswith("0")) or len(m.group(2)) > 18:
            parts_of.append(name if len(name) <= 60 else f"{name[:40]}...({len(name)} characters)")
            continue  # step007 kept as written; a number of hundreds of digits shortened
        key = (m.group(1), m.group(3))
        if key not in groups:
            groups[key] = []
            parts_of.append(key)
        groups[key].append(int(m.group(2)))
    parts: list[str] = []
    for item in parts_of:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, suffix = item
        numbers = sorted(set(groups[item]))
        i = 0
        while i < len(numbers):  # arithmetic runs of three or more become ranges
            j = i + 1
            step = numbers[j] - numbers[i] if j < len(numbers) else 0
            while j + 1 < len(numbers) and numbers[j + 1] - numbers[j] == step:
                j += 1
            if j - i >= 2:
                every = "" if step == 1 else f" every {step}"
                parts.append(f"{prefix}{numbers[i]}{suffix}..{prefix}{numbers[j]}{suffix}{every}")
                i = j + 1
            else:
                parts.append(f"{prefix}{numbers[i]}{suffix}")
                i += 1
    shown = ", ".join(parts[:limit])
    return shown + (f", ... ({len(parts) - limit} more)" if len(parts) > limit else "")


def duration(seconds: float) -> str:
    """A duration as people read it: ``3725`` -> ``1 h 02 min``; ``95`` -> ``1 min 35 s``; ``12.3`` -> ``12 s``."""
    s = max(0, int(round(seconds)))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"
