"""The command line on narrow, closed and vanishing outputs, as real child processes (issue 22).

The generated text must never be lost to an encoding error after all the work is done (a cp1252 pipe on
Windows),
a reader that stops early (`| head -c 1`) is not an error to report, a closed stdout (`>&-`) is refused before
any work, and a pin file with a number no character position can be (1e400) is a sentence, not a crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# The tiny checkpoint (seed 0, canvas 32) draws U+036C for this prompt and seed: a character cp1252 cannot
# hold.
PROMPT = "Once upon a time\n"
SEED = "2"


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **extra}


def _generate_args(tiny_dir: Path, before: Path, *more: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "engine",
        "generate",
        "--model",
        str(tiny_dir),
        "--task",
        "draft",
        "--steps",
        "3",
        "--max-new-tokens",
        "32",
        "--seed",
        SEED,
        "--device",
        "cpu",
        "--before-file",
        str(before),
        *more,
    ]


@pytest.fixture()
def before(tmp_path: Path) -> Path:
    path = tmp_path / "before.txt"
    path.write_text(PROMPT, encoding="utf-8")
    return path


def test_a_cp1252_stdout_keeps_the_generated_text(tiny_dir: Path, before: Path) -> None:
    wide = subprocess.run(
        _generate_args(tiny_dir, before, "--jsonl"),
        check=False,
        capture_output=True,
        env=_env(PYTHONIOENCODING="utf-8"),
        cwd=ROOT,
        timeout=300,
    )
    assert wide.returncode == 0, wide.stderr
    text = json.loads(wide.stdout.decode("utf-8").splitlines()[-1])["candidates"][0]["text"]
    with pytest.raises(UnicodeEncodeError):
        text.encode("cp1252")  # the case needs a character the narrow output cannot hold
    narrow = subprocess.run(
        _generate_args(tiny_dir, before, "--jsonl"),
        check=False,
        capture_output=True,
        env=_env(PYTHONIOENCODING="cp1252"),
        cwd=ROOT,
        timeout=300,
    )
    assert narrow.returncode == 0, narrow.stderr
    assert b"unexpected" not in narrow.stderr
    done = json.loads(narrow.stdout.decode("cp1252").splitlines()[-1])
    assert done["candidates"][0]["text"] == text  # exact: the escapes are JSON's own
    plain = subprocess.run(
        _generate_args(tiny_dir, before),
        check=False,
        capture_output=True,
        env=_env(PYTHONIOENCODING="cp1252"),
        cwd=ROOT,
        timeout=300,
    )
    assert plain.returncode == 0, plain.stderr
    shown = plain.stdout.decode("cp1252").strip()
    assert shown.encode("ascii", "backslashreplace").decode("unicode_escape") == text.strip()


def test_a_reader_that_stops_early_is_not_an_error(tiny_dir: Path, before: Path) -> None:
    args = " ".join(f"'{a}'" for a in _generate_args(tiny_dir, before, "--jsonl"))
    run = subprocess.run(
        ["bash", "-c", f"{args} | head -c 1; exit ${{PIPESTATUS[0]}}"],
        check=False,
        capture_output=True,
        env=_env(),
        cwd=ROOT,
        timeout=300,
    )
    assert run.stdout == b"{"
    assert (
        b"unexpected" not in run.stderr and b"Traceback" not in run.stderr and b"Exception" not in run.stderr
    )
    assert run.returncode in (0, 141)


def test_a_closed_stdout_is_refused_before_any_work(tiny_dir: Path, before: Path) -> None:
    args = " ".join(f"'{a}'" for a in _generate_args(tiny_dir, before))
    run = subprocess.run(
        ["bash", "-c", f"{args} >&-"], check=False, capture_output=True, env=_env(), cwd=ROOT, timeout=300
    )
    assert run.returncode == 2
    assert b"standard output is closed" in run.stderr
    assert b"unexpected" not in run.stderr and b"starting the engine" not in run.stderr


@pytest.mark.parametrize(
    "pins", ["[[0, 1e400]]", "0 1e400\n", "[[0, NaN]]", "[[0, 2.5]]", "[" * 5000 + "]" * 5000]
)
def test_a_pin_file_with_an_impossible_number_is_a_sentence(
    tmp_path: Path, tiny_dir: Path, pins: str
) -> None:
    init = tmp_path / "init.txt"
    init.write_text("hello there", encoding="utf-8")
    pin_file = tmp_path / "pins.txt"
    pin_file.write_text(pins, encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "generate",
            "--model",
            str(tiny_dir),
            "--init-file",
            str(init),
            "--pin-file",
            str(pin_file),
        ],
        check=False,
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "pin file" in run.stderr and "unexpected" not in run.stderr


def test_an_error_naming_a_file_survives_a_narrow_stderr(tmp_path: Path, tiny_dir: Path) -> None:
    missing = tmp_path / "r\u0101ksts.txt"  # a name cp1252 cannot hold
    run = subprocess.run(
        [sys.executable, "-m", "engine", "generate", "--model", str(tiny_dir), "--before-file", str(missing)],
        check=False,
        capture_output=True,
        env=_env(PYTHONIOENCODING="cp1252"),
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert b"does not exist" in run.stderr and b"Traceback" not in run.stderr
