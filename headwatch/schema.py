"""Data <-> dataclass: the one converter for what headwatch reads and writes as plain data.

Panel files (``headwatch.fixtures.panels.schema``), measurement records
(``headwatch.probes.record.MeasurementRecord.from_dict``) and verdicts
(``headwatch.claims.verdict.Verdict.to_dict`` / ``from_dict``) are dataclasses; what a value may be is
said once, by the field: its type, its default, and its metadata (:func:`key`, or a plain
``dataclasses.field(metadata=...)`` where a module may not import this one, as ``headwatch.spec``):

``doc``
    what the key means, one line (docs/reference.md shows it; tools/gen_reference.py reads it);
``example``
    a value the annotated example of docs/reference.md shows;
``choices``
    the values a string may take;
``min``, ``max``, ``above``, ``allowed``, ``hint``
    bounds of every number inside the field (``above``: min is exclusive) and the phrase that
    completes "allowed: ..." (``headwatch.validation.Rule``);
``rule``
    a ``headwatch.validation.Rule`` instead of the bounds above (a class may also map field names to
    rules in ``FIELD_RULES``);
``check``
    ``check(value, where) -> value``, a further rule after the type (a regular expression, a name);
``key``
    the key in the data where it differs from the field's name.

:func:`from_data` builds a dataclass from parsed JSON or TOML, checking every value against its
field: the type (a float must be finite), then the bounds, choices and check; a required key
(a field without default) must be there; a key the class does not know is ignored (a file a newer
headwatch wrote stays readable) or, with ``unknown="refuse"`` (panel files, which a person writes),
refused with a did-you-mean. Every error is an :class:`~headwatch.validation.InputError` naming the
path to the value (``panel 'p', model 'm'.expect.formation.min_top1_final``) and what is allowed.
:func:`to_data` is the inverse: dataclasses, enums and tuples as JSON-able dicts, strings and lists.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from headwatch.names import did_you_mean
from headwatch.validation import InputError, Rule

#: The metadata keys :func:`from_data` and the docs read (the module docstring says what each means).
METADATA_KEYS = frozenset({"doc", "example", "choices", "min", "max", "above", "allowed", "hint", "rule", "check", "key"})

_MISSING: Any = dataclasses.MISSING


def key(default: Any = _MISSING, *, default_factory: Callable[[], Any] | Any = _MISSING, doc: str = "",
        example: Any = _MISSING, choices: tuple[str, ...] = (), min: float | None = None, max: float | None = None,
        above: bool = False, allowed: str = "", hint: str = "", rule: Rule | None = None,
        check: Callable[[Any, str], Any] | None = None, name: str | None = None) -> Any:
    """A dataclass field with its schema metadata (the module docstring lists the keys)."""
    metadata: dict[str, Any] = {"doc": doc}
    for k, v in (("choices", tuple(choices)), ("min", min), ("max", max), ("above", above), ("allowed", allowed),
                 ("hint", hint), ("rule", rule), ("check", check), ("key", name)):
        if v:
            metadata[k] = v
        elif k in ("min", "max") and v is not None:  # a bound of 0
            metadata[k] = v
    if example is not _MISSING:
        metadata["example"] = example
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def data_key(f: dataclasses.Field) -> str:
    """The key of field ``f`` in the data (its name unless ``metadata["key"]`` says otherwise)."""
    return f.metadata.get("key", f.name)


def is_required(f: dataclasses.Field) -> bool:
    return f.default is _MISSING and f.default_factory is _MISSING


def keys_of(cls: type) -> dict[str, dataclasses.Field]:
    """Data key -> field, for the fields a document of ``cls`` holds."""
    return {data_key(f): f for f in dataclasses.fields(cls) if f.init}


@functools.lru_cache(maxsize=None)
def type_hints(cls: type) -> dict[str, Any]:
    """A dataclass's resolved field types, once per class (resolving is most of the cost of a read)."""
    return typing.get_type_hints(cls)


# ---- reading ------------------------------------------------------------------------------------


def from_data(tp: Any, value: Any, where: str, rule: Rule | None = None, *, unknown: str = "ignore",
              meta: Mapping[str, Any] | None = None) -> Any:
    """``value`` (parsed JSON or TOML) checked against the type ``tp`` and built into it.

    ``rule`` bounds every number or string inside (a field's, see the module docstring); ``meta`` is
    the field's metadata (choices, bounds, check); ``unknown``: "ignore" or "refuse" keys a dataclass
    does not know. Lists become tuples where the type says tuple. InputError names the path to the
    bad value and what is allowed.
    """
    meta = meta or {}
    if rule is None:
        rule = meta.get("rule")
    if not _FAST_BLOCKERS.intersection(meta):
        fast = _fast_converter(tp, rule)
        if fast is not None:  # the common shapes, decided without building a path per value (a record has ~10^4)
            try:
                return fast(value)
            except _NotFast:  # something the fast path does not accept as is: the exact path names it below
                pass
    out = _convert(tp, value, where, rule, unknown, meta)
    check = meta.get("check")
    return check(out, where) if check is not None else out


_BASE_RULES: dict[type, Rule] = {int: Rule(int, "an integer"), float: Rule(float, "a finite number"),
                                  str: Rule(str, "a string"), bool: Rule(bool, "true or false")}


#: Metadata the fast path does not apply (choices, bounds, a further check): such a field takes the exact path.
_FAST_BLOCKERS = frozenset({"choices", "min", "max", "check"})


class _NotFast(InputError):
    """The fast path met a value it does not accept as is; :func:`from_data`'s exact path decides."""


def _fast_leaf(kind: type, rule: Rule | None) -> Callable[[Any], Any] | None:
    """A leaf converter accepting exactly the values ``_BASE_RULES[kind]`` then ``rule`` accept (finite
    floats, ints as floats, plain ints and strings within the rule's bounds); None for anything else."""
    if rule is not None and (rule.kind is not kind or (rule.choices and kind is not str)):
        return None
    lo, hi, above = (rule.min, rule.max, rule.above) if rule is not None else (None, None, False)
    choices = rule.choices if rule is not None else ()
    isfinite = math.isfinite

    def bounded(x: Any) -> Any:
        if (lo is not None and (x <= lo if above else x < lo)) or (hi is not None and x > hi):
            raise _NotFast
        return x

    if kind is float:
        def leaf(v: Any) -> Any:
            t = type(v)
            if t is not float and t is not int:
                raise _NotFast
            x = float(v)
            if not isfinite(x):
                raise _NotFast
            return bounded(x)
    elif kind is int:
        def leaf(v: Any) -> Any:
            if type(v) is not int:
                raise _NotFast
            return bounded(v)
    elif kind is str:
        def leaf(v: Any) -> Any:
            if type(v) is not str or (choices and v not in choices):
                raise _NotFast
            return v
    else:
        return None
    return leaf


def _all_str(mapping: Mapping) -> bool:
    return set(map(type, mapping)) <= {str}


def _all_float(values: Any) -> bool:
    return set(map(type, values)) <= {float}


def _bulk_floats(rule: Rule | None) -> Callable[[Any], bool] | None:
    """A check of many numbers at once, True only where every one passes ``_BASE_RULES[float]`` then
    ``rule``: ints or floats (never bools), finite (their sum is: a NaN or an infinity makes it not),
    within the rule's bounds. False sends the values to the exact path, which names the bad one."""
    if rule is not None and (rule.kind is not float or rule.choices):
        return None
    lo, hi, above = (rule.min, rule.max, rule.above) if rule is not None else (None, None, False)

    def ok(values: Any) -> bool:
        values = list(values)
        if not values:
            return True
        if not set(map(type, values)) <= {float, int}:
            return False
        try:
            if not math.isfinite(sum(values)):
                return False
        except OverflowError:  # an int too large for a float
            return False
        if lo is not None and (min(values) <= lo if above else min(values) < lo):
            return False
        return hi is None or max(values) <= hi
    return ok


def _float_tuple(tp: Any) -> tuple[bool, int | None]:
    """(whether ``tp`` is a tuple of floats, its fixed length or None for ``tuple[float, ...]``)."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is not tuple or not args:
        return False, None
    if args[-1] is Ellipsis:
        return args[:-1] == (float,), None
    return set(args) == {float}, len(args)


def _lengths_ok(items: Any, length: int | None) -> bool:
    return length is None or all(len(b) == length for b in items)


def _nested_bulk(inner_tp: Any, rule: Rule | None) -> Callable[[Any], Any] | None:
    """For ``dict[str, dict[str, float]]`` (a record's selectivities) and ``dict[str, dict[str, tuple[float,
    ...]]]`` (their intervals): every number of every head checked in one bulk pass, the result built
    in one comprehension (no call per head: a record has hundreds)."""
    if typing.get_origin(inner_tp) not in (dict, Mapping) or typing.get_args(inner_tp)[:1] != (str,):
        return None
    leaf_tp = typing.get_args(inner_tp)[1]
    pairs, length = _float_tuple(leaf_tp)
    bulk = _bulk_floats(rule) if leaf_tp is float or pairs else None
    if bulk is None:
        return None

    def nested(v: Any) -> dict:
        if type(v) is not dict or not _all_str(v) or not set(map(type, v.values())) <= {dict}:
            raise _NotFast
        if not all(_all_str(d) for d in v.values()):
            raise _NotFast
        leaves = [x for d in v.values() for x in d.values()]
        if pairs:
            if not set(map(type, leaves)) <= {list, tuple} or not _lengths_ok(leaves, length):
                raise _NotFast
            leaves = [x for b in leaves for x in b]
        if not bulk(leaves):
            raise _NotFast
        exact = _all_float(leaves)
        if pairs:
            return {k: {c: tuple(b) if exact else tuple(map(float, b)) for c, b in d.items()} for k, d in v.items()}
        return {k: dict(d) if exact else {c: float(x) for c, x in d.items()} for k, d in v.items()}
    return nested


@functools.lru_cache(maxsize=None)
def _fast_converter(tp: Any, rule: Rule | None) -> Callable[[Any], Any] | None:
    """A converter giving what :func:`from_data` gives for the shapes records are made of (leaves,
    ``X | None``, ``dict[str, X]``, lists and tuples of X), raising :class:`_NotFast` on any value it
    does not accept as is; None for other types (dataclasses: their fields get converters of their own)."""
    if tp in _BASE_RULES:
        return _fast_leaf(tp, rule)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [o for o in args if o is not type(None)]
        inner = _fast_converter(options[0], rule) if len(options) == 1 and len(args) == 2 else None
        if inner is None:
            return None
        return lambda v: None if v is None else inner(v)
    if origin in (dict, Mapping) and args and args[0] is str:
        bulk = _bulk_floats(rule) if args[1] is float else None
        if bulk is not None:  # dict[str, float]: a head's selectivities, PR, sink attention
            def floats(v: Any) -> dict:
                if type(v) is not dict or not bulk(v.values()) or not _all_str(v):
                    raise _NotFast
                return dict(v) if _all_float(v.values()) else {k: float(x) for k, x in v.items()}
            return floats
        is_pair, length = _float_tuple(args[1])
        pair = _bulk_floats(rule) if is_pair else None
        if pair is not None:  # dict[str, tuple[float, ...]]: a head's intervals
            def tuples(v: Any) -> dict:
                if type(v) is not dict or not _all_str(v) or not all(type(b) is list or type(b) is tuple for b in v.values()):
                    raise _NotFast
                if not _lengths_ok(v.values(), length):
                    raise _NotFast
                flat = [x for b in v.values() for x in b]
                if not pair(flat):
                    raise _NotFast
                return {k: tuple(map(float, b)) for k, b in v.items()}
            return tuples
        nested = _nested_bulk(args[1], rule)
        if nested is not None:  # dict[str, dict[str, float | tuple[float, ...]]]: a whole record's table at once
            return nested
        inner = _fast_converter(args[1], rule)
        if inner is None:
            return None

        def mapping(v: Any) -> dict:
            if type(v) is not dict:
                raise _NotFast
            out = {}
            for k, x in v.items():
                if type(k) is not str:
                    raise _NotFast
                out[k] = inner(x)
            return out
        return mapping
    if origin in (list, tuple) and args:
        # a fixed-length tuple (tuple[float, float]) only where its items share one type; its length is checked
        length = None if origin is list or args[-1] is Ellipsis else len(args)
        if length is not None and len(set(args)) != 1:
            return None
        inner = _fast_converter(args[0], rule)
        if inner is None:
            return None
        make = tuple if origin is tuple else list

        def sequence(v: Any) -> Any:
            if (type(v) is not list and type(v) is not tuple) or (length is not None and len(v) != length):
                raise _NotFast
            return make([inner(x) for x in v])
        return sequence
    return None


def _convert(tp: Any, value: Any, where: str, rule: Rule | None, unknown: str, meta: Mapping[str, Any]) -> Any:
    if tp in _BASE_RULES:  # the leaves: most of a record, so checked first
        checked = _leaf(tp, value, where)
        if rule is not None:  # the value as written (-5, not -5.0) in the message
            rule.check(value, where)
            return checked
        return _bounded(tp, value, where, meta, checked)
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in (o for o in options if o is not type(None)):
            try:
                return _convert(option, value, where, rule, unknown, meta)
            except InputError as e:
                errors.append((option, str(e)))
        # the error of the one option shaped like the value (a table, a list) says the most
        alike = [e for o, e in errors if _shape(o) == _shape_of(value)]
        if len(errors) == 1 or len(alike) == 1:
            raise InputError(alike[0] if len(alike) == 1 else errors[0][1])
        allowed = meta.get("allowed") or " or ".join(describe(o) for o in options)
        raise InputError(f"{where}: expected {allowed}, got {short(value)}")
    if origin is typing.Literal:
        return _choice(value, tuple(typing.get_args(tp)), where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(_choice(value, tuple(m.value for m in tp), where))
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, where, unknown, meta)
    if origin in (dict, Mapping) or tp is dict:
        key_tp, value_tp = typing.get_args(tp) or (Any, Any)
        if not isinstance(value, Mapping):
            raise InputError(f"{where}: expected {meta.get('allowed') or 'a table (an object)'}, got {short(value)}")
        return {_convert(key_tp, k, f"{where} key", None, unknown, {}):
                _convert(value_tp, v, f"{where}.{k}" if _bare(k) else f"{where}[{k!r}]", rule, unknown, meta)
                for k, v in value.items()}
    if origin in (list, tuple) or tp in (list, tuple):
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise InputError(f"{where}: expected {meta.get('allowed') or describe(tp)}, got {short(value)}")
        if origin is tuple and args and args[-1] is not Ellipsis and len(args) != len(value):
            raise InputError(f"{where}: expected {meta.get('allowed') or describe(tp)}, got {short(value)}")
        items = [_convert(args[i] if origin is tuple and args and args[-1] is not Ellipsis else (args[0] if args else Any),
                          v, f"{where}[{i}]", rule, unknown, meta) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple or tp is tuple else items
    raise TypeError(f"from_data cannot check type {tp!r} at {where}")  # a programming error, not input


def _shape(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp) or origin in (dict, Mapping) or tp is dict:
        return "table"
    return "list" if origin in (list, tuple) or tp in (list, tuple) else "value"


def _shape_of(value: Any) -> str:
    return "table" if isinstance(value, Mapping) else "list" if isinstance(value, (list, tuple)) else "value"


def _leaf(tp: type, value: Any, where: str) -> Any:
    """A str, int, float (finite) or bool, or InputError saying what was expected."""
    try:
        return _BASE_RULES[tp].check(value, where)
    except InputError:
        if tp is float and isinstance(value, float):  # NaN or infinity: say so
            raise
        raise InputError(f"{where}: expected {describe(tp)}, got {short(value)}") from None


def _bounded(tp: type, value: Any, where: str, meta: Mapping[str, Any], checked: Any) -> Any:
    """``checked`` (``value`` of type ``tp``) within the field's bounds and choices (metadata), as a
    Rule would check them; messages show ``value`` as written."""
    if "choices" in meta:
        return _choice(checked, meta["choices"], where)
    if "min" not in meta and "max" not in meta:
        return checked
    lo, hi, above = meta.get("min"), meta.get("max"), meta.get("above", False)
    allowed = meta.get("allowed") or (describe(tp) + (f" {'>' if above else '>='} {lo:g}" if lo is not None else "")
                                      + (f" and <= {hi:g}" if hi is not None else ""))
    Rule(tp, allowed, min=lo, max=hi, above=above, hint=meta.get("hint", "")).check(value, where)
    return checked


def _choice(value: Any, choices: tuple[Any, ...], where: str) -> Any:
    if value not in choices:
        shown = ", ".join(str(c) for c in choices)
        raise InputError(f"{where}: {short(value)} is not one of {shown}"
                         + (did_you_mean(value, [str(c) for c in choices]) if isinstance(value, str) else ""))
    return value


def _dataclass(tp: type, value: Any, where: str, unknown: str, meta: Mapping[str, Any]) -> Any:
    fields = keys_of(tp)
    if not isinstance(value, Mapping):
        allowed = meta.get("allowed") or f"a table with keys {', '.join(fields)}"
        raise InputError(f"{where}: expected {allowed}, got {short(value)}")
    if unknown == "refuse":
        refuse_unknown_keys(where, value, fields)
    hints = type_hints(tp)
    kwargs = {}
    for name, f in fields.items():
        if name not in value:
            if is_required(f):
                raise InputError(f"{where}: missing required key {name!r}"
                                 + (f": {f.metadata['doc']}" if f.metadata.get("doc") else ""))
            continue
        rule = f.metadata.get("rule") or getattr(tp, "FIELD_RULES", {}).get(f.name)
        kwargs[f.name] = from_data(hints[f.name], value[name], f"{where}.{name}", rule, unknown=unknown, meta=f.metadata)
    return tp(**kwargs)


def refuse_unknown_keys(where: str, table: Mapping[str, Any], allowed: typing.Iterable[str]) -> None:
    """InputError naming every key of ``table`` not in ``allowed``, with the nearest allowed ones."""
    allowed = sorted(allowed)
    unknown = sorted(str(k) for k in set(table) - set(allowed))
    if unknown:
        shown = unknown[:10]  # a file of a million stray keys gets a message of a few lines
        hints = "".join(did_you_mean(k, allowed) for k in shown if len(k) <= 200)
        more = f" and {len(unknown) - len(shown)} more" if len(unknown) > len(shown) else ""
        raise InputError(f"{where}: unknown key(s) {', '.join(k if len(k) <= 40 else k[:37] + '...' for k in shown)}"
                         f"{more}{hints}; allowed: {', '.join(allowed)}")


def describe(tp: Any) -> str:
    """A type in a user's words: ``tuple[str, ...]`` -> "a list of strings"."""
    words = {int: "an integer", float: "a finite number", str: "a string", bool: "true or false", type(None): "null"}
    if tp in words:
        return words[tp]
    origin = typing.get_origin(tp)
    if origin in (list, tuple) or tp in (list, tuple):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if origin is tuple and args and Ellipsis not in typing.get_args(tp):
            return f"a list of {len(args)} {_plural(args[0])}"
        return f"a list of {_plural(args[0])}" if args else "a list"
    if origin in (dict, Mapping) or dataclasses.is_dataclass(tp):
        return "a table"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _plural(tp: Any) -> str:
    return {int: "integers", float: "numbers", str: "strings", bool: "booleans"}.get(tp, "tables")


def _bare(k: Any) -> bool:
    return isinstance(k, str) and k.replace("_", "").replace("-", "").isalnum() and len(k) <= 40


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- writing ------------------------------------------------------------------------------------


def to_data(value: Any) -> Any:
    """Dataclasses, enums, mappings and tuples as JSON-able dicts, strings and lists (the inverse of
    :func:`from_data`; keys as the fields name them in the data)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {data_key(f): to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    return value
