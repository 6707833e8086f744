"""The numeric path organisms train on: pinned by default, recorded in every checkpoint.

These tests compare runs on one machine only. Nothing here (or anywhere in the suite) asserts that
two machines compute the same bits: the organisms' recipes are checked to form their circuits on
every path instead (benchmarks/organisms_matrix.py).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from headwatch.model_organisms import numerics

needs_avx2 = pytest.mark.skipif(not numerics.can_pin(),
                                reason="the pinned path needs an x86-64 CPU with AVX2 and FMA")

# Eight updates of the real GPTNeoX recipe, in a fresh process (the paths are read when torch loads);
# prints the weights' hash and what describe_numerics() recorded in the checkpoint.
CHILD = """
import dataclasses, hashlib, json, sys
from headwatch.hubcache import cached_revisions
from headwatch.model_organisms import ORGANISMS
from headwatch.model_organisms.train import read_checkpoint_meta, repo_id, train
recipe = dataclasses.replace(ORGANISMS["gptneox"].recipe, total_steps=8, checkpoints=(0, 8))
train(recipe, seed=0, cache_dir=sys.argv[1], progress=False, threads=1)
repo = repo_id("gptneox", 0)
print(json.dumps({"commit": cached_revisions(sys.argv[1], repo)["step8"],
                  "training": read_checkpoint_meta(sys.argv[1], repo, "step8")["training"]}))
"""


def train_child(tmp_path, name: str, caller_env: dict[str, str]) -> dict:
    env = numerics.training_env(caller_env)
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / name)], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items()
            if k not in numerics.PATH_VARS and k != numerics.MODE_ENV}


def test_training_env_is_one_thread_and_keeps_the_rest():
    env = numerics.training_env({"PATH": "/bin", "OMP_NUM_THREADS": "8"})
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["PATH"] == "/bin"


@needs_avx2
def test_pinned_mode_overrides_the_callers_paths():
    env = numerics.training_env({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"})
    assert {k: env[k] for k in numerics.PATH_VARS} == numerics.PINNED.env()


def test_native_mode_keeps_the_callers_paths():
    caller = {numerics.MODE_ENV: "native", "ATEN_CPU_CAPABILITY": "default"}
    env = numerics.training_env(caller)
    assert env["ATEN_CPU_CAPABILITY"] == "default" and "MKL_CBWR" not in env


def test_an_unknown_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="pinned, native"):
        numerics.training_env({numerics.MODE_ENV: "fast"})


@needs_avx2
@pytest.mark.slow
def test_pinned_training_ignores_the_callers_path_and_records_it(tmp_path):
    """Same commit whatever ATen path the caller's environment asks for; the pin is in the metadata."""
    plain = train_child(tmp_path, "plain", base_env())
    other = train_child(tmp_path, "other", {**base_env(), "ATEN_CPU_CAPABILITY": "default",
                                            "MKL_CBWR": "COMPATIBLE"})
    assert plain["commit"] == other["commit"]
    assert plain["training"]["mode"] == "pinned"
    assert plain["training"]["aten_capability"] == "AVX2"
    assert plain["training"]["MKL_CBWR"] == "AVX2" and plain["training"]["threads"] == 1


@pytest.mark.slow
def test_native_training_records_the_path_it_took(tmp_path):
    run = train_child(tmp_path, "native", {**base_env(), numerics.MODE_ENV: "native",
                                           "ATEN_CPU_CAPABILITY": "default"})
    assert run["training"]["mode"] == "native"
    assert run["training"]["aten_capability"] == "DEFAULT"
    assert run["training"]["ATEN_CPU_CAPABILITY"] == "default"
