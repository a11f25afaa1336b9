"""Shared test setup: Qt renders offscreen, so GUI tests run without a display; user folders are temporary."""

import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Settings, recovery files, recent files and logs of windows built by tests never touch the real home folder.
_user_dirs = tempfile.mkdtemp(prefix="letterpress-test-")
for _name in ("CONFIG", "DATA", "LOG"):
    os.environ.setdefault(f"LETTERPRESS_{_name}_DIR", os.path.join(_user_dirs, _name.lower()))
