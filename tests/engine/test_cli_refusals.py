"""Every `python -m engine generate` combination that cannot do what was asked is refused with a sentence
before anything is loaded (no torch import, no model), as one JSON error event under --jsonl; pin files that
are not ranges of whole numbers are refused, never an "unexpected ... Please report it" (issue 27)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import sys, engine.__main__ as m\n"
    "rc = m.main(sys.argv[1:])\n"
    "print('TORCH-IMPORTED' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)\n"
    "sys.exit(rc)\n"
)


def _engine(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def _refused_before_loading(run: subprocess.CompletedProcess, *words: str) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    assert "NO-TORCH" in run.stderr, "refused only after torch was imported: " + run.stderr
    message = run.stderr.split("error: ", 1)[1].splitlines()[0]
    assert "unexpected" not in message and "report it" not in message
    for word in words:
        assert word in message, message
    return message


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    file = tmp_path / "text.txt"
    file.write_text("the people went out into the field", encoding="utf-8")
    return file


def test_strength_with_init_file_is_refused_not_ignored(text_file: Path) -> None:
    run = _engine(
        "generate",
        "--task",
        "rewrite",
        "--selection-file",
        str(text_file),
        "--init-file",
        str(text_file),
        "--strength",
        "0.3",
    )
    _refused_before_loading(run, "--strength", "--init-file", "--noise")


def test_infill_without_after_file_is_refused_not_drafted(text_file: Path) -> None:
    run = _engine("generate", "--task", "infill", "--before-file", str(text_file))
    _refused_before_loading(run, "--after-file", "--task draft")


def test_rewrite_without_a_selection_is_refused_before_the_model_loads(
    text_file: Path, tmp_path: Path
) -> None:
    _refused_before_loading(
        _engine("generate", "--task", "rewrite", "--before-file", str(text_file)), "--selection-file"
    )
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    _refused_before_loading(
        _engine("generate", "--task", "rewrite", "--selection-file", str(empty)), "no text"
    )


def test_options_another_task_would_ignore_are_refused(text_file: Path) -> None:
    _refused_before_loading(
        _engine("generate", "--task", "draft", "--selection-file", str(text_file)),
        "--selection-file",
        "rewrite",
    )
    _refused_before_loading(
        _engine("generate", "--task", "draft", "--after-file", str(text_file)), "--after-file", "infill"
    )


def test_cuda_without_a_gpu_names_the_cpu_option() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    run = _engine("generate", "--device", "cuda", "--jsonl")
    assert run.returncode == 2, run.stderr
    event = json.loads(run.stdout.splitlines()[-1])
    assert (
        event["event"] == "error"
        and "--device cpu" in event["message"]
        and "Settings" not in event["message"]
    )


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("[[Infinity,3]]", ("Infinity",)),
        ("[[1e400,3]]", ("1e400",)),
        ("[[1.5,3]]", ("1.5",)),
        ("[[true,3]]", ("whole numbers",)),
        ("[" * 100_000, ("nests",)),
        ("[[" + "9" * 5000 + ",3]]", ("pin file",)),
        ("[[99999999999999999999,3]]", ("too large",)),
        ("3 -5", ("Line 1", "'3 -5'")),
        ("-3 5", ("Line 1",)),
        ("4 10\nfive six", ("Line 2",)),
        ("99999999999999999999 3", ("too large",)),
    ],
)
def test_pin_files_that_are_not_ranges_are_refused_with_a_sentence(
    text_file: Path, tmp_path: Path, spec: str, words: tuple[str, ...]
) -> None:
    pins = tmp_path / "pins.txt"
    pins.write_text(spec, encoding="utf-8")
    args = ("generate", "--init-file", str(text_file), "--pin-file", str(pins))
    _refused_before_loading(_engine(*args), *words)
    event = json.loads(_engine(*args, "--jsonl").stdout.splitlines()[-1])
    assert event["event"] == "error" and "pin" in event["message"].lower(), event


def test_good_pin_files_still_parse() -> None:
    from engine.__main__ import parse_pins

    assert parse_pins("# a comment\n4 10\n12-14\n15:16\n17, 19\n", 40) == (
        (4, 10),
        (12, 14),
        (15, 16),
        (17, 19),
    )
    assert parse_pins("[[0, 3], [5, 9]]", 10) == ((0, 3), (5, 9))


def test_generate_help_shows_the_demo_models_own_default_steps() -> None:
    from engine.__main__ import build_parser

    demo = json.loads((ROOT / "resources/models/letterpress-demo/generation_config.json").read_text())
    sub = build_parser()._subparsers._group_actions[0].choices["generate"]  # type: ignore[union-attr]
    steps = next(a for a in sub._actions if "--steps" in a.option_strings)
    assert f"{demo['max_denoising_steps']} for the demo model" in steps.help
    assert "(default 48)" not in sub.format_help()
