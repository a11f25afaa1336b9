"""`python -m engine` as scripts use it: make-tiny, generate --jsonl (steps, done, errors), equivalence."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import torch

from tests.helpers.engine_cli import run_engine

ROOT = Path(__file__).resolve().parents[2]


def _engine(*args: str) -> subprocess.CompletedProcess:
    return run_engine(*args, timeout=300)


def test_make_tiny_then_generate_jsonl(tmp_path: Path) -> None:
    ckpt = tmp_path / "tiny"
    made = _engine("make-tiny", str(ckpt), "--seed", "3")
    assert made.returncode == 0, made.stderr
    for name in (
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (ckpt / name).is_file(), name
    assert "chat_template" in json.loads((ckpt / "tokenizer_config.json").read_text())
    before = tmp_path / "before.txt"
    before.write_text("It was the best of times,", encoding="utf-8")
    run = _engine(
        "generate",
        "--model",
        str(ckpt),
        "--task",
        "draft",
        "--before-file",
        str(before),
        "--steps",
        "5",
        "--candidates",
        "2",
        "--seed",
        "1",
        "--jsonl",
    )
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    steps = [e for e in lines if e["event"] == "step"]
    assert {e["candidate"] for e in steps} == {0, 1}
    assert all(isinstance(e["text"], str) and isinstance(e["step"], int) for e in steps)
    done = lines[-1]
    assert done["event"] == "done" and len(done["candidates"]) == 2
    assert {"forwards", "new_tokens", "seconds"} <= done.keys()
    assert all(c["token_ids"] and c["token_ids"][-1] != 0 for c in done["candidates"])


def test_raw_prompt_file_matches_model_generate(tiny_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    prompt = tmp_path / "prompt.txt"
    prompt.write_text("The quick brown fox", encoding="utf-8")
    run = _engine(
        "generate",
        "--model",
        str(tiny_dir),
        "--task",
        "draft",
        "--raw-prompt-file",
        str(prompt),
        "--max-new-tokens",
        "64",
        "--seed",
        "5",
        "--device",
        "cpu",
        "--jsonl",
    )
    assert run.returncode == 0, run.stderr
    ours = json.loads(run.stdout.splitlines()[-1])["candidates"][0]["token_ids"]
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(tiny_dir).eval()
    ids = tok("The quick brown fox", return_tensors="pt").input_ids
    torch.manual_seed(5)
    ref = model.generate(ids, max_new_tokens=64).sequences[0, ids.shape[1] :].tolist()
    while ref and ref[-1] == 0:
        ref.pop()
    assert ours == ref


def test_errors_are_one_json_object_and_a_nonzero_exit(tmp_path: Path) -> None:
    run = _engine("generate", "--model", str(tmp_path / "missing"), "--jsonl")
    assert run.returncode != 0
    error = json.loads(run.stdout.strip().splitlines()[-1])
    assert error["event"] == "error" and error["kind"] == "model_not_found" and error["message"]


def test_empty_rewrite_is_an_error_not_a_crash(tiny_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    run = _engine(
        "generate", "--model", str(tiny_dir), "--task", "rewrite", "--selection-file", str(empty), "--jsonl"
    )
    assert run.returncode != 0
    assert json.loads(run.stdout.strip().splitlines()[-1])["kind"] == "empty_request"
    assert "Traceback" not in run.stderr
