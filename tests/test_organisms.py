"""Model organisms: a cut-down organism per family trains a few steps into a Hub-format cache,
its checkpoints load offline by (repo id, revision), and training is deterministic and resumable.

The real recipes take minutes; these shrink the architecture and data (same classes, same code
path) so the whole module runs in seconds.
"""
from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch

from headwatch.hubcache import cached_revisions, repo_folder
from headwatch.model_organisms import FAMILIES, ORGANISMS, DataSpec, missing_jobs, runner
from headwatch.model_organisms import train as train_mod
from headwatch.model_organisms.numerics import training_env
from headwatch.model_organisms.train import META_FILE, STATE_DIR, TrainLog, log_schedule, missing_revisions, train

TINY_DATA = DataSpec(seq_len=24, batch_size=4, vocab_lo=4, vocab_hi=64, span_lo=4, span_hi=10)


def tiny(family: str):
    """The family's real recipe, shrunk to a few seconds of training."""
    r = ORGANISMS[family].recipe
    extra = {"intermediate_size": 32}
    return dataclasses.replace(
        r, n_layers=2, d_model=32, n_heads=2, vocab_size=64, data=TINY_DATA,
        total_steps=6, checkpoints=(0, 2, 6), **extra,
    )


@pytest.fixture
def offline(monkeypatch):
    """HF_HUB_OFFLINE=1, also for the already-imported huggingface_hub constant."""
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)


def load(cache_dir, repo: str, revision: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        repo, revision=revision, cache_dir=cache_dir, use_safetensors=True
    )


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_cache_layout_and_offline_load(family, tmp_path, offline):
    recipe = tiny(family)
    log = train(recipe, seed=0, cache_dir=tmp_path, progress=False)
    repo = f"headwatch-organisms/{family}-seed0"
    refs = cached_revisions(tmp_path, repo)
    assert sorted(refs) == ["step0", "step2", "step6"]
    root = repo_folder(tmp_path, repo)
    for rev, commit in refs.items():
        snap = root / "snapshots" / commit
        names = sorted(p.name for p in snap.iterdir())
        assert names == sorted(["config.json", "generation_config.json", "model.safetensors", META_FILE]) or \
            names == sorted(["config.json", "model.safetensors", META_FILE]), names
        meta = json.loads((snap / META_FILE).read_text())
        step = int(rev.removeprefix("step"))
        assert meta["step"] == step and meta["revision"] == rev and meta["repo_id"] == repo
        assert meta["tokens_seen"] == step * TINY_DATA.batch_size * TINY_DATA.seq_len
    assert len(set(refs.values())) == 3, "distinct checkpoints must have distinct weights"
    assert log.complete and log.step == 6
    # Once complete, only the JSON log of the training state remains (no moments, no pickle).
    state = tmp_path / STATE_DIR / f"{family}-seed0"
    assert [p.name for p in state.iterdir()] == ["log.json"]
    assert not list(tmp_path.rglob("*.bin")) and not list(tmp_path.rglob("*.pt"))

    m0, m6 = load(tmp_path, repo, "step0"), load(tmp_path, repo, "step6")
    assert type(m0).__name__ == recipe.model_class().__name__
    assert m0.config.num_hidden_layers == 2
    p0, p6 = dict(m0.named_parameters()), dict(m6.named_parameters())
    assert any(not torch.equal(p0[k], p6[k]) for k in p0), "training changed no weight"
    with pytest.raises(OSError):
        load(tmp_path, repo, "step3")


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_deterministic_and_resumable(family, tmp_path):
    recipe = tiny(family)
    whole, split = tmp_path / "whole", tmp_path / "split"
    train(recipe, seed=1, cache_dir=whole, progress=False)
    # Kill after 3 updates (state saved at step 2, a checkpoint, and every step here), then resume.
    partial = train(recipe, seed=1, cache_dir=split, progress=False, state_every=1, stop_after=3)
    assert partial.step == 3 and not partial.complete
    assert missing_revisions(recipe, 1, split) == [6]
    done = train(recipe, seed=1, cache_dir=split, progress=False)
    assert done.complete and done.step == 6
    repo = f"headwatch-organisms/{family}-seed1"
    assert cached_revisions(whole, repo) == cached_revisions(split, repo), "resumed run diverged"


@pytest.mark.slow
def test_a_state_torn_between_its_two_files_is_trained_again_not_resumed(tmp_path):
    """Killed after writing the model but before the optimizer and the log: resuming would pair
    step 4's weights with step 3's moments and log. The run starts again and ends with the same weights."""
    import shutil

    recipe = tiny("gptneox")
    whole, torn = tmp_path / "whole", tmp_path / "torn"
    train(recipe, seed=1, cache_dir=whole, progress=False)
    state = torn / STATE_DIR / "gptneox-seed1"
    train(recipe, seed=1, cache_dir=torn, progress=False, state_every=1, stop_after=3)
    kept = tmp_path / "kept"
    kept.mkdir()
    for name in ("optimizer.safetensors", "optimizer_groups.json", "log.json"):
        shutil.copy(state / name, kept / name)
    train(recipe, seed=1, cache_dir=torn, progress=False, state_every=1, stop_after=1)  # the model at step 4
    for name in ("optimizer.safetensors", "optimizer_groups.json", "log.json"):
        shutil.copy(kept / name, state / name)  # the rest as at step 3: the kill's state
    assert TrainLog.load(state / "log.json").step == 3
    assert train_mod.resumable_log(recipe, state) is None
    done = train(recipe, seed=1, cache_dir=torn, progress=False)
    assert done.complete and done.step == 6
    repo = "headwatch-organisms/gptneox-seed1"
    assert cached_revisions(whole, repo) == cached_revisions(torn, repo), "a torn state was resumed"


@pytest.mark.slow
def test_training_threads_are_the_callers_again_afterwards(tmp_path):
    """train(threads=N) trains with N threads (logged) and leaves the process's own count alone."""
    import torch

    before = torch.get_num_threads()
    other = 1 if before != 1 else 2
    log = train(tiny("gptneox"), seed=0, cache_dir=tmp_path, progress=False, threads=other)
    assert log.threads == other
    assert torch.get_num_threads() == before


@pytest.mark.slow
def test_other_seed_other_weights(tmp_path):
    recipe = tiny("gptneox")
    train(recipe, seed=0, cache_dir=tmp_path, progress=False)
    train(recipe, seed=1, cache_dir=tmp_path, progress=False)
    a = cached_revisions(tmp_path, "headwatch-organisms/gptneox-seed0")
    b = cached_revisions(tmp_path, "headwatch-organisms/gptneox-seed1")
    assert a["step0"] != b["step0"] and a["step6"] != b["step6"]


@pytest.mark.slow
def test_missing_jobs_are_what_the_cache_lacks(tmp_path, monkeypatch):
    """An organism is missing until every scheduled checkpoint is cached; an unknown one is refused."""
    organism = dataclasses.replace(ORGANISMS["olmo"], recipe=tiny("olmo"))
    monkeypatch.setitem(ORGANISMS, "olmo", organism)
    assert [(j.family, j.seed, j.cache_dir) for j in missing_jobs([("olmo", 0, tmp_path)])] == [("olmo", 0, tmp_path)]
    train(organism.recipe, seed=0, cache_dir=tmp_path, progress=False)
    assert [j.seed for j in missing_jobs([("olmo", 0, tmp_path), ("olmo", 1, tmp_path)])] == [1]
    with pytest.raises(ValueError, match="unknown organism"):
        missing_jobs([("llama", 0, tmp_path)])


# ---- the runner: children, progress lines, the lock ------------------------------------------------

FAKE_CHILD = """
import os, signal, sys, time
from pathlib import Path
from headwatch.model_organisms.runner import Progress
from headwatch.processes import as_child
as_child()  # what the training child's entry point does first
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
family, seed = args["--family"], int(args["--seed"])
Path(args["--cache-dir"], f"{family}.pid").write_text(str(os.getpid()))
if "--niceness" in args:  # as the training child does first
    os.nice(int(args["--niceness"]))
with open(Path(args["--cache-dir"], "started"), "a") as f:
    f.write(f"{family} {os.nice(0)}\\n")
print("some library chatter", flush=True)
for i, step in enumerate((0, 5, 10)):
    print(Progress("checkpoint", family, seed, step=step, total=10, revision=f"step{step}", checkpoint=i + 1,
                   checkpoints=3, elapsed=0.1 * i, eta=None if i == 0 else 1.0).to_line(), flush=True)
    if family == "endless":
        signal.pause()  # trains until it is stopped
    time.sleep(0.05)  # a little training between checkpoints
if family == "broken":
    print("Traceback: it broke", flush=True)
    sys.exit(3)
print(Progress("done", family, seed, step=10, total=10).to_line(), flush=True)
"""


@pytest.fixture
def fake_child(tmp_path, monkeypatch):
    (tmp_path / "fake_child.py").write_text(FAKE_CHILD)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # training_env() copies the environment
    return "fake_child"


@pytest.mark.slow
def test_runner_relays_each_childs_progress_and_runs_them_in_parallel(fake_child, tmp_path):
    seen = []
    jobs = [runner.TrainingJob("gptneox", 0, tmp_path), runner.TrainingJob("olmo", 0, tmp_path)]
    runner.train_in_subprocesses(jobs, parallel=2, report=seen.append, module=fake_child)
    for family in ("gptneox", "olmo"):
        mine = [p for p in seen if p.family == family]
        assert [p.event for p in mine] == ["checkpoint"] * 3 + ["done"]
        assert [p.step for p in mine[:3]] == [0, 5, 10]
    line = [p for p in seen if p.family == "gptneox"][1].describe()
    assert "step 5/10" in line and "checkpoint 2/3" in line and "ETA 1 s" in line
    assert "chatter" not in " ".join(p.describe() for p in seen)  # non-progress output is not relayed


@pytest.mark.slow
@pytest.mark.parametrize("parallel,cores", [(1, 2), (3, 2), (3, 4)])
def test_the_longest_job_starts_first_and_alone_keeps_its_priority_beside_more_children_than_cores(
        fake_child, tmp_path, monkeypatch, parallel, cores):
    """OLMo's recipe is the longest: it starts first, and where three children share two cores the
    shorter two run BESIDE_LONGEST_NICENESS lower; with a core each, or one at a time, nobody yields."""
    monkeypatch.setattr(runner.os, "cpu_count", lambda: cores)
    jobs = [runner.TrainingJob(f, 0, tmp_path) for f in ("gptneox", "olmoe", "olmo")]
    runner.train_in_subprocesses(jobs, parallel=parallel, report=None, module=fake_child)
    started = dict(line.split() for line in (tmp_path / "started").read_text().splitlines())
    mine = os.nice(0)
    lowered = runner.BESIDE_LONGEST_NICENESS if parallel > cores else 0
    assert {f: int(n) - mine for f, n in started.items()} == {"olmo": 0, "gptneox": lowered, "olmoe": lowered}
    if parallel == 1:
        assert list(started) == ["olmo", "olmoe", "gptneox"]  # longest first: 2000, 2500 and 1750 steps


@pytest.mark.parametrize("seconds,parallel,cores,expected", [
    ([239.0, 484.0, 345.0], 3, 2, [3, 0, 3]),   # the cold run's three: OLMo alone keeps its priority
    ([239.0, 484.0, 345.0], 2, 2, [0, 0, 0]),   # a core each
    ([239.0, 484.0, 345.0], 3, 4, [0, 0, 0]),
    ([100.0, 100.0, 100.0], 3, 2, [0, 3, 3]),   # a tie: the first
    ([100.0] * 10, 3, 2, [0] + [3] * 9),        # a seed population: one child at 0 at any time
    ([50.0], 1, 1, [0]),
])
def test_child_niceness(seconds, parallel, cores, expected):
    assert runner.child_niceness(seconds, parallel, cores) == expected


@pytest.mark.slow
def test_runner_reports_a_failed_child_with_its_output(fake_child, tmp_path):
    seen = []
    with pytest.raises(runner.TrainingError, match=r"broken seed 0 failed \(exit 3\).*it broke"):
        runner.train_in_subprocesses([runner.TrainingJob("broken", 0, tmp_path), runner.TrainingJob("olmo", 0, tmp_path)],
                                     parallel=1, report=seen.append, module=fake_child)
    assert [p.event for p in seen if p.family == "olmo"][-1] == "done"  # the others still ran
    assert [p.event for p in seen if p.family == "broken"][-1] == "failed"


@pytest.mark.slow
def test_the_step_holds_every_lock_from_its_start_and_hands_each_to_its_child(fake_child, tmp_path):
    """What the training step does: every lock is taken before any child starts (so whoever asks for
    an organism waits for it, even for a job still queued), each passes to its child, which keeps it
    to its end; whoever waited then finds the training over, and no lock is left behind."""
    import threading

    jobs = [runner.TrainingJob("gptneox", 0, tmp_path), runner.TrainingJob("olmo", 0, tmp_path)]
    every = [("gptneox", 0, tmp_path), ("olmo", 0, tmp_path), ("olmoe", 0, tmp_path)]
    locks = runner.hold_locks(jobs)
    assert runner.training_now(every) == 2  # before any child exists
    seen = []
    step = threading.Thread(target=runner.train_in_subprocesses, args=(jobs,),
                            kwargs=dict(parallel=1, report=seen.append, module=fake_child, locks=locks))
    step.start()
    assert runner.wait_until_trained("olmo", 0, tmp_path) > 0  # olmo's child waits its turn (parallel=1)
    assert [p.event for p in seen if p.family == "olmo"][-1] == "done"  # it waited for the child's end
    step.join(60)
    assert not locks  # each lock went to its child: this process kept no copy
    assert runner.wait_until_trained("olmo", 0, tmp_path) < 1  # nobody holds it now
    assert runner.wait_until_trained("olmoe", 0, tmp_path) == 0  # never trained here: nothing to wait for
    assert runner.training_now(every) == 0


FAKE_STEP = """
import signal, sys
from pathlib import Path
from headwatch.model_organisms import runner
from headwatch.processes import watch_parent
watch_parent()  # what `headwatch organisms train` does first
def interrupted(signum, frame):  # as `headwatch organisms train` takes SIGTERM: as Ctrl-C
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, interrupted)
cache, module, *families = sys.argv[1:]
jobs = [runner.TrainingJob(f, 0, Path(cache)) for f in families]
locks = runner.hold_locks(jobs)
print("a line of its own", flush=True)
print(runner.READY_LINE, flush=True)
try:
    runner.train_in_subprocesses(jobs, parallel=len(jobs), report=lambda p: print(p.to_line(), flush=True),
                                 module=module, locks=locks)
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.fixture
def fake_step(fake_child, tmp_path):
    """What a front end starts: ``headwatch organisms train --progress-lines`` in miniature (locks, the
    ready line, the children's progress lines), training ``fake_child``'s organisms; argv for families."""
    import sys

    (tmp_path / "fake_step.py").write_text(FAKE_STEP)
    return lambda *families: [sys.executable, "-m", "fake_step", str(tmp_path), fake_child, *families]


@pytest.mark.slow
def test_a_training_step_returns_once_it_holds_the_locks_and_relays_its_lines(fake_step, tmp_path):
    seen, said = [], []
    step = runner.TrainingStep(fake_step("gptneox", "olmo"), report=seen.append, say=said.append).start()
    assert runner.training_now([("gptneox", 0, tmp_path), ("olmo", 0, tmp_path)]) == 2 or not step.running
    assert step.wait() is None and step.seconds > 0
    assert {(p.family, p.event) for p in seen} >= {("gptneox", "done"), ("olmo", "done")}
    assert said == ["a line of its own"]  # its own lines, not the children's chatter or the ready line


def _running_step(argv, tmp_path, inherit_sigint_ignored):
    """A started fake step whose endless child has reported (runs), and that child's pid."""
    import threading

    running = threading.Event()
    with inherit_sigint_ignored():
        step = runner.TrainingStep(argv, report=lambda p: running.set()).start()
    assert running.wait(60), "the child never reported"  # its first checkpoint: the child is running
    assert runner.training_now([("endless", 0, tmp_path)]) == 1
    return step, int((tmp_path / "endless.pid").read_text())


@pytest.mark.slow
def test_the_step_and_its_children_run_in_a_group_of_their_own_inside_the_front_ends_session(
        fake_step, tmp_path, sigint_ignored):
    """A process group of its own (a terminal's Ctrl-C reaches the front end only, and a kill takes
    the whole group), but the front end's session: where the kernel shares CPU time between sessions
    (autogroup), a session of its own would hold the training to half the cores beside the tests."""
    step, child = _running_step(fake_step("endless"), tmp_path, sigint_ignored)
    try:
        assert os.getpgid(step.pid) == step.pid != os.getpgid(0)
        assert os.getpgid(child) == step.pid  # the children too: killpg reaches them
        assert os.getsid(step.pid) == os.getsid(child) == os.getsid(0)
    finally:
        step.stop()


@pytest.mark.slow
@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_a_stopped_step_stops_its_children_and_frees_the_locks(fake_step, tmp_path, sigint, sigint_ignored, pid_alive):
    """Stopped (SIGTERM, taken as Ctrl-C), the step stops its children; their locks die with them.
    Whatever SIGINT disposition the step inherited: "ignored" is a step started from a background
    job of a non-interactive shell, where a SIGINT would never arrive (issue 49: killed after the
    60 s grace, its children left training)."""
    import contextlib

    step, child = _running_step(fake_step("endless"), tmp_path, sigint_ignored if sigint == "ignored" else
                                contextlib.nullcontext)
    error = step.stop()
    assert isinstance(error, runner.TrainingCancelled) and "resume" in str(error), error  # exit 130: not killed
    assert not step.running and runner.training_now([("endless", 0, tmp_path)]) == 0
    assert runner.wait_until_trained("endless", 0, tmp_path) < 1
    assert not pid_alive(child)


@pytest.mark.slow
def test_a_killed_step_takes_its_children_with_it_and_a_rerun_starts(fake_step, tmp_path, sigint_ignored, pid_alive):
    """A step that must be killed (SIGKILL: stop()'s last resort, the OOM killer, kill -9) leaves no
    child training behind: each child watches the step and ends with it, and its lock with it; a rerun
    takes the lock at once and trains (here: runs its endless child again), and stops when asked."""
    import signal
    import time

    step, child = _running_step(fake_step("endless"), tmp_path, sigint_ignored)
    os.kill(step.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(child), "the killed step's child outlived it"
    error = step.wait()
    assert isinstance(error, runner.TrainingError) and "exit -9" in str(error), error
    assert runner.training_now([("endless", 0, tmp_path)]) == 0
    assert runner.wait_until_trained("endless", 0, tmp_path) < 1

    rerun, child = _running_step(fake_step("endless"), tmp_path, sigint_ignored)  # took the lock, trains
    assert isinstance(rerun.stop(), runner.TrainingCancelled)
    assert not pid_alive(child) and runner.training_now([("endless", 0, tmp_path)]) == 0


@pytest.mark.slow
def test_a_child_whose_parent_is_gone_ends_itself(fake_child, tmp_path, pid_alive):
    """The watch itself: a child told to watch a parent that is already gone (re-parented before it
    started) ends at once, before doing any work; a child not told to watch anyone runs as usual."""
    import subprocess
    import sys

    from headwatch import processes

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    env = {**os.environ, processes.PARENT_PID_ENV: str(dead.pid)}
    cmd = [sys.executable, "-m", fake_child, "--family", "gptneox", "--seed", "0", "--cache-dir", str(tmp_path)]
    orphan = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert orphan.returncode == -9 and "checkpoint" not in orphan.stdout, orphan
    alone = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0 and '"done"' in alone.stdout, alone


def test_a_step_that_ends_before_holding_its_locks(tmp_path):
    """Refused or failed before training: start() says so with its output; with nothing to do (exit 0), it is done."""
    import sys

    with pytest.raises(runner.TrainingError, match=r"exit 2.*refused: too many"):
        runner.TrainingStep([sys.executable, "-c", "print('refused: too many'); raise SystemExit(2)"]).start()
    step = runner.TrainingStep([sys.executable, "-c", "print('nothing to train')"], say=lambda line: None).start()
    assert step.wait() is None and not step.running


def test_the_estimate_shares_the_cores():
    """Three jobs on two cores, three at a time: the longest finishes once the others free their share."""
    assert runner.estimate_seconds([100.0], 1, cores=2) == pytest.approx(100)
    assert runner.estimate_seconds([100.0, 100.0], 2, cores=2) == pytest.approx(100)
    # 239 / 345 / 484 one-core seconds (the organisms panel, AMD): 603 s on 2 cores, as measured (10 min 17 s)
    assert runner.estimate_seconds([239.0, 345.0, 484.0], 3, cores=2) == pytest.approx(603, abs=2)
    assert runner.estimate_seconds([10.0] * 4, 1, cores=2) == pytest.approx(40)


def test_a_file_system_without_flock_never_makes_anyone_wait(tmp_path, monkeypatch):
    """Only a lock someone holds means training: where flock itself fails (ENOLCK on some network
    file systems) nothing is counted as training and nothing is waited for, instead of forever."""
    import errno
    import fcntl

    (tmp_path / STATE_DIR).mkdir()
    (tmp_path / STATE_DIR / "olmo-seed0.lock").write_text("")

    def no_locks(*args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert runner.training_now([("olmo", 0, tmp_path)]) == 0
    assert runner.wait_until_trained("olmo", 0, tmp_path) == 0


def test_training_env_pins_thread_pools():
    env = training_env()
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env.get("PATH") == __import__("os").environ.get("PATH")


@pytest.mark.slow
def test_child_trains_under_a_lock_and_reports_each_checkpoint(tmp_path, monkeypatch, capsys):
    """The child (what ``python -m headwatch.model_organisms`` runs): one line per checkpoint; a
    second process asking for an organism that is being trained waits for it, then trains nothing."""
    import fcntl
    import threading

    organism = dataclasses.replace(ORGANISMS["olmo"], recipe=tiny("olmo"))
    monkeypatch.setitem(ORGANISMS, "olmo", organism)
    args = ["--family", "olmo", "--seed", "0", "--cache-dir", str(tmp_path)]
    lock_path = tmp_path / STATE_DIR / "olmo-seed0.lock"
    lock_path.parent.mkdir(parents=True)
    with open(lock_path, "a+") as held:  # another process is training olmo seed 0 ...
        fcntl.flock(held, fcntl.LOCK_EX)
        blocked, flock = threading.Event(), fcntl.flock

        def flock_and_say(fd, op):  # the child's blocking wait for the lock: signalled as it starts
            if op == fcntl.LOCK_EX:
                blocked.set()
            return flock(fd, op)

        monkeypatch.setattr(fcntl, "flock", flock_and_say)
        waiter = threading.Thread(target=runner.child_main, args=(args,))
        waiter.start()
        assert blocked.wait(60), "the child never reached the lock"
        monkeypatch.setattr(fcntl, "flock", flock)
        said = capsys.readouterr().out  # the "waiting" line, printed before it blocks
        assert '"waiting"' in said and waiter.is_alive(), said  # ... so this one waits
        train(organism.recipe, seed=0, cache_dir=tmp_path, progress=False)
        fcntl.flock(held, fcntl.LOCK_UN)
    waiter.join(60)
    events = [runner.Progress.from_line(l) for l in (said + capsys.readouterr().out).splitlines()]
    assert [(e.event, e.message) for e in events] == [("waiting", ""), ("done", "already trained")]

    other = tmp_path / "fresh"
    assert runner.child_main(args[:-1] + [str(other)]) == 0
    events = [runner.Progress.from_line(l) for l in capsys.readouterr().out.splitlines()]
    assert [e.event for e in events] == ["start", "checkpoint", "checkpoint", "checkpoint", "done"]
    assert [e.revision for e in events if e.event == "checkpoint"] == ["step0", "step2", "step6"]
    assert events[-2].eta == 0 and missing_revisions(organism.recipe, 0, other) == []


def test_cli_families_are_the_packages():
    from headwatch.model_organisms import FAMILIES
    from headwatch.cli.organisms import FAMILIES as CLI_FAMILIES, ORGANISM_NAMES

    assert CLI_FAMILIES == FAMILIES
    assert ORGANISM_NAMES == tuple(ORGANISMS)


def test_log_schedule_is_log_spaced_from_zero():
    s = log_schedule(1500, 16, 9)
    assert s[0] == 0 and s[-1] == 1500 and len(s) == 9
    ratios = [b / a for a, b in zip(s[1:], s[2:])]
    assert max(ratios) / min(ratios) < 1.1


def test_recipes_meet_the_issue_shape():
    """>= 8 checkpoints including 0, OLMoE with >= 4 experts, probe batch inside the training vocab."""
    for family, org in ORGANISMS.items():
        r = org.recipe
        assert len(r.checkpoints) >= 8 and r.checkpoints[0] == 0
        assert r.data.vocab_lo <= org.probe.vocab_lo < org.probe.vocab_hi <= r.data.vocab_hi
        assert org.probe.seq_len <= r.data.seq_len
        # The probe's induction distance (T-2-ab, ab in [20, T/2)) lies within trained spans - 1.
        T = org.probe.seq_len
        assert r.data.span_lo - 1 <= T - 2 - (T // 2 - 1) and T - 2 - 20 <= r.data.span_hi - 1
    assert ORGANISMS["olmoe"].recipe.num_experts >= 4


@pytest.mark.slow
def test_a_changed_recipe_is_retrained_not_reused(tmp_path):
    """Checkpoints made by another recipe under the same repo id count as missing."""
    recipe = tiny("gptneox")
    train(recipe, seed=0, cache_dir=tmp_path, progress=False)
    assert missing_revisions(recipe, 0, tmp_path) == []
    changed = dataclasses.replace(recipe, optim=dataclasses.replace(recipe.optim, lr=recipe.optim.lr / 2))
    assert missing_revisions(changed, 0, tmp_path) == list(changed.checkpoints)
    train(changed, seed=0, cache_dir=tmp_path, progress=False)
    assert missing_revisions(changed, 0, tmp_path) == []
    assert missing_revisions(recipe, 0, tmp_path) == list(recipe.checkpoints)


def test_a_shortened_recipe_is_the_longer_ones_first_steps(tmp_path):
    """Ending a recipe earlier on the same schedule (the cosine's horizon given explicitly, as every
    shipped recipe gives it) trains the same weights up to the new end: the robustness matrix's cells
    of the longer recipe hold for the shorter one up to there (issue 28)."""
    long = tiny("gptneox")
    assert long.optim.cosine_steps  # the learning rate does not depend on total_steps
    short = dataclasses.replace(long, total_steps=4, checkpoints=(0, 2, 4))
    train(long, seed=0, cache_dir=tmp_path / "long", progress=False)
    train(short, seed=0, cache_dir=tmp_path / "short", progress=False)
    longer = dataclasses.replace(long, checkpoints=(0, 2, 4, 6))
    train(longer, seed=0, cache_dir=tmp_path / "longer", progress=False)
    repo = "headwatch-organisms/gptneox-seed0"

    def weights(cache, rev):
        root = repo_folder(cache, repo)
        return (root / "snapshots" / cached_revisions(cache, repo)[rev] / "model.safetensors").read_bytes()

    assert weights(tmp_path / "short", "step2") == weights(tmp_path / "long", "step2")
    assert weights(tmp_path / "short", "step4") == weights(tmp_path / "longer", "step4")
    assert weights(tmp_path / "longer", "step6") == weights(tmp_path / "long", "step6")
    for name, org in ORGANISMS.items():
        assert org.recipe.optim.cosine_steps, name  # explicit: shortening a recipe keeps its schedule


def test_one_more_child_than_cores_when_jobs_wait():
    """Three organisms on two cores train at once (the cores stay busy to the end); never more than the jobs."""
    assert runner.default_parallel(1, 3, 2) == 3
    assert runner.default_parallel(1, 10, 2) == 3
    assert runner.default_parallel(1, 2, 2) == 2 and runner.default_parallel(1, 1, 2) == 1
    assert runner.default_parallel(2, 3, None) >= 1


# ---- headwatch organisms train: arguments checked before any child starts ----


@pytest.mark.parametrize("argv, names", [(["--seeds", "-1"], "--seeds"), (["--family", "olm"], "--family"),
                                         (["--organisms-cache-dir", "{file}"], "a-file")])
def test_organisms_train_arguments_are_checked(argv, names, tmp_path, headwatch_cli, monkeypatch):
    """Refused before any child process starts (main started training with them)."""
    from headwatch.model_organisms import runner

    def train(*args, **kwargs):
        raise AssertionError("training started with bad arguments")

    monkeypatch.setattr(runner, "train_in_subprocesses", train)
    (tmp_path / "a-file").write_text("")
    argv = [a.replace("{file}", str(tmp_path / "a-file")) for a in argv]
    if "--organisms-cache-dir" not in argv:
        argv += ["--organisms-cache-dir", str(tmp_path / "org")]
    r = headwatch_cli("organisms", "train", "--family", "olmo", *argv)
    assert r.code == 2 and names in r.err, r.err
