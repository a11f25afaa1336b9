"""The model the writer chose, as the settings file stores it: a folder, or the marker for the built-in demo.

Why a marker: the demo ships inside the app's install folder, which moves between versions (a new .deb, a new
PyInstaller bundle, another checkout). A stored absolute path to it breaks at the next upgrade; the marker
`builtin:demo` always means "the demo this version ships". A path stored by an older version that points at a
demo folder (`…/resources/models/letterpress-demo`) reads as the marker too, wherever that folder went.
"""

from __future__ import annotations

from pathlib import Path

from engine.resources import DEMO_MODEL_NAME, demo_model_dir

DEMO_MARKER = "builtin:demo"


def is_demo_choice(value: str | Path | None) -> bool:
    """Whether a stored `model.folder` value (or a loaded folder) means the built-in demo."""
    if not value:
        return False
    text = str(value).strip()
    if text == DEMO_MARKER:
        return True
    path = Path(text)
    if path.parts[-3:] == ("resources", "models", DEMO_MODEL_NAME):  # any version's shipped demo
        return True
    try:
        return path.resolve() == demo_model_dir().resolve()
    except OSError:
        return False


def folder_for(value: str | Path | None) -> str:
    """The folder to load for a stored value ("" stays ""): the marker becomes this version's demo folder."""
    if not value:
        return ""
    return str(demo_model_dir()) if is_demo_choice(value) else str(value).strip()


def stored_value(folder: str | Path | None) -> str:
    """What to store for a loaded folder: the marker for the demo, else the folder as given."""
    if not folder:
        return ""
    return DEMO_MARKER if is_demo_choice(folder) else str(folder)
