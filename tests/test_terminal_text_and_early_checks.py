"""Faults of issue 44 (round six) outside the packaged models, the converter and the training-loop API:
a file's text never raw on a terminal (44.3), checks that come before training and advice that
helps (44.4).

Beside these: a packaged model's identity and its provenance file (tests/test_packaged.py), head keys
outside the grid (tests/test_reference.py), the training-loop API's arguments (tests/test_trainloop_args.py).
"""
from __future__ import annotations

import pytest

from headwatch.fixtures import runstore
from headwatch.fixtures.cache import CacheNotWritable
from headwatch.formatting import terminal_text

#: A description that clears the screen, homes the cursor and prints a forged verdict line in green.
FORGED = "ok\x1b[2J\x1b[H\x1b[32mF1 holds\x1b[0m\r\x9b2K\u202eevil\x07\x7f"


def refused(r, *says: str) -> None:
    """A CLI result: exit 2 (bad input), no traceback, a message holding each of ``says``."""
    assert r.code == 2, (r.code, r.err[-2000:])
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err[-2000:]
    for s in says:
        assert s in r.err, r.err[-2000:]


def raw_controls(text: str) -> list[str]:
    """The control characters in ``text`` a terminal would act on (newlines aside)."""
    return [c for c in text if c != "\n" and (ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")]


def test_terminal_text_escapes_every_control_character_and_keeps_plain_text():
    assert terminal_text("plain: a-b_c 1.0 \u00e9\u4e2d") == "plain: a-b_c 1.0 \u00e9\u4e2d"  # the control
    shown = terminal_text(FORGED)
    assert raw_controls(shown) == [] and "\\x1b[2J" in shown and "\\r" in shown and "\\x9b" in shown
    assert "\\u202e" in shown and "\\x07" in shown and "\\x7f" in shown
    assert terminal_text("a\nb") == "a\\nb" and terminal_text("a\nb\x1b", newlines=True) == "a\nb\\x1b"


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string, every control character (and quote, backslash) as a \\uXXXX escape."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' and ord(c) < 0x7f or c.isalnum() else f"\\u{ord(c):04x}"
                         for c in text) + '"'


def _panel(tmp_path, description: str) -> str:
    path = tmp_path / "p.toml"
    path.write_text(f"""\
[panel]
name = "hostile"
description = {toml_string(description)}
[[models]]
name = "pythia-1b"
repo = "EleutherAI/pythia-1b"
source = "reference"
revisions = ["step1", "step256", "step3000", "step143000"]
tokens = {{ per_step = 2097152 }}
""")
    return str(path)


def test_panels_check_shows_a_descriptions_escape_sequences_escaped(tmp_path, headwatch_cli):
    """A panel description with terminal escape sequences was printed raw by `headwatch panels check`
    (it could clear the screen and print a forged line); the control: a plain description as it is."""
    r = headwatch_cli("panels", "check", _panel(tmp_path, "a plain description"))
    assert r.code == 0 and "(a plain description)" in r.out, r
    r = headwatch_cli("panels", "check", _panel(tmp_path, FORGED))
    assert r.code == 0, r
    assert raw_controls(r.out + r.err) == [], repr(r.out)
    assert "\\x1b[2J" in r.out and "\\u202e" in r.out


def test_an_error_quoting_a_files_text_is_escaped(tmp_path, headwatch_cli):
    """A message that quotes a file's text (here a panel value refused) reaches the terminal escaped."""
    path = tmp_path / "p.toml"
    path.write_text('[panel]\nname = "x\\u001b[2Jy"\n')
    r = headwatch_cli("panels", "check", path)
    assert r.code == 2 and raw_controls(r.err) == [], repr(r.err)


def test_judge_and_report_show_a_record_fields_escaped(tmp_path, headwatch_cli, monkeypatch):
    """The verdict table and the report's lines name the panel's model and its revisions; a model
    id that reaches them with control characters (a record's, a file's) is shown escaped."""
    from headwatch.cli import judge

    line = judge.package_line({"package": "p\x1b]0;title\x07", "version": "1\x1b[1A", "weights": "w"})
    assert raw_controls(line) == [] and "\\x1b]0;title\\x07" in line
    monkeypatch.setenv("HEADWATCH_CACHE_DIR", str(tmp_path / "cache"))
    r = headwatch_cli("judge", "--panel", _panel(tmp_path, FORGED))
    assert r.code in (0, 1) and "== EleutherAI/pythia-1b" in r.out and raw_controls(r.out + r.err) == [], r


# ---- 44.4: checks before training, advice that can help ---------------------------------------------


def test_organisms_train_refuses_an_unwritable_measurement_cache_before_training(unwritable_dir, headwatch_cli,
                                                                                  never_trains, tmp_path):
    """Each checkpoint is measured into --cache-dir as it is saved: an unwritable one started training
    and failed with exit 1 (a child's traceback in a line); now refused first, as --organisms-cache-dir is.
    The control: a writable --cache-dir gets past the check (to the never_trains guard)."""
    r = headwatch_cli("organisms", "train", "--family", "olmo", "--organisms-cache-dir", tmp_path / "org",
                      "--cache-dir", unwritable_dir)
    refused(r, "--cache-dir", str(unwritable_dir))
    r = headwatch_cli("organisms", "train", "--family", "olmo", "--organisms-cache-dir", tmp_path / "org",
                      "--cache-dir", tmp_path / "cache")
    assert "an organism started training" in r.err, r  # never_trains' guard: the check let it through


def test_a_run_whose_folder_cannot_hold_its_records_is_advised_what_helps(tmp_path):
    """A local run's records live in its folder: --cache-dir cannot help, so the refusal says what can."""
    run = tmp_path / "run"
    run.mkdir()
    (run / ".headwatch").write_text("a file where the run's store goes")
    with pytest.raises(CacheNotWritable) as e:
        runstore.open_store(run, writable=True)
    assert "--cache-dir" not in str(e.value).split(";")[-1] or "whatever --cache-dir says" in str(e.value)
    assert "pass --cache-dir" not in str(e.value) and "own folder" in str(e.value) and str(run) in str(e.value)
    (run / ".headwatch").unlink()
    assert runstore.open_store(run, writable=True) is not None  # the control: a usable folder
