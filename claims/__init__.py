"""The claims: their API (:class:`Claim`, :func:`register_claim`), the built-ins, the judge, the report.

``from headwatch.claims import Claim, NegativeControl, register_claim`` is all a researcher's own claim
needs (docs/claims.md). Importing this package registers the built-in claims first.
"""
from __future__ import annotations

from headwatch.claims.claim import Claim, GridValue, NegativeControl, Quantity, Threshold
from headwatch.claims.registry import ClaimError, all_claims, get_claim, register_claim
from headwatch.claims.verdict import KeyFigure, Status, Verdict
from headwatch.claims import builtin  # noqa: E402,F401 - registers formation, F1-F5 and causal, in that order

__all__ = ["Claim", "ClaimError", "GridValue", "KeyFigure", "NegativeControl", "Quantity", "Status", "Threshold",
           "Verdict", "all_claims", "get_claim", "register_claim"]
