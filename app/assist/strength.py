"""The rewrite-strength dial: how much of the selection a rewrite re-noises (0.1 light edit … 1.0 start over).

Each preset has a saved default strength (`rewrite.strengths` in the settings; "Fix grammar" defaults light,
"Rewrite freely" full, the generic Ctrl+R and custom instructions full). Choosing a preset turns the dial to
that preset's default. Turning the dial changes only the strength in play: the rewrite on screen (run again
at the new strength when it is still whole) and the next rewrite of the same preset; choosing another preset
turns the dial back to that one's default. Nothing is saved by a drag: "Save as default for <preset>" stores
the dial's value as the preset's default, and "Reset <preset> to its default" brings back the built-in one.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QSizePolicy, QSlider, QWidget

from app.config.settings import Settings
from app.ui.status import ElidedLabel
from app.ui.widgets import named
from engine.api import MAX_STRENGTH, MIN_STRENGTH, PRESET_STRENGTHS

CUSTOM = "custom"  # Ctrl+R's generic rewrite and the writer's own instructions
LEVELS: tuple[tuple[str, float], ...] = (("Light", 0.2), ("Medium", 0.5), ("Strong", 0.8), ("Full", 1.0))
CAPTION_MAX_PX = 260  # a caption longer than this (a long custom preset name) ends at a word with "…"


def clamp(value: float) -> float:
    return round(min(MAX_STRENGTH, max(MIN_STRENGTH, float(value))), 2)


def factory_default(key: str) -> float:
    """The built-in default strength of preset `key` (custom instructions rewrite fully)."""
    return clamp(PRESET_STRENGTHS.get(key, MAX_STRENGTH))


class StrengthMemory:
    """Saved default strength per preset key, read from and written to the settings (or kept in memory)."""

    def __init__(self, settings: Settings | None, presets: dict[str, str]) -> None:
        self.settings = settings
        self.presets = presets
        self._local: dict[str, float] = {**PRESET_STRENGTHS, CUSTOM: MAX_STRENGTH}

    def key_for(self, instruction: str) -> str:
        for key, text in self.presets.items():
            if text == instruction:
                return key
        return CUSTOM

    def get(self, key: str) -> float:
        """The saved default of `key`."""
        stored = self._stored()
        if key in stored:
            return clamp(stored[key])
        return factory_default(key)

    def set(self, key: str, value: float) -> None:
        """Save `value` as `key`'s default (an explicit choice of the writer, never a drag of the dial)."""
        self._write({**self._stored(), key: clamp(value)})

    def reset(self, key: str) -> None:
        """Give `key` its built-in default again."""
        self._write({**self._stored(), key: factory_default(key)})

    def _write(self, values: dict[str, float]) -> None:
        if self.settings is None:
            self._local = values
            return
        try:
            self.settings.set("rewrite.strengths", values)
        except Exception:  # noqa: BLE001 - never lose the dial over a settings problem
            self._local = values
            self.settings = None

    def _stored(self) -> dict[str, float]:
        if self.settings is None:
            return self._local
        try:
            return dict(self.settings.typed.rewrite.strengths)
        except Exception:  # noqa: BLE001
            return self._local


class StrengthDial(QWidget):
    """Toolbar widget: a slider 0.1…1.0 and a caption naming the preset it applies to.

    `changed(key, value)` fires once the writer stops moving it (a short debounce), not at every tick. The
    caption has one fixed width, the widest it can read in the current font (every preset at every value), so
    turning the dial or choosing another preset never moves the widgets beside it.
    """

    changed = Signal(str, float)

    def __init__(self, memory: StrengthMemory, labels: dict[str, str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rewriteStrength")
        self.memory = memory
        self.labels = labels
        self.key = CUSTOM
        self.override: float | None = None  # the dial's value for this preset, when not its default
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 0, 6, 0)
        self.caption = named(ElidedLabel(self), "rewriteStrengthLabel")
        self.caption.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.slider = named(QSlider(Qt.Orientation.Horizontal, self), "rewriteStrengthDial")
        self.slider.setRange(round(MIN_STRENGTH * 10), round(MAX_STRENGTH * 10))
        self.slider.setPageStep(1)
        self.slider.setFixedWidth(110)
        self.slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.slider.setAccessibleName("Rewrite strength")
        # A click or the wheel turns it without taking the keyboard from the document: typing, Tab and Ctrl+Z
        # (an editor-only shortcut) must keep working after the writer adjusts the dial.
        self.slider.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        row.addWidget(self.caption)
        row.addWidget(self.slider)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        self._timer = QTimer(self, singleShot=True, interval=250)
        self._timer.timeout.connect(self._commit)
        self._quiet = False
        self.slider.valueChanged.connect(self._on_value)
        self.fit_caption()
        self.show_preset(CUSTOM)

    @property
    def value(self) -> float:
        return clamp(self.slider.value() / 10)

    def strength(self) -> float:
        """The strength in play for the preset the dial shows: the dial's own value, else the default."""
        return self.override if self.override is not None else self.memory.get(self.key)

    def name(self, key: str | None = None) -> str:
        key = self.key if key is None else key
        return self.labels.get(key, "Rewrite" if key == CUSTOM else key)

    def is_default(self) -> bool:
        return self.override is None or self.override == self.memory.get(self.key)

    def show_preset(self, key: str) -> None:
        """Turn the dial to `key`'s strength in play (no `changed`); another preset starts at its default."""
        if key != self.key:
            self.override = None
        self.key = key
        self._turn(self.strength())

    def set_value(self, value: float, *, now: bool = True) -> None:
        """Turn the dial as the writer would (for this request; `changed` fires now or after the debounce)."""
        self.slider.setValue(round(clamp(value) * 10))
        if now:
            self._commit()

    def save_default(self) -> None:
        """Store the dial's value as the default of the preset it shows."""
        self._commit()
        self.memory.set(self.key, self.value)
        self.override = None
        self._label()

    def reset_default(self) -> None:
        """The preset the dial shows gets its built-in default back; the dial turns to it."""
        before = self.strength()
        self.memory.reset(self.key)
        self.override = None
        self._turn(self.strength())
        if self.strength() != before:
            self.changed.emit(self.key, self.strength())

    def fit_caption(self, labels: dict[str, str] | None = None) -> None:
        """One width for the caption: its longest text in the current font (capped; longer ends at a word)."""
        if labels is not None:
            self.labels = labels
        fm = self.caption.fontMetrics()
        names = {*self.labels.values(), self.name(CUSTOM), self.name()}
        widest = max(fm.horizontalAdvance(self._caption_text(n, 1.0, False)) for n in names)
        widest = max(widest, *(fm.horizontalAdvance(self._caption_text(n, 0.5, True)) for n in names))
        margins = self.caption.contentsMargins()
        self.caption.setFixedWidth(min(CAPTION_MAX_PX, widest + 4 + margins.left() + margins.right()))
        self._label()

    def _turn(self, value: float) -> None:
        self._quiet = True
        try:
            self.slider.setValue(round(value * 10))
        finally:
            self._quiet = False
        self._label()

    def _on_value(self, _value: int) -> None:
        self._label()
        if not self._quiet:
            self._timer.start()

    def _commit(self) -> None:
        self._timer.stop()
        if self.strength() != self.value:
            self.override = None if self.value == self.memory.get(self.key) else self.value
            self.changed.emit(self.key, self.value)
        self._label()

    @staticmethod
    def _caption_text(name: str, value: float, changed: bool) -> str:
        return f"{name} strength {value:.1f}" + (" (not saved)" if changed else "")

    def _label(self) -> None:
        name = self.name()
        default = self.memory.get(self.key)
        changed = self.value != default
        self.caption.set_full_text(self._caption_text(name, self.value, changed))
        tip = (
            f"Rewrite strength for “{name}”: {self.value:.1f} (0.1 keeps most words, 1.0 rewrites from "
            f"scratch). Its saved default is {default:.1f}: turning the dial changes this rewrite only; "
            "Assist ▸ Rewrite strength saves it as the default or resets it."
        )
        self.setToolTip(tip)
        self.slider.setToolTip(tip)
