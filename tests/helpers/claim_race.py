"""A process that claims a document for editing at a given instant, for the one-editor race test
(tests/app/test_one_editor_race.py):

    python -m tests.helpers.claim_race LOCK_FOLDER DOCUMENT GO_FILE DONE_FILE

It prints "ready" once imported, spins until GO_FILE exists (so several such processes claim within
microseconds of each other), claims DOCUMENT as a window does (`EditorClaim.try_claim` + `adopt`), prints
"edit", "asked" or "unlocked", and holds what it got until DONE_FILE exists.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> int:
    folder, document, go, done = (Path(a) for a in sys.argv[1:5])
    from PySide6.QtCore import QCoreApplication

    app = QCoreApplication([])
    from app.documents.one_editor import EditorClaim, Elsewhere

    claim = EditorClaim(folder, lambda: None)
    print("ready", flush=True)
    give_up = time.monotonic() + 60
    while not os.path.exists(go):
        if time.monotonic() > give_up:
            return 1
    got = claim.try_claim(document)
    if isinstance(got, Elsewhere):
        print("asked", flush=True)
    elif got is None:
        print("unlocked", flush=True)
    else:
        claim.adopt(got, document)
        print("edit", flush=True)
    while not done.exists() and time.monotonic() < give_up:
        app.processEvents()
        time.sleep(0.01)
    claim.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
