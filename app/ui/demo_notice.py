"""Honest labelling of the built-in demo model: the words in one place, and the status-bar banner that shows
them.

Why: the demo is the only model a new user can run at once, and its text is clumsy by design (a few million
parameters). Unlabelled, a writer concludes the product is broken; labelled, they see what it is for (how
suggestions settle, the strength dial, pins, the diff) and are one click from a real model or a server.

`demo_wording()` is the one source of these words: the status-bar banner here, the first-run hint and the
model manager's "Built-in demo" entry all take their text from it. `is_demo_model(path)` says whether a loaded
folder is the shipped demo (`engine.resources.demo_model_dir`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from app.config.model_choice import is_demo_choice


@dataclass(frozen=True)
class DemoWording:
    name: str  # what the model manager lists it as
    badge: str  # the status bar's short label
    summary: str  # one sentence: what it is
    shows: tuple[str, ...]  # what it can show
    hint: str  # the paragraph for the first-run hint and the banner's tooltip
    load_real: str  # the button that opens the model manager
    use_server: str  # the button that connects to a server


def demo_wording() -> DemoWording:
    """The demo's words, for every place that mentions it (status bar, first-run hint, model manager)."""
    shows = (
        "how a suggestion settles, word by word, from noise to text",
        "the strength dial (how much of a selection is rewritten)",
        "pinning words and re-rolling the rest around them",
        "the diff of a rewrite against your text",
    )
    summary = (
        "This is the built-in demo model: a tiny model (a few million parameters) that runs on any computer. "
        "It shows how Letterpress works; it is not a writing model, and its text is often clumsy."
    )
    hint = (
        f"{summary}\n\nTry with it: " + "; ".join(shows) + ".\n\n"
        "For real writing, load DiffusionGemma (Model manager) or connect to a DiffusionGemma server."
    )
    return DemoWording(
        name="Built-in demo",
        badge="Demo model, not a writing model",
        summary=summary,
        shows=shows,
        hint=hint,
        load_real="Load a real model…",
        use_server="Use a server…",
    )


def is_demo_model(path: str | Path | None) -> bool:
    """Whether `path` is the shipped demo model's folder (resolved, so a relative or linked path counts), or
    the settings' marker for it (`app.config.model_choice.DEMO_MARKER`)."""
    return is_demo_choice(path)


class DemoBanner(QWidget):
    """The demo strip above the page (objectName `demoBanner`) with one-click ways to something real.

    `loadRealModel` / `useServer` are emitted by the two buttons; the window connects them to its model
    manager and server actions (the server button is hidden when the app has no server action)."""

    loadRealModel = Signal()
    useServer = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("demoBanner")
        words = demo_wording()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        self.label = QLabel(words.badge, self)
        self.label.setObjectName("demoBadge")
        self.label.setToolTip(words.hint)
        self.label.setStyleSheet("QLabel { font-weight: bold; }")
        self.loadButton = self._button(words.load_real, "demoLoadRealModel", self.loadRealModel.emit)
        self.serverButton = self._button(words.use_server, "demoUseServer", self.useServer.emit)
        for w in (self.label, self.loadButton, self.serverButton):
            row.addWidget(w)
        self.setToolTip(words.hint)
        self.hide()

    def _button(self, text: str, name: str, slot: Callable[[], None]) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName(name)
        button.setText(text)
        button.setAutoRaise(True)
        button.setToolTip(demo_wording().hint)
        button.clicked.connect(lambda *_: slot())
        return button

    def set_server_available(self, available: bool) -> None:
        self.serverButton.setVisible(available)
