"""The File menu's questions, as plain functions of their parent window (the controller holds them as
replaceable attributes, so tests answer them instead of clicking modal boxes)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from app.documents.external_change import CompareDialog, Resolution

FILE_FILTER = "Text and Markdown (*.txt *.md *.markdown *.text);;All files (*)"
Choice = Literal["save", "discard", "cancel"]
OpenChoice = Literal["switch", "read-only", "cancel"]


def ask_unsaved(parent: QWidget, name: str) -> Choice:
    """Save, discard or cancel before unsaved work is closed."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Unsaved changes")
    box.setText(f"Save the changes to “{name}” before closing?")
    box.setInformativeText("If you don't save, your changes since the last save will be lost.")
    box.setStandardButtons(
        QMessageBox.StandardButton.Save
        | QMessageBox.StandardButton.Discard
        | QMessageBox.StandardButton.Cancel
    )
    box.setDefaultButton(QMessageBox.StandardButton.Save)
    answer = box.exec()
    if answer == QMessageBox.StandardButton.Save:
        return "save"
    if answer == QMessageBox.StandardButton.Discard:
        return "discard"
    return "cancel"


def ask_external_change(parent: QWidget, name: str, saving: bool) -> Resolution:
    """Another program changed the file: reload, keep mine (and save it), compare, or cancel."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Changed on disk")
    box.setText(f"“{name}” was changed on disk by another program since you opened or saved it.")
    box.setInformativeText(
        "Reload it (your unsaved edits are kept as a recovery copy first), keep your "
        "version" + (" and save it" if saving else "") + ", or compare the two."
    )
    reload_button = box.addButton("Reload", QMessageBox.ButtonRole.DestructiveRole)
    keep = box.addButton("Save mine anyway" if saving else "Keep mine", QMessageBox.ButtonRole.AcceptRole)
    compare_button = box.addButton("Compare…", QMessageBox.ButtonRole.ActionRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(compare_button)
    box.exec()
    clicked = box.clickedButton()
    if clicked is reload_button:
        return "reload"
    if clicked is keep:
        return "keep"
    return "compare" if clicked is compare_button else "cancel"


def show_compare(parent: QWidget, name: str, mine: str, theirs: str) -> Resolution:
    dialog = CompareDialog(parent, name, mine, theirs)
    dialog.exec()
    return dialog.choice


def ask_already_open(parent: QWidget, name: str, where: str) -> OpenChoice:
    """The file is open for editing in another window: switch to it, open a read-only view, or cancel."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Information)
    box.setWindowTitle("Document already open")
    box.setText(f"“{name}” is already open in {where}.")
    box.setInformativeText(
        "Editing it in two places would let one save silently replace the other's words. "
        "Switch to that window, or open a read-only view here."
    )
    switch = box.addButton("Switch to it", QMessageBox.ButtonRole.AcceptRole)
    read_only = box.addButton("Open read-only", QMessageBox.ButtonRole.ActionRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(switch)
    box.exec()
    clicked = box.clickedButton()
    return "switch" if clicked is switch else "read-only" if clicked is read_only else "cancel"


def choose_open_path(parent: QWidget, start: Path) -> str:
    return QFileDialog.getOpenFileName(parent, "Open document", str(start), FILE_FILTER)[0]


def choose_save_path(parent: QWidget, suggested: str) -> str:
    # The dialog's own overwrite check would look at the name before ".md" is added; `save_as` asks about
    # the final name instead, so the dialog must not ask a second, different question.
    dialog = QFileDialog(parent, "Save document as", suggested, FILE_FILTER)
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setDefaultSuffix("md")
    dialog.setOption(QFileDialog.Option.DontConfirmOverwrite, True)
    if dialog.exec() != QFileDialog.DialogCode.Accepted or not dialog.selectedFiles():
        return ""
    return dialog.selectedFiles()[0]


def ask_replace(parent: QWidget, target: Path) -> bool:
    answer = QMessageBox.question(
        parent,
        "Replace file?",
        f"“{target.name}” already exists in {target.parent}.\nDo you want to replace it with this document?",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel,
    )
    return answer == QMessageBox.StandardButton.Yes
