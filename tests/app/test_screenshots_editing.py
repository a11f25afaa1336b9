"""Screenshots of issue 16's editing (strength dial, a re-roll mid-denoise, pinned words, the diff view, the
alternatives panel), rendered offscreen from the real window with the scripted engine.

By default they go to a temporary folder and the test checks that each differs from the plain ready state;
with `LETTERPRESS_SCREENSHOTS=docs/screenshots` they refresh the pictures the README shows.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from app.ui.theme import apply_theme
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, set_text
from tests.helpers.screenshots import DOC, DRAFTS, out_dir, shoot  # noqa: F401 (out_dir is a fixture)

LIGHT_EDIT = (
    "Everybody in the village seemed to have something to say about the weather, but nobody could tell "
    "what it would do next, which annoyed all of them."
)

pytestmark = pytest.mark.usefixtures("user_dirs")


def scripted(request):
    return [LIGHT_EDIT] if request.kind == "rewrite" else DRAFTS


def ready(qtbot, window) -> None:
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)


def click_word(qtbot, window, index: int) -> None:
    window.assistant.ghost.flush()
    qtbot.waitUntil(lambda: bool(window.assistant.ghost.hits))
    rect = next(r for r, i in window.assistant.ghost.hits if i == index)
    qtbot.mouseClick(
        window.editor.viewport(),
        Qt.MouseButton.LeftButton,
        pos=QPoint(int(rect.center().x()), int(rect.center().y())),
    )


# F811: out_dir is the fixture imported above
def test_screenshots_of_the_diffusion_editing(qtbot, out_dir, tmp_path):  # noqa: F811
    from app.config.settings import Settings

    apply_theme(QApplication.instance(), "light")
    settings = Settings(config_dir=tmp_path / "cfg")
    settings.set("rewrite.reroll_threshold", 0.9)
    engine = FakeEngine(texts=scripted, steps=12)
    window = build_window(qtbot, engine, settings=settings)
    window.resize(1280, 640)
    para_end = DOC.index("\n\nBy noon")
    sentence = DOC.index("Everybody")
    images: dict[str, QImage] = {}

    set_text(window, DOC, cursor=para_end)
    window.actionDraft.trigger()
    ready(qtbot, window)
    images["ready"] = shoot(qtbot, window, tmp_path / "ready.png")

    spans = window.assistant.suggestion.spans
    words = [i for i, s in enumerate(spans) if s.text.strip()]
    for i in (words[1], words[2], words[6]):
        click_word(qtbot, window, i)
    assert len(window.editing.pinned_words()) == 3
    images["pinned"] = shoot(qtbot, window, out_dir / "12-pinned-words.png")

    engine.hold_at_step = 6
    window.editing.actionRerollUncertain.trigger()
    qtbot.waitUntil(lambda: window.assistant.suggestion.step == 6, timeout=5000)
    images["reroll"] = shoot(qtbot, window, out_dir / "11-reroll-mid-denoise.png")
    engine.release.set()
    ready(qtbot, window)
    engine.hold_at_step = None
    engine.release.clear()
    window.actionDismissSuggestion.trigger()

    set_text(window, DOC, select=(sentence, len(DOC)))
    window.findChild(type(window.actionRewrite), "actionPreset_grammar").trigger()
    ready(qtbot, window)
    assert window.editing.dial.value == pytest.approx(0.2)
    images["dial"] = shoot(qtbot, window, out_dir / "10-strength-dial.png")

    window.editing.actionToggleDiffView.trigger()
    images["diff"] = shoot(qtbot, window, out_dir / "13-diff-view.png")
    window.editing.actionToggleDiffView.trigger()
    window.actionDismissSuggestion.trigger()

    settings.set("denoise.alternatives", 3)
    window.editing.actionShowAlternatives.trigger()
    set_text(window, DOC, cursor=para_end)
    window.actionDraft.trigger()
    ready(qtbot, window)
    window.editing.panel.list.setFocus()
    images["alternatives"] = shoot(qtbot, window, out_dir / "14-alternatives-panel.png")
    window.actionDismissSuggestion.trigger()
    window.editor.document().setModified(False)
    window.close()

    for name, image in images.items():
        assert not image.isNull() and image.width() >= 1200, name
        if name != "ready":
            assert image != images["ready"], f"{name} should look different from the plain suggestion"
    assert images["pinned"] != images["reroll"] and images["dial"] != images["diff"]
