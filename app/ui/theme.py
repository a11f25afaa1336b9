"""Light and dark themes that follow the system colour scheme (or the `appearance.theme` setting).

Fusion with an explicit palette looks the same on every platform and makes the ghost colours predictable; the
small stylesheet in `resources/styles/` only adjusts the editor's spacing and the status bar.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QWidget

from app.config.sections import Theme
from app.config.settings import Settings
from engine.resources import resources_dir

STYLES = resources_dir() / "styles"
log = logging.getLogger(__name__)


def system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def palette(dark: bool) -> QPalette:
    pal = QPalette()
    if dark:
        colors = {
            QPalette.ColorRole.Window: "#202124",
            QPalette.ColorRole.WindowText: "#e8eaed",
            QPalette.ColorRole.Base: "#1b1c1e",
            QPalette.ColorRole.AlternateBase: "#26272a",
            QPalette.ColorRole.Text: "#e8e6e3",
            QPalette.ColorRole.Button: "#2b2c2f",
            QPalette.ColorRole.ButtonText: "#e8eaed",
            QPalette.ColorRole.Highlight: "#5b8def",
            QPalette.ColorRole.HighlightedText: "#ffffff",
            QPalette.ColorRole.ToolTipBase: "#2b2c2f",
            QPalette.ColorRole.ToolTipText: "#e8eaed",
            QPalette.ColorRole.PlaceholderText: "#8a8d91",
            QPalette.ColorRole.Link: "#8ab4f8",
        }
    else:
        colors = {
            QPalette.ColorRole.Window: "#f3f3f1",
            QPalette.ColorRole.WindowText: "#1f1f1f",
            QPalette.ColorRole.Base: "#fdfdfb",
            QPalette.ColorRole.AlternateBase: "#f0f0ee",
            QPalette.ColorRole.Text: "#1c1c1c",
            QPalette.ColorRole.Button: "#ececea",
            QPalette.ColorRole.ButtonText: "#1f1f1f",
            QPalette.ColorRole.Highlight: "#2f6fde",
            QPalette.ColorRole.HighlightedText: "#ffffff",
            QPalette.ColorRole.ToolTipBase: "#ffffe8",
            QPalette.ColorRole.ToolTipText: "#1f1f1f",
            QPalette.ColorRole.PlaceholderText: "#8a8a8a",
            QPalette.ColorRole.Link: "#1a57c2",
        }
    for role, value in colors.items():
        pal.setColor(role, QColor(value))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        muted = QColor(pal.color(role))
        muted.setAlpha(110)
        pal.setColor(QPalette.ColorGroup.Disabled, role, muted)
    return pal


def apply_theme(app: QApplication, theme: Theme = "system") -> bool:
    """Apply the theme; returns True when it is dark. With "system", it re-applies when the system changes."""
    dark = system_is_dark() if theme == "system" else theme == "dark"
    app.setStyle("Fusion")
    app.setPalette(palette(dark))
    sheet = STYLES / ("dark.qss" if dark else "light.qss")
    base = STYLES / "base.qss"
    sheets = "\n".join(p.read_text(encoding="utf-8") for p in (base, sheet) if p.is_file())
    app.setStyleSheet(sheets.replace("@STYLES@", STYLES.as_posix()))  # images next to the sheets
    app.setProperty("letterpressTheme", theme)
    if not app.property("letterpressThemeHooked"):
        app.setProperty("letterpressThemeHooked", True)
        QGuiApplication.styleHints().colorSchemeChanged.connect(
            lambda _scheme: app.property("letterpressTheme") == "system" and apply_theme(app, "system")
        )
    return dark


class ThemeActions:
    """View ▸ Theme: one checkable action per theme (`actionTheme_system`, `_light`, `_dark`), the one in use
    checked; choosing one applies it now and remembers it in the settings, when there are settings."""

    def __init__(
        self,
        parent: QWidget,
        register: Callable[[str, Callable[[], object]], QAction],
        settings: Settings | None,
        after: Callable[[], None] = lambda: None,
    ) -> None:
        """`register(command_id, slot)` makes one of the window's actions; `after()` runs once a theme is
        applied (the window repaints its suggestion in the new colours)."""
        self.settings = settings
        self._after = after
        group = QActionGroup(parent)
        self.actions: list[QAction] = []
        current = settings.typed.appearance.theme if settings is not None else "system"
        for theme in ("system", "light", "dark"):
            act = register(f"actionTheme_{theme}", partial(self.set_theme, theme))
            act.setChecked(theme == current)
            group.addAction(act)
            self.actions.append(act)

    def set_theme(self, theme: str) -> None:
        """Switch the colour theme now (and remember it, when there are settings)."""
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)  # type: ignore[arg-type]
        if self.settings is not None:
            try:
                self.settings.set("appearance.theme", theme)
            except (ValueError, KeyError):
                log.exception("theme setting refused")
        self.check(theme)
        self._after()

    def check(self, theme: object) -> None:
        """Check the action of `theme` (the setting changed elsewhere, in Settings for instance)."""
        for act in self.actions:
            act.setChecked(act.objectName() == f"actionTheme_{theme}")
