"""Saves by a writer who is not the file's owner, in a real window run as a real second user.

A 0666 file of another user in a sticky (1777) folder, and a group member's save of a 0664 file: a rename
would give the file to the writer (or is refused by the sticky bit), so both must be rewritten in place, with
owner, group and mode kept. The tests run as root here, so the child process builds the window, then drops to
throwaway uids/gids (64000+) with setgroups/setgid/setuid before it opens, types and saves.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix", reason="POSIX owners and modes"),
    pytest.mark.skipif(
        os.name == "posix" and os.geteuid() != 0,
        reason="a second user can only be made by root (setuid to a throwaway uid)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
WRITER, OWNER, SHARED_GROUP = 64000, 64001, 64100

# The window is built while still root (the interpreter and Qt live under /root, which the throwaway user may
# not read), then the process becomes the writer for good: the open, the typing and the save are the writer's.
CHILD = r"""
import os, sys
from PySide6.QtTest import QTest
from app import create_window
import app.documents.controller, app.platform.atomic, app.documents.recovery  # everything a save touches
w = create_window(["--fake-engine"])
docs = w.services.documents
errors = []
docs.show_error = lambda title, text: errors.append(text)
docs.ask_unsaved = lambda name: "discard"
docs.choose_save_path = lambda suggested: ""
w.services.recovery.ask = lambda d, i, n: "later"
uid, gid, groups = int(sys.argv[2]), int(sys.argv[3]), [int(g) for g in sys.argv[4].split(",") if g]
for name in ("LETTERPRESS_CONFIG_DIR", "LETTERPRESS_DATA_DIR", "LETTERPRESS_LOG_DIR"):
    for folder, _subs, files in os.walk(os.environ[name]):  # the session's own folders become the writer's
        for p in [folder, *(os.path.join(folder, f) for f in files)]:
            os.chown(p, uid, gid)
os.setgroups(groups)
os.setgid(gid)
os.setuid(uid)
print("USER", os.getuid(), os.geteuid(), os.getgid(), sorted(os.getgroups()), flush=True)
if not docs.open(sys.argv[1]):
    print(f"NOT OPENED {errors}", flush=True)
    sys.exit(1)
w.show()
docs.editor.moveCursor(docs.editor.textCursor().MoveOperation.End)
QTest.keyClicks(docs.editor, " and a line by the writer")
print("SAVED" if docs.save() else f"NOT SAVED {errors}", flush=True)
docs.editor.document().setModified(False)
"""


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder every throwaway user can reach (pytest's tmp_path sits under a 0700 folder of root's)."""
    base = Path(tempfile.mkdtemp(prefix="lp-shared-saves-"))
    os.chmod(base, 0o755)
    for name in ("config", "data", "log"):
        (base / name).mkdir()
        os.chmod(base / name, 0o777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _save_as(base: Path, doc: Path, uid: int, gid: int, groups: list[int]) -> str:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT), HOME=str(base))
    for name in ("CONFIG", "DATA", "LOG"):
        env[f"LETTERPRESS_{name}_DIR"] = str(base / name.lower())
    env.pop("XDG_RUNTIME_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(doc), str(uid), str(gid), ",".join(map(str, groups))],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert f"USER {uid} {uid} {gid}" in out.stdout, out.stdout + out.stderr[-3000:]
    assert "Permission denied" not in out.stderr, out.stderr[-3000:]  # the session's own files are its own
    return out.stdout + out.stderr[-3000:]


def _owner_can_still_write(doc: Path, uid: int, gid: int) -> bool:
    """The file's owner, as a real process of that user, opens it for writing."""
    code = (
        "import os, sys; os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[3]));"
        "open(sys.argv[1], 'ab').close(); print('WRITABLE')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(doc), str(gid), str(uid)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return "WRITABLE" in out.stdout


def test_another_users_0666_file_in_a_sticky_folder_is_saved_in_place(shared_folder):
    sticky = shared_folder / "tmp-like"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    doc = sticky / "notes.md"
    doc.write_text("Notes by the owner.", encoding="utf-8")
    os.chown(doc, OWNER, OWNER)
    os.chmod(doc, 0o666)
    inode = doc.stat().st_ino

    out = _save_as(shared_folder, doc, WRITER, WRITER, [])

    assert "SAVED" in out and "NOT SAVED" not in out, out
    assert doc.read_text(encoding="utf-8") == "Notes by the owner. and a line by the writer"
    st = doc.stat()
    assert (st.st_ino, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (inode, OWNER, OWNER, 0o666)
    assert [p.name for p in sticky.iterdir()] == ["notes.md"]  # no backup or temporary file left behind


def test_a_group_members_save_keeps_owner_and_group_so_the_owner_can_still_write(shared_folder):
    folder = shared_folder / "team"
    folder.mkdir()
    os.chown(folder, OWNER, SHARED_GROUP)
    os.chmod(folder, 0o2775)  # a shared project folder: the group may create files in it
    doc = folder / "report.md"
    doc.write_text("Report draft.", encoding="utf-8")
    os.chown(doc, OWNER, SHARED_GROUP)
    os.chmod(doc, 0o664)

    out = _save_as(shared_folder, doc, WRITER, WRITER, [SHARED_GROUP])

    assert "SAVED" in out and "NOT SAVED" not in out, out
    assert doc.read_text(encoding="utf-8") == "Report draft. and a line by the writer"
    st = doc.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OWNER, SHARED_GROUP, 0o664)
    assert _owner_can_still_write(doc, OWNER, OWNER)
    assert [p.name for p in folder.iterdir()] == ["report.md"]
