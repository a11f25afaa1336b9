"""Issue 32, case 5 (the class): whatever a server sends is shown as its characters, never as rich text, in
labels and in tooltips (Qt renders a tooltip as rich text whenever it looks like markup)."""

from __future__ import annotations

from PySide6.QtGui import QTextDocument

from app.ui.model_notice import ModelNotice
from app.ui.status import ElidedLabel
from app.ui.widgets import plain_tip

LINK = '<a href="http://evil.example/">Click here to re-enter your key</a> & <img src="x.png">'


def _rendered(tip: str) -> str:
    """What Qt shows for `tip`: its text once rendered (rich text when it looks like markup, as tooltips
    do)."""
    doc = QTextDocument()
    if tip.startswith("<qt>") or "<a " in tip:
        doc.setHtml(tip)
    else:
        doc.setPlainText(tip)
    return doc.toPlainText()


def test_a_tooltip_that_looks_like_markup_shows_its_characters(qtbot):
    assert _rendered(plain_tip(LINK)) == LINK
    assert plain_tip("Your text stays on this computer.") == "Your text stays on this computer."


def test_labels_and_notes_quoting_a_server_show_markup_as_characters(qtbot):
    label = ElidedLabel(max_width=80)
    qtbot.addWidget(label)
    label.setText(f"Ready: {LINK}")
    label.show()
    assert _rendered(label.toolTip()).startswith("Ready: <a href")  # elided: the full text in the tip
    notice = ModelNotice()
    qtbot.addWidget(notice)
    notice.show_text("The server failed.", details=LINK)
    assert _rendered(notice.label.toolTip()) == LINK
