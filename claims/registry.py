"""The registry of claims: :func:`register_claim` where a claim is defined, lookup by name everywhere else.

Order is deterministic: the built-in claims first (formation, F1-F5, causal: :mod:`headwatch.claims.builtin`
registers them when ``headwatch.claims`` is imported), then every other claim in the order it was
registered. A researcher's claims come from three places, the same API each (docs/claims.md):

- a Python file or module calling :func:`register_claim` when imported: a ``conftest.py`` that pytest
  loads, or ``--claims-module PATH|DOTTED`` (pytest, ``headwatch judge``, ``headwatch report``;
  :func:`load_claims_module`);
- an installed package listing its claims in the entry-point group ``headwatch.claims``, one entry per
  claim named as the claim (``my_claim = "mypkg.claims:MY_CLAIM"``; :func:`load_entry_points`, which
  every front end calls).

A claim without negative controls is refused at registration (:class:`ClaimError`): a claim test that
cannot fail tells nothing, and every claim test in this suite has planted data beside it that it must
reject. ``--claims NAMES`` selects claims in every front end (:func:`select_claims`).
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import re
import sys
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from headwatch.names import did_you_mean
from headwatch.spec import CLAIMS_GROUP, SPEC, Thresholds, declare_claim_name, forget_claim_name
from headwatch.validation import InputError

from headwatch.claims.claim import QUANTITY_UNITS, Claim, NegativeControl, Quantity, UNITS
from headwatch.claims.verdict import DETAILS

#: A claim's name: letters, digits, '_', '.', '-' (no '@' or ',': panels write CLAIM@REVISION, options comma lists).
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")

_CLAIMS: dict[str, Claim] = {}
#: all_claims()'s order, kept until the registry changes: population audits ask for it per member and
#: quantity (hundreds of thousands of times for 160 siblings).
_ORDERED: tuple[Claim, ...] | None = None
_LOADED_MODULES: dict[str, str] = {}
_ENTRY_POINTS_LOADED = False


class ClaimError(InputError):
    """A claim that cannot be registered or loaded (bad input from its author: exit 2, a usage error)."""


def _knobs() -> tuple[str, ...]:
    """The sensitivity knobs a claim may read: Thresholds fields with a grid (``grid_<field>``)."""
    return tuple(f.name for f in dataclasses.fields(Thresholds) if hasattr(SPEC, f"grid_{f.name}"))


def _check(claim: Claim) -> None:
    if not isinstance(claim, Claim):
        raise ClaimError(f"register_claim takes a headwatch.claims.Claim, got {type(claim).__name__}")
    where = f"claim {claim.name!r}"
    if not NAME_RE.fullmatch(claim.name or ""):
        raise ClaimError(f"{where}: a name is a letter, then letters, digits, '_', '.' or '-' (at most 64; no '@' "
                         "or ','): panels write CLAIM@REVISION and options take comma lists")
    if not callable(claim.judge):
        raise ClaimError(f"{where}: judge must be callable as judge(records, expect, spec, *, total_tokens=None)")
    if not claim.negative_controls:
        raise ClaimError(f"{where} has no negative controls: give negative_controls=(NegativeControl(name, what, "
                         "build), ...), planted records on which the claim is false and its judge must say 'fails' "
                         "(a claim test that cannot fail tells nothing; docs/claims.md)")
    for c in claim.negative_controls:
        if not isinstance(c, NegativeControl) or not callable(c.build):
            raise ClaimError(f"{where}: each negative control is a NegativeControl(name, what, build) with a "
                             f"callable build, got {c!r}")
    names = [c.name for c in claim.negative_controls]
    if len(set(names)) != len(names):
        raise ClaimError(f"{where}: negative controls need distinct names, got {', '.join(names)}")
    bad = [k for k in claim.reads if k not in _knobs()]
    if bad:
        raise ClaimError(f"{where}: reads {', '.join(bad)}, not sensitivity knobs; allowed: {', '.join(_knobs())}")
    fields = {f.name for f in dataclasses.fields(Thresholds)}
    for t in claim.thresholds:
        if t.field is not None and t.field not in fields:
            raise ClaimError(f"{where}: threshold {t.name!r} reads {t.field!r}, not a SPEC field"
                             + did_you_mean(t.field, sorted(fields)))
    if claim.details is not None and not dataclasses.is_dataclass(claim.details):
        raise ClaimError(f"{where}: details must be a dataclass type (or None for a plain mapping)")
    q = claim.placed_on
    if q is not None and (not isinstance(q, Quantity) or q.unit not in UNITS or not callable(q.value)):
        raise ClaimError(f"{where}: placed_on must be a Quantity(name, words, value, unit) with unit one of "
                         f"{', '.join(UNITS)}")


def register_claim(claim: Claim) -> Claim:
    """Register ``claim`` (checked: :class:`ClaimError` on a bad one) and return it as registered (its
    negative controls carry its name). Registering the same object again is a no-op; another claim
    under a registered name is refused."""
    _check(claim)
    known = _CLAIMS.get(claim.name)
    if known is not None:
        if known == dataclasses.replace(claim, negative_controls=known.negative_controls) or known is claim:
            return known
        raise ClaimError(f"claim {claim.name!r} is registered already (from {_origin(known)}); give yours another name")
    controls = tuple(dataclasses.replace(c, claim=claim.name) for c in claim.negative_controls)
    claim = dataclasses.replace(claim, negative_controls=controls)
    if claim.placed_on is not None:
        if claim.placed_on.name in QUANTITY_UNITS:
            raise ClaimError(f"claim {claim.name!r}: its quantity {claim.placed_on.name!r} exists already; name it "
                             "after the claim")
        QUANTITY_UNITS[claim.placed_on.name] = claim.placed_on.unit
    _set_claim(claim.name, claim)
    DETAILS[claim.name] = claim.details
    if not claim.gate:
        declare_claim_name(claim.name, claim.needs)
    return claim


def unregister_claim(name: str) -> None:
    """Forget the claim ``name`` (a notebook redefining its claim, a test's own): its name, details type
    and population quantity go with it. A built-in cannot be forgotten."""
    claim = get_claim(name)
    if is_builtin(claim):
        raise ClaimError(f"{name!r} is a built-in claim: select others with --claims instead")
    _set_claim(name, None)
    DETAILS.pop(name, None)
    if claim.placed_on is not None:
        QUANTITY_UNITS.pop(claim.placed_on.name, None)
    forget_claim_name(name)


def _origin(claim: Claim) -> str:
    return getattr(claim.judge, "__module__", None) or "?"


def is_builtin(claim: Claim) -> bool:
    """Whether ``claim`` is one of headwatch's own (a module of headwatch.claims.builtin)."""
    return _origin(claim).startswith(__name__.rsplit(".", 1)[0] + ".builtin.")


def load_entry_points() -> list[Claim]:
    """Register the claims installed packages list (entry-point group ``headwatch.claims``), once per
    process, in entry-point name order; each entry names a Claim (``pkg.module:ATTR``) or a module that
    registers its claims when imported. A broken entry is a :class:`ClaimError` naming it."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return []
    _ENTRY_POINTS_LOADED = True
    out = []
    for ep in sorted(entry_points(group=CLAIMS_GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
        except Exception as e:  # noqa: BLE001 - a broken package is the user's input, named
            raise ClaimError(f"entry point {ep.name} = {ep.value!r} (group {CLAIMS_GROUP}) could not be loaded: "
                             f"{type(e).__name__}: {e}") from e
        if isinstance(obj, Claim):
            out.append(register_claim(obj))
        elif ep.name not in _CLAIMS:
            raise ClaimError(f"entry point {ep.name} = {ep.value!r} (group {CLAIMS_GROUP}) names neither a Claim nor "
                             f"a module that registers a claim named {ep.name!r}")
    return out


def load_claims_module(spec: str) -> list[Claim]:
    """Import a file (``path/to/my_claims.py``) or a module (``mypkg.claims``) that registers claims;
    the claims it registered. Loaded once per process."""
    before = set(_CLAIMS)
    path = Path(spec)
    key = str(path.resolve()) if spec.endswith(".py") or path.exists() else spec
    if key in _LOADED_MODULES:
        return [c for n, c in _CLAIMS.items() if n in _LOADED_MODULES[key].split(",")]
    try:
        if spec.endswith(".py") or path.exists():
            if not path.is_file():
                raise ClaimError(f"--claims-module {spec}: no such file; give a Python file or a module name")
            name = "headwatch_user_claims_" + re.sub(r"\W", "_", path.resolve().stem) + f"_{len(_LOADED_MODULES)}"
            mod_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(mod_spec)  # type: ignore[arg-type]
            sys.modules[name] = module
            mod_spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            importlib.import_module(spec)
    except ClaimError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's module: named, with what went wrong
        raise ClaimError(f"--claims-module {spec}: could not be imported: {type(e).__name__}: {e}") from e
    new = [c for n, c in _CLAIMS.items() if n not in before]
    _LOADED_MODULES[key] = ",".join(c.name for c in new)
    return new


def load(modules: Iterable[str] = ()) -> list[Claim]:
    """Every claim a front end judges: the built-ins, the installed entry points' and ``modules``'
    (``--claims-module``); the registry's order."""
    load_entry_points()
    for m in modules:
        load_claims_module(m)
    return all_claims()


def _set_claim(name: str, claim: Claim | None) -> None:
    """The one way the registry changes: ``name`` registered as ``claim`` (None: forgotten)."""
    global _ORDERED
    if claim is None:
        del _CLAIMS[name]
    else:
        _CLAIMS[name] = claim
    _ORDERED = None


def all_claims() -> list[Claim]:
    """Every registered claim, built-ins first, then the rest in registration order."""
    global _ORDERED
    if _ORDERED is None:
        claims = list(_CLAIMS.values())
        _ORDERED = tuple(c for c in claims if is_builtin(c)) + tuple(c for c in claims if not is_builtin(c))
    return list(_ORDERED)


def get_claim(name: str) -> Claim:
    """The registered claim ``name`` (:class:`ClaimError` naming the registered ones otherwise)."""
    try:
        return _CLAIMS[name]
    except KeyError:
        raise ClaimError(f"no claim named {name!r}; registered: {', '.join(c.name for c in all_claims())}"
                         + did_you_mean(name, list(_CLAIMS))) from None


def select_claims(names: Sequence[str] = ()) -> list[Claim]:
    """The claims ``--claims NAMES`` selects, in the registry's order (every claim where ``names`` is
    empty); a gate (formation) is always kept: it decides whether the others are judged. An unknown
    name is a :class:`ClaimError` with a did-you-mean."""
    for n in names:
        get_claim(n)
    return [c for c in all_claims() if not names or c.name in names or c.gate]


def gates() -> list[Claim]:
    """The gate claims (formation), in order."""
    return [c for c in all_claims() if c.gate]


def negative_controls() -> dict[str, NegativeControl]:
    """Every registered claim's negative controls, by control name (each carries its claim's name)."""
    return {c.name: c for claim in all_claims() for c in claim.negative_controls}


def controls_for(name: str) -> list[NegativeControl]:
    """The negative controls of one claim."""
    return list(get_claim(name).negative_controls)


__all__ = ["ClaimError", "NAME_RE", "all_claims", "controls_for", "gates", "get_claim", "is_builtin", "load",
           "load_claims_module", "load_entry_points", "negative_controls", "register_claim", "select_claims", "unregister_claim"]
