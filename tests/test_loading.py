"""Revision resolution and loading, offline, from a Hub-format cache of tiny random-init models.

The cache is built in a temporary folder with the layout huggingface_hub keeps
(``models--org--name/refs/<revision>``, ``snapshots/<commit>/``); checkpoints are then loaded by
repo id and revision through the provider, the very path the paper panel takes.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from headwatch.fixtures import loading
from headwatch.hubcache import repo_folder, save_revision
from headwatch.fixtures.panels import PanelError, load_panel, parse_panel
from headwatch.fixtures.provider import IdenticalWeightsWarning, Provider, ProviderOptions
from headwatch_testing.tiny import tiny_model
from headwatch_testing.broken import BROKEN_CHECKPOINTS, save_broken_checkpoint
from headwatch_testing.tinypanel import TINY_PROBE_TOML
from headwatch_testing.tinypanel import save_tiny_revisions


REPOS = {
    # step10 and step20 share a seed: identical weights under two branch names
    "tiny-org/neox": ("gpt_neox", {"step0": 0, "step10": 1, "step20": 1, "step40": 2}),
    "tiny-org/olmo": ("olmo", {"step0": 0, "step8": 3}),
    "tiny-org/olmoe": ("olmoe", {"step0": 0, "step8": 4}),
}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Every test here runs offline and fails loudly if anything asks the Hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub

    def no_network(*a, **k):
        raise AssertionError("a test asked the Hub")

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_refs", no_network)
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", no_network)


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    """A Hub-format cache holding tiny GPTNeoX, OLMo and OLMoE repos."""
    cache = tmp_path_factory.mktemp("hub")
    for repo, (model_type, revisions) in REPOS.items():
        save_tiny_revisions(cache, repo, model_type, revisions)
    # a revision whose only weights are a pickle: must be refused, never unpickled
    snap = repo_folder(cache, "tiny-org/neox") / "snapshots" / ("b" * 40)
    snap.mkdir(parents=True)
    src = next((repo_folder(cache, "tiny-org/neox") / "snapshots").glob("*/config.json"))
    (snap / "config.json").write_text(src.read_text())
    (snap / "pytorch_model.bin").write_bytes(b"not a real pickle")
    (repo_folder(cache, "tiny-org/neox") / "refs" / "step-bin").write_text("b" * 40)
    return cache


def tiny_panel(hub: Path, tmp_path: Path, *, repos=REPOS, extra: str = "") -> str:
    """A user-style panel file over the tiny repos."""
    lines = ['[panel]\nname = "tiny"\n']
    for repo, (model_type, revisions) in repos.items():
        revs = ", ".join(f'"{r}"' for r in revisions)
        lines.append(
            f'[[models]]\nname = "{repo.split("/")[1]}"\nrepo = "{repo}"\nsource = "hub"\n'
            f'revisions = [{revs}]\ntokens = {{ per_step = 1000 }}\nhub_cache_dir = "{hub}"\n{extra}{TINY_PROBE_TOML}\n'
        )
    path = tmp_path / "tiny.toml"
    path.write_text("\n".join(lines))
    return str(path)


def provider(tmp_path: Path, **kw) -> Provider:
    """A session of its own (its memos and run info start empty)."""
    return Provider(ProviderOptions(cache_dir=tmp_path / "hw-cache", device="cpu", progress=False, **kw))


# ---- resolution -------------------------------------------------------------------------------


def test_branches_listed_offline_from_refs(hub):
    branches = loading.list_branches("tiny-org/neox", cache_dir=str(hub))
    assert {"step0", "step10", "step20", "step40", "step-bin"} <= set(branches)
    assert all(len(c) == 40 for c in branches.values())


def test_missing_revision_names_closest_branches(hub):
    with pytest.raises(loading.RevisionNotFound) as e:
        loading.resolve_revision("tiny-org/neox", "step4", cache_dir=str(hub))
    msg = str(e.value)
    assert "'step4'" in msg and "closest existing" in msg and "step40" in msg
    assert "hf download tiny-org/neox --revision step4" in msg  # offline: how to fill the cache


def test_repo_not_cached_offline_says_how_to_fill(hub):
    with pytest.raises(loading.NotInCache, match=r"not in the local Hub cache.*hf download EleutherAI/pythia-1b"):
        loading.resolve_revision("EleutherAI/pythia-1b", "step3000", cache_dir=str(hub))


def test_revision_without_safetensors_is_refused(hub):
    with pytest.raises(loading.NoSafetensorsError, match=r"no safetensors weights.*pytorch_model\.bin.*does not unpickle.*allow_pickle = true"):
        loading.resolve_revision("tiny-org/neox", "step-bin", cache_dir=str(hub))


def test_snapshot_missing_from_cache(hub, tmp_path):
    cache = tmp_path / "partial"
    (repo_folder(cache, "org/m") / "refs").mkdir(parents=True)
    (repo_folder(cache, "org/m") / "refs" / "step1").write_text("c" * 40)
    with pytest.raises(loading.NotInCache, match="snapshot is not in"):
        loading.resolve_revision("org/m", "step1", cache_dir=str(cache))


# ---- local folder panels -----------------------------------------------------------------------


def test_local_folder_without_config(tmp_path):
    (tmp_path / "ckpts" / "step5").mkdir(parents=True)
    (tmp_path / "ckpts" / "step5" / "model.safetensors").write_bytes(b"")
    with pytest.raises(loading.NoConfigError, match=r"no config\.json in .*step5"):
        loading.resolve_local(tmp_path / "ckpts", "step5")


def test_local_folder_missing_revision_and_folder(tmp_path):
    (tmp_path / "ckpts" / "step5").mkdir(parents=True)
    with pytest.raises(loading.RevisionNotFound, match=r"no revision 'step6'.*step5"):
        loading.resolve_local(tmp_path / "ckpts", "step6")
    with pytest.raises(loading.LoadingError, match="does not exist"):
        loading.resolve_local(tmp_path / "nowhere", "step5")


def test_local_folder_panel_loads_and_measures(tmp_path):
    root = tmp_path / "seed7"
    for i, rev in enumerate(["step0", "step100"]):
        tiny_model("gpt_neox", seed=i, attn_implementation="eager").save_pretrained(root / rev)
    panel_file = tmp_path / "seed7.toml"
    panel_file.write_text(
        '[[models]]\nname = "seed7"\nrepo = "seed7"\nsource = "local"\nrevisions = ["step100", "step0"]\n'
        "tokens = { per_step = 2048 }\n" + TINY_PROBE_TOML
    )
    pm = load_panel(panel_file).models[0]
    assert pm.repo == str(root.resolve())  # relative to the panel file
    records = provider(tmp_path).model_records(pm)
    assert [r.revision for r in records] == ["step0", "step100"]
    assert records[1].tokens_seen == 204800
    assert records[0].provenance["identity"].startswith("files:")


# ---- loading through the panel path ------------------------------------------------------------


def test_tiny_hub_models_load_by_repo_and_revision_offline(hub, tmp_path):
    panel = load_panel(tiny_panel(hub, tmp_path))
    session = provider(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        by_model = {pm.name: session.model_records(pm) for pm in panel.models}
    assert set(by_model) == {"neox", "olmo", "olmoe"}
    for name, records in by_model.items():
        model_type, revisions = REPOS[f"tiny-org/{name}"]
        assert [r.revision for r in records] == sorted(revisions, key=lambda r: int(r[4:]))
        assert [r.tokens_seen for r in records] == sorted(r.tokens_seen for r in records)
        for r in records:
            assert r.provenance["resolved_from"] == "hub-cache"
            assert r.provenance["commit"] == (repo_folder(hub, f"tiny-org/{name}") / "refs" / r.revision).read_text()
            assert r.n_layers == 2 and r.n_heads == 4 and len(r.all_head_selectivity) == 8
    neox = {r.revision: r.provenance["weights_hash"] for r in by_model["neox"]}
    assert neox["step10"] == neox["step20"] != neox["step0"]
    flagged = [w for w in caught if issubclass(w.category, IdenticalWeightsWarning)]
    assert len(flagged) == 1 and "step10, step20" in str(flagged[0].message)
    assert [g["revisions"] for g in session.run.identical_weights] == [["step10", "step20"]]


def test_identical_weights_helper():
    assert loading.identical_weights({"a": "h1", "b": "h2", "c": "h1", "d": None}) == [("a", "c")]


def test_weights_hash_tracks_weights():
    a, b, c = (tiny_model("gpt_neox", seed=s) for s in (0, 0, 1))
    assert loading.weights_hash(a) == loading.weights_hash(b) != loading.weights_hash(c)


def test_trust_remote_code_off_and_loader_arguments(hub, monkeypatch):
    import transformers

    seen = {}

    def fake_from_pretrained(repo, **kwargs):
        seen.update(kwargs, repo=repo)
        raise OSError("stop here")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", fake_from_pretrained)
    resolved = loading.resolve_revision("tiny-org/olmo", "step8", cache_dir=str(hub))
    with pytest.raises(loading.LoadingError, match="could not load tiny-org/olmo@step8"):
        loading.load_checkpoint(resolved)
    assert seen["repo"] == "tiny-org/olmo" and seen["revision"] == resolved.commit  # pinned, not the branch
    assert seen["trust_remote_code"] is False and seen["use_safetensors"] is True and seen["weights_only"] is True
    assert seen["attn_implementation"] == "eager" and seen["local_files_only"] is True
    assert seen["cache_dir"] == str(hub)
    assert load_panel("paper").models[0].trust_remote_code is False


def test_unknown_model_in_panel_is_an_error(hub, tmp_path):
    from headwatch.fixtures.panels import select

    panel = load_panel(tiny_panel(hub, tmp_path))
    with pytest.raises(PanelError, match=r"unknown model 'neoxx'.*did you mean 'neox'"):
        select([panel], models=["neoxx"])


def test_panel_revision_missing_on_the_hub_cache(hub, tmp_path):
    repos = {"tiny-org/olmo": ("olmo", {"step0": 0, "step9": 0})}
    pm = load_panel(tiny_panel(hub, tmp_path, repos=repos)).models[0]
    with pytest.raises(loading.RevisionNotFound, match=r"no revision 'step9'.*step8"):
        provider(tmp_path).model_records(pm)


# ---- devices -------------------------------------------------------------------------------------


def test_device_choice(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert loading.pick_device("auto", "gw3") == "cpu"
    assert loading.pick_device("cpu", "gw3") == "cpu"
    with pytest.raises(loading.LoadingError, match="no CUDA device"):
        loading.pick_device("cuda", "gw0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert loading.pick_device("cuda", "gw3") == "cuda:1"
    assert loading.pick_device("auto", "gw0") == "cuda:0"
    assert loading.pick_device("auto", "") == "cuda:0"
    assert loading.pick_device("cuda:1", "gw0") == "cuda:1"


# ---- online resolution (the Hub faked: tests never touch the network) -----------------------------


class FakeRefs:
    def __init__(self, names):
        from types import SimpleNamespace

        self.branches = [SimpleNamespace(name=n, target_commit=f"{i:040x}") for i, n in enumerate(names)]
        self.tags = []


def test_online_resolution_with_list_repo_refs(monkeypatch, tmp_path):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)  # a machine may export it globally
    names = ["main", "step50000-tokens209B", "step100000-tokens419B", "step200000-tokens838B"]
    files = {"step100000-tokens419B": ["config.json", "model-00001-of-00002.safetensors"],
             "step200000-tokens838B": ["config.json", "pytorch_model.bin"]}
    commits = {f"{i:040x}": n for i, n in enumerate(names)}
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_refs", lambda self, repo: FakeRefs(names))
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files",
                        lambda self, repo, revision=None: files.get(commits[revision], []))
    repo = "allenai/OLMoE-1B-7B-0924"
    r = loading.resolve_revision(repo, "step100000-tokens419B", cache_dir=str(tmp_path))
    assert (r.kind, r.commit, r.identity) == ("hub", f"{2:040x}", f"{2:040x}")
    # the author's files say tokens418B for this branch: the error names the real one
    with pytest.raises(loading.RevisionNotFound, match=r"no revision 'step100000-tokens418B' in the Hub.*step100000-tokens419B"):
        loading.resolve_revision(repo, "step100000-tokens418B", cache_dir=str(tmp_path))
    with pytest.raises(loading.NoSafetensorsError, match=r"pytorch_model\.bin"):
        loading.resolve_revision(repo, "step200000-tokens838B", cache_dir=str(tmp_path))


# ---- checkpoints that do not hold their model: refused before or as the weights load, naming what is wrong ----


WEIGHTS = ["no-lm-head", "config-more-layers", "config-fewer-layers", "config-wider-mlp", "olmoe-expert-missing",
           "extra-tensor"]


FILES = ["truncated", "garbage-weights", "empty-weights", "shard-missing"]


CONFIGS = ["config-not-json", "config-unknown-type"]


def _resolved(tmp_path, kind: str) -> loading.ResolvedRevision:
    save_broken_checkpoint(tmp_path / "run" / kind, kind)
    return loading.resolve_local(tmp_path / "run", kind)


@pytest.mark.parametrize("kind", WEIGHTS)
def test_weights_that_do_not_cover_the_model_are_refused(tmp_path, kind):
    """Missing keys (would be random), unexpected keys, shape mismatches: refused, the keys named."""
    resolved = _resolved(tmp_path, kind)
    with pytest.raises(loading.LoadingError, match=BROKEN_CHECKPOINTS[kind][2]) as info:
        loading.load_checkpoint(resolved)
    assert "do not match the model" in str(info.value)


def test_tied_weights_legitimately_absent_load(tmp_path):
    """With tie_word_embeddings the LM head is the embedding: its absence from the file is fine."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "run" / "tied"
    tiny_model("gpt_neox", seed=0, attn_implementation="eager").save_pretrained(folder)
    tensors = load_file(str(folder / "model.safetensors"))
    tensors.pop("embed_out.weight")
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    loaded = loading.load_checkpoint(loading.resolve_local(tmp_path / "run", "tied"))
    model = loaded.model
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


@pytest.mark.parametrize("kind", FILES)
def test_damaged_weight_files_are_named(tmp_path, kind):
    """Truncated, garbage, empty or missing weight files: a LoadingError naming the file, not a traceback
    from deep inside safetensors."""
    resolved = _resolved(tmp_path, kind)
    with pytest.raises(loading.LoadingError, match=BROKEN_CHECKPOINTS[kind][2]):
        loading.load_checkpoint(resolved)


@pytest.mark.parametrize("kind", CONFIGS)
def test_bad_configs_are_refused_before_the_weights(tmp_path, kind, monkeypatch, headwatch_cli):
    """A config.json that is not JSON, or names an unknown model_type: refused naming it, through
    ``headwatch measure`` (exit 2), and no weights are read."""
    save_broken_checkpoint(tmp_path / kind, kind)
    monkeypatch.setattr(loading, "load_checkpoint", _must_not_load)
    r = headwatch_cli("measure", "--model", tmp_path / kind, "--out", tmp_path / "o.json", *SMALL)
    assert r.code == 2 and BROKEN_CHECKPOINTS[kind][2] in r.err and "Traceback" not in r.err, r.err


def test_an_architecture_without_a_row_is_refused_before_the_weights(tmp_path, monkeypatch, headwatch_cli):
    from transformers import OPTConfig, OPTForCausalLM

    OPTForCausalLM(OPTConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=16, ffn_dim=32,
                             word_embed_proj_dim=16, vocab_size=300)).save_pretrained(tmp_path / "opt")
    monkeypatch.setattr(loading, "load_checkpoint", _must_not_load)
    r = headwatch_cli("measure", "--model", tmp_path / "opt", "--out", tmp_path / "o.json", *SMALL)
    assert r.code == 2 and "'opt'" in r.err and "architecture" in r.err, r.err


#: Probe settings that fit the tiny models and run in a second.
SMALL = ("--n-examples", "8", "--n-pr", "8", "--seq-len", "64", "--vocab-lo", "10", "--vocab-hi", "300",
         "--batch-size", "4", "--device", "cpu")


def _must_not_load(*args, **kwargs):
    raise AssertionError("weights were loaded although the config is unusable")
