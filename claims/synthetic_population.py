"""Planted populations for the population verdicts' negative controls and unit tests.

Members are variants of :func:`headwatch.claims.synthetic.healthy` (every claim holds there) that
differ in when their circuit forms (``onset``: the revision index at which heads A, B, C pass 50x)
or in one planted defect; :func:`planted_population` judges them with the one judge into
:class:`~headwatch.claims.population.Member` objects. The numbers sit clearly on one side of each
bar; nothing comes from any real run.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from headwatch.probes.record import (
    HEAD_CLASSES, AblationResult, MeasurementRecord, ProbeSettings, RecordIntervals, SinkScore, TaskMetrics, head_key,
)
from headwatch.spec import Expectations

from headwatch.claims.population import Member, member_of
from headwatch.claims.synthetic import A, B, C, FORMATION_EXPECT, HEALTHY_EXPECT, PR_HIGH, TOKENS, Ablations, healthy

#: PR elevated from the first revision on for every circuit head, so F5 holds whatever the onset.
EARLY_PR = {A: (PR_HIGH,) * len(TOKENS), B: (PR_HIGH,) * len(TOKENS), C: (PR_HIGH,) * len(TOKENS)}


def member_records(onset: int = 1, *, model: str = "planted/member", **overrides: Any) -> list[MeasurementRecord]:
    """A healthy trajectory whose circuit (A, B, C) forms at revision index ``onset`` (0 < onset < 7)."""
    if not 0 < onset < len(TOKENS):
        raise ValueError(f"onset must be a revision index 1..{len(TOKENS) - 1}, got {onset}")
    sets = ((),) * onset + ((A, B, C),) * (len(TOKENS) - onset)
    return healthy(**{"induction_sets": sets, "pr": EARLY_PR, "model": model, **overrides})


def planted_population(onsets: Sequence[int], *, candidates: Sequence[int] = (), defects: dict[int, dict] | None = None,
                       expect: Expectations = HEALTHY_EXPECT, prefix: str = "seed") -> list[Member]:
    """Members ``<prefix><i>`` with circuit onsets ``onsets``; ``candidates`` (indices) are candidates;
    ``defects[i]`` overrides knobs of :func:`member_records` for member i (a planted failure)."""
    out = []
    for i, onset in enumerate(onsets):
        mid = f"{prefix}{i}"
        recs = member_records(onset, model=f"planted/{mid}", **(defects or {}).get(i, {}))
        out.append(member_of(mid, recs, expect, role="candidate" if i in candidates else "reference", seed=i))
    return out


#: Five seeds whose circuits form at revision 1 or 2 (1e9 or 3e9 tokens): a tight population.
SIBLING_ONSETS = (1, 2, 1, 2, 1)
#: A BOS head in layer 0 at step2: F1 fails (synthetic.NEGATIVE_CONTROLS' bos_head_in_layer_0).
F1_DEFECT = {"extra_bos": {2: ("L0_H1",)}}
#: The final revision with no induction head at all: a member that did not form (with FORMATION_EXPECT).
NEVER_FORMS = {"induction_sets": ((),) * len(TOKENS)}
#: The causal check short of its exact test: circuit 2 vs baseline 24 of 2000 (8.3% of baseline,
#: the bar's exact unconditional p = 0.069): "consistent, not established" in that member.
CAUSAL_UNDECIDED = {"ablations": Ablations(baseline=0.012, circuit=0.001, random=0.04)}
#: Enough planted siblings that a candidate beyond all of them fails on four quantities: 4 x 2 / 161 < 0.05.
MANY_SIBLING_ONSETS = SIBLING_ONSETS * 32

# ---- at the size of a real seed suite: records shaped like a PolyPythia run's -------------


def suite_records(model: str, n_layers: int, n_heads: int, d_head: int, revisions: Sequence[tuple[str, float]],
                  settings: Sequence[ProbeSettings], *, seed: int, onset: float, bos_at_end: float,
                  ) -> Iterator[MeasurementRecord]:
    """Full-size records of one planted run, one revision at a time (nothing else is held).

    Every head has all six class selectivities with bootstrap-style intervals, a PR and a first-position
    attention; the task top-1 and the two ablations are counts, where ``settings[i].ablation``.
    Three heads of the middle layers form the induction circuit around ``onset`` tokens (a logistic
    rise in log tokens, each head a little apart); the BOS fraction ramps to ``bos_at_end`` over the
    last decades, from layers >= 2 only (F1 holds); the circuit heads' PR rises before they cross.
    ``revisions``: (name, tokens) in token order. The numbers are planted, never measured.
    """
    rng = np.random.default_rng(seed)
    heads = [head_key(l, h) for l in range(n_layers) for h in range(n_heads)]
    middle = [k for k in heads if 1 <= int(k[1:].split("_")[0]) <= max(1, n_layers - 2)]
    circuit = list(rng.choice(middle, size=min(3, len(middle)), replace=False))
    late = [k for k in heads if int(k[1:].split("_")[0]) >= 2 and k not in circuit]
    rng.shuffle(late)
    base = rng.uniform(0.5, 4.0, size=(len(heads), len(HEAD_CLASSES)))
    pr_base = rng.uniform(1.2, 1 + 0.05 * (d_head - 1), size=len(heads))
    shift = {k: rng.uniform(-0.15, 0.15) for k in circuit}
    final_tokens = revisions[-1][1]
    n = settings[0].n_examples
    for (revision, tokens), rs in zip(revisions, settings):
        x = math.log10(max(tokens, 1.0))
        sel = base * rng.uniform(0.9, 1.1, size=base.shape)
        pr = pr_base * rng.uniform(0.95, 1.05, size=len(heads))
        for k in circuit:
            i = heads.index(k)
            rise = 1 / (1 + math.exp(-8 * (x - math.log10(onset) - shift[k])))
            sel[i, HEAD_CLASSES.index("induction")] = 1 + 79 * rise
            pr[i] = 1 + (0.4 * (d_head - 1)) / (1 + math.exp(-8 * (x - math.log10(onset) + 0.3)))
        share = bos_at_end * max(0.0, min(1.0, (x - math.log10(final_tokens) + 2.5) / 2.5))
        bos = set(late[:round(share * len(heads))])
        first = HEAD_CLASSES.index("first-token")
        for k in bos:
            sel[heads.index(k), first] = 40.0
        table = {k: {c: float(sel[i, j]) for j, c in enumerate(HEAD_CLASSES)} for i, k in enumerate(heads)}
        intervals = RecordIntervals(
            level=0.95, methods={"top1": "planted", "selectivity": "planted", "bos_fraction": "planted",
                                 "induction_heads": "planted"},
            selectivity={k: {c: (0.95 * v, 1.05 * v) for c, v in row.items()} for k, row in table.items()},
            bos_fraction=(max(0.0, share - 0.05), min(1.0, share + 0.05)),
            induction_heads=(0.0, float(len(circuit))))
        task, ablations = None, []
        if rs.ablation:
            top1 = 0.05 + 0.5 * (1 / (1 + math.exp(-8 * (x - math.log10(onset)))))
            task = TaskMetrics(1.0, round(top1 * n) / n, min(1.0, 2 * top1), 1.0, n=n, top1_count=round(top1 * n))
            cut = round(0.02 * top1 * n)
            rand = round(0.9 * top1 * n)
            ablations = [AblationResult("induction_circuit", tuple(sorted(circuit)), TaskMetrics(1.0, cut / n, cut / n, 1.0,
                                                                                                  n=n, top1_count=cut)),
                         AblationResult("matched_random", tuple(late[-3:]), TaskMetrics(1.0, rand / n, rand / n, 1.0, n=n,
                                                                                        top1_count=rand))]
        attention = {k: float(0.6 if k in bos else rng.uniform(0.0, 0.2)) for k in heads}
        yield MeasurementRecord(
            model=model, revision=revision, tokens_seen=float(tokens), n_layers=n_layers, n_heads=n_heads, d_head=d_head,
            all_head_selectivity=table, pr={k: float(v) for k, v in zip(heads, pr)}, task=task, ablations=ablations,
            settings=rs, n_examples_valid=n, provenance={"source": "planted at the size of a seed suite"},
            intervals=intervals, sink=SinkScore(0.3, 64, sum(v > 0.3 for v in attention.values()) / len(heads), attention))


__all__ = ["suite_records", "EARLY_PR", "member_records", "planted_population", "SIBLING_ONSETS", "MANY_SIBLING_ONSETS", "F1_DEFECT",
           "NEVER_FORMS", "CAUSAL_UNDECIDED", "FORMATION_EXPECT"]
