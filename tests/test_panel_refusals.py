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
