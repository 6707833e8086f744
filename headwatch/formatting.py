"""How a figure is written for people: percentages, shares, token counts, numbers and intervals; and
text a file supplied, made safe for a terminal (:func:`terminal_text`).

The one module for it: verdict messages and keys (headwatch.claims.judge), the population report,
figure captions and the sensitivity grid all write a number through these, so a share reads the
same everywhere. Imports nothing of headwatch's (a helper).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

#: How an interval's ends are written (the one notation): a closed interval (confidence intervals,
#: exact intervals), a milestone's bracket on the revision grid (after the last revision that does
#: not meet it, at or before the first that does) and a ratio or fraction of such brackets, whose
#: ends are both open (docs/statistics.md, "Intervals and their notation").
CLOSED, GRID, OPEN = "[]", "(]", "()"

Bound = tuple[float | None, float | None]


def fmt_pct(x: float | None, fmt: str = "g") -> str:
    """A share as a percentage, ``fmt`` the number's format: 0.025 -> '2.5%', 0.5 -> '50%'; with
    ``fmt=".2f"`` 0.0405 -> '4.05%'; None (unknown) -> '?'."""
    return "?" if x is None else f"{100 * x:{fmt}}%"


def fmt_share(x: float) -> str:
    """A level written as the simple fraction it stands for: 2/3 -> '2/3', 0.5 -> '1/2'; else '0.7'."""
    for den in range(2, 11):
        num = round(x * den)
        if 0 < num < den and abs(x - num / den) < 1e-9:
            return f"{num}/{den}"
    return f"{x:.3g}"


def fmt_tokens(tokens: float | None) -> str:
    """23e9 -> '23B', 6.29e9 -> '6.29B', 2.1e6 -> '2.1M'; None -> 'never'."""
    if tokens is None:
        return "never"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(tokens) >= scale:
            return f"{tokens / scale:.3g}{unit}"
    return f"{tokens:.3g}"


def fmt_number(x: float, fmt: str = ".3g") -> str:
    """A bound or ratio as intervals write it: 3 significant digits, whole numbers from 1e3 to 1e6
    in full (1000, not 1e+03)."""
    return f"{x:.0f}" if 1e3 <= abs(x) < 1e6 and fmt == ".3g" else format(x, fmt)


def fmt_interval(interval: Bound | None, fmt: str = ".3g", ends: str = CLOSED) -> str:
    """(5.09, 26.4) -> '[5.09, 26.4]'; with ``ends=OPEN`` '(5.09, 26.4)'; with ``ends=GRID``
    '(10, 23]'. A missing bound (None: unbounded) shows as -inf / inf, always with an open end."""
    if interval is None:
        return ""
    lo, hi = interval
    left = "(" if lo is None else ends[0]
    right = ")" if hi is None else ends[1]
    return f"{left}{'-inf' if lo is None else fmt_number(lo, fmt)}, {'inf' if hi is None else fmt_number(hi, fmt)}{right}"


def fmt_layers(layers: Sequence[int]) -> str:
    """(0, 1) -> '0/1'."""
    return "/".join(str(l) for l in layers)


#: What a terminal must never receive raw from a file: C0 controls (ESC, CR, backspace, newline, tab,
#: ...), DEL, C1 controls (CSI 0x9b among them) and the Unicode bidirectional marks, overrides and
#: isolates (which reorder what is shown).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(c: str) -> str:
    code = ord(c)
    return _NAMED.get(c) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def terminal_text(text: object, *, newlines: bool = False) -> str:
    """``text`` as a terminal may show it: every control character written as Python escapes it
    (ESC -> ``\\x1b``, a newline -> ``\\n``), so text a file supplied (a panel's description, a
    model id, a revision, a record's field) can neither move the cursor, clear the screen, recolour
    nor forge a line. ``newlines``: keep ``\\n`` (a message whose line breaks the code itself made).
    Every terminal front end writes a file's text through this; JSON (``json.dumps``) and HTML
    (``html.escape``) escape on their own."""
    text = str(text)
    if newlines:
        return "\n".join(_CONTROL.sub(lambda m: _escaped(m.group()), line) for line in text.split("\n"))
    return _CONTROL.sub(lambda m: _escaped(m.group()), text)
