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
    """Both published models written back in the author's format (OLMo's ablation on 'main')."""
    write_author_format(reader.load_published(PYTHIA), tmp_path / "pythia", "pythia1b")
    write_author_format(reader.load_published(OLMO), tmp_path / "olmo", "olmo", ablation_revision="main")
    return tmp_path


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
