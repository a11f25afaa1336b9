"""Settings: a human-readable TOML file that round-trips, bad values fall back with a message, never a
crash."""

from __future__ import annotations

import pytest

from app.config.settings import BY_KEY, SETTINGS, Settings, defaults, to_toml
from engine.api import REWRITE_PRESETS, DenoiseSettings


def test_defaults_without_a_file(tmp_path):
    s = Settings(tmp_path)
    assert s.problems == []
    assert s["denoise.steps"] == 0  # the model's own
    assert s.rewrite_presets() == REWRITE_PRESETS
    assert not (tmp_path / "settings.toml").exists()  # nothing written until something changes


def test_changes_are_saved_as_toml_and_read_back(tmp_path):
    s = Settings(tmp_path)
    presets = {"pirate": 'Say it like a "pirate"\\ would.\nArr.', "shorter": "Cut it."}
    s.update(
        {
            "denoise.steps": 20,
            "denoise.t_max": 1,
            "appearance.theme": "dark",
            "rewrite.presets": presets,
            "appearance.font_family": "Noto Serif CJK 日本語",
            "privacy.log_document_text": True,
        }
    )
    text = (tmp_path / "settings.toml").read_text(encoding="utf-8")
    assert "[denoise]" in text and "steps = 20" in text
    again = Settings(tmp_path)
    assert again.problems == []
    assert again.values() == s.values()
    assert again["denoise.t_max"] == 1.0 and isinstance(again["denoise.t_max"], float)
    assert again.rewrite_presets() == presets


def test_every_default_round_trips_through_the_writer(tmp_path):
    import tomllib

    from app.config.settings import parse

    values, problems = parse(tomllib.loads(to_toml(defaults())))
    assert problems == [] and values == defaults()


def test_a_change_keeps_the_writers_comments_and_unknown_sections(tmp_path):
    (tmp_path / "settings.toml").write_text(
        "# My settings: the big GPU at work\n"
        "[appearance]\n"
        "# 14 is easier on the eyes\n"
        "font_size = 14  # not smaller\n"
        "\n"
        "[rewrite.presets]\n"
        "# my own\n"
        'pirate = "Say it like a pirate."\n'
        "\n"
        "[sync]  # for a tool of mine\n"
        'server = "127.0.0.1"\n',
        encoding="utf-8",
    )
    s = Settings(tmp_path)
    assert s["appearance.font_size"] == 14
    presets = {"pirate": "Say it like a pirate.", "short": "Cut."}
    s.update({"appearance.theme": "dark", "rewrite.presets": presets})
    text = (tmp_path / "settings.toml").read_text(encoding="utf-8")
    for kept in (
        "# My settings: the big GPU at work",
        "# 14 is easier on the eyes",
        "font_size = 14  # not smaller",
        "# my own",
        "[sync]  # for a tool of mine",
        'server = "127.0.0.1"',
    ):
        assert kept in text
    again = Settings(tmp_path)
    assert again["appearance.theme"] == "dark" and again["appearance.font_size"] == 14
    assert again.rewrite_presets() == {"pirate": "Say it like a pirate.", "short": "Cut."}
    assert again.problems == ["Unknown section [sync] was ignored."]
    s.set("appearance.font_size", 16)
    text = (tmp_path / "settings.toml").read_text(encoding="utf-8")
    assert "font_size = 16  # not smaller" in text and "[sync]" in text


def test_changed_signal_fires_once_per_changed_key(tmp_path, qtbot):
    s = Settings(tmp_path)
    seen = []
    s.changed.connect(lambda key, value: seen.append((key, value)))
    s.update({"appearance.font_size": 16, "appearance.theme": "system"})  # theme unchanged
    assert seen == [("appearance.font_size", 16)]


@pytest.mark.parametrize(
    "key, bad",
    [
        ("denoise.steps", -1),
        ("denoise.steps", "many"),
        ("denoise.steps", True),
        ("model.device", "tpu"),
        ("denoise.entropy_bound", -1.0),
        ("rewrite.presets", {}),
        ("rewrite.presets", {"x": ""}),
        ("appearance.font_size", 7.5),
    ],
)
def test_invalid_value_is_refused_with_a_reason_and_nothing_changes(tmp_path, key, bad):
    s = Settings(tmp_path)
    before = s.values()
    with pytest.raises(ValueError) as err:
        s.set(key, bad)
    assert BY_KEY[key].label in str(err.value)
    assert s.values() == before


def test_temperatures_must_fall(tmp_path):
    s = Settings(tmp_path)
    with pytest.raises(ValueError, match="lower"):
        s.update({"denoise.t_min": 0.9})
    s.update({"denoise.t_min": 0.9, "denoise.t_max": 1.2})  # together they are fine
    assert s.denoise_settings().t_min == 0.9


def test_bad_values_in_the_file_fall_back_to_defaults_and_are_reported(tmp_path):
    (tmp_path / "settings.toml").write_text(
        "[denoise]\nsteps = -3\nt_max = 0.3\nt_min = 0.5\nalternatives = 2\nwhatever = 1\n"
        '[model]\ndevice = "quantum"\n[nonsense]\nx = 1\n',
        encoding="utf-8",
    )
    s = Settings(tmp_path)
    assert s["denoise.steps"] == 0  # the model's own
    assert s["model.device"] == "auto"
    assert s["denoise.alternatives"] == 2  # the good value survives
    assert (s["denoise.t_min"], s["denoise.t_max"]) == (0.4, 0.8)
    text = "\n".join(s.problems)
    for word in ("denoise.steps", "model.device", "whatever", "nonsense", "temperature"):
        assert word in text
    assert isinstance(s.denoise_settings(), DenoiseSettings)


def test_a_file_that_is_not_toml_is_kept_aside_and_defaults_used(tmp_path):
    (tmp_path / "settings.toml").write_bytes(b"[denoise\nsteps = = 4\xff")
    s = Settings(tmp_path)
    assert s.values() == defaults()
    assert "not valid TOML" in s.problems[0]
    assert (tmp_path / "settings.toml.broken").exists()
    s.set("denoise.steps", 12)
    assert Settings(tmp_path)["denoise.steps"] == 12


def test_unwritable_folder_is_reported_not_raised(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    s = Settings(blocker / "sub")  # a folder that cannot be created
    s.set("denoise.steps", 10)
    assert s["denoise.steps"] == 10
    assert any("could not be saved" in p for p in s.problems)


def test_denoise_settings_follow_the_settings(tmp_path):
    s = Settings(tmp_path)
    s.update({"denoise.steps": 12, "denoise.entropy_bound": 0.5, "denoise.alternatives": 4})
    d = s.denoise_settings()
    assert (d.max_steps, d.entropy_bound, d.candidates) == (12, 0.5, 4)
    assert s.denoise_settings(candidates=1).candidates == 1


def test_env_var_points_the_config_folder_elsewhere(tmp_path, monkeypatch):
    from app.config import settings

    monkeypatch.setenv("LETTERPRESS_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("LETTERPRESS_DATA_DIR", str(tmp_path / "data"))
    assert settings.config_dir() == tmp_path / "cfg"
    assert settings.recovery_dir() == tmp_path / "data" / "recovery"
    s = Settings()
    s.set("draft.length", 96)
    assert (tmp_path / "cfg" / "settings.toml").is_file()


def test_every_declared_default_passes_its_own_check():
    for s in SETTINGS:
        assert s.check(s.default) == "", s.key


# ------------------------------------------------------------------------------------------------------------
# The dialog


def test_dialog_edits_and_applies_all_at_once(tmp_path, qtbot):
    from PySide6.QtWidgets import QComboBox, QSpinBox

    from app.ui.settings_dialog import PresetTable, SettingsDialog

    s = Settings(tmp_path)
    dlg = SettingsDialog(s)
    qtbot.addWidget(dlg)
    seen = []
    s.changed.connect(lambda key, value: seen.append(key))
    dlg.findChild(QSpinBox, "setting:denoise.steps").setValue(24)
    dlg.findChild(QComboBox, "setting:appearance.theme").setCurrentText("dark")
    table = dlg.findChild(PresetTable, "setting:rewrite.presets")
    table.add_row("pirate", "Say it like a pirate.")
    dlg.accept()
    assert dlg.result() == dlg.DialogCode.Accepted
    assert s["denoise.steps"] == 24 and s["appearance.theme"] == "dark"
    assert s.rewrite_presets()["pirate"] == "Say it like a pirate."
    assert sorted(seen) == ["appearance.theme", "denoise.steps", "rewrite.presets"]
    assert Settings(tmp_path)["denoise.steps"] == 24  # saved to the file


def test_dialog_refuses_bad_combination_and_says_why(tmp_path, qtbot):
    from PySide6.QtWidgets import QDoubleSpinBox, QLabel

    from app.ui.settings_dialog import PresetTable, SettingsDialog

    s = Settings(tmp_path)
    dlg = SettingsDialog(s)
    qtbot.addWidget(dlg)
    dlg.findChild(QDoubleSpinBox, "setting:denoise.t_min").setValue(1.5)
    assert not dlg.apply()
    assert "lower" in dlg.findChild(QLabel, "settingsProblems").text()
    assert s["denoise.t_min"] == 0.4
    dlg.findChild(QDoubleSpinBox, "setting:denoise.t_min").setValue(0.3)
    table = dlg.findChild(PresetTable, "setting:rewrite.presets")
    table.add_row("empty", "")
    assert not dlg.apply()
    assert "empty" in dlg.findChild(QLabel, "settingsProblems").text()
    dlg.restore_defaults()
    assert dlg.apply() and s.values() == defaults()


def test_dialog_shows_problems_found_in_the_file(tmp_path, qtbot):
    from PySide6.QtWidgets import QLabel

    from app.ui.settings_dialog import SettingsDialog

    (tmp_path / "settings.toml").write_text("[denoise]\nsteps = -3\n", encoding="utf-8")
    dlg = SettingsDialog(Settings(tmp_path))
    qtbot.addWidget(dlg)
    assert "denoise.steps" in dlg.findChild(QLabel, "settingsProblems").text()


# ------------------------------------------------------------------------------------------------------------
# Assistant keys and the dialog's size


def test_assistant_keys_are_settings_and_a_clash_is_refused_with_a_sentence(tmp_path):
    s = Settings(tmp_path)
    assert s["keys.accept"] == "Tab" and s["keys.rewrite"] == "Ctrl+R"
    s.set("keys.accept", "ctrl+j")
    assert s["keys.accept"] == "Ctrl+J" and Settings(tmp_path)["keys.accept"] == "Ctrl+J"
    with pytest.raises(ValueError) as err:
        s.set("keys.accept_word", "Ctrl+R")
    assert str(err.value) == (
        "Ctrl+R is already the key for Rewrite selection; choose another key for Accept next word."
    )
    with pytest.raises(ValueError, match="already the key for Undo"):
        s.set("keys.dismiss", "Ctrl+Z")
    with pytest.raises(ValueError, match="would type"):
        s.set("keys.draft", "x")
    with pytest.raises(ValueError, match="one key combination"):
        s.set("keys.draft", "Ctrl+K, Ctrl+D")
    s.update({"keys.accept": "Ctrl+R", "keys.rewrite": "Ctrl+Alt+R"})  # a swap in one go is fine
    assert s["keys.accept"] == "Ctrl+R"


def test_clashing_keys_in_the_file_fall_back_to_the_default_keys(tmp_path):
    (tmp_path / "settings.toml").write_text('[keys]\naccept = "Ctrl+R"\n', encoding="utf-8")
    s = Settings(tmp_path)
    assert s["keys.accept"] == "Tab" and s["keys.rewrite"] == "Ctrl+R"
    assert any("already the key" in p for p in s.problems)


def test_rebinding_a_key_in_the_dialog_moves_the_window_action(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QKeySequence
    from PySide6.QtWidgets import QKeySequenceEdit, QLabel

    from app.ui.settings_dialog import SettingsDialog
    from engine.fake import FakeEngine
    from tests.helpers.gui import build_window, ghost_state, isolate_user_dirs, set_text

    isolate_user_dirs(monkeypatch, tmp_path)
    s = Settings(tmp_path / "cfg")
    window = build_window(qtbot, FakeEngine(texts=[" more"], steps=2), settings=s)
    dlg = SettingsDialog(s, window)
    qtbot.addWidget(dlg)
    edit = dlg.findChild(QKeySequenceEdit, "setting:keys.accept")
    edit.setKeySequence(QKeySequence("Ctrl+R"))
    assert "already the key for Rewrite selection" in dlg.findChild(QLabel, "settingsProblems").text()
    assert not dlg.apply() and s["keys.accept"] == "Tab"
    edit.setKeySequence(QKeySequence("Ctrl+J"))
    assert dlg.apply()
    assert window.actionAcceptSuggestion.shortcut().toString() == "Ctrl+J"
    set_text(window, "Go")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)  # Tab types again: it is no longer the accept key
    assert window.editor.toPlainText() == "Go\t"
    qtbot.keyClick(window.editor, Qt.Key.Key_Backspace)
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    qtbot.keyClick(window.editor, Qt.Key.Key_J, Qt.KeyboardModifier.ControlModifier)
    assert window.editor.toPlainText() == "Go more"


def test_settings_dialog_fits_an_800_pixel_screen_with_its_buttons_visible(tmp_path, qtbot):
    from PySide6.QtWidgets import QDialogButtonBox, QScrollArea

    from app.ui.settings_dialog import SettingsDialog

    dlg = SettingsDialog(Settings(tmp_path))
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    assert dlg.frameGeometry().height() <= 800 - 40
    buttons = dlg.findChild(QDialogButtonBox)
    assert buttons.isVisible()
    bottom = buttons.mapTo(dlg, buttons.rect().bottomLeft()).y()
    assert bottom <= dlg.height(), "the OK/Cancel row is inside the dialog, not scrolled away"
    scroll = dlg.findChild(QScrollArea, "settingsScroll")
    assert scroll.widget().sizeHint().height() > scroll.viewport().height(), "the sections scroll"
    assert not scroll.isAncestorOf(buttons)
