"""The typed settings (`app.config.sections`) and the declared ones (`app.config.settings.SETTINGS`) are one
list: a setting added to one and not the other fails here, and a misspelt section or name is a mypy error."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from collections.abc import Mapping
from pathlib import Path

import pytest

from app.config import commands, sections
from app.config.settings import SETTINGS, Settings

ROOT = Path(__file__).resolve().parents[3]


def _fields() -> dict[str, object]:
    out: dict[str, object] = {}
    for name, record in sections.SECTION_TYPES.items():
        hints = typing.get_type_hints(record)
        for f in dataclasses.fields(record):
            out[f"{name}.{f.name}"] = hints[f.name]
    return out


def test_every_declared_setting_has_a_typed_field_of_its_type_and_no_field_is_undeclared():
    declared = {s.key: s for s in SETTINGS if not s.key.startswith("keys.")}
    fields = _fields()
    assert sorted(fields) == sorted(declared)
    for key, hint in fields.items():
        kind = declared[key].type
        if kind is dict:
            assert typing.get_origin(hint) is Mapping, key
            assert typing.get_args(hint)[1] is declared[key].item_type, key
        elif typing.get_origin(hint) is typing.Literal:  # typed by its choices: exactly the declared ones
            assert kind is str and set(typing.get_args(hint)) == set(declared[key].choices), key
        else:
            assert hint is kind, key


def test_every_rebindable_command_has_its_key_in_the_typed_keys(tmp_path):
    typed = Settings(tmp_path / "cfg").typed
    assert sorted(typed.keys) == sorted(c.setting.split(".", 1)[1] for c in commands.rebindable())
    assert typed.keys["rewrite"] == "Ctrl+R"


def test_a_change_gives_new_records_and_the_old_one_keeps_what_it_read(tmp_path):
    settings = Settings(tmp_path / "cfg")
    before = settings.typed
    assert before.denoise.alternatives == 3 and before is settings.typed
    settings.update({"denoise.alternatives": 5, "rewrite.view": "diff"})
    assert settings.typed.denoise.alternatives == 5 and settings.typed.rewrite.view == "diff"
    assert before.denoise.alternatives == 3  # a reader's record never changes under it
    with pytest.raises(TypeError):
        before.rewrite.presets["grammar"] = "something else"  # type: ignore[index]
    settings.load()  # re-read from the file the update saved
    assert settings.typed.denoise.alternatives == 5


@pytest.mark.slow
def test_mypy_refuses_a_misspelt_setting(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from app.config.settings import Settings\n\n\n"
        "def steps(s: Settings) -> int:\n"
        "    return s.typed.denoise.step\n",
        encoding="utf-8",
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", str(probe)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1 and '"DenoiseSection" has no attribute "step"' in run.stdout, run.stdout
