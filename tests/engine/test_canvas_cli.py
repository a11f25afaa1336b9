"""`python -m engine generate` with a warm canvas: --strength, --init-file/--pin-file/--noise."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers.engine_cli import run_engine

ROOT = Path(__file__).resolve().parents[2]
TEXT = "the people went out into the field and gathered the grain before night."


def _engine(*args: str) -> subprocess.CompletedProcess:
    return run_engine(*args, timeout=300)


def _done(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_init_file_and_pin_file_keep_the_pinned_characters(tiny_dir: Path, tmp_path: Path) -> None:
    init = tmp_path / "canvas.txt"
    init.write_text(TEXT, encoding="utf-8")
    pins = tmp_path / "pins.txt"
    pins.write_text("# people, field\n4 10\n29-34\n", encoding="utf-8")
    before = tmp_path / "before.txt"
    before.write_text("In the morning", encoding="utf-8")
    done = _done(
        _engine(
            "generate",
            "--model",
            str(tiny_dir),
            "--task",
            "draft",
            "--before-file",
            str(before),
            "--init-file",
            str(init),
            "--pin-file",
            str(pins),
            "--steps",
            "6",
            "--seed",
            "2",
            "--candidates",
            "2",
            "--max-new-tokens",
            "32",
            "--jsonl",
        )
    )
    for cand in done["candidates"]:
        first = cand["text"].find("people")
        assert first >= 0 and cand["text"].find("field", first) > first, cand["text"]


def test_strength_runs_a_light_rewrite_and_is_validated(tiny_dir: Path, tmp_path: Path) -> None:
    sel = tmp_path / "sel.txt"
    sel.write_text(TEXT, encoding="utf-8")
    run = _engine(
        "generate",
        "--model",
        str(tiny_dir),
        "--task",
        "rewrite",
        "--selection-file",
        str(sel),
        "--strength",
        "0.2",
        "--steps",
        "10",
        "--seed",
        "1",
        "--jsonl",
    )
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert run.returncode == 0, run.stderr
    first = next(e for e in lines if e["event"] == "step")
    assert first["step"] == 9, "strength 0.2 of 10 steps enters the schedule at its last two steps"
    bad = _engine(
        "generate",
        "--model",
        str(tiny_dir),
        "--task",
        "rewrite",
        "--selection-file",
        str(sel),
        "--strength",
        "1.5",
        "--jsonl",
    )
    assert bad.returncode == 2 and "strength" in json.loads(bad.stdout.splitlines()[-1])["message"]
    wrong_task = _engine("generate", "--model", str(tiny_dir), "--task", "draft", "--strength", "0.5")
    assert wrong_task.returncode == 2 and "rewrite" in wrong_task.stderr
    outside = tmp_path / "pins.json"
    outside.write_text("[[0, 999]]", encoding="utf-8")
    bad_pin = _engine(
        "generate", "--model", str(tiny_dir), "--init-file", str(sel), "--pin-file", str(outside)
    )
    assert bad_pin.returncode == 2 and "outside" in bad_pin.stderr
