"""Root conftest: intentionally empty.

The options, panels, fixtures and report of the claim tests come from the headwatch pytest plugin
(headwatch/plugin.py), which the editable install registers through its ``pytest11`` entry point;
registering it here too would load it twice. pytest runs with ``--import-mode=importlib``
(pyproject.toml), so this folder is never put on sys.path: code imports ``headwatch.*`` only.
"""
