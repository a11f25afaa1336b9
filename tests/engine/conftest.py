"""Engine fixtures: one tiny random checkpoint per test session, loaded once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.checkpoints import tiny_checkpoint

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory, name="ckpt", seed=0, canvas_length=32)


@pytest.fixture(scope="session")
def session(tiny_dir: Path):
    from engine.session import Session

    s = Session()
    s.load(tiny_dir, device="cpu")
    return s
