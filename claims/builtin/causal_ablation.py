"""The causal check: ablating the final induction circuit cuts top-1 to <= 25% of baseline and
below matched-random heads, each by a one-sided exact test (docs/SPEC.md §6, docs/statistics.md)."""
from __future__ import annotations

from collections.abc import Sequence

from headwatch.formatting import fmt_pct
from headwatch.probes.record import MeasurementRecord
from headwatch.probes.selectivity import circuit_of
from headwatch.schema import to_data
from headwatch.spec import SPEC, Expectations, Thresholds
from headwatch.stats import MIN_BOOTSTRAP_SEQUENCES

from headwatch.claims import synthetic as S
from headwatch.claims import trajectory as T
from headwatch.claims.claim import FLOOR_SOURCE, FLOOR_THRESHOLD, Claim, NegativeControl, Threshold
from headwatch.claims.registry import register_claim
from headwatch.claims.synthetic import Ablations
from headwatch.claims.verdict import CausalDetails, CopyableDetails, KeyFigure, Status, Verdict
from headwatch.claims.judging import not_counted_text, point as _point, rounded as _round, sig as _sig, with_interval as _with_interval, trajectory_claim as _trajectory_claim

#: The claim's name (panels' xfail keys, --claims, JSON).
NAME = "causal"


def _count_pair(c: T.Top1Count | None) -> tuple[int, int] | None:
    return None if c is None else (c.k, c.n)


def _no_ablation(records: Sequence[MeasurementRecord], spec: Thresholds) -> Verdict:
    """The causal verdict where no revision carries the circuit ablation: not applicable where the
    records were measured with ablation off at every revision (the panel's ``ablation = "none"``) or
    the final circuit is empty (nothing to ablate); otherwise not established (the evidence is missing)."""
    recs = T.by_tokens(records)
    if all(r.settings is not None and not r.settings.ablation for r in recs):
        return Verdict(NAME, Status.NOT_APPLICABLE, "the records were measured without ablations "
                       "(settings.ablation false at every revision: the panel's ablation = \"none\"): causal check not run",
                       CausalDetails(), key="not run")
    final = recs[-1]
    if not circuit_of(final, spec.induction, spec.attention_floor):
        flagged = T.not_counted([final], "induction", spec.induction, spec.attention_floor)
        return Verdict(NAME, Status.NOT_APPLICABLE,
                       f"no induction head at {final.revision}: nothing to ablate, causal check not applicable"
                       + (f"; {not_counted_text(flagged, spec.attention_floor, at_revision=False)}" if flagged else ""),
                       CausalDetails(negligible_heads=flagged, attention_floor=T.attention_floor_note([final])),
                       key="not run")
    return Verdict(NAME, Status.NOT_ESTABLISHED,
                   "not established: no revision carries an induction-circuit ablation (missing: the ablation; "
                   "measure the final revision with ablation on)", CausalDetails(missing=("induction-circuit ablation",)),
                   key="no ablation")


def copyable_status(copy: T.CopyableReading) -> tuple[Status, str]:
    """The copyable-position reading's own outcome and what decided it, in words: the same rules as
    the query position's (the cut and the control at the point estimates, then both tests below
    alpha), on the sequence bootstrap's p-values."""
    bar = f"{100 * copy.max_share:g}% of baseline"
    if copy.baseline_rate == 0:
        return Status.NOT_ESTABLISHED, "missing evidence: no copyable position is right at baseline (the model does not copy)"
    if not copy.cuts_enough:
        return Status.FAILS, f"the cut: circuit top-1 is {fmt_pct(copy.share_of_baseline, '.1f')} of baseline (> {bar})"
    if copy.random_rate is not None and not copy.below_random:
        return Status.FAILS, "the matched-random control: circuit top-1 is not below it"
    if copy.random_rate is None:
        return Status.NOT_ESTABLISHED, "missing evidence: no matched-random ablation"
    if not copy.enough_sequences:
        return (Status.NOT_ESTABLISHED,
                f"missing evidence: {copy.n_sequences} sequences, too few for a bootstrap over sequences (needs >= "
                f"{MIN_BOOTSTRAP_SEQUENCES})")
    if copy.holds:
        return Status.HOLDS, f"both bootstrap tests: the bar ({bar}) p = {copy.p_vs_bar:.3g}, matched random p = {copy.p_vs_random:.3g} (< {copy.alpha:g})"
    weak = [f"{name} (p = {p:.3g})" for name, p, ok in ((f"the bar (circuit < {bar})", copy.p_vs_bar, copy.meets_bar),
                                                        ("the control (circuit < matched random)", copy.p_vs_random,
                                                         copy.beats_random)) if not ok]
    return (Status.CONSISTENT_NOT_ESTABLISHED,
            "the bootstrap test of " + " and of ".join(weak) + f", not below {copy.alpha:g}; the point rules pass")


def _copyable_words(copy: T.CopyableReading, status: Status, decided: str, decides: bool) -> str:
    """The copyable-position reading as the verdict's message gives it."""
    words = (f"every copyable position ({copy.positions} positions over {copy.n_sequences} repeated sequences, "
             f"{copy.method}): top-1 {fmt_pct(copy.baseline_rate, '.1f')} baseline, {fmt_pct(copy.circuit_rate, '.1f')} "
             "with the circuit ablated"
             + (f" = {fmt_pct(copy.share_of_baseline, '.1f')} of baseline" if copy.share_of_baseline is not None else "")
             + (f" [{fmt_pct(copy.share_interval[0], '.1f')}, {fmt_pct(copy.share_interval[1], '.1f')}]"
                if copy.share_interval is not None else "")
             + (f", {fmt_pct(copy.random_rate, '.1f')} with matched random" if copy.random_rate is not None else "")
             + (f"; bar p = {copy.p_vs_bar:.3g}" if copy.p_vs_bar is not None else "")
             + (f", control p = {copy.p_vs_random:.3g}" if copy.p_vs_random is not None else ""))
    if decides:
        return f"{words}; this reading decides (the panel's causal_reading)"
    return f"{words}; this reading, reported beside the query position's and not deciding: {status.words} ({decided})"


def judge_causal(records: Sequence[MeasurementRecord], expect: Expectations = Expectations(), spec: Thresholds = SPEC) -> Verdict:
    """Causal check on the latest revision with ablations: circuit top-1 <= 25% of baseline and
    below the matched-random control, each confirmed by a one-sided exact test on the top-1 counts
    (p < alpha): the bar by :func:`headwatch.stats.ratio_below` (against "circuit >= 25% of
    baseline"), the control by Fisher's test (against "circuit >= random").

    Fails where a point rule fails (the cut, or circuit >= random); holds where both point rules
    and both exact tests pass; consistent, not established where the point rules pass and an exact
    test does not; not established where evidence is missing (no matched-random ablation, no top-1
    counts, no ablation at all: the message names it); not applicable where the panel says the
    model has no matched-random control (``no_matched_random``), the records were measured without
    ablations, or the circuit is empty. The message says which control decided, the revision the
    ablations were measured on where the record names another (``main``), and the paper's
    figures beside the record's where the panel gives them (``paper_top1``: "paper reports").
    """
    max_share, alpha = spec.ablation_max_share, spec.causal_alpha
    rec = T.last_with_ablations(records)
    if rec is None:
        return _no_ablation(records, spec)
    on = T.ablations_measured_on(rec)
    at = rec.revision + (f" (ablations measured on {on})" if on != rec.revision else "")
    v = T.ablation_verdict(rec, max_share, alpha)
    if v is None:
        return Verdict(NAME, Status.NOT_ESTABLISHED,
                       f"not established: at {at} the circuit ablation has no baseline (missing: task metrics)",
                       CausalDetails(revision=rec.revision, measured_on=on, missing=("baseline task metrics",)),
                       key="no baseline")
    if not v.circuit_heads:  # ablating nothing tells nothing about a circuit
        return Verdict(NAME, Status.NOT_APPLICABLE,
                       f"the induction circuit ablated at {at} is empty: causal check not applicable",
                       CausalDetails(revision=rec.revision, measured_on=on), key="not run")
    note = rec.provenance.get("ablation_file", {}).get("relative_to", {}).get("matched_random")
    final_circuit = T.layer_order(circuit_of(rec, spec.induction, spec.attention_floor))
    flagged = T.not_counted([rec], "induction", spec.induction, spec.attention_floor)
    share = v.share_of_baseline
    p_rnd, p_base = v.p_vs_random, v.p_vs_bar
    has_random = v.random_top1 is not None
    reconstructed = any(c is not None and c.reconstructed for c in (v.baseline_count, v.circuit_count, v.random_count))
    message = (f"at {at}: top-1 {fmt_pct(v.baseline_top1, '.2f')} baseline, {fmt_pct(v.circuit_top1, '.2f')} with "
               f"the circuit ({', '.join(v.circuit_heads)}) ablated"
               + (f" = {fmt_pct(share, '.1f')} of baseline" if share is not None else "")
               + f" (needs <= {fmt_pct(max_share)}), "
               + (f"{fmt_pct(v.random_top1, '.2f')} with {len(v.random_heads)} matched-random heads ablated"  # type: ignore[arg-type]
                  if has_random else "no matched-random control"))
    if v.circuit_count is not None:
        counts = ", ".join(f"{name} {c.k}/{c.n}" for name, c in (("baseline", v.baseline_count), ("circuit", v.circuit_count),
                                                                   ("random", v.random_count)) if c is not None)
        message += (f"; top-1 counts {counts}" + (" (reconstructed from the published rates x N)" if reconstructed else "")
                    + f"; {v.method_random}: circuit < random p = {'n/a' if p_rnd is None else format(p_rnd, '.3g')}; "
                    f"{v.method_bar}: circuit < {100 * max_share:g}% of baseline p = "
                    f"{'n/a' if p_base is None else format(p_base, '.3g')} (each needs < {alpha:g})")
    else:
        message += "; top-1 counts unknown (the record states no number of examples): no exact test"
    if note:
        message += f"; NOTE matched-random is matched to {note}"
    if flagged:
        message += f"; {not_counted_text(flagged, spec.attention_floor, at_revision=False)}"
    missing = []
    if not has_random:
        missing.append("matched-random ablation")
    if p_base is None or (has_random and p_rnd is None):
        missing.append("top-1 counts")
    if not v.cuts_enough:
        status, decided = Status.FAILS, f"the cut: circuit top-1 is {fmt_pct(share, '.1f')} of baseline (> {fmt_pct(max_share)})"
    elif has_random and not v.below_random:
        status, decided = Status.FAILS, "the matched-random control: circuit top-1 is not below it"
    elif not has_random and expect.no_matched_random:
        status = Status.NOT_APPLICABLE
        decided = f"the panel: this model has no matched-random control ({expect.no_matched_random})"
        missing = [m for m in missing if m != "matched-random ablation"]
    elif missing:
        status, decided = Status.NOT_ESTABLISHED, "missing evidence: " + " and ".join(missing)
    elif v.holds:
        status = Status.HOLDS
        decided = (f"both exact tests: the bar ({100 * max_share:g}% of baseline) p = {p_base:.3g}, matched random "
                   f"p = {p_rnd:.3g} (< {alpha:g})")
    else:
        weak = [(name, p) for name, p, ok in ((f"the bar (circuit < {100 * max_share:g}% of baseline)", p_base,
                                               v.meets_bar),
                                              ("the control (circuit < matched random)", p_rnd, v.beats_random))
                if not ok]
        status = Status.CONSISTENT_NOT_ESTABLISHED
        decided = ("the exact test of " + " and of ".join(f"{name} (p = {p:.3g})" for name, p in weak)
                   + f", not below {alpha:g}; the point rules pass")
    copy = T.copyable_reading(rec, max_share, alpha)
    reading = expect.causal_reading
    copy_details = None
    if copy is not None:
        copy_status, copy_decided = copyable_status(copy)
        message += "; " + _copyable_words(copy, copy_status, copy_decided, reading == "copyable")
        copy_details = CopyableDetails(
            n_sequences=copy.n_sequences, positions=copy.positions, baseline_top1=_round(copy.baseline_rate, 5),
            circuit_top1=_round(copy.circuit_rate, 5), random_top1=_round(copy.random_rate, 5),
            share_of_baseline=_round(copy.share_of_baseline), share_interval=None if copy.share_interval is None else
            (_round(copy.share_interval[0], 5), _round(copy.share_interval[1], 5)), p_vs_bar=_sig(copy.p_vs_bar),
            p_vs_random=_sig(copy.p_vs_random), method=copy.method, status=copy_status.value,
            decides=reading == "copyable")
    if reading == "copyable":
        if copy is None:
            status = Status.NOT_ESTABLISHED
            decided = ("missing evidence: the copyable-position reading, which the panel's causal_reading asks to decide "
                       "(measure with copy_sequences > 0 and ablation on)")
            missing = [*missing, "copyable-position reading"]
        else:
            status, decided = copy_status, f"the copyable-position reading (the panel's causal_reading): {copy_decided}"
            missing = [] if status is not Status.NOT_ESTABLISHED else [copy_decided.removeprefix("missing evidence: ")]
    message += f"; {status.words}: " + (decided if status is Status.NOT_ESTABLISHED else f"decided by {decided}")
    paper = expect.paper_top1
    if paper is not None:
        message += (f"; paper reports (not in these records, not used): top-1 {fmt_pct(paper.baseline, '.2f')} baseline, "
                    f"{fmt_pct(paper.circuit, '.2f')} circuit, {fmt_pct(paper.matched_random, '.2f')} matched random"
                    + (f" (the records' matched random, used: {fmt_pct(v.random_top1, '.2f')})" if has_random else ""))  # type: ignore[arg-type]
    intervals = {}
    if rec.intervals is not None:
        named = {"baseline": rec.intervals.task_top1, "circuit": rec.intervals.ablation_top1.get("induction_circuit"),
                 "random": rec.intervals.ablation_top1.get("matched_random")}
        intervals = {k: (_round(b[0], 5), _round(b[1], 5)) for k, b in named.items() if b is not None}
    details = CausalDetails(
        revision=rec.revision, baseline_top1=v.baseline_top1, circuit_top1=v.circuit_top1,
        random_top1=v.random_top1, share_of_baseline=_round(share), max_share=max_share,
        cuts_enough=v.cuts_enough, beats_random=v.beats_random, circuit_heads=tuple(v.circuit_heads),
        screen_circuit=tuple(final_circuit), circuit_matches_screen=sorted(v.circuit_heads) == sorted(final_circuit),
        n_random_heads=len(v.random_heads), random_matched_to=note or "the induction circuit (docs/SPEC.md §4)",
        baseline_count=_count_pair(v.baseline_count), circuit_count=_count_pair(v.circuit_count),
        random_count=_count_pair(v.random_count), counts_reconstructed=reconstructed,
        p_vs_random=_sig(p_rnd), p_vs_bar=_sig(p_base), method_random=v.method_random, method_bar=v.method_bar,
        alpha=alpha, top1_intervals=intervals,
        measured_on=on, decided_by=decided, missing=tuple(missing),
        paper_top1=None if paper is None else to_data(paper), copyable=copy_details, reading=reading,
        negligible_heads=flagged, attention_floor=T.attention_floor_note([rec]),
    )
    key = f"{fmt_pct(share, '.1f')} of base" + (f", p={p_base:.2g}" if p_base is not None and share is not None else "")
    if v.random_top1 is not None and v.baseline_top1:
        key += f" (rand {fmt_pct(v.random_top1 / v.baseline_top1, '.1f')}" + (f", p={p_rnd:.2g})" if p_rnd is not None else ")")
        if note:
            key += " \u2020"  # the control is matched to another head set: the report's footnote says so
    elif not has_random:
        key += " (no random control)"
    figure = KeyFigure("circuit-ablated top-1 as a share of baseline", _round(share), max_share,
                       method=v.method_bar + (" (counts reconstructed from rates x N)" if reconstructed else ""),
                       p_value=_sig(p_base))
    if reading == "copyable" and copy is not None:
        share = copy.share_of_baseline
        key = (f"{fmt_pct(share, '.1f')} of base (copyable" + (f", p={copy.p_vs_bar:.2g}" if copy.p_vs_bar is not None else "")
               + ")")
        figure = KeyFigure("circuit-ablated top-1 on copyable positions as a share of baseline", _round(share), max_share,
                           method=copy.method, p_value=_sig(copy.p_vs_bar))
    return Verdict(NAME, status, message, details, key=key,
                   margin=None if share is None else _round(max_share - share), figure=figure)


def _judge(records: Sequence[MeasurementRecord], expect: Expectations, spec: Thresholds, *,
           total_tokens: float | None = None) -> Verdict:
    return judge_causal(records, expect, spec)


CLAIM = register_claim(Claim(
    name=NAME, title="causal ablation",
    question="Does ablating the final induction circuit cut top-1 to at most 25% of baseline, and below as many "
             "matched-random heads?",
    judge=_judge,
    thresholds=(Threshold("circuit-ablated top-1 <= this share of baseline", "docs/SPEC.md §6", field="ablation_max_share"),
                Threshold("the exact tests' alpha", "docs/statistics.md", field="causal_alpha"),
                Threshold("induction head: induction selectivity >=", "docs/SPEC.md §2", field="induction"),
                Threshold(FLOOR_THRESHOLD, FLOOR_SOURCE, field="attention_floor")),
    key_figure="circuit-ablated top-1 as a share of baseline, with the exact test's p-value",
    reads=("induction",), details=CausalDetails, needs=("ablation",), test_module="test_causal_ablation.py",
    negative_controls=(
        NegativeControl("ablation_no_worse_than_random",
                        "ablating the circuit hurts top-1 no more than the matched-random control",
                        lambda: S.healthy(ablations=Ablations(baseline=0.05, circuit=0.01, random=0.005)), S.HEALTHY_EXPECT),
        NegativeControl("ablation_barely_hurts", "ablating the circuit leaves 60% of baseline top-1",
                        lambda: S.healthy(ablations=Ablations(baseline=0.05, circuit=0.03, random=0.045)), S.HEALTHY_EXPECT),
    ),
))
