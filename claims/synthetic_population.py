"""Planted populations for the population verdicts' negative controls and unit tests (issue 24).

Members are variants of :func:`headwatch.claims.synthetic.healthy` (every claim holds there) that
differ in when their circuit forms (``onset``: the revision index at which heads A, B, C pass 50x)
or in one planted defect; :func:`planted_population` judges them with the one judge into
:class:`~headwatch.claims.population.Member` objects. The numbers sit clearly on one side of each
bar; nothing comes from any real run.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwatch.probes.record import MeasurementRecord
from headwatch.spec import Expectations

from .population import Member, member_of
from .synthetic import A, B, C, FORMATION_EXPECT, HEALTHY_EXPECT, PR_HIGH, TOKENS, Ablations, healthy

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
#: The causal check short of its exact test: circuit 2 vs baseline 26 of 2000 (7.7% of baseline,
#: the bar's p = 0.061): "consistent, not established" in that member.
CAUSAL_UNDECIDED = {"ablations": Ablations(baseline=0.013, circuit=0.001, random=0.04)}
#: Enough planted siblings that a candidate beyond all of them fails on four quantities: 4 x 2 / 161 < 0.05.
MANY_SIBLING_ONSETS = SIBLING_ONSETS * 32

__all__ = ["EARLY_PR", "member_records", "planted_population", "SIBLING_ONSETS", "MANY_SIBLING_ONSETS", "F1_DEFECT",
           "NEVER_FORMS", "CAUSAL_UNDECIDED", "FORMATION_EXPECT"]
