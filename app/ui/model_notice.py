"""The sentences about a model that could not be used, and the strip above the page that shows them whole.

Why a strip: the status bar's message line has a few hundred pixels beside its permanent labels (about 35
characters while the demo banner is shown), so a load failure there ended in "…". What the writer must read
(the saved model was not found and the demo runs instead; a brief too long for this model) goes in the
word-wrapped strip above the page, where it always fits; the status bar gets a line short enough for it.

`subject(...)` + `problem_phrase(kind)` make "The saved model folder ~/models/dg was not found (moved or
deleted?)": by the error's kind, never the engine's long message, which stays in the strip's tooltip.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from app.ui.widgets import named, plain_tip

MAX_SHOWN_PATH = 60  # longer paths are shown by their last two parts (the whole path is in the tooltip)

PHRASES: dict[str, str] = {
    "model_not_found": "was not found (moved or deleted?)",
    "not_a_model_folder": "is no longer a model folder",
    "model_incomplete": "is incomplete (a file of the model is missing)",
    "model_damaged": "holds a damaged file",
    "model_unreadable": "cannot be read",
    "unsupported_model": "holds a model Letterpress cannot run",
    "out_of_memory": "did not fit in memory",
    "wont_fit": "does not fit in the free memory",
    "server_unreachable": "could not be reached",
    "server_timeout": "did not answer in time",
    "server_tls": "refused a secure connection",
    "server_auth": "refused the API key",
    "server_model_not_found": "does not serve the chosen model",
}


def shown_path(path: str) -> str:
    """`path` short enough to read in a sentence: home as ~, and a long one by its last two parts."""
    text = str(path)
    home = str(Path.home())
    if home not in ("", "/") and text.startswith(home + "/"):
        text = "~" + text[len(home) :]
    if len(text) > MAX_SHOWN_PATH:
        parts = Path(text).parts
        text = "…/" + "/".join(parts[-2:]) if len(parts) > 2 else text
    return text


def subject(target: str, *, saved: bool) -> str:
    """ "The saved model folder ~/m/dg" or "The server host:port" (a URL is a server)."""
    if target.startswith(("http://", "https://")):
        from engine.remote.client import host_label

        return f"The {'saved ' if saved else ''}server {host_label(target)}"
    return f"The {'saved ' if saved else ''}model folder {shown_path(target)}"


def problem_phrase(kind: str) -> str:
    return PHRASES.get(kind, "could not be loaded")


def fallback_sentence(kind: str, target: str, *, saved: bool) -> str:
    """One sentence: what was wrong with the model asked for, that the demo runs instead, and what to do."""
    return (
        f"{subject(target, saved=saved)} {problem_phrase(kind)}, so the built-in demo is loaded instead "
        "(Model ▸ Model manager… chooses another)."
    )


class ModelNotice(QWidget):
    """A dismissible, word-wrapped line above the page (objectName `modelNotice`)."""

    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelNotice")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        self.label = named(QLabel(self), "modelNoticeText")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = named(QToolButton(self), "modelNoticeClose")
        self.close_button.setText("×")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("Hide this note")
        self.close_button.clicked.connect(self._on_close)
        row.addWidget(self.label, 1)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.setStyleSheet("#modelNotice { border-bottom: 1px solid palette(mid); }")
        self._texts: dict[str, str] = {}
        self._details: dict[str, str] = {}
        self.hide()

    def text(self) -> str:
        """Every sentence shown now, one per line ("" when hidden)."""
        return "\n".join(self._texts.values())

    def show_text(self, text: str, details: str = "", topic: str = "model") -> None:
        """Show `text` (replacing the last one of the same `topic`: "model", "brief"); `details` in the
        tooltip."""
        self._texts[topic] = text
        self._details[topic] = details if details and details != text else ""
        self._render()

    def clear(self, topic: str | None = None) -> None:
        """Drop the sentence of `topic` (all of them when None); the strip hides once none is left."""
        for key in list(self._texts) if topic is None else [topic]:
            self._texts.pop(key, None)
            self._details.pop(key, None)
        self._render()

    def _render(self) -> None:
        self.label.setText(self.text())
        self.label.setToolTip(plain_tip("\n\n".join(d for d in self._details.values() if d)))
        self.setVisible(bool(self._texts))

    def _on_close(self) -> None:
        self.clear()
        self.dismissed.emit()
