"""Panels that contradict themselves, overflow, or list revisions that do not exist are refused
before anything is measured (docs/hostile-inputs.md, "Panel files").

Two token rules in one model used to be accepted (one silently won), a token count that overflowed to
infinity was a traceback, and 5000 listed revisions that did not exist ran until killed.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from headwatch import plugin
from headwatch.fixtures.panels import PanelError, parse_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch.names import compact

pytest_plugins = ["pytester"]


def panel(tmp_path: Path, revisions: str = '["step0", "step100"]', tokens: str = "{ per_step = 1000 }",
          extra: str = "", source: str = "local") -> str:
    (tmp_path / "run" / "step0").mkdir(parents=True, exist_ok=True)
    (tmp_path / "run" / "step100").mkdir(exist_ok=True)
    return textwrap.dedent(f"""\
        [[models]]
        name = "m"
        repo = "{tmp_path / 'run'}"
        source = "{source}"
        revisions = {revisions}
        tokens = {tokens}
        """) + textwrap.dedent(extra)


def parse(text: str):
    return parse_panel(text, name="p", path=Path("p.toml"))


CONTRADICTIONS = {
    "per_step and from_name": (dict(tokens="{ per_step = 1000, from_name = true }"), "two rules for the same revisions"),
    "table against per_step": (dict(tokens="{ per_step = 1000, table = { step100 = 5 } }"),
                               "two counts for 'step100': the table says 5, per_step says 100000"),
    "probe ablation and mode": (dict(extra='ablation = "all"\n[models.probe]\nablation = false\n'),
                                "both say when to ablate"),
    "two dtypes": (dict(extra='dtype = "float32"\n[models.probe]\ndtype = "bfloat16"\n'), "contradict each other"),
    "causal deviation, no ablation": (dict(extra='ablation = "none"\n[models.expect.xfail]\n'
                                                 'causal = { reason = "r", key = [0, 1] }\n'), "never judged"),
    "F3 bar, not DCLM": (dict(extra="[models.expect]\nf3_min_ratio = 5\n"), "F3 applies to DCLM models only"),
    "formation window reversed": (dict(extra='[models.expect.formation]\nformed_within = { revisions = '
                                             '["step100", "step0"] }\n'), "give [first, last] in training order"),
}


@pytest.mark.parametrize("case", list(CONTRADICTIONS))
def test_a_panel_that_contradicts_itself_is_refused(tmp_path, case):
    kwargs, says = CONTRADICTIONS[case]
    with pytest.raises(PanelError, match=says.replace("[", r"\[").replace("]", r"\]")):
        parse(panel(tmp_path, **kwargs))


@pytest.mark.parametrize("kwargs", [dict(tokens="{ per_step = 1000, table = { step100 = 100000 } }"),
                                    dict(tokens='{ per_step = 1000, table = { main = 1e6 } }',
                                         revisions='["step0", "main"]'),
                                    dict(extra='ablation = "none"\n[models.probe]\ndtype = "float32"\n'),
                                    dict(extra="[models.expect]\ndclm = true\nf3_min_ratio = 5\n")])
def test_what_agrees_is_accepted(tmp_path, kwargs):
    if "main" in kwargs.get("revisions", ""):
        (tmp_path / "run" / "main").mkdir(parents=True)
    parse(panel(tmp_path, **kwargs))


@pytest.mark.parametrize("kwargs,where", [
    (dict(tokens="{ per_step = 1e307 }"), "step100"),
    (dict(tokens="{ from_name = true }", revisions='["step1-tokens' + "9" * 400 + 'T"]'), "characters"),
    (dict(tokens="{ per_step = 1 }", revisions='["step' + "9" * 5000 + '"]'), "characters"),
])
def test_a_token_count_that_overflows_is_refused(tmp_path, kwargs, where):
    with pytest.raises(PanelError, match="overflow") as info:
        parse(panel(tmp_path, **kwargs))
    assert where in str(info.value) and len(str(info.value)) < 600  # the name is shortened, not printed whole


def test_revisions_that_do_not_exist_are_refused_before_measuring_listed_compactly(tmp_path):
    revisions = "[" + ", ".join(f'"step{i}"' for i in [0, *range(1, 5001)]) + "]"
    model = parse(panel(tmp_path, revisions=revisions)).models[0]
    measured = []
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "cache", device="cpu", progress=False,
                                        measure_fn=lambda *a, **k: measured.append(1)))
    with pytest.raises(PanelError) as info:
        provider.model_records(model)
    message = str(info.value)
    assert "4999 of its 5001 revision(s) are not in the folder" in message
    assert "step1..step99, step101..step5000" in message and len(message) < 700, message
    assert not measured and not (tmp_path / "cache" / "measurements").exists()


def test_the_plugin_refuses_missing_revisions_at_configure_time(tmp_path, pytester, monkeypatch):
    text = panel(tmp_path, revisions="[" + ", ".join(f'"step{i}"' for i in range(0, 5000, 100)) + "]")
    (tmp_path / "p.toml").write_text(text)
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "cache"))
    ini = pytester.makeini("[pytest]\n")
    result = pytester.runpytest_inprocess(str(plugin.CLAIMS_DIR), "-c", str(ini), "--rootdir", str(pytester.path), "-q",
                                          "-p", "no:xdist", "-p", "no:cacheprovider", "--panel", str(tmp_path / "p.toml"))
    err = result.stderr.str()
    assert result.ret == 4 and "48 of its 50 revision(s)" in err and "step200..step4900 every 100" in err, err[-2000:]


def test_organism_revisions_are_checked_against_the_recipe_without_training(tmp_path, never_trains):
    text = '[[models]]\nname = "o"\nsource = "organism"\nrevisions = ["step0", "step7"]\n[models.organism]\nfamily = "olmo"\n'
    model = parse(text).models[0]
    with pytest.raises(PanelError, match="step7"):
        Provider(ProviderOptions(cache_dir=tmp_path, organisms_cache_dir=str(tmp_path / "org"))).model_records(model)


@pytest.mark.parametrize("names,expected", [
    ([f"step{i}" for i in range(1, 6)], "step1..step5"),
    ([f"step{i * 1000}" for i in range(4)] + ["main"], "step0..step3000 every 1000, main"),
    (["step1", "step2", "step10"], "step1, step2, step10"),
    (["step007", "a", "b"], "step007, a, b"),
    ([f"r{i}" for i in range(0, 100, 2)] + list("abcdefghij"), "r0..r98 every 2, a, b, c, d, e, f, g, ... (3 more)"),
])
def test_names_are_listed_compactly(names, expected):
    assert compact(names) == expected


# ---- population entries that would count one checkpoint twice, write outside --out, or never end -------
# (issue 35.2: seed_repos giving several seeds one repo, a population name with path parts, and a
# placeholder with a width such as {seed:0999999999}, which built 10 MB names or hung)

POPULATION_REVS = 'revisions = ["step0", "step1"]\ntokens = { per_step = 1 }\n'
POPULATION_REFUSALS = {
    "seed_repos, one repo for two seeds": ('repo = "o/p{seed}"\nseeds = [1, 2, 3]\nseed_repos = { 1 = "o/x", 2 = "o/x" }\n',
                                           "seeds 1, 2 load the same repo 'o/x'"),
    "seed_repos, the template's repo of another seed": ('repo = "o/p{seed}"\nseeds = [1, 2]\nseed_repos = { 1 = "o/p2" }\n',
                                                        "seeds 1, 2 load the same repo 'o/p2'"),
    "population with a slash": ('repo = "o/p{seed}"\nseeds = [1, 2]\npopulation = "a/b"\n', "no path parts"),
    "population climbing out": ('repo = "o/p{seed}"\nseeds = [1, 2]\npopulation = "../../x"\n', "no path parts"),
    "population with a size template and a slash": ('name = "p-{size}"\nrepo = "o/p{size}{seed}"\nseeds = [1]\n'
                                                    'sizes = ["1m"]\npopulation = "x/{size}"\n', "no path parts"),
    "a width": ('repo = "o/p{seed:0999999999}"\nseeds = [1]\n', r"gives the placeholder \{seed:0999999999\} a format"),
    "a conversion": ('repo = "o/p{seed!r}"\nseeds = [1]\n', "a format"),
    "a nested width": ('name = "p-{size}"\nrepo = "o/p{seed:{size}}"\nseeds = [1]\nsizes = ["1m"]\n', "a format"),
    "an attribute": ('repo = "o/p{seed.real}"\nseeds = [1]\n', r"placeholder \{seed.real\}; allowed"),
}


@pytest.mark.parametrize("case", list(POPULATION_REFUSALS))
def test_population_entries_that_would_miscount_escape_or_hang_are_refused(case):
    body, says = POPULATION_REFUSALS[case]
    text = "[[models]]\n" + ("" if body.startswith("name") else 'name = "p"\n') + body + POPULATION_REVS
    with pytest.raises(PanelError, match=says) as info:
        parse(text)
    assert len(str(info.value)) < 600


def test_two_entries_of_one_population_on_one_repo_are_refused():
    text = ('[[models]]\nname = "p"\nrepo = "o/p{seed}"\nseeds = [1, 2]\n' + POPULATION_REVS
            + '[[models]]\nname = "q"\nrepo = "o/p1"\npopulation = "p"\nrole = "candidate"\n' + POPULATION_REVS)
    with pytest.raises(PanelError, match="members p-seed1, q load the same repo 'o/p1'"):
        parse(text)


def test_a_megabyte_width_is_refused_at_once_with_a_short_message():
    import time

    started = time.process_time()
    with pytest.raises(PanelError, match="a format") as info:
        parse('[[models]]\nname = "p"\nrepo = "o/p{seed:0' + "9" * 1_000_000 + '}"\nseeds = [1]\n' + POPULATION_REVS)
    assert time.process_time() - started < 5 and len(str(info.value)) < 600


def test_distinct_repos_and_plain_population_names_are_accepted():
    models = parse('[[models]]\nname = "p"\nrepo = "o/p{seed}"\nseeds = [1, 2, 1234]\nseed_repos = { 1234 = "o/p" }\n'
                   'population = "pythia.160m_x-1"\n' + POPULATION_REVS).models
    assert [m.repo for m in models] == ["o/p1", "o/p2", "o/p"]
    assert {m.member.population for m in models} == {"pythia.160m_x-1"}


def test_a_panel_of_a_million_stray_keys_or_a_megabyte_name_gets_a_short_message():
    stray = "".join(f"k{i} = 1\n" for i in range(100_000))
    with pytest.raises(PanelError, match=r"unknown key\(s\) k0, k1, .* and 99990 more") as info:
        parse('[[models]]\nname = "m"\nrepo = "o/m"\nrevisions = ["step1"]\n' + stray)
    assert len(str(info.value)) < 1000
    with pytest.raises(PanelError, match="used in test ids") as info:
        parse(f'[[models]]\nname = "{"x" * 1_000_000} y"\nrepo = "o/m"\nrevisions = ["step1"]\n')
    assert len(str(info.value)) < 1000
