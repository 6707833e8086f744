"""The converter's fast path (headwatch.schema._fast_converter) decides exactly as its exact path.

Records hold ~10^4 numbers, so ``from_data`` first tries a bulk check of the shapes records are made
of and falls back to the exact path (which names the bad value) on anything it does not accept as
is. Whatever the input, the two must agree: the same value back, or an InputError from both.
"""
from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwatch import schema
from headwatch.probes.record import MeasurementRecord
from headwatch.validation import InputError, Rule

#: Numbers a file may hold, the awkward ones included (bools, NaN, infinities, huge ints).
NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-10**30, max_value=10**30),
                    st.booleans(), st.sampled_from([0, 0.0, -0.0, 1, 1.0, 50.0]))
LEAVES = st.one_of(NUMBERS, st.text(max_size=3), st.none())
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), inner, max_size=4)),
    max_leaves=20)

TYPES: list[Any] = [
    float, int, str, float | None,
    dict[str, float], dict[str, tuple[float, float]], dict[str, tuple[float, ...]],
    dict[str, dict[str, float]], dict[str, dict[str, tuple[float, float]]],
    list[float], tuple[float, float], tuple[int, ...], dict[str, list[int]],
]
RULES = [None, Rule(float, "a number >= 0", min=0.0), Rule(float, "a number > 0 and <= 1", min=0.0, above=True, max=1.0),
         Rule(int, "an integer >= 1", min=1)]


def _outcome(fn) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except InputError:
        return "refused", None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and type(a) is type(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("tp", TYPES, ids=str)
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.allowed if r else "no rule")
@settings(max_examples=60, deadline=None)
@given(value=VALUES)
def test_the_fast_path_decides_as_the_exact_path(tp, rule, value):
    if rule is not None and rule.kind is int and tp is not int and "int" not in str(tp):
        return  # an int rule on float fields is never declared; the exact path would refuse every float
    fast = _outcome(lambda: schema.from_data(tp, value, "v", rule))
    exact = _outcome(lambda: schema._convert(tp, value, "v", rule, "ignore", {}))
    assert fast[0] == exact[0], (tp, rule, value, fast, exact)
    assert _same(fast[1], exact[1]), (tp, rule, value, fast, exact)


def test_a_record_with_an_interval_of_three_ends_is_refused_as_the_exact_path_refuses_it():
    """A planted damage the fast path once let through: a fixed-length pair given three numbers."""
    with pytest.raises(InputError):
        schema.from_data(tuple[float, float], [0.1, 0.2, 0.3], "v")
    with pytest.raises(InputError):
        schema.from_data(dict[str, dict[str, tuple[float, float]]], {"L0_H0": {"induction": [1.0, 2.0, 3.0]}}, "v")
    assert schema.from_data(dict[str, dict[str, tuple[float, float]]], {"L0_H0": {"induction": [1, 2.0]}}, "v") \
        == {"L0_H0": {"induction": (1.0, 2.0)}}


def test_a_published_record_reads_the_same_through_both_paths(monkeypatch):
    """The author's Pythia 1B step143000 record (shipped), read with and without the fast path."""
    import json
    from pathlib import Path

    import headwatch.fixtures as fixtures_pkg

    folder = Path(fixtures_pkg.__file__).parent / "published" / "EleutherAI--pythia-1b"
    data = json.loads(sorted(folder.glob("*.json"))[-1].read_text())
    fast = MeasurementRecord.from_dict(data)
    monkeypatch.setattr(schema, "_fast_converter", lambda tp, rule: None)
    exact = MeasurementRecord.from_dict(data)
    assert fast == exact
