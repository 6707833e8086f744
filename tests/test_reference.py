"""The converter of the author's file format (tools/convert_reference.py, not shipped) and the
reader of its output (headwatch.fixtures.reference).

The author-format folders here are written by the test itself from fixtures/published (the inverse
of the conversion), so the tests need neither the network nor ../shared/reference; the one test
that regenerates fixtures/published from ../shared/reference skips, naming it, when it is absent.
"""
from __future__ import annotations

import dataclasses
import filecmp
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from headwatch.fixtures import reference as reader
from headwatch.probes.record import MeasurementRecord, parse_head_key

ROOT = Path(__file__).resolve().parents[1]
SHARED_REFERENCE = ROOT.parent / "shared" / "reference"


def _load_tool(name: str):
    """A script of tools/ (not part of the installed package), imported by path."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


R = _load_tool("convert_reference")
PYTHIA, OLMO = "EleutherAI/pythia-1b", "allenai/OLMo-1B-0724-hf"


def _spec(heads) -> dict[str, list[int]]:
    spec: dict[str, list[int]] = {}
    for h in heads:
        layer, head = parse_head_key(h)
        spec.setdefault(str(layer), []).append(head)
    return spec


def write_author_format(records: list[MeasurementRecord], folder: Path, prefix: str, *, ablation_revision=None) -> None:
    """Write one model's records back in the author's three file kinds."""
    screens = folder / "per_revision_mechinterp"
    screens.mkdir(parents=True, exist_ok=True)
    for r in records:
        (screens / f"{prefix}_mechinterp_{r.revision}.json").write_text(json.dumps({
            "model": r.model, "revision": r.revision, "selectivity_threshold": 30.0, "n_examples": 2000,
            "n_examples_valid": r.n_examples_valid, "all_head_selectivity": r.all_head_selectivity}))
    heads = list(records[0].all_head_selectivity)
    (folder / f"{prefix}_phase1_trajectory.json").write_text(json.dumps({
        "model": records[0].model, "revisions": [r.revision for r in records], "n_examples": 500,
        "seq_len": 256, "seed": 42, "dtype": "fp16", "ckpt_tokens_B": [r.tokens_seen / 1e9 for r in records],
        "n_layer": records[0].n_layers, "num_heads": records[0].n_heads, "head_dim": records[0].d_head,
        "pr": {h: [r.pr[h] for r in records] for h in heads}}))
    final = next(r for r in records if r.ablations)
    results = [{"name": "baseline", "spec": {}, "loss": final.task.loss, "acc_top1": final.task.top1,
                "acc_top5": final.task.top5, "mean_logit_B": final.task.mean_logit_target}]
    author = final.provenance["ablation_file"]["names"]
    for a in final.ablations:
        results.append({"name": author.get(a.name, a.name), "spec": _spec(a.heads), "loss": a.metrics.loss,
                        "acc_top1": a.metrics.top1, "acc_top5": a.metrics.top5,
                        "mean_logit_B": a.metrics.mean_logit_target})
    (folder / f"{prefix}_ablation_k45.json").write_text(json.dumps({
        "model": final.model, "revision": ablation_revision or final.revision, "n_examples": 2000,
        "results": results}))


@pytest.fixture
def author_dir(tmp_path) -> Path:
    """Both published models written back in the author's format (OLMo's ablation on 'main'), in
    ``tmp_path/author`` (a converted copy goes beside it, never inside)."""
    write_author_format(reader.load_published(PYTHIA), tmp_path / "author" / "pythia", "pythia1b")
    write_author_format(reader.load_published(OLMO), tmp_path / "author" / "olmo", "olmo", ablation_revision="main")
    return tmp_path / "author"


def _same_numbers(a: MeasurementRecord, b: MeasurementRecord) -> None:
    assert (a.model, a.revision, a.tokens_seen, a.d_head) == (b.model, b.revision, b.tokens_seen, b.d_head)
    assert a.all_head_selectivity == b.all_head_selectivity and a.pr == b.pr
    assert a.task == b.task and a.ablations == b.ablations


def test_import_round_trips_the_published_records(author_dir):
    imported = R.import_reference(author_dir)
    assert sorted(imported) == sorted([PYTHIA, OLMO])
    for model, recs in imported.items():
        for a, b in zip(recs, reader.load_published(model), strict=True):
            _same_numbers(a, b)
    olmo_final = imported[OLMO][-1]
    assert olmo_final.provenance["ablation_file"]["revision_in_file"] == "main"
    assert "top-45" in olmo_final.provenance["ablation_file"]["relative_to"]["matched_random"]
    assert olmo_final.settings.n_pr == 500 and olmo_final.provenance["pr_dtype"] == "fp16"


def test_convert_then_read_gives_the_imported_models(author_dir, tmp_path):
    dest = tmp_path / "converted"
    R.convert(author_dir, dest)
    assert (dest / "PROVENANCE.md").is_file()
    assert sorted(reader.load_reference(dest)) == sorted(R.import_reference(author_dir)) == sorted([PYTHIA, OLMO])
    assert reader.published_models(dest) == reader.published_models()


def test_cli_convert_reports_malformed_input(tmp_path, capsys):
    assert R.main(["convert", str(tmp_path / "missing"), str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.skipif(not SHARED_REFERENCE.is_dir(), reason=f"needs the author's files at {SHARED_REFERENCE}")
def test_published_copy_regenerates_byte_for_byte(tmp_path):
    dest = tmp_path / "published"
    R.convert(SHARED_REFERENCE, dest, R.AUTHOR_SOURCE)
    cmp = filecmp.dircmp(dest, reader.PUBLISHED_DIR)
    assert not cmp.left_only and not cmp.right_only and not cmp.diff_files
    for sub in cmp.subdirs.values():
        assert not sub.left_only and not sub.right_only and not sub.diff_files, sub.diff_files


def test_tokens_in_the_published_copy():
    assert [r.tokens_seen for r in reader.load_published(PYTHIA)][6] == 3000 * 2_097_152
    assert [r.tokens_seen for r in reader.load_published(OLMO)][3] == 23e9


def test_tokens_from_revision_names():
    assert R.tokens_from_revision("EleutherAI/pythia-1b", "step3000") == 3000 * 2_097_152
    assert R.tokens_from_revision("allenai/OLMo-1B-0724-hf", "step11000-tokens23B") == 23e9
    assert R.tokens_from_revision("allenai/OLMoE-1B-7B-0924", "step5000-tokens20B") == 20e9
    assert R.tokens_from_revision("org/m", "step10-tokens1.5M") == 1.5e6
    assert R.tokens_from_revision("org/other-model", "step10") is None  # no rule for a bare step


def test_the_reader_refuses_the_authors_format_with_the_command_that_converts_it(author_dir):
    with pytest.raises(reader.ReferenceFormatError, match="tools/convert_reference.py convert"):
        reader.load_reference(author_dir)


def test_load_published_unknown_model():
    with pytest.raises(reader.NotPublished, match="available"):
        reader.load_published("nobody/nothing")


# ---- malformed input: each gives a ReferenceFormatError naming the file and the problem --------


def _one(author_dir: Path, pattern: str) -> Path:
    return sorted(author_dir.rglob(pattern))[0]


def _edit(path: Path, fn) -> None:
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


MALFORMED = {
    "not json": (lambda d: _one(d, "*_mechinterp_*.json").write_text("{not json"), "not valid JSON"),
    "no selectivity": (lambda d: _edit(_one(d, "*_mechinterp_*.json"), lambda j: j.pop("all_head_selectivity")),
                       "missing key 'all_head_selectivity'"),
    "bad head key": (lambda d: _edit(_one(d, "*_mechinterp_*.json"),
                                     lambda j: j["all_head_selectivity"].update({"layer0head0": {}})),
                     "not a head key"),
    "missing class": (lambda d: _edit(_one(d, "*_mechinterp_*.json"),
                                      lambda j: j["all_head_selectivity"]["L0_H0"].pop("first-token")),
                      "lacks classes"),
    "missing head": (lambda d: _edit(_one(d, "*_mechinterp_*.json"),
                                     lambda j: j["all_head_selectivity"].pop("L0_H1")), "full"),
    # issue 44.6: a head outside the grid (its record lacked L0_H0), another spelling of a head, a missing first head
    "head outside the grid": (lambda d: _edit(_one(d, "*_mechinterp_*.json"), lambda j: j["all_head_selectivity"].update(
        {"L-1_H0": j["all_head_selectivity"].pop("L0_H0")})), "not a head key"),
    "head spelt twice": (lambda d: _edit(_one(d, "*_mechinterp_*.json"), lambda j: j["all_head_selectivity"].update(
        {"L01_H0": j["all_head_selectivity"].pop("L1_H0")})), "not a head key"),
    "first head missing": (lambda d: _edit(_one(d, "*_mechinterp_*.json"),
                                           lambda j: j["all_head_selectivity"].pop("L0_H0")), "lacks L0_H0"),
    "nan selectivity": (lambda d: _edit(_one(d, "*_mechinterp_*.json"),
                                        lambda j: j["all_head_selectivity"]["L0_H0"].update({"induction": "x"})),
                        "finite number"),
    "pr length": (lambda d: _edit(_one(d, "*_phase1_trajectory.json"), lambda j: j["pr"]["L0_H0"].pop()),
                  "one value per revision"),
    "tokens disagree": (lambda d: _edit(_one(d, "olmo_phase1_trajectory.json"),
                                        lambda j: j["ckpt_tokens_B"].__setitem__(3, 99)), "says"),
    "pr without screen": (lambda d: _one(d, "olmo_mechinterp_step11000-tokens23B.json").unlink(),
                          "no per-revision screen"),
    "ablation revision": (lambda d: _edit(_one(d, "pythia1b_ablation_k45.json"), lambda j: j.update(revision="step7")),
                          "not among the screened revisions"),
    "no baseline": (lambda d: _edit(_one(d, "pythia1b_ablation_k45.json"), lambda j: j["results"].pop(0)),
                    "no 'baseline'"),
    "two screens": (lambda d: (d / "copy_mechinterp_x.json").write_text(
        _one(d, "pythia1b_mechinterp_step1.json").read_text()), "two screens"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_is_reported(author_dir, case):
    corrupt, message = MALFORMED[case]
    corrupt(author_dir)
    with pytest.raises(R.ReferenceFormatError, match=message):
        R.import_reference(author_dir)


def test_folder_without_screens(tmp_path):
    (tmp_path / "README.md").write_text("nothing here")
    with pytest.raises(R.ReferenceFormatError, match="no per-revision screens"):
        R.import_reference(tmp_path)


# ---- records and folders of records are validated on read: types, keys, finite values, the file named ----


PYTHIA_DIR = reader.PUBLISHED_DIR / "EleutherAI--pythia-1b"


def _json_edit(fn):
    def edit(path: Path) -> None:
        d = json.loads(path.read_text())
        fn(d)
        path.write_text(json.dumps(d))
    return edit


def _text_edit(fn):
    return lambda path: path.write_text(fn(path.read_text()))


#: How a careless hand (or a killed copy) damages a record, and what the error must name besides the file.
DAMAGE = {
    "not json": (_text_edit(lambda t: "{ garbage"), "not valid JSON"),
    "truncated": (_text_edit(lambda t: t[: len(t) // 2]), "not valid JSON"),
    "nan": (_text_edit(lambda t: re.sub(r'"induction": [0-9.e+-]+', '"induction": NaN', t, count=1)), "NaN"),
    "infinity": (_text_edit(lambda t: re.sub(r'"first-token": [0-9.e+-]+', '"first-token": Infinity', t, count=1)), "Infinity"),
    "string value": (_json_edit(lambda d: d["all_head_selectivity"]["L0_H0"].__setitem__("induction", "0.5")), "L0_H0"),
    "negative selectivity": (_json_edit(lambda d: d["all_head_selectivity"]["L0_H0"].__setitem__("self", -3.0)), ">= 0"),
    "missing key": (_json_edit(lambda d: d.pop("n_heads")), "n_heads"),
    "other schema": (_json_edit(lambda d: d.__setitem__("schema", "other/1")), "schema"),
    "head missing": (_json_edit(lambda d: d["all_head_selectivity"].pop("L3_H2")), "L3_H2"),
    "class missing": (_json_edit(lambda d: d["all_head_selectivity"]["L0_H0"].pop("first-token")), "L0_H0"),
    "tokens as text": (_json_edit(lambda d: d.__setitem__("tokens_seen", "5e8")), "tokens_seen"),
    "top-1 as a percentage": (_json_edit(lambda d: d["task"].__setitem__("top1", 4.05)), "top1", "step143000.json"),
    "pr of a head not in the model": (_json_edit(lambda d: d["pr"].__setitem__("L99_H0", 2.0)), "L99_H0"),
    "not an object": (_text_edit(lambda t: "[1, 2, 3]"), "not a headwatch measurement record"),
}


@pytest.fixture
def reference_dir(tmp_path) -> Path:
    shutil.copytree(PYTHIA_DIR, tmp_path / "ref" / PYTHIA_DIR.name)
    return tmp_path / "ref"


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_reference_files_are_validated_naming_the_file(case, reference_dir):
    damage, names, *name = DAMAGE[case]
    name = name[0] if name else "step256.json"  # step256 has no task metrics; step143000 has
    damage(reference_dir / PYTHIA_DIR.name / name)
    with pytest.raises(reader.ReferenceFormatError) as info:
        reader.load_reference(reference_dir)
    assert name in str(info.value) and names in str(info.value), str(info.value)


def test_two_folders_of_one_model_are_refused(reference_dir):
    shutil.copytree(reference_dir / PYTHIA_DIR.name, reference_dir / "copy")
    with pytest.raises(reader.ReferenceFormatError, match="two folders"):
        reader.load_reference(reference_dir)


def test_unknown_fields_are_tolerated(reference_dir):
    """A field a newer headwatch writes (say, an interval) does not make a record unreadable."""
    _json_edit(lambda d: d.__setitem__("interval", {"lo": 1.0}))(reference_dir / PYTHIA_DIR.name / "step256.json")
    records = reader.load_reference(reference_dir)["EleutherAI/pythia-1b"]
    assert len(records) == len(list(PYTHIA_DIR.glob("*.json")))


def test_published_records_pass_every_rule():
    for folder in (p for p in reader.PUBLISHED_DIR.iterdir() if p.is_dir()):
        assert reader.load_records_dir(folder)


def test_the_record_validator_is_driven_by_the_fields():
    """A field added to the record (as the verdict statistics add intervals) is validated with no new
    code: its type comes from the dataclass, its bounds from FIELD_RULES."""
    from headwatch.schema import from_data
    from headwatch.validation import InputError, number

    @dataclasses.dataclass
    class WithInterval(MeasurementRecord):
        interval: dict[str, float] | None = None
        FIELD_RULES = {**MeasurementRecord.FIELD_RULES, "interval": number(0)}

    good = json.loads((PYTHIA_DIR / "step1.json").read_text())
    assert from_data(WithInterval, {**good, "interval": {"lo": 1.0}}, "r").interval == {"lo": 1.0}
    for bad in ({"lo": "x"}, {"lo": -1.0}, {"lo": float("nan")}, [1.0]):
        with pytest.raises(InputError, match=r"r\.interval"):
            from_data(WithInterval, {**good, "interval": bad}, "r")


# ---- the converter never touches what it did not create; every read is bounded ---------------------


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): its kind and, for a regular file, its size and bytes' hash;
    for a link, its target. Two equal states mean nothing under ``root`` was written, removed or replaced."""
    import hashlib
    import os
    import stat as st

    state: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder, name)
            mode = p.lstat().st_mode
            if st.S_ISLNK(mode):
                state[str(p.relative_to(root))] = ("link", os.readlink(p))
            elif st.S_ISREG(mode):  # a planted 3 GB sparse file: its size and times stand for its bytes
                info = p.stat()
                digest = hashlib.sha256(p.read_bytes()).hexdigest() if info.st_size < 1 << 26 else info.st_mtime_ns
                state[str(p.relative_to(root))] = ("file", info.st_size, digest)
            else:
                state[str(p.relative_to(root))] = ("dir" if st.S_ISDIR(mode) else "other",)
    return state


@pytest.fixture
def workspace(author_dir, tmp_path) -> Path:
    """The author's files in ``tmp_path/author`` beside a user's own files (``mine/``, ``notes.txt``),
    which no conversion may touch."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "results.json").write_text('{"keep": true}')
    (tmp_path / "notes.txt").write_text("a user's notes")
    return tmp_path


def refused(args: list, capsys, *says: str) -> str:
    """``convert_reference.py convert ARGS``: exit 2, no traceback, a message holding each of ``says``."""
    import signal

    def hung(*_):
        raise AssertionError("the converter hung")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)  # a FIFO or an endless device must be named, not waited on
    try:
        code = R.main(["convert", *map(str, args)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("error: "), err
    for s in says:
        assert s in err, err
    return err


def _screens(author_dir: Path, model: str = "pythia1b") -> list[Path]:
    return sorted(author_dir.rglob(f"{model}_mechinterp_*.json"))


@pytest.mark.parametrize("name", ["..", ".", "../..", "/tmp/x", "EleutherAI/../..", "a\\b", "org/name/more", ""])
def test_a_model_name_with_path_parts_is_refused_and_nothing_is_touched(workspace, author_dir, capsys, name):
    """``"model": ".."`` once removed DEST's parent and everything in it; ``"."`` emptied DEST."""
    R.convert(author_dir, workspace / "earlier")  # an earlier converted copy is in danger too
    for p in _screens(author_dir):
        _edit(p, lambda j: j.update(model=name))
    dest = workspace / "out"
    before = tree_state(workspace)
    for target in (dest, workspace / "earlier"):
        refused([author_dir, target], capsys, "model", "leave the destination")
    assert tree_state(workspace) == before


@pytest.mark.parametrize("revision", ["../../../x", "..", ".", "/tmp/evil", "sub/step1", "step1\\..\\x", ""])
def test_a_revision_name_with_path_parts_is_refused_and_nothing_is_written_outside(workspace, author_dir, capsys, revision):
    _edit(_screens(author_dir)[0], lambda j: j.update(revision=revision))
    before = tree_state(workspace)
    refused([author_dir, workspace / "out"], capsys, "revision", "leave the destination")
    assert tree_state(workspace) == before


@pytest.mark.parametrize("where", ["SRC itself", "inside SRC", "holds SRC"])
def test_a_destination_that_is_inside_or_holds_the_source_is_refused(workspace, author_dir, capsys, where):
    """``convert SRC SRC`` once deleted the sources."""
    dest = {"SRC itself": author_dir, "inside SRC": author_dir / "pythia" / "out", "holds SRC": workspace}[where]
    before = tree_state(workspace)
    refused([author_dir, dest], capsys, where)
    refused([author_dir / "pythia" / ".." / "pythia" / "..", dest], capsys, where)  # the same, spelled otherwise
    assert tree_state(workspace) == before


def test_a_destination_that_is_not_a_folder_the_converter_may_replace_is_refused(workspace, author_dir, capsys):
    import os

    (workspace / "afile").write_text("x")
    os.mkfifo(workspace / "fifo")
    os.symlink(workspace / "mine", workspace / "link")
    before = tree_state(workspace)
    refused([author_dir, workspace / "afile"], capsys, "afile", "a regular file, not a folder")
    refused([author_dir, workspace / "fifo"], capsys, "a FIFO, not a folder")
    refused([author_dir, workspace / "link"], capsys, "is a symlink")
    refused([author_dir, workspace / "mine"], capsys, "holds files the converter did not write")
    refused([author_dir, workspace / "afile" / "out"], capsys, "afile")  # a file where a folder must be
    assert tree_state(workspace) == before


def test_an_earlier_converted_copy_is_replaced_whole_and_never_loses_a_model(workspace, author_dir, capsys):
    dest = workspace / "out"
    R.convert(author_dir, dest)
    stale = dest / "EleutherAI--pythia-1b" / "step999.json"  # a revision dropped from the source since
    stale.write_text((dest / "EleutherAI--pythia-1b" / "step1.json").read_text())
    R.convert(author_dir, dest)
    assert not stale.exists() and (dest / "PROVENANCE.md").is_file()
    assert sorted(p.name for p in workspace.iterdir()) == ["author", "mine", "notes.txt", "out"]  # no temporaries

    shutil.rmtree(author_dir / "olmo")  # the source no longer holds OLMo: the copy's OLMo would be lost
    before = tree_state(workspace)
    refused([author_dir, dest], capsys, "allenai--OLMo-1B-0724-hf", "would drop them")
    assert tree_state(workspace) == before


def test_a_failure_while_writing_leaves_the_destination_as_it_was(workspace, author_dir, capsys, monkeypatch):
    import errno
    import os

    dest = workspace / "out"
    R.convert(author_dir, dest)
    before = tree_state(workspace)
    calls = []

    def disk_full(self, path):
        calls.append(path)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("{}")

    monkeypatch.setattr(MeasurementRecord, "to_json", disk_full)
    refused([author_dir, dest], capsys, "No space left", "write somewhere else")
    assert tree_state(workspace) == before  # the earlier copy whole, the temporary folder gone


def test_two_models_that_would_share_a_folder_are_refused(workspace, author_dir, capsys):
    for p in _screens(author_dir, "olmo"):
        _edit(p, lambda j: j.update(model="EleutherAI--pythia-1b"))
    _edit(_one(author_dir, "olmo_phase1_trajectory.json"), lambda j: j.update(model="EleutherAI--pythia-1b"))
    _edit(_one(author_dir, "olmo_ablation_k45.json"), lambda j: j.update(model="EleutherAI--pythia-1b"))
    before = tree_state(workspace)
    refused([author_dir, workspace / "out"], capsys, "would both be written to the folder")
    assert tree_state(workspace) == before


def _plant(kind: str, path: Path) -> None:
    import os

    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "/dev/zero":
        os.symlink("/dev/zero", path)
    elif kind == "3 GB":
        with open(path, "wb") as f:
            f.truncate(3 << 30)  # sparse: takes no disk
    elif kind == "deep":
        path.write_text('{"model": ' + "[" * 50000 + "]" * 50000 + "}")
    elif kind == "not utf-8":
        path.write_bytes(b'{"model": "caf\xe9"}')
    elif kind == "loop":
        os.symlink(path.with_name("other.json"), path)
        os.symlink(path, path.with_name("other.json"))
    elif kind == "dangling":
        os.symlink(path.with_name("gone.json"), path)
    elif kind == "folder":
        path.mkdir()
        (path / "x_mechinterp_step1.json").write_text("{}")


READS = {"fifo": "a FIFO", "/dev/zero": "a character device", "3 GB": "over the", "deep": "levels deep",
         "not utf-8": "not UTF-8", "loop": "symlink loop", "dangling": "no such file", "folder": "missing key"}


@pytest.mark.parametrize("kind", sorted(READS))
def test_every_read_is_bounded_and_named(workspace, author_dir, capsys, kind):
    """A FIFO is named (not waited on), /dev/zero and a 3 GB file are not read, deep JSON is not parsed."""
    target = _screens(author_dir)[2]
    _plant(kind, target)
    before = tree_state(workspace)
    refused([author_dir, workspace / "out"], capsys, READS[kind])
    assert tree_state(workspace) == before


def test_folders_nested_without_end_are_refused_and_links_to_folders_not_followed(workspace, author_dir, capsys):
    import os

    os.symlink(author_dir, author_dir / "pythia" / "loop")  # followed, it would never end
    R.convert(author_dir, workspace / "out")
    deep = author_dir.joinpath(*["d"] * (R.MAX_FOLDER_DEPTH + 1))
    deep.mkdir(parents=True)
    before = tree_state(workspace)
    refused([author_dir, workspace / "out2"], capsys, "nest more than")
    assert tree_state(workspace) == before



def test_a_record_whose_heads_leave_the_grid_is_refused_by_the_reader():
    """issue 44.6: a record (a --reference-dir file) naming L-1_H0 in place of L0_H0 is refused, as is
    the converter's input; the control: the record as it was reads."""
    from headwatch.probes.record import RecordError

    path = Path(reader.__file__).parent / "published" / "EleutherAI--pythia-1b" / "step1.json"
    data = json.loads(path.read_text())
    assert MeasurementRecord.from_dict(json.loads(json.dumps(data))).n_layers == 16  # the control
    data["all_head_selectivity"]["L-1_H0"] = data["all_head_selectivity"].pop("L0_H0")
    with pytest.raises(RecordError, match="L-1_H0|does not match"):
        MeasurementRecord.from_dict(data)
    for bad in ("L-1_H0", "L0_H-1", "L01_H0", "L+1_H0", "L1_H00"):
        with pytest.raises(ValueError, match="not a head key"):
            parse_head_key(bad)
    assert parse_head_key("L10_H0") == (10, 0)
