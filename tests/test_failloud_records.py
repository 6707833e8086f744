"""Records and reference files are validated on read: types, keys, finite values, the file named.

Catalogue: docs/hostile-inputs.md, "Reference folders and records on disk". On main's code (before
issue 14) garbage JSON gave a traceback naming no file, and NaN or Infinity values were accepted
and changed verdicts; a cache entry holding NaN was used as it was.
"""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from headwatch.fixtures import reference
from headwatch.fixtures.cache import CacheKey, MeasurementCache
from headwatch.probes.record import HEAD_CLASSES, MeasurementRecord, ProbeSettings

PYTHIA = reference.PUBLISHED_DIR / "EleutherAI--pythia-1b"


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
    shutil.copytree(PYTHIA, tmp_path / "ref" / PYTHIA.name)
    return tmp_path / "ref"


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_reference_files_are_validated_naming_the_file(case, reference_dir):
    damage, names, *name = DAMAGE[case]
    name = name[0] if name else "step256.json"  # step256 has no task metrics; step143000 has
    damage(reference_dir / PYTHIA.name / name)
    with pytest.raises(reference.ReferenceFormatError) as info:
        reference.load_reference(reference_dir)
    assert name in str(info.value) and names in str(info.value), str(info.value)


def test_two_folders_of_one_model_are_refused(reference_dir):
    shutil.copytree(reference_dir / PYTHIA.name, reference_dir / "copy")
    with pytest.raises(reference.ReferenceFormatError, match="two folders"):
        reference.load_reference(reference_dir)


def test_unknown_fields_are_tolerated(reference_dir):
    """A field a newer headwatch writes (say, an interval) does not make a record unreadable."""
    _json_edit(lambda d: d.__setitem__("interval", {"lo": 1.0}))(reference_dir / PYTHIA.name / "step256.json")
    records = reference.load_reference(reference_dir)["EleutherAI/pythia-1b"]
    assert len(records) == len(list(PYTHIA.glob("*.json")))


def test_published_records_pass_every_rule():
    for folder in (p for p in reference.PUBLISHED_DIR.iterdir() if p.is_dir()):
        assert reference.load_records_dir(folder)


def test_the_record_validator_is_driven_by_the_fields():
    """A field added to the record (as the verdict statistics add intervals) is validated with no new
    code: its type comes from the dataclass, its bounds from FIELD_RULES."""
    from headwatch.validation import InputError, from_data, number

    @dataclasses.dataclass
    class WithInterval(MeasurementRecord):
        interval: dict[str, float] | None = None
        FIELD_RULES = {**MeasurementRecord.FIELD_RULES, "interval": number(0)}

    good = json.loads((PYTHIA / "step1.json").read_text())
    assert from_data(WithInterval, {**good, "interval": {"lo": 1.0}}, "r").interval == {"lo": 1.0}
    for bad in ({"lo": "x"}, {"lo": -1.0}, {"lo": float("nan")}, [1.0]):
        with pytest.raises(InputError, match=r"r\.interval"):
            from_data(WithInterval, {**good, "interval": bad}, "r")


def _record(value: float = 1.0) -> MeasurementRecord:
    return MeasurementRecord(
        model="org/m", revision="step1", tokens_seen=None, n_layers=1, n_heads=1, d_head=4,
        all_head_selectivity={"L0_H0": {c: value for c in HEAD_CLASSES}}, settings=ProbeSettings(n_examples=4),
    )


def test_cache_entries_with_bad_values_are_moved_aside_and_recomputed(tmp_path):
    cache = MeasurementCache(tmp_path)
    key = CacheKey.make("org/m", "step1", "c" * 40, ProbeSettings(n_examples=4))
    first = cache.get_or_compute(key, _record)
    text = first.path.read_text()
    first.path.write_text(text.replace('"induction": 1.0', '"induction": NaN', 1))
    with pytest.warns(UserWarning, match="NaN"):
        again = cache.get_or_compute(key, lambda: _record(2.0))
    assert again.status == "recomputed-corrupt" and again.record.all_head_selectivity["L0_H0"]["induction"] == 2.0
    assert first.path.with_name(first.path.name + ".corrupt").exists()
