"""Root conftest: hypothesis profiles, and ``--dist`` without xdist.

The options, panels, fixtures and report of the claim tests come from the headwatch pytest plugin
(headwatch/plugin.py), which the editable install registers through its ``pytest11`` entry point;
registering it here too would load it twice. pytest runs with ``--import-mode=importlib``
(pyproject.toml), so this folder is never put on sys.path: code imports ``headwatch.*`` only.

Hypothesis: with ``CI`` set (``.ci/run`` sets it) the ``ci`` profile runs: derandomized (every run
tries the same examples, so a red CI run is reproducible and a green one is not luck) and with no
example database (nothing a previous run found is carried into the next). Otherwise the ``dev``
profile: random examples, and hypothesis' usual database under .hypothesis/ so that a failure found
locally is replayed first. Neither has a per-example deadline: a test process yields the CPU to
organism training beside it (``--train``), and a wall-clock deadline would then fail on the machine's
load, not on the code (speed is measured in benchmarks/, never asserted). Per-test ``@settings``
(max_examples) apply on top of either.
The profile of this run is printed in pytest's header by hypothesis.

``--dist``: pyproject's addopts pass ``--dist load`` (xdist's option); with ``-p no:xdist``
nobody would define it and every run would stop with "unrecognized arguments: --dist". Here, and
only when xdist is blocked, it is accepted and ignored (this file is the project's own: foreign
suites never see it).
"""
from __future__ import annotations

import os

try:
    from hypothesis import settings
except ImportError:  # the test extra is not installed: nothing to configure
    settings = None

if settings is not None:
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
    settings.register_profile("dev", print_blob=True, deadline=None)
    settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_addoption(parser, pluginmanager) -> None:
    if pluginmanager.is_blocked("xdist"):
        parser.addoption("--dist", default="no", help="ignored: xdist is disabled (-p no:xdist)")
