"""Miniature model organisms for the benchmarks' smoke tier (tests/test_benchmarks_smoke.py).

``shrink_organisms()`` replaces, in this process, every organism of ``ORGANISMS`` that does not grow
by its first ``SMOKE_STEPS`` steps (checkpoints ``SMOKE_CHECKPOINTS``) probed with ``SMOKE_PROBE``
(32 examples): training and measuring one takes about a second, so a benchmark's ``--smoke`` runs
its whole path (training children, in-training probe, reading the records, its table) in seconds.
Its checkpoints are not the shipped organisms' (their recipe differs), so they never pass for them.

``python -m headwatch_testing.tiny_organisms --family F ...`` is the training child
(``headwatch.training.training_child``) with the same miniatures. A benchmark's ``--smoke`` calls
:func:`use_miniatures` and passes what it returns as ``train_in_subprocesses(module=...)``.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from headwatch.model_organisms import ORGANISMS
from headwatch.probes.record import ProbeSettings

#: The training child that trains the miniatures.
CHILD_MODULE = "headwatch_testing.tiny_organisms"
SMOKE_STEPS = 4
SMOKE_CHECKPOINTS = (0, 2, 4)
#: The organisms' probe (T = 68, the same token range) on 32 examples: well under a second a checkpoint.
SMOKE_PROBE = ProbeSettings(n_examples=32, seq_len=68, vocab_lo=16, vocab_hi=512, seed=42, n_pr=16,
                            batch_size=16, n_bootstrap=20, sink_examples=16)


def shrink_organisms() -> None:
    """Make every non-growing organism of ``ORGANISMS`` (in this process) its miniature."""
    for name, organism in list(ORGANISMS.items()):
        if organism.recipe.growth is not None:
            continue  # a grown recipe's growth step lies beyond the miniature's steps
        recipe = dataclasses.replace(organism.recipe, total_steps=SMOKE_STEPS, checkpoints=SMOKE_CHECKPOINTS)
        ORGANISMS[name] = dataclasses.replace(organism, recipe=recipe, probe=SMOKE_PROBE)


def use_miniatures() -> str:
    """Shrink the organisms in this process and put ``testing/`` first on the PYTHONPATH its children
    inherit (where CHILD_MODULE lives); returns CHILD_MODULE."""
    shrink_organisms()
    testing = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = testing + (os.pathsep + path if path else "")
    return CHILD_MODULE


def main(argv: list[str] | None = None) -> int:
    shrink_organisms()
    from headwatch.training.training_child import main as training_child_main

    return training_child_main(argv)


if __name__ == "__main__":
    sys.exit(main())
