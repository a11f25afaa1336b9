"""Screenshots of every ghost-text state, rendered offscreen from the real window with the scripted engine.

By default they go to a temporary folder and the test checks that each state looks different; with
`LETTERPRESS_SCREENSHOTS=docs/screenshots` they refresh the pictures the README shows.
"""

from __future__ import annotations

import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from app.ui.theme import apply_theme
from engine.api import GenerationError
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, set_text
from tests.helpers.screenshots import DOC, DRAFTS, out_dir, shoot  # noqa: F401 (out_dir is a fixture)

REWRITE = "Nobody in the village could agree on what the weather would do next."
INFILL = "Then, all at once, the wind turned and the water went dark."


pytestmark = pytest.mark.usefixtures("user_dirs")


def scripted(texts, **kwargs):
    def script(request):
        if request.kind == "rewrite":
            return [REWRITE]
        if request.kind == "infill":
            return [INFILL]
        return texts

    return FakeEngine(texts=script, **kwargs)


def open_window(qtbot, engine, settings=None, *, dark=False):
    apply_theme(QApplication.instance(), "dark" if dark else "light")
    window = build_window(qtbot, engine, settings=settings)
    window.resize(980, 600)
    return window


# F811: out_dir is the fixture imported above
def test_screenshots_of_every_ghost_state(qtbot, out_dir, tmp_path):  # noqa: F811
    from app.config.settings import Settings

    settings = Settings(config_dir=tmp_path / "cfg")
    images: dict[str, QImage] = {}
    para_end = DOC.index("\n\nBy noon")
    sentence = DOC.index("Everybody")

    window = open_window(qtbot, scripted(DRAFTS, steps=12, hold_at_step=4), settings)
    set_text(window, DOC, cursor=para_end)
    images["idle"] = shoot(qtbot, window, out_dir / "1-idle.png")

    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: "step 4/12" in window.assistant.ghost.content.badge, timeout=5000)
    images["denoising"] = shoot(qtbot, window, out_dir / "2-draft-denoising.png")
    window.host.engine.release.set()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    window.actionNextAlternative.trigger()
    assert window.assistant.alternatives == (1, 3)
    images["alternatives"] = shoot(qtbot, window, out_dir / "3-draft-ready-alternative-2-of-3.png")
    window.actionDismissSuggestion.trigger()

    window.host.engine.hold_at_step = None
    set_text(window, DOC, select=(sentence, len(DOC)))
    window.actionRewrite.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    images["rewrite"] = shoot(qtbot, window, out_dir / "4-rewrite.png")
    window.actionDismissSuggestion.trigger()

    set_text(window, DOC.replace("\n\nBy noon", "\n\n\nBy noon"), cursor=para_end + 1)
    window.actionInfill.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    images["infill"] = shoot(qtbot, window, out_dir / "5-infill.png")
    window.actionDismissSuggestion.trigger()
    window.editor.document().setModified(False)
    window.close()

    failing = scripted(
        DRAFTS,
        steps=6,
        fail_at_step=3,
        error=GenerationError(
            "The GPU ran out of memory for this request. Try fewer alternatives "
            "or a shorter selection; the model stays loaded."
        ),
    )
    window = open_window(qtbot, failing, dark=True)
    set_text(window, DOC, cursor=para_end)
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "error", timeout=5000)
    images["error"] = shoot(qtbot, window, out_dir / "6-error-dark.png")
    window.editor.document().setModified(False)
    window.close()
    apply_theme(QApplication.instance(), "light")

    for name, image in images.items():
        assert not image.isNull() and image.width() >= 900, name
    for name in ("denoising", "alternatives", "rewrite", "infill"):
        assert images[name] != images["idle"], f"{name} should look different from idle"
    assert images["denoising"] != images["alternatives"]


def test_ghost_text_never_covers_the_writers_text(qtbot):
    window = open_window(qtbot, scripted([DRAFTS[0] * 3], steps=2))
    para_end = DOC.index("\n\nBy noon")
    set_text(window, DOC, cursor=para_end)
    next_para = DOC.index("By noon")
    before = window.editor.rect_for_position(next_para).top()
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    window.assistant.ghost.flush()
    qtbot.waitUntil(lambda: window.editor.rect_for_position(next_para).top() > before, timeout=3000)
    window.actionDismissSuggestion.trigger()
    qtbot.waitUntil(lambda: window.editor.rect_for_position(next_para).top() == before, timeout=3000)
    assert not window.editor.document().isModified()


# F811: out_dir is the fixture imported above
def test_screenshots_of_partial_accept_palette_and_dark_faint_ghost(qtbot, out_dir, tmp_path):  # noqa: F811
    """A rewrite partly accepted (original gone, the rest still ghost), the palette filtering, and the dark
    theme's faint (unsure) ghost words, which keep at least 3:1 contrast."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QPainter

    from app.config.settings import Settings
    from app.ui.palette import CommandPalette

    settings = Settings(config_dir=tmp_path / "cfg")
    sentence = DOC.index("Everybody")
    window = open_window(qtbot, scripted(DRAFTS, steps=4), settings)
    set_text(window, DOC, select=(sentence, len(DOC)))
    window.actionRewrite.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    for _ in range(4):
        window.actionAcceptWord.trigger()
    assert window.editor.toPlainText() == DOC[:sentence] + "Nobody in the village"
    partial = shoot(qtbot, window, out_dir / "7-rewrite-partly-accepted.png")
    window.actionDismissSuggestion.trigger()

    window.actionCommandPalette.trigger()
    palette = window.findChild(CommandPalette, "commandPalette")
    qtbot.waitExposed(palette)
    qtbot.keyClicks(palette.filter, "re")
    assert 1 < len(palette.visible_labels()) < len(palette.commands)
    window.assistant.ghost.flush()
    qtbot.wait(50)
    shot = window.grab()
    painter = QPainter(shot)
    at = palette.mapToGlobal(QPoint(0, 0)) - window.mapToGlobal(QPoint(0, 0))
    if not (0 <= at.x() < window.width() and 0 <= at.y() < window.height()):
        at = QPoint((window.width() - palette.width()) // 2, 60)
    painter.drawPixmap(at, palette.grab())
    painter.end()
    shot.save(str(out_dir / "8-palette-filtering.png"))
    palette.reject()
    window.editor.document().setModified(False)
    window.close()

    window = open_window(qtbot, scripted(DRAFTS, steps=12, hold_at_step=3), settings, dark=True)
    para_end = DOC.index("\n\nBy noon")
    set_text(window, DOC, cursor=para_end)
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: "step 3/12" in window.assistant.ghost.content.badge, timeout=5000)
    assert min(s.confidence for s in window.assistant.ghost.content.spans) < 0.3, "faint words are on screen"
    assert window.assistant.ghost.faintest_contrast() >= 3.0
    dark = shoot(qtbot, window, out_dir / "9-dark-faint-ghost.png")
    window.host.engine.release.set()
    window.actionDismissSuggestion.trigger()
    window.editor.document().setModified(False)
    window.close()
    apply_theme(QApplication.instance(), "light")
    for image in (partial, dark):
        assert not image.isNull() and image.width() >= 900
