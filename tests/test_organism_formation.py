"""The formation test's negative control on a real organism (issue 11): a deliberately broken recipe.

The shipped GPTNeoX recipe, stopped after 40 of its 2000 steps (long before its loss leaves the
plateau), trained for real and measured with the suite's probe: judged against what the organisms
panel declares for GPTNeoX, formation must fail red, with the measured numbers and the numeric
path the checkpoint was trained on in its message.
"""
from __future__ import annotations

import dataclasses

import pytest

from headwatch.claims.judge import judge_formation
from headwatch.claims.verdict import Status
from headwatch.model_organisms import ORGANISMS
from headwatch.model_organisms.train import read_checkpoint_meta, repo_id, revision_name, train
from headwatch.fixtures.panels import load_panel
from headwatch.probes.record import TRAINING_PROVENANCE

pytestmark = [pytest.mark.slow]


def test_formation_fails_red_on_a_recipe_stopped_before_its_transition(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from headwatch.probes.measure import measure

    organism = ORGANISMS["gptneox"]
    broken = dataclasses.replace(organism.recipe, total_steps=40, checkpoints=(0, 20, 40))
    train(broken, seed=0, cache_dir=tmp_path, progress=False, threads=1)
    repo = repo_id("gptneox", 0)
    probe = dataclasses.replace(organism.probe, n_examples=200, n_pr=50)
    records = []
    for step in broken.checkpoints:
        rev = revision_name(step)
        model = AutoModelForCausalLM.from_pretrained(repo, revision=rev, cache_dir=tmp_path, use_safetensors=True,
                                                     dtype=torch.float32)
        rec = measure(model, probe, model_name=repo, revision=rev, tokens_seen=step * broken.tokens_per_step,
                      progress=False)
        rec.provenance[TRAINING_PROVENANCE] = read_checkpoint_meta(tmp_path, repo, rev)["training"]
        records.append(rec)
    declared = next(m for m in load_panel("organisms").models if m.organism and m.organism.family == "gptneox")
    assert declared.expect.formation is not None, "the organisms panel must declare GPTNeoX's formation"

    verdict = judge_formation(records, declared.expect)

    assert verdict.status is Status.FAILS, f"a 40-step organism judged to have formed: {verdict.message}"
    assert verdict.message.startswith("did not form as declared"), verdict.message
    assert "0 heads" in verdict.message, verdict.message
    training = records[-1].provenance[TRAINING_PROVENANCE]
    assert training["aten_capability"] in verdict.message or str(training) in verdict.message, verdict.message
