"""The settings as typed records, one frozen dataclass per section: what the app reads instead of string keys.

`SETTINGS` (in `app.config.settings`) stays the one declaration of each setting's type, default, bounds and
help; these records are its typed view, so a misspelt `settings.typed.denoise.step` is a mypy error where
`settings["denoise.step"]` was a KeyError at run time. `tests/app/config/test_sections.py` holds the two to
one another: every declared key has a field of its type, every field a declared key."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

Theme = Literal["system", "light", "dark"]  # a setting with choices is typed by them (the test holds both)


@dataclass(frozen=True)
class ModelSection:
    folder: str
    device: str
    quantization: str


@dataclass(frozen=True)
class ServerSection:
    url: str
    model: str
    context: int


@dataclass(frozen=True)
class DenoiseSection:
    steps: int
    t_max: float
    t_min: float
    entropy_bound: float
    alternatives: int


@dataclass(frozen=True)
class DraftSection:
    length: int


@dataclass(frozen=True)
class RewriteSection:
    presets: Mapping[str, str]
    strengths: Mapping[str, float]
    view: str
    reroll_threshold: float


@dataclass(frozen=True)
class AppearanceSection:
    theme: Theme
    font_family: str
    font_size: int
    alternatives_panel: bool


@dataclass(frozen=True)
class DocumentsSection:
    autosave_seconds: int


@dataclass(frozen=True)
class PrivacySection:
    log_document_text: bool


@dataclass(frozen=True)
class SettingsValues:
    """Every setting, by section. `keys` maps a command's setting name (`"rewrite"` for `keys.rewrite`) to its
    key sequence: the rebindable commands come from the command table, not from a list here."""

    model: ModelSection
    server: ServerSection
    denoise: DenoiseSection
    draft: DraftSection
    rewrite: RewriteSection
    appearance: AppearanceSection
    documents: DocumentsSection
    privacy: PrivacySection
    keys: Mapping[str, str]


# section name -> its record (every section but `keys`), read off `SettingsValues` so the two cannot differ
SECTION_TYPES: dict[str, type] = {
    name: hint for name, hint in typing.get_type_hints(SettingsValues).items() if name != "keys"
}


def typed_values(flat: Mapping[str, Any]) -> SettingsValues:
    """The typed records of a flat `{"section.name": value}` mapping (the values already checked by
    `Setting.check`). Mappings are read-only views: a record never changes under its reader."""

    def frozen(value: Any) -> Any:
        return MappingProxyType(dict(value)) if isinstance(value, Mapping) else value

    built: dict[str, Any] = {}
    for name, record in SECTION_TYPES.items():
        built[name] = record(**{f.name: frozen(flat[f"{name}.{f.name}"]) for f in dataclasses.fields(record)})
    keys = {k.split(".", 1)[1]: str(v) for k, v in flat.items() if k.startswith("keys.")}
    return SettingsValues(**built, keys=MappingProxyType(keys))
