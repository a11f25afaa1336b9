"""Puts the kernels into a loaded model: the NF4 and int8 linears and the RMSNorms get a forward that runs the
fused kernel while `LETTERPRESS_KERNELS` applies to the input's device, and their own forward otherwise (so
the switch can be flipped between requests). The expert stacks switch through transformers' ExpertsInterface
instead (`engine.fastpath.sync_free_experts`). Done here, not in `engine.weights`, which imports nothing but
the api."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from engine.kernels import kernels_for
from engine.kernels.configs import KernelsUnavailable

_MARK = "_letterpress_kernel_forward"


def _wrap(module: Any, kernel: Callable[[torch.Tensor], torch.Tensor]) -> None:
    original = module.forward

    def forward(x: torch.Tensor) -> torch.Tensor:
        if kernels_for(x.device):
            try:
                return kernel(x)
            except KernelsUnavailable:  # the device refused the launch: the kernels are now off for it
                pass
        return original(x)

    module.forward = forward
    setattr(module, _MARK, True)


def _call(kernel: Callable[[torch.Tensor, Any], torch.Tensor], module: Any, x: torch.Tensor) -> torch.Tensor:
    return kernel(x, module)


def install(model: torch.nn.Module) -> int:
    """Wrap every quantized linear and RMSNorm of `model` once (idempotent); returns how many were new."""
    from engine.kernels.int8_gemm import int8_linear
    from engine.kernels.nf4_moe import nf4_linear
    from engine.kernels.rmsnorm import norm_kernel
    from engine.weights.quantize import Int8Linear, NF4Linear

    count = 0
    for module in model.modules():
        if getattr(module, _MARK, False):
            continue
        if isinstance(module, NF4Linear):
            _wrap(module, functools.partial(_call, nf4_linear, module))
        elif isinstance(module, Int8Linear):
            _wrap(module, functools.partial(_call, int8_linear, module))
        elif (
            type(module).__name__.endswith("RMSNorm")
            and hasattr(module, "eps")
            and hasattr(module, "with_scale")
        ):
            _wrap(module, norm_kernel(module))
        else:
            continue
        count += 1
    return count
