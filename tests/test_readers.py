"""Readers trust nothing they open: only regular files of bounded size, JSON of bounded depth, names
that stay inside their folder.

A FIFO where a record or cache entry should be used to block forever; an endless file behind a
weights symlink was hashed until memory or time ran out; a symlink loop was a traceback; deeply
nested JSON raised RecursionError; a local revision ``../other`` measured another model's checkpoint
and reported it as that revision (docs/hostile-inputs.md, "Readers" and "Names that leave their
folder"). Each case here must end at once with the thing named, as bad input.
"""
from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from headwatch.files import MAX_JSON_DEPTH, MissingFile, UnreadableFile, inside, nesting_depth, read_bounded, read_json
from headwatch.fixtures import loading, preflight
from headwatch.fixtures.cache import CacheKey, CorruptEntryWarning, MeasurementCache
from headwatch.fixtures.panels import PanelError, load_panel
from headwatch.fixtures.reference import PUBLISHED_DIR, ReferenceFormatError, load_records_dir
from headwatch.probes.record import MeasurementRecord, ProbeSettings, RecordError
from headwatch.validation import InputError

PYTHIA = PUBLISHED_DIR / "EleutherAI--pythia-1b"


def finishes(fn, seconds: float = 20.0):
    """``fn()`` run in a thread that must finish within ``seconds`` (a reader that blocks fails the
    test instead of hanging it); returns what it returned or raises what it raised."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still reading after {seconds} s: it blocked"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture
def specials(tmp_path) -> dict[str, Path]:
    """A FIFO, a folder, a symlink loop, a dangling link, a link to /dev/zero, a file over the bound."""
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "folder.json").mkdir()
    os.symlink(tmp_path / "loop-b.json", tmp_path / "loop-a.json")
    os.symlink(tmp_path / "loop-a.json", tmp_path / "loop-b.json")
    os.symlink(tmp_path / "gone.json", tmp_path / "dangling.json")
    os.symlink("/dev/zero", tmp_path / "zero.json")
    with open(tmp_path / "big.json", "wb") as f:
        f.truncate(5000)  # sparse: the bound is checked before a byte is read
    return {"fifo": tmp_path / "fifo.json", "folder": tmp_path / "folder.json", "loop": tmp_path / "loop-a.json",
            "dangling": tmp_path / "dangling.json", "zero": tmp_path / "zero.json", "big": tmp_path / "big.json"}


SAYS = {"fifo": "a FIFO", "folder": "a folder", "loop": "symlink loop", "dangling": "does not exist",
        "zero": "a character device", "big": "over the 4,096-byte bound"}


@pytest.mark.parametrize("kind", list(SAYS))
def test_only_regular_files_of_bounded_size_are_read(specials, kind):
    with pytest.raises(UnreadableFile, match=SAYS[kind]) as info:
        finishes(lambda: read_bounded(specials[kind], "ref", 4096))
    assert str(specials[kind]) in str(info.value) and isinstance(info.value, InputError)
    if kind == "dangling":
        assert isinstance(info.value, MissingFile)


def test_json_nesting_is_bounded_before_parsing(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)  # json.loads alone: RecursionError
    with pytest.raises(UnreadableFile, match=f"nests 100000 levels deep, over the bound of {MAX_JSON_DEPTH}"):
        read_json(deep)
    assert nesting_depth('{"a": [1, {"b": "[[[{{{"}], "c": "\\\\"}') == 3  # brackets in strings do not count
    record = json.loads((PYTHIA / "step256.json").read_text())
    assert nesting_depth(json.dumps(record)) <= 6 < MAX_JSON_DEPTH


def test_nesting_depth_with_and_without_escapes_agrees_with_the_plain_scan():
    """nesting_depth skips to quotes and brackets first where the text has no backslash (issue 33: a
    population audit reads thousands of records); on any text it counts as a plain scan does."""
    import random
    import re

    strings = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')

    def plain(data: bytes) -> int:
        depth = deepest = 0
        for c in strings.sub(b"", data):
            if c in b"[{":
                depth += 1
                deepest = max(deepest, depth)
            elif c in b"]}":
                depth -= 1
        return deepest

    rng = random.Random(0)
    for _ in range(20_000):
        text = bytes(rng.choice(b'"[]{}a \\') for _ in range(rng.randint(0, 30)))
        assert nesting_depth(text) == plain(text), text
    assert nesting_depth('"[" [ "\\" ]') == 1 and nesting_depth('{"a": "\\"[["}') == 1


@pytest.mark.parametrize("kind", ["fifo", "zero", "loop", "deep"])
def test_a_record_that_is_not_a_regular_file_of_json_is_named(tmp_path, specials, kind):
    folder = tmp_path / "ref"
    shutil.copytree(PYTHIA, folder)
    target = folder / "step256.json"
    target.unlink()
    if kind == "deep":
        target.write_text('{"schema": ' + "[" * 5000 + "]" * 5000 + "}")
    else:
        os.symlink(specials[kind], target)
    with pytest.raises(ReferenceFormatError, match="step256.json") as info:
        finishes(lambda: load_records_dir(folder))
    assert {"fifo": "a FIFO", "zero": "character device", "loop": "symlink loop", "deep": "levels deep"}[kind] \
        in str(info.value)


@pytest.mark.parametrize("kind", ["fifo", "deep", "list"])
def test_a_cache_entry_that_cannot_be_read_is_moved_aside_and_recomputed(tmp_path, kind):
    cache = MeasurementCache(tmp_path / "m", lock_dir=None)
    record = MeasurementRecord.from_json(PYTHIA / "step256.json")
    key = CacheKey.make("m", "step256", "id", ProbeSettings())
    path = cache.path_for(key)
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_text("[" * 3000 + "]" * 3000 if kind == "deep" else "[1, 2]")
    with pytest.warns(CorruptEntryWarning, match="FIFO" if kind == "fifo" else "levels deep" if kind == "deep" else ""):
        result = finishes(lambda: cache.get_or_compute(key, lambda: record))
    assert result.status == "recomputed-corrupt" and path.is_file()
    assert path.with_name(path.name + ".corrupt").exists()


@pytest.mark.parametrize("kind", ["zero", "fifo", "loop", "dangling"])
def test_weights_behind_a_symlink_that_never_ends_are_named_not_hashed(tmp_path, checkpoint, specials, kind):
    run = tmp_path / "run"
    shutil.copytree(checkpoint, run / "step0")
    weights = run / "step0" / "model.safetensors"
    weights.unlink()
    os.symlink(specials[kind], weights)
    with pytest.raises(InputError, match="model.safetensors") as info:
        finishes(lambda: loading.resolve_local(run, "step0"))
    assert {"zero": "character device", "fifo": "a FIFO", "loop": "symlink loop", "dangling": "does not exist"}[kind] \
        in str(info.value)


def test_an_endless_weights_file_is_refused_by_measure(headwatch_cli, tmp_path, checkpoint):
    run = tmp_path / "run"
    shutil.copytree(checkpoint, run / "step0")
    (run / "step0" / "model.safetensors").unlink()
    os.symlink("/dev/zero", run / "step0" / "model.safetensors")
    r = finishes(lambda: headwatch_cli("measure", "--model", run / "step0", "--device", "cpu", "--n-examples", "8",
                                       "--n-pr", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300",
                                       "--out", tmp_path / "o.json"), 120)
    assert r.code == 2 and "character device" in r.err and "Traceback" not in r.err, r.err[-2000:]


# ---- names that leave their folder ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["../other", "/abs/step0", "step0/../../other", ""])
def test_a_name_that_leaves_its_folder_is_refused(tmp_path, name):
    with pytest.raises(InputError, match="leaves"):
        inside(tmp_path, name, "revision")
    assert inside(tmp_path, "sub/step1", "revision") == tmp_path / "sub" / "step1"


def test_a_local_revision_outside_the_models_folder_is_refused(tmp_path, checkpoint, headwatch_cli):
    """``../other`` once measured the other model's checkpoint and recorded it as this model's revision."""
    shutil.copytree(checkpoint, tmp_path / "other")
    (tmp_path / "run").mkdir()
    with pytest.raises(InputError, match=r"'\.\./other' leaves"):
        loading.resolve_local(tmp_path / "run", "../other")
    panel = tmp_path / "p.toml"
    panel.write_text(f'[[models]]\nname = "m"\nrepo = "{tmp_path / "run"}"\nsource = "local"\n'
                     'revisions = ["../other"]\ntokens = { table = { "../other" = 1 } }\n')
    r = headwatch_cli("judge", "--panel", panel, "--cache-dir", tmp_path / "cache")
    assert r.code == 2 and "../other" in r.err and not (tmp_path / "cache" / "measurements").exists(), r.err[-2000:]


def test_a_shard_outside_the_checkpoint_is_refused(tmp_path, checkpoint):
    folder = tmp_path / "step0"
    shutil.copytree(checkpoint, folder)
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"embed_out.weight": "../elsewhere/model.safetensors"}}))
    with pytest.raises(preflight.CorruptWeightsError, match="leaves"):
        preflight.check_safetensors_files(folder)


def test_a_hub_cache_ref_that_is_not_a_commit_is_never_followed(tmp_path):
    refs = tmp_path / "models--org--m" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("../../../../etc")
    with pytest.raises(loading.NotInCache, match="not a commit hash"):
        loading.resolve_revision("org/m", "main", cache_dir=str(tmp_path), offline=True)


# ---- panels -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "loop", "deep"])
def test_a_panel_file_that_cannot_be_read_is_named(tmp_path, specials, kind):
    path = {"fifo": specials["fifo"], "loop": specials["loop"]}.get(kind, tmp_path / "deep.toml")
    if kind == "deep":
        path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(PanelError, match={"fifo": "a FIFO", "loop": "symlink loop", "deep": "nests"}[kind]):
        finishes(lambda: load_panel(path))
