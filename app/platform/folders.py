"""The user's folders: settings, data (recovery, recent files), logs; each overridable by an environment
variable.

Below the settings so the log setup (privacy) and the locks can find their folders without importing the
settings; `app.config.settings` re-exports these names for its existing users.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "letterpress"


def config_dir() -> Path:
    """Where settings.toml lives (`LETTERPRESS_CONFIG_DIR` overrides the platform default)."""
    return _folder("LETTERPRESS_CONFIG_DIR", "user_config_dir")


def data_dir() -> Path:
    """Where recovery files and the recent-files list live (`LETTERPRESS_DATA_DIR` overrides)."""
    return _folder("LETTERPRESS_DATA_DIR", "user_data_dir")


def log_dir() -> Path:
    """Where the rotating log files live (`LETTERPRESS_LOG_DIR` overrides)."""
    return _folder("LETTERPRESS_LOG_DIR", "user_log_dir")


def documents_dir() -> Path:
    """Where a new document is saved first: the user's documents folder (`LETTERPRESS_DOCUMENTS_DIR`
    overrides), or the home folder when the system has none."""
    override = os.environ.get("LETTERPRESS_DOCUMENTS_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    folder = Path(platformdirs.user_documents_dir())
    return folder if folder.is_dir() else Path.home()


def recovery_dir() -> Path:
    """Autosaved copies of unsaved documents, under the data folder."""
    return data_dir() / "recovery"


def _folder(env: str, platform_fn: str) -> Path:
    override = os.environ.get(env)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(getattr(platformdirs, platform_fn)(APP_NAME, appauthor=False))
