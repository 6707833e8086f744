"""Test harness of headwatch: not installed with the package (the wheel ships only ``headwatch``).

Importable by the test suite (pyproject's pytest ``pythonpath`` puts ``testing/`` on ``sys.path``, and
``tests/conftest.py`` puts it on ``PYTHONPATH`` for the processes tests start: pool, Ray and submitit
workers, pytest and ``python -c`` children), by ``benchmarks/`` and by ``tools/hostile_inputs.py``
(each puts ``testing/`` on its path first).

- :mod:`.tiny`: tiny random-init models of every supported architecture, and config-faithful
  miniatures of the paper's models (published configs with only their sizes shrunk).
- :mod:`.tinypanel`: tiny random-init checkpoints saved as a Hub-format cache or a local run, and
  panels naming them.
- :mod:`.broken`: checkpoints broken the ways a careless save, copy or edit breaks them.
- :mod:`.faults`: measure functions that misbehave on purpose (sleep, die mid-write).
- :mod:`.random_checkpoint`: full-size random-init checkpoints written one layer at a time.
- :mod:`.tiny_organisms`: miniature organism recipes and their training child, for the organism
  benchmarks' ``--smoke`` (tests/test_benchmarks_smoke.py).
"""
from __future__ import annotations

from pathlib import Path

#: The folder to put on ``sys.path`` / ``PYTHONPATH`` (the parent of this package).
PATH_ENTRY = Path(__file__).resolve().parent.parent
