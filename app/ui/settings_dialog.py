"""The Settings dialog: one editor per declared setting, built from `app.config.settings.SETTINGS`.

Nothing is hard-coded twice: labels, bounds and choices come from the declarations, so a new setting appears
here by being declared. OK/Apply validate everything first and apply all-or-nothing; the reason a value is
refused is shown in the dialog. Each input's objectName is `setting:<key>` (tests and accessibility).
"""

from __future__ import annotations

from typing import Any, ClassVar

from PySide6.QtCore import QKeyCombination, Qt
from PySide6.QtGui import QFocusEvent, QFontDatabase, QGuiApplication, QKeySequence, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QKeySequenceEdit,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.config.commands import canonical
from app.config.model_choice import is_demo_choice
from app.config.settings import BY_KEY, SETTINGS, Setting, Settings, defaults, key_clash, key_problem
from app.ui import wheel_guard

SECTION_TITLES = {
    "model": "Model",
    "denoise": "Denoising",
    "draft": "Drafting",
    "rewrite": "Rewrite presets",
    "appearance": "Appearance",
    "documents": "Documents",
    "privacy": "Privacy",
    "keys": "Assistant keys",
}
SCREEN_MARGIN = 60  # pixels of the screen's height the dialog leaves free (title bar, panels)
SYSTEM_FONT = "System default"
BANNER_LINES = 3  # the problem banner's height in lines (kept while it is empty)


class KeyEdit(QKeySequenceEdit):
    """One key for an assistant command. Tab and Shift+Tab are keys a writer binds (Tab accepts by default),
    so a field clicked into records them like any other key; a field reached by Tab, or one that has just
    recorded its key, lets Tab move on through the dialog as usual."""

    _MOVE_ON: ClassVar[list[QKeyCombination]] = [
        QKeyCombination(Qt.Key.Key_Tab),
        QKeyCombination(Qt.Key.Key_Backtab),
    ]

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMaximumSequenceLength(1)
        self.setClearButtonEnabled(True)
        self.editingFinished.connect(lambda: self.setFinishingKeyCombinations(self._MOVE_ON))

    def focusInEvent(self, e: QFocusEvent) -> None:  # noqa: N802 - Qt virtual
        tabbed = e.reason() in (Qt.FocusReason.TabFocusReason, Qt.FocusReason.BacktabFocusReason)
        self.setFinishingKeyCombinations(self._MOVE_ON if tabbed else [])
        super().focusInEvent(e)


class ProblemBanner(QLabel):
    """The line that says why a value is refused (a key clash, a bad number). Its space is kept while it is
    empty and hidden, and a text longer than its BANNER_LINES lines ends at a word with "…" (all of it in the
    tooltip), so showing it moves nothing in the dialog and never makes it taller than the screen."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        policy = self.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        policy.setHorizontalPolicy(QSizePolicy.Policy.Ignored)
        self.setSizePolicy(policy)
        self.setFixedHeight(self.fontMetrics().lineSpacing() * BANNER_LINES + 4)
        self.hide()

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self._refit()

    def resizeEvent(self, e: QResizeEvent) -> None:  # noqa: N802 - Qt virtual
        super().resizeEvent(e)
        self._refit()

    def showEvent(self, e: QShowEvent) -> None:  # noqa: N802 - Qt virtual
        super().showEvent(e)
        self._refit()

    def _refit(self) -> None:
        from app.ui.status import elide_words

        room = self.contentsRect()
        fm = self.fontMetrics()
        flags = int(Qt.TextFlag.TextWordWrap)

        def fits(text: str) -> bool:
            return fm.boundingRect(0, 0, max(1, room.width()), 10**6, flags, text).height() <= room.height()

        laid_out = self.window().isVisible() and room.width() > 0  # before that its width is not known
        one = " ".join(self._full.split())
        shown = self._full if not laid_out or fits(self._full) else elide_words(one, fits)
        super().setText(shown)
        self.setToolTip(self._full if shown != self._full else "")


class PresetTable(QTableWidget):
    """Editable name -> instruction pairs, with add/remove buttons supplied by the dialog."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 2, parent)
        self.setHorizontalHeaderLabels(["Name", "Instruction"])
        self.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().hide()
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)

    def set_presets(self, presets: dict[str, str]) -> None:
        self.setRowCount(0)
        for name, text in presets.items():
            self.add_row(name, text)

    def add_row(self, name: str = "", text: str = "") -> None:
        row = self.rowCount()
        self.insertRow(row)
        self.setItem(row, 0, QTableWidgetItem(name))
        self.setItem(row, 1, QTableWidgetItem(text))

    def remove_selected(self) -> None:
        for row in sorted({i.row() for i in self.selectedIndexes()}, reverse=True):
            self.removeRow(row)

    def presets(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for row in range(self.rowCount()):
            name, text = self.item(row, 0), self.item(row, 1)
            key = (name.text() if name else "").strip()
            value = (text.text() if text else "").strip()
            if key or value:
                out[key] = value
        return out


class SettingsDialog(QDialog):
    """Edits a `Settings` object; changes apply on OK/Apply (and take effect at once through `changed`)."""

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Settings")
        self.settings = settings
        self.inputs: dict[str, QWidget] = {}
        layout = QVBoxLayout(self)
        self.problems = ProblemBanner(self)
        self.problems.setObjectName("settingsProblems")
        self.problems.setStyleSheet("color: #b3261e;")
        # The banner keeps its room while empty (showing it moves nothing); a quiet line says what the room is
        # for instead of leaving an empty strip above the page.
        self.idle_note = QLabel("Point at a setting for what it does; changes apply with OK or Apply.", self)
        self.idle_note.setObjectName("settingsIdleNote")
        self.idle_note.setWordWrap(True)
        self.idle_note.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.idle_note.setEnabled(False)  # drawn in the muted colour of the theme
        self.idle_note.setMaximumHeight(self.problems.maximumHeight())  # never taller than the banner's room
        slot = QGridLayout()
        slot.addWidget(self.problems, 0, 0)
        slot.addWidget(self.idle_note, 0, 0)
        layout.addLayout(slot)
        # Every section in one scrolling page; the problems line and the buttons stay outside it, always
        # visible, so the dialog fits a small (800-pixel-high) screen.
        self.scroll_area = QScrollArea(self)
        self.scroll_area.setObjectName("settingsScroll")
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        page = QWidget()
        page.setObjectName("settingsPage")
        page_layout = QVBoxLayout(page)
        self.scroll_area.setWidget(page)
        layout.addWidget(self.scroll_area, 1)
        sections: dict[str, QFormLayout] = {}
        for s in SETTINGS:
            if s.type is dict and s.item_type is not str:  # edited elsewhere (the rewrite strength dial)
                continue
            section = s.key.split(".")[0]
            if section not in sections:
                box = QGroupBox(SECTION_TITLES.get(section, section.title()))
                box.setObjectName(f"section:{section}")
                sections[section] = QFormLayout(box)
                page_layout.addWidget(box)
            widget = self._make_input(s)
            widget.setObjectName(f"setting:{s.key}")
            if s.help:
                widget.setToolTip(s.help)
            self.inputs[s.key] = widget
            form = sections[section]
            if s.type is dict:
                form.addRow(self._wrap_presets(widget))
            elif s.type is bool:
                form.addRow(widget)
            else:
                form.addRow(s.label, self._with_browse(s, widget))
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.Apply
            | QDialogButtonBox.StandardButton.RestoreDefaults
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Apply).clicked.connect(self.apply)
        buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults).clicked.connect(self.restore_defaults)
        layout.addWidget(buttons)
        self.buttons = buttons
        wheel_guard.guard(page)  # scrolling this page must not change the value under the pointer
        self.load(settings.values())
        self._show_problems(settings.problems)
        for key, widget in self.inputs.items():
            if isinstance(widget, QKeySequenceEdit):
                widget.keySequenceChanged.connect(lambda _seq, k=key: self._check_keys(k))
        self._fit_screen()

    def _fit_screen(self) -> None:
        """As wide as the page wants, as high as the screen allows (the page scrolls, the buttons stay)."""
        page = self.scroll_area.widget()
        if page is None:  # set in __init__; typed optional by Qt
            return
        width = page.sizeHint().width() + self.scroll_area.verticalScrollBar().sizeHint().width() + 40
        screen = self.screen() or QGuiApplication.primaryScreen()
        room = screen.availableGeometry().height() - SCREEN_MARGIN if screen is not None else 740
        room = min(room, 800 - SCREEN_MARGIN)  # also on a big screen: a dialog, not a wall
        height = min(room, page.sizeHint().height() + self.buttons.sizeHint().height() + 60)
        self.resize(width, height)

    def _check_keys(self, changed: str) -> None:
        """Say at once when a key just chosen is not usable or clashes (OK refuses it with the same words)."""
        widget = self.inputs[changed]
        assert isinstance(widget, QKeySequenceEdit)
        value = _get_widget(BY_KEY[changed], widget)
        why = key_problem(value)
        if why:
            self._show_problems([f"{BY_KEY[changed].label} {why}."])
            return
        clash = key_clash(self.collected(), [changed])
        self._show_problems([clash] if clash else [])

    # -- values <-> widgets ----------------------------------------------------------------------------------

    def load(self, values: dict[str, Any]) -> None:
        for key, widget in self.inputs.items():
            _set_widget(BY_KEY[key], widget, values[key])

    def collected(self) -> dict[str, Any]:
        return {key: _get_widget(BY_KEY[key], w) for key, w in self.inputs.items()}

    def apply(self) -> bool:
        """Validate and apply every value at once; on a refusal nothing changes and the reason is shown."""
        try:
            self.settings.update(self.collected())
        except (ValueError, KeyError) as exc:
            self._show_problems([str(exc).strip("'\"")])
            return False
        failure = getattr(self.settings, "save_failure", "")
        if failure:  # applied for this session, but not on disk: say so, and OK does not close as if saved
            self._show_problems(
                [failure + " Fix the folder and press OK again, or Cancel to keep them for now."]
            )
            return False
        self._show_problems([])
        return True

    def accept(self) -> None:
        if self.apply():
            super().accept()

    def restore_defaults(self) -> None:
        self.load(defaults())

    def _show_problems(self, problems: list[str]) -> None:
        self.problems.set_full_text("\n".join(problems))
        self.problems.setVisible(bool(problems))
        self.idle_note.setVisible(not problems)

    # -- widgets ---------------------------------------------------------------------------------------------

    def _model_steps(self) -> int:
        """The steps the configured model declares (the demo's when none is configured)."""
        from app.config.model_choice import folder_for
        from engine.declared import default_steps
        from engine.resources import demo_model_dir

        folder = folder_for(self.settings.typed.model.folder) if self.settings is not None else ""
        return default_steps(folder or demo_model_dir())

    def _make_input(self, s: Setting) -> QWidget:
        if s.kind == "key":
            return KeyEdit()
        if s.type is bool:
            return QCheckBox(s.label)
        if s.type is int:
            w = QSpinBox()
            w.setRange(
                int(s.minimum if s.minimum is not None else -(10**9)),
                int(s.maximum if s.maximum is not None else 10**9),
            )
            if s.key == "denoise.steps":  # 0 is "the model's own": name the number it runs
                w.setSpecialValueText(f"Model's own ({self._model_steps()})")
            return w
        if s.type is float:
            d = QDoubleSpinBox()
            d.setDecimals(3)
            d.setSingleStep(0.05)
            d.setRange(
                s.minimum if s.minimum is not None else -1e9, s.maximum if s.maximum is not None else 1e9
            )
            return d
        if s.type is dict:
            return PresetTable()
        if s.choices:
            c = QComboBox()
            c.addItems(list(s.choices))
            return c
        if s.key == "appearance.font_family":
            f = QComboBox()
            f.addItem(SYSTEM_FONT)
            f.addItems(QFontDatabase.families())
            return f
        return QLineEdit()

    def _with_browse(self, s: Setting, widget: QWidget) -> QWidget:
        if s.key != "model.folder":
            return widget
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(widget, 1)
        browse = QPushButton("Browse…")
        assert isinstance(widget, QLineEdit)
        browse.clicked.connect(lambda: self._browse_folder(widget))
        lay.addWidget(browse)
        return row

    def _browse_folder(self, line: QLineEdit) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Model folder", line.text())
        if chosen:
            line.setText(chosen)

    def _wrap_presets(self, table: QWidget) -> QWidget:
        assert isinstance(table, PresetTable)
        box = QWidget()
        lay = QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(table)
        row = QHBoxLayout()
        add, remove = QPushButton("Add preset"), QPushButton("Remove")
        add.clicked.connect(lambda: table.add_row())
        remove.clicked.connect(table.remove_selected)
        row.addWidget(add)
        row.addWidget(remove)
        row.addStretch(1)
        lay.addLayout(row)
        return box


def _set_widget(s: Setting, w: QWidget, value: Any) -> None:
    if isinstance(w, QKeySequenceEdit):
        w.setKeySequence(QKeySequence.fromString(str(value), QKeySequence.SequenceFormat.PortableText))
    elif isinstance(w, QCheckBox):
        w.setChecked(bool(value))
    elif isinstance(w, (QSpinBox, QDoubleSpinBox)):
        w.setValue(value)
    elif isinstance(w, PresetTable):
        w.set_presets(value)
    elif isinstance(w, QComboBox):
        text = value or SYSTEM_FONT
        if w.findText(text) < 0:
            w.addItem(text)
        w.setCurrentText(text)
    elif isinstance(w, QLineEdit) and s.key == "model.folder":
        # The stored marker ("builtin:demo") is the app's spelling, not a folder a writer can read: the field
        # is empty and says what it means; saving keeps the marker (`_get_widget`).
        demo = is_demo_choice(value) or not value
        w.setText("" if demo else str(value))
        w.setPlaceholderText("The built-in demo model")
        w.setProperty("storedDemo", str(value) if is_demo_choice(value) else "")
    elif isinstance(w, QLineEdit):
        w.setText(str(value))


def _get_widget(s: Setting, w: QWidget) -> Any:
    if isinstance(w, QKeySequenceEdit):
        text = w.keySequence().toString(QKeySequence.SequenceFormat.PortableText)
        return canonical(text)
    if isinstance(w, QCheckBox):
        return w.isChecked()
    if isinstance(w, (QSpinBox, QDoubleSpinBox)):
        return w.value()
    if isinstance(w, PresetTable):
        return w.presets()
    if isinstance(w, QComboBox):
        text = w.currentText()
        return "" if s.key == "appearance.font_family" and text == SYSTEM_FONT else text
    assert isinstance(w, QLineEdit)
    text = w.text().strip()
    if s.key == "model.folder" and not text:
        return str(w.property("storedDemo") or "")  # the demo, spelled as it was stored
    return text
