"""Pickle-only checkpoints (``pytorch_model.bin``): refused by default, read with an explicit opt-in
(panel ``allow_pickle = true``, ``headwatch measure --allow-pickle``) through
``torch.load(weights_only=True)`` only; safetensors preferred where a revision has both; what was
read in the record's provenance. Offline, from a Hub-format cache and local folders.
"""
from __future__ import annotations

import json
import pathlib
from pathlib import Path

import pytest

from headwatch.fixtures import loading
from headwatch.hubcache import repo_folder, write_ref
from headwatch.fixtures.panels import PanelError, load_panel, parse_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch_testing.tiny import tiny_model
from headwatch_testing.tinypanel import checkpoint_files

REPO = "tiny-org/gpt2-bin"
ARGS = ["--n-examples", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300", "--n-pr", "8",
        "--batch-size", "4", "--device", "cpu"]


class RunsCode:
    """Unpickling this would create ``marker``: the proof that a pickle ran code on load."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


def snapshot(cache: Path, revision: str, files: dict[str, bytes]) -> str:
    """Write ``files`` as branch ``revision`` of REPO in a Hub-format cache; return its commit."""
    import hashlib

    commit = hashlib.sha1(f"{REPO}@{revision}".encode()).hexdigest()
    folder = repo_folder(cache, REPO) / "snapshots" / commit
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    write_ref(cache, REPO, revision, commit)
    return commit


@pytest.fixture(scope="module")
def models():
    return {seed: tiny_model("gpt2", seed=seed, attn_implementation="eager") for seed in (0, 1)}


@pytest.fixture(scope="module")
def hub(tmp_path_factory, models) -> Path:
    """GPT-2 revisions: a pickle only (step0), both formats holding different weights (step1: which
    one was read shows in the weights hash), a pickle that runs code (step2)."""
    import io

    import torch

    cache = tmp_path_factory.mktemp("hub")
    snapshot(cache, "step0", checkpoint_files(models[0], "pickle"))
    both = checkpoint_files(models[1], "safetensors")
    both["pytorch_model.bin"] = checkpoint_files(models[0], "pickle")["pytorch_model.bin"]
    snapshot(cache, "step1", both)
    evil = checkpoint_files(models[0], "pickle")
    buffer = io.BytesIO()
    torch.save({"transformer.wte.weight": RunsCode(cache / "RAN")}, buffer)
    evil["pytorch_model.bin"] = buffer.getvalue()
    snapshot(cache, "step2", evil)
    return cache


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def panel(hub: Path, tmp_path: Path, revisions: list[str], allow: str | None, probe: str) -> Path:
    revs = ", ".join(f'"{r}"' for r in revisions)
    key = f"allow_pickle = {allow}\n" if allow is not None else ""
    path = tmp_path / "p.toml"
    path.write_text(f'[[models]]\nname = "gpt2-bin"\nrepo = "{REPO}"\nsource = "hub"\nrevisions = [{revs}]\n'
                    f'tokens = {{ per_step = 1000 }}\nhub_cache_dir = "{hub}"\n{key}{probe}')
    return path


@pytest.fixture
def records(hub, tmp_path, tiny_probe):
    """``records(revisions, allow)``: REPO's records measured through a panel (``allow_pickle = allow``,
    or no such key for None)."""
    def measure(revisions: list[str], allow: str | None):
        pm = load_panel(panel(hub, tmp_path, revisions, allow, tiny_probe)).models[0]
        return Provider(ProviderOptions(cache_dir=tmp_path / "hw", device="cpu", progress=False)).model_records(pm)
    return measure


def test_a_pickle_only_revision_is_refused_by_default_naming_the_opt_in(records):
    with pytest.raises(loading.NoSafetensorsError) as e:
        records(["step0"], None)
    msg = str(e.value)
    assert "no safetensors weights (found: pytorch_model.bin)" in msg and "can run code" in msg
    assert "allow_pickle = true" in msg and "--allow-pickle" in msg and "weights_only=True" in msg


def test_with_the_opt_in_it_loads_through_weights_only_and_says_so(records, models, monkeypatch):
    import torch

    calls = []
    real_load = torch.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    (record,) = records(["step0"], "true")
    assert calls and all(w is True for w in calls)  # torch.load, and only ever with weights_only=True
    assert record.provenance["weights_format"] == "pickle"
    assert record.provenance["weight_files"] == ["pytorch_model.bin"]
    assert record.provenance["weights_hash"] == loading.weights_hash(models[0])
    assert record.n_layers == 2 and record.n_heads == 4


def test_safetensors_are_read_where_a_revision_has_both(records, hub, models):
    (record,) = records(["step1"], "true")
    assert record.provenance["weights_format"] == "safetensors"
    assert record.provenance["weight_files"] == ["model.safetensors"]
    assert record.provenance["weights_hash"] == loading.weights_hash(models[1]) != loading.weights_hash(models[0])
    resolved = loading.resolve_revision(REPO, "step1", cache_dir=str(hub))  # no opt-in needed for it
    assert resolved.weights_format == "safetensors"


def test_a_pickle_that_runs_code_is_refused_even_with_the_opt_in(hub, tmp_path):
    resolved = loading.resolve_revision(REPO, "step2", cache_dir=str(hub), allow_pickle=True)
    assert resolved.weights_format == "pickle"
    with pytest.raises(loading.UnsafePickleError) as e:
        loading.load_checkpoint(resolved)
    msg = str(e.value)
    assert "torch.load(weights_only=True) refused them" in msg and "Unsupported global" in msg
    assert "never loads such a pickle" in msg and "safetensors" in msg
    assert not (hub / "RAN").exists()  # nothing ran


def test_other_pickles_are_never_weights(tmp_path, models):
    """A folder with only training_args.bin (a Trainer's pickle, not weights) has nothing to read."""
    folder = tmp_path / "run" / "step0"
    folder.mkdir(parents=True)
    files = checkpoint_files(models[0], "pickle")
    (folder / "config.json").write_bytes(files["config.json"])
    (folder / "training_args.bin").write_bytes(files["pytorch_model.bin"])
    with pytest.raises(loading.NoSafetensorsError, match=r"found: training_args\.bin.*allow_pickle is set, but"):
        loading.resolve_local(tmp_path / "run", "step0", allow_pickle=True)


def test_allow_pickle_is_a_boolean_panel_key():
    base = '[[models]]\nname = "m"\nrepo = "org/m"\nsource = "hub"\nrevisions = ["step1"]\ntokens = { per_step = 1 }\n'
    assert parse_panel(base, name="p", path=Path("p.toml")).models[0].allow_pickle is False
    assert parse_panel(base + "allow_pickle = true\n", name="p", path=Path("p.toml")).models[0].allow_pickle is True
    with pytest.raises(PanelError, match="allow_pickle"):
        parse_panel(base + 'allow_pickle = "yes"\n', name="p", path=Path("p.toml"))


def test_headwatch_measure_allow_pickle(tmp_path, models, headwatch_cli):
    folder = tmp_path / "run" / "step0"
    folder.mkdir(parents=True)
    for name, data in checkpoint_files(models[0], "pickle").items():
        (folder / name).write_bytes(data)
    out = tmp_path / "r.json"
    refused = headwatch_cli("measure", "--model", folder, "--out", out, *ARGS)
    assert refused.code == 2 and "--allow-pickle" in refused.err and not out.exists()
    done = headwatch_cli("measure", "--model", folder, "--out", out, "--allow-pickle", *ARGS)
    assert done.code == 0, done.err
    provenance = json.loads(out.read_text())["provenance"]
    assert provenance["weights_format"] == "pickle" and provenance["weight_files"] == ["pytorch_model.bin"]
    assert provenance["weights_hash"] == loading.weights_hash(models[0])


def _damaged(kind: str, good: bytes) -> bytes:
    """A pytorch_model.bin damaged as ``kind`` (the user's file: bad input, never an internal error)."""
    import io

    import torch

    if kind == "empty":
        return b""
    if kind == "truncated":
        return good[: len(good) // 2]
    if kind == "not a pickle":
        return b"\x80\x04pickle"
    state = torch.load(io.BytesIO(good), weights_only=True)
    buffer = io.BytesIO()
    if kind == "a string for a tensor":
        state[next(iter(state))] = "not a tensor"
        torch.save(state, buffer)
    elif kind == "a list":
        torch.save(list(state.values()), buffer)
    return buffer.getvalue()


DAMAGED_PICKLES = {"empty": "empty file", "truncated": "cut short or damaged", "not a pickle": "not a PyTorch weights file",
                   "a string for a tensor": "holds a str, not a tensor", "a list": "holds a list, not a state dict"}


@pytest.mark.parametrize("kind", sorted(DAMAGED_PICKLES))
def test_a_damaged_pickle_is_bad_input_naming_the_file(tmp_path, models, headwatch_cli, kind):
    """With --allow-pickle, an empty, cut-short or garbled .bin, a string in place of a tensor and a
    pickled list end in exit 2 naming the file and what is wrong (they were exit 3, or named neither)."""
    folder = tmp_path / "run" / "step0"
    folder.mkdir(parents=True)
    for name, data in checkpoint_files(models[0], "pickle").items():
        (folder / name).write_bytes(_damaged(kind, data) if name == "pytorch_model.bin" else data)
    out = tmp_path / "r.json"
    done = headwatch_cli("measure", "--model", folder, "--out", out, "--allow-pickle", *ARGS)
    assert done.code == 2, done.err
    assert "Traceback" not in done.err and "internal error" not in done.err
    assert f"{folder / 'pytorch_model.bin'}:" in done.err and DAMAGED_PICKLES[kind] in done.err, done.err
    assert not out.exists()


def test_a_damaged_pickle_from_the_hub_is_named_after_the_download(hub, models):
    """Weights resolved online are on disk only once from_pretrained has downloaded them: a load that
    fails then is diagnosed on the downloaded file (here: a Hub-format cache, resolved as online)."""
    import dataclasses

    files = checkpoint_files(models[0], "pickle")
    files["pytorch_model.bin"] = _damaged("a string for a tensor", files["pytorch_model.bin"])
    snapshot(hub, "step9", files)
    resolved = loading.resolve_revision(REPO, "step9", cache_dir=str(hub), allow_pickle=True)
    online = dataclasses.replace(resolved, kind="hub", path=None)  # as resolve_revision returns it online
    with pytest.raises(loading.preflight.CorruptWeightsError, match=r"pytorch_model\.bin: entry .* holds a str"):
        loading.load_checkpoint(online, offline=True)
