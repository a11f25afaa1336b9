"""Engine fixtures: one tiny random checkpoint per test session, loaded once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.tools.tiny import make_tiny

    return make_tiny(tmp_path_factory.mktemp("tiny") / "ckpt", seed=0, canvas_length=32)


@pytest.fixture(scope="session")
def session(tiny_dir: Path):
    from engine.session import Session

    s = Session()
    s.load(tiny_dir, device="cpu")
    return s
