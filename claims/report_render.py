"""HTML for the report: the verdict table, per-model figure sections, the run environment.

Pure functions from :class:`headwatch.claims.report_data.ModelReport` (and plain dicts) to HTML strings,
with no pytest import: the pytest-html plugin (:mod:`headwatch.claims.html_report`) puts the fragment into
pytest-html's summary, and ``headwatch report`` wraps it into a page of its own.

Layout (a report of 51 models must stay readable, < ~3 MB and <= ~1,400 px wide): the
populations first (``table#headwatch-populations``: population x claim, k of n), then the verdict
table of the models in no population (models as rows, claims as columns, so it never widens), then
one section per population (its members x claims, each quantity per member as rows, candidates'
places, two figures), then each model's detail in a ``<details>`` (collapsed when the report has more
than :data:`~headwatch.claims.report_data.MEMBER_FIGURES_UP_TO` models; the per-revision sink table
always collapsed), then the run environment.

Stable hooks for tests and tools: a model's verdict cell (in the verdict table or its population's
grid) carries ``data-model``, ``data-claim`` and ``data-status``; a claim over a population
``data-population``, ``data-population-claim`` and ``data-status``; each figure is an ``img`` with
``data-figure="<model>/<figure name>"``; the environment is ``table#headwatch-environment``.
"""
from __future__ import annotations

import base64
import platform
from collections.abc import Mapping, Sequence
from html import escape
from importlib import metadata
from typing import Any

from headwatch.fixtures.cache import probe_code_version
from headwatch.spec import SPEC

from headwatch.claims.figures import Figure
from headwatch.claims.population import PopulationReport, quantity_words
from headwatch.claims.report_data import (
    CELL_LABEL, CONSISTENT, FAILS, HOLDS, MEMBER_FIGURES_UP_TO, MISMATCH, MISSING, NA, NOT_ESTABLISHED,
    NOT_JUDGED, VACUOUS, XFAIL, XPASS, ModelReport, claim_title, rows_of, verdict_cell,
)
from headwatch.claims.verdict import WORDS, Status

#: Where to read a status word: colour per status (background, text).
STATUS_STYLE = {
    HOLDS: ("#e3f5e1", "#17631b"), VACUOUS: ("#eef5ed", "#4d7a50"), CONSISTENT: ("#fbf6dc", "#6b5d00"),
    NOT_ESTABLISHED: ("#f4f0e4", "#6b5d00"), FAILS: ("#fde2e1", "#a8140e"), XFAIL: ("#fff2d6", "#8a5a00"),
    XPASS: ("#fde2e1", "#a8140e"), MISMATCH: ("#fde2e1", "#a8140e"), NA: ("#f1f1f1", "#555"),
    NOT_JUDGED: ("#ececf6", "#3b3b8a"), MISSING: ("#f1f1f1", "#a8140e"), Status.CRASHED.words: ("#fde2e1", "#a8140e"),
}
#: The report's label of each cell status (claims/verdict.py's vocabulary).
STATUS_LABEL = CELL_LABEL
#: The grid's cells: a short word per status.
_GRID_WORD = {s.value: WORDS[s].short for s in Status}

CSS = """
#headwatch { color: #222; font-size: 13px; max-width: 1360px; }
#headwatch h2 { margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
#headwatch h3 { font-size: 14px; margin: 18px 0 6px; color: #222; }
#headwatch p, #headwatch li { color: #333; }
#headwatch a { color: #1f5fa8; }
#headwatch nav a { margin-right: 12px; }
#headwatch td.nowrap { white-space: nowrap; }
#headwatch table.hw { border-collapse: collapse; margin: 6px 0 10px; }
#headwatch table.hw th, #headwatch table.hw td { border: 1px solid #d8d8d8; padding: 5px 8px; vertical-align: top; text-align: left; }
#headwatch table.hw th { background: #f6f6f6; color: #222; }
#headwatch td.cell { min-width: 150px; }
#headwatch td.cell .st { font-weight: bold; display: block; }
#headwatch td.cell .key { font-size: 15px; display: block; margin: 2px 0; color: #111; }
#headwatch td.cell .tests { font-size: 11px; color: #555; }
#headwatch td.cell .tests.mismatch { color: #a8140e; font-weight: bold; }
#headwatch td.msg { font-size: 12px; color: #333; max-width: 980px; }
#headwatch .figs { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-start; }
#headwatch figure { margin: 0; border: 1px solid #e4e4e4; padding: 6px; background: #fff; }
#headwatch figure img { display: block; max-width: 100%; }
#headwatch figcaption { font-size: 11px; color: #444; max-width: 440px; margin-top: 4px; }
#headwatch figure.wide figcaption { max-width: 900px; }
#headwatch .note { background: #fff8e5; border-left: 4px solid #e0a800; padding: 6px 10px; color: #333; }
#headwatch .error { background: #fde2e1; border-left: 4px solid #a8140e; padding: 6px 10px; color: #222; white-space: pre-wrap; }
#headwatch details.model { border: 1px solid #e4e4e4; margin: 6px 0; padding: 4px 10px; }
#headwatch details.model > summary { cursor: pointer; font-size: 14px; font-weight: bold; padding: 3px 0; }
#headwatch details.model > summary .counts { font-weight: normal; color: #555; font-size: 12px; }
#headwatch details.rows > summary { cursor: pointer; color: #1f5fa8; margin: 8px 0; }
#headwatch tr.aggregate th, #headwatch tr.aggregate td { border-top: 2px solid #999; }
#headwatch td.cell.compact { min-width: 110px; }
/* pytest-html puts its own environment table first: move it (and the test list) below the claims */
body { display: flex; flex-direction: column; }
body > h1, body > p { order: 0; }
body > .summary { order: 1; }
body > #environment-header, body > #environment { order: 2; }
body > #results-table { order: 3; }
body > footer { order: 4; }
"""


def _status_cell(model: str, claim: str, report: ModelReport, tests: str | None, mismatch: bool) -> str:
    c = verdict_cell(claim, report)
    bg, fg = STATUS_STYLE[c.status]
    title = escape(c.message, quote=True)
    tests_html = ""
    if tests:
        tests_html = f'<span class="tests{" mismatch" if mismatch else ""}">tests: {escape(tests)}</span>'
    return (f'<td class="cell" data-model="{escape(model, quote=True)}" data-claim="{escape(claim, quote=True)}" '
            f'data-status="{escape(c.status, quote=True)}" style="background:{bg}" title="{title}">'
            f'<span class="st" style="color:{fg}">{escape(STATUS_LABEL[c.status])}</span>'
            f'<span class="key">{escape(c.key) or "&nbsp;"}</span>{tests_html}</td>')


def verdict_table(reports: Sequence[ModelReport], tests: Mapping[tuple[str, str], str] | None = None,
                  mismatches: Mapping[tuple[str, str], bool] | None = None) -> str:
    """Models as rows, claims as columns (it grows down, not across); ``tests[(claim, model)]`` is the
    claim tests' outcome line."""
    tests, mismatches = tests or {}, mismatches or {}
    claims = rows_of(reports)
    head = "".join(f"<th>{escape(claim_title(c))}</th>" for c in claims)
    rows = []
    for r in reports:
        cells = "".join(_status_cell(r.id, c, r, tests.get((c, r.id)), mismatches.get((c, r.id), False)) for c in claims)
        rows.append(f'<tr><th class="nowrap"><a href="#hw-model-{escape(r.id, quote=True)}">{escape(r.id)}</a><br>'
                    f'<span style="font-weight:normal;color:#666">{escape(r.repo)} · {len(r.revisions)} revisions</span>'
                    f"</th>{cells}</tr>")
    return f'<table class="hw" id="headwatch-verdicts"><tr><th>model</th>{head}</tr>{"".join(rows)}</table>'


def _img(model: str, fig: Figure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    wide = ' class="wide"' if fig.name == "pr_lead" else ""
    return (f'<figure{wide}><img data-figure="{escape(model, quote=True)}/{fig.name}" alt="{escape(fig.title, quote=True)}" '
            f'src="data:image/png;base64,{data}"><figcaption><b>{escape(fig.title)}.</b> {escape(fig.caption)}'
            f'</figcaption></figure>')


def _counts(report: ModelReport) -> str:
    """'F1 holds, F2 holds, ..., causal consistent' in a few words, for a collapsed section's summary."""
    if report.error:
        return "could not be read or judged"
    if not report.verdicts:
        return "no measurements on disk"
    words: dict[str, list[str]] = {}
    for c in rows_of([report]):
        words.setdefault(STATUS_LABEL[verdict_cell(c, report).status], []).append(c)
    return "; ".join(f"{label}: {', '.join(cs)}" for label, cs in words.items())


def model_section(report: ModelReport, figures: Sequence[Figure], open_: bool = True) -> str:
    """One model in a ``<details>``: the judge's message per claim, the sensitivity grid, the sink table
    (collapsed), its figures (where drawn)."""
    parts = [f'<details class="model" id="hw-model-{escape(report.id, quote=True)}"{" open" if open_ else ""}>'
             f'<summary>{escape(report.id)} <span class="counts">({escape(report.repo)}, panel {escape(report.panel)}, '
             f'{len(report.revisions)} revisions) {escape(_counts(report))}</span></summary>']
    if report.error:
        parts.append(f'<div class="error">could not read or judge this model: {escape(report.error)}</div>')
    if report.missing:
        parts.append(f'<p class="note">{len(report.missing)} revision(s) have no measurement on disk and are left out: '
                     f'{escape(", ".join(report.missing))}. Run the claim tests (or <code>headwatch measure</code>) to '
                     "measure them.</p>")
    if report.verdicts:
        rows = "".join(
            f'<tr><th>{escape(claim_title(c))}</th><td style="color:{STATUS_STYLE[verdict_cell(c, report).status][1]};'
            f'font-weight:bold">{escape(STATUS_LABEL[verdict_cell(c, report).status])}</td>'
            f'<td class="msg">{escape(verdict_cell(c, report).message)}</td></tr>'
            for c in rows_of([report]))
        parts.append(f'<table class="hw verdict-details">{rows}</table>')
    if report.grid is not None:
        parts.append(grid_table(report))
    if report.rows:
        parts.append(sink_table(report))
    if figures:
        parts.append('<div class="figs">' + "".join(_img(report.id, f) for f in figures) + "</div>")
    parts.append("</details>")
    return "\n".join(parts)


def grid_table(report: ModelReport) -> str:
    """The sensitivity grid: one row per setting, one column per verdict, and "robust" per verdict."""
    grid = report.grid
    assert grid is not None
    claims = list(grid.rows[0].statuses)
    head = "".join(f"<th>{escape(c)}</th>" for c in claims)
    rows = "".join(f"<tr><td class='nowrap'>{escape(r.label)}</td>"
                   + "".join(f"<td>{escape(_GRID_WORD[r.statuses[c]])}</td>" for c in claims) + "</tr>"
                   for r in grid.rows)
    robust = "".join(f"<td><b>{'robust' if grid.robust[c] else 'changes'}</b></td>" for c in claims)
    return (f'<h3>Sensitivity: every verdict re-judged with one SPEC constant changed (reported, not asserted)</h3>'
            f'<table class="hw" data-grid="{escape(report.id, quote=True)}"><tr><th>setting</th>{head}</tr>{rows}'
            f"<tr><th>same at every setting</th>{robust}</tr></table>")


def sink_table(report: ModelReport) -> str:
    """SPEC's BOS fraction beside Gu et al.'s Sink_1^eps per revision (reported, not asserted), collapsed."""
    cells = [f"<tr><td class='nowrap'>{escape(r.revision)}</td><td>{100 * r.bos_fraction:.1f}%</td><td>{escape(r.sink)}</td>"
             f"<td>{'' if r.sink_examples is None else r.sink_examples}</td></tr>" for r in report.rows]
    return (f"<details class='rows'><summary>Attention sinks two ways, per revision ({len(report.rows)} rows): SPEC's BOS "
            f"fraction (first-token selectivity >= {SPEC.bos:g}, query T-1, all examples) and Gu et al.'s "
            f"Sink<sub>1</sub><sup>&epsilon;</sup> (mean attention to position 0 over queries 1..T-1 &gt; {SPEC.sink_eps:g}; "
            "whole attention rows, so a sub-batch of the first examples)</summary>"
            "<table class='hw sink'><tr><th>revision</th><th>BOS fraction</th><th>Sink_1^eps</th><th>examples</th></tr>"
            + "".join(cells) + "</table></details>")


def versions() -> dict[str, str]:
    """Versions of what computed and drew the numbers."""
    out = {"python": platform.python_version()}
    for pkg in ("headwatch", "torch", "transformers", "numpy", "matplotlib", "pytest", "pytest-html", "pytest-xdist"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    out["probe code"] = probe_code_version()
    return out


def _device_line(env: Mapping[str, Any]) -> str:
    """The requested device and where measurements were actually made in this run."""
    used = sorted({e["device"] for e in env.get("entries", []) if e.get("device")})
    asked = str(env.get("device") or "?")
    if used:
        return f"{asked} (measured on {', '.join(used)})"
    return f"{asked} (no model loaded in this run: published measurements or cache hits only)"


def _revision_list(revs: Sequence[str], most: int = 8) -> str:
    """Every revision's name, or the first and last few of a long list."""
    if len(revs) <= most:
        return ", ".join(revs)
    return f"{', '.join(revs[:3])}, ... ({len(revs) - 6} more), {', '.join(revs[-3:])}"


def environment_table(env: Mapping[str, Any], reports: Sequence[ModelReport]) -> str:
    """Panels, models and revisions, device, dtype, versions, cache hits vs fresh runs (from a RunInfo dict)."""
    counts = env.get("counts") or {}
    per_model: dict[str, dict[str, int]] = {}
    for e in env.get("entries", []):
        d = per_model.setdefault(e["model"], {})
        d[e["status"]] = d.get(e["status"], 0) + 1
    model_rows = []
    for r in reports:
        m = (env.get("models") or {}).get(r.id, {})
        revs = m.get("revisions") or r.revisions
        st = ", ".join(f"{n} {s}" for s, n in sorted(per_model.get(r.id, {}).items())) or "not loaded by a test"
        model_rows.append(f"<tr><td class='nowrap'>{escape(r.id)}</td><td>{escape(r.repo)}</td><td>{escape(m.get('source', '?'))}</td>"
                          f"<td>{escape(r.panel)}</td><td>{len(revs)}: {escape(_revision_list(revs))}</td>"
                          f"<td>{escape(st)}</td></tr>")
    rows = [
        ("panels", ", ".join(env.get("panels") or []) or "?"),
        ("device", _device_line(env)),
        ("dtype", str(env.get("dtype") or "each panel model's own")),
        ("examples per batch", str(env.get("n_examples") or "each panel's own")),
        ("measurement cache", str(env.get("cache_dir") or "?") + (" (--refresh)" if env.get("refresh") else "")),
        ("measurements", (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none loaded by a test")
         + " (hit: read from the cache; computed/refreshed: fresh probe run; reference: the author's published files)"),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions().items())),
    ]
    for g in env.get("identical_weights") or []:
        rows.append(("identical weights", f"{g['model']}: {', '.join(g['revisions'])}"))
    for w in env.get("warnings") or []:
        rows.append(("warning", w))
    head = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    models = ("<table class='hw'><tr><th>model</th><th>repo</th><th>source</th><th>panel</th><th>revisions</th>"
              f"<th>this run</th></tr>{''.join(model_rows)}</table>")
    return f'<table class="hw" id="headwatch-environment">{head}</table>{models}'


def fragment(reports: Sequence[ModelReport], figures: Mapping[str, Sequence[Figure]] | None, env: Mapping[str, Any],
             tests: Mapping[tuple[str, str], str] | None = None,
             mismatches: Mapping[tuple[str, str], bool] | None = None, controls: str | None = None,
             errors: Sequence[str] = (), test_list: bool = True, populations: Sequence[PopulationReport] = (),
             population_figs: Mapping[str, Sequence[Figure]] | None = None) -> str:
    """The whole headwatch part of a report, one ``div#headwatch`` (layout: the module docstring).

    ``figures`` by model id; None: each report's own (:attr:`ModelReport.figures`)."""
    members = {m.id: p.name for p in populations for m in p.members}
    alone = [r for r in reports if r.id not in members]
    by_id = {r.id: r for r in reports}
    nav = " ".join([f'<a href="#hw-population-{escape(p.name, quote=True)}">population {escape(p.name)}</a>'
                    for p in populations] + [f'<a href="#hw-model-{escape(r.id, quote=True)}">{escape(r.id)}</a>'
                                             for r in alone])
    legend = ("Each cell: the judge's verdict (claims/judge.py, the one the claim tests assert), the claim's key number "
              "with its interval where there is one, and the outcome of the claim's tests for that model. Hover a cell "
              "for the judge's full message. The verdict vocabulary (README): "
              + "; ".join(f"{w.label}: {w.meaning}" for w in WORDS.values())
              + ". A skipped claim test says why in its reason. Expected deviation: the panel declares the claim a "
              "known finding for this model and the measurement matches the declaration (strict xfail); deviation "
              "mismatch: it fails otherwise than declared.")
    parts = [f"<style>{CSS}</style>", '<div id="headwatch">',
             f'<nav>Jump to: {nav} <a href="#hw-models">each model</a> <a href="#hw-environment">run environment</a>'
             + (' <a href="#results-table">test list</a>' if test_list else "") + "</nav>",
             "<h2>Claims (arXiv 2606.02378)</h2>", f"<p>{escape(legend)}</p>"]
    if populations:
        parts.append(populations_table(populations))
    if alone:
        parts.append(verdict_table(alone, tests, mismatches))
    if any("\u2020" in v.key for r in reports for v in r.verdicts.values()):
        parts.append("<p>\u2020 the matched-random control of these records is matched to another head set than the "
                     "induction circuit (see the model's causal message below), so it compares unlike groups.</p>")
    if controls:
        parts.append(f"<p>Negative controls (planted trajectories each claim must reject): {escape(controls)}.</p>")
    parts += [f'<div class="error">{escape(e)}</div>' for e in errors]
    parts += [population_section(p, (population_figs or {}).get(p.name, ()), by_id, tests, mismatches)
              for p in populations]
    open_ = len(reports) <= MEMBER_FIGURES_UP_TO
    parts.append(f'<h2 id="hw-models">Each model ({len(reports)}{"" if open_ else ": click one to open it"})</h2>')
    parts += [model_section(r, r.figures if figures is None else figures.get(r.id, ()), open_) for r in reports]
    parts += ['<h2 id="hw-environment">Run environment</h2>', environment_table(env, reports), "</div>"]
    return "\n".join(parts)


def standalone_page(title: str, body: str) -> str:
    """A complete HTML page around :func:`fragment` (``headwatch report``)."""
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{escape(title)}</title></head>'
            f'<body style="font-family: Helvetica, Arial, sans-serif"><h1>{escape(title)}</h1>{body}</body></html>')


# ---- populations (issues 24, 33): population x claim first, members behind it -------------------------


def _pop_cell(status: Status, key: str, message: str, claim: str, population: str) -> str:
    word = status.words
    bg, fg = STATUS_STYLE[word]
    return (f'<td class="cell compact" data-population="{escape(population, quote=True)}" '
            f'data-population-claim="{escape(claim, quote=True)}" data-status="{escape(word, quote=True)}" '
            f'style="background:{bg}" title="{escape(message, quote=True)}">'
            f'<span class="st" style="color:{fg}">{escape(STATUS_LABEL[word])}</span>'
            f'<span class="key">{escape(key) or "&nbsp;"}</span></td>')


def _candidates_cell(report: PopulationReport) -> str:
    """The candidates in a few words: how many placements fail, are flagged, lie within."""
    if not report.candidates:
        return "<td>none</td>"
    places = [p for ps in report.placements.values() for p in ps.values()]
    fails = sum(p.status is Status.FAILS for p in places)
    flags = sum(p.outlier and p.status is not Status.FAILS for p in places)
    inside = sum(p.inside for p in places)
    word = FAILS if fails else CONSISTENT if flags else HOLDS
    bg, fg = STATUS_STYLE[word]
    return (f'<td class="cell compact" style="background:{bg}"><span class="st" style="color:{fg}">'
            f'{len(report.candidates)} candidate(s)</span><span class="key">{fails} fail, {flags} flagged, {inside} within'
            "</span></td>")


def populations_table(pops: Sequence[PopulationReport]) -> str:
    """Population x claim: each claim over the reference members (k of n), and the candidates."""
    claims = list(dict.fromkeys(c for p in pops for c in p.claims))
    head = "".join(f"<th>{escape(claim_title(c))}</th>" for c in claims)
    rows = []
    for p in pops:
        cells = "".join(_pop_cell(p.claims[c].status, p.claims[c].key, p.claims[c].message, c, p.name)
                        if c in p.claims else "<td></td>" for c in claims)
        rows.append(f'<tr><th class="nowrap"><a href="#hw-population-{escape(p.name, quote=True)}">{escape(p.name)}</a>'
                    f'<br><span style="font-weight:normal;color:#666">{len(p.reference)} reference member(s)</span></th>'
                    f"{cells}{_candidates_cell(p)}</tr>")
    return ("<h3>Populations: each claim over the reference members (k of n, one-sided exact bounds; members below)</h3>"
            f'<table class="hw" id="headwatch-populations"><tr><th>population</th>{head}<th>candidates</th></tr>'
            + "".join(rows) + "</table>")


def population_grid(report: PopulationReport, reports: Mapping[str, ModelReport] | None = None,
                    tests: Mapping[tuple[str, str], str] | None = None,
                    mismatches: Mapping[tuple[str, str], bool] | None = None) -> str:
    """Members as rows (reference first, candidates marked), claims as columns; the last row is the
    claim over the reference members (k of n with its one-sided exact bounds)."""
    reports, tests, mismatches = reports or {}, tests or {}, mismatches or {}
    claims = list(report.claims)
    head = "".join(f"<th>{escape(claim_title(c))}</th>" for c in claims)
    rows = []
    for m in report.reference + report.candidates:
        tag = " <span style='color:#d62728;font-weight:bold'>candidate</span>" if m.role == "candidate" else ""
        r = reports.get(m.id)
        cells = "".join(
            _status_cell(m.id, c, r, tests.get((c, m.id)), mismatches.get((c, m.id), False)) if r is not None
            else _member_cell(m.verdicts[c].status, m.verdicts[c].key, m.verdicts[c].message, c, m.id)
            if c in m.verdicts else "<td></td>" for c in claims)
        rows.append(f'<tr><th class="nowrap"><a href="#hw-model-{escape(m.id, quote=True)}">{escape(m.id)}</a>{tag}</th>'
                    f"{cells}</tr>")
    pop = "".join(_pop_cell(pc.status, pc.key, pc.message, c, report.name) for c, pc in report.claims.items())
    rows.append(f"<tr class='aggregate'><th>over the {len(report.reference)} reference members (k/n, one-sided "
                f"{100 * (1 - SPEC.population_alpha):g}% exact bounds)</th>{pop}</tr>")
    return (f'<table class="hw" data-population="{escape(report.name, quote=True)}"><tr><th>member</th>{head}</tr>'
            + "".join(rows) + "</table>")


def _member_cell(status: Status, key: str, message: str, claim: str, member: str) -> str:
    """A member's verdict where the page has no report of it (the population judged from members alone)."""
    word = status.words
    bg, fg = STATUS_STYLE[word]
    return (f'<td class="cell" data-model="{escape(member, quote=True)}" data-claim="{escape(claim, quote=True)}" '
            f'data-status="{escape(word, quote=True)}" style="background:{bg}" title="{escape(message, quote=True)}">'
            f'<span class="st" style="color:{fg}">{escape(STATUS_LABEL[word])}</span>'
            f'<span class="key">{escape(key) or "&nbsp;"}</span></td>')


def population_spread_table(report: PopulationReport) -> str:
    """Quantities as columns, members as rows: each member's value, then the spread over the reference
    members and leave-one-out."""
    members = report.reference + report.candidates
    head = "".join(f"<th>{escape(quantity_words(q))}</th>" for q in report.spreads)
    rows = []
    for m in members:
        vals = "".join(f"<td class='nowrap'>{escape(_member_value(report, m, q))}</td>" for q in report.spreads)
        rows.append(f"<tr><th class='nowrap'>{escape(m.id)}{' (candidate)' if m.role == 'candidate' else ''}</th>{vals}</tr>")
    spread = "".join(f"<td>{escape(report.spreads[q].text())}</td>" for q in report.spreads)
    loo = "".join(f"<td>{escape(report.loo[q].text())}</td>" for q in report.spreads)
    return ("<h3>Each quantity per member (value on the revision grid: (last revision before, first at]; a milestone not "
            "reached by the final revision is a bound, ranked as an interval)</h3>"
            f"<table class='hw' data-quantities='{escape(report.name, quote=True)}'><tr><th>member</th>{head}</tr>"
            + "".join(rows) + f"<tr class='aggregate'><th>reference members</th>{spread}</tr>"
            f"<tr><th>leave-one-out</th>{loo}</tr></table>")


def _member_value(report: PopulationReport, m: Any, q: str) -> str:
    if not m.judged:
        return "not judged"
    if q in report.spreads and m.role != "candidate" and m.id in report.spreads[q].not_applicable:
        return "not judged (claim does not apply)"
    return m.quantities[q].text(q)


def population_candidates(report: PopulationReport) -> str:
    """Each candidate's place among the reference members, in words."""
    if not report.placements:
        return ""
    rows = []
    for cid, placements in report.placements.items():
        for q, p in placements.items():
            word = p.status.words
            label = p.flag.upper() if p.outlier else "within (consistent)" if p.inside else STATUS_LABEL[word]
            rows.append(f"<tr><td class='nowrap'>{escape(cid)}</td><td>{escape(q)}</td>"
                        f"<td style='color:{STATUS_STYLE[word][1]};font-weight:bold'>{escape(label)}"
                        f"<br><span class='key'>rule: {escape(p.rule)}</span></td>"
                        f"<td class='msg'>{escape(p.message)}</td></tr>")
    return ("<h3>Candidates against the reference members</h3><table class='hw' data-candidates='1'><tr><th>candidate"
            "</th><th>quantity</th><th>place</th><th>in words</th></tr>" + "".join(rows) + "</table>")


def population_section(report: PopulationReport, figures: Sequence[Figure],
                       reports: Mapping[str, ModelReport] | None = None,
                       tests: Mapping[tuple[str, str], str] | None = None,
                       mismatches: Mapping[tuple[str, str], bool] | None = None) -> str:
    """One population: the member x claim grid, each quantity per member, the candidates, the figures."""
    name = escape(report.name, quote=True)
    alpha, bar = SPEC.population_alpha, SPEC.population_min_rate
    parts = [f'<h2 id="hw-population-{name}">Population {escape(report.name)} '
             f'<span style="font-weight:normal;color:#666">({len(report.reference)} reference member(s), '
             f'{len(report.candidates)} candidate(s))</span></h2>',
             "<p>Each member judged alone, then each claim over the reference members by one-sided exact binomial tests "
             f"at alpha {alpha:g}: it holds when the data establish that it holds in more than {bar:g} of the "
             "population, fails only where the data exclude that (counting every undecided member as holding), and is "
             "consistent, not established otherwise; members that did not form are not judged and not counted. A "
             "candidate beyond every reference member is an outlier flag, with the chance that an exchangeable member "
             f"lands as far out; it fails only where that chance, times the quantities compared, is below "
             f"{SPEC.population_outlier_alpha:g}, and one event (a late circuit) is counted once.</p>",
             population_grid(report, reports, tests, mismatches), population_spread_table(report),
             population_candidates(report)]
    if figures:
        parts.append('<div class="figs">' + "".join(_img(f"population-{report.name}", f) for f in figures) + "</div>")
    return "\n".join(parts)
