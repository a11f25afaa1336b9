"""The rewrite-strength dial: how much of the selection a rewrite re-noises (0.1 light edit … 1.0 start over).

Strength is remembered per preset (`rewrite.strengths` in the settings; "Fix grammar" defaults light, "Rewrite
freely" full, the generic Ctrl+R and custom instructions full, today's behaviour). Choosing a preset turns the
dial to that preset's strength; turning the dial stores it for the preset the dial shows and, when a rewrite
of that preset is on screen and still whole, runs it again at the new strength.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QSlider, QWidget

from app.ui.widgets import named
from engine.api import MAX_STRENGTH, MIN_STRENGTH, PRESET_STRENGTHS

CUSTOM = "custom"  # Ctrl+R's generic rewrite and the writer's own instructions
LEVELS: tuple[tuple[str, float], ...] = (("Light", 0.2), ("Medium", 0.5), ("Strong", 0.8), ("Full", 1.0))


def clamp(value: float) -> float:
    return round(min(MAX_STRENGTH, max(MIN_STRENGTH, float(value))), 2)


class StrengthMemory:
    """Strength per preset key, read from and written to the settings (or kept in memory without them)."""

    def __init__(self, settings: Any | None, presets: dict[str, str]) -> None:
        self.settings = settings
        self.presets = presets
        self._local: dict[str, float] = {**PRESET_STRENGTHS, CUSTOM: MAX_STRENGTH}

    def key_for(self, instruction: str) -> str:
        for key, text in self.presets.items():
            if text == instruction:
                return key
        return CUSTOM

    def get(self, key: str) -> float:
        stored = self._stored()
        if key in stored:
            return clamp(stored[key])
        return clamp(PRESET_STRENGTHS.get(key, MAX_STRENGTH))

    def set(self, key: str, value: float) -> None:
        value = clamp(value)
        if self.settings is None:
            self._local[key] = value
            return
        try:
            self.settings.set("rewrite.strengths", {**self._stored(), key: value})
        except Exception:  # noqa: BLE001 - never lose the dial over a settings problem
            self._local[key] = value
            self.settings = None

    def _stored(self) -> dict[str, float]:
        if self.settings is None:
            return self._local
        try:
            return dict(self.settings["rewrite.strengths"])
        except Exception:  # noqa: BLE001
            return self._local


class StrengthDial(QWidget):
    """Toolbar widget: a slider 0.1…1.0 and a label naming the preset it applies to.

    `changed(key, value)` fires once the writer stops moving it (a short debounce), not at every tick.
    """

    changed = Signal(str, float)

    def __init__(self, memory: StrengthMemory, labels: dict[str, str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rewriteStrength")
        self.memory = memory
        self.labels = labels
        self.key = CUSTOM
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 0, 6, 0)
        self.caption = named(QLabel(self), "rewriteStrengthLabel")
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
        self.show_preset(CUSTOM)

    @property
    def value(self) -> float:
        return clamp(self.slider.value() / 10)

    def show_preset(self, key: str) -> None:
        """Turn the dial to `key`'s remembered strength (no `changed`)."""
        self.key = key
        self._quiet = True
        try:
            self.slider.setValue(round(self.memory.get(key) * 10))
        finally:
            self._quiet = False
        self._label()

    def set_value(self, value: float, *, now: bool = True) -> None:
        """Turn the dial as the writer would (stores it; `changed` fires now or after the debounce)."""
        self.slider.setValue(round(clamp(value) * 10))
        if now:
            self._commit()

    def _on_value(self, _value: int) -> None:
        self._label()
        if not self._quiet:
            self._timer.start()

    def _commit(self) -> None:
        self._timer.stop()
        if self.memory.get(self.key) != self.value:
            self.memory.set(self.key, self.value)
            self.changed.emit(self.key, self.value)

    def _label(self) -> None:
        name = self.labels.get(self.key, "Rewrite" if self.key == CUSTOM else self.key)
        self.caption.setText(f"{name} strength {self.value:.1f}")
        tip = (
            f"Rewrite strength for “{name}”: {self.value:.1f} (0.1 keeps most words, 1.0 rewrites from "
            "scratch). Remembered per preset."
        )
        self.setToolTip(tip)
        self.slider.setToolTip(tip)
