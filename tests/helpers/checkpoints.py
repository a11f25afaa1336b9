"""The one way tests get a tiny DiffusionGemma checkpoint.

Built by `engine.tools.tiny.make_tiny` (the library function behind `python -m engine make-tiny`) once per
test session and set of options, and kept on disk under pytest's temporary folder: every test that asks for
the same checkpoint reads the same folder, so a session builds each kind once instead of once per test.
A test that changes or deletes files copies the folder first (`shutil.copytree`), as the tests here do.
"""

from __future__ import annotations

import inspect
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CACHE_FOLDER = "tiny-checkpoints"


def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory, *, name: str = "tiny", **options: Any) -> Path:
    """The folder of a tiny checkpoint made with `make_tiny(**options)`, named `name` (the app shows a model's
    folder name, e.g. the self-test's `model_name`), built the first time this session asks for it."""
    from engine.tools.tiny import make_tiny

    os.environ.setdefault(
        "OMP_NUM_THREADS", "1"
    )  # as the engine tests run: a tiny model gains nothing from more
    defaults = {
        key: param.default
        for key, param in inspect.signature(make_tiny).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    }
    unknown = set(options) - set(defaults)
    if unknown:
        raise TypeError(f"make_tiny has no option {sorted(unknown)}")
    chosen = {key: value for key, value in sorted(options.items()) if defaults[key] != value}
    kind = (
        tmp_path_factory.getbasetemp()
        / CACHE_FOLDER
        / ("-".join(f"{k}={v}" for k, v in chosen.items()) or "defaults")
    )
    built = kind / "tiny"
    if not (built / "model.safetensors").is_file():
        tiny_checkpoint_in(built, **chosen)
    if name == "tiny":
        return built
    named = kind / name  # the same files under the folder name the test shows or checks
    if not named.is_dir():
        shutil.copytree(built, named)
    return named


def tiny_checkpoint_in(folder: Path, **options: Any) -> Path:
    """A tiny checkpoint built in `folder`, not cached: for a test whose checkpoint must outlive pytest's
    temporary folders (another pytest run on the machine may prune them while an installed app reads it)."""
    from engine.tools.tiny import make_tiny

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the engine tests run: a tiny model gains nothing more
    return make_tiny(folder, **options)
