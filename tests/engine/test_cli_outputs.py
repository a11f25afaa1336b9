"""The command line on narrow, closed and vanishing outputs, as real child processes (issue 22).

The generated text must never be lost to an encoding error after all the work is done (a cp1252 pipe on
Windows),
a reader that stops early (`| head -c 1`) is not an error to report, a closed stdout (`>&-`) is refused before
any work, and a pin file with a number no character position can be (1e400) is a sentence, not a crash.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.engine_cli import ROOT, engine_command, engine_env, run_engine

pytestmark = pytest.mark.slow

# The tiny checkpoint (seed 0, canvas 32) draws U+036C for this prompt and seed: a character cp1252 cannot
# hold.
PROMPT = "Once upon a time\n"
SEED = "2"


def _generate_args(tiny_dir: Path, before: Path, *more: str) -> list[str]:
    return [
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


def _bash(script: str) -> subprocess.CompletedProcess[bytes]:
    """`script` run by bash, for the shell's own plumbing (a pipe that closes early, a closed stdout)."""
    return subprocess.run(
        ["bash", "-c", script], check=False, capture_output=True, env=engine_env(), cwd=ROOT, timeout=300
    )


@pytest.fixture()
def before(tmp_path: Path) -> Path:
    path = tmp_path / "before.txt"
    path.write_text(PROMPT, encoding="utf-8")
    return path


def test_a_cp1252_stdout_keeps_the_generated_text(tiny_dir: Path, before: Path) -> None:
    wide = run_engine(
        *_generate_args(tiny_dir, before, "--jsonl"), env=engine_env(PYTHONIOENCODING="utf-8"), text=False
    )
    assert wide.returncode == 0, wide.stderr
    text = json.loads(wide.stdout.decode("utf-8").splitlines()[-1])["candidates"][0]["text"]
    with pytest.raises(UnicodeEncodeError):
        text.encode("cp1252")  # the case needs a character the narrow output cannot hold
    narrow = run_engine(
        *_generate_args(tiny_dir, before, "--jsonl"), env=engine_env(PYTHONIOENCODING="cp1252"), text=False
    )
    assert narrow.returncode == 0, narrow.stderr
    assert b"unexpected" not in narrow.stderr
    done = json.loads(narrow.stdout.decode("cp1252").splitlines()[-1])
    assert done["candidates"][0]["text"] == text  # exact: the escapes are JSON's own
    plain = run_engine(
        *_generate_args(tiny_dir, before), env=engine_env(PYTHONIOENCODING="cp1252"), text=False
    )
    assert plain.returncode == 0, plain.stderr
    shown = plain.stdout.decode("cp1252").strip()
    assert shown.encode("ascii", "backslashreplace").decode("unicode_escape") == text.strip()


def test_a_reader_that_stops_early_is_not_an_error(tiny_dir: Path, before: Path) -> None:
    args = " ".join(f"'{a}'" for a in engine_command(*_generate_args(tiny_dir, before, "--jsonl")))
    run = _bash(f"{args} | head -c 1; exit ${{PIPESTATUS[0]}}")
    assert run.stdout == b"{"
    assert (
        b"unexpected" not in run.stderr and b"Traceback" not in run.stderr and b"Exception" not in run.stderr
    )
    assert run.returncode in (0, 141)


def test_a_closed_stdout_is_refused_before_any_work(tiny_dir: Path, before: Path) -> None:
    args = " ".join(f"'{a}'" for a in engine_command(*_generate_args(tiny_dir, before)))
    run = _bash(f"{args} >&-")
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
    run = run_engine(
        "generate",
        "--model",
        str(tiny_dir),
        "--init-file",
        str(init),
        "--pin-file",
        str(pin_file),
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "pin file" in run.stderr and "unexpected" not in run.stderr


def test_an_error_naming_a_file_survives_a_narrow_stderr(tmp_path: Path, tiny_dir: Path) -> None:
    missing = tmp_path / "r\u0101ksts.txt"  # a name cp1252 cannot hold
    run = run_engine(
        "generate",
        "--model",
        str(tiny_dir),
        "--before-file",
        str(missing),
        env=engine_env(PYTHONIOENCODING="cp1252"),
        timeout=120,
        text=False,
    )
    assert run.returncode == 2, run.stderr
    assert b"does not exist" in run.stderr and b"Traceback" not in run.stderr
