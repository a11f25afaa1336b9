"""PyInstaller runtime hook: the bundled app never talks to a model hub, whatever the user's environment says.

Runs before any app code. The loader already reads local folders only (`local_files_only=True`); these
variables make every Hugging Face library refuse network access as well, so a missing file fails fast with
a clear error instead of trying a download.
"""

import os

for _name in (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    "DO_NOT_TRACK",
):
    os.environ[_name] = "1"
os.environ.pop("HF_ENDPOINT", None)
