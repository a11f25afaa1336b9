"""DiffusionGemma's RMSNorm in one pass: today's module reads and writes the activation ~10 times
(`x.float()`, square, mean, scale, weight, cast: 40 bytes per element for a bf16 activation); the kernel reads
it once and writes it once (4 bytes). Eight of them per layer over the hidden size and three over the
attention heads make the largest share of what remained above the roofline after the 4-bit kernels
(engine.tools.traffic).

`engine.kernels.install` gives every RMSNorm of a model a forward that uses the kernel while
`LETTERPRESS_KERNELS` applies to the activation's device and the module's own forward otherwise. Tolerance:
fp32 within 1e-6 relative (the mean's summation order and 1/sqrt against pow(-0.5)); bf16 within one bf16
rounding step (2**-7 relative).
"""

from __future__ import annotations

from typing import Any

import torch

from engine.kernels import configs
from engine.kernels.common import check_device, source


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """`DiffusionGemmaRMSNorm.forward(x)` (weight None: the scale-free variant) in one kernel."""
    check_device(x)
    dim = x.shape[-1]
    rows = x.contiguous().view(-1, dim)
    out = torch.empty_like(rows)
    block = max(16, 1 << max(0, (dim - 1).bit_length()))
    configs.launch(
        source().rms_norm_kernel,
        (rows.shape[0],),
        configs.RMS_NORM,
        x.device,
        rows,
        weight if weight is not None else rows,
        out,
        dim,
        float(eps),
        HAS_W=weight is not None,
        ROUND=x.dtype == torch.bfloat16,
        BLOCK_D=block,
    )
    return out.view(x.shape)


def norm_kernel(module: Any) -> Any:
    """The kernel call standing in for `module.forward` (engine.kernels.install wraps it behind the
    switch)."""

    def forward(hidden_states: torch.Tensor) -> torch.Tensor:
        if hidden_states.dtype not in (torch.float32, torch.bfloat16):
            return module.__class__.forward(module, hidden_states)
        return rms_norm(hidden_states, module.weight if module.with_scale else None, module.eps)

    return forward
