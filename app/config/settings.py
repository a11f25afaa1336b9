"""Every user setting in one place: declared with type, default and bounds; stored as TOML; a `changed`
signal.

The file lives in the platformdirs user config folder (`settings.toml`) and is meant to be read and edited by
people. A value that is missing, of the wrong type or out of bounds is replaced by its default and reported in
`Settings.problems` (the window shows them); a file that is not valid TOML is kept aside as
`settings.toml.broken` (`-2`, `-3`, ... for a later one: never over an earlier kept copy) and defaults are
used.
Nothing the writer wrote is dropped by a later save: a file with a value that had to be replaced is first kept
beside it the same way (and the problem says under which name), unknown sections and keys are written back as
they were, and a table setting with one bad entry (an empty custom preset) loses only that entry. Loading
settings never raises.

Tests and portable installs point the folders elsewhere with `LETTERPRESS_CONFIG_DIR`, `LETTERPRESS_DATA_DIR`
and `LETTERPRESS_LOG_DIR`, or by passing `config_dir=` to `Settings`.
"""

from __future__ import annotations

import builtins
import logging
import math
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import tomlkit
import tomlkit.exceptions
import tomlkit.items
from PySide6.QtCore import QObject, Signal

from app.config import commands
from app.config.sections import SettingsValues, typed_values
from app.platform.atomic import atomic_write_text
from app.platform.folders import APP_NAME, config_dir, data_dir, log_dir, recovery_dir  # noqa: F401 - re-exported
from app.platform.keep_beside import keep_beside, regular_size
from app.platform.text_fit import shorten_words
from engine.api import MAX_STRENGTH, MIN_STRENGTH, PRESET_STRENGTHS, REWRITE_PRESETS, DenoiseSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

FILE_NAME = "settings.toml"
MAX_FILE_BYTES = 4 * 1024**2  # a settings file is a few KB; anything larger is not one


# ------------------------------------------------------------------------------------------------------------
# Folders
# (they live in app.platform.folders, below the settings, so the log and lock code can use them too)

_default_config_dir = config_dir


# ------------------------------------------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True)
class Setting:
    """One setting: its key (`section.name`, which is also where it sits in the TOML file), type and
    limits."""

    key: str
    type: type
    default: Any
    label: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    help: str = ""
    kind: str = ""  # "key": a key binding (one key combination in Qt's portable text, "" for none)
    # for dict settings: the type of each value (str instructions, float strengths); `builtins.type` because
    # the field `type` above shadows the builtin in this class body
    item_type: builtins.type = str

    def check(self, value: Any) -> str:
        """Why `value` is not acceptable for this setting ("" when it is)."""
        if self.type is bool:
            return "" if isinstance(value, bool) else "must be true or false"
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                return "must be a whole number"
        elif self.type is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return "must be a number"
            if not math.isfinite(value):
                return "must be a finite number"
        elif self.type is str:
            if not isinstance(value, str):
                return "must be text"
            if self.choices and value not in self.choices:
                return f"must be one of {', '.join(self.choices)}"
            if self.kind == "key":
                return key_problem(value)
        elif self.type is dict and self.item_type is float:
            if not isinstance(value, Mapping):
                return "must be a table of name = number"
            for name, number in value.items():
                if not isinstance(name, str) or not name.strip():
                    return "has an empty name"
                if (
                    isinstance(number, bool)
                    or not isinstance(number, (int, float))
                    or not math.isfinite(number)
                ):
                    return f"'{name}' must be a number"
                if (self.minimum is not None and number < self.minimum) or (
                    self.maximum is not None and number > self.maximum
                ):
                    return f"'{name}' must be between {self.minimum} and {self.maximum}"
            return ""
        elif self.type is dict:
            if not isinstance(value, Mapping) or not value:
                return "must be a non-empty table of name = instruction"
            for name, text in value.items():
                if not isinstance(name, str) or not name.strip():
                    return "has an empty preset name"
                if not isinstance(text, str) or not text.strip():
                    return f"preset '{name}' needs an instruction"
        if self.minimum is not None and value < self.minimum:
            return f"must be at least {self.minimum}"
        if self.maximum is not None and value > self.maximum:
            return f"must be at most {self.maximum}"
        return ""

    def coerce(self, value: Any) -> Any:
        """The stored form: ints given for floats become floats; tables become plain dicts; keys are written
        the way Qt spells them ("ctrl+r" -> "Ctrl+R")."""
        if self.kind == "key":
            return normal_key(value)
        if self.type is float:
            return float(value)
        if self.type is dict and self.item_type is float:
            return {str(k): float(v) for k, v in value.items()}
        if self.type is dict:
            return {str(k): str(v) for k, v in value.items()}
        return value


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "model.folder",
        str,
        "",
        "Model folder",
        help='A local DiffusionGemma checkpoint folder, or "builtin:demo" for the built-in demo (empty: the '
        "demo too).",
    ),
    Setting("model.device", str, "auto", "Device", choices=("auto", "cpu", "cuda")),
    Setting("model.quantization", str, "auto", "Quantization", choices=("auto", "nf4", "nf4-mixed", "none")),
    Setting(
        "server.url",
        str,
        "",
        "Server URL",
        help="A model server (Ollama, LM Studio, llama.cpp, vLLM) to write with instead of the local model; "
        "empty: the local model. Choose it with Model ▸ Use a server… (its API key is kept in the system "
        "keychain, not here).",
    ),
    Setting(
        "server.model",
        str,
        "",
        "Server model",
        help="The model of the server to use (empty: the first it lists).",
    ),
    Setting(
        "server.context",
        int,
        0,
        "Server model's context length",
        0,
        1_048_576,
        help="Tokens the server's model reads at once, for a server that does not say (Ollama, LM Studio); "
        "0: what the server says, else 2,048.",
    ),
    # 0: the model's own steps (its generation_config's max_denoising_steps: the demo's 12, DiffusionGemma's
    # 48); Settings shows that number instead of a constant that one model does not run.
    Setting(
        "denoise.steps",
        int,
        0,
        "Denoising steps",
        0,
        512,
        help='Most refinement steps per block; "Model\'s own" runs what the model declares.',
    ),
    Setting("denoise.t_max", float, 0.8, "Start temperature", 0.01, 2.0),
    Setting("denoise.t_min", float, 0.4, "End temperature", 0.0, 2.0),
    Setting(
        "denoise.entropy_bound",
        float,
        0.1,
        "Entropy bound",
        0.001,
        10.0,
        help="How much uncertainty a step may accept; lower is slower and more careful.",
    ),
    Setting(
        "denoise.alternatives",
        int,
        3,
        "Alternatives",
        1,
        8,
        help="Candidates computed in one batched run (Alt+] / Alt+[ cycle them).",
    ),
    Setting(
        "draft.length",
        int,
        64,
        "Draft length (tokens)",
        8,
        2048,
        help="At least this much; generation runs in whole canvases (256 tokens for DiffusionGemma) and "
        "stops at the model's end of text.",
    ),
    Setting("rewrite.presets", dict, dict(REWRITE_PRESETS), "Rewrite presets"),
    Setting(
        "rewrite.strengths",
        dict,
        {**PRESET_STRENGTHS, "custom": MAX_STRENGTH},
        "Rewrite strength per preset",
        MIN_STRENGTH,
        MAX_STRENGTH,
        item_type=float,
        help="Share of the selection re-noised (1.0 rewrites from pure noise); set with the strength dial.",
    ),
    Setting(
        "rewrite.view",
        str,
        "below",
        "Show rewrites as",
        choices=("below", "diff"),
        help="below: the original struck through, the new text under it; diff: a word-level diff.",
    ),
    Setting(
        "rewrite.reroll_threshold",
        float,
        0.8,
        "Re-roll keeps words at least this confident",
        0.05,
        0.99,
        help="Re-roll uncertain words (Alt+R) pins every word at least this confident and redraws the rest.",
    ),
    Setting("appearance.theme", str, "system", "Theme", choices=("system", "light", "dark")),
    Setting("appearance.font_family", str, "", "Font", help="Empty: the system's default text font."),
    Setting("appearance.font_size", int, 12, "Font size", 6, 72),
    Setting(
        "appearance.alternatives_panel",
        bool,
        False,
        "Show the Alternatives panel",
        help="Open beside the page at start (View ▸ Alternatives panel opens and closes it; remembered).",
    ),
    Setting("documents.autosave_seconds", int, 5, "Autosave every (seconds)", 1, 600),
    Setting("privacy.log_document_text", bool, False, "Write document text to the log (debugging only)"),
    # The assistant's keys: their defaults, labels and help come from the one command table.
    *(Setting(c.setting, str, c.key, c.name, kind="key", help=c.help) for c in commands.rebindable()),
)

BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}


def defaults() -> dict[str, Any]:
    return {s.key: s.coerce(s.default) for s in SETTINGS}


# ------------------------------------------------------------------------------------------------------------
# The live settings object


class Settings(QObject):
    """The current settings; `set`/`update` validate, save and emit `changed(key, value)` for each changed
    key."""

    changed = Signal(str, object)

    def __init__(
        self, config_dir: str | Path | None = None, *, autosave: bool = True, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.folder = Path(config_dir) if config_dir is not None else _default_config_dir()
        self.path = self.folder / FILE_NAME
        self.autosave = autosave
        self._values: dict[str, Any] = defaults()
        self._typed: SettingsValues | None = None
        self.problems: list[str] = []
        # What the file holds that Letterpress does not know (unknown sections and keys): written back as it
        # was.
        self._extra: dict[str, Any] = {}
        self._unwritable = False  # the file could not be kept aside: never write over it
        self.save_failure = ""  # why the last save failed ("" after a save that worked): OK stays open on it
        self.load()

    # -- reading ---------------------------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        value = self._values[key]
        return dict(value) if isinstance(value, dict) else value

    def get(self, key: str) -> Any:
        return self[key]

    @property
    def typed(self) -> SettingsValues:
        """Every setting as typed, read-only records by section (`settings.typed.denoise.steps`); rebuilt
        after a change, so a reader holding an old one keeps what it read."""
        if self._typed is None:
            self._typed = typed_values(self._values)
        return self._typed

    def values(self) -> dict[str, Any]:
        return {k: self[k] for k in self._values}

    def follow(
        self, read: Callable[[SettingsValues], T], apply: Callable[[T], object], *, now: bool = True
    ) -> None:
        """Call `apply(read(typed))` now (unless `now` is False) and whenever that value changes.

        Why: a follower names its setting as a typed attribute (`lambda v: v.privacy.log_document_text`),
        so mypy checks the name, where a `changed(key, value)` slot compared strings that nothing checked; and
        a value read from several settings (a font's family and size) is applied once per change of it."""
        last = read(self.typed)
        if now:
            apply(last)

        def changed(_key: str, _value: object) -> None:
            nonlocal last
            value = read(self.typed)
            if value != last:
                last = value
                apply(value)

        self.changed.connect(changed)

    def denoise_settings(self, *, candidates: int | None = None) -> DenoiseSettings:
        """The sampler settings for the next request (always valid: the values were checked on the way in)."""
        d = self.typed.denoise
        return DenoiseSettings(
            max_steps=d.steps or DenoiseSettings().max_steps,  # the default follows the checkpoint
            t_max=d.t_max,
            t_min=d.t_min,
            entropy_bound=d.entropy_bound,
            candidates=candidates if candidates is not None else d.alternatives,
        )

    def rewrite_presets(self) -> dict[str, str]:
        return dict(self.typed.rewrite.presets)

    # -- writing ---------------------------------------------------------------------------------------------

    def set(self, key: str, value: Any) -> None:
        """Change one setting; raises ValueError with a readable reason when the value is not acceptable."""
        self.update({key: value})

    def update(self, changes: Mapping[str, Any]) -> None:
        """Change several settings at once (all or nothing), save once, then emit `changed` per changed
        key."""
        merged = dict(self._values)
        for key, value in changes.items():
            setting = BY_KEY.get(key)
            if setting is None:
                raise KeyError(f"unknown setting {key!r}")
            why = setting.check(value)
            if why:
                raise ValueError(f"{setting.label} {why}.")
            merged[key] = setting.coerce(value)
        why = _cross_check(merged, [k for k in changes if merged[k] != self._values[k]])
        if why:
            raise ValueError(why)
        changed = [k for k in changes if merged[k] != self._values[k]]
        self._values = merged
        self._typed = None
        if changed and self.autosave:
            self.save()
        for key in changed:
            self.changed.emit(key, self[key])

    def reset(self, keys: list[str] | None = None) -> None:
        """Back to defaults (all settings, or only `keys`)."""
        base = defaults()
        self.update({k: base[k] for k in (keys or list(base))})

    def save(self) -> bool:
        """Write the TOML file atomically; a failure is logged and reported (False), never raised into
        the UI."""
        if self._unwritable and os.path.lexists(self.path):
            msg = (
                f"Settings were not saved to {self.path}: the file there could not be read or kept aside, "
                "so "
                "it is not overwritten; they apply until you quit."
            )
            self.problems.append(msg)
            self.save_failure = msg
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                text = to_toml(self._values, self._current_text())
            # a file tomlkit cannot walk: a fresh document (the kept copy has the old one)
            except RecursionError:
                text = to_toml(self._values)
            atomic_write_text(self.path, text)
            self._unwritable = False
            self.save_failure = ""
            return True
        except OSError as exc:
            msg = (
                f"Settings could not be saved to {self.path} "
                f"({exc.strerror or exc}); they apply until you quit."
            )
            log.warning(msg)
            self.problems.append(msg)
            self.save_failure = msg
            return False

    def _current_text(self) -> str:
        """The file as it is now ("" when there is none or it cannot be read): its comments are kept."""
        size = regular_size(self.path)
        if size is None or size > MAX_FILE_BYTES:  # never block on a FIFO, never read a huge file
            return ""
        try:
            return self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ""

    def load(self) -> None:
        """(Re)read the file; every bad value falls back to its default and is listed in `problems`."""
        self.problems = []
        self._values = defaults()
        self._typed = None
        self._extra = {}
        size = regular_size(self.path)
        if size is None:
            if os.path.lexists(self.path):
                self.problems.append(
                    f"{self.path} is not a regular file (a folder, pipe or device), so it "
                    "was not "
                    "read; using default settings until it is replaced by a file."
                )
                self._unwritable = True
            return
        if size > MAX_FILE_BYTES:
            self.problems.append(
                f"{self.path} is {size:,} bytes, far more than a settings file; it was not "
                "read "
                "and is left as it is. Using default settings."
            )
            self._unwritable = True
            return
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            self.problems.append(
                f"{self.path} cannot be read ({exc.strerror or exc}); using default settings."
            )
            self._unwritable = True
            return
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, ValueError) as exc:
            reason = "it nests too deeply to read" if isinstance(exc, RecursionError) else str(exc)[:200]
            try:
                backup = keep_beside(self.path, raw, move=True)
                kept = f" It was kept as {backup.name}."
            except OSError:
                kept = (
                    " It is left as it is (it could not be kept aside), and settings are not saved over it."
                )
                self._unwritable = True
            self.problems.append(f"{self.path} is not valid TOML ({reason}); using default settings.{kept}")
            return
        self._values, self.problems, self._extra = parse_all(data)
        self._typed = None
        # Unknown sections and keys stay in the file (`to_toml` keeps it); a value replaced by its default
        # would
        # not: the file as written is kept first.
        if any(not p.startswith("Unknown ") for p in self.problems):
            try:
                backup = keep_beside(self.path, raw)
                self.problems.append(f"Your settings file as you wrote it is kept as {backup.name}.")
            except OSError:
                self._unwritable = True
                self.problems.append(
                    "Settings are not saved over the file until it is fixed (a copy could not be kept)."
                )
        for problem in self.problems:
            log.warning("settings: %s", problem)


# Keys the app binds for itself: an assistant key may not take one of them (the other command would stop
# working).
RESERVED_KEYS: dict[str, str] = commands.reserved_keys()


def normal_key(text: str) -> str:
    """A key combination as Qt writes it in portable text ("" stays "": no key)."""
    if not text.strip():
        return ""
    from PySide6.QtGui import QKeySequence

    seq = QKeySequence.fromString(text.strip(), QKeySequence.SequenceFormat.PortableText)
    return seq.toString(QKeySequence.SequenceFormat.PortableText) if seq.count() == 1 else text.strip()


def key_problem(text: str) -> str:
    """Why `text` cannot be an assistant key ("" when it can)."""
    if not text.strip():
        return ""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QKeySequence

    seq = QKeySequence.fromString(text.strip(), QKeySequence.SequenceFormat.PortableText)
    combo = seq[0] if seq.count() == 1 else None  # type: ignore[index]  # the stub lacks Qt's operator[]
    if combo is None or combo.key() == Qt.Key.Key_unknown or not seq.toString():
        return "must be one key combination such as Ctrl+R or Alt+]"
    mods = combo.keyboardModifiers() & ~(
        Qt.KeyboardModifier.ShiftModifier | Qt.KeyboardModifier.KeypadModifier
    )
    key = int(combo.key())
    if not mods and 0x20 <= key <= 0x10FFFF and chr(key).isprintable():
        return "must use Ctrl or Alt: a plain character key would type instead"
    return ""


def key_clash(values: Mapping[str, Any], changed: Iterable[str] = ()) -> str:
    """A sentence naming the first clash between assistant keys, or with a key the app keeps ("" when none).
    Keys in `changed` (what the writer just set) are checked last, so the sentence names the one they
    chose."""
    owner: dict[str, str] = {}
    fresh = set(changed)
    for s in sorted((s for s in SETTINGS if s.kind == "key"), key=lambda s: s.key in fresh):
        key = normal_key(str(values.get(s.key, "")))
        if not key:
            continue
        key = commands.canonical(key)
        if key in RESERVED_KEYS:
            return f"{key} is already the key for {RESERVED_KEYS[key]}; choose another key for {s.label}."
        if key in owner:
            return f"{key} is already the key for {owner[key]}; choose another key for {s.label}."
        owner[key] = s.label
    return ""


def _cross_check(values: Mapping[str, Any], changed: Iterable[str] = ()) -> str:
    if not values["denoise.t_min"] < values["denoise.t_max"]:
        return "The end temperature must be lower than the start temperature."
    return key_clash(values, changed)


def parse(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Values from a parsed TOML document: defaults where something is wrong, plus what was wrong."""
    values, problems, _ = parse_all(data)
    return values, problems


def parse_all(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """`parse`, plus what the document holds that no setting declares (kept and written back by `to_toml`)."""
    values = defaults()
    problems: list[str] = []
    extra: dict[str, Any] = {}
    known_sections = {s.key.split(".")[0] for s in SETTINGS}
    for section, table in data.items():
        if section not in known_sections:
            problems.append(f"Unknown section [{section}] was ignored.")
            extra[section] = table
            continue
        if not isinstance(table, Mapping):
            problems.append(f"[{section}] must be a table; its defaults are used.")
            continue
        for name, value in table.items():
            key = f"{section}.{name}"
            setting = BY_KEY.get(key)
            if setting is None:
                if any(s.key.startswith(key + ".") for s in SETTINGS) and isinstance(value, Mapping):
                    continue  # a [section.sub] table of a dict setting: handled under its own key below
                problems.append(f"Unknown setting {key} was ignored.")
                extra.setdefault(section, {})[name] = value
                continue
            why = setting.check(value)
            if why and setting.type is dict and isinstance(value, Mapping):
                good = {k: v for k, v in value.items() if not setting.check({k: v})}
                if good and not setting.check(good):  # one bad entry (an empty preset) loses only itself
                    bad = [str(k) for k in value if k not in good]
                    problems.append(
                        f"{key}: {', '.join(bad[:5])} {setting.check({bad[0]: value[bad[0]]})}; "
                        "that entry is not used, the others are."
                    )
                    values[key] = setting.coerce(good)
                    continue
            if why:
                problems.append(f"{key} = {_shown(value)} {why}; using the default {setting.default!r}.")
                continue
            values[key] = setting.coerce(value)
    if not values["denoise.t_min"] < values["denoise.t_max"]:
        problems.append(
            "The end temperature must be lower than the start temperature. Using the default temperatures."
        )
        values["denoise.t_min"] = BY_KEY["denoise.t_min"].default
        values["denoise.t_max"] = BY_KEY["denoise.t_max"].default
    why = key_clash(values)
    if why:
        problems.append(f"{why} Using the default assistant keys.")
        for s in SETTINGS:
            if s.kind == "key":
                values[s.key] = s.default
    return values, problems, extra


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:
        text = "(deeply nested)"
    return shorten_words(text, 80)  # ends at a word


# ------------------------------------------------------------------------------------------------------------
# Writing TOML (tomlkit: the standard library only reads it, and a rewrite must keep what the writer typed)


def to_toml(values: Mapping[str, Any], existing: str = "") -> str:
    """Settings as a TOML document. With `existing` (the file as it is now) only the values change: the
    writer's comments, layout, unknown keys and unknown [sections] stay as they were. Without it (or when it
    is not valid TOML), a fresh document, one [section] per group in declaration order, with short
    comments."""
    doc = _parse_keeping(existing) if existing.strip() else None
    if doc is None:
        doc = _fresh_document(values)
    for s in SETTINGS:
        _put(doc, s, values[s.key])
    return tomlkit.dumps(doc)


def _parse_keeping(text: str) -> tomlkit.TOMLDocument | None:
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError:
        return None


def _fresh_document(values: Mapping[str, Any]) -> tomlkit.TOMLDocument:
    doc = tomlkit.document()
    doc.add(
        tomlkit.comment(
            "Letterpress settings. Edit while the app is closed; invalid values fall back to defaults."
        )
    )
    sections: dict[str, list[Setting]] = {}
    for s in SETTINGS:
        sections.setdefault(s.key.split(".")[0], []).append(s)
    for section, settings in sections.items():
        table = tomlkit.table(is_super_table=not any(s.type is not dict for s in settings))
        for s in sorted(settings, key=lambda s: s.type is dict):  # plain values before the sub-tables
            name = s.key.split(".", 1)[1]
            if s.type is dict:
                inner = tomlkit.table()
                for key, item in values[s.key].items():
                    inner.add(key, item)
                table.add(name, inner)
            else:
                comment = _comment(s)
                if comment:
                    table.add(tomlkit.comment(comment))
                table.add(name, values[s.key])
        doc.add(section, table)
    return doc


def _put(doc: tomlkit.TOMLDocument, s: Setting, value: Any) -> None:
    """Set one setting in `doc`, touching nothing when it already holds that value (so `1.0` stays `1.0`)."""
    section, name = s.key.split(".", 1)
    if section not in doc:
        doc.add(section, tomlkit.table())
    table = doc[section]
    if not isinstance(table, tomlkit.items.Table):  # `section = 3`: reported on load, replaced by a table
        del doc[section]
        doc.add(section, tomlkit.table())
        table = doc[section]
    if s.type is dict:
        inner = table.get(name)
        if not hasattr(inner, "keys") or isinstance(inner, tomlkit.items.InlineTable):
            if name in table:
                del table[name]
            table.add(name, tomlkit.table())
            inner = table[name]
        fresh = not inner
        for old in [k for k in list(inner) if k not in value]:
            del inner[old]
        for key, item in value.items():
            if key not in inner or _plain(inner[key]) != item:
                inner[key] = item
        if fresh:
            inner.add(tomlkit.nl())
        return
    if name in table and _plain(table[name]) == value and type(_plain(table[name])) is type(value):
        return
    table[name] = value


def _plain(item: Any) -> Any:
    return item.unwrap() if hasattr(item, "unwrap") else item


def _comment(s: Setting) -> str:
    parts = [s.label]
    if s.choices:
        parts.append("one of " + ", ".join(s.choices))
    elif s.minimum is not None and s.maximum is not None:
        parts.append(f"{s.minimum}..{s.maximum}")
    return "; ".join(parts)
