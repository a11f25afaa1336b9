"""Where the shipped resources (stylesheets, icons, presets, the demo model) live: the one place that knows.

The checked-out tree keeps them in `resources/` next to `engine/` and `app/`; a PyInstaller bundle unpacks
them under `sys._MEIPASS`. The engine needs the demo model path too and must never import the app, so the
answer lives here and the app asks the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEMO_MODEL_NAME = "letterpress-demo"


def install_root() -> Path:
    """The folder that holds `resources/` (and `VERSION` in a bundle): PyInstaller's folder when frozen, else
    the repository checkout."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    return Path(frozen_root) if frozen_root else Path(__file__).resolve().parents[1]


def resources_dir() -> Path:
    """The `resources/` folder shipped with the app."""
    return install_root() / "resources"


def demo_model_dir() -> Path:
    """The small demo model shipped with the app (the default when no model is configured)."""
    return resources_dir() / "models" / DEMO_MODEL_NAME
