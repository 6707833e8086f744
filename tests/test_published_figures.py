"""The paper's figures, recomputed from the author's own files (fixtures/published, converted from
../shared/reference), must come out as SPEC states them.

This is the only place where a paper figure appears in an assert, and only as the expected result
of computing it from those files with the suite's own functions.
"""
from __future__ import annotations

import pytest

from headwatch.claims import trajectory as T
from headwatch.claims.judge import judge_model
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.reference import load_published, published_models

PYTHIA, OLMO = "EleutherAI/pythia-1b", "allenai/OLMo-1B-0724-hf"


@pytest.fixture(scope="module")
def pythia():
    return load_published(PYTHIA)


@pytest.fixture(scope="module")
def olmo():
    return load_published(OLMO)


def pct(x: float) -> float:
    return round(100 * x, 1)


def test_published_copy_holds_both_models_with_ten_revisions():
    assert published_models() == [PYTHIA, OLMO]
    for m in (PYTHIA, OLMO):
        recs = load_published(m)
        assert len(recs) == 10 and all(r.pr is not None for r in recs)
    assert load_published("pythia-1b")[0].model == PYTHIA  # by short name too


def test_bos_fraction_figures(pythia, olmo):
    olmo_bos = dict(zip((p.revision for p in T.tokens_per_revision(olmo)), T.bos_fraction_series(olmo)))
    assert pct(olmo_bos["step56000-tokens117B"]) == 7.4
    assert pct(olmo_bos["step126000-tokens264B"]) == 70.3
    assert pct(T.bos_fraction_series(olmo)[-1]) == 80.9
    assert pct(T.bos_fraction_series(pythia)[-1]) == 57.8


def test_bos_shapes(pythia, olmo):
    o = T.bos_shape(olmo)
    assert o.shape == "step" and pct(o.largest_rise) == 62.9 and pct(o.total_rise) == 80.9
    assert T.tokens_per_revision(olmo)[o.rise_at].revision == "step126000-tokens264B"
    p = T.bos_shape(pythia)
    assert p.shape == "ramp" and pct(p.largest_rise) <= 18.8 and pct(p.total_rise) == 57.8


def test_induction_before_bos_separation(olmo):
    sep = T.induction_bos_separation(olmo)
    assert sep.induction.tokens == 23e9 and sep.bos.tokens == 264e9
    assert round(sep.ratio, 1) == 11.5


def test_early_convergence(pythia, olmo):
    p = T.first_recall_at_least(pythia)
    assert p.point.point.revision == "step3000" and round(p.point.point.tokens / 1e9, 1) == 6.3
    assert round(100 * p.fraction_of_total, 1) == 2.1
    o = T.first_recall_at_least(olmo)
    assert o.point.point.tokens == 23e9 and round(100 * o.fraction_of_total, 2) == 0.75
    # The paper's table says OLMo 10B: there only L2_H11 passes 50x (recall 1/3).
    at_10b = next(s for s in o.series if s.point.tokens == 10e9)
    assert at_10b.found == ("L2_H11",)
    # The table's 33% rows (Pythia step256, OLMo 2B) have no head above 50x at all.
    assert next(s for s in p.series if s.point.revision == "step256").found == ()
    assert next(s for s in o.series if s.point.tokens == 2e9).found == ()


def test_pr_precedes_threshold_for_every_final_induction_head(pythia, olmo):
    for recs in (pythia, olmo):
        res = T.pr_lead(recs, 0.1)
        assert res.holds and len(res.heads) == 3
    lead = {l.head: l for l in T.pr_lead(pythia).heads}["L4_H4"]
    assert round(lead.lead) == 12  # "~12x earlier" for Pythia's main induction head


def test_ablation_figures(pythia, olmo):
    """Baseline and circuit top-1 as docs/SPEC.md §4 gives them. The files' matched-random (0.55%, 1.35%) is
    matched to the author's top-45 set; SPEC's 4.40% / 2.20% are not in these files."""
    p = T.ablation_verdict(T.last_with_ablations(pythia))
    assert (round(100 * p.baseline_top1, 2), round(100 * p.circuit_top1, 2)) == (4.05, 0.25)
    o = T.ablation_verdict(T.last_with_ablations(olmo))
    assert (round(100 * o.baseline_top1, 2), round(100 * o.circuit_top1, 2)) == (1.00, 0.05)
    assert (round(100 * p.random_top1, 2), round(100 * o.random_top1, 2)) == (0.55, 1.35)


#: The published panel's verdicts in the shared vocabulary (docs/statistics.md). Nothing fails; four
#: claims pass only at the point estimate: OLMo's F3 (11.5x, but the revision grid allows (5.09, 26.4)),
#: Pythia's causal check (circuit 5 vs matched-random 11 of 2000: Boschloo's p = 0.100) and both
#: models' F5 (the layer-matched null, which decides: random heads from the final heads' layers would
#: all pass with p = 0.143 and 0.293). OLMo's causal check holds since issue 43: circuit 1 vs baseline
#: 20 of 2000 establishes the 25% bar by the exact unconditional test (p = 0.046; the conditional
#: test gave 0.058).
PUBLISHED_VERDICTS = {
    "pythia-1b": {"F1": "holds", "F2": "holds", "F3": "not_applicable", "F4": "holds",
                  "F5": "consistent_not_established", "causal": "consistent_not_established"},
    "olmo-1b": {"F1": "holds", "F2": "holds", "F3": "consistent_not_established", "F4": "holds",
                "F5": "consistent_not_established", "causal": "holds"},
}


def test_the_published_verdicts_in_the_vocabulary():
    panel = load_panel("published")
    for m in panel.models:
        verdicts = judge_model(load_published(m.repo), m.expect, m.total_tokens)
        assert {c: v.status.value for c, v in verdicts.items()} == PUBLISHED_VERDICTS[m.name], m.name
        assert verdicts["causal"].details.circuit_matches_screen, verdicts["causal"]
        assert verdicts["causal"].details.counts_reconstructed  # rates x N = 2000: the message says so
        assert "paper reports (not in these records, not used)" in verdicts["causal"].message  # panel's paper_top1
    entry = panel.model("olmo-1b")
    olmo = judge_model(load_published(entry.repo), entry.expect)
    assert olmo["F3"].figure.interval == pytest.approx((117 / 23, 264 / 10), abs=1e-3)
    # F1's margin shows: OLMo step2000 L1_H1 at 28.1x against the 30x bar, a published mean
    assert olmo["F1"].figure.value == pytest.approx(28.1, abs=0.05) and olmo["F1"].margin == pytest.approx(1.9, abs=0.05)
    assert olmo["F1"].figure.method == "no interval: published means" and olmo["F1"].details.peak_head == "L1_H1"
    # the OLMo ablation file was run on `main`; the record stands it on the last screened revision
    assert olmo["causal"].details.measured_on == "main" and "(ablations measured on main)" in olmo["causal"].message


def test_f5_null_probability_from_the_files(pythia, olmo):
    """F5's null, computed from the files: the final heads cross at revisions where 52, 52, 56 of
    Pythia's 128 heads (93, 108, 147 of OLMo's 256) are already elevated, so 3 distinct random heads
    would all pass with p = 52 x 51 x 54 / (128 x 127 x 126) and 93 x 107 x 145 / (256 x 255 x 254).
    Drawn with replacement (the product of the shares) it is 0.072 and 0.088."""
    from headwatch.claims.judge import judge_f5

    p, o = judge_f5(pythia).details, judge_f5(olmo).details
    assert p.null_p == pytest.approx(52 * 51 * 54 / (128 * 127 * 126), rel=1e-3) and round(p.null_p, 3) == 0.070
    assert o.null_p == pytest.approx(93 * 107 * 145 / (256 * 255 * 254), rel=1e-3) and round(o.null_p, 3) == 0.087
    assert [h.level_null_share for h in p.heads] == pytest.approx([52 / 128, 56 / 128, 52 / 128], abs=1e-4)
    # strictly before the crossings 27, 27 and 52 of 128 are elevated
    assert p.null_p_before == pytest.approx(27 * 26 * 50 / (128 * 127 * 126), rel=1e-3)
    # half the final heads are elevated at the very revision they cross, not before it
    assert (p.before, p.at) == (("L4_H4",), ("L7_H0", "L7_H1")) and (o.before, o.at) == (("L4_H12", "L12_H8"), ("L2_H11",))


def test_f4_reports_the_paper_table_beside_the_computed_number(pythia, olmo):
    """docs/SPEC.md §6: the table says OLMo 10B (0.3%) and Pythia 6.3B (2.1%); computed from the files with
    the stated definition it is OLMo 23B (0.75%) and Pythia 6.3B. The judge reports both."""
    from headwatch.claims.judge import judge_f4
    from headwatch.spec import Expectations

    o = judge_f4(olmo, Expectations(paper_f4_tokens=10e9)).details
    assert o.computed.tokens == 23e9 and o.paper_table.revision == "step5000-tokens10B"
    assert round(o.paper_table.recall_there, 3) == 0.333 and o.paper_table.reproduced is False
    assert round(100 * o.paper_table.fraction_of_total, 1) == 0.3
    # The paper's number is the other reading: heads at intermediate revisions counted at the 30x
    # label threshold, the final circuit at 50x (at 10B L2_H11 and L4_H12 pass 30x, only L2_H11 50x).
    assert o.intermediate.revision == "step5000-tokens10B" and o.intermediate.found == ("L2_H11", "L4_H12")
    assert o.paper_table.reproduced_by == ("intermediate 30x",) and o.reproduces == "the intermediate 30x reading"
    assert o.computed.fraction_interval == pytest.approx((10 / 3048, 23 / 3048), abs=1e-6)
    p = judge_f4(pythia, Expectations(paper_f4_tokens=6.3e9))
    assert p.details.paper_table.revision == "step3000" and p.details.paper_table.reproduced is True
    assert p.details.paper_table.reproduced_by == ("uniform 50x", "intermediate 30x")
    assert judge_f4(olmo, Expectations(paper_f4_tokens=10e9)).holds and p.holds  # the claim (within 2.5%) survives either way


def test_verdict_details_keep_four_digits(pythia, olmo):
    """Ratios and shares in verdict details are rounded to 4 decimals, p-values to 4 significant
    digits (a p of 1e-7 must not print as 0): computed from the files."""
    from headwatch.claims.judge import judge_causal, judge_f3
    from headwatch.spec import Expectations

    f3 = judge_f3(olmo, Expectations(dclm=True))
    assert (f3.details.ratio, f3.details.ratio_interval, f3.margin) == (11.4783, (5.087, 26.4), 1.4783)
    p = judge_causal(pythia).details
    assert (p.p_vs_random, p.p_vs_bar, p.share_of_baseline) == (0.1002, 0.0001149, 0.0617)
    o = judge_causal(olmo).details
    assert (o.p_vs_random, o.p_vs_bar) == (8.611e-08, 0.04595)


def test_olmo_causal_bar_is_established_by_1_of_2000_against_20(olmo):
    """The bar "circuit <= 25% of baseline" on the published OLMo 1B counts (circuit 1 of 2000,
    baseline 20 of 2000). The conditional test (issue 33) gave P(Bin(21, 0.2) <= 1) = 0.8^21 + 21 x
    0.2 x 0.8^20 = 0.0576: valid but conservative (its size is at most about 0.039 at N = 2000). The
    exact unconditional test (issue 43: the outcomes ordered by that conditional p, the chance of
    one at least as extreme maximised over the baseline rate) gives 0.0460 < 0.05: established."""
    from headwatch.claims.judge import judge_causal
    from headwatch.stats import ratio_below

    verdict = judge_causal(olmo)
    assert ratio_below(1, 2000, 20, 2000, 0.25) == pytest.approx(0.8 ** 21 + 21 * 0.2 * 0.8 ** 20, rel=1e-12)
    assert verdict.details.p_vs_bar == pytest.approx(0.04595, abs=1e-5)
    assert verdict.status.value == "holds" and verdict.details.share_of_baseline == 0.05
    assert "the bar (25% of baseline) p = 0.046" in verdict.message
