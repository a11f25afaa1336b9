"""Issue 32, case 12: several processes opening one document at the same instant get exactly one editor;
the others are asked. Three processes claim within microseconds of each other (they spin on a go file), 20
times, with the machine loaded by two busy processes, the way a loaded machine let two of them edit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 3
ROUNDS = 20


def _busy() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], cwd=ROOT)


def _one_round(folder: Path) -> list[str]:
    folder.mkdir()
    document = folder / "shared.md"
    document.write_text("one text, one editor\n", encoding="utf-8")
    go, done = folder / "go", folder / "done"
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.claim_race",
                str(folder / "locks"),
                str(document),
                str(go),
                str(done),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        go.write_text("", encoding="utf-8")  # all of them claim now
        said = [child.stdout.readline().strip() for child in children if child.stdout is not None]
    finally:
        done.write_text("", encoding="utf-8")
        for child in children:
            child.wait(timeout=60)
            if child.stdout is not None:
                child.stdout.close()
    return said


def test_processes_claiming_one_file_at_the_same_instant_get_one_editor(tmp_path):
    load = [_busy(), _busy()]
    try:
        outcomes = [_one_round(tmp_path / f"round{r}") for r in range(ROUNDS)]
    finally:
        for busy in load:
            busy.kill()
            busy.wait()
    wrong = [said for said in outcomes if sorted(said) != ["asked"] * (PROCESSES - 1) + ["edit"]]
    assert wrong == [], f"{len(wrong)} of {ROUNDS} rounds did not give exactly one editor: {wrong}"
