"""The rewrite strength controls of the window: the toolbar dial, Assist ▸ Rewrite strength (a level per
step, Save as default / Reset to default for the preset the dial shows), and the strength each rewrite is
given. A whole rewrite of the dial's preset on screen runs again when the dial turns. Built by
`assist.editing`, which keeps these names as its own (`dial`, `strength_actions`, `menuStrength`…)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QMainWindow, QMenu

from app.assist.controller import Assistant
from app.assist.strength import LEVELS, StrengthDial, StrengthMemory, factory_default
from app.config.commands import MENU_BY_ID
from app.ui import actions
from app.ui.widgets import plain_tip
from engine.api import Capabilities, RewriteRequest, new_request_id


class StrengthControls(QObject):
    def __init__(
        self,
        window: QMainWindow,
        *,
        assistant: Assistant,
        memory: StrengthMemory,
        show_message: Callable[[str], None],
        fresh: Callable[[Any], object],
    ) -> None:
        """`fresh(suggestion)` is the suggestion's request while the document still matches it, else None."""
        super().__init__(window)
        self.assistant, self.memory = assistant, memory
        self.show_message = show_message
        self._fresh = fresh
        self.usable = True  # the engine in use can warm-start a canvas (`apply_capabilities`)
        w = window
        self.strength_group = QActionGroup(self)
        self.strength_actions: list[QAction] = []
        for name, value in LEVELS:
            act = actions.create_member(
                w,
                "actionRewriteStrength_",
                name.lower(),
                f"{name} ({value:.1f})",
                partial(self.set_strength, value),
                tip=f"Rewrite strength {value:.1f} for the preset the dial shows",
            )
            act.setCheckable(True)
            self.strength_group.addAction(act)
            self.strength_actions.append(act)
        # Saving the dial's value as a preset's default is a choice of its own, never a side effect of a drag.
        self.actionSaveStrengthDefault = actions.create_member(
            w, "actionStrengthDefault_", "save", "Save as default", self.save_strength_default
        )
        self.actionResetStrengthDefault = actions.create_member(
            w, "actionStrengthDefault_", "reset", "Reset to default", self.reset_strength_default
        )
        from app.assist.presets import preset_labels  # the labels the presets show in menus

        self.dial = StrengthDial(memory, preset_labels(assistant.presets()), w)
        self.dial.changed.connect(self._on_strength_changed)
        self.dial.slider.valueChanged.connect(lambda _v: self.sync_levels())
        self.dial.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.dial.addActions([self.actionSaveStrengthDefault, self.actionResetStrengthDefault])
        self.menuStrength = QMenu(MENU_BY_ID["menuRewriteStrength"].title, w)
        self.menuStrength.setObjectName("menuRewriteStrength")
        self.menuStrength.addActions(self.strength_actions)
        self.menuStrength.addSeparator()
        self.menuStrength.addActions([self.actionSaveStrengthDefault, self.actionResetStrengthDefault])

    def strength_for(self, instruction: str) -> float:
        """The strength a rewrite with `instruction` is given (the dial then shows its preset)."""
        if not self.usable:
            return 1.0  # a rewrite from the instruction alone: the engine cannot warm-start a canvas
        self.memory.presets = self.assistant.presets()
        key = self.memory.key_for(instruction)
        self.dial.show_preset(key)
        self.sync_levels()
        return self.dial.strength()

    def set_strength(self, value: float) -> None:
        """Turn the dial (for the preset it shows); a whole rewrite of that preset on screen runs again."""
        self.dial.set_value(value)
        self.sync_levels()

    def save_strength_default(self) -> None:
        """Assist ▸ Rewrite strength ▸ Save as default for <preset>: the dial's value becomes its default."""
        self.dial.save_default()
        self.sync_levels()
        self.show_message(f"{self.dial.value:.1f} is now the default strength for “{self.dial.name()}”.")

    def reset_strength_default(self) -> None:
        """Assist ▸ Rewrite strength ▸ Reset <preset> to its default (the built-in strength)."""
        self.dial.reset_default()
        self.sync_levels()
        self.show_message(f"“{self.dial.name()}” is back to its default strength {self.dial.value:.1f}.")

    def _on_strength_changed(self, key: str, value: float) -> None:
        self.sync_levels()
        request = self._fresh(self.assistant.suggestion)
        if not isinstance(request, RewriteRequest) or self.memory.key_for(request.instruction) != key:
            self.show_message(f"Rewrite strength {value:.1f} is used for the next rewrite.")
            return
        self.assistant.restart(replace(request, strength=value, canvas=None, request_id=new_request_id()))
        self.show_message(f"Rewriting again at strength {value:.1f}.")

    def sync_levels(self) -> None:
        """The menu's level matching the dial checked; Save / Reset named for its preset, enabled when they
        would change something."""
        for act, (_name, value) in zip(self.strength_actions, LEVELS, strict=True):
            act.setChecked(abs(value - self.dial.value) < 0.05)
        name, default = self.dial.name(), self.memory.get(self.dial.key)
        save, reset = self.actionSaveStrengthDefault, self.actionResetStrengthDefault
        save.setText(f"Save {self.dial.value:.1f} as default for “{name}”")
        save.setEnabled(self.dial.value != default and self.usable)
        save.setToolTip(f"Rewrites with “{name}” start at {self.dial.value:.1f} from now on")
        reset.setText(f"Reset “{name}” to its default ({factory_default(self.dial.key):.1f})")
        reset.setEnabled(
            (default != factory_default(self.dial.key) or self.dial.value != default) and self.usable
        )

    def apply_capabilities(self, caps: Capabilities, reason: str) -> None:
        """Without canvas control the dial and the levels are off; the dial's tooltip says why (`reason`)."""
        self.usable = caps.canvas_control
        self.dial.setEnabled(caps.canvas_control)
        self.dial.setToolTip("" if caps.canvas_control else plain_tip(reason))
        for act in self.strength_actions:
            act.setEnabled(caps.canvas_control)
        self.sync_levels()

    def presets_changed(self) -> None:
        """The writer's presets changed (Settings): the dial's caption fits their labels."""
        from app.assist.presets import preset_labels

        self.memory.presets = self.assistant.presets()
        self.dial.fit_caption(preset_labels(self.memory.presets))
        self.sync_levels()
