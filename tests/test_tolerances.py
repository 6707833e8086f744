"""Every constant of SPEC's table (headwatch/spec.py) pinned from both sides of its boundary.

For each constant that decides a verdict, a pair of tests: one on data that JUST passes (at the bar,
or within 5% of it on the holding side) and one on data that JUST fails (within 5% on the failing
side). The numbers here are literals, never read from SPEC: moving any constant by 5% (an integer by
1) either way turns one test of its pair red. ``tools/mutate.py --spec`` does exactly that, one
constant and direction at a time, and prints which test catches it (docs/statistics.md has the
table). Constants that only shape what is reported (grids, Sink_1^eps, the bootstrap's settings)
are pinned by value or by a boundary of what they report.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from headwatch.claims import trajectory as T
from headwatch.claims.judge import judge_causal, judge_f1, judge_f2, judge_f3, judge_f4, judge_f5, judge_formation
from headwatch.claims.sensitivity import sensitivity_grid
from headwatch.claims.synthetic import A, B, C, D_HEAD, PR_HIGH, PR_LOW, Ablations, healthy, planted_record, with_attention
from headwatch.claims.verdict import Status
from headwatch.probes.sink import sink_score
from headwatch.probes.record import ProbeSettings, head_key
from headwatch.probes.selectivity import previous_token_circuit
from headwatch.spec import SPEC, Expectations, Formation
from headwatch.stats import clopper_pearson

TOKENS = (1e8, 1e9, 1e10, 1e11, 1e12)


def record(revision: str, tokens: float, *, n_layers: int = 8, n_heads: int = 4, values=None, pr=None):
    """A planted record whose selectivities are 1 except ``values[head][class]``; PR 2 unless given."""
    rec = planted_record(revision, tokens, n_layers=n_layers, n_heads=n_heads, pr=pr)
    for head, classes in (values or {}).items():
        rec.all_head_selectivity[head].update(classes)
    return rec


def heads(n: int, first_layer: int = 2, n_heads: int = 4) -> list[str]:
    return [head_key(first_layer + i // n_heads, i % n_heads) for i in range(n)]


def induction(hs, value=80.0):
    return {h: {"induction": value} for h in hs}


# ---- induction (50): a head at 50.0 is an induction head, at 49.0 it is not -------------------------


FORMS = Expectations(formation=Formation(min_induction_heads_final=3))


def _circuit_at(value: float):
    return [record("step0", 1e8), record("step1", 1e9, values=induction((A, B, C), value))]


def test_induction_threshold_just_passing():
    assert judge_formation(_circuit_at(50.0), FORMS).status is Status.HOLDS


def test_induction_threshold_just_failing():
    assert judge_formation(_circuit_at(49.0), FORMS).status is Status.FAILS


# ---- induction_min_heads (3): three heads make t_induction, two do not ------------------------------


def _milestone(first: int):
    recs = [record("step0", 1e8), record("step1", 1e9, values=induction(heads(first))),
            record("step2", 1e10, values=induction(heads(3)))]
    return T.t_induction(recs).revision


def test_induction_min_heads_just_passing():
    assert _milestone(3) == "step1"


def test_induction_min_heads_just_failing():
    assert _milestone(2) == "step2"


# ---- bos (30): F1 fails on a layer-0 head at 30.0, holds at 29.0 ------------------------------------


def _f1(value: float):
    # a BOS head in layer 5 makes F1 non-vacuous either way
    return judge_f1([record("step0", 1e8, values={"L0_H1": {"first-token": value}, "L5_H0": {"first-token": 80.0}})])


def test_bos_threshold_just_failing():
    assert _f1(30.0).status is Status.FAILS


def test_bos_threshold_just_passing():
    v = _f1(29.0)
    assert v.status is Status.HOLDS and v.margin == pytest.approx(1.0)


# ---- f1_layers (0, 1): a BOS head in layer 1 fails F1, one in layer 2 does not -----------------------


def test_f1_layers_include_layer_1():
    assert judge_f1(healthy(extra_bos={6: ("L1_H3",)})).status is Status.FAILS


def test_f1_layers_exclude_layer_2():
    assert judge_f1(healthy(extra_bos={6: ("L2_H0",)})).status is Status.HOLDS


def test_f1_layers_include_layer_0():
    assert judge_f1(healthy(extra_bos={6: ("L0_H0",)})).status is Status.FAILS


# ---- bos_level (0.5): t_bos50 at a BOS fraction of exactly 1/2, not at 31/64 ------------------------


def _t_bos50(k: int):
    """64 heads (16 layers x 4); k BOS heads at step1, 40 at step2."""
    def bos(n):
        return {h: {"first-token": 80.0} for h in heads(n, first_layer=2, n_heads=4)[:n]}
    recs = [record("step0", 1e8, n_layers=16), record("step1", 1e9, n_layers=16, values=bos(k)),
            record("step2", 1e10, n_layers=16, values=bos(40))]
    return T.t_bos50(recs).revision


def test_bos_level_just_passing():
    assert _t_bos50(32) == "step1"


def test_bos_level_just_failing():
    assert _t_bos50(31) == "step2"


# ---- step_share (0.5): a rise of exactly half the total is a step, of 0.49 a ramp -------------------


def _f2(fractions_pct):
    """100 heads (25 layers x 4); the BOS fraction series in percent; declared a step."""
    def bos(n):
        return {h: {"first-token": 80.0} for h in heads(n, first_layer=0)[:n]}
    recs = [record(f"step{i}", t, n_layers=25, values=bos(k)) for i, (t, k) in enumerate(zip(TOKENS, fractions_pct))]
    return judge_f2(recs, Expectations(bos_shape="step"))


def test_step_share_just_passing():
    assert _f2((0, 25, 50, 75, 100)).status is Status.FAILS  # largest rise 25% of the total: a ramp
    v = _f2((0, 50, 60, 80, 100))
    assert v.status is Status.HOLDS and v.details.share == 0.5


def test_step_share_just_failing():
    v = _f2((0, 49, 60, 80, 100))
    assert v.status is Status.FAILS and v.details.share == 0.49


# ---- recall_level (2/3): 2 of 3 final heads found is enough, 13 of 20 is not ------------------------


def _f4(found: int, final: int):
    circuit = heads(final, first_layer=0)
    recs = [record("step0", 1e8, n_layers=8), record("step1", 1e9, n_layers=8, values=induction(circuit[:found])),
            record("step2", 1e12, n_layers=8, values=induction(circuit))]
    return judge_f4(recs)


def test_recall_level_just_passing():
    v = _f4(2, 3)
    assert v.details.computed.revision == "step1" and v.status is Status.HOLDS


def test_recall_level_just_failing():
    v = _f4(13, 20)
    assert v.details.computed.revision == "step2" and v.status is not Status.HOLDS


# ---- label (30): F4's intermediate reading counts a head at 30.0, not at 29.0 ------------------------


def _intermediate(value: float):
    recs = [record("step0", 1e8), record("step1", 1e9, values={**induction((A,)), B: {"induction": value}}),
            record("step2", 1e12, values=induction((A, B, C)))]
    return judge_f4(recs).details.intermediate.revision


def test_label_threshold_just_passing():
    assert _intermediate(30.0) == "step1"


def test_label_threshold_just_failing():
    assert _intermediate(29.0) == "step2"


# ---- f4_max_fraction (0.025): the recall point's grid bracket (before, at] decides: at exactly 2.5% ----
# ---- of training it is established, at 2.6% it is not; a bracket starting at 2.5% excludes the claim --


def _f4_at(before: float, at: float):
    recs = [record("step0", 1e8), record("step1", before), record("step2", at, values=induction((A, B, C))),
            record("step3", 1e12, values=induction((A, B, C)))]
    return judge_f4(recs)


def test_f4_max_fraction_just_passing():
    assert _f4_at(1e9, 2.5e10).status is Status.HOLDS


def test_f4_max_fraction_just_failing():
    assert _f4_at(1e9, 2.6e10).status is Status.CONSISTENT_NOT_ESTABLISHED  # (0.1%, 2.6%]: straddles 2.5%


def test_f4_max_fraction_just_excluded():
    v = _f4_at(2.5e10, 3e10)  # recall reached after 2.5%: the data exclude the claim
    assert v.status is Status.FAILS and v.details.computed.fraction_interval == pytest.approx((0.025, 0.03))


def test_f4_max_fraction_just_not_excluded():
    assert _f4_at(2.4e10, 3e10).status is Status.CONSISTENT_NOT_ESTABLISHED


# ---- paper_tokens_rel_tol (0.02): the paper's tokens name a revision 1.99% away, not 2.05% -----------


def test_paper_tokens_rel_tol_just_passing():
    v = judge_f4([record("s0", 1e8), record("s1", 1e10, values=induction((A, B, C))),
                  record("s2", 1e12, values=induction((A, B, C)))], Expectations(paper_f4_tokens=1e10 * 1.0199))
    assert v.details.paper_table.revision == "s1"


def test_paper_tokens_rel_tol_just_failing():
    v = judge_f4([record("s0", 1e8), record("s1", 1e10, values=induction((A, B, C))),
                  record("s2", 1e12, values=induction((A, B, C)))], Expectations(paper_f4_tokens=1e10 * 1.0205))
    assert v.details.paper_table.revision is None


# ---- f3_min_ratio (10): established at a grid lower bound of exactly 10, not at 9.6 ------------------


def _f3(bos_before: float):
    tokens = (1e8, 1e9, bos_before, 2e10, 1e12)
    return judge_f3(healthy(tokens=tokens, bos_fractions=(0.0, 0.0625, 0.25, 0.5, 0.75),
                            induction_sets=((), (A, B, C), (A, B, C), (A, B, C), (A, B, C)),
                            pr={}, ablations=None), Expectations(dclm=True))


def test_f3_min_ratio_just_passing():
    v = _f3(1e10)
    assert v.status is Status.HOLDS and v.details.ratio_interval[0] == pytest.approx(10.0)


def test_f3_min_ratio_just_failing():
    v = _f3(9.6e9)
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.details.ratio_interval[0] == pytest.approx(9.6)


def _f3_upper(bos_at: float):
    """Induction at 2e9 (after 1e9), BOS 50% at ``bos_at`` (after 5e9): the ratio is < bos_at / 1e9."""
    tokens = (1e8, 1e9, 2e9, 5e9, bos_at, 1e12)
    return judge_f3(healthy(tokens=tokens, bos_fractions=(0.0, 0.0625, 0.125, 0.25, 0.5, 0.75),
                            induction_sets=((), (), (A, B, C), (A, B, C), (A, B, C), (A, B, C)),
                            pr={}, ablations=None), Expectations(dclm=True))


def test_f3_min_ratio_just_excluded():
    v = _f3_upper(1e10)  # the ratio is < 1e10 / 1e9 = 10: the data exclude the claim
    assert v.status is Status.FAILS and v.details.ratio_interval == pytest.approx((2.5, 10.0))


def test_f3_min_ratio_just_not_excluded():
    v = _f3_upper(1.04e10)  # < 10.4: not excluded
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.details.ratio_interval[1] == pytest.approx(10.4)


# ---- pr_elevation_fraction (0.1): with d_head 64 a PR of 7.31 at the crossing is elevated, 7.0 not --


def _f5(pr_at_crossing: float):
    assert D_HEAD == 64  # the bar is 1 + 0.1 x 63 = 7.3
    return judge_f5(healthy(pr={A: (pr_at_crossing,) * 7, B: (PR_LOW,) + (PR_HIGH,) * 6,
                                C: (PR_LOW,) * 3 + (PR_HIGH,) * 4}))


def test_pr_elevation_fraction_just_passing():
    assert _f5(7.31).status is Status.HOLDS


def test_pr_elevation_fraction_just_failing():
    v = _f5(7.0)
    assert v.status is Status.FAILS and v.details.failing == (A,)


# ---- f5_null_alpha (0.05): informative when random heads would all pass with p = 0.0475, not at 0.05 --


def _null(elevated: int, n_layers: int = 4):
    """The one final induction head A (L3_H0) crosses at step1, where ``elevated`` heads of its
    layer are elevated (A among them) and none elsewhere. With 4 layers of 400 heads the
    layer-matched null, elevated / 400, is the larger (the all-heads one is elevated / 1600) and
    decides; with 400 layers of 4 heads every head of A's layer is elevated (layer null 1)."""
    n_heads = 1600 // n_layers
    everyone = heads(1600, first_layer=0, n_heads=n_heads)
    layer3 = [h for h in everyone if h.startswith("L3_")]
    assert layer3[0] == A
    up = set(layer3[:elevated]) if n_layers == 4 else set(everyone[:elevated]) | set(layer3)
    pr0 = {h: PR_LOW for h in everyone}
    pr1 = {h: (PR_HIGH if h in up else PR_LOW) for h in everyone}
    recs = [record("step0", 1e8, n_layers=n_layers, n_heads=n_heads, pr=pr0),
            record("step1", 1e9, n_layers=n_layers, n_heads=n_heads, pr=pr1, values=induction((A,)))]
    return judge_f5(recs)


def test_f5_null_alpha_just_passing():
    v = _null(19)
    assert v.details.null_p_layer == v.details.null_p_decisive == 0.0475 and v.details.null_p < 0.0475
    assert v.status is Status.HOLDS


def test_f5_null_alpha_just_failing():
    v = _null(20)
    assert v.details.null_p_layer == v.details.null_p_decisive == 0.05 and v.status is Status.CONSISTENT_NOT_ESTABLISHED


def test_f5_the_layer_matched_null_decides_where_it_is_larger():
    """Issue 43: an all-heads null below alpha does not establish F5 where the layer-matched null
    is larger: 400 layers of 4 heads, 76 heads elevated (all-heads null 76 / 1600 = 0.0475) and
    all 4 of A's layer (layer null 1): the larger decides, not informative."""
    v = _null(76, n_layers=400)
    assert v.details.null_p == 0.0475 and v.details.null_p_layer == 1.0 and v.details.null_p_decisive == 1.0
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and "the larger, 1, decides" in v.message


# ---- f5_rise_fraction (0.5): the rise rule counts PR 1.5x its first value, not 1.49x ----------------


def _rise(factor: float):
    return judge_f5(healthy(pr={A: (PR_HIGH,) * 7, B: (PR_HIGH,) + (PR_HIGH * factor,) * 6,
                                C: (PR_HIGH,) * 7})).details


def test_f5_rise_fraction_just_passing():
    d = _rise(1.5)
    assert {h.head: h.rises for h in d.heads}[B] is True


def test_f5_rise_fraction_just_failing():
    d = _rise(1.49)
    assert {h.head: h.rises for h in d.heads}[B] is False


# ---- ablation_max_share (0.25): the bar has its own exact test (issues 33, 43): circuit 365 of 2000 against
# baseline 1600 (22.8% of it) establishes "below 25%" (exact unconditional p 0.0473); 366 (22.9%) does not (p 0.0521); 26% fails


def test_ablation_max_share_just_passing():
    v = judge_causal(healthy(ablations=Ablations(baseline=0.8, circuit=0.1825, random=0.7)))
    assert v.status is Status.HOLDS and v.details.p_vs_bar == pytest.approx(0.0473, abs=1e-4)


def test_ablation_max_share_just_not_established():
    v = judge_causal(healthy(ablations=Ablations(baseline=0.8, circuit=0.183, random=0.7)))
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.details.p_vs_bar == pytest.approx(0.0521, abs=1e-4)
    assert v.details.cuts_enough  # the point estimate, 22.9%, is under the bar: the data do not establish it


def test_ablation_max_share_just_failing():
    v = judge_causal(healthy(ablations=Ablations(baseline=0.2, circuit=0.052, random=0.18)))
    assert v.status is Status.FAILS and v.details.share_of_baseline == 0.26


# ---- causal_alpha (0.05): circuit 17 vs random 29 of 2000 beats random (Boschloo p 0.0484), 14 vs 25 not (p 0.0511)


def test_causal_alpha_just_passing():
    """Circuit 17 vs random 29 of 2000: Boschloo's p 0.0484 (Fisher's, the test before issue 43: 0.0509)."""
    v = judge_causal(healthy(ablations=Ablations(baseline=0.1, circuit=0.0085, random=0.0145)))
    assert v.status is Status.HOLDS and v.details.p_vs_random == pytest.approx(0.0484, abs=1e-4)


def test_causal_alpha_just_failing():
    v = judge_causal(healthy(ablations=Ablations(baseline=0.1, circuit=0.007, random=0.0125)))
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.details.p_vs_random == pytest.approx(0.0511, abs=1e-4)


# ---- population_min_rate (0.5): 10 of 13 members establish "most" (P(>= 10 of 13 | 0.5) = 0.0461), 6 of 7 not (0.0625)


def _population(holding: int, failing: int = 0, claim: str = "F1"):
    """``holding`` + ``failing`` reference members of one planted population, judged over ``claim``
    (two members judged once; the rest share their verdicts: the rule reads only the statuses)."""
    from headwatch.claims.population import Member, judge_claim_over
    from headwatch.claims.synthetic_population import F1_DEFECT, planted_population

    good, bad = planted_population((1, 1), defects={1: F1_DEFECT})
    members = [Member(f"s{i}", "reference", i, (good if i < holding else bad).verdicts, {})
               for i in range(holding + failing)]
    return judge_claim_over(claim, members)


def test_population_min_rate_just_passing():
    v = _population(10, 3)
    assert v.status is Status.HOLDS and v.p_holds == pytest.approx(0.0461, abs=1e-4)


def test_population_min_rate_just_failing():
    v = _population(6, 1)
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.p_holds == pytest.approx(0.0625, abs=1e-4)


# ---- population_alpha (0.05): 13 of 18 members hold (p 0.0481): established; 29 of 46 (p 0.0519): not


def test_population_alpha_just_passing():
    v = _population(13, 5)
    assert v.status is Status.HOLDS and v.p_holds == pytest.approx(0.0481, abs=1e-4)


def test_population_alpha_just_failing():
    v = _population(29, 17)
    assert v.status is Status.CONSISTENT_NOT_ESTABLISHED and v.p_holds == pytest.approx(0.0519, abs=1e-4)


# ---- population_outlier_alpha (0.05): a candidate beyond 39 siblings on its one quantity (p 2/40 = 0.05) is
# a flag; beyond 40 (p 2/41 = 0.0488) it fails


def _beyond(siblings: int):
    from headwatch.claims.population import GridValue, Member, audit

    none = GridValue(None, undefined="not planted")

    def member(i: int, tokens: float) -> Member:
        return Member(f"s{i}", "reference", i, {}, {"t_induction": GridValue(tokens), "t_bos50": none,
                                                   "F3_ratio": none, "F4_recall_point": none})

    reference = [member(i, 1e9 + 1e6 * i) for i in range(siblings)]
    return audit(member(siblings, 1e11), reference)["t_induction"]


def test_population_outlier_alpha_just_passing():
    p = _beyond(39)
    assert p.outlier and p.family == 1 and p.p_adjusted == pytest.approx(0.05) and p.status is not Status.FAILS


def test_population_outlier_alpha_just_failing():
    p = _beyond(40)
    assert p.outlier and p.p_adjusted == pytest.approx(0.0488, abs=1e-4) and p.status is Status.FAILS


# ---- attention_floor (1.0): at T = 256 a head giving the induction target exactly 1/256 counts, 0.96/256
# ---- does not (formation needs the three heads)


def _circuit_with_induction_attention(attention: float):
    """Three heads at 80x whose attention to the induction target is ``attention``, at T = 256."""
    recs = with_attention(_circuit_at(80.0), seq_len=256)
    for h in (A, B, C):
        recs[1].attention[h]["induction"] = attention
    return recs


def test_attention_floor_just_passing():
    verdict = judge_formation(_circuit_with_induction_attention(0.00390625), FORMS)  # 1/256: at the floor
    assert verdict.status is Status.HOLDS and verdict.details.negligible_heads == ()


def test_attention_floor_just_failing():
    verdict = judge_formation(_circuit_with_induction_attention(0.00375), FORMS)  # 0.96/256
    assert verdict.status is Status.FAILS
    assert {f.head for f in verdict.details.negligible_heads} == {A, B, C}


# ---- previous_token (100): not a verdict's constant (head labels, figures); pinned all the same ------


def test_previous_token_threshold_just_passing():
    assert previous_token_circuit({"L1_H0": {**{c: 1.0 for c in ("induction", "duplicate-token", "first-token",
                                                                   "self", "local")}, "previous-token": 100.0}})


def test_previous_token_threshold_just_failing():
    assert not previous_token_circuit({"L1_H0": {**{c: 1.0 for c in ("induction", "duplicate-token", "first-token",
                                                                       "self", "local")}, "previous-token": 99.0}})


# ---- sink_eps (0.3): Sink_1^eps counts a head above 0.3 (0.31), not one at 0.3 ------------------------


def test_sink_eps_just_passing():
    assert sink_score(torch.tensor([[[0.31, 0.0]]], dtype=torch.float64)).share == 0.5


def test_sink_eps_just_failing():
    assert sink_score(torch.tensor([[[0.3, 0.0]]], dtype=torch.float64)).share == 0.0


# ---- interval_level (0.95), n_bootstrap (1000), bootstrap_seed (0), sink_examples (64): by value ------


def test_interval_level_by_value():
    """Clopper-Pearson at 95%: 0 of 2000 has upper bound 1 - 0.025^(1/2000)."""
    lo, hi = clopper_pearson(0, 2000)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 2000), rel=1e-9)


def test_bootstrap_and_sink_settings_by_value():
    s = ProbeSettings()
    assert (s.interval_level, s.n_bootstrap, s.bootstrap_seed, s.sink_examples) == (0.95, 1000, 0, 64)


# ---- reported grids: pinned by value --------------------------------------------------------------


def test_sensitivity_grid_settings_by_value():
    grid = sensitivity_grid(healthy(), Expectations(bos_shape="ramp", dclm=True))
    assert [r.label for r in grid.rows] == [
        "SPEC", "BOS threshold 20", "BOS threshold 50", "induction threshold 30", "induction threshold 100",
        "step share 0.4", "step share 0.6", "recall level 1/2", "recall level 3/4"]


def test_reported_sensitivities_by_value():
    assert (SPEC.f3_sensitivity_heads, SPEC.f5_sensitivity_fractions) == ((1, 3, 5), (0.05, 0.1, 0.2))
    assert list(judge_f3(healthy(), Expectations(dclm=True)).details.sensitivity_milestone_heads) == ["1", "3", "5"]
    assert list(judge_f5(healthy()).details.sensitivity) == ["0.05", "0.1", "0.2"]


def test_every_spec_constant_has_a_pin_here():
    """A constant added to SPEC's table without tests on both sides of it fails here."""
    import pathlib

    text = pathlib.Path(__file__).read_text()
    pinned = {f.name for f in dataclasses.fields(SPEC) if f.name in text}
    grids = {"grid_bos", "grid_induction", "grid_step_share", "grid_recall_level", "f3_sensitivity_heads",
             "f5_sensitivity_fractions", "label", "induction"}
    assert {f.name for f in dataclasses.fields(SPEC)} - pinned - grids == set()
    # names that appear as section titles above: ``# ---- <name> (...)``
    titled = {line.split()[2] for line in text.splitlines() if line.startswith("# ---- ") and "(" in line}
    missing = {f.name for f in dataclasses.fields(SPEC)} - titled - grids - {"interval_level", "n_bootstrap",
                                                                             "bootstrap_seed", "sink_examples"}
    assert not missing, f"SPEC constants without a boundary pair here: {sorted(missing)}"


def test_grid_values_by_value():
    assert (SPEC.grid_bos, SPEC.grid_induction, SPEC.grid_step_share) == ((20.0, 30.0, 50.0), (30.0, 50.0, 100.0),
                                                                          (0.4, 0.5, 0.6))
    assert np.allclose(SPEC.grid_recall_level, (1 / 2, 2 / 3, 3 / 4))
