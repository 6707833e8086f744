"""Planted measurement trajectories for negative controls and unit tests.

:func:`planted_trajectory` builds a model's records from a few declarative knobs (BOS fraction per
revision, induction heads per revision, PR per head, ablation top-1s). :func:`healthy` is a
trajectory on which every claim holds; each claim's negative controls (its ``negative_controls``,
defined with the claim in :mod:`headwatch.claims.builtin`) are variants of it on which that claim is
false, each with the expectations it is judged against. Nothing here comes from the paper's
data: the numbers are chosen only to sit clearly on one side of each claim's threshold.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


from headwatch.probes.record import (
    HEAD_CLASSES, AblationResult, MeasurementRecord, ProbeSettings, TaskMetrics, head_key,
)
from headwatch.spec import Expectations, Formation, FormationWindow

N_LAYERS, N_HEADS, D_HEAD = 8, 4, 64
#: Selectivities used for planted heads: clearly above (or below) the 30x / 50x thresholds.
STRONG, WEAK = 80.0, 1.0
#: PR values clearly above / below the elevation bar 1 + 0.1 x (64 - 1) = 7.3 (and the 0.2 bar 13.6).
PR_HIGH, PR_LOW = 20.0, 2.0

# The healthy trajectory's final induction circuit and an extra early-only head.
A, B, C, D = "L3_H0", "L4_H1", "L5_H2", "L6_H3"
TOKENS = (1e8, 1e9, 3e9, 1e10, 2e10, 1e11, 1e12)


def bos_candidates(n_layers: int = N_LAYERS, n_heads: int = N_HEADS) -> list[str]:
    """Heads that planted BOS fractions use, last layer first: never layers 0 and 1."""
    return [head_key(l, h) for l in range(n_layers - 1, 1, -1) for h in range(n_heads)]


def planted_record(
    revision: str,
    tokens: float,
    *,
    model: str = "planted/model",
    n_layers: int = N_LAYERS,
    n_heads: int = N_HEADS,
    d_head: int = D_HEAD,
    induction: Sequence[str] = (),
    bos: Sequence[str] = (),
    pr: Mapping[str, float] | None = None,
    with_pr: bool = True,
) -> MeasurementRecord:
    """One record: every selectivity WEAK except the listed induction / first-token heads (STRONG).

    PR is PR_LOW for every head unless ``pr`` gives a value; ``with_pr=False`` leaves PR out.
    """
    table = {}
    for l in range(n_layers):
        for h in range(n_heads):
            k = head_key(l, h)
            table[k] = {c: WEAK for c in HEAD_CLASSES}
            if k in induction:
                table[k]["induction"] = STRONG
            if k in bos:
                table[k]["first-token"] = STRONG
    prs = None
    if with_pr:
        prs = {k: PR_LOW for k in table}
        prs.update(pr or {})
    return MeasurementRecord(
        model=model, revision=revision, tokens_seen=float(tokens), n_layers=n_layers, n_heads=n_heads,
        d_head=d_head, all_head_selectivity=table, pr=prs, provenance={"source": "planted"},
    )


@dataclass(frozen=True)
class Ablations:
    """Top-1 of the final revision: baseline, circuit ablated, matched random ablated."""

    baseline: float = 0.05
    circuit: float = 0.002
    random: float | None = 0.04


#: Examples behind planted top-1 rates (as in docs/SPEC.md §1): planted rates are counts over it.
N_EXAMPLES = 2000


def planted_metrics(top1: float, n: int = N_EXAMPLES) -> TaskMetrics:
    """Task metrics with top-1 ``top1`` as a count over ``n`` examples (what exact tests read)."""
    k = round(top1 * n)
    return TaskMetrics(loss=1.0, top1=k / n, top5=min(1.0, 2 * k / n), mean_logit_target=1.0, n=n, top1_count=k)


def planted_trajectory(
    tokens: Sequence[float] = TOKENS,
    *,
    bos_fractions: Sequence[float],
    induction_sets: Sequence[Sequence[str]],
    pr: Mapping[str, Sequence[float]] | None = None,
    extra_bos: Mapping[int, Sequence[str]] | None = None,
    ablations: Ablations | None = Ablations(),
    model: str = "planted/model",
    with_pr: bool = True,
) -> list[MeasurementRecord]:
    """Records at ``tokens``: BOS heads filling ``bos_fractions`` (from layers >= 2), induction
    heads per revision, PR per head per revision, and (optionally) ablations on the last revision."""
    n = len(tokens)
    if len(bos_fractions) != n or len(induction_sets) != n:
        raise ValueError("one BOS fraction and one induction set per revision")
    candidates = bos_candidates()
    total = N_LAYERS * N_HEADS
    records = []
    for i, t in enumerate(tokens):
        k = round(bos_fractions[i] * total)
        if k > len(candidates):
            raise ValueError(f"BOS fraction {bos_fractions[i]} needs {k} heads, only {len(candidates)} outside L0/L1")
        bos = candidates[:k] + list((extra_bos or {}).get(i, ()))
        rec_pr = {h: v[i] for h, v in (pr or {}).items()}
        records.append(planted_record(f"step{i}", t, model=model, induction=induction_sets[i], bos=bos,
                                      pr=rec_pr, with_pr=with_pr))
    if ablations is not None:
        final = records[-1]
        final.task = planted_metrics(ablations.baseline)
        circuit = tuple(sorted(induction_sets[-1]))
        final.ablations = [AblationResult("induction_circuit", circuit, planted_metrics(ablations.circuit))]
        if ablations.random is not None:
            final.ablations.append(AblationResult("matched_random", ("L2_H0", "L2_H1", "L2_H2"), planted_metrics(ablations.random)))
    return records


# ---- attention mass (the attention floor, docs/statistics.md#negligible-attention) ---------------

#: Planted records with attention: T, and every head's baseline attention unless given. WEAK heads
#: then give each class target 1/128 (twice the floor 1/T), STRONG heads 80/128.
PLANTED_SEQ_LEN = 256
PLANTED_BASELINE = 1 / 128


def with_attention(records: Sequence[MeasurementRecord], baseline: Mapping[int, Mapping[str, float]] | None = None,
                   seq_len: int = PLANTED_SEQ_LEN) -> list[MeasurementRecord]:
    """The records with the attention their selectivities imply: each head's baseline attention is
    PLANTED_BASELINE unless ``baseline[i][head]`` gives it (i: the record's index in ``records``), its
    attention to each class target selectivity x baseline; ``settings`` of length ``seq_len`` (the
    floor is 1/seq_len). A head given baseline 1e-7 at 100x has 1e-5 attention on the target: a ratio
    of two negligible masses."""
    out = []
    for i, r in enumerate(records):
        given = (baseline or {}).get(i, {})
        attention = {}
        for head, sel in r.all_head_selectivity.items():
            b = given.get(head, PLANTED_BASELINE)
            attention[head] = {**{c: sel[c] * b for c in HEAD_CLASSES}, "baseline": b}
        settings = r.settings or ProbeSettings(seq_len=seq_len)
        out.append(dataclasses.replace(r, attention=attention,
                                       settings=dataclasses.replace(settings, seq_len=seq_len)))
    return out


# ---- the healthy trajectory and its negative controls -----------------------------------------

#: Every claim holds, clear of every bar: a ramp BOS curve reaching 50% at 1e11 tokens, three
#: induction heads at 1e9 (ratio 100; on the revision grid in (20, 1000)), 2 of the final 3 found at
#: 1e9 (0.1% of training), PR elevated at or before each crossing (A before, B at, C before; 2, 2
#: and 3 of 32 heads elevated by the crossings: 3 random heads would all pass with p = 6.7e-5).
HEALTHY = dict(
    bos_fractions=(0.0, 0.0625, 0.1875, 0.3125, 0.4375, 0.5, 0.75),
    induction_sets=((), (A, B, D), (A, B, D), (A, B), (A, B), (A, B, C), (A, B, C)),
    pr={A: (PR_HIGH,) * 7, B: (PR_LOW,) + (PR_HIGH,) * 6, C: (PR_LOW,) * 3 + (PR_HIGH,) * 4},
)
HEALTHY_EXPECT = Expectations(bos_shape="ramp", dclm=True)
#: The healthy trajectory declared as an organism that must form: >= 3 heads at the end, none at
#: step0, t_induction between step1 and step5, top-1 >= 0.02 (healthy: 0.05).
FORMATION_EXPECT = Expectations(bos_shape="ramp", dclm=True, formation=Formation(
    min_induction_heads_final=3, none_at_first=True, formed_within=FormationWindow(revisions=("step1", "step5")),
    min_top1_final=0.02))


def healthy(**overrides: Any) -> list[MeasurementRecord]:
    """The healthy trajectory, with any knob of :func:`planted_trajectory` overridden."""
    return planted_trajectory(**{**HEALTHY, **overrides})


def bos_never_forms() -> list[MeasurementRecord]:
    """A DCLM trajectory whose BOS fraction never reaches 50% (37.5% at the last revision, 1e12),
    with 3 induction heads from 1e9 on: t_bos50 is right-censored after 1e12, so the ratio is in
    (1e12 / 1e9, inf) = (1000, inf): F3 is established, not failed."""
    return healthy(bos_fractions=(0.0, 0.0625, 0.125, 0.1875, 0.25, 0.3125, 0.375))
