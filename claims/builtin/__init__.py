"""The built-in claims, one module each, registered in report order when imported: formation (a gate),
F1-F5 and the causal check (docs/SPEC.md §6). Each module holds its claim's judge and its
:class:`~headwatch.claims.claim.Claim`; nothing else in headwatch names one of them."""
from __future__ import annotations

from headwatch.claims.builtin import (  # noqa: F401 - imported for their registration, in this order
    formation,
    f1_zero_bos_floor,
    f2_bos_shape,
    f3_induction_before_bos,
    f4_early_convergence,
    f5_pr_precedes_threshold,
    causal_ablation,
)
