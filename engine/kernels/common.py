"""Pieces every kernel shares: bf16 rounding that is the same on a GPU and in the interpreter, the activation
codes, and how a kernel launch checks that it can run where its tensors are."""

from __future__ import annotations

from typing import Any

import torch

from engine.kernels import interpreting

ACT_NONE, ACT_GELU_TANH, ACT_SILU = 0, 1, 2


def activation_code(act_fn: Any) -> int | None:
    """The fused activation for a module's `act_fn` (None: not one the kernels implement)."""
    name = type(act_fn).__name__
    if name in ("GELUTanh", "PytorchGELUTanh", "NewGELUActivation"):
        return ACT_GELU_TANH
    if name in ("SiLUActivation", "SiLU"):
        return ACT_SILU
    return None


def check_device(*tensors: torch.Tensor) -> None:
    """Kernels run on CUDA tensors, or on CPU tensors under the interpreter; say so instead of crashing."""
    for t in tensors:
        if t.device.type == "cpu" and not interpreting():
            raise RuntimeError(
                "Triton kernels on CPU tensors need TRITON_INTERPRET=1 before Triton is imported"
            )


def dot_in_bf16(device: torch.device) -> bool:
    """On a GPU the tensor cores multiply bf16 tiles; the interpreter's bf16 dot is wrong (Triton 3.9), so
    there the same bf16-rounded values are multiplied in fp32, which is exact for the products (8-bit
    mantissas)."""
    return device.type == "cuda"


def source() -> Any:
    """The module of Triton kernels, imported (and so decorated) on first use."""
    from engine.kernels import triton_src

    return triton_src
