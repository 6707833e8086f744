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
