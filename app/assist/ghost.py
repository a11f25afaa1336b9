"""The ghost-text painter: draws a suggestion over the editor without ever touching the document.

Draft and gap infill are drawn inline, starting exactly at the anchor and wrapping like the text; a rewrite
(or an infill that replaces a selection) dims and strikes through the original and shows the new text in a
card directly below it. Each word is shaded by the model's confidence, so the writer watches the text settle.

Repaints are throttled to about one per frame: `show` only stores the newest content and arms a 16 ms timer;
the paint always uses the newest content, so the last step always lands and nothing is cleared between steps
(no flicker).

Pinned words (kept by the writer or by a re-roll, `Span.pinned`) are drawn solid on a tinted box with an
underline; a word-level diff (`GhostContent.styles`, see `app.assist.diff_view`) draws deleted words struck
through in red and inserted words on a green highlight. `hit(point)` says which word of the ghost is under a
point, so a click can pin it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from PySide6.QtCore import QObject, QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPalette, QPen, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QTextEdit

from app.ui.contrast import contrast, min_alpha, over
from app.ui.editor import Editor
from engine.api import Span

Layout = Literal["inline", "below"]
FRAME_MS = 16
CARD_PAD = 6.0
TINT_ALPHA = 22  # the ghost's background wash (out of 255)
TOP_ALPHA = 0.80  # ink of a settled, confident word (the writer's own text is fully opaque)


@dataclass(frozen=True)
class GhostContent:
    layout: Layout
    spans: tuple[Span, ...]
    badge: str = ""
    error: str = ""
    styles: tuple[str, ...] = ()  # per span: "" (plain), "deleted" or "inserted" (a word-level diff)


@dataclass(frozen=True)
class _Geometry:
    font: QFont
    fm: QFontMetricsF
    left: float
    right: float
    x0: float
    y0: float
    card: bool
    paragraph_bottom: float


@dataclass(frozen=True)
class _Piece:
    x: float
    y: float
    text: str
    confidence: float
    index: int = 0  # which span it belongs to


class GhostPainter(QObject):
    """Owns what the editor shows as ghost text; `region` gives the live (start, end) document positions."""

    def __init__(self, editor: Editor) -> None:
        super().__init__(editor)
        self.editor = editor
        self.content: GhostContent | None = None
        self.region: Callable[[], tuple[int, int]] = lambda: (0, 0)
        self.paints = 0
        self._marked: tuple[str, tuple[int, int]] | None = None
        self._floors: dict[tuple[int, int], float] = {}
        self.hits: list[
            tuple[QRectF, int]
        ] = []  # where each drawn word is (viewport coordinates), by span index
        self._timer = QTimer(self, singleShot=True, interval=FRAME_MS)
        self._timer.timeout.connect(self._repaint)
        editor.overlay_painters.append(self.paint)

    # -- content ---------------------------------------------------------------------------------------------

    def show(self, content: GhostContent, region: Callable[[], tuple[int, int]]) -> None:
        """Show (or update) the ghost; cheap, so it can be called at every denoising step."""
        self.content = content
        self.region = region
        if (content.layout, region()) != self._marked:
            self._mark_original()
        if not self._timer.isActive():
            self._timer.start()

    def clear(self) -> None:
        if self.content is None:
            return
        self.content = None
        self._marked = None
        self.hits = []
        self.editor.setExtraSelections([])
        self.editor.reserve_below(None)
        self._timer.stop()
        self._repaint()

    def flush(self) -> None:
        """Paint now (tests and screenshots), instead of at the next frame."""
        self._timer.stop()
        self._repaint()

    def hit(self, point: QPointF) -> int | None:
        """The index of the ghost span drawn under `point` (viewport coordinates), if any."""
        for rect, index in self.hits:
            if rect.contains(point):
                return index
        return None

    def _repaint(self) -> None:
        self.editor.viewport().update()

    def _mark_original(self) -> None:
        """Dim and strike through the text a rewrite would replace (a view format, not a document edit)."""
        if self.content is None:
            return
        start, end = self.region()
        self._marked = (self.content.layout, (start, end))
        if self.content.layout != "below":
            self.editor.setExtraSelections([])
            return
        selection = QTextEdit.ExtraSelection()
        cursor = QTextCursor(self.editor.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        fmt = QTextCharFormat()
        fmt.setFontStrikeOut(True)
        fmt.setForeground(_blend(self.editor.palette(), 0.45))
        selection.cursor = cursor  # a live cursor: it follows edits elsewhere in the document
        selection.format = fmt
        self.editor.setExtraSelections([selection])

    # -- colour ----------------------------------------------------------------------------------------------

    def ghost_background(self) -> QColor:
        """What ghost words are painted on: the editor's base with the accent wash over it."""
        pal = self.editor.palette()
        return over(
            pal.color(QPalette.ColorRole.Highlight), TINT_ALPHA / 255, pal.color(QPalette.ColorRole.Base)
        )

    def alpha_range(self) -> tuple[float, float]:
        """Ink alpha of the least and the most confident word: the floor is the faintest ink that still
        reaches `MIN_CONTRAST` on this palette's ghost background (computed, so every theme stays
        readable)."""
        ink = self.editor.palette().color(QPalette.ColorRole.Text)
        key = (ink.rgba(), self.ghost_background().rgba())
        if key not in self._floors:  # once per palette, not per paint
            self._floors[key] = min(1.0, min_alpha(ink, self.ghost_background()) + 2 / 255)  # alpha is 8-bit
        floor = self._floors[key]
        return floor, max(TOP_ALPHA, floor)

    def faintest_contrast(self) -> float:
        """Contrast ratio of a zero-confidence ghost word against its background (what the writer must
        read)."""
        ink = QColor(self.editor.palette().color(QPalette.ColorRole.Text))
        ink.setAlphaF(self.alpha_range()[0])
        bg = self.ghost_background()
        return contrast(over(ink, ink.alphaF(), bg), bg)

    # -- geometry --------------------------------------------------------------------------------------------

    def _geometry(self, content: GhostContent) -> _Geometry:
        """Where the ghost's first line starts and how wide its lines may run (shared by paint and line
        accept)."""
        editor = self.editor
        _start, end = self.region()
        font = QFont(editor.font())
        font.setItalic(True)
        fm = QFontMetricsF(font)
        margin = editor.document().documentMargin()
        left = editor.contentOffset().x() + margin
        right = editor.viewport().width() - margin
        anchor = editor.rect_for_position(end)
        paragraph_bottom = float(editor.rect_for_position(editor.paragraph_end(end)).bottom())
        at_end = editor.paragraph_end(end) == end
        card = not (content.layout == "inline" and at_end and not content.error)
        if card:
            x0, y0 = left, paragraph_bottom + 2 + CARD_PAD
        else:
            x0, y0 = float(anchor.left() + 1), float(anchor.top())
        return _Geometry(font, fm, left, right, x0, y0, card, paragraph_bottom)

    def first_line_length(self, spans: Sequence[Span]) -> int:
        """How many characters of `spans` the first line on screen shows, as the ghost is wrapped now (the
        text "accept next line" takes); the whole text when it is not shown or fits on one line."""
        text = "".join(s.text for s in spans)
        content = self.content
        if content is None or not self.editor.isVisible() or self.editor.viewport().width() <= 0:
            newline = text.find("\n", 1 if text.startswith("\n") else 0)  # not on screen: up to a line break
            return len(text) if newline < 0 else newline + 1
        g = self._geometry(content)
        ends: list[int] = []
        _layout(spans, g.fm, g.x0, g.y0, g.left, g.right, ends)
        for end in ends:  # a line that is only a line break is taken with the line after it
            if text[:end].strip():
                return end
        return len(text)

    # -- painting --------------------------------------------------------------------------------------------

    def paint(self, painter: QPainter) -> None:
        content = self.content
        if content is None:
            return
        self.paints += 1
        editor = self.editor
        _start, end = self.region()
        g = self._geometry(content)
        font, fm, left, right, x0, y0, card = g.font, g.fm, g.left, g.right, g.x0, g.y0, g.card
        line_h = fm.lineSpacing()
        anchor = editor.rect_for_position(end)
        paragraph_bottom = g.paragraph_bottom
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = editor.palette()
        accent = pal.color(QPalette.ColorRole.Highlight)
        if content.error:
            bottom = self._paint_error(painter, content.error, y0, left, right, fm, font, pal)
            editor.reserve_below(end, bottom - paragraph_bottom + 2)
            return
        pieces, lines = _layout(content.spans, fm, x0, y0, left, right)
        if card and content.layout == "inline":  # where the text will go, when the card sits below
            painter.fillRect(QRectF(anchor.left() - 1, anchor.top(), 2.5, anchor.height()), accent)
        tint = QColor(accent)
        tint.setAlpha(TINT_ALPHA)
        if card and lines:
            top = lines[0][1] - CARD_PAD
            bottom = lines[-1][1] + line_h + CARD_PAD
            painter.fillRect(QRectF(left - CARD_PAD, top, right - left + 2 * CARD_PAD, bottom - top), tint)
            painter.setPen(QPen(accent, 2.0))
            painter.drawLine(QPointF(left - CARD_PAD, top), QPointF(left - CARD_PAD, bottom))
        else:
            for lx, ly, rx in lines:
                painter.fillRect(QRectF(lx - 2, ly, max(rx - lx, fm.averageCharWidth()) + 4, line_h), tint)
        painter.setFont(font)
        ink = pal.color(QPalette.ColorRole.Text)
        floor, top = self.alpha_range()
        struck = QFont(font)
        struck.setStrikeOut(True)
        hits: list[tuple[QRectF, int]] = []
        for p in pieces:
            span = content.spans[p.index] if p.index < len(content.spans) else None
            style = content.styles[p.index] if p.index < len(content.styles) else ""
            width = fm.horizontalAdvance(p.text)
            box = QRectF(p.x, p.y, width, line_h)
            hits.append((box, p.index))
            color = QColor(ink)
            color.setAlphaF(floor + (top - floor) * max(0.0, min(1.0, p.confidence)))
            if span is not None and span.pinned:  # kept words: solid, boxed, underlined
                lead = len(p.text) - len(p.text.lstrip())
                inner = box.adjusted(fm.horizontalAdvance(p.text[:lead]), 1, 0, -1)
                pin_tint = QColor(accent)
                pin_tint.setAlpha(60)
                painter.fillRect(inner, pin_tint)
                painter.setPen(QPen(accent, 1.5))
                painter.drawLine(
                    QPointF(inner.left(), inner.bottom()), QPointF(inner.right(), inner.bottom())
                )
                color.setAlphaF(1.0)
            if style == "inserted":
                painter.fillRect(box, QColor(60, 170, 90, 70))
            elif style == "deleted":
                color = QColor(200, 60, 50)
                color.setAlphaF(0.85)
            painter.setFont(struck if style == "deleted" else font)
            painter.setPen(color)
            painter.drawText(QPointF(p.x, p.y + fm.ascent()), p.text)
        painter.setFont(font)
        self.hits = hits
        bottom = (lines[-1][1] if lines else y0) + line_h + (CARD_PAD if card else 0)
        if content.badge:
            lx, ly, rx = lines[-1] if lines else (x0, y0, x0)
            bottom = max(bottom, self._paint_badge(painter, content.badge, rx + 8, ly, right, line_h, pal))
        # Room below the paragraph for what does not fit on the anchor's line: nothing the writer wrote is
        # hidden.
        editor.reserve_below(end, bottom - paragraph_bottom + 2 if bottom > paragraph_bottom else 0)

    def _paint_badge(
        self, painter: QPainter, text: str, x: float, y: float, right: float, line_h: float, pal: QPalette
    ) -> float:
        font = QFont(self.editor.font())
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.72))
        fm = QFontMetricsF(font)
        w = fm.horizontalAdvance(text) + 10
        if x + w > right + CARD_PAD:
            x, y = right - w, y + line_h
        rect = QRectF(x, y + (line_h - fm.height() - 4) / 2, w, fm.height() + 4)
        bg = QColor(pal.color(QPalette.ColorRole.Highlight))
        bg.setAlpha(200)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(bg)
        painter.drawRoundedRect(rect, 4, 4)
        painter.setPen(pal.color(QPalette.ColorRole.HighlightedText))
        painter.setFont(font)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        return y + line_h

    def _paint_error(
        self,
        painter: QPainter,
        message: str,
        y0: float,
        left: float,
        right: float,
        fm: QFontMetricsF,
        font: QFont,
        pal: QPalette,
    ) -> float:
        pieces, lines = _layout(
            (Span("⚠ " + message, 1.0),), fm, left + CARD_PAD, y0, left + CARD_PAD, right - CARD_PAD
        )
        top = lines[0][1] - CARD_PAD
        bottom = lines[-1][1] + fm.lineSpacing() + CARD_PAD
        rect = QRectF(left - CARD_PAD, top, right - left + 2 * CARD_PAD, bottom - top)
        dark = pal.color(QPalette.ColorRole.Base).lightness() < 128
        painter.setPen(QPen(QColor("#d9534f"), 1.2))
        painter.setBrush(QColor("#4a2523") if dark else QColor("#fdecea"))
        painter.drawRoundedRect(rect, 5, 5)
        painter.setPen(QColor("#ffb4ab") if dark else QColor("#8a1c17"))
        plain = QFont(font)
        plain.setItalic(False)
        painter.setFont(plain)
        for p in pieces:
            painter.drawText(QPointF(p.x, p.y + fm.ascent()), p.text)
        return bottom


def _blend(pal: QPalette, amount: float) -> QColor:
    """Text colour mixed toward the background by `amount` (0 = text, 1 = background)."""
    a, b = pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.Base)
    return QColor(
        round(a.red() * (1 - amount) + b.red() * amount),
        round(a.green() * (1 - amount) + b.green() * amount),
        round(a.blue() * (1 - amount) + b.blue() * amount),
    )


def _layout(
    spans: Sequence[Span],
    fm: QFontMetricsF,
    x0: float,
    y0: float,
    left: float,
    right: float,
    ends: list[int] | None = None,
) -> tuple[list[_Piece], list[tuple[float, float, float]]]:
    """Place the spans word by word from (x0, y0), wrapping at `right` back to `left`.

    Returns the pieces to draw and, per line, (left x, top y, right x) of the ink. When `ends` is given, it
    receives for each line but the last the number of characters of the text shown up to that line's end
    (a line broken by a newline includes it; at a wrap, the space the wrap swallows belongs to the next line).
    """
    line_h = fm.lineSpacing()
    x, y = x0, y0
    line_left = x0
    consumed = 0
    pieces: list[_Piece] = []
    lines: list[tuple[float, float, float]] = []

    def newline(at: int) -> None:
        nonlocal x, y, line_left
        lines.append((line_left, y, x))
        if ends is not None:
            ends.append(at)
        x, y, line_left = left, y + line_h, left

    for index, span in enumerate(spans):
        for chunk in _chunks(span.text):
            if chunk == "\n":
                consumed += 1
                newline(consumed)
                continue
            width = fm.horizontalAdvance(chunk)
            if x + width > right and x > line_left + 0.5:
                newline(consumed)
                chunk_shown = chunk.lstrip()
                consumed += len(chunk) - len(chunk_shown)
                chunk = chunk_shown
                width = fm.horizontalAdvance(chunk)
            if chunk:
                pieces.append(_Piece(x, y, chunk, span.confidence, index))
                x += width
                consumed += len(chunk)
    lines.append((line_left, y, x))
    return pieces, lines


def _chunks(text: str) -> list[str]:
    """Whitespace-led words and single newlines, the units the painter wraps."""
    out: list[str] = []
    current = ""
    for ch in text:
        if ch == "\n":
            if current:
                out.append(current)
            out.append("\n")
            current = ""
        elif ch.isspace() and current.strip():
            out.append(current)
            current = ch
        else:
            current += ch
    if current:
        out.append(current)
    return out
