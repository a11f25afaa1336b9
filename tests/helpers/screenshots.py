"""What the screenshot tests share: the sample document, the scripted drafts, where pictures go and how one is
taken (the README's pictures are refreshed with `LETTERPRESS_SCREENSHOTS=docs/screenshots`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QImage

DOC = (
    "The harbour\n\n"
    "In the morning the harbour was quiet, and the boats rested on the grey water until the wind came.\n\n"
    "By noon the gulls had returned. Everybody in the village seemed to have something to say about the "
    "weather, but nobody could say what it would do next, which was very annoying to all of them."
)
DRAFTS = [
    " The first boats slipped out past the breakwater, their engines coughing in the cold.",
    " Old Marta was already on the quay, mending a net that did not need mending.",
    " Somewhere a radio played a song nobody had asked for.",
]


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    target = os.environ.get("LETTERPRESS_SCREENSHOTS")
    folder = Path(target) if target else tmp_path / "shots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shoot(qtbot: Any, window: Any, path: Path) -> QImage:
    """The window as painted now, with the ghost flushed and the word count settled (it runs on a
    debounce)."""
    window.assistant.ghost.flush()
    qtbot.waitUntil(lambda: window.wordsLabel.text() != "0 words", timeout=3000)
    qtbot.wait(50)
    window.grab().save(str(path))
    return QImage(str(path))
