"""The measurement cache: keys, atomic entries, corruption, refresh, locking across processes,
resuming an interrupted panel run, and a warm cache that loads no model."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from headwatch.fixtures import cache as cache_mod
from headwatch.fixtures import loading
from headwatch.fixtures.cache import CacheKey, CacheNotWritable, CorruptEntryWarning, MeasurementCache
from headwatch.fixtures.panels import load_panel
from headwatch.fixtures.provider import Provider, ProviderOptions
from headwatch.probes.record import HEAD_CLASSES, PROBE_VERSION, MeasurementRecord, ProbeSettings
from headwatch.validation import InputError
from headwatch_testing.sync import Gate, Signal

ROOT = Path(__file__).resolve().parent.parent


def record(revision: str = "step1", value: float = 1.0) -> MeasurementRecord:
    return MeasurementRecord(
        model="org/m", revision=revision, tokens_seen=None, n_layers=1, n_heads=1, d_head=4,
        all_head_selectivity={"L0_H0": {c: value if c == "induction" else 0.0 for c in HEAD_CLASSES}},
        settings=ProbeSettings(n_examples=4),
    )


def key(revision: str = "step1", identity: str = "c" * 40, **settings) -> CacheKey:
    return CacheKey.make("org/m", revision, identity, ProbeSettings(**settings))


# ---- keys ----------------------------------------------------------------------------------------


def test_key_covers_what_changes_numbers():
    base = key()
    assert key().digest() == base.digest()
    assert key(identity="d" * 40).digest() != base.digest()
    assert key(revision="step2").digest() != base.digest()
    assert key(n_examples=100).digest() != base.digest()
    assert key(dtype="float16").digest() != base.digest()
    assert key(batch_size=64).digest() == base.digest()  # batch size does not change numbers
    assert replace(base, probe_version=base.probe_version + "-next").digest() != base.digest()
    assert cache_mod.probe_code_version() == "v" + PROBE_VERSION  # imported, never read from source text


def test_hit_after_compute(tmp_path):
    c = MeasurementCache(tmp_path)
    calls = []
    first = c.get_or_compute(key(), lambda: calls.append(1) or record())
    second = c.get_or_compute(key(), lambda: calls.append(1) or record())
    assert (first.status, second.status, len(calls)) == ("computed", "hit", 1)
    assert second.record.to_dict() == first.record.to_dict()
    assert c.lookup(key(n_examples=3)) is None


def test_corrupt_entry_is_reported_and_recomputed(tmp_path):
    c = MeasurementCache(tmp_path)
    path = c.get_or_compute(key(), record).path
    path.write_text('{"schema": "headwatch.cache-entry/1", "key": ')  # torn by hand
    with pytest.warns(CorruptEntryWarning, match=r"corrupt measurement cache entry .*recomputing"):
        result = c.get_or_compute(key(), lambda: record(value=2.0))
    assert result.status == "recomputed-corrupt"
    assert result.record.all_head_selectivity["L0_H0"]["induction"] == 2.0
    assert path.with_name(path.name + ".corrupt").exists()
    assert c.stats.corrupt == 1 and c.get_or_compute(key(), record).status == "hit"


def test_entry_for_another_key_is_corrupt(tmp_path):
    c = MeasurementCache(tmp_path)
    path = c.get_or_compute(key(), record).path
    entry = json.loads(path.read_text())
    entry["key"]["revision"] = "other"
    path.write_text(json.dumps(entry))
    with pytest.warns(CorruptEntryWarning, match="does not match"):
        assert c.lookup(key()) is None


def test_refresh_recomputes_only_entries_older_than_the_run(tmp_path, monkeypatch):
    now = [1000.0]  # the cache's clock, moved by the test: no sleep for the clock to tick
    clock = {k: getattr(time, k) for k in dir(time) if not k.startswith("_")}
    monkeypatch.setattr(cache_mod, "time", SimpleNamespace(**{**clock, "time": lambda: now[0]}))
    c = MeasurementCache(tmp_path)
    c.get_or_compute(key("old"), record)
    since = now[0] = 1001.0  # the refresh run starts
    c.get_or_compute(key("new"), record)  # written by another worker during this refresh run
    assert c.get_or_compute(key("old"), record, refresh_since=since).status == "refreshed"
    assert c.get_or_compute(key("new"), record, refresh_since=since).status == "hit"


def test_cache_folder_not_writable(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(CacheNotWritable, match=r"cannot be created.*--cache-dir"):
        MeasurementCache(blocker / "measurements")
    if os.geteuid() != 0:  # root writes anywhere; the permission case needs an ordinary user
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            with pytest.raises(CacheNotWritable, match="not writable"):
                MeasurementCache(ro)
            # read_only_ok (the provider's): an existing folder is read; what it lacks is refused before it is computed
            with pytest.raises(CacheNotWritable, match="not writable"):
                MeasurementCache(ro, read_only_ok=True).get_or_compute(
                    key(), lambda: pytest.fail("computed for a cache it cannot keep"))
        finally:
            ro.chmod(0o700)


def test_a_complete_cache_on_a_read_only_mount_is_read_and_nothing_is_written(tmp_path, read_only_tree):
    """Judging a complete cache needs no write (it was refused as "not writable"); a missing entry is
    refused before it is computed, naming the cache, since its measurement could not be kept."""
    root = tmp_path / "measurements"
    MeasurementCache(root).get_or_compute(key(), record)
    read_only_tree(root)
    with pytest.raises(CacheNotWritable, match="not writable"):  # a writer (a training loop) is told now
        MeasurementCache(root)
    cache = MeasurementCache(root, read_only_ok=True)
    hit = cache.get_or_compute(key(), lambda: pytest.fail("a cached entry was computed again"))
    assert hit.status == "hit" and hit.record == record()
    with pytest.raises(CacheNotWritable, match=r"org/m@step2 .* would be measured, but cache folder .* is not writable"):
        cache.get_or_compute(key("step2"), lambda: pytest.fail("computed for a cache it cannot keep"))


def test_a_corrupt_entry_is_named_by_the_read_only_lookup(tmp_path):
    """The report's lookup (any identity, nothing moved) names an entry it cannot read; it is not
    taken for a revision never measured."""
    cache = MeasurementCache(tmp_path)
    path = cache.write_entry(key(), record())
    assert cache.find_loose(key(identity="other")) == (record(), [])
    path.write_text("{ torn")
    found, unreadable = cache.find_loose(key(identity="other"))
    assert found is None and [p for p, _ in unreadable] == [path] and "JSONDecodeError" in unreadable[0][1]
    with pytest.warns(CorruptEntryWarning, match=re.escape(str(path))):
        assert cache.lookup_loose(key()) is None
    assert path.read_text() == "{ torn"  # left in place: a read-only lookup moves nothing
    assert cache.find_loose(key("step2")) == (None, [])  # another revision's entry is not this one's


def test_a_file_where_an_entry_folder_should_be_is_named(tmp_path):
    cache = MeasurementCache(tmp_path)
    blocker = cache.path_for(key()).parent
    blocker.write_text("x")
    with pytest.raises(InputError, match=f"{re.escape(str(blocker))} is a regular file where a folder is needed"):
        cache.get_or_compute(key(), record)
    assert blocker.read_text() == "x"


# ---- processes -----------------------------------------------------------------------------------


RACE = textwrap.dedent("""
    import fcntl, os, sys
    from types import SimpleNamespace
    import headwatch.fixtures.cache as cache_module
    from headwatch.fixtures.cache import CacheKey, MeasurementCache
    from headwatch.probes.record import HEAD_CLASSES, MeasurementRecord, ProbeSettings
    from headwatch_testing.sync import Gate, Signal
    log, root = sys.argv[1], sys.argv[2]
    ready, go, blocked = Signal.from_arg(sys.argv[3]), Gate.from_arg(sys.argv[4]), Signal.from_arg(sys.argv[5])
    def flock(fd, op):  # the cache's lock: say so just before blocking behind the other process
        if op == fcntl.LOCK_EX:
            blocked.set()
        return fcntl.flock(fd, op)
    cache_module.fcntl = SimpleNamespace(**{k: getattr(fcntl, k) for k in dir(fcntl) if k.isupper()}, flock=flock)
    ready.set()
    go.wait()
    def compute():
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\\n")
        blocked.wait()  # the other process has reached the lock and waits behind this one
        return MeasurementRecord("org/m", "step1", None, 1, 1, 4,
                                 {"L0_H0": {c: float(os.getpid()) for c in HEAD_CLASSES}})
    r = MeasurementCache(root).get_or_compute(CacheKey.make("org/m", "step1", "c" * 40, ProbeSettings()), compute)
    print(r.status, r.record.all_head_selectivity["L0_H0"]["induction"], r.waited)
""")


@pytest.mark.slow
def test_two_processes_compute_one_entry_once(tmp_path):
    script = tmp_path / "race.py"
    script.write_text(RACE)
    log = tmp_path / "log"
    ready, go, blocked = Signal(), Gate(), Signal()
    procs = [subprocess.Popen([sys.executable, str(script), str(log), str(tmp_path / "c"), ready.arg, go.arg,
                               blocked.arg], stdout=subprocess.PIPE, text=True,
                              pass_fds=(*ready.fds, *go.fds, *blocked.fds)) for _ in range(2)]
    ready.wait(2, procs=procs)  # both at the start line
    go.open()
    outs = [p.communicate(timeout=60)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(log.read_text().split()) == 1  # computed once
    assert sorted(o[0] for o in outs) == ["computed", "hit"]
    assert outs[0][1] == outs[1][1]  # both see the one result
    assert [o[2] for o in outs if o[0] == "hit"] == ["True"]  # the second waited on the lock


PANEL_RUN = textwrap.dedent("""
    import signal, sys
    from headwatch.fixtures.panels import load_panel
    from headwatch.fixtures.provider import Provider, ProviderOptions
    from headwatch.probes.measure import measure
    from headwatch_testing.sync import Signal
    panel_file, cache_dir, log = sys.argv[1:4]
    in_flight = Signal.from_arg(sys.argv[4]) if len(sys.argv) > 4 else None
    started = []
    def slow_measure(model, settings, **kw):
        with open(log, "a") as f:
            f.write(kw["revision"] + "\\n")
        started.append(kw["revision"])
        if in_flight is not None and len(started) == 3:  # two entries written, the third in flight
            in_flight.set()
            signal.pause()  # until the test kills this run
        return measure(model, settings, **kw)
    pm = load_panel(panel_file).models[0]
    opts = ProviderOptions(cache_dir=cache_dir, device="cpu", progress=False, measure_fn=slow_measure)
    records = Provider(opts).model_records(pm)
    print("done", len(records))
""")


@pytest.mark.slow
def test_interrupted_panel_run_resumes_with_only_the_missing_entries(tmp_path):
    from headwatch_testing.tiny import tiny_model

    revisions = ["step0", "step1", "step2", "step3", "step4"]
    for i, rev in enumerate(revisions):
        tiny_model("gpt_neox", seed=i, attn_implementation="eager").save_pretrained(tmp_path / "ckpt" / rev)
    panel_file = tmp_path / "p.toml"
    panel_file.write_text(
        f'[[models]]\nname = "m"\nrepo = "ckpt"\nsource = "local"\nrevisions = {json.dumps(revisions)}\n'
        "tokens = { per_step = 10 }\n[models.probe]\nn_examples = 8\nseq_len = 64\nvocab_lo = 16\n"
        "vocab_hi = 300\nn_pr = 8\n"
    )
    script = tmp_path / "run.py"
    script.write_text(PANEL_RUN)
    cache_dir, log = tmp_path / "cache", tmp_path / "log"
    args = [sys.executable, str(script), str(panel_file), str(cache_dir), str(log)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    in_flight = Signal()
    proc = subprocess.Popen([*args, in_flight.arg], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, pass_fds=in_flight.fds)
    entries = lambda: sorted(cache_dir.glob("measurements/*/*.json"))
    in_flight.wait(procs=[proc], timeout=240)
    os.kill(proc.pid, signal.SIGKILL)  # mid-run: two entries done, the third in flight
    proc.wait()
    done_before = len(entries())
    started_before = log.read_text().split()
    assert 2 <= done_before < len(revisions), (done_before, proc.stderr.read())
    assert not list(cache_dir.glob("measurements/*/.*.tmp"))  # no torn entry left behind

    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "done 5" in out.stdout
    rerun = log.read_text().split()[len(started_before):]
    assert len(rerun) == len(revisions) - done_before  # only the missing ones
    assert set(rerun).isdisjoint(started_before[:done_before])
    assert len(entries()) == len(revisions)


# ---- the provider on a warm cache ----------------------------------------------------------------


def test_warm_cache_loads_no_model(tmp_path, monkeypatch):
    from headwatch_testing.tiny import tiny_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for i, rev in enumerate(["step0", "step8"]):
        tiny_model("olmo", seed=i, attn_implementation="eager").save_pretrained(tmp_path / "ck" / rev)
    panel_file = tmp_path / "p.toml"
    panel_file.write_text(
        '[[models]]\nname = "m"\nrepo = "ck"\nsource = "local"\nrevisions = ["step0", "step8"]\n'
        "tokens = { per_step = 10 }\n[models.probe]\nn_examples = 8\nseq_len = 64\nvocab_lo = 16\n"
        "vocab_hi = 300\nn_pr = 8\n"
    )
    pm = load_panel(panel_file).models[0]
    opts = ProviderOptions(cache_dir=tmp_path / "c", device="cpu", progress=False)
    t0 = time.perf_counter()
    cold = Provider(opts).model_records(pm)
    cold_s = time.perf_counter() - t0

    session = Provider(opts)  # a new session: nothing in memory, everything on disk

    def no_loading(*a, **k):
        raise AssertionError("a warm cache must not load a model")

    monkeypatch.setattr(loading, "load_checkpoint", no_loading)
    t0 = time.perf_counter()
    warm = session.model_records(pm)
    warm_s = time.perf_counter() - t0
    assert [r.to_dict() for r in warm] == [r.to_dict() for r in cold]
    assert session.cache_stats()["hits"] == 2
    assert session.run.counts() == {"hit": 2}  # the session's own run info, nothing global
    print(f"cold {cold_s:.2f} s, warm {warm_s:.3f} s")

    # --refresh recomputes (and so would load): the flag reaches the cache
    with pytest.raises(AssertionError, match="must not load"):
        Provider(replace(opts, refresh=True, refresh_since=time.time() + 1)).model_records(pm)


def test_offline_measurement_whose_checkpoint_is_gone(tmp_path, monkeypatch):
    """Hub cache deleted after measuring: offline, the cached measurement is used, with a warning."""
    import shutil

    from headwatch_testing.tinypanel import save_tiny_revisions

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub = tmp_path / "hub"
    save_tiny_revisions(hub, "tiny-org/gone", "gpt_neox", {"step0": 0, "step5": 1})
    panel_file = tmp_path / "p.toml"
    panel_file.write_text(
        f'[[models]]\nname = "gone"\nrepo = "tiny-org/gone"\nrevisions = ["step0", "step5"]\n'
        f'tokens = {{ per_step = 10 }}\nhub_cache_dir = "{hub}"\n[models.probe]\nn_examples = 8\nseq_len = 64\n'
        "vocab_lo = 16\nvocab_hi = 300\nn_pr = 8\n"
    )
    pm = load_panel(panel_file).models[0]
    opts = ProviderOptions(cache_dir=tmp_path / "c", device="cpu", progress=False)
    measured = Provider(opts).model_records(pm)
    shutil.rmtree(hub)
    provider = Provider(opts)
    with pytest.warns(UserWarning, match=r"gone@step\d: checkpoint not resolvable.*without checking its commit") as caught:
        again = provider.model_records(pm)
        provider.revision_record(pm, "step5")  # read again (a per-revision test): no second warning
    assert [r.to_dict() for r in again] == [r.to_dict() for r in measured]
    # one warning per model, not per revision (an evicted PolyPythia audit read 7,854 revisions: issue 33),
    # and it does not tell the user to download what may have been evicted on purpose
    assert len([w for w in caught if "not resolvable" in str(w.message)]) == 1
    assert "hf download" not in str(caught[0].message) and "one warning per model" in str(caught[0].message)
    assert [w for w in provider.run.warnings if w.startswith("gone:")] == [
        "gone: 2 revision(s) read from the cache without checking their commits (step0, step5): checkpoint not "
        f"resolvable ('tiny-org/gone' is not in the local Hub cache at {hub} and the run is offline (--offline or HF_HUB_OFFLINE))"]
    with pytest.raises(loading.NotInCache, match="hf download"):  # nothing measured at these settings
        Provider(replace(opts, n_examples=4)).model_records(pm)


# ---- no locks needed: many writers, one entry, readers never see part of it ----------------------

WRITER = textwrap.dedent("""
    import sys
    from headwatch.fixtures.cache import CacheKey, MeasurementCache
    from headwatch.probes.record import HEAD_CLASSES, MeasurementRecord, ProbeSettings
    from headwatch_testing.sync import Gate, Signal
    root, n, ready, go = sys.argv[1], int(sys.argv[2]), Signal.from_arg(sys.argv[3]), Gate.from_arg(sys.argv[4])
    ready.set()
    go.wait()
    cache = MeasurementCache(root, lock_dir=None)  # as on separate machines: nobody waits for anybody
    key = CacheKey.make("org/m", "step1", "c" * 40, ProbeSettings())
    big = {f"L{l}_H{h}": {c: float(l * h) for c in HEAD_CLASSES} for l in range(24) for h in range(16)}  # ~100 kB
    for i in range(n):
        cache.write_entry(key, MeasurementRecord("org/m", "step1", None, 24, 16, 4, big))
""")

READER = textwrap.dedent("""
    import json, sys, time
    from headwatch_testing.sync import Gate, Signal
    path, seconds, ready, go = sys.argv[1], float(sys.argv[2]), Signal.from_arg(sys.argv[3]), Gate.from_arg(sys.argv[4])
    ready.set()
    go.wait()
    reads = partial = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            with open(path) as f:
                text = f.read()
        except FileNotFoundError:
            continue
        reads += 1
        try:
            json.loads(text)
        except ValueError:
            partial += 1
    print(reads, partial)
""")


@pytest.mark.slow
def test_concurrent_writers_without_locks_leave_one_whole_entry(tmp_path):
    """Four writers rewrite one entry 30 times each while a reader reads it: every read is a whole
    entry (atomic rename), one file remains, and no temporary is left behind."""
    writer, reader = tmp_path / "w.py", tmp_path / "r.py"
    writer.write_text(WRITER)
    reader.write_text(READER)
    root, ready, go = tmp_path / "c", Signal(), Gate()
    cache = MeasurementCache(root, lock_dir=None)
    path = cache.path_for(key())
    fds = (*ready.fds, *go.fds)
    rd = subprocess.Popen([sys.executable, str(reader), str(path), "6", ready.arg, go.arg], stdout=subprocess.PIPE,
                          text=True, pass_fds=fds)
    ws = [subprocess.Popen([sys.executable, str(writer), str(root), "30", ready.arg, go.arg], pass_fds=fds)
          for _ in range(4)]
    ready.wait(5, procs=[rd, *ws])  # all five at the start line
    go.open()
    assert all(w.wait(timeout=120) == 0 for w in ws)
    reads, partial = map(int, rd.communicate(timeout=60)[0].split())
    assert reads > 0 and partial == 0, (reads, partial)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # one entry, no temporaries
    assert cache.lookup(key()) is not None


def test_stale_temporaries_are_ignored_by_readers_and_cleaned_by_a_later_writer(tmp_path):
    cache = MeasurementCache(tmp_path, lock_dir=None, stale_temp_seconds=60)
    path = cache.path_for(key())
    path.parent.mkdir(parents=True)
    dead = path.parent / f".{path.name}.deadwriter.tmp"  # a writer killed mid-write left half an entry
    dead.write_text('{"schema": "headwatch.cache-entry/1", "key": {"mo')
    old = time.time() - 3600
    os.utime(dead, (old, old))
    live = path.parent / f".{path.name}.livewriter.tmp"  # another writer, mid-write right now
    live.write_text('{"schema"')
    assert cache.lookup(key()) is None and cache.lookup_loose(key()) is None
    assert cache.stats.corrupt == 0  # a temporary is nobody's entry: not reported, not moved
    assert cache.get_or_compute(key(), record).status == "computed"
    assert not dead.exists() and live.exists()  # only the stale one is cleaned


def test_the_lock_is_host_local_and_optional(tmp_path):
    locks = tmp_path / "locks"
    cache = MeasurementCache(tmp_path / "c", lock_dir=locks)
    entry = cache.get_or_compute(key(), record).path
    assert not list(entry.parent.glob("*.lock")), "no lock files beside the entries (a shared filesystem)"
    assert len(list(locks.glob("*.lock"))) == 1
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unlockable = MeasurementCache(tmp_path / "c2", lock_dir=blocker / "locks")  # cannot be created
    assert unlockable.get_or_compute(key(), record).status == "computed"  # computed anyway


# ---- entries holding values no record may hold ----


def _unit_record(value: float = 1.0) -> MeasurementRecord:
    return MeasurementRecord(
        model="org/m", revision="step1", tokens_seen=None, n_layers=1, n_heads=1, d_head=4,
        all_head_selectivity={"L0_H0": {c: value for c in HEAD_CLASSES}}, settings=ProbeSettings(n_examples=4),
    )


def test_cache_entries_with_bad_values_are_moved_aside_and_recomputed(tmp_path):
    cache = MeasurementCache(tmp_path)
    key = CacheKey.make("org/m", "step1", "c" * 40, ProbeSettings(n_examples=4))
    first = cache.get_or_compute(key, _unit_record)
    text = first.path.read_text()
    first.path.write_text(text.replace('"induction": 1.0', '"induction": NaN', 1))
    with pytest.warns(UserWarning, match="NaN"):
        again = cache.get_or_compute(key, lambda: _unit_record(2.0))
    assert again.status == "recomputed-corrupt" and again.record.all_head_selectivity["L0_H0"]["induction"] == 2.0
    assert first.path.with_name(first.path.name + ".corrupt").exists()
