"""The engine's command line run as a user would run it: `python -m engine ...` in a child process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def engine_env(**extra: str) -> dict[str, str]:
    """The environment the child gets: this checkout on the path, one CPU thread per child."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **extra}


def without_root_override() -> list[str]:
    """A command prefix under which file permissions apply (root normally reads a chmod-000 file): root
    without the DAC override capabilities (util-linux setpriv); nothing for an ordinary user."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("permissions cannot be enforced for root here (no setpriv)")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def engine_command(*args: str) -> list[str]:
    """The argument list of `python -m engine *args` (for a test that runs it inside a shell pipeline)."""
    return [sys.executable, "-m", "engine", *args]


def run_engine(
    *args: str,
    timeout: float = 300,
    prefix: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    preexec_fn: Callable[[], object] | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess[Any]:
    """`python -m engine *args` from the repository root, its output captured as text (`prefix`: a wrapper
    command such as setpriv; `preexec_fn`: e.g. a memory limit set in the child; `text=False`: the raw bytes,
    for a test of what the child writes through a narrow encoding)."""
    return subprocess.run(
        [*prefix, *engine_command(*args)],
        capture_output=True,
        text=text,
        env=dict(engine_env() if env is None else env),
        cwd=ROOT,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )
