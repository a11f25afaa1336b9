"""Issue 22: nothing a writer wrote in the settings file or a brief is dropped for a parse error; it is kept
beside the broken file under a unique name and the writer is told; the settings warning stays readable; OK
keeps
Settings open when the save failed; a deeply nested array does not crash the start."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel

import app
from app.config.settings import Settings

pytestmark = pytest.mark.usefixtures("user_dirs")


def _config() -> Path:
    return Path(os.environ["LETTERPRESS_CONFIG_DIR"])


def test_a_second_broken_settings_file_does_not_overwrite_the_first(tmp_path):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "settings.toml").write_text("[denoise\nsteps = 12\n", encoding="utf-8")
    first = Settings(folder)
    assert (folder / "settings.toml.broken").read_text(encoding="utf-8") == "[denoise\nsteps = 12\n"
    assert "settings.toml.broken" in first.problems[-1]
    (folder / "settings.toml").write_text("[appearance]\nfont_size = = 3\n", encoding="utf-8")
    second = Settings(folder)
    assert (folder / "settings.toml.broken").read_text(encoding="utf-8") == "[denoise\nsteps = 12\n"
    assert (folder / "settings.toml.broken-2").read_text(
        encoding="utf-8"
    ) == "[appearance]\nfont_size = = 3\n"
    assert "settings.toml.broken-2" in second.problems[-1]


def test_unknown_sections_and_keys_survive_a_change_of_any_setting(tmp_path):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "settings.toml").write_text(
        'ahead = "top level"\n[appearance]\nfont_size = 14\nfrom_a_newer_version = [1, 2, {a = "b"}]\n'
        '[future]\nname = "kept"\nwhen = 2026-12-01T10:00:00\n',
        encoding="utf-8",
    )
    s = Settings(folder)
    s.set("denoise.steps", 20)
    data = tomllib.loads((folder / "settings.toml").read_text(encoding="utf-8"))
    assert data["future"]["name"] == "kept" and str(data["future"]["when"]) == "2026-12-01 10:00:00"
    assert data["appearance"]["from_a_newer_version"] == [1, 2, {"a": "b"}]
    assert data["ahead"] == "top level" and data["appearance"]["font_size"] == 14
    assert data["denoise"]["steps"] == 20
    assert Settings(folder)["denoise.steps"] == 20


def test_one_empty_custom_preset_does_not_make_the_others_vanish(tmp_path):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "settings.toml").write_text(
        '[rewrite.presets]\n"Make it sing" = "Rewrite it so it sings."\n"Unfinished" = ""\n', encoding="utf-8"
    )
    s = Settings(folder)
    assert s["rewrite.presets"] == {"Make it sing": "Rewrite it so it sings."}
    assert any("Unfinished" in p for p in s.problems)
    s.set("denoise.steps", 30)  # any change saves the file
    saved = tomllib.loads((folder / "settings.toml").read_text(encoding="utf-8"))
    assert saved["rewrite"]["presets"] == {"Make it sing": "Rewrite it so it sings."}
    kept = (folder / "settings.toml.broken").read_text(encoding="utf-8")
    assert '"Unfinished" = ""' in kept  # the file as written, the empty preset included


def test_a_value_replaced_by_its_default_is_kept_in_a_copy_first(tmp_path):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "settings.toml").write_text("[denoise]\nsteps = 100000\n", encoding="utf-8")
    s = Settings(folder)
    s.set("appearance.font_size", 15)
    assert "steps = 100000" in (folder / "settings.toml.broken").read_text(encoding="utf-8")
    Settings(folder)  # the same problem again: no second copy piles up
    assert not (folder / "settings.toml.broken-2").exists()


def test_a_deeply_nested_array_does_not_crash_the_start(qtbot):
    text = "[appearance]\nx = " + "[" * 50_000 + "]" * 50_000 + "\n"
    (_config() / "settings.toml").write_text(text, encoding="utf-8")
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    assert (_config() / "settings.toml.broken").read_text(encoding="utf-8") == text
    warning = window.findChild(QLabel, "settingsWarning")
    assert warning is not None and "nests too deeply" in warning.toolTip()
    window.close()


def test_the_settings_problem_stays_in_the_status_bar(qtbot):
    (_config() / "settings.toml").write_text("[denoise]\nsteps = -5\n", encoding="utf-8")
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    window.show()
    window.show_message("Opened something else")  # what used to replace the problem at once
    qtbot.waitUntil(lambda: window.model_state in ("ready", "error"), timeout=10_000)
    warning = window.findChild(QLabel, "settingsWarning")
    assert warning is not None and warning.isVisible() and "steps" in warning.text()
    window.close()


def test_ok_keeps_settings_open_when_the_save_failed(qtbot, tmp_path):
    from app.ui.settings_dialog import SettingsDialog

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the settings folder should be", encoding="utf-8")
    settings = Settings(blocker)
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.inputs["denoise.steps"].setValue(17)
    dialog.accept()
    assert dialog.isVisible() and dialog.result() != dialog.DialogCode.Accepted
    assert "not saved" in dialog.problems.text() or "could not be saved" in dialog.problems.text()
    assert settings["denoise.steps"] == 17  # it applies for this session, and the dialog says so


def test_a_damaged_brief_is_kept_and_the_writer_is_told(qtbot, tmp_path):
    from app.documents.brief import BriefStore, path_key

    doc = tmp_path / "chapter.md"
    doc.write_text("text\n", encoding="utf-8")
    briefs = Path(os.environ["LETTERPRESS_DATA_DIR"]) / "briefs"
    briefs.mkdir(parents=True)
    damaged = briefs / f"{path_key(doc)}.json"
    raw = b'{"version": 1, "path": "x", "brief": "Told in the first person, by the lighthouse keep'
    damaged.write_bytes(raw)
    window = app.create_window([str(doc), "--fake-engine"])
    qtbot.addWidget(window)
    window.show()
    warning = window.findChild(QLabel, "briefWarning")
    assert warning is not None
    qtbot.waitUntil(lambda: window.services.documents.path is not None, timeout=10_000)  # opened after start
    assert warning.isVisible() and "damaged" in warning.toolTip()
    kept = briefs / f"{path_key(doc)}.json.broken"
    assert kept.read_bytes() == raw
    assert window.brief.text.startswith("Told in the first person")  # what could be read is offered
    assert window.brief.set_text("A new brief.")
    assert kept.read_bytes() == raw  # the next brief did not overwrite it
    assert BriefStore(briefs).load(window.brief.key) == "A new brief."
    assert not warning.isVisible()
    window.services.documents.editor.document().setModified(False)
    window.close()


def test_a_brief_for_a_non_utf8_file_name_is_kept(qtbot, tmp_path):
    from app.documents.brief import BriefStore, path_key

    store = BriefStore(tmp_path / "briefs")
    name = str(tmp_path / os.fsdecode(b"r\xe9sum\xe9.txt"))
    assert store.save(path_key(name), "Formal.", name)
    assert store.load(path_key(name)) == "Formal."
    assert json.loads((tmp_path / "briefs" / f"{path_key(name)}.json").read_text())["path"] == name
