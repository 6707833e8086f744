"""What every value a user gives may be: probe settings, panel values, CLI arguments, pytest options.

One rule per value, in one place. The CLI (``type=`` of its arguments, then :func:`check_probe_settings`),
the panel loader (``headwatch.fixtures.panels``) and the pytest options (``headwatch.plugin``) all
check against these rules, before any model is loaded; a message says what was wrong, what is
allowed and what to do. Bad input raises :class:`InputError` (``headwatch`` exits 2, pytest 4).

Rules that need the model (its vocabulary, its positions) are :func:`check_settings_for_model`, which
the loaders call right after reading ``config.json`` and before reading any weights.

Imports only the standard library and :mod:`headwatch.spec`: the CLI's ``--help`` and the plugin
in a foreign test run must not pay for torch.
"""
from __future__ import annotations

import argparse
import dataclasses
import errno
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from headwatch.spec import PROBE_RUN, SPEC, claim_names

#: Load/probe dtypes (``--dtype``, a panel's ``dtype``, ``[models.probe] dtype``).
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
#: Attention implementations the capture hooks support (probes/capture.py reads both).
ATTN_IMPLEMENTATIONS: tuple[str, ...] = ("eager", "sdpa")
#: numpy's RandomState takes seeds in [0, 2**32).
MAX_SEED = 2**32 - 1
#: docs/SPEC.md §1: the planted pair's position ab is drawn from [20, T // 2), so T // 2 must exceed 20.
MIN_SEQ_LEN = 42
#: docs/SPEC.md §2: the baseline positions come from 1..T-2 minus the class targets T-6..T-3, i.e.
#: T - 7 candidates.
BASELINE_EXCLUDED = 7
#: Below this share of valid examples (b occurs once before the query, docs/SPEC.md §2) the
#: induction and duplicate-token selectivities average over a minority of the batch, and at 0 they
#: are 0.0 for every head: a record of garbage. The paper's batch has 2000 of 2000 valid.
MIN_VALID_FRACTION = 0.5


class InputError(ValueError):
    """Bad input: the message says what was wrong, what is allowed and what to do.

    ``headwatch`` exits 2 on it; under pytest it is a usage error (exit 4). Every error headwatch
    raises about what a user gave (panels, checkpoints, records, folders) derives from it.
    """


class EnvironmentProblem(InputError):
    """The machine refused what headwatch asked of it (a full disk, a permission, a read-only file
    system, too many open files, not enough memory): the user's environment, not a defect."""


#: OSError kinds that are the user's files or machine, never a defect of headwatch, and what to do.
ENVIRONMENT_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "the file system is full: free space there, or write somewhere else",
    errno.EDQUOT: "the disk quota is used up: free space there, or write somewhere else",
    errno.EROFS: "the file system is read-only: write somewhere else",
    errno.EACCES: "permission denied: give a path you may use, or change its permissions",
    errno.EPERM: "the operation is not permitted there (an immutable or protected path): use another path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: give a path through folders",
    errno.EISDIR: "it is a folder where a file was expected: give a file",
    errno.ELOOP: "a symlink loop (a link pointing back at itself): fix or remove the link",
    errno.ENAMETOOLONG: "the name is too long for the file system: use a shorter path",
    errno.EFBIG: "the file would exceed what the file system (or ulimit -f) allows: write somewhere else",
    errno.EMFILE: "this process may open no more files (ulimit -n): raise the limit",
    errno.ENFILE: "the system may open no more files: close some programs, or raise the limit",
    errno.EIO: "the device reported an input/output error (a failing disk or network file system): check it",
    errno.ENXIO: "no such device (a FIFO with no writer, or a device that is gone): give a regular file",
}
#: Exceptions from outside the standard library that mean the same (matched by class name: no import).
_OUT_OF_MEMORY = {"MemoryError": "the machine ran out of memory: use a smaller batch (--batch-size), fewer "
                                  "examples, or a machine (or GPU) with more memory",
                  "OutOfMemoryError": "the GPU ran out of memory: use a smaller batch (--batch-size), or "
                                      "--device cpu, or a GPU with more memory"}


def input_error_from(exc: BaseException, doing: str = "") -> InputError | None:
    """``exc`` as the bad-input error it is, or None when it is a defect of headwatch.

    The one place where exceptions other code raises are classed: an InputError is itself; an OSError
    of a kind in :data:`ENVIRONMENT_ERRNOS`, or running out of memory, is an
    :class:`EnvironmentProblem` naming the path and what to do (``doing``: what headwatch was doing,
    such as "writing /x/o.json"). The CLI (exit 2), the pytest plugin (exit 4) and the fan-out's
    task reasons all ask here."""
    if isinstance(exc, InputError):
        return exc
    if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS:
        where = doing or " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
        return EnvironmentProblem(f"{where + ': ' if where else ''}{exc.strerror or exc} "
                                  f"({errno.errorcode.get(exc.errno, exc.errno)}); {ENVIRONMENT_ERRNOS[exc.errno]}")
    for cls in type(exc).__mro__:
        if cls.__name__ in _OUT_OF_MEMORY:
            first = (str(exc).splitlines() or [""])[0][:200]
            return EnvironmentProblem(f"{doing + ': ' if doing else ''}{_OUT_OF_MEMORY[cls.__name__]}"
                                      + (f" ({first})" if first else ""))
    return None


# ---- one value ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """What one value may be: its type, bounds or choices, and that phrase for messages."""

    kind: type  # int, float, str or bool
    allowed: str  # e.g. "an integer >= 1": completes "allowed: ..."
    min: float | None = None
    max: float | None = None
    #: min is exclusive (a number > min) rather than inclusive.
    above: bool = False
    choices: tuple[str, ...] = ()
    #: What to do about it, when there is more to say than "allowed: ...".
    hint: str = ""

    def check(self, value: Any, where: str) -> Any:
        """``value`` if it follows the rule (ints pass as floats); InputError naming ``where`` if not."""
        ok_type = (isinstance(value, bool) if self.kind is bool
                   else isinstance(value, int) and not isinstance(value, bool) if self.kind is int
                   else isinstance(value, (int, float)) and not isinstance(value, bool) if self.kind is float
                   else isinstance(value, self.kind))
        if not ok_type:
            self._fail(value, where, f"a {type(value).__name__}")
        if self.kind is float and not math.isfinite(value):
            self._fail(value, where, "not a finite number")
        if self.min is not None and (value <= self.min if self.above else value < self.min):
            self._fail(value, where)
        if self.max is not None and value > self.max:
            self._fail(value, where)
        if self.choices and value not in self.choices:
            self._fail(value, where)
        return float(value) if self.kind is float else value

    def _fail(self, value: Any, where: str, why: str = "") -> None:
        got = f"{value!r}" + (f" ({why})" if why else "")
        raise InputError(f"{where}: got {got}; allowed: {self.allowed}" + (f". {self.hint}" if self.hint else ""))

    def parse(self, text: str) -> Any:
        """The value of a command-line string (for argparse's ``type=``)."""
        if self.kind is int:
            try:
                return int(text)
            except ValueError:
                raise InputError(f"{text!r} is not an integer; allowed: {self.allowed}") from None
        if self.kind is float:
            try:
                return float(text)
            except ValueError:
                raise InputError(f"{text!r} is not a number; allowed: {self.allowed}") from None
        return text


def integer(min: int | None = None, max: int | None = None, allowed: str = "", hint: str = "") -> Rule:
    if not allowed:
        allowed = ("an integer" + (f" >= {min}" if min is not None else "")
                   + (f" and <= {max}" if max is not None else ""))
    return Rule(int, allowed, min=min, max=max, hint=hint)


def number(min: float | None = None, *, above: bool = False, max: float | None = None, allowed: str = "") -> Rule:
    if not allowed:
        bound = "" if min is None else f" {'>' if above else '>='} {min:g}"
        allowed = f"a finite number{bound}" + (f" and <= {max:g}" if max is not None else "")
    return Rule(float, allowed, min=min, max=max, above=above)


def one_of(choices: tuple[str, ...]) -> Rule:
    return Rule(str, "one of " + ", ".join(repr(c) for c in choices), choices=choices)


BOOLEAN = Rule(bool, "true or false")
TEXT = Rule(str, "a string")
NONEMPTY_TEXT = Rule(str, "a non-empty string", hint="")
SEED = integer(0, MAX_SEED, allowed=f"an integer from 0 to {MAX_SEED} (numpy's RandomState)")
POSITIVE_INT = integer(1)
TOKENS = number(0, allowed="a finite number of tokens >= 0")
POSITIVE_TOKENS = number(0, above=True, allowed="a finite number of tokens > 0")


def nonempty_text(value: Any, where: str) -> str:
    """A string with something in it (names, folders, revisions)."""
    TEXT.check(value, where)
    if not value.strip():
        raise InputError(f"{where}: got an empty string; allowed: {NONEMPTY_TEXT.allowed}")
    return value



#: Seeds in one ``--seeds`` range at most (a typo such as ``1-100000000`` is refused, not expanded).
MAX_SEED_RANGE = 10_000


def seed_list(value: Any, where: str) -> list[int]:
    """Seeds as a user writes them: ``"1-3,5,1234"`` (ranges inclusive), or a list of integers.

    Each seed follows :data:`SEED`; order is kept, repeats dropped. Used by ``--seeds`` (pytest and
    the CLI) to pick members of a panel's populations.
    """
    if isinstance(value, (list, tuple)):
        items: list[Any] = list(value)
    else:
        text = TEXT.check(value, where)
        items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise InputError(f"{where}: got no seed; allowed: seeds such as 1-3,5 (ranges inclusive)")
    out: list[int] = []
    for item in items:
        if isinstance(item, str):
            m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", item)
            if m is None:
                raise InputError(f"{where}: {item!r} is not a seed or a range; allowed: integers and ranges "
                                 "such as 1-3,5,1234")
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) is not None else lo
            if hi < lo:
                raise InputError(f"{where}: the range {item!r} is empty (its end is below its start); "
                                 f"write it as {hi}-{lo}")
            if hi - lo >= MAX_SEED_RANGE:
                raise InputError(f"{where}: the range {item!r} holds {hi - lo + 1} seeds; allowed: at most "
                                 f"{MAX_SEED_RANGE} in one range")
            seeds = range(lo, hi + 1)
        else:
            seeds = range(item, item + 1) if isinstance(item, int) and not isinstance(item, bool) else [item]
        for s in seeds:
            SEED.check(s, where)
            if s not in out:
                out.append(s)
    return out

# ---- probe settings (ProbeSettings fields) --------------------------------------------------

#: One rule per ``headwatch.probes.record.ProbeSettings`` field (a test checks that they match).
PROBE_RULES: dict[str, Rule] = {
    "n_examples": integer(1),
    "seq_len": integer(MIN_SEQ_LEN, hint="The planted pair sits at positions [20, T//2) (docs/SPEC.md §1)"),
    "vocab_lo": integer(0, allowed="a token id >= 0"),
    "vocab_hi": integer(1, allowed="a token id >= 1 (exclusive upper end of the ids drawn)"),
    "seed": SEED,
    "n_pr": integer(1, allowed="an integer >= 1 and <= the number of examples"),
    "batch_size": integer(1),
    "dtype": one_of(DTYPES),
    "baseline_positions": integer(1),
    "baseline_seed": SEED,
    "label_threshold": number(0),
    "induction_threshold": number(0),
    "previous_token_threshold": number(0),
    "bos_threshold": number(0),
    "attention_floor": number(0),
    "ablation": BOOLEAN,
    "ablation_seed": SEED,
    "interval_level": number(0, above=True, max=1, allowed="a confidence level in (0, 1), such as 0.95"),
    "n_bootstrap": integer(0, allowed="an integer >= 0 (0: no bootstrap intervals)"),
    "bootstrap_seed": SEED,
    "sink_examples": integer(0, allowed="an integer >= 0 (0: no Sink_1^eps sub-batch)"),
    "copy_sequences": integer(0, allowed="an integer >= 0 (0: no copyable-position reading)"),
    "copy_half": integer(2, allowed="an integer >= 2 (a repeated sequence is twice as long)"),
    "copy_seed": SEED,
}

#: What one run may cost before the user confirms it: 50x the paper's 2000 examples (about an hour
#: for a 1B model on one GPU; a million examples would take days with no record before the end),
#: 100x SPEC's 1000 bootstrap resamples, and 20 organisms trained (about an hour on 2 cores; the
#: organisms panel trains 3, a seed population 5-6). ``HEADWATCH_MAX_EXAMPLES`` raises (confirms)
#: the first, ``HEADWATCH_MAX_ORGANISMS`` the last. Bounds of a run, not of a record: records
#: measured with more are read as they are.
RUN_BOUNDS: dict[str, int] = {"n_examples": 100_000, "n_bootstrap": 100_000, "organisms": 20}
MAX_EXAMPLES_ENV = "HEADWATCH_MAX_EXAMPLES"
MAX_ORGANISMS_ENV = "HEADWATCH_MAX_ORGANISMS"
#: The environment variable that raises (confirms) a bound, and what its number counts.
_BOUND_ENVS = {"n_examples": (MAX_EXAMPLES_ENV, "examples one run may measure"),
               "organisms": (MAX_ORGANISMS_ENV, "organisms one run may train")}


def run_bound(field: str) -> int:
    """The bound of ``field`` for one run (:data:`RUN_BOUNDS`; n_examples raised by ``HEADWATCH_MAX_EXAMPLES``,
    organisms by ``HEADWATCH_MAX_ORGANISMS``)."""
    env, what = _BOUND_ENVS.get(field, ("", ""))
    text = os.environ.get(env, "").strip() if env else ""
    if not text:
        return RUN_BOUNDS[field]
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"{env}: got {text!r}; allowed: a whole number >= 1 (the most {what}; default "
                         f"{RUN_BOUNDS[field]:,}), or unset it")
    return value


def check_training_size(count: int, estimate: str) -> None:
    """Refuse training more organisms in one run than :data:`RUN_BOUNDS` allows without being told to
    (``HEADWATCH_MAX_ORGANISMS``); ``estimate`` says how long they would take."""
    bound = run_bound("organisms")
    if count > bound:
        raise InputError(f"{count:,} organisms to train ({estimate}), more than the {bound:,} one run trains without "
                         f"being told to; if you mean it, set {MAX_ORGANISMS_ENV}={count}")


def check_run_size(values: Mapping[str, Any], name: Callable[[str], str] = str) -> None:
    """Refuse a run that would take hours by mistake: more examples or resamples than :data:`RUN_BOUNDS`."""
    for key in RUN_BOUNDS:
        value = values.get(key)
        if isinstance(value, int) and value > run_bound(key):
            bound = run_bound(key)
            confirm = (f"; if you mean it, set {MAX_EXAMPLES_ENV}={value} (measuring prints an estimate of its "
                       "time after the first batch)") if key == "n_examples" else ""
            raise InputError(f"{name(key)}: got {value:,}, more than the {bound:,} one run measures without being told "
                             f"to (SPEC's default is {_default(key):,}; this many would take hours or days before any "
                             f"record is written){confirm}")


def _default(key: str) -> int:
    """SPEC's value of a run-bounded field (ProbeSettings' default)."""
    return getattr(PROBE_RUN, key) if hasattr(PROBE_RUN, key) else getattr(SPEC, key)


#: How the CLI spells a setting (``headwatch measure`` flags); others are named by field.
CLI_FLAGS: dict[str, str] = {
    "n_examples": "--n-examples", "n_pr": "--n-pr", "batch_size": "--batch-size", "seq_len": "--seq-len",
    "vocab_lo": "--vocab-lo", "vocab_hi": "--vocab-hi", "dtype": "--dtype",
}


def expected_valid_fraction(seq_len: int, vocab_lo: int, vocab_hi: int) -> float:
    """The expected share of valid examples (b once in tokens[:-1]) of docs/SPEC.md §1's generator.

    With V ids, a free position holds b after the generator's two redraw passes with probability
    q = (V + 1) / V**3 (drawn as b, or as a and redrawn to b; then redrawn once and b again); the
    T - 3 free positions before the query must all miss it: (1 - q) ** (T - 3). Computed before any
    batch is generated; the measured share is recorded as ``n_examples_valid``.
    """
    v = vocab_hi - vocab_lo
    if v < 2:
        return 0.0
    q = (v + 1) / v**3
    return (1.0 - q) ** max(seq_len - 3, 0)


def min_vocab_range(seq_len: int, fraction: float = MIN_VALID_FRACTION) -> int:
    """The smallest number of token ids whose expected valid share at ``seq_len`` reaches ``fraction``."""
    v = 2
    while expected_valid_fraction(seq_len, 0, v) < fraction:
        v += 1
    return v


def _with_defaults(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with the fields it leaves out at SPEC's probe run (ProbeSettings' defaults too)."""
    return {**dataclasses.asdict(PROBE_RUN), **values}


def check_probe_settings(values: Mapping[str, Any], name: Callable[[str], str] = str) -> None:
    """Check every given field against :data:`PROBE_RULES`, then the rules that tie fields together.

    ``values`` may be partial (a panel's ``[models.probe]``): missing fields take ProbeSettings'
    defaults, SPEC's probe run (``headwatch.spec.PROBE_RUN``), for the cross-field rules.
    ``name(field)`` is how the user spelled the field in messages (``--n-pr``,
    ``panel 'p', model 'm': probe.n_pr``).
    """
    for key, value in values.items():
        if key in PROBE_RULES:
            PROBE_RULES[key].check(value, name(key))
    check_run_size(values, name)
    s = _with_defaults(values)
    # Only an n_pr the user gave can contradict n_examples; a default one is capped at the batch
    # (PanelModel.settings_for, headwatch measure), and the record says what was used.
    if "n_pr" in values and s["n_pr"] > s["n_examples"]:
        raise InputError(
            f"{name('n_pr')}: got {s['n_pr']}, more than the {s['n_examples']} examples of the batch "
            f"({name('n_examples')}); allowed: 1 to {s['n_examples']}")
    needed = s["baseline_positions"] + BASELINE_EXCLUDED
    if s["seq_len"] < needed:
        raise InputError(
            f"{name('seq_len')}: got {s['seq_len']}; the screen's baseline needs {s['baseline_positions']} "
            f"distinct positions in 1..T-7 (docs/SPEC.md §2), so allowed: >= {needed}")
    check_batch_settings(s, name)


def check_batch_settings(values: Mapping[str, Any], name: Callable[[str], str] = str) -> None:
    """The rules of the induction batch alone (docs/SPEC.md §1): sizes, seeds, and a token range
    that leaves enough valid examples. ``values`` must hold n_examples, seq_len, vocab_lo, vocab_hi."""
    for key in ("n_examples", "seq_len", "vocab_lo", "vocab_hi", "seed"):
        if key in values:
            PROBE_RULES[key].check(values[key], name(key))
    lo, hi, seq_len = values["vocab_lo"], values["vocab_hi"], values["seq_len"]
    if hi - lo < 2:
        raise InputError(
            f"{name('vocab_lo')}/{name('vocab_hi')}: the range [{lo}, {hi}) holds {max(hi - lo, 0)} token id(s); "
            "allowed: at least 2 (the planted pair a, b are two distinct ids), and enough for valid examples")
    share = expected_valid_fraction(seq_len, lo, hi)
    if share < MIN_VALID_FRACTION:
        width = min_vocab_range(seq_len)
        raise InputError(
            f"{name('vocab_lo')}/{name('vocab_hi')}: [{lo}, {hi}) at sequence length {seq_len} leaves about "
            f"{share:.1%} of the examples valid (b must occur once before the query); allowed: a range whose "
            f"expected valid share is >= {MIN_VALID_FRACTION:.0%}, i.e. at least {width} ids at this length "
            f"(e.g. vocab_hi = vocab_lo + {width}), or a shorter sequence")


def check_settings_for_model(settings: Any, config: Any, what: str, name: Callable[[str], str] = str) -> None:
    """The rules that need the model: token ids inside its vocabulary, the sequence inside its positions.

    ``settings``: a ProbeSettings; ``config``: the model's config (a transformers config or the dict
    of its config.json). Called after reading config.json, before any weights.
    """
    def size(key: str) -> int | None:
        """The config's ``key`` (None when it has none); a count a model cannot have is the config's fault."""
        value = config.get(key) if isinstance(config, Mapping) else getattr(config, key, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{what}: its config says {key} = {value!r}, which no model has (a whole number >= 1); "
                             "the config.json is damaged or is not this model's: save it again with save_pretrained")
        return value

    vocab = size("vocab_size")
    if vocab is not None and settings.vocab_hi > vocab:
        raise InputError(
            f"{name('vocab_hi')}: got {settings.vocab_hi}, beyond {what}'s vocabulary of {vocab} ids; "
            f"allowed: <= {vocab}")
    positions = size("max_position_embeddings")
    if positions is not None and settings.seq_len > positions:
        raise InputError(
            f"{name('seq_len')}: got {settings.seq_len}, beyond the {positions} positions {what} was built for "
            f"(max_position_embeddings); allowed: <= {positions}")


def argtype(rule: Rule | str | Callable[[Any, str], Any], flag: str = "") -> Callable[[str], Any]:
    """An argparse ``type=`` for ``rule`` (a Rule, a ProbeSettings field name, or a checker
    ``f(value, where)``): parses and checks at once, so argparse reports a bad value as a usage
    error (``headwatch`` exit 2, pytest's 4) before anything runs, with the rule's message."""
    field = rule if isinstance(rule, str) else None
    rule = PROBE_RULES[rule] if isinstance(rule, str) else rule

    def parse(text: str) -> Any:
        try:
            if isinstance(rule, Rule):
                value = rule.check(rule.parse(text), flag or "value")
                if field in RUN_BOUNDS:  # a probe setting's flag: the run's bound too (--n-examples 5000000)
                    check_run_size({field: value}, lambda _: flag or field)
                return value
            return rule(text, flag or "value")
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(f"{flag}: ") if flag else str(e)) from None

    parse.__name__ = rule.kind.__name__ if isinstance(rule, Rule) else getattr(rule, "__name__", "value")
    return parse


# ---- panel values -----------------------------------------------------------------------------


def step_pattern(value: Any, where: str) -> str:
    """A regular expression whose first group captures a revision's step number as digits."""
    TEXT.check(value, where)
    try:
        compiled = re.compile(value)
    except re.error as e:
        raise InputError(f"{where}: {value!r} is not a regular expression ({e}); allowed: a regex whose "
                         r"first group captures the step digits, e.g. 'step(\d+)'") from None
    if compiled.groups < 1:
        raise InputError(f"{where}: {value!r} has no group; allowed: a regex whose first group captures the "
                         r"step digits, e.g. 'step(\d+)'")
    return value


def claim_key(key: str, revisions: tuple[str, ...] | None, where: str) -> None:
    """An ``xfail`` key: a claim (``F4``) or a claim at one of the model's revisions (``F1@step1200``)."""
    claim, _, revision = key.partition("@")
    names = claim_names()
    if claim not in names:
        raise InputError(f"{where}: {key!r} names no claim; allowed: {', '.join(names)}, or CLAIM@REVISION")
    if revision and revisions is not None and revision not in revisions:
        raise InputError(f"{where}: {key!r} names revision {revision!r}, which the model does not list; "
                         f"allowed: one of its revisions ({', '.join(revisions)})")


# ---- command-line values ------------------------------------------------------------------------

_DEVICE_RE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
DEVICE = Rule(str, "cpu, cuda, cuda:N, mps or auto")


def device(value: str, where: str = "--device") -> str:
    """A torch device name headwatch can place a model on (whether it exists is checked when used)."""
    text = (value or "").strip().lower()
    if not _DEVICE_RE.fullmatch(text):
        DEVICE._fail(value, where)
    return text


def finite_tokens(value: float | None, where: str) -> float | None:
    """Tokens seen as a user states them: None (unknown) or a finite number >= 0."""
    return None if value is None else TOKENS.check(value, where)
