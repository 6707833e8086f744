"""The one judge of claims F1-F5 and the causal check (SPEC section 6), shared by tests and CLI.

Each ``judge_*`` function takes a model's records (and, where a claim needs one, its panel
expectations) and returns a plain JSON-able dict: ``holds`` (True, False, or None where the claim
does not apply or the records lack what it needs), the key figures, and a one-line ``message``
stating the measured quantities. :func:`judge_model` runs them all.

Expectations (expected BOS shape, DCLM or not, declared known deviations) come from the panel file
(``[models.expect]``): a :class:`fixtures.panels.Expectations`, a mapping, or None.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from probes.record import MeasurementRecord, parse_head_key

from . import trajectory as T

CLAIMS = ("F1", "F2", "F3", "F4", "F5", "causal")

#: Sensitivity settings reported (never asserted) beside F3 and F5 (issue 5).
F3_MILESTONE_HEADS = (1, 3, 5)
F5_FRACTIONS = (0.05, 0.1, 0.2)


@dataclass(frozen=True)
class ModelExpectations:
    """What the panel declares for one model; unknown keys of ``[models.expect]`` sit in ``extra``.

    Recognised extra keys: ``paper_f4_tokens`` (the tokens the paper's F4 table gives, reported
    beside the computed number), ``f3_min_ratio`` (default 10), ``f4_max_fraction`` (default 0.025).
    """

    bos_shape: str | None = None
    dclm: bool = False
    xfail: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_any(cls, expect: Any) -> "ModelExpectations":
        if expect is None:
            return cls()
        if isinstance(expect, cls):
            return expect
        if isinstance(expect, Mapping):
            known = {"bos_shape", "dclm", "xfail"}
            extra = dict(expect.get("extra", {}))
            extra.update({k: v for k, v in expect.items() if k not in known | {"extra"}})
            return cls(expect.get("bos_shape"), bool(expect.get("dclm", False)), dict(expect.get("xfail", {})), extra)
        return cls(
            getattr(expect, "bos_shape", None),
            bool(getattr(expect, "dclm", False)),
            dict(getattr(expect, "xfail", {}) or {}),
            dict(getattr(expect, "extra", {}) or {}),
        )

    def number(self, key: str, default: float | None) -> float | None:
        value = self.extra.get(key, default)
        return None if value is None else float(value)


# ---- formatting helpers ----------------------------------------------------------------------


def fmt_tokens(tokens: float | None) -> str:
    """23e9 -> '23B', 6.29e9 -> '6.29B', 2.1e6 -> '2.1M'."""
    if tokens is None:
        return "never"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(tokens) >= scale:
            return f"{tokens / scale:.3g}{unit}"
    return f"{tokens:.3g}"


def _point(p: T.RevisionPoint | None) -> dict[str, Any] | None:
    return None if p is None else {"revision": p.revision, "tokens": p.tokens}


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


# ---- F1 ---------------------------------------------------------------------------------------


def judge_f1_revision(record: MeasurementRecord, layers: Sequence[int] = (0, 1),
                      threshold: float = T.BOS_THRESHOLD) -> dict[str, Any]:
    """F1 at one revision: no head in ``layers`` with first-token selectivity >= threshold."""
    heads = T.early_layer_bos_heads(record, layers, threshold)
    sel = {h: _round(record.all_head_selectivity[h]["first-token"], 2) for h in heads}
    where = f"{record.revision} ({fmt_tokens(record.tokens_seen)} tokens)"
    layer_txt = "/".join(str(l) for l in layers)
    if heads:
        message = (f"{len(heads)} BOS head(s) in layers {layer_txt} at {where}: "
                   + ", ".join(f"{h} (first-token {v}x)" for h, v in sel.items()))
    else:
        top = max(
            (h for h in record.all_head_selectivity if parse_head_key(h)[0] in set(layers)),
            key=lambda h: record.all_head_selectivity[h]["first-token"], default=None,
        )
        peak = record.all_head_selectivity[top]["first-token"] if top else float("nan")
        message = (f"no BOS head in layers {layer_txt} at {where}; highest first-token selectivity "
                   f"there: {top} {peak:.3g}x (< {threshold:g})")
    return {"holds": not heads, "revision": record.revision, "tokens": record.tokens_seen,
            "heads": heads, "first_token_selectivity": sel, "threshold": threshold, "message": message}


def judge_f1(records: Sequence[MeasurementRecord], layers: Sequence[int] = (0, 1),
             threshold: float = T.BOS_THRESHOLD) -> dict[str, Any]:
    """F1 over every revision."""
    per_rev = [judge_f1_revision(r, layers, threshold) for r in T.by_tokens(records)]
    bad = [v for v in per_rev if not v["holds"]]
    if bad:
        message = "BOS heads in layers 0/1 at " + "; ".join(
            f"{v['revision']}: {', '.join(v['heads'])}" for v in bad)
    else:
        message = f"no BOS head in layers {'/'.join(map(str, layers))} at any of {len(per_rev)} revisions"
    return {"holds": not bad, "revisions_checked": len(per_rev),
            "violations": [{k: v[k] for k in ("revision", "tokens", "heads")} for v in bad],
            "layers": list(layers), "threshold": threshold, "message": message}


# ---- F2 ---------------------------------------------------------------------------------------


def judge_f2(records: Sequence[MeasurementRecord], expect: Any = None,
             step_share: float = T.STEP_SHARE) -> dict[str, Any]:
    """F2: the BOS-fraction shape matches the panel's expected shape (None if none declared)."""
    ex = ModelExpectations.from_any(expect)
    recs = T.by_tokens(records)
    shape = T.bos_shape(recs, step_share)
    series = T.bos_fraction_series(recs)
    pts = T.tokens_per_revision(recs)
    rise = None
    if shape.rise_at is not None:
        rise = {"from": _point(pts[shape.rise_at - 1]), "to": _point(pts[shape.rise_at])}
    holds = None if ex.bos_shape is None else shape.shape == ex.bos_shape
    rise_txt = (f"largest adjacent rise {100 * shape.largest_rise:.1f} of {100 * shape.total_rise:.1f} points"
                + (f" ({pts[shape.rise_at - 1].revision} -> {pts[shape.rise_at].revision}, "
                   f"{100 * series[shape.rise_at - 1]:.1f}% -> {100 * series[shape.rise_at]:.1f}%)"
                   if shape.rise_at is not None else ""))
    expected_txt = f"expected {ex.bos_shape}" if ex.bos_shape else "no shape declared in the panel"
    message = f"BOS fraction is a {shape.shape}: {rise_txt}; {expected_txt}"
    return {
        "holds": holds, "shape": shape.shape, "expected": ex.bos_shape,
        "first_pct": _round(100 * shape.first, 2), "final_pct": _round(100 * shape.final, 2),
        "largest_rise_points": _round(100 * shape.largest_rise, 2),
        "total_rise_points": _round(100 * shape.total_rise, 2),
        "share": _round(shape.share), "step_share": step_share, "largest_rise": rise,
        "series_pct": {p.revision: _round(100 * f, 2) for p, f in zip(pts, series)},
        "message": message,
    }


# ---- F3 ---------------------------------------------------------------------------------------


def judge_f3(records: Sequence[MeasurementRecord], expect: Any = None,
             min_heads: int = T.INDUCTION_MIN_HEADS) -> dict[str, Any]:
    """F3: for DCLM models, t_bos50 / t_induction >= f3_min_ratio (10). Not applicable otherwise."""
    ex = ModelExpectations.from_any(expect)
    min_ratio = ex.number("f3_min_ratio", 10.0)
    sep = T.induction_bos_separation(records, min_heads=min_heads)
    sensitivity = {}
    for k in F3_MILESTONE_HEADS:
        s = T.induction_bos_separation(records, min_heads=k)
        sensitivity[str(k)] = {"t_induction": _point(s.induction.point), "ratio": _round(s.ratio)}
    ratio_txt = (f"t_bos50 / t_induction = {fmt_tokens(sep.bos.tokens)} / {fmt_tokens(sep.induction.tokens)}"
                 + (f" = {sep.ratio:.3g}" if sep.ratio is not None else " (undefined)"))
    where = (f"t_induction at {sep.induction.revision or 'no revision'} (>= {min_heads} heads at induction "
             f">= {T.INDUCTION_THRESHOLD:g}), t_bos50 at {sep.bos.revision or 'no revision'}")
    if not ex.dclm:
        holds = None
        verdict = "not a DCLM model: F3 does not apply"
    elif sep.ratio is None:
        holds = False
        verdict = "a milestone is never reached, so the separation cannot be shown"
    else:
        holds = sep.ratio >= min_ratio
        verdict = f"needs >= {min_ratio:g}"
    return {
        "holds": holds, "applies": ex.dclm, "ratio": _round(sep.ratio), "min_ratio": min_ratio,
        "t_induction": _point(sep.induction.point), "t_bos50": _point(sep.bos.point),
        "milestone_heads": min_heads, "sensitivity_milestone_heads": sensitivity,
        "message": f"{ratio_txt}; {where}; {verdict}",
    }


# ---- F4 ---------------------------------------------------------------------------------------


def judge_f4(records: Sequence[MeasurementRecord], expect: Any = None,
             total_tokens: float | None = None, level: float = T.RECALL_LEVEL) -> dict[str, Any]:
    """F4: the first revision with recall of the final circuit >= 2/3 lies within 2.5% of training.

    Reports the computed revision and, where the panel declares ``paper_f4_tokens``, the paper
    table's number with the recall actually measured at that revision.
    """
    ex = ModelExpectations.from_any(expect)
    max_fraction = ex.number("f4_max_fraction", 0.025)
    conv = T.first_recall_at_least(records, level, total_tokens=total_tokens)
    series = {p.point.revision: {"tokens": p.point.tokens, "recall": _round(p.recall), "found": list(p.found)}
              for p in conv.series}
    computed = None
    if conv.point is not None:
        computed = {"revision": conv.point.point.revision, "tokens": conv.point.point.tokens,
                    "fraction_of_total": _round(conv.fraction_of_total, 6), "recall": _round(conv.point.recall),
                    "found": list(conv.point.found)}
    paper_tokens = ex.number("paper_f4_tokens", None)
    paper = None
    if paper_tokens is not None:
        at = next((p for p in conv.series if math.isclose(p.point.tokens, paper_tokens, rel_tol=0.02)), None)
        paper = {
            "tokens": paper_tokens, "fraction_of_total": _round(paper_tokens / conv.total_tokens, 6),
            "revision": at.point.revision if at else None,
            "recall_there": _round(at.recall) if at else None,
            "reproduced": bool(at and at.recall >= level - 1e-9
                               and computed is not None and at.point.revision == computed["revision"]),
        }
    if not conv.final_circuit:
        holds, message = None, "the final revision has no induction head (>= 50x): recall is undefined"
    elif conv.point is None:
        holds, message = False, f"recall never reaches {level:.3g} before the final revision"
    else:
        frac = conv.fraction_of_total
        holds = frac <= max_fraction
        message = (f"recall of the final circuit ({', '.join(conv.final_circuit)}) first >= {level:.3g} at "
                   f"{conv.point.point.revision} ({fmt_tokens(conv.point.point.tokens)} tokens = "
                   f"{100 * frac:.2f}% of {fmt_tokens(conv.total_tokens)}; found {', '.join(conv.point.found)}); "
                   f"needs <= {100 * max_fraction:g}%")
    if paper is not None:
        message += (f"; paper table: {fmt_tokens(paper_tokens)} ({100 * paper['fraction_of_total']:.2f}%), "
                    + (f"recall there {paper['recall_there']:.3g}" if paper["recall_there"] is not None
                       else "no screened revision there")
                    + (" - reproduced" if paper["reproduced"] else " - not reproduced"))
    return {
        "holds": holds, "computed": computed, "paper_table": paper,
        "reproduces": None if paper is None else ("paper table" if paper["reproduced"] else "computed only"),
        "final_circuit": list(conv.final_circuit), "total_tokens": conv.total_tokens,
        "level": level, "max_fraction": max_fraction, "recall_series": series, "message": message,
    }


# ---- F5 ---------------------------------------------------------------------------------------


def _lead_dict(l: T.HeadLead) -> dict[str, Any]:
    return {"head": l.head, "elevated": _point(l.elevated), "crossed": _point(l.crossed),
            "lead": _round(l.lead), "holds": l.holds}


def judge_f5(records: Sequence[MeasurementRecord], fraction: float = T.PR_ELEVATION_FRACTION) -> dict[str, Any]:
    """F5: every final induction head has elevated PR at or before it first crosses 50x."""
    recs = T.by_tokens(records)
    if not T.has_pr(recs):
        missing = [r.revision for r in recs if r.pr is None or r.d_head <= 1]
        return {"holds": None, "fraction": fraction, "heads": [], "failing": [], "sensitivity": {},
                "message": f"no per-head PR (or d_head) at revisions {missing}: F5 cannot be judged"}
    res = T.pr_lead(recs, fraction)
    sensitivity = {}
    for f in F5_FRACTIONS:
        r = T.pr_lead(recs, f)
        sensitivity[f"{f:g}"] = {"holds": r.holds, "failing": list(r.failing),
                                 "passing": len(r.heads) - len(r.failing), "heads": len(r.heads)}
    d_head = recs[-1].d_head
    bar = 1 + fraction * (d_head - 1)
    if not res.heads:
        holds, message = None, "the final revision has no induction head (>= 50x): F5 has no heads to judge"
    else:
        holds = res.holds
        parts = []
        for l in res.heads:
            el = f"{l.elevated.revision}" if l.elevated else "never"
            parts.append(f"{l.head}: PR elevated {el}, crosses 50x {l.crossed.revision if l.crossed else 'never'}"
                         + (f" ({l.lead:.3g}x earlier)" if l.lead and l.lead > 1 else ""))
            if not l.holds:
                i = l.crossed.index if l.crossed else -1
                parts[-1] += f" [PR {l.pr_series[i]:.3g} < {bar:.3g} at the crossing]"
        message = (f"{len(res.heads) - len(res.failing)}/{len(res.heads)} final induction heads have PR - 1 >= "
                   f"{fraction:g} x (d_head - 1) (PR >= {bar:.3g}, d_head {d_head}) at or before crossing: "
                   + "; ".join(parts))
    return {"holds": holds, "fraction": fraction, "d_head": d_head, "pr_bar": bar,
            "heads": [_lead_dict(l) for l in res.heads], "failing": list(res.failing),
            "sensitivity": sensitivity, "message": message}


# ---- causal -----------------------------------------------------------------------------------


def judge_causal(records: Sequence[MeasurementRecord], max_share: float = T.ABLATION_MAX_SHARE) -> dict[str, Any]:
    """Causal check on the latest revision with ablations: circuit top-1 <= 25% of baseline and
    below the matched-random control."""
    rec = T.last_with_ablations(records)
    v = T.ablation_verdict(rec, max_share) if rec is not None else None
    if v is None:
        return {"holds": None, "message": "no revision carries an induction-circuit ablation: causal check not run"}
    if not v.circuit_heads:  # ablating nothing tells nothing about a circuit
        return {"holds": None, "revision": rec.revision,
                "message": f"the induction circuit ablated at {rec.revision} is empty: causal check not applicable"}
    note = rec.provenance.get("ablation_file", {}).get("relative_to", {}).get("matched_random")
    final_circuit = T.layer_order(T.induction_circuit(rec.all_head_selectivity))
    share = v.share_of_baseline
    message = (f"at {rec.revision}: top-1 {100 * v.baseline_top1:.2f}% baseline, {100 * v.circuit_top1:.2f}% with "
               f"the circuit ({', '.join(v.circuit_heads)}) ablated"
               + (f" = {100 * share:.1f}% of baseline" if share is not None else "")
               + f" (needs <= {100 * max_share:g}%), "
               + (f"{100 * v.random_top1:.2f}% with {len(v.random_heads)} matched-random heads ablated"
                  if v.random_top1 is not None else "no matched-random control"))
    if note:
        message += f"; NOTE matched-random is matched to {note}"
    return {
        "holds": v.holds, "revision": rec.revision, "baseline_top1": v.baseline_top1,
        "circuit_top1": v.circuit_top1, "random_top1": v.random_top1, "share_of_baseline": _round(share),
        "max_share": max_share, "cuts_enough": v.cuts_enough, "beats_random": v.beats_random,
        "circuit_heads": list(v.circuit_heads), "screen_circuit": final_circuit,
        "circuit_matches_screen": sorted(v.circuit_heads) == sorted(final_circuit),
        "n_random_heads": len(v.random_heads), "random_matched_to": note or "the induction circuit (SPEC 4)",
        "message": message,
    }


# ---- everything ------------------------------------------------------------------------------


def judge_model(records: Sequence[MeasurementRecord], expectations: Any = None,
                total_tokens: float | None = None) -> dict[str, Any]:
    """All verdicts for one model: {"F1": {...}, ..., "causal": {...}}, each with ``holds``,
    key figures, ``message``, and ``declared_xfail`` (the panel's reason, or None)."""
    ex = ModelExpectations.from_any(expectations)
    recs = T.by_tokens(records)
    out = {
        "F1": judge_f1(recs),
        "F2": judge_f2(recs, ex),
        "F3": judge_f3(recs, ex),
        "F4": judge_f4(recs, ex, total_tokens),
        "F5": judge_f5(recs),
        "causal": judge_causal(recs),
    }
    for claim, verdict in out.items():
        verdict["declared_xfail"] = ex.xfail.get(claim)
    return out


def status(verdict: Mapping[str, Any]) -> str:
    """One word for a verdict: holds / FAILS / n/a, with 'known deviation' where declared."""
    holds = verdict.get("holds")
    word = "n/a" if holds is None else ("holds" if holds else "FAILS")
    if verdict.get("declared_xfail"):
        word += " (declared known deviation)" if holds is False else " (declared deviation did NOT occur)"
    return word
