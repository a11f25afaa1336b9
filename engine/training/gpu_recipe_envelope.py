"""The envelope of the demo's GPU recipe on the lent machine: the same preflight as gpu-check, at most 8
minutes, and what it trained written back in files the machine can return (at most 8 files of 16 MiB).

Why: the recipe runs once, unattended, on a machine that can fetch nothing and returns only what lies in its
output folder, two folders deep, 8 files at most; the model folder, the corpus and the run state are many
files. `pack_return` puts the figures, the judge's report, the log and the trained model (as a tar.gz cut in
parts of at most 15 MiB: `cat model.tar.gz.* | tar xz` joins them) into DIR/return.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

MAX_MINUTES = 8.0  # the whole call, model build and judge included
PART_BYTES = 15 * 1024 * 1024
MAX_FILES = 8


class RecipeEnvelopeError(RuntimeError):
    """The recipe would not fit the lent machine's envelope: the message says what to change."""


def check_minutes(minutes: float) -> None:
    if not 0 < minutes <= MAX_MINUTES:
        raise RecipeEnvelopeError(
            f"--minutes {minutes:g} is outside the lent machine's envelope (more than 0, at most "
            f"{MAX_MINUTES:g}: the whole call, judge included): pass a shorter --minutes"
        )


def preflight_or_reason(*, dry_run: bool) -> tuple[dict[str, Any], str | None]:
    """gpu-check's preflight; (its result, None) when it passed, else (result, its one sentence)."""
    from engine.tools.gpu_preflight import preflight

    result = preflight(need_cuda=not dry_run)
    return result, None if result["ok"] else result["line"]


def pack_return(out: Path) -> list[Path]:
    """DIR/return: figures.json, judge.json, recipe.log and the model's tar.gz in parts; raises
    `RecipeEnvelopeError` if that is more than 8 files."""
    dest = out / "return"
    dest.mkdir(exist_ok=True)
    for old in dest.iterdir():
        old.unlink()
    files = []
    for name in ("figures.json", "judge.json", "recipe.log"):
        if (out / name).is_file():
            (dest / name).write_bytes((out / name).read_bytes())
            files.append(dest / name)
    model = out / "run" / "model"
    if model.is_dir():
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(model, arcname="model")
        data = buffer.getvalue()
        for i, start in enumerate(range(0, len(data), PART_BYTES)):
            part = dest / f"model.tar.gz.{i:02d}"
            part.write_bytes(data[start : start + PART_BYTES])
            files.append(part)
    if len(files) + 1 > MAX_FILES:  # and return.json
        raise RecipeEnvelopeError(
            f"the recipe's return folder holds {len(files) + 1} files, more than the {MAX_FILES} the lent "
            "machine returns: train a smaller model or return fewer figures"
        )
    (dest / "return.json").write_text(json.dumps({"files": [f.name for f in files]}, indent=2))
    return files
