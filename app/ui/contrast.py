"""WCAG contrast between colours, and the faintest ghost ink that stays readable on a given background.

Ghost words are shaded by the model's confidence (faint = unsure). Shading by a fixed alpha made the faintest
words unreadable in the dark theme (about 1.6:1); the floor is computed from the palette instead, so every
theme keeps the faintest word at `MIN_CONTRAST` or better against what it is painted on.
"""

from __future__ import annotations

from PySide6.QtGui import QColor

MIN_CONTRAST = 3.0  # WCAG's minimum for large or incidental text; a settling word is read, not studied


def _channel(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(color: QColor) -> float:
    """WCAG relative luminance of an opaque colour (0 black .. 1 white)."""
    return (
        0.2126 * _channel(color.redF()) + 0.7152 * _channel(color.greenF()) + 0.0722 * _channel(color.blueF())
    )


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio (1..21) of two opaque colours."""
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def over(ink: QColor, alpha: float, background: QColor) -> QColor:
    """`ink` at `alpha` painted over an opaque `background`."""
    a = max(0.0, min(1.0, alpha))
    return QColor.fromRgbF(
        ink.redF() * a + background.redF() * (1 - a),
        ink.greenF() * a + background.greenF() * (1 - a),
        ink.blueF() * a + background.blueF() * (1 - a),
    )


def min_alpha(ink: QColor, background: QColor, ratio: float = MIN_CONTRAST) -> float:
    """The smallest alpha at which `ink` over `background` reaches `ratio` (1.0 when even opaque ink
    cannot)."""
    if contrast(ink, background) < ratio:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if contrast(over(ink, mid, background), background) >= ratio:
            hi = mid
        else:
            lo = mid
    return hi


__all__ = ["MIN_CONTRAST", "contrast", "luminance", "min_alpha", "over"]
