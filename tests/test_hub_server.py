"""The network path against a Hub-protocol server on loopback, with the real huggingface_hub client.

The server is ``headwatch_testing.hubserver.HubServer`` (the test harness: endpoints, headers, faults,
and why it is written on ``http.server``); these are its tests and the tests of headwatch against it.

The checkpoint suites (``suite_repos``, fixture ``suite_endpoint``): every repo of
``headwatch.fixtures.realconfigs.SUITES`` (the PolyPythias with the originals and the 160m data-seed
and weight-seed runs; Stanford CRFM's five GPT-2 small runs) with its real branch names, 154
``stepN`` or 609 ``checkpoint-N``. Their files are made on first use and shared: a few weight sets
per published config (branch i serves set i mod ``variants``), so listing and resolving every branch
costs a few model builds, not one per branch. pythia-14m is served at its full published size, the
other sizes as config-faithful miniatures; the CRFM runs serve ``pytorch_model.bin`` only, the
PolyPythia seeds ``model.safetensors``, the original Pythias both. ``resolve_panel`` pins a panel's
Hub revisions against the server the way a run does (branches listed once per repo, each revision's
files checked), downloading nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace

import pytest

from headwatch.fixtures import loading
from headwatch.hubcache import cached_revisions, repo_folder
from headwatch.fixtures.panels import PanelError, PanelModel, load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch.fixtures.realconfigs import MISTRAL_SCHEDULE, PYTHIA_SCHEDULE, SUITES
from headwatch_testing.hubserver import Fault, HubRepo, HubServer, LazyCommits
from headwatch_testing.tinypanel import TINY_PROBE_TOML

# Starts a two-origin HTTP server and, in places, child processes: the network path is slow as a whole.
pytestmark = pytest.mark.slow


# ---- fixtures ----------------------------------------------------------------------------------------

OLMO_BRANCHES = {"step0-tokens0B": 0, "step1000-tokens2B": 1, "step2000-tokens4B": 2, "step3000-tokens6B": 3}


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> list[HubRepo]:
    """A tiny OLMo with OLMo-style branch names, a tiny GPT-NeoX, and the OLMoE miniature (bfloat16)."""
    from headwatch_testing.tiny import miniature_model, tiny_model

    root = tmp_path_factory.mktemp("hub-repos")
    olmo = {}
    for branch, seed in OLMO_BRANCHES.items():
        tiny_model("olmo", seed=seed, attn_implementation="eager").save_pretrained(root / "olmo" / branch)
        olmo[branch] = root / "olmo" / branch
    neox = {}
    for branch, seed in {"step1": 0, "step2": 1}.items():
        tiny_model("gpt_neox", seed=seed, attn_implementation="eager").save_pretrained(root / "neox" / branch)
        neox[branch] = root / "neox" / branch
    miniature_model("olmoe-1b-7b-0924", seed=0, dtype="stored").save_pretrained(root / "olmoe" / "step5000-tokens20B")
    return [
        HubRepo.from_folders("test-org/olmo-tiny", olmo, aliases={"main": "step3000-tokens6B"}),
        HubRepo.from_folders("test-org/neox-tiny", neox, aliases={"main": "step2"}),
        HubRepo.from_folders("test-org/olmoe-mini", {"step5000-tokens20B": root / "olmoe" / "step5000-tokens20B"}),
    ]


@pytest.fixture
def server(repos):
    with HubServer(repos, lifetime_s=300) as srv:
        yield srv


def point_client_at(monkeypatch, url: str) -> None:
    """What ``HF_ENDPOINT=url`` does when set before huggingface_hub is imported."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")


@pytest.fixture
def endpoint(server, monkeypatch):
    """The real client, online, talking to ``server``; the client's retry sleeps made instant
    (the loops themselves stay: bounded by huggingface_hub's max_retries)."""
    go_online(monkeypatch, server)
    yield server


def go_online(monkeypatch, server: HubServer) -> None:
    """Point the real client, online, at ``server`` (see fixture ``endpoint``)."""
    import huggingface_hub.utils._http as hf_http

    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    # read once at import: a machine that exports HF_HUB_OFFLINE=1 (CI) would keep the client offline
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    point_client_at(monkeypatch, server.endpoint)
    monkeypatch.setattr(hf_http, "time", SimpleNamespace(**{**{k: getattr(time, k) for k in dir(time)
                                                                  if not k.startswith("_")}, "sleep": lambda s: None}))


def hub_panel(tmp_path: Path, hub_cache: Path, repo: str, revisions: list[str], probe: str = TINY_PROBE_TOML) -> Path:
    revs = ", ".join(f'"{r}"' for r in revisions)
    path = tmp_path / f"{repo.split('/')[1]}.toml"
    path.write_text(f'[[models]]\nname = "{repo.split("/")[1]}"\nrepo = "{repo}"\nsource = "hub"\n'
                    f'revisions = [{revs}]\ntokens = {{ from_name = true }}\nhub_cache_dir = "{hub_cache}"\n{probe}')
    return path


def session(tmp_path: Path, **kw) -> Provider:
    """A session of its own (its memos and run info start empty), on the CPU, caching in ``tmp_path``."""
    return Provider(ProviderOptions(cache_dir=tmp_path / "hw-cache", device="cpu", progress=False, **kw))


# ---- the checkpoint suites: PolyPythias and Stanford CRFM's GPT-2 runs ----------------------------------


def _suite_files(row: str, variant: int, weights: str) -> dict[str, bytes]:
    """Files of one weight set of REAL_MODELS row ``row``: pythia-14m at full size, others miniatures,
    in the dtype the published checkpoints are stored in."""
    from headwatch_testing.tiny import MINIATURE_SIZES, full_size_model, miniature_model
    from headwatch_testing.tinypanel import checkpoint_files

    build = miniature_model if row in MINIATURE_SIZES else full_size_model
    return checkpoint_files(build(row, seed=1000 + variant, dtype="stored"), weights)


def suite_repos(repo_ids: Iterable[str] | None = None, variants: int = 2) -> list[HubRepo]:
    """The repos of ``headwatch.fixtures.realconfigs.SUITES`` (all, or ``repo_ids``), every branch of
    their schedule, files made on first use: ``variants`` weight sets per (published config, format),
    shared by every repo of that config, branch i serving set i mod ``variants``."""
    made: dict[tuple[str, int, str], dict[str, bytes]] = {}
    lock = threading.Lock()

    def files(row: str, variant: int, weights: str) -> Callable[[], dict[str, bytes]]:
        def make() -> dict[str, bytes]:
            with lock:  # one build per weight set, whichever repo asks first
                if (row, variant, weights) not in made:
                    made[row, variant, weights] = _suite_files(row, variant, weights)
                return made[row, variant, weights]
        return make

    wanted = set(repo_ids) if repo_ids is not None else None
    out, served = [], set()
    for suite in SUITES.values():
        for repo_id, row in suite.repos.items():
            if (wanted is not None and repo_id not in wanted) or repo_id in served:
                continue  # not asked for, or in two suites (pythia-160m: an original and a PolyPythia)
            served.add(repo_id)
            if suite is SUITES["crfm-gpt2-small"]:
                weights = "pickle"  # pytorch_model.bin only, as published
            elif repo_id == f"EleutherAI/{row}":
                weights = "both"  # the originals: a pytorch_model.bin beside the safetensors
            else:
                weights = "safetensors"
            branches, make = {}, {}
            for i, branch in enumerate(suite.schedule.branches):
                commit = hashlib.sha1(f"{repo_id}@{branch}".encode()).hexdigest()
                branches[branch] = commit
                make[commit] = files(row, i % variants, weights)
            out.append(HubRepo(repo_id, branches, LazyCommits(make)))
    if wanted is not None and len(out) != len(wanted):
        known = {r for s in SUITES.values() for r in s.repos}
        raise ValueError(f"not a suite repo: {sorted(wanted - known)}")
    return out


@pytest.fixture(scope="module")
def suites() -> list[HubRepo]:
    """Every suite repo (made lazily: building this costs nothing)."""
    return suite_repos()


@pytest.fixture
def suite_endpoint(suites, monkeypatch):
    """The real client, online, talking to a server of the suite repos (``suite_repos``)."""
    with HubServer(suites, lifetime_s=600, max_requests=20_000) as srv:
        go_online(monkeypatch, srv)
        yield srv


def resolve_panel(models: Iterable[PanelModel], cache_dir: Path,
                  ) -> dict[str, dict[str, loading.ResolvedRevision]]:
    """Every revision of every Hub model of a panel pinned against the server (branches listed once
    per repo, each revision's files checked for weights it may read), nothing downloaded: model id ->
    revision -> ResolvedRevision. For a shipped panel: ``resolve_panel(select([load_panel(name)],
    ...), tmp_path)`` with the ``suite_endpoint`` fixture active."""
    provider = Provider(ProviderOptions(cache_dir=cache_dir / "hw-cache", hub_cache_dir=str(cache_dir / "hub"),
                                        device="cpu", progress=False))
    return {pm.id: {rev: provider.resolve(pm, rev) for rev in pm.revisions} for pm in models if pm.source == "hub"}


#: The paper's probe range (the real vocabularies hold it), small enough for a CPU test.
SUITE_PROBE = TINY_PROBE_TOML.replace("vocab_lo = 16", "vocab_lo = 100").replace("vocab_hi = 300", "vocab_hi = 10000")


def test_suite_repos_serve_the_real_branch_names_and_a_checkpoint_of_each_measures(suite_endpoint, tmp_path,
                                                                                  headwatch_cli):
    """A PolyPythia repo lists its 154 branches and a CRFM repo its 609; pythia-14m-seed3@step1000
    (full size) measures through a panel; battlestar@checkpoint-20000 (pytorch_model.bin only)
    through ``headwatch measure``, refused without --allow-pickle and read with it."""
    from huggingface_hub import HfApi

    pythia = {b.name for b in HfApi().list_repo_refs("EleutherAI/pythia-14m-seed3").branches}
    crfm = {b.name for b in HfApi().list_repo_refs("stanford-crfm/battlestar-gpt2-small-x49").branches}
    assert pythia == set(PYTHIA_SCHEDULE.branches) and len(pythia) == 154
    assert {"step0", "step1", "step512", "step1000", "step143000"} <= pythia and "step513" not in pythia
    assert crfm == set(MISTRAL_SCHEDULE.branches) and len(crfm) == 609
    assert {"checkpoint-0", "checkpoint-10", "checkpoint-150", "checkpoint-19900", "checkpoint-400000"} <= crfm

    panel = tmp_path / "polypythia.toml"
    panel.write_text('[[models]]\nname = "pythia-14m-seed3"\nrepo = "EleutherAI/pythia-14m-seed3"\nsource = "hub"\n'
                     f'revisions = ["step1000"]\ntokens = {{ per_step = {PYTHIA_SCHEDULE.tokens_per_step} }}\n'
                     f'hub_cache_dir = "{tmp_path / "hub"}"\n{SUITE_PROBE}')
    (record,) = session(tmp_path).model_records(load_panel(panel).models[0])
    assert (record.n_layers, record.n_heads, record.d_head) == (6, 4, 32)  # pythia-14m's published size
    assert record.tokens_seen == 1000 * 2_097_152 and record.provenance["weights_format"] == "safetensors"
    assert record.provenance["commit"] == suite_endpoint.repos["EleutherAI/pythia-14m-seed3"].branches["step1000"]

    args = ["measure", "--model", "stanford-crfm/battlestar-gpt2-small-x49", "--revision", "checkpoint-20000",
            "--hub-cache-dir", tmp_path / "hub", "--tokens-seen", str(20000 * MISTRAL_SCHEDULE.tokens_per_step),
            "--n-examples", "8", "--n-pr", "8", "--seq-len", "64", "--vocab-lo", "100", "--vocab-hi", "10000",
            "--batch-size", "4", "--device", "cpu"]
    refused = headwatch_cli(*args, "--out", tmp_path / "refused.json")
    assert refused.code == 2 and "pytorch_model.bin" in refused.err and "--allow-pickle" in refused.err
    assert not suite_endpoint.requests(None, "pytorch_model.bin")  # refused before any download
    out = tmp_path / "battlestar.json"
    done = headwatch_cli(*args, "--out", out, "--allow-pickle")
    assert done.code == 0, done.err
    rec = json.loads(out.read_text())
    assert rec["provenance"]["weights_format"] == "pickle" and rec["provenance"]["weight_files"] == ["pytorch_model.bin"]
    assert rec["provenance"]["model_type"] == "gpt2" and (rec["n_layers"], rec["n_heads"]) == (2, 4)
    assert rec["tokens_seen"] == 20000 * 524_288
    # transformers, given a .bin from the Hub, may start a thread asking for a safetensors-conversion
    # PR (its first request: the repo's model info); headwatch switches that off
    for thread in threading.enumerate():
        if thread.name == "Thread-auto_conversion":
            thread.join(30)
    repo_api = "/api/models/stanford-crfm/battlestar-gpt2-small-x49"
    assert not [r for r in suite_endpoint.requests() if r["path"].split("?")[0] == repo_api]


def test_every_suite_repo_is_served_and_the_originals_read_safetensors(suite_endpoint, tmp_path):
    """Every suite repo answers; an original Pythia (both formats) resolves to its safetensors, and
    ``resolve_panel`` pins a panel's revisions by commit without downloading weights."""
    from huggingface_hub import HfApi

    api = HfApi()
    for repo in suite_endpoint.repos:
        assert len(api.list_repo_refs(repo).branches) in (154, 609)
    panel = tmp_path / "p.toml"
    panel.write_text(
        '[[models]]\nname = "pythia-410m"\nrepo = "EleutherAI/pythia-410m"\nsource = "hub"\n'
        'revisions = ["step0", "step512", "step143000"]\ntokens = { per_step = 2097152 }\n\n'
        '[[models]]\nname = "caprica"\nrepo = "stanford-crfm/caprica-gpt2-small-x81"\nsource = "hub"\n'
        'revisions = ["checkpoint-0", "checkpoint-400000"]\nallow_pickle = true\n'
        "tokens = { per_step = 524288, step_pattern = 'checkpoint-(\\d+)' }\n")
    resolved = resolve_panel(load_panel(panel).models, tmp_path)
    files = api.list_repo_files("EleutherAI/pythia-410m", revision="step512")
    assert "pytorch_model.bin" in files and "model.safetensors" in files
    assert {r.weights_format for r in resolved["pythia-410m"].values()} == {"safetensors"}
    assert {r.weights_format for r in resolved["caprica"].values()} == {"pickle"}
    commits = suite_endpoint.repos["EleutherAI/pythia-410m"].branches
    assert {rev: r.commit for rev, r in resolved["pythia-410m"].items()} == {
        rev: commits[rev] for rev in ("step0", "step512", "step143000")}
    assert not suite_endpoint.requests("GET", "/blobs/")  # nothing downloaded


def test_the_shipped_suite_panels_resolve_with_seeds(suite_endpoint, tmp_path):
    """The shipped panels (issue 24) name real repos and real branches: a seed subset of each population
    panel (as --seeds picks it), and the Pythia suite's smallest and largest, resolve against the
    server, every revision pinned to the branch's commit and read from the weights format it has."""
    from headwatch.fixtures.panels import populations, select, select_seeds

    poly = select_seeds(select([load_panel("polypythia")], models=["pythia-14m", "pythia-160m"]), [1, 9, 1234])
    assert [m.id for m in poly] == [
        "pythia-14m-seed1", "pythia-14m-seed9", "pythia-14m-seed1234", "pythia-160m-seed1", "pythia-160m-seed9",
        "pythia-160m-seed1234", "pythia-160m-data-seed1", "pythia-160m-weight-seed1"]
    assert [(p.name, len(p.reference), len(p.candidates)) for p in populations(poly)] == [
        ("pythia-14m", 3, 0), ("pythia-160m", 3, 2)]
    crfm = select_seeds(load_panel("crfm-gpt2").models, [21, 777])
    suite = select([load_panel("pythia")], models=["pythia-70m-deduped", "pythia-12b"])
    resolved = resolve_panel(poly + crfm + suite, tmp_path)
    assert set(resolved) == {m.id for m in poly + crfm + suite}
    for pm in poly + crfm + suite:
        commits = suite_endpoint.repos[pm.repo].branches
        assert {rev: r.commit for rev, r in resolved[pm.id].items()} == {rev: commits[rev] for rev in pm.revisions}
    assert resolved["pythia-160m-seed1234"]["step143000"].weights_format == "safetensors"  # the original: both
    assert {r.weights_format for m in crfm for r in resolved[m.id].values()} == {"pickle"}  # allow_pickle = true
    assert crfm[0].repo == "stanford-crfm/alias-gpt2-small-x21" and crfm[1].repo == "stanford-crfm/expanse-gpt2-small-x777"
    assert not suite_endpoint.requests("GET", "/blobs/")  # nothing downloaded


# ---- the protocol, with the real client ------------------------------------------------------------


def test_refs_tree_and_downloads_by_branch_through_the_real_client(endpoint, repos, tmp_path):
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download

    olmo = repos[0]
    refs = HfApi().list_repo_refs("test-org/olmo-tiny")
    assert {b.name: b.target_commit for b in refs.branches} == olmo.branches
    assert sorted(HfApi().list_repo_files("test-org/olmo-tiny", revision="step1000-tokens2B")) == \
        ["config.json", "generation_config.json", "model.safetensors"]
    commit = olmo.branches["step1000-tokens2B"]
    cfg = hf_hub_download("test-org/olmo-tiny", "config.json", revision="step1000-tokens2B", cache_dir=tmp_path)
    assert Path(cfg).read_bytes() == olmo.files[commit]["config.json"] and f"snapshots/{commit}/" in cfg
    assert cached_revisions(tmp_path, "test-org/olmo-tiny") == {"step1000-tokens2B": commit}
    weights = hf_hub_download("test-org/olmo-tiny", "model.safetensors", revision="step1000-tokens2B", cache_dir=tmp_path)
    assert Path(weights).read_bytes() == olmo.files[commit]["model.safetensors"]
    sha = hashlib.sha256(olmo.files[commit]["model.safetensors"]).hexdigest()
    assert Path(weights).resolve().name == sha  # the LFS blob is stored under its sha256 (X-Linked-Etag)
    # the LFS file went HEAD 302 -> GET on the CDN origin, the small one straight from the Hub
    heads = endpoint.requests("HEAD", "/resolve/step1000-tokens2B/model.safetensors")
    assert [h["status"] for h in heads] == [302]
    assert [r["role"] for r in endpoint.requests("GET", f"/blobs/{sha}")] == ["cdn"]
    snap = snapshot_download("test-org/olmo-tiny", revision="step2000-tokens4B", cache_dir=tmp_path)
    assert sorted(p.name for p in Path(snap).iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]


def test_panel_resolves_branch_names_lists_once_and_loads_by_commit(endpoint, repos, tmp_path):
    hub_cache = tmp_path / "hub"
    revisions = ["step0-tokens0B", "step1000-tokens2B", "step2000-tokens4B"]
    pm = load_panel(hub_panel(tmp_path, hub_cache, "test-org/olmo-tiny", revisions)).models[0]
    records = session(tmp_path).model_records(pm)
    commits = repos[0].branches
    assert [r.revision for r in records] == revisions
    assert [r.tokens_seen for r in records] == [0, 2e9, 4e9]
    for r in records:
        assert r.provenance["resolved_from"] == "hub" and r.provenance["commit"] == commits[r.revision]
    assert len(endpoint.requests("GET", "/api/models/test-org/olmo-tiny/refs")) == 1  # listed once, not per revision
    resolves = endpoint.requests(None, "/test-org/olmo-tiny/resolve/")
    assert resolves and all(any(commits[b] in r["path"] for b in revisions) for r in resolves)  # pinned to commits
    # the suite records the branch in the Hub cache, so a later offline run resolves it
    assert cached_revisions(hub_cache, "test-org/olmo-tiny") == {b: commits[b] for b in revisions}


def test_full_size_shaped_repo_over_http(endpoint, repos, tmp_path):
    """The OLMoE miniature (64 experts, bfloat16 on the 'Hub') downloads, loads in float32 and measures."""
    pm = load_panel(hub_panel(tmp_path, tmp_path / "hub", "test-org/olmoe-mini", ["step5000-tokens20B"],
                              TINY_PROBE_TOML.replace("vocab_hi = 300", "vocab_hi = 10000"))).models[0]
    (record,) = session(tmp_path).model_records(pm)
    assert record.provenance["dtype"] == "float32" and record.n_heads == 4 and record.tokens_seen == 20e9
    assert record.provenance["commit"] == repos[2].branches["step5000-tokens20B"]


def test_missing_revision_names_the_closest_branches_before_any_download(endpoint, tmp_path):
    pm = load_panel(hub_panel(tmp_path, tmp_path / "hub", "test-org/olmo-tiny",
                              ["step0-tokens0B", "step1000-tokens3B"])).models[0]
    # The whole panel is checked against the branches before anything is measured (issue 26): not even
    # step0, which exists, is downloaded.
    with pytest.raises(PanelError) as e:
        session(tmp_path).model_records(pm)
    msg = str(e.value)
    assert "1 of its 2 revision(s) are not in the branches of test-org/olmo-tiny on the Hub: step1000-tokens3B" in msg
    assert "did you mean 'step1000-tokens2B'" in msg and "Nothing was measured" in msg
    assert not endpoint.requests(None, "/resolve/")
    # the protocol's own answer, for a client that asks anyway
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import RevisionNotFoundError

    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("test-org/olmo-tiny", "config.json", revision="step1000-tokens3B", cache_dir=tmp_path / "x")


def olmoe_blob(repos) -> tuple[bytes, str]:
    """The OLMoE miniature's weights (32 MB): larger than huggingface_hub's 10 MiB download chunk."""
    repo = repos[2]
    data = repo.files[repo.branches["step5000-tokens20B"]]["model.safetensors"]
    return data, hashlib.sha256(data).hexdigest()


def test_connection_cut_halfway_is_resumed_with_a_range_request(endpoint, repos, tmp_path):
    """huggingface_hub resumes from what it has written: whole DOWNLOAD_CHUNK_SIZE chunks (10 MiB),
    so a cut re-fetches less than one chunk."""
    from huggingface_hub import constants, hf_hub_download

    data, sha = olmoe_blob(repos)
    chunk = constants.DOWNLOAD_CHUNK_SIZE
    assert len(data) > 2 * chunk
    endpoint.faults[sha] = Fault("cut", at=len(data) // 2)
    path = hf_hub_download("test-org/olmoe-mini", "model.safetensors", revision="step5000-tokens20B", cache_dir=tmp_path)
    assert Path(path).read_bytes() == data
    gets = endpoint.requests("GET", f"/blobs/{sha}")
    resumed_at = (len(data) // 2) // chunk * chunk
    assert [g["range"] for g in gets] == [None, f"bytes={resumed_at}-"]
    assert len(data) <= sum(g["sent"] for g in gets) < len(data) + chunk


CHILD_DOWNLOAD = """
import sys
from huggingface_hub import hf_hub_download
hf_hub_download(sys.argv[1], "model.safetensors", revision=sys.argv[2], cache_dir=sys.argv[3])
"""


def test_download_killed_halfway_is_fetched_again_whole(endpoint, repos, tmp_path):
    """A process killed mid-download: the next run gets the file, but from byte 0.

    huggingface_hub 2.x writes each download to a process-unique ``<sha256>.<id>.incomplete`` and
    never reuses another process's (huggingface_hub PR 4228), so there is no resume across
    processes: the killed part is downloaded again and its partial file stays behind (whole
    10 MiB chunks of it). What the suite resumes is the panel: measured revisions stay cached.
    """
    from huggingface_hub import constants, hf_hub_download

    data, sha = olmoe_blob(repos)
    chunk = constants.DOWNLOAD_CHUNK_SIZE
    fault = endpoint.faults[sha] = Fault("stall", at=len(data) // 2)
    on_disk = (len(data) // 2) // chunk * chunk  # whole chunks reach the file before the stall
    env = {**os.environ, "HF_ENDPOINT": endpoint.endpoint, "HF_HUB_DISABLE_PROGRESS_BARS": "1",
           "HF_HUB_DOWNLOAD_TIMEOUT": "120"}  # the child must not time out and retry during the stall
    child = subprocess.Popen([sys.executable, "-c", CHILD_DOWNLOAD, "test-org/olmoe-mini", "step5000-tokens20B",
                              str(tmp_path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    blobs = repo_folder(tmp_path, "test-org/olmoe-mini") / "blobs"

    def partial() -> list[Path]:
        return sorted(blobs.glob(f"{sha}.*.incomplete")) if blobs.is_dir() else []

    try:
        assert fault.reached.wait(120), "the child never reached the middle of the download"
        deadline = time.monotonic() + 30
        while not (partial() and partial()[0].stat().st_size >= on_disk) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
        fault.release.set()
    assert child.returncode == -signal.SIGKILL
    (left,) = partial()
    assert left.stat().st_size == on_disk > 0
    path = hf_hub_download("test-org/olmoe-mini", "model.safetensors", revision="step5000-tokens20B", cache_dir=tmp_path)
    assert Path(path).read_bytes() == data
    gets = endpoint.requests("GET", f"/blobs/{sha}")
    assert [g["range"] for g in gets] == [None, None]  # no Range: started again from byte 0
    assert gets[1]["sent"] == len(data)
    assert partial() == [left]  # the killed process's partial file is left behind


def test_server_going_away_mid_panel(endpoint, repos, tmp_path, monkeypatch):
    """What was measured stays (in the cache, reused next time); the rest fails with a clear message."""
    from headwatch.probes.measure import measure

    hub_cache = tmp_path / "hub"
    revisions = ["step0-tokens0B", "step1000-tokens2B", "step2000-tokens4B"]
    pm = load_panel(hub_panel(tmp_path, hub_cache, "test-org/olmo-tiny", revisions)).models[0]
    measured = []

    def measure_then_stop(*a, **k):
        rec = measure(*a, **k)
        measured.append(rec.revision)
        endpoint.stop()  # the Hub goes away right after the first revision is measured
        return rec

    with pytest.raises(loading.LoadingError) as e:
        session(tmp_path, measure_fn=measure_then_stop).model_records(pm)
    msg = str(e.value)
    assert measured == ["step0-tokens0B"]
    assert "step1000-tokens2B" in msg and f"the Hub at {endpoint.endpoint} did not answer" in msg
    assert "measured so far stay in the measurement cache" in msg

    # a new run while the Hub is still away: the measured revision comes from the cache, with a
    # warning that its commit was not re-checked; the next one fails the same clear way
    rerun = session(tmp_path)
    with pytest.warns(UserWarning, match="using the cached measurement without checking its commit"):
        first = rerun.revision_record(pm, "step0-tokens0B")
    assert first.provenance["commit"] == repos[0].branches["step0-tokens0B"]
    with pytest.raises(loading.LoadingError, match="did not answer"):
        rerun.revision_record(pm, "step1000-tokens2B")

    # the Hub is back (another address): the measured revision is a cache hit, the rest is measured
    with HubServer(repos) as back:
        point_client_at(monkeypatch, back.endpoint)
        later = session(tmp_path)
        records = later.model_records(pm)
        assert [r.revision for r in records] == revisions
        statuses = {e.revision: e.status for e in later.run.entries}
        assert statuses["step0-tokens0B"] == "hit" and statuses["step1000-tokens2B"] != "hit"
        assert not back.requests(None, repos[0].branches["step0-tokens0B"] + "/model.safetensors")


def test_rate_limited_listing_fails_clearly_and_file_listing_waits(endpoint, tmp_path):
    endpoint.api_status.append((429, {"Retry-After": "0"}))
    with pytest.raises(loading.LoadingError, match=r"could not list the branches.*429"):
        loading.list_branches("test-org/olmo-tiny", cache_dir=str(tmp_path), offline=False)
    # the tree listing goes through huggingface_hub's backoff, which honours Retry-After
    branches = loading.list_branches("test-org/olmo-tiny", cache_dir=str(tmp_path), offline=False)
    endpoint.api_status.append((429, {"Retry-After": "0"}))
    resolved = loading.resolve_revision("test-org/olmo-tiny", "step0-tokens0B", cache_dir=str(tmp_path), offline=False,
                                        branches=branches)
    assert resolved.kind == "hub"
    assert [r["status"] for r in endpoint.requests("GET", "/tree/")] == [429, 200]


def test_a_failing_weights_host_keeps_its_status_and_url_in_the_task_reason(endpoint, repos, tmp_path):
    """A 502 from the CDN for a weights file: the fan-out task fails with the HTTP status and the URL
    in its reason (they used to be dropped for a generic "could not load")."""
    from headwatch.fanout.tasks import MeasureTask, run_task

    hub_cache = tmp_path / "hub"
    pm = load_panel(hub_panel(tmp_path, hub_cache, "test-org/olmo-tiny", ["step1000-tokens2B"])).models[0]
    commit = repos[0].branches["step1000-tokens2B"]
    sha = endpoint.sha256(endpoint.files(repos[0], commit)["model.safetensors"])
    endpoint.faults[sha] = Fault("status", at=502)
    task = MeasureTask(pm, "step1000-tokens2B", ProviderOptions(cache_dir=tmp_path / "hw", device="cpu", progress=False))
    result = run_task(task)
    assert result.status == "failed", result
    assert "HTTP 502" in result.error and f"{endpoint.cdn}/blobs/{sha}" in result.error, result.error
    del endpoint.faults[sha]


# ---- later runs, in fresh processes: HF_ENDPOINT alone, then offline -----------------------------------

CHILD_PANEL = """
import json, sys, time
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
panel, cache, refresh = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
pm = load_panel(panel).models[0]
session = Provider(ProviderOptions(cache_dir=cache, device="cpu", progress=False, refresh=refresh,
                                   refresh_since=time.time() if refresh else None))
records = session.model_records(pm)
print(json.dumps({"statuses": [e.status for e in session.run.entries],
                  "records": [r.to_dict() for r in records]}))
"""


OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def run_child(panel: Path, cache: Path, env: dict, refresh: bool = False) -> dict:
    """Run CHILD_PANEL in a fresh process; the offline switches come from ``env`` only, never from the
    parent's environment (CI machines set HF_HUB_OFFLINE=1 globally)."""
    base = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARS}
    out = subprocess.run([sys.executable, "-c", CHILD_PANEL, str(panel), str(cache), "1" if refresh else "0"],
                         env={**base, "HF_HUB_DISABLE_PROGRESS_BARS": "1", **env}, cwd=panel.parent,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def numbers(record: dict) -> tuple:
    return record["all_head_selectivity"], record["pr"], record["task"]


def test_hf_endpoint_alone_then_offline_reuse(repos, tmp_path):
    """Run 1 (fresh process, only HF_ENDPOINT set) measures; run 2 (HF_HUB_OFFLINE=1, server gone)
    reuses the measurements; run 3 (offline, --refresh) re-measures from the downloaded weights."""
    hub_cache = tmp_path / "hub"
    revisions = ["step0-tokens0B", "step2000-tokens4B"]
    panel = hub_panel(tmp_path, hub_cache, "test-org/olmo-tiny", revisions)
    with HubServer(repos) as srv:
        online = run_child(panel, tmp_path / "hw", {"HF_ENDPOINT": srv.endpoint})
        assert online["statuses"] == ["computed", "computed"]
        assert srv.requests("GET", "/api/models/test-org/olmo-tiny/refs")
        dead = srv.endpoint
    offline = {"HF_ENDPOINT": dead, "HF_HUB_OFFLINE": "1"}
    reused = run_child(panel, tmp_path / "hw", offline)
    assert reused["statuses"] == ["hit", "hit"]
    assert [r["provenance"]["commit"] for r in reused["records"]] == [repos[0].branches[r] for r in revisions]
    again = run_child(panel, tmp_path / "hw", offline, refresh=True)
    assert again["statuses"] == ["refreshed", "refreshed"]
    assert [r["provenance"]["resolved_from"] for r in again["records"]] == ["hub-cache", "hub-cache"]
    assert [numbers(r) for r in again["records"]] == [numbers(r) for r in online["records"]]
