"""The report's figures, drawn from measurement records and the judge's verdicts; each returns PNG bytes.

Only matplotlib's object API and the Agg canvas are used (never pyplot), so drawing touches no global
backend state and works headless, in xdist workers and in threads. Figures are small (dpi 80) so a
report with every model stays well under 10 MB.

Quantities come from :mod:`headwatch.claims.trajectory`, :mod:`headwatch.probes.selectivity` and the
verdicts (:class:`~headwatch.claims.verdict.Verdict`); nothing is recomputed.
"""
from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter

from headwatch.formatting import fmt_layers, fmt_pct, fmt_share, fmt_tokens
from headwatch.probes.record import HEAD_CLASSES, UNCLASSIFIED, MeasurementRecord, parse_head_key
from headwatch.probes.selectivity import bos_heads_of, circuit_of, labels_of

from headwatch.spec import SPEC

from headwatch.claims import trajectory as T
from headwatch.claims.verdict import CausalDetails, F2Details, F4Details, Verdict

DPI = 80
#: Colours: one per head class (the grid), and the two quantities of the F5 twin axes.
CLASS_COLORS = {
    "induction": "#d62728", "previous-token": "#ff7f0e", "duplicate-token": "#bcbd22",
    "first-token": "#1f77b4", "self": "#9467bd", "local": "#8c564b", UNCLASSIFIED: "#eeeeee",
}
PR_COLOR, SEL_COLOR = "#2ca02c", "#d62728"


@dataclass(frozen=True)
class Figure:
    """One embedded figure: a stable ``name`` (used in tests and file names), a title, a caption, PNG bytes."""

    name: str
    title: str
    caption: str
    png: bytes


# ---- helpers ----------------------------------------------------------------------------------


def _verdict_of(verdicts: Mapping[str, Verdict], details: type) -> Verdict | None:
    """The verdict whose details are of type ``details`` (the claim a figure draws), or None."""
    return next((v for v in verdicts.values() if isinstance(v.details, details)), None)


def _png(fig: MplFigure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _x(tokens: Sequence[float]) -> np.ndarray:
    """Tokens for a log axis: a revision at 0 tokens (step0) is drawn at half the smallest positive."""
    t = np.asarray(tokens, dtype=float)
    pos = t[t > 0]
    floor = pos.min() / 2 if pos.size else 1.0
    return np.where(t > 0, t, floor)


def _token_axis(ax: Any, xs: np.ndarray, zero: bool = False) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_tokens(v)))
    ax.set_xlabel("tokens seen (log; first point = 0 tokens)" if zero else "tokens seen (log)", fontsize=9)
    ax.set_xlim(xs.min() / 1.6, xs.max() * 1.6)
    ax.grid(True, which="major", alpha=0.3)


def _has_zero(records: Sequence[MeasurementRecord]) -> bool:
    return any((r.tokens_seen or 0) <= 0 for r in records)


def _mark(ax: Any, x: float | None, label: str, color: str, y: float = 0.97, ls: str = "--") -> None:
    """A vertical line at ``x`` (dashed; dotted for a right-censored milestone) with its label at the top."""
    if x is None:
        return
    ax.axvline(x, color=color, ls=ls, lw=1.2)
    lo, hi = (np.log10(v) for v in ax.get_xlim()) if ax.get_xscale() == "log" else ax.get_xlim()
    pos = np.log10(x) if ax.get_xscale() == "log" else x
    right = (pos - lo) / (hi - lo) > 0.75 if hi > lo else False  # near the right edge: label to the left
    ax.text(x, y, f" {label} " if right else f" {label}", color=color, transform=ax.get_xaxis_transform(), va="top",
            ha="right" if right else "left", fontsize=8)


def _revision_x(records: Sequence[MeasurementRecord], revision: str | None) -> float | None:
    if revision is None:
        return None
    recs = T.by_tokens(records)
    xs = _x([r.tokens_seen for r in recs])  # type: ignore[misc]
    return next((float(x) for r, x in zip(recs, xs) if r.revision == revision), None)


def _message_figure(text: str, size: tuple[float, float] = (5.5, 1.2)) -> bytes:
    """A small figure that says why a plot is absent (so every model has every figure)."""
    fig = MplFigure(figsize=size)
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=10, wrap=True)
    return _png(fig)


# ---- the figures ------------------------------------------------------------------------------


def bos_figure(records: Sequence[MeasurementRecord], verdicts: Mapping[str, Verdict], model: str = "") -> bytes:
    """BOS fraction against tokens seen (log), t_induction and t_bos50 marked, the shape named (F2, F3)."""
    recs = T.by_tokens(records)
    xs = _x([r.tokens_seen for r in recs])  # type: ignore[misc]
    series = np.array(T.bos_fraction_series(recs)) * 100
    sep = T.induction_bos_separation(recs)
    shape = T.bos_shape(recs)
    fig = MplFigure(figsize=(5.5, 3.4))
    ax = fig.add_subplot()
    ax.plot(xs, series, "o-", color=CLASS_COLORS["first-token"], lw=2)
    if shape.rise_at is not None and shape.shape == "step":
        ax.plot(xs[shape.rise_at - 1:shape.rise_at + 1], series[shape.rise_at - 1:shape.rise_at + 1],
                color="black", lw=3.5, alpha=0.35, label=f"largest rise {100 * shape.largest_rise:.1f} pts")
    if any(r.sink is not None for r in recs):  # Gu et al.'s Sink_1^eps beside it: reported, not asserted
        sink = [100 * r.sink.share_at(SPEC.sink_eps) if r.sink is not None else np.nan for r in recs]
        ax.plot(xs, sink, "s--", color="gray", lw=1, ms=4, label=f"Sink$_1^{{\\epsilon={SPEC.sink_eps:g}}}$ (sub-batch)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.axhline(100 * SPEC.bos_level, color="gray", lw=0.8, ls=":")
    _token_axis(ax, xs, _has_zero(recs))  # before the marks: they place their labels by the axis limits
    for name, m, color, y in (("t_induction", sep.induction, SEL_COLOR, 0.97),
                              ("t_bos50", sep.bos, CLASS_COLORS["first-token"], 0.85)):
        if m.censored and m.before is not None:  # not reached by the last revision: only a lower bound
            _mark(ax, _revision_x(recs, m.before.revision), f"{name} > {fmt_tokens(m.before.tokens)}", color, y, ls=":")
        else:
            _mark(ax, _revision_x(recs, m.revision), f"{name} {fmt_tokens(m.tokens)}", color, y)
    ax.set_ylim(0, 100)
    ax.set_ylabel("BOS heads (% of all heads)")
    f2 = _verdict_of(verdicts, F2Details)
    expected = f" (expected {f2.details.expected})" if f2 is not None and f2.details.expected else ""
    lo, hi = sep.bounds
    ratio = (f"; t_bos50/t_ind {sep.ratio:.3g}x" if sep.ratio is not None else
             f"; t_bos50/t_ind > {lo:.4g}x (t_bos50 censored)" if sep.censored == ("t_bos50",) else
             f"; t_bos50/t_ind < {hi:.4g}x (t_induction censored)" if sep.censored == ("t_induction",) else
             "; both milestones censored" if sep.censored else "")
    ax.set_title(f"{model}: a {shape.shape.upper()}{expected}{ratio}", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def induction_figure(records: Sequence[MeasurementRecord], verdicts: Mapping[str, Verdict], model: str = "") -> bytes:
    """Number of induction heads (>= SPEC's induction bar) and recall of the final circuit against tokens (F3, F4)."""
    recs = T.by_tokens(records)
    xs = _x([r.tokens_seen for r in recs])  # type: ignore[misc]
    counts = [len(circuit_of(r, SPEC.induction)) for r in recs]
    fig = MplFigure(figsize=(5.5, 3.4))
    ax = fig.add_subplot()
    ax.step(xs, counts, where="post", color=SEL_COLOR, lw=2, label=f"induction heads (>= {SPEC.induction:g}x)")
    ax.plot(xs, counts, "o", color=SEL_COLOR)
    ax.axhline(SPEC.induction_min_heads, color=SEL_COLOR, lw=0.8, ls=":")
    ax.set_ylabel("induction heads", color=SEL_COLOR)
    ax.set_ylim(0, max(max(counts), SPEC.induction_min_heads) + 1)
    _token_axis(ax, xs, _has_zero(recs))
    final, series = T.recall_series(recs)
    f4_verdict = _verdict_of(verdicts, F4Details)
    f4 = f4_verdict.details if f4_verdict is not None else None
    if series:
        ax2 = ax.twinx()
        ax2.plot(xs, [100 * p.recall for p in series], "s--", color="black", ms=4, lw=1, label="recall of final circuit")
        ax2.axhline(100 * SPEC.recall_level, color="black", lw=0.6, ls=":")
        ax2.set_ylim(0, 105)
        ax2.set_ylabel("recall of final circuit (%)")
    if f4 is not None and f4.total_tokens:
        limit = f4.max_fraction * f4.total_tokens
        ax.axvspan(ax.get_xlim()[0], limit, color="green", alpha=0.07)
        ax.text(limit, 0.03, f"{100 * f4.max_fraction:g}% of training ", transform=ax.get_xaxis_transform(),
                ha="right", fontsize=7, color="green")
    computed = f4.computed if f4 is not None else None
    _mark(ax, _revision_x(recs, computed.revision if computed else None), f"recall >= {fmt_share(SPEC.recall_level)}", "black", 0.85)
    paper = f4.paper_table if f4 is not None else None
    if paper is not None and paper.revision and paper.revision != (computed.revision if computed else None):
        _mark(ax, _revision_x(recs, paper.revision), "paper table", "gray", 0.72)
    ax.set_title(f"{model}: induction heads; final circuit {', '.join(T.layer_order(final)) or 'empty'}", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def pr_figure(records: Sequence[MeasurementRecord], verdicts: Mapping[str, Verdict], model: str = "") -> bytes:
    """Per final induction head: PR and induction selectivity on twin axes, elevation and crossing marked (F5)."""
    recs = T.by_tokens(records)
    if not T.has_pr(recs):
        return _message_figure(f"{model}: no per-head PR in these records, so F5 cannot be drawn")
    res = T.pr_lead(recs)
    if not res.heads:
        return _message_figure(f"{model}: no induction head (>= {SPEC.induction:g}x) at the final revision")
    xs = _x([r.tokens_seen for r in recs])  # type: ignore[misc]
    d_head = recs[-1].d_head
    bar = 1 + res.fraction * (d_head - 1)
    n = len(res.heads)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig = MplFigure(figsize=(4.0 * cols, 2.9 * rows))
    for i, lead in enumerate(res.heads):
        ax = fig.add_subplot(rows, cols, i + 1)
        ax.plot(xs, lead.pr_series, "o-", color=PR_COLOR, lw=1.8, ms=4)
        ax.axhline(bar, color=PR_COLOR, ls=":", lw=0.9)
        ax.set_ylabel("participation ratio", color=PR_COLOR, fontsize=8)
        ax.set_ylim(0, max(max(lead.pr_series), bar) * 1.15)
        _token_axis(ax, xs, _has_zero(recs))
        ax2 = ax.twinx()
        ax2.plot(xs, np.maximum(lead.selectivity_series, 1e-2), "s-", color=SEL_COLOR, lw=1.8, ms=4)
        ax2.axhline(SPEC.induction, color=SEL_COLOR, ls=":", lw=0.9)
        ax2.set_yscale("log")
        ax2.set_ylabel("induction selectivity (log)", color=SEL_COLOR, fontsize=8)
        _mark(ax, float(xs[lead.elevated.index]) if lead.elevated else None, "PR up", PR_COLOR, 0.97)
        _mark(ax, float(xs[lead.crossed.index]) if lead.crossed else None, f"{SPEC.induction:g}x", SEL_COLOR, 0.85)
        verdict = "ok" if lead.holds else "FAILS"
        lead_txt = f", {lead.lead:.3g}x earlier" if lead.lead and lead.lead > 1 else ""
        ax.set_title(f"{lead.head}: {verdict}{lead_txt}", fontsize=9, color="black" if lead.holds else "red")
        ax.tick_params(labelsize=7)
        ax2.tick_params(labelsize=7)
    fig.suptitle(f"{model}: PR (green, bar {bar:.3g}) vs induction selectivity (red, bar {SPEC.induction:g}x)", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def label_grid_figure(record: MeasurementRecord, model: str = "") -> bytes:
    """Layer x head grid of head labels at one revision; BOS heads dotted; F1's layers outlined."""
    labels = labels_of(record, SPEC.label)
    classes = list(HEAD_CLASSES) + [UNCLASSIFIED]
    grid = np.zeros((record.n_layers, record.n_heads), dtype=int)
    for key, cls in labels.items():
        l, h = parse_head_key(key)
        grid[l, h] = classes.index(cls)
    width = min(3.6 + 0.24 * record.n_heads, 9.0)
    fig = MplFigure(figsize=(width, 1.2 + 0.24 * record.n_layers))
    ax = fig.add_subplot()
    ax.imshow(grid, cmap=ListedColormap([CLASS_COLORS[c] for c in classes]), vmin=-0.5, vmax=len(classes) - 0.5,
              aspect="auto", interpolation="nearest")
    bos = bos_heads_of(record, SPEC.bos)
    for key in bos:
        l, h = parse_head_key(key)
        ax.plot(h, l, "o", ms=3.5, mfc="white", mec="black", mew=0.6)
    # the final induction circuit: its heads' best class is often first-token, so outline them
    for key in circuit_of(record, SPEC.induction):
        l, h = parse_head_key(key)
        ax.add_patch(Rectangle((h - 0.5, l - 0.5), 1, 1, fill=False, ec=CLASS_COLORS["induction"], lw=2.2))
    for layer in SPEC.f1_layers:  # F1's layers, outlined
        if layer < record.n_layers:
            ax.add_patch(Rectangle((-0.5, layer - 0.5), record.n_heads, 1, fill=False, ec="black", lw=2.5))
    early = T.early_layer_bos_heads(record)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(0, record.n_heads, max(1, record.n_heads // 8)))
    ax.set_yticks(range(0, record.n_layers, max(1, record.n_layers // 8)))
    present = [c for c in classes if (grid == classes.index(c)).any()]
    handles = [Patch(color=CLASS_COLORS[c], label=c) for c in present]
    handles += _grid_marker_handles()
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False)
    ax.set_title(f"{model} @ {record.revision}\nlayers {fmt_layers(SPEC.f1_layers)} (outlined): {len(early)} BOS heads", fontsize=9,
                 color="red" if early else "black")
    fig.tight_layout()
    return _png(fig)


def _grid_marker_handles() -> list[Any]:
    """Legend entries for the BOS-head dot and the induction-circuit outline."""
    return [Line2D([], [], marker="o", ls="", ms=4, mfc="white", mec="black", label=f"first-token >= {SPEC.bos:g}x (BOS)"),
            Line2D([], [], marker="s", ls="", ms=7, mfc="none", mec=CLASS_COLORS["induction"], mew=2,
                   label=f"induction >= {SPEC.induction:g}x")]


def ablation_figure(verdicts: Mapping[str, Verdict], model: str = "") -> bytes:
    """Top-1 at baseline, with the induction circuit ablated, and with matched-random heads ablated:
    at the query position, and beside it on every copyable position where the records carry that reading."""
    verdict = _verdict_of(verdicts, CausalDetails)
    if verdict is None or verdict.details.circuit_top1 is None:
        return _message_figure(f"{model}: {verdict.message if verdict else 'no ablation in these records'}")
    v = verdict.details
    readings = [("top-1 at the query (%)", v.baseline_top1, v.circuit_top1, v.random_top1, v.reading == "query")]
    if v.copyable is not None:
        c = v.copyable
        readings.append((f"top-1 on copyable positions (%, {c.positions})", c.baseline_top1, c.circuit_top1,
                         c.random_top1, c.decides))
    fig = MplFigure(figsize=(4.6 * len(readings), 3.2))
    for index, (label, baseline, circuit, random, decides) in enumerate(readings):
        ax = fig.add_subplot(1, len(readings), index + 1)
        names = ["baseline", f"circuit ({len(v.circuit_heads)})"]
        values = [baseline, circuit]
        colors = ["#7f7f7f", SEL_COLOR]
        if random is not None:
            names.append(f"matched random ({v.n_random_heads})")
            values.append(random)
            colors.append("#17becf")
        pct = [100 * x for x in values]
        ax.bar(names, pct, color=colors)
        for i, p in enumerate(pct):
            ax.text(i, p, f"{p:.2f}%", ha="center", va="bottom", fontsize=8)
        ax.axhline(100 * v.max_share * baseline, color="black", ls=":", lw=1)
        ax.text(len(names) - 0.5, 100 * v.max_share * baseline, f"{100 * v.max_share:g}% of baseline",
                ha="right", va="bottom", fontsize=7)
        ax.set_ylabel(label + (" - decides" if decides and len(readings) > 1 else ""), fontsize=8)
        ax.set_ylim(0, max(pct) * 1.2 or 1)
        ax.tick_params(axis="x", labelsize=8)
    measured = f" (measured on {v.measured_on})" if v.measured_on and v.measured_on != v.revision else ""
    fig.suptitle(f"{model}: ablation at {v.revision}{measured}", fontsize=9)
    fig.tight_layout()
    return _png(fig)


# ---- all of a model's figures -------------------------------------------------------------------


def model_figures(records: Sequence[MeasurementRecord], verdicts: Mapping[str, Verdict], model: str = "") -> list[Figure]:
    """Every figure of one model, in report order (one per figure kind, always)."""
    recs = T.by_tokens(records)
    final = recs[-1]
    causal = _verdict_of(verdicts, CausalDetails)
    random_note = causal.details.random_matched_to if causal is not None else None
    f4 = _verdict_of(verdicts, F4Details)
    shaded = f4.details.max_fraction if f4 is not None else SPEC.f4_max_fraction
    induction, bos = f"{SPEC.induction:g}x", f"{SPEC.bos:g}x"
    return [
        Figure("bos_fraction", "BOS fraction", f"Share of heads with first-token selectivity >= {bos}; dashed lines: "
               f"t_induction (>= {SPEC.induction_min_heads} heads at >= {induction}) and t_bos50 (BOS fraction >= "
               f"{fmt_pct(SPEC.bos_level)}); dotted with '>': a milestone not reached by the last revision "
               "(right-censored). F2, F3.", bos_figure(recs, verdicts, model)),
        Figure("induction_heads", "Induction heads", f"Heads at induction selectivity >= {induction} (steps) and recall "
               f"of the final circuit (squares); shaded: the first {fmt_pct(shaded)} of training. F4.",
               induction_figure(recs, verdicts, model)),
        Figure("pr_lead", "PR vs induction selectivity", "Each final induction head: participation ratio (green) and "
               f"induction selectivity (red); dashed: PR elevation and {induction} crossing. F5.",
               pr_figure(recs, verdicts, model)),
        Figure("label_grid", f"Head labels at {final.revision}", f"Best class per head (>= {SPEC.label:g}x); dots: BOS "
               f"heads (first-token >= {bos}); red squares: induction heads (>= {induction}); black outline: layers "
               f"{fmt_layers(SPEC.f1_layers)}, which F1 says hold no BOS head.", label_grid_figure(final, model)),
        Figure("ablation", "Ablation", "Top-1 for the induction target b with heads zeroed (and, where measured, "
               "greedy top-1 on every copyable position of repeated sequences with the same heads zeroed). Matched "
               f"random: {random_note or 'n/a'}.", ablation_figure(verdicts, model)),
    ]


# ---- populations: every member's trajectory on one figure per quantity -----------------

#: Reference members are drawn in muted colours, candidates thick and red (highlighted).
CANDIDATE_COLOR = "#d62728"


def _member_style(i: int, n: int, candidate: bool) -> dict[str, Any]:
    if candidate:
        return {"color": CANDIDATE_COLOR, "lw": 2.6, "ms": 5, "zorder": 3}
    shade = 0.25 + 0.5 * (i / max(n - 1, 1))  # reference members: greys to blue-greys, told apart by shade
    return {"color": (shade * 0.6, shade * 0.7, min(1.0, shade * 1.1)), "lw": 1.2, "ms": 3, "alpha": 0.9, "zorder": 2}


@dataclass(frozen=True)
class Trajectory:
    """What a population figure draws of one member, per revision in token order: tokens seen, heads
    at induction selectivity >= SPEC's bar, BOS fraction (a few numbers kept when its records are not)."""

    tokens: tuple[float | None, ...]
    induction_heads: tuple[int, ...]
    bos_fraction: tuple[float, ...]


def trajectory_of(records: Sequence[MeasurementRecord]) -> Trajectory:
    recs = T.by_tokens(records)
    return Trajectory(tuple(r.tokens_seen for r in recs),
                      tuple(len(circuit_of(r, SPEC.induction)) for r in recs),
                      tuple(T.bos_fraction_series(recs)))


def population_trajectory_figure(quantity: str, trajectories: Mapping[str, Trajectory],
                                 candidates: Sequence[str] = (), title: str = "") -> bytes:
    """One line per member of ``quantity`` against tokens seen (log): ``"induction"`` (heads >= 50x)
    or ``"bos"`` (BOS fraction, %). Candidates (member ids in ``candidates``) are highlighted."""
    if quantity not in ("induction", "bos"):
        raise ValueError(f"quantity must be 'induction' or 'bos', got {quantity!r}")
    fig = MplFigure(figsize=(6.2, 3.6))
    ax = fig.add_subplot()
    all_x: list[float] = []
    zero = False
    ref_ids = [m for m in trajectories if m not in candidates]
    for mid, tr in trajectories.items():
        if not tr.tokens:
            continue
        xs = _x(tr.tokens)  # type: ignore[arg-type]
        zero = zero or any((t or 0) <= 0 for t in tr.tokens)
        all_x += list(xs)
        ys = list(tr.induction_heads) if quantity == "induction" else list(np.array(tr.bos_fraction) * 100)
        cand = mid in candidates
        style = _member_style(ref_ids.index(mid) if not cand else 0, len(ref_ids), cand)
        if quantity == "induction":
            ax.step(xs, ys, where="post", label=mid + (" (candidate)" if cand else ""), **{k: v for k, v in style.items() if k != "ms"})
            ax.plot(xs, ys, "o", color=style["color"], ms=style["ms"], zorder=style["zorder"])
        else:
            ax.plot(xs, ys, "o-", label=mid + (" (candidate)" if cand else ""), **style)
    if not all_x:
        return _message_figure("no member has measurements")
    _token_axis(ax, np.asarray(all_x), zero)
    if quantity == "induction":
        ax.axhline(SPEC.induction_min_heads, color="gray", lw=0.8, ls=":")
        ax.set_ylabel(f"induction heads (>= {SPEC.induction:g}x)")
        ax.set_ylim(bottom=0)
    else:
        ax.axhline(100 * SPEC.bos_level, color="gray", lw=0.8, ls=":")
        ax.set_ylabel("BOS heads (% of all heads)")
        ax.set_ylim(0, 100)
    ax.legend(loc="upper left", fontsize=7, frameon=False, ncol=2 if len(trajectories) > 6 else 1)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def population_figures(name: str, trajectories: Mapping[str, Trajectory],
                       candidates: Sequence[str] = ()) -> list[Figure]:
    """A population's two trajectory figures: induction heads and BOS fraction, every member on each."""
    n_ref = len([m for m in trajectories if m not in candidates])
    who = f"{n_ref} reference members" + (f", candidates in red ({', '.join(candidates)})" if candidates else "")
    return [
        Figure("population_induction", f"{name}: induction heads per member",
               f"Heads at induction selectivity >= {SPEC.induction:g}x against tokens seen, one line per member ({who}); "
               f"the dotted line is t_induction's {SPEC.induction_min_heads} heads.",
               population_trajectory_figure("induction", trajectories, candidates, f"{name}: induction heads")),
        Figure("population_bos", f"{name}: BOS fraction per member",
               f"Share of heads with first-token selectivity >= {SPEC.bos:g}x against tokens seen, one line per member "
               f"({who}); the dotted line is t_bos50's {100 * SPEC.bos_level:g}%.",
               population_trajectory_figure("bos", trajectories, candidates, f"{name}: BOS fraction")),
    ]
