"""The nf4-mixed plan's int8 linears without the fp32 round trip.

Today `Int8Linear.forward` casts the int8 codes to fp32, multiplies by the row scales, casts to bf16 and
multiplies: 21 bytes of traffic per weight for a 1-byte weight. Here the codes are read once and turned into
bf16 weights in registers (`CB * SCB / 127`, rounded as the reference rounds it), so the layer reads 1 byte
per weight.

Route: our own Triton GEMM rather than a package: bitsandbytes' int8 matmul (`int8_linear_matmul`) quantizes
the activations to int8 too (LLM.int8, outlier decomposition) which changes the numbers the quality figures
were measured with; torch's `_weight_int8pack_mm` exists for CPU/MPS only; Marlin/vLLM W8A16 kernels need
their own CUDA torch. This one computes the reference's bf16 weights exactly, so
`engine.tools.quant_quality`'s nf4-mixed figures hold unchanged. Tolerance as the NF4 linear's
(tests/engine/test_kernels_int8.py).
"""

from __future__ import annotations

from typing import Any

import torch

from engine.kernels import configs
from engine.kernels.common import check_device, dot_in_bf16, source


def int8_linear(x: torch.Tensor, module: Any) -> torch.Tensor:
    """x @ (CB * SCB / 127).T for an `engine.weights.quantize.Int8Linear`, in `x`'s dtype."""
    check_device(x)
    out_f, in_f = module.shape
    lead = x.shape[:-1]
    a = x.reshape(-1, in_f).contiguous()
    rows = a.shape[0]
    config = configs.config_for(configs.INT8, a.device)
    bm, bn = config.block_m, config.block_n
    out = torch.empty((rows, out_f), dtype=x.dtype, device=a.device)
    round_bf16 = module.compute_dtype == torch.bfloat16 or x.dtype == torch.bfloat16
    grid = ((rows + bm - 1) // bm, (out_f + bn - 1) // bn)
    configs.launch(
        source().int8_gemm_kernel,
        grid,
        configs.INT8,
        a.device,
        a,
        a.stride(0),
        module.CB,
        module.SCB,
        out,
        out.stride(0),
        rows,
        out_f,
        in_f,
        ROUND=round_bf16,
        DOT_BF16=round_bf16 and dot_in_bf16(a.device),
        **config.tiles(),
    )
    return out.view(*lead, out_f)
