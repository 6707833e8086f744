"""Populations (issue 24): panel entries over seeds and sizes, --seeds, and the population claim tests.

The panel side (expansion, roles, the errors a bad template gets), the seed filter, the exact rule's
boundaries, and the claim module itself run against planted populations (as
tests/test_claim_tests_on_planted.py does for the per-model claims): a population where a claim fails
in most members fails its test; a candidate far outside its siblings fails its test; a member that
did not form is "not judged".
"""
from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

import headwatch.claims.judge  # noqa: F401  (scipy once per process; see test_claim_tests_on_planted.py)
from headwatch.claims.population import (
    GridValue, Member, audit, judge_claim_over, leave_one_out, place, population_report, population_table, spread,
)
from headwatch.claims.synthetic import HEALTHY_EXPECT
from headwatch.claims.synthetic_population import (
    CAUSAL_UNDECIDED, F1_DEFECT, MANY_SIBLING_ONSETS, SIBLING_ONSETS, member_records, planted_population,
)
from headwatch.claims.verdict import Status, Verdict
from headwatch.fixtures.panels import (
    PanelError, default_panels, load_panel, parse_panel, populations, select, select_seeds,
)
from headwatch.validation import InputError, seed_list

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent
CLAIMS_DIR = ROOT / "claims"


def parse(text: str):
    return parse_panel(textwrap.dedent(text), name="t", path=Path("/x/t.toml"))


REVS = 'revisions = ["step0", "step1000", "step143000"]\ntokens = { per_step = 2097152 }\n'
SUITE = """
[[models]]
name = "pythia-{size}"
repo = "EleutherAI/pythia-{size}-seed{seed}"
sizes = ["14m", "160m"]
seeds = [1, 2, 3, 1234]
seed_repos = { 1234 = "EleutherAI/pythia-{size}" }
config = "pythia-{size}"
candidates = [1234]
""" + REVS + """
[[models]]
name = "pythia-160m-data-seed{seed}"
population = "pythia-160m"
repo = "EleutherAI/pythia-160m-data-seed{seed}"
seeds = [1, 2]
role = "candidate"
""" + REVS


# ---- expansion --------------------------------------------------------------------------------------


def test_an_entry_expands_over_sizes_and_seeds():
    panel = parse(SUITE)
    names = [m.name for m in panel.models]
    assert names == ["pythia-14m-seed1", "pythia-14m-seed2", "pythia-14m-seed3", "pythia-14m-seed1234",
                     "pythia-160m-seed1", "pythia-160m-seed2", "pythia-160m-seed3", "pythia-160m-seed1234",
                     "pythia-160m-data-seed1", "pythia-160m-data-seed2"]
    by = {m.name: m for m in panel.models}
    assert by["pythia-160m-seed2"].repo == "EleutherAI/pythia-160m-seed2"
    assert by["pythia-160m-seed1234"].repo == "EleutherAI/pythia-160m"  # the original names its own repo
    assert by["pythia-14m-seed3"].config == "pythia-14m"
    assert by["pythia-160m-seed1234"].member.role == "candidate" and by["pythia-160m-seed1"].member.role == "reference"
    assert by["pythia-160m-data-seed2"].member.population == "pythia-160m"
    assert all(m.revisions == ("step0", "step1000", "step143000") for m in panel.models)
    pops = populations(panel.models)
    assert [(p.name, len(p.reference), len(p.candidates)) for p in pops] == [("pythia-14m", 3, 1), ("pythia-160m", 3, 3)]


def test_sizes_alone_are_plain_models():
    (a, b) = parse('[[models]]\nname = "pythia-{size}-deduped"\nrepo = "EleutherAI/pythia-{size}-deduped"\n'
                   'sizes = ["70m", "1b"]\n' + REVS).models
    assert (a.name, b.repo, a.member, b.member) == ("pythia-70m-deduped", "EleutherAI/pythia-1b-deduped", None, None)


def test_models_and_seeds_select_members():
    panel = parse(SUITE)
    assert [m.name for m in select([panel], models=["pythia-14m"])] == [
        "pythia-14m-seed1", "pythia-14m-seed2", "pythia-14m-seed3", "pythia-14m-seed1234"]
    picked = select_seeds(select([panel], models=["pythia-160m"]), seed_list("2-3,1234", "--seeds"))
    assert [m.name for m in picked] == ["pythia-160m-seed2", "pythia-160m-seed3", "pythia-160m-seed1234",
                                       "pythia-160m-data-seed2"]
    with pytest.raises(PanelError, match=r"no selected population has seed\(s\) 12; seeds there: 1, 2, 3, 1234"):
        select_seeds(panel.models, [12])
    with pytest.raises(PanelError, match="no selected model belongs to a population"):
        select_seeds(parse('[[models]]\nname = "m"\nrepo = "o/m"\n' + REVS).models, [1])


def test_organism_seeds_and_a_candidate_of_another_recipe():
    panel = load_panel("organisms-seeds")
    (pop,) = populations(panel.models)
    assert [m.organism.seed for m in pop.reference] == [0, 1, 2, 3, 4]
    assert [m.repo for m in pop.reference][-1] == "headwatch-organisms/olmoe-seed4"
    (cand,) = pop.candidates
    assert cand.organism.family == "olmoe-halflr" and cand.member.seed == 0
    assert "organisms-seeds" not in default_panels()  # six organisms: never trained by a default run


def test_seed_lists():
    assert seed_list("0-4", "--seed") == [0, 1, 2, 3, 4] and seed_list("3, 1,3", "x") == [3, 1]
    for bad, said in (("4-0", "is empty"), ("x", "not a seed or a range"), ("", "got no seed")):
        with pytest.raises(InputError, match=said):
            seed_list(bad, "--seeds")


# ---- the errors a bad population entry gets ------------------------------------------------------------


BAD = {
    "unknown placeholder": ('name = "p"\nrepo = "o/p-seed{sed}"\nseeds = [1]\n', r"placeholder \{sed\}.*did you mean 'seed'"),
    "bad braces": ('name = "p"\nrepo = "o/p-seed{seed"\nseeds = [1]\n', "not a valid template"),
    "size without sizes": ('name = "p-{size}"\nrepo = "o/p-{size}-seed{seed}"\nseeds = [1]\n', r"uses \{size\} but no sizes"),
    "sizes, name without size": ('name = "p"\nrepo = "o/p-{size}-seed{seed}"\nseeds = [1]\nsizes = ["1m"]\n',
                                 r"must contain \{size\}"),
    "repo without seed": ('name = "p"\nrepo = "o/p"\nseeds = [1, 2]\n', r"has no \{seed\}: every seed would load"),
    "seed_repos stray": ('name = "p"\nrepo = "o/p{seed}"\nseeds = [1]\nseed_repos = { 2 = "o/q" }\n',
                         r"'2' is not one of the seeds \[1\]"),
    "candidate not a seed": ('name = "p"\nrepo = "o/p{seed}"\nseeds = [1]\ncandidates = [7]\n', "7 not among the seeds"),
    "role and candidates": ('name = "p"\nrepo = "o/p{seed}"\nseeds = [1, 2]\ncandidates = [2]\nrole = "candidate"\n',
                            "role or candidates, not both"),
    "role without population": ('name = "p"\nrepo = "o/p"\nrole = "candidate"\n', "joins a population"),
    "bad role": ('name = "p"\nrepo = "o/p{seed}"\nseeds = [1]\nrole = "candidat"\n', "did you mean 'candidate'"),
    "empty seeds": ('name = "p"\nrepo = "o/p{seed}"\nseeds = []\n', "the list is empty"),
    "seed twice": ('name = "p"\nrepo = "o/p{seed}"\nseeds = [1, 1]\n', "seeds listed twice: 1"),
    "negative seed": ('name = "p"\nrepo = "o/p{seed}"\nseeds = [-1]\n', "allowed: an integer from 0"),
    "all candidates": ('name = "p"\nrepo = "o/p{seed}"\nseeds = [1]\nrole = "candidate"\n', "every member is a candidate"),
    "typo in a key": ('name = "p"\nrepo = "o/p{seed}"\nseed = [1]\n', "did you mean 'seeds'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_population_entries_say_what_is_wrong(case):
    body, said = BAD[case]
    with pytest.raises(PanelError, match=said):
        parse("[[models]]\n" + body + REVS)


def test_a_candidate_must_share_the_reference_grid():
    text = SUITE.replace('seeds = [1, 2]\nrole = "candidate"\n' + REVS,
                         'seeds = [1, 2]\nrole = "candidate"\nrevisions = ["step0", "step143000"]\n'
                         'tokens = { per_step = 2097152 }\n')
    with pytest.raises(PanelError, match="list different revisions"):
        parse(text)


def test_organism_seed_given_twice():
    with pytest.raises(PanelError, match="seeds once"):
        parse('[[models]]\nname = "o"\nsource = "organism"\nseeds = [0, 1]\n[models.organism]\nfamily = "olmoe"\nseed = 2\n')


# ---- the rule at its bar (SPEC.population_min_rate) ----------------------------------------------------


def test_spread_shows_censored_members_as_bounds():
    members = planted_population((1, 2))
    members += planted_population((1,), defects={0: {"bos_fractions": (0.0,) * 7}}, prefix="late")
    s = spread("t_bos50", members)
    assert s.censored == ("late0",) and s.values["late0"].censored_above == 1e12
    assert s.text() == "median 100B, range [100B, > 1T] over 3 members (1 censored: known only to exceed a bound)"
    p = place("t_bos50", members[-1], members[:-1])
    assert p.outlier and p.side == "above" and "not reached by the final revision" in p.message


def test_a_milestone_no_member_reaches_is_bounds_only_and_not_compared():
    """Every member censored (BOS fraction never 50%): the range is two lower bounds, and
    leave-one-out has nothing to compare (not "0 of n inside")."""
    members = planted_population((1, 2, 1), defects={i: {"bos_fractions": (0.0,) * 7} for i in range(3)})
    s = spread("t_bos50", members)
    assert s.median.text(lambda x: f"{x:g}") == "> 1e+12" and "range [> 1T, > 1T]" in s.text()
    loo = leave_one_out("t_bos50", members)
    assert loo.inside == loo.outside == () and len(loo.not_compared) == 3 and "nothing to compare" in loo.text()


# ---- interval-censored ranking (issue 33): a censored F3 ratio is a bound that varies per member -------


def _member(mid: str, ratio: float | None = None, above: float | None = None, role: str = "reference") -> Member:
    """A member whose F3 ratio is ``ratio`` or known only to exceed ``above`` (other quantities undefined)."""
    none = GridValue(None, undefined="not planted")
    return Member(mid, role, None, {}, {"t_induction": none, "t_bos50": none, "F4_recall_point": none,
                                        "F3_ratio": GridValue(ratio, None, censored_above=above)})


def test_a_censored_ratio_is_ranked_as_an_interval_not_as_infinity():
    """A candidate whose ratio is known only to exceed 10x, against members at 33.3x and 100x: it
    may lie below, between or above them (rank 1-3 of 3), not "larger than every member"."""
    ref = [_member("a", 33.3), _member("b", 100.0)]
    p = place("F3_ratio", _member("c", above=10.0, role="candidate"), ref)
    assert not p.outlier and p.status is Status.CONSISTENT_NOT_ESTABLISHED and p.inside and p.rank == (1, 3) \
        and p.overlapping == 2, p.message
    assert "2 either way (censored)" in p.message
    # a bound beyond every reached value is surely larger: "> 150x" against 33.3x and 100x
    q = place("F3_ratio", _member("d", above=150.0, role="candidate"), ref)
    assert q.outlier and q.side == "above" and q.rank == (3, 3)


def test_a_censored_range_and_median_print_what_is_known_without_contradiction():
    """Members at 33.3x and 100x and one known only to exceed 10x: the smallest lies in (10x, 33.3x],
    the largest is at least 100x, the median between 33.3x and 100x (no "range [33.3x, > 10x]")."""
    s = spread("F3_ratio", [_member("a", 33.3), _member("b", 100.0), _member("c", above=10.0)])
    assert s.range_text() == "[(10x, 33.3x], >= 100x]" and s.median.text(str) == "[33.3, 100.0]"
    assert s.text().startswith("median in [33.3x, 100x], range [(10x, 33.3x], >= 100x] over 3 members (1 censored")
    # two members censored above one reached value: the median is the bound known, "> 5x"
    t = spread("F3_ratio", [_member("a", 3.0), _member("b", above=5.0), _member("c", above=6.0)])
    assert t.median.text(str) == "> 5.0" and t.range_text() == "[3x, > 6x]"
    # even counts: the median is the mean of the middle two where known
    u = spread("F3_ratio", [_member("a", 2.0), _member("b", 4.0), _member("c", 6.0), _member("d", above=1.0)])
    assert u.median.text(str) == "[3.0, 5.0]"  # the middle two lie in [2, 4] and [4, 6] at the extremes


def test_leave_one_out_ranks_censored_members_as_intervals():
    """Ratios 20x, 30x, 40x and one known only to exceed 5x: that one may lie anywhere, so no member
    is beyond all the others (ranked as +infinity, it and 20x would both be "outside"). With the
    bound at 50x instead, it is surely the largest, and 20x surely the smallest of the others."""
    loose = leave_one_out("F3_ratio", [_member("a", 20.0), _member("b", 30.0), _member("c", 40.0), _member("d", above=5.0)])
    assert loose.inside == ("a", "b", "c", "d") and loose.outside == (), loose.text()
    tight = leave_one_out("F3_ratio", [_member("a", 20.0), _member("b", 30.0), _member("c", 40.0), _member("d", above=50.0)])
    assert tight.outside == ("a", "d") and tight.inside == ("b", "c"), tight.text()


def test_f3_quantities_are_not_judged_where_f3_does_not_apply():
    """Off DCLM (dclm = false) F3 does not apply: the F3 ratio has no spread and is never placed, so a
    late circuit is not counted against a claim the population does not make."""
    off = dataclasses.replace(HEALTHY_EXPECT, dclm=False)
    members = planted_population(SIBLING_ONSETS + (5,), candidates=(5,), expect=off)
    report = population_report("planted", members)
    assert report.claims["F3"].status is Status.NOT_APPLICABLE
    assert report.spreads["F3_ratio"].text() == "not judged: F3 applies to no member"
    places = report.placements["seed5"]
    assert places["F3_ratio"].status is Status.NOT_APPLICABLE and "F3 does not apply to seed5" in places["F3_ratio"].message
    assert places["t_induction"].family == 3  # t_induction, t_bos50, the F4 recall point


# ---- the claim over seeds at its edges (issue 33): one-sided, "fails" only where the data exclude it ----


@pytest.mark.parametrize("members, failing, status", [
    (1, 1, Status.CONSISTENT_NOT_ESTABLISHED),   # one failing member of one: P(0 of 1 | 0.5) = 0.5
    (3, 2, Status.CONSISTENT_NOT_ESTABLISHED),   # 2 of 3 failing: P(<= 1 of 3) = 0.5
    (5, 4, Status.CONSISTENT_NOT_ESTABLISHED),   # 4 of 5: P(<= 1 of 5) = 0.1875
    (4, 4, Status.CONSISTENT_NOT_ESTABLISHED),   # 4 of 4: P(0 of 4) = 0.0625
    (5, 5, Status.FAILS),                         # 5 of 5: P(0 of 5) = 0.03125 < 0.05
    (10, 8, Status.CONSISTENT_NOT_ESTABLISHED),  # P(<= 2 of 10) = 0.0547
    (10, 9, Status.FAILS),                        # P(<= 1 of 10) = 0.0107
])
def test_a_claim_fails_over_members_only_where_the_data_exclude_it(members, failing, status):
    v = judge_claim_over("F1", planted_population((1,) * members, defects={i: F1_DEFECT for i in range(failing)}))
    assert v.status is status and (v.k, v.n) == (members - failing, members), v.message
    assert v.interval is not None and f"holds in {members - failing} of {members}" in v.message


def test_undecided_members_stay_in_n():
    """6 members hold and one is "consistent, not established" (its causal exact test short): 6 of 7
    gives P(>= 6 of 7 | 0.5) = 0.0625, not established. Dropping the undecided member would give 6
    of 6 (p = 1/64) and a false "holds"; and it may not count as failing either (p_fails = 1)."""
    members = planted_population((1,) * 7, defects={6: CAUSAL_UNDECIDED})
    assert members[6].verdicts["causal"].status is Status.CONSISTENT_NOT_ESTABLISHED
    v = judge_claim_over("causal", members)
    assert (v.k, v.n, v.consistent) == (6, 7, ("seed6",)) and v.status is Status.CONSISTENT_NOT_ESTABLISHED, v.message
    assert v.p_holds == pytest.approx(8 / 128) and v.p_fails == pytest.approx(1.0)
    assert judge_claim_over("causal", members[:6]).status is Status.HOLDS  # what dropping it would say


def test_leave_one_out_on_siblings():
    loo = leave_one_out("t_induction", planted_population(SIBLING_ONSETS))
    assert loo.n == 5 and len(loo.inside) == 5 and loo.expected == pytest.approx(0.6)


def test_member_records_refuse_an_onset_outside_the_run():
    with pytest.raises(ValueError):
        member_records(0)


# ---- the claim module on planted populations (pytester) ---------------------------------------------


STAND_IN = '''
import types
import pytest
from headwatch.claims.synthetic_population import member_records, SIBLING_ONSETS, F1_DEFECT
from headwatch.claims.synthetic import HEALTHY_EXPECT

CASE = {case!r}
ONSETS = list(SIBLING_ONSETS) * {copies} + [{candidate_onset}]
DEFECTS = {{i: F1_DEFECT for i in range(len(ONSETS) - 1)}} if CASE == "f1_fails_in_every_member" else {{}}

def member(i):
    role = "candidate" if i == len(ONSETS) - 1 else "reference"
    return types.SimpleNamespace(id=f"seed{{i}}", name=f"seed{{i}}", expect=HEALTHY_EXPECT, total_tokens=None,
                                 member=types.SimpleNamespace(role=role, seed=i, is_candidate=role == "candidate"))

MEMBERS = [member(i) for i in range(len(ONSETS))]
POP = types.SimpleNamespace(id="planted", name="planted", members=tuple(MEMBERS),
                            reference=tuple(MEMBERS[:-1]), candidates=tuple(MEMBERS[-1:]))

def pytest_generate_tests(metafunc):
    if "candidate" in metafunc.fixturenames:
        metafunc.parametrize(("population", "candidate"), [(POP, MEMBERS[-1])], ids=["cand"], scope="session")
    elif "population" in metafunc.fixturenames:
        metafunc.parametrize("population", [POP], ids=["planted"], scope="session")

@pytest.fixture(scope="session")
def population_records(population):
    return {{m.id: member_records(ONSETS[i], model=f"planted/{{m.id}}", **DEFECTS.get(i, {{}}))
            for i, m in enumerate(population.members)}}
'''


def run_population_module(pytester, case: str, candidate_onset: int, copies: int = 1):
    pytester.makeconftest(STAND_IN.format(case=case, candidate_onset=candidate_onset, copies=copies))
    pytester.makepyfile(test_population=(CLAIMS_DIR / "test_population.py").read_text())
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-rA", "-k", "across or within")


def test_population_claim_test_fails_when_the_claim_fails_in_every_member(pytester):
    """F1 fails in all 5 reference members: excluded (p = 1/32), the test fails; F2, F4, F5 and
    causal hold in 5 of 5 (established one-sided: p = 1/32); F3 holds in 3 (the onset-2 members'
    grid straddles 10x): consistent, not established. The candidate (onset 2) lies inside on every
    quantity: consistent with its siblings, a skip (nothing established)."""
    result = run_population_module(pytester, "f1_fails_in_every_member", candidate_onset=2)
    result.assert_outcomes(failed=1, passed=4, skipped=5)
    out = result.stdout.str()
    assert "FAILED test_population.py::test_claim_across_population[planted-F1]" in out
    assert "F1 fails over population planted: holds in 0 of 5" in out and "the data exclude it: 0 of 5 gives p = 0.0312" in out


def test_candidate_test_flags_a_late_candidate_and_fails_it_only_beyond_160_siblings(pytester):
    """Onset 5 (1e11 tokens) against 5 siblings at 1e9-3e9: t_induction, the F3 ratio and the F4
    recall point are beyond them all: flags (skipped, with the chance said), no failure. Against
    160 siblings the same candidate fails once, on t_induction (the permutation min-p: 1 / 161, no
    sibling as far out on any quantity); the F3 ratio and F4 recall point are the same event."""
    flagged = run_population_module(pytester, "outlier", candidate_onset=5)
    flagged.assert_outcomes(passed=5, skipped=5)  # F3 over the members, three flags and t_bos50 inside skip
    out = flagged.stdout.str()
    assert "seed5 in planted: outlier (flag): seed5's t_induction is 100B" in out and "SKIPPED" in out
    many = run_population_module(pytester, "outlier", candidate_onset=5, copies=32)
    many.assert_outcomes(failed=1, passed=6, skipped=3)
    out = many.stdout.str()
    assert "FAILED test_population.py::test_candidate_within_population[cand-t_induction]" in out
    assert "outlier (flag), the same event as t_induction" in out
    assert "permutation min-p over 4 quantities: joint p = 0.00621 < alpha 0.05" in out  # 1 / 161: no member ties
    inside = run_population_module(pytester, "inside", candidate_onset=2)
    inside.assert_outcomes(passed=5, skipped=5)  # inside on every quantity: consistent, a skip


# ---- the report: member x claim grid, trajectories on one figure per quantity --------------------------


def test_report_shows_a_population_grid_and_one_figure_per_quantity():
    from headwatch.claims.judge import judge_model
    from headwatch.claims.report_data import ModelReport, population_parts
    from headwatch.claims.report_render import fragment
    from headwatch.claims.synthetic import HEALTHY_EXPECT

    panel = parse('[[models]]\nname = "p"\nrepo = "o/p-seed{seed}"\nseeds = [0, 1, 2, 3, 4, 5]\ncandidates = [5]\n'
                  'revisions = ["step0", "step1", "step2", "step3", "step4", "step5", "step6"]\n'
                  'tokens = { table = { step0 = 1e8, step1 = 1e9, step2 = 3e9, step3 = 1e10, step4 = 2e10, '
                  'step5 = 1e11, step6 = 1e12 } }\n')
    onsets = SIBLING_ONSETS + (5,)
    reports = []
    for m, onset in zip(panel.models, onsets):
        recs = member_records(onset, model=m.repo)
        reports.append(ModelReport(m.id, m.repo, m.panel, recs, judge_model(recs, HEALTHY_EXPECT)))
    errors: list[str] = []
    (pop,), figs = population_parts(panel.models, reports, errors)
    assert not errors and [f.name for f in figs["p"]] == ["population_induction", "population_bos"]
    assert all(f.png.startswith(b"\x89PNG") for f in figs["p"])
    assert pop.placements["p-seed5"]["t_induction"].outlier
    html = fragment(reports, {}, {"models": {}}, populations=[pop], population_figs=figs, test_list=False)
    assert 'id="hw-population-p"' in html and 'data-population="p"' in html
    # population x claim first (table#headwatch-populations), then the members behind it; the members
    # are in no standalone verdict table
    assert html.index('id="headwatch-populations"') < html.index('id="hw-population-p"') < html.index('id="hw-models"')
    assert 'id="headwatch-verdicts"' not in html
    assert html.count('data-model="p-seed') == 6 * 6 and html.count('data-population-claim=') == 2 * 6
    assert "candidate</span>" in html and "OUTLIER (FLAG)" in html and "holds in 5 of 5 reference members" in html
    assert html.count('<details class="model"') == 6 and html.count("<details class='rows'>") == 6


@pytest.mark.parametrize("status", list(Status), ids=lambda s: s.value)
def test_a_population_cell_shows_every_status_a_member_can_have(status):
    # A member "not established" (missing evidence, issue 25) once raised KeyError in the grid.
    from headwatch.claims.report_render import _pop_cell

    html = _pop_cell(status, "3/4", "why", "f1", "p")
    assert f'data-status="{status.words}"' in html and 'title="why"' in html


# ---- the shipped suite panels: branch names, tokens, roles; what a run costs ----------------------------


def test_shipped_suite_panels_name_the_published_repos_branches_and_tokens():
    from headwatch.fixtures.realconfigs import (CRFM_GPT2_SMALL, MISTRAL_SCHEDULE, POLYPYTHIA, PYTHIA_SCHEDULE,
                                                PYTHIA_SUITE)

    poly, suite, crfm = load_panel("polypythia"), load_panel("pythia"), load_panel("crfm-gpt2")
    assert {m.repo for m in poly.models} == set(POLYPYTHIA.repos)  # 5 sizes x 10 seeds, and the six variants
    assert {m.repo for m in suite.models} == set(PYTHIA_SUITE.repos)
    assert {m.repo for m in crfm.models} == set(CRFM_GPT2_SMALL.repos)
    for panel, schedule in ((poly, PYTHIA_SCHEDULE), (suite, PYTHIA_SCHEDULE), (crfm, MISTRAL_SCHEDULE)):
        assert panel.needs_network and panel.needs_gpu and panel.name not in default_panels()
        for m in panel.models:
            assert set(m.revisions) <= set(schedule.branches), m.id
            assert m.total_tokens == max(m.tokens_seen.values())
            assert m.tokens_seen[m.final_revision] == int(m.final_revision.rsplit("-", 1)[-1].removeprefix("step")
                                                          ) * schedule.tokens_per_step
            assert m.config == POLYPYTHIA.repos.get(m.repo) or m.config == PYTHIA_SUITE.repos.get(m.repo) \
                or m.config == CRFM_GPT2_SMALL.repos.get(m.repo)
    by = {m.id: m for m in poly.models}
    assert by["pythia-410m-seed1234"].repo == "EleutherAI/pythia-410m" and by["pythia-410m-seed1234"].member.seed == 1234
    assert [p.name for p in populations(poly.models)] == ["pythia-14m", "pythia-31m", "pythia-70m", "pythia-160m",
                                                           "pythia-410m"]
    (p160,) = [p for p in populations(poly.models) if p.name == "pythia-160m"]
    assert len(p160.reference) == 10 and {m.name for m in p160.candidates} == {
        f"pythia-160m-{k}-seed{s}" for k in ("data", "weight") for s in (1, 2, 3)}
    assert all(m.allow_pickle for m in crfm.models) and not any(m.allow_pickle for m in poly.models + suite.models)
    assert crfm.models[0].tokens_seen["checkpoint-400000"] == 400_000 * 524_288


def test_a_run_prints_what_it_costs_from_the_published_configs():
    from headwatch.fixtures.estimate import GPU_FLOP_PER_S, LINK_BYTES_PER_S, config_cost, estimate_models

    paper = estimate_models(load_panel("paper").models)
    assert paper.checkpoints == 30 and 205e9 < paper.download_bytes < 215e9  # docs/scale-out.md: ~210 GB
    assert paper.by_config["olmoe-1b-7b-0924"] == (10, 6_919_161_856 * 2)  # bfloat16 as stored
    assert config_cost("pythia-12b").checkpoint_bytes == 11_846_072_320 * 2
    text = estimate_models(select_seeds(load_panel("polypythia").models, [1])).describe("polypythia, seed 1")
    assert text.startswith("polypythia, seed 1: 112 Hub checkpoint(s)")  # 5 sizes + 2 variants, x 16
    assert "assumed rates" in text
    assert f"{LINK_BYTES_PER_S / 1e6:.0f} MB/s" in text and f"{GPU_FLOP_PER_S / 1e12:g} TFLOP/s" in text
    unsized = estimate_models(parse('[[models]]\nname = "m"\nrepo = "o/m"\n' + REVS).models)
    assert unsized.checkpoints == 0 and unsized.unsized == ("m",) and "without a published config" in unsized.describe()
    with pytest.raises(PanelError, match="no published config.*did you mean 'pythia-160m'"):
        parse('[[models]]\nname = "m"\nrepo = "o/m"\nconfig = "pythia-160"\n' + REVS)


def test_headwatch_judge_prints_the_population_and_exits_1_only_for_a_failing_placement(tmp_path, capsys):
    """``headwatch judge`` on records of a population (a --reference-dir folder): each claim over the
    reference members, the candidate's place. Off DCLM (F3 does not apply, so neither the late
    candidate's own F3 nor its F3 ratio is judged), a late candidate beyond 5 siblings is a flag
    (exit 0, said in words); beyond 160 it fails (exit 1: 2 / 161 x 3 quantities < 0.05); a sibling
    inside is no news."""
    import json

    from headwatch.cli import main
    from headwatch.fixtures.reference import model_slug

    def run(candidate_onset: int, siblings: tuple[int, ...] = SIBLING_ONSETS) -> tuple[int, dict, str]:
        folder = tmp_path / f"records-{candidate_onset}-{len(siblings)}"
        for seed, onset in enumerate(siblings + (candidate_onset,)):
            for r in member_records(onset, model=f"o/p-seed{seed}"):
                r.to_json(folder / model_slug(f"o/p-seed{seed}") / f"{r.revision}.json")
        panel = tmp_path / f"p{len(siblings)}.toml"
        panel.write_text(f'[[models]]\nname = "p"\nrepo = "o/p-seed{{seed}}"\nseeds = {list(range(len(siblings) + 1))}\n'
                         f'candidates = [{len(siblings)}]\n'
                         'revisions = ["step0", "step1", "step2", "step3", "step4", "step5", "step6"]\n'
                         'tokens = { table = { step0 = 1e8, step1 = 1e9, step2 = 3e9, step3 = 1e10, step4 = 2e10, '
                         'step5 = 1e11, step6 = 1e12 } }\n[models.expect]\nbos_shape = "ramp"\ndclm = false\n')
        out = tmp_path / f"v{candidate_onset}-{len(siblings)}.json"
        code = main(["judge", "--panel", str(panel), "--reference-dir", str(folder), "--json", str(out)])
        return code, json.loads(out.read_text()), capsys.readouterr().out

    code, data, printed = run(5)
    assert code == 0 and "population p: 5 reference member(s), 1 candidate(s)" in printed
    assert "candidate p-seed5 t_induction: outlier (flag): p-seed5's t_induction is 100B" in printed
    assert data["populations"]["p"]["claims"]["F1"]["k"] == 5
    placed = data["populations"]["p"]["placements"]["p-seed5"]
    assert placed["t_induction"]["outlier"] is True and placed["t_induction"]["status"] == "consistent_not_established"
    assert placed["F4_recall_point"]["same_event_as"] == "t_induction" and placed["F3_ratio"]["status"] == "not_applicable"
    code, data, printed = run(2)
    assert code == 0 and "candidate p-seed5 t_induction: consistent, not established: within its siblings" in printed
    code, data, printed = run(5, MANY_SIBLING_ONSETS)
    assert code == 1 and "candidate p-seed160 t_induction: outlier (fails): p-seed160's" in printed
    # --seeds 0-4: the candidate (seed 5) is not selected; the population is judged without it
    folder, panel = tmp_path / "records-5-5", tmp_path / "p5.toml"
    assert main(["judge", "--panel", str(panel), "--reference-dir", str(folder), "--seeds", "0-4"]) == 0
    assert "population p: 5 reference member(s), 0 candidate(s)" in capsys.readouterr().out


def test_pytest_seeds_picks_members_and_the_header_says_what_they_cost(pytester):
    """``pytest claims --panel polypythia --models pythia-14m --seeds 1,1234 --collect-only``: the tests of
    those members only (ids name them), the population tests once for the population, the cost first."""
    from headwatch import plugin

    ini = pytester.makeini("[pytest]\n")
    args = [str(plugin.CLAIMS_DIR), "-c", str(ini), "--rootdir", str(pytester.path), "--collect-only",
            "--panel", "polypythia", "--models", "pythia-14m", "-p", "no:xdist", "-p", "no:cacheprovider",
            "-p", "no:randomly", "-p", "no:hypothesispytest"]
    result = pytester.runpytest_inprocess(*args, "--seeds", "1,1234")
    out = result.stdout.str()
    assert result.ret == 0, out[-2000:]
    assert "test_f1_no_bos_head_in_layers_0_1[pythia-14m-seed1@step1000]" in out
    assert "pythia-14m-seed1234@step143000" in out and "pythia-14m-seed2" not in out
    assert "test_claim_across_population[pythia-14m-F1]" in out
    assert "headwatch: at most (revisions already cached cost nothing): 32 Hub checkpoint(s)" in out  # 2 x 16
    bad = pytester.runpytest_inprocess(*args, "--seeds", "12")
    assert bad.ret == 4 and "no selected population has seed(s) 12; seeds there: 1, 2, 3" in bad.stderr.str()


def test_a_population_failing_as_every_member_declares_says_so_in_its_table():
    """F1 fails in every member, each at the revision it declares: the population fails, and its
    line says each failure is a declared deviation (the pytest test xfails strictly on the same)."""
    from headwatch.spec import Deviation
    expect = dataclasses.replace(HEALTHY_EXPECT, xfail={"F1": Deviation(reason="planted", revisions=("step2",))})
    members = planted_population(SIBLING_ONSETS, defects={i: F1_DEFECT for i in range(5)}, expect=expect)
    report = population_report("planted", members)
    assert report.claims["F1"].status is Status.FAILS and report.claims["F1"].all_failures_declared
    assert "F1        fails" in population_table(report) and "each failure a member's declared deviation" in \
        population_table(report)


# ---- at the size of a seed suite (issue 33): from an evicted cache, no model loaded ---------------------


@pytest.mark.slow
def test_a_suite_shaped_population_from_an_evicted_cache(tmp_path, monkeypatch, capsys):
    """13 planted PolyPythia-shaped members (pythia-14m and pythia-160m x 6 seeds, one 160m
    candidate; full-size records of 24 and 144 heads), every checkpoint evicted (an empty Hub cache,
    offline): ``headwatch judge`` warns once per model, not per revision, and never tells the user to
    download; ``headwatch report`` opens with the population x claim table, keeps each model's detail
    collapsed (13 > 12 models) and draws the population figures, not 5 per member.
    benchmarks/population_scale.py runs the same at 51 models x 154 revisions."""
    import importlib.util
    import warnings

    from headwatch.cli import main
    from headwatch.fixtures.realconfigs import PYTHIA_SCHEDULE

    spec = importlib.util.spec_from_file_location("population_scale", ROOT / "benchmarks" / "population_scale.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    revisions = list(PYTHIA_SCHEDULE.branches)[::30] + ["step143000"]
    panel, records = bench.build(tmp_path / "work", ["14m", "160m"], [1, 2, 3, 4, 5, 1234], revisions)
    assert records == 13 * len(revisions)
    (tmp_path / "hub").mkdir()
    for k, v in {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"),
                 "HEADWATCH_CACHE_DIR": str(tmp_path / "work" / "cache")}.items():
        monkeypatch.setenv(k, v)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["judge", "--panel", str(panel)])
    said = [str(w.message) for w in caught if "not resolvable" in str(w.message)]
    printed = capsys.readouterr().out
    assert code == 0, printed[-3000:]
    assert len(said) == 13 and len({s.split("@")[0] for s in said}) == 13  # one per model, 13 x 6 revisions read
    assert not any("hf download" in s for s in said) and all("one warning per model" in s for s in said)
    assert "population pythia-160m: 6 reference member(s), 1 candidate(s)" in printed

    assert main(["report", "--panel", str(panel), "--out", str(tmp_path / "report")]) == 0
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert html.index('id="headwatch-populations"') < html.index('id="hw-population-pythia-14m"') < html.index(
        'id="hw-models"')
    assert html.count('<details class="model"') == 13 and '<details class="model" id="hw-model-pythia-14m-seed1" open' \
        not in html
    assert 'data-figure="population-pythia-160m/population_induction"' in html
    assert 'data-figure="pythia-14m-seed1/' not in html and not (tmp_path / "report" / "pythia-14m-seed1").exists()
    assert len(html) < 1_000_000


# ---- issue 43: behaviours pinned at their boundaries ------------------------------------------------


def _quantities(t_ind: float | None = None, f4: float | None = None, t_ind_above: float | None = None,
                mid: str = "m", role: str = "reference") -> Member:
    """A member with t_induction (reached, or known only to exceed ``t_ind_above``) and an F4 recall point."""
    none = GridValue(None, undefined="not planted")
    return Member(mid, role, None, {}, {"t_induction": GridValue(t_ind, None, censored_above=t_ind_above)
                                        if t_ind is not None or t_ind_above is not None else none,
                                        "t_bos50": none, "F3_ratio": none,
                                        "F4_recall_point": GridValue(f4) if f4 is not None else none})


def test_population_bounds_are_one_sided_at_the_stated_level():
    """k / n's bounds are one-sided 95% (the inversions of the two one-sided tests at 0.05), not a
    two-sided 95% interval: 5 of 5 has lower bound 0.05^(1/5) = 0.5493 (two-sided: 0.025^(1/5) = 0.478)."""
    v = judge_claim_over("F1", planted_population((1,) * 5))
    assert v.interval[0] == pytest.approx(0.05 ** (1 / 5), rel=1e-9) and v.interval[1] == 1.0
    f = judge_claim_over("F1", planted_population((1,) * 5, defects={i: F1_DEFECT for i in range(5)}))
    assert f.interval[1] == pytest.approx(1 - 0.05 ** (1 / 5), rel=1e-9) and f.interval[0] == 0.0


def test_joint_rule_at_100_seeds_and_four_quantities():
    """100 siblings, the late candidate beyond every one on t_induction (rank p 2 / 101): the
    permutation min-p over the 4 quantities is 1 / 101 = 0.0099 < 0.05: it fails. Bonferroni over the
    4 (the rule before issue 43) would give 8 / 101 = 0.079: a flag."""
    members = planted_population(SIBLING_ONSETS * 20 + (5,), candidates=(100,))
    t = audit(members[-1], members[:-1])["t_induction"]
    assert t.family == 4 and t.p_extreme == pytest.approx(2 / 101) and t.p_joint == pytest.approx(1 / 101)
    assert t.status is Status.FAILS and min(1.0, t.family * t.p_extreme) >= 0.05


def test_the_same_event_needs_the_same_direction():
    """An early circuit (t_induction below every sibling) and a late F4 recall point (above every
    sibling) are two anomalies: the F4 flag is not marked the same event as t_induction."""
    ref = [_quantities(t, f, mid=f"s{i}") for i, (t, f) in enumerate([(2e9, 0.01), (3e9, 0.012), (2.5e9, 0.011)])]
    late_f4 = audit(_quantities(1e9, 0.02, mid="c", role="candidate"), ref)
    assert late_f4["t_induction"].side == "below" and late_f4["F4_recall_point"].side == "above"
    assert late_f4["F4_recall_point"].same_event_as == ""
    same = audit(_quantities(5e9, 0.02, mid="c", role="candidate"), ref)  # late circuit, late recall: one event
    assert same["F4_recall_point"].same_event_as == "t_induction"


def test_a_candidate_at_a_censored_bound_ranks_below_the_members_that_never_reached_it():
    """A member that never reached t_induction is known only to exceed its final tokens (bound b);
    a candidate whose t_induction equals b is surely below that member (the bound itself is
    excluded), not tied with it, and not beyond it."""
    ref = [_quantities(t_ind_above=4e9, mid="never"), _quantities(1e9, mid="a"), _quantities(2e9, mid="b")]
    p = place("t_induction", _quantities(4e9, mid="c", role="candidate"), ref)
    assert (p.below, p.tied, p.overlapping, p.above) == (2, 0, 0, 1) and not p.outlier and p.rank == (3, 3)


def test_placement_against_one_reference_seed_is_not_applicable():
    one = [_quantities(1e9, mid="a")]
    p = place("t_induction", _quantities(5e9, mid="c", role="candidate"), one)
    assert p.status is Status.NOT_APPLICABLE and "needs at least 2" in p.message
    two = one + [_quantities(2e9, mid="b")]
    assert place("t_induction", _quantities(5e9, mid="c", role="candidate"), two).outlier


def test_a_panel_declares_its_placement_rule():
    """``placement`` in a population's entry picks the rule (rank where none is declared); two entries
    of one population declaring different rules are refused, naming both."""
    assert {p.name: p.placement for p in populations(parse(SUITE).models)} == {"pythia-14m": "rank", "pythia-160m": "rank"}
    declared = SUITE.replace('candidates = [1234]\n', 'candidates = [1234]\nplacement = "log-normal"\n', 1)
    assert {p.placement for p in populations(parse(declared).models)} == {"log-normal"}
    clash = declared.replace('role = "candidate"\n', 'role = "candidate"\nplacement = "rank"\n')
    with pytest.raises(PanelError, match="different placement rules .log-normal, rank."):
        parse(clash)
    with pytest.raises(PanelError, match="placement"):
        parse(SUITE.replace('candidates = [1234]\n', 'candidates = [1234]\nplacement = "normal"\n', 1))


def test_f3_ratio_of_a_member_whose_bos_never_reaches_half_is_censored_at_final_over_t_induction():
    """t_induction at 1e9 tokens (the second revision), BOS never at 50%: the ratio exceeds 1e12 / 1e9."""
    from headwatch.claims.builtin.f3_induction_before_bos import ratio_value
    from headwatch.claims.synthetic import A, B, D, planted_trajectory
    from headwatch.spec import SPEC

    sets = ((), (A, B, D), (A, B, D), (A, B, D), (A, B, D), (A, B, D), (A, B, D))
    value = ratio_value(planted_trajectory(bos_fractions=(0.0,) * 7, induction_sets=sets), None, SPEC)
    assert value.value is None and value.censored_above == pytest.approx(1e12 / 1e9)
    from_zero = (0.0, 1e9, 3e9, 1e10, 2e10, 1e11, 1e12)  # formed at step 0: no ratio, not an infinite one
    at_start = ratio_value(planted_trajectory(from_zero, bos_fractions=(0.0,) * 7, induction_sets=((A, B, D),) * 7),
                           None, SPEC)
    assert at_start.value is None and at_start.censored_above is None and at_start.undefined == "t_induction at 0 tokens"


def test_the_log_normal_rule_places_a_censored_candidate_and_says_why_it_cannot():
    from headwatch.claims.population import _lognormal_p

    ref = [GridValue(v) for v in (1.0, 2.0, 4.0)]
    p, why = _lognormal_p(GridValue(None, censored_above=8.0), ref)  # known only to exceed 8: its bound's p
    assert p is not None and p < 0.5 and why == ""
    assert _lognormal_p(GridValue(3.0), [GridValue(2.0)] * 3) == (None, "the reference values do not spread (every "
                                                                        "member on one revision)")
    assert _lognormal_p(GridValue(0.0), [GridValue(1.0), GridValue(2.0)]) == (None, "a value is not positive")


def test_a_candidate_in_the_middle_has_rank_p_1_and_an_unplaced_one_no_counts():
    ref = [_member(m, r) for m, r in (("a", 10.0), ("b", 20.0), ("c", 30.0), ("d", 40.0))]
    middle = place("F3_ratio", _member("c", 25.0, role="candidate"), ref)
    assert middle.p_extreme == 1.0 and (middle.below, middle.above) == (2, 2)
    assert not middle.outlier and middle.side == "" and middle.status is Status.CONSISTENT_NOT_ESTABLISHED
    assert "within its siblings" in middle.message
    unformed = dataclasses.replace(_member("x", 25.0, role="candidate"), verdicts={
        "formation": Verdict("formation", Status.FAILS, "did not form", None, key="no circuit")})
    p = place("F3_ratio", unformed, ref)
    assert p.status is Status.NOT_JUDGED
    assert (p.below, p.tied, p.overlapping, p.above, p.outlier, p.side) == (0, 0, 0, 0, False, "")


def test_a_quantity_whose_claim_applies_to_no_reference_member_is_not_placed():
    """F3 off DCLM for every reference member: nothing to place against, and said so; reference members
    that merely lack a value give the other reason."""
    off = Verdict("F3", Status.NOT_APPLICABLE, "not DCLM", None, key="n/a")
    ref = [dataclasses.replace(_member(m, r), verdicts={"F3": off}) for m, r in (("a", 10.0), ("b", 20.0))]
    p = place("F3_ratio", _member("c", 25.0, role="candidate"), ref)
    assert p.status is Status.NOT_APPLICABLE and "applies to none of the reference members" in p.message
    assert p.family == 1
    for members in ([_member("a"), _member("b")], []):
        empty = place("F3_ratio", _member("c", 25.0, role="candidate"), members)
        assert empty.status is Status.NOT_APPLICABLE and "0 reference member(s) with a value" in empty.message
    mixed = place("F3_ratio", _member("c", 25.0, role="candidate"), [*ref, _member("d", 30.0), _member("e", 40.0)])
    assert mixed.status is Status.CONSISTENT_NOT_ESTABLISHED and mixed.below == 0 and mixed.above == 2


def test_a_placement_says_its_rank_counts_rule_and_direction_in_words():
    ref = [_member("a", 10.0), _member("b", 20.0), _member("c", 30.0), _member("d", above=5.0)]
    both = place("F3_ratio", _member("x", 20.0, role="candidate"), ref)
    assert ("rank 2-4 of 5 (1 reference members below, 1 tied, 1 either way (censored), 1 above); the 4 "
            "reference members:") in both.message
    plain = place("F3_ratio", _member("x", 15.0, role="candidate"), ref[:3])
    assert "rank 2 of 4 (1 reference members below, 0 tied, 2 above); the 3" in plain.message
    assert "log scale" not in plain.message and "rule does not apply" not in plain.message
    lognormal = place("F3_ratio", _member("x", 15.0, role="candidate"), ref[:3], rule="log-normal")
    assert f"; t prediction p on the log scale {lognormal.p_rule:.3g}; the 3" in lognormal.message
    censored = place("F3_ratio", _member("x", 15.0, role="candidate"), ref, rule="log-normal")
    assert ("; the log-normal rule does not apply (a reference value is censored (not reached by the final "
            "revision)): the rank rule decides") in censored.message and censored.rule == "rank"
    assert "quantities: joint p" not in plain.message and "(2 of the" not in both.message
    beyond = place("F3_ratio", _member("x", 99.0, role="candidate"), ref[:3])
    assert "larger than every one of the 3 reference members" in beyond.message and beyond.side == "above"
    assert "with probability 0.5 (2 of the 4 ranks)" in beyond.message and "quantities: joint p" not in beyond.message
    assert ("(3 reference members cannot show it under the rank rule: a candidate beyond all of them fails from 40 "
            "members on)") in beyond.message
    assert "smaller than every one" in place("F3_ratio", _member("x", 1.0, role="candidate"), ref[:3]).message
    joint = place("F3_ratio", _member("x", 99.0, role="candidate"), ref[:3], family=2,
                  joint=("permutation min-p", 0.3, False))
    assert "; permutation min-p over 2 quantities: joint p = 0.3, not below alpha" in joint.message
    big = [_member(f"m{i}", 10.0 + i) for i in range(40)]
    flagged = place("F3_ratio", _member("x", 99.0, role="candidate"), big, joint=("permutation min-p", 0.3, False))
    assert flagged.status is Status.CONSISTENT_NOT_ESTABLISHED and "cannot show it" not in flagged.message
    by_t = place("F3_ratio", _member("x", 35.0, role="candidate"), ref[:3], rule="log-normal")  # beyond all, t p 0.6
    assert by_t.rule == "log-normal" and by_t.outlier and by_t.status is Status.CONSISTENT_NOT_ESTABLISHED
    assert "cannot show it" not in by_t.message


@pytest.mark.parametrize("n, status", [(39, Status.CONSISTENT_NOT_ESTABLISHED), (40, Status.FAILS)])
def test_decided_alone_a_candidate_beyond_every_member_fails_once_its_rank_p_is_below_alpha(n, status):
    """2 / (n + 1): 0.05 with 39 members (not below alpha 0.05: a flag), 0.0488 with 40 (fails)."""
    ref = [_member(f"m{i}", 10.0 + i) for i in range(n)]
    p = place("F3_ratio", _member("x", 1000.0, role="candidate"), ref)
    assert p.outlier and p.p_extreme == pytest.approx(2 / (n + 1)) and p.status is status, p.message


def test_a_members_own_min_p_uses_only_values_that_count():
    """_member_min_p (the permutation rule's calibration): a quantity counts for a member only with its own
    value and two others'; members that did not form, or to which the quantity's claim does not apply,
    contribute nothing."""
    from headwatch.claims.population import _member_min_p

    others = [_member("a", 10.0), _member("b", 20.0), _member("c", 30.0)]
    assert _member_min_p(_member("x", 99.0), others, ["F3_ratio"]) == pytest.approx(0.5)  # beyond 3: 2 / 4
    assert _member_min_p(_member("x"), others, ["F3_ratio"]) is None  # no value of its own
    assert _member_min_p(_member("x", 99.0), others[:1], ["F3_ratio"]) is None  # one other value only
    assert _member_min_p(_member("x", 99.0), others[:2], ["F3_ratio"]) == pytest.approx(2 / 3)  # two are enough
    unformed = {"formation": Verdict("formation", Status.FAILS, "did not form", None, key="no circuit")}
    off = {"F3": Verdict("F3", Status.NOT_APPLICABLE, "not DCLM", None, key="n/a")}
    for verdicts in (unformed, off):
        assert _member_min_p(dataclasses.replace(_member("x", 99.0), verdicts=verdicts), others, ["F3_ratio"]) is None
        some = [dataclasses.replace(o, verdicts=verdicts) for o in others[:2]] + others[2:]
        assert _member_min_p(_member("x", 99.0), some, ["F3_ratio"]) is None  # one other counts


def _two_quantity_member(mid: str, ratio: float, t_induction: float, role: str = "reference") -> Member:
    m = _member(mid, ratio, role=role)
    return dataclasses.replace(m, quantities={**m.quantities, "t_induction": GridValue(t_induction)})


def test_a_joint_failure_fails_the_quantities_at_the_candidates_smallest_p_only():
    """100 members; the candidate beyond all of them on the F3 ratio (p 2/101) and in the middle on
    t_induction: jointly it fails (permutation min-p below alpha), on the ratio, not on t_induction.
    Beyond all on both, both fail (their p tie at the smallest)."""
    ref = [_two_quantity_member(f"m{i}", 10.0 + i, 1e9 + i * 1e7) for i in range(100)]
    one = audit(_two_quantity_member("x", 1000.0, 1e9 + 50.5e7, role="candidate"), ref)
    assert one["F3_ratio"].status is Status.FAILS and one["F3_ratio"].p_joint < 0.05
    assert one["t_induction"].status is Status.CONSISTENT_NOT_ESTABLISHED
    both = audit(_two_quantity_member("x", 1000.0, 1e12, role="candidate"), ref)
    assert both["F3_ratio"].status is Status.FAILS and both["t_induction"].status is Status.FAILS
    # t_induction of 60 members only: beyond them all its p is 2/61, above the ratio's 2/101: a flag, not a failure
    fewer = [m if i < 60 else dataclasses.replace(m, quantities={**m.quantities, "t_induction": GridValue(
        None, undefined="not planted")}) for i, m in enumerate(ref)]
    apart = audit(_two_quantity_member("x", 1000.0, 1e12, role="candidate"), fewer)
    assert apart["F3_ratio"].status is Status.FAILS and apart["t_induction"].outlier
    assert apart["t_induction"].status is Status.CONSISTENT_NOT_ESTABLISHED, apart["t_induction"].message


@pytest.mark.parametrize("rule", ["rank", "log-normal"])
def test_an_audit_of_a_candidate_that_did_not_form_compares_nothing(rule):
    unformed = dataclasses.replace(_two_quantity_member("x", 1000.0, 1e12, role="candidate"), verdicts={
        "formation": Verdict("formation", Status.FAILS, "did not form", None, key="no circuit")})
    placed = audit(unformed, [_two_quantity_member(f"m{i}", 10.0 + i, 1e9 + i) for i in range(5)], rule=rule)
    assert {p.status for p in placed.values()} == {Status.NOT_JUDGED}


def test_placing_a_reached_value_among_members_censored_above_and_a_later_recall_point():
    """Every member known only to exceed a bound, the candidate's value reached: still placed (it may lie
    anywhere among them). A recall point beyond every member's is "later", a ratio's "larger"."""
    censored = place("F3_ratio", _member("x", 20.0, role="candidate"), [_member("a", above=5.0), _member("b", above=6.0)])
    assert censored.status is not Status.NOT_APPLICABLE and censored.overlapping == 2, censored.message

    def at(mid, point, role="reference"):
        m = _member(mid, role=role)
        return dataclasses.replace(m, quantities={**m.quantities, "F4_recall_point": GridValue(point)})

    late = place("F4_recall_point", at("x", 0.2, "candidate"), [at("a", 0.01), at("b", 0.02), at("c", 0.03)])
    assert late.side == "above" and "later than every one of the 3 reference members" in late.message
