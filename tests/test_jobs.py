"""``--jobs`` (headwatch/cli/jobs.py): ``judge`` and ``report`` spread models over processes, and say
exactly what one process says: the same lines, JSON, report files, warnings, errors and exit codes;
bad values are refused; a worker that raises raises in its model's turn; a worker that dies, or a
Ctrl-C, leaves no process behind."""
from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headwatch.cli import build_parser, jobs
from headwatch.validation import InputError, input_error_from
from headwatch_testing import jobs_work

pytestmark = pytest.mark.filterwarnings("ignore:item:UserWarning")

#: Both ways a worker starts: forked (the CLI's usual: a tenth of a second) and spawned (where forking
#: is not safe: each worker imports headwatch, seconds, so those tests are slow, like any process pool's).
METHODS = ["fork", pytest.param("spawn", marks=pytest.mark.slow)]
SIZES = {"14m": (6, 4, 32)}


def in_order(items, n: int, method: str | None = None) -> list:
    with jobs.InOrder(jobs_work.work, items, n, context=jobs_work.Context(3),
                      worker_context=jobs_work.Context(3, worker=True), run_here=(jobs_work.RunHere,),
                      method=method) as results:
        return list(results)


# ---- the option ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["judge", "report"])
@pytest.mark.parametrize("value,says", [("0", "got 0"), ("-2", "got -2"), ("two", "'two' is not an integer"),
                                        ("1.5", "'1.5' is not an integer")])
def test_a_bad_jobs_value_is_refused_naming_the_option(command, value, says, capsys):
    argv = [command, f"--jobs={value}"] + (["--out", "x"] if command == "report" else [])
    with pytest.raises(SystemExit) as e:
        build_parser(command).parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --jobs" in err and says in err
    assert "a number of processes >= 1" in err


class _Model:
    def __init__(self, revisions: int) -> None:
        self.sorted_revisions = [f"step{i}" for i in range(revisions)]


def test_the_default_is_the_usable_cores_for_a_large_selection_and_one_process_for_a_small_one(monkeypatch):
    monkeypatch.setattr(jobs, "usable_cores", lambda: 4)
    many = [_Model(154)] * 51
    assert jobs.jobs_for(None, many) == 4
    assert jobs.jobs_for(None, many[:3]) == 1  # 462 revisions: starting workers would cost what they save
    assert jobs.jobs_for(None, [_Model(600), _Model(600)]) == 2  # at most one per model
    assert jobs.jobs_for(8, many[:3]) == 3 and jobs.jobs_for(1, many) == 1 and jobs.jobs_for(2, []) == 1


def test_the_usable_cores_are_this_process_s_affinity():
    assert jobs.usable_cores() == len(os.sched_getaffinity(0))


def test_fork_only_where_it_is_safe(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch", object()))
    assert jobs.start_method() == "spawn"  # torch's thread pools do not survive a fork


def test_progress_is_a_plain_line_on_a_long_run(caplog, monkeypatch):
    import logging

    clock = [0.0]
    monkeypatch.setattr(jobs.time, "perf_counter", lambda: clock[0])
    progress = jobs.Progress(51, logging.getLogger("headwatch_testing.progress"))
    with caplog.at_level("INFO", logger="headwatch_testing.progress"):
        for done, t in ((3, 2.0), (12, jobs.PROGRESS_AFTER), (13, jobs.PROGRESS_AFTER + 1), (30, 25.0), (51, 40.0)):
            clock[0] = t
            progress.update(done)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["judged 12 of 51 models, about 32 s left", "judged 30 of 51 models, about 18 s left"]
    assert not any("\r" in line or "\x1b" in line for line in lines)
    assert all(PROGRESS_LINE.fullmatch(line + "\n") for line in lines)  # what the byte-identity test sets aside


# ---- the pool: results, what workers say, errors ------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_results_and_what_the_workers_say_come_back_in_order(method, capsys, recwarn, caplog):
    caplog.set_level("INFO", logger="headwatch.jobs_test")
    jobs_work.log.propagate, before = True, jobs_work.log.propagate

    def run(n):
        caplog.clear()
        recwarn.clear()
        got = in_order([1, 2, "here", 4], n, method)
        return got, capsys.readouterr().out, [str(w.message) for w in recwarn], [r.getMessage() for r in caplog.records]

    try:
        one, two = run(1), run(2)
    finally:
        jobs_work.log.propagate = before
    assert one == two
    assert one[0] == [3, 6, "done here", 12]
    assert one[1] == "printed 1\nprinted 2\nprinted 4\n"
    assert one[2] == ["item 1", "item 2", "item 4"] and one[3] == ["log 1", "log 2", "log 4"]
    assert not multiprocessing.active_children()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("item,kind", [("raise", ValueError), ("bad input", InputError)])
def test_a_worker_that_raises_raises_here_in_its_turn(method, item, kind, capsys):
    for n in (1, 2):
        done = []
        with pytest.raises(kind) as e:
            with jobs.InOrder(jobs_work.work, [1, item, 3], n, context=jobs_work.Context(3), method=method) as results:
                for r in results:
                    done.append(r)
        assert done == [3] and str(e.value) in ("planted defect", "planted bad input")
        if n == 2:  # where it was raised comes with it
            assert "jobs_work.py" in str(e.value.__cause__) and "in work" in str(e.value.__cause__)
    assert not multiprocessing.active_children()


def test_an_exception_that_cannot_cross_keeps_its_class_of_error():
    with pytest.raises(jobs_work.Unpicklable):
        in_order(["unpicklable"], 1)
    with pytest.raises(RuntimeError, match="Unpicklable: cannot cross") as e:
        in_order([1, "unpicklable"], 2, "fork")
    assert input_error_from(e.value) is None  # a defect either way: exit 3
    assert not multiprocessing.active_children()


@pytest.mark.parametrize("method", METHODS)
def test_a_worker_that_dies_is_the_machine_not_a_hang_and_leaves_no_process(method):
    with pytest.raises(jobs.WorkerDied, match="killed, or out of memory.*--jobs 1") as e:
        in_order([1, "die", 3, 4], 2, method)
    assert isinstance(input_error_from(e.value), InputError)  # exit 2, with one message
    assert not multiprocessing.active_children()


# ---- judge and report on a planted population ---------------------------------------------------------


def _panel_text(sizes, seeds, revisions) -> str:
    revs = ", ".join(f'"{r}"' for r in revisions)
    return f"""[[models]]
name = "pythia-{{size}}"
source = "hub"
sizes = {json.dumps(sizes)}
seeds = {json.dumps(seeds)}
repo = "EleutherAI/pythia-{{size}}-seed{{seed}}"
revisions = [{revs}]
tokens = {{ per_step = 2097152 }}
[models.expect]
dclm = false

[[models]]
name = "pythia-14m-data-seed{{seed}}"
source = "hub"
population = "pythia-14m"
role = "candidate"
seeds = [1]
repo = "EleutherAI/pythia-14m-data-seed{{seed}}"
revisions = [{revs}]
tokens = {{ per_step = 2097152 }}
[models.expect]
dclm = false
"""


def plant(folder: Path, seeds=(1, 2, 3), revisions=("step0", "step1000", "step16000", "step143000"),
          odd: str | None = None) -> Path:
    """A PolyPythia-shaped panel (14m, ``seeds``, one candidate) and its planted cache in ``folder``
    (as benchmarks/population_scale.py builds it); model ``odd`` gets one record of other heads."""
    from headwatch.claims.synthetic_population import suite_records
    from headwatch.fixtures.cache import MeasurementCache
    from headwatch.fixtures.panels import load_panel
    from headwatch.fixtures.provider import ProviderOptions, measurement_key

    panel = folder / "suite.toml"
    panel.write_text(_panel_text(list(SIZES), list(seeds), list(revisions)))
    options = ProviderOptions(cache_dir=folder / "cache", progress=False)
    cache = MeasurementCache(options.measurement_dir)
    for i, pm in enumerate(load_panel(panel).models):
        layers, heads, d_head = SIZES["14m"]
        revs = [(r, float(pm.tokens_rule.tokens(r))) for r in pm.sorted_revisions]
        settings = [pm.settings_for(r) for r, _ in revs]
        for rec in suite_records(pm.repo, layers, heads, d_head, revs, settings, seed=100 + i, onset=2e9 * (1 + 0.2 * i),
                                 bos_at_end=0.3):
            if pm.id == odd and rec.revision == revisions[-1]:
                rec = next(suite_records(pm.repo, layers + 1, heads, d_head, revs[-1:], settings[-1:], seed=1,
                                         onset=2e9, bos_at_end=0.3))
            cache.write_entry(measurement_key(pm, rec.revision, "planted-commit", options), rec)
    (folder / "hub-empty").mkdir()
    return panel


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """Every checkpoint evicted, as after ``measure-panel --evict``: the records are read from the cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-empty"))
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


@pytest.mark.slow  # in pytest's process (torch imported) its workers are spawned: seconds
def test_judge_says_the_same_with_two_jobs(offline, headwatch_cli, recwarn):
    panel = plant(offline)
    runs = {}
    for n in (1, 2):
        recwarn.clear()
        r = headwatch_cli("judge", "--panel", panel, "--jobs", n, "--json", offline / f"v{n}.json")
        runs[n] = (r.code, r.out, r.err.replace(f"v{n}.json", "v.json"), (offline / f"v{n}.json").read_bytes(),
                   [str(w.message) for w in recwarn])
    assert runs[1] == runs[2]
    code, out, _, verdicts, warned = runs[1]
    assert code == 0 and out.count("== EleutherAI/pythia-14m") == 4 and "population pythia-14m" in out
    assert len(json.loads(verdicts)["models"]) == 4 and len(warned) == 4  # one evicted-checkpoint warning per model


@pytest.mark.slow
def test_a_model_that_cannot_be_read_fails_in_its_turn_as_with_one_process(offline, headwatch_cli):
    panel = plant(offline, odd="pythia-14m-seed2")
    one = headwatch_cli("judge", "--panel", panel, "--jobs", "1")
    two = headwatch_cli("judge", "--panel", panel, "--jobs", "2")
    assert (one.code, one.out, one.err) == (two.code, two.out, two.err)
    assert one.code == 2 and "pythia-14m-seed2" in one.err and "Traceback" not in one.err
    assert one.out.count("== ") == 1  # the model before it was judged and printed; none after


# ---- as a user runs it: every file, and Ctrl-C ---------------------------------------------------------


def _cli(*argv, env, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "headwatch", *map(str, argv)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _env(folder: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(folder / "hub-empty"),
            "HEADWATCH_CACHE_DIR": str(folder / "cache"), "PYTHONWARNINGS": "default", **extra}


#: The one line that may differ between runs: progress is said by the clock (every PROGRESS_SECONDS
#: once a run has taken PROGRESS_AFTER), so whether and when it appears depends on the machine's load.
PROGRESS_LINE = re.compile(r"^(judged|reported) \d+ of \d+ models, about .+ left\n", re.MULTILINE)


@pytest.mark.slow
def test_judge_and_report_as_commands_write_byte_identical_output(tmp_path):
    """Every line (warnings included; progress lines aside, as they follow the clock), the JSON, the
    report's files and figures, --jobs 1 and 2."""
    panel = plant(tmp_path)
    env = _env(tmp_path)
    said = {}
    for n in (1, 2):
        said[n] = []
        for argv in (("judge", "--json", tmp_path / f"v{n}.json"), ("report", "--out", tmp_path / f"r{n}")):
            proc = _cli(*argv, "--panel", panel, "--jobs", n, env=env)
            out, err = proc.communicate(timeout=300)
            err = PROGRESS_LINE.sub("", err.replace(f"v{n}", "v"))
            said[n].append((proc.returncode, out.replace(f"r{n}", "r"), err))
    assert said[1] == said[2]
    assert [code for code, _, _ in said[1]] == [0, 0]
    assert (tmp_path / "v1.json").read_bytes() == (tmp_path / "v2.json").read_bytes()
    files = sorted(p.relative_to(tmp_path / "r1") for p in (tmp_path / "r1").rglob("*") if p.is_file())
    assert sum(f.suffix == ".png" for f in files) >= 20  # every model's figures and the population's
    for f in files:
        assert (tmp_path / "r1" / f).read_bytes() == (tmp_path / "r2" / f).read_bytes(), f


SLOW_CLAIM = '''
import dataclasses, time
from headwatch.claims import Claim, NegativeControl, register_claim
from headwatch.claims.judge import judge_f1
from headwatch.claims.synthetic import HEALTHY_EXPECT, healthy

def judge(records, expect, spec, *, total_tokens=None):
    time.sleep(60)
    return dataclasses.replace(judge_f1(records, spec), claim="slow")

register_claim(Claim(name="slow", title="F1, slowly", question="?", judge=judge, key_figure="as F1",
    negative_controls=(NegativeControl("bos", "a BOS head in layer 0", lambda: healthy(extra_bos={2: ("L0_H1",)}),
                                       HEALTHY_EXPECT),)))
'''


def _children(pid: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        try:
            status = (d / "status").read_text() if d.name.isdigit() else ""
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in status:
            found.append(int(d.name))
    return found


def _alive(pids: list[int]) -> list[int]:
    def running(p: int) -> bool:
        try:
            return "\nState:\tZ" not in Path(f"/proc/{p}/status").read_text()
        except OSError:
            return False
    return [p for p in pids if running(p)]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sigkill"])
def test_an_interrupted_or_killed_judge_leaves_no_worker_behind(tmp_path, how):
    """Ctrl-C (SIGINT to the terminal's process group) stops the workers and exits 130; a parent killed
    outright takes its workers with it (they watch it)."""
    panel = plant(tmp_path)
    (tmp_path / "slow_claim.py").write_text(SLOW_CLAIM)
    # A terminal's foreground job takes SIGINT at its default, whatever this run inherited: a run started
    # from a background job of a non-interactive shell (as CI may be) inherits it ignored, and then no
    # Ctrl-C could reach the judge (headwatch/processes.py).
    proc = _cli("judge", "--panel", panel, "--claims-module", tmp_path / "slow_claim.py", "--claims", "slow",
                "--jobs", "2", env=_env(tmp_path), start_new_session=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while len(workers := _children(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(workers) >= 2, proc.communicate()
    time.sleep(1)  # each worker at its first model
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
    code = proc.wait(30)
    _, err = proc.communicate()
    if how == "ctrl-c":
        assert code == 130 and "interrupted" in err and "Traceback" not in err, err
    deadline = time.monotonic() + 10
    while _alive(workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(workers)


# ---- what a worker cannot do: measure ------------------------------------------------------------------


def test_a_worker_s_provider_never_measures(tmp_path, local_run):
    """A revision missing from the cache is the main process's to measure (it loads a checkpoint)."""
    from headwatch.fixtures.panels import load_panel
    from headwatch.fixtures.provider import NeedsMeasuring, Provider, ProviderOptions
    from headwatch_testing.tinypanel import local_panel_text

    panel = tmp_path / "p.toml"
    panel.write_text(local_panel_text(local_run))
    provider = Provider(ProviderOptions(cache_dir=tmp_path / "hw", device="cpu", progress=False))
    with pytest.raises(NeedsMeasuring, match="tiny@step0"):
        provider.worker_copy().model_records(load_panel(panel).models[0])
    assert not list((tmp_path / "hw").rglob("*.json"))


@pytest.mark.slow
def test_models_to_measure_are_measured_in_the_main_process(tmp_path, local_run, headwatch_cli):
    """Two local runs never measured: --jobs 2 measures both here, and says what --jobs 1 then says from the cache."""
    import shutil

    from headwatch_testing.tinypanel import local_panel_text

    text = ""
    for name in ("a", "b"):
        shutil.copytree(local_run, tmp_path / name)
        entry = local_panel_text(tmp_path / name).split("\n", 2)[2]  # its [[models]] table, without [panel]
        text += entry.replace('name = "tiny"', f'name = "tiny-{name}"')
    (tmp_path / "p.toml").write_text(text)
    two = headwatch_cli("judge", "--panel", tmp_path / "p.toml", "--cache-dir", tmp_path / "hw", "--jobs", "2")
    assert len(list((tmp_path / "hw").rglob("*.json"))) == 4, two.err  # both models' two revisions, measured
    one = headwatch_cli("judge", "--panel", tmp_path / "p.toml", "--cache-dir", tmp_path / "hw", "--jobs", "1")
    assert (two.code, two.out) == (one.code, one.out) and two.out.count("== ") == 2
