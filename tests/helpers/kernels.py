"""Shared by the kernel tests: Triton's interpreter on when there is no GPU (read by Triton when a kernel is
decorated, which `engine.kernels` does on first use, so setting it at import of a test module is early
enough)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

SYNC_OPS = (
    "_local_scalar_dense",
    "is_nonzero",
    "item",
    "equal",
    "nonzero",
    "masked_select",
    "unique",
    "_unique",
    "_unique2",
    "bincount",
    "repeat_interleave",
)


@contextmanager
def count_syncs() -> Iterator[list[str]]:
    """Names of the ops in the block that read a device value back to the host (or size by data)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = func.__name__.split(".")[0]
            if name in SYNC_OPS:
                seen.append(name)
            return func(*args, **(kwargs or {}))

    with Mode():
        yield seen
