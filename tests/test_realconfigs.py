"""The published facts of the checkpoint suites (fixtures/realconfigs.py): branch names, tokens per
step and repo names, checked against figures their sources state independently."""
from __future__ import annotations

import re

from headwatch.fixtures.realconfigs import (CRFM_GPT2_SMALL, MISTRAL_SCHEDULE, POLYPYTHIA, PYTHIA_SCHEDULE,
                                            REAL_MODELS, SUITES, PAPER_MODELS, PYTHIA_SUITE)


def test_pythia_schedule_is_the_154_published_branches_and_the_model_cards_token_total():
    branches = PYTHIA_SCHEDULE.branches
    assert len(branches) == 154 and branches[:3] == ("step0", "step1", "step2") and branches[-1] == "step143000"
    assert [b for b in branches if int(b[4:]) < 1000] == ["step0"] + [f"step{2 ** i}" for i in range(10)]
    assert [int(b[4:]) for b in branches if int(b[4:]) >= 1000] == list(range(1000, 143_001, 1000))
    assert PYTHIA_SCHEDULE.tokens_per_step == 1024 * 2048
    assert PYTHIA_SCHEDULE.total_tokens == 299_892_736_000  # "trained on 299,892,736,000 tokens"


def test_mistral_schedule_is_609_checkpoints_of_512_sequences_of_1024_tokens():
    steps = MISTRAL_SCHEDULE.steps
    assert len(steps) == 609 and steps[0] == 0 and steps[-1] == 400_000 and list(steps) == sorted(set(steps))
    gaps = {(a, b - a) for a, b in zip(steps, steps[1:])}
    assert {g for a, g in gaps if a < 100} == {10} and {g for a, g in gaps if 100 <= a < 2000} == {50}
    assert {g for a, g in gaps if 2000 <= a < 20_000} == {100} and {g for a, g in gaps if a >= 20_000} == {1000}
    assert MISTRAL_SCHEDULE.tokens_per_step == 524_288


def test_step_patterns_capture_every_branch_step():
    for schedule in (PYTHIA_SCHEDULE, MISTRAL_SCHEDULE):
        assert [int(re.fullmatch(schedule.step_pattern, b).group(1)) for b in schedule.branches] == list(schedule.steps)


def test_suite_repos_name_their_published_config():
    assert len(POLYPYTHIA.repos) == 5 * 9 + 5 + 6 and len(CRFM_GPT2_SMALL.repos) == 5
    assert POLYPYTHIA.repos["EleutherAI/pythia-160m-weight-seed2"] == "pythia-160m"
    assert CRFM_GPT2_SMALL.repos["stanford-crfm/expanse-gpt2-small-x777"] == "mistral-gpt2-small"
    for suite in SUITES.values():
        for repo, row in suite.repos.items():
            assert row in REAL_MODELS and (REAL_MODELS[row].sources or row in PAPER_MODELS), repo
    assert len(PYTHIA_SUITE.repos) == 16 and PYTHIA_SUITE.repos["EleutherAI/pythia-6.9b-deduped"] == "pythia-6.9b"
    assert REAL_MODELS["mistral-gpt2-small"].weight_files == ("pytorch_model.bin",)


def test_the_written_parameter_counts_are_those_of_each_configs_meta_build():
    """PARAMETER_COUNTS (what an estimate reads without torch) equals ``parameter_counts`` of a
    meta-device build of every row's published config, and covers every row."""
    from headwatch.fixtures.estimate import counted_parameters
    from headwatch.fixtures.realconfigs import PARAMETER_COUNTS, REAL_MODELS

    assert set(PARAMETER_COUNTS) == set(REAL_MODELS)
    for name, written in PARAMETER_COUNTS.items():
        assert counted_parameters(name) == written, name
