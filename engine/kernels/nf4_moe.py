"""The fused 4-bit MoE: NF4 expert stacks multiplied straight from the quantized cache's layout.

Route: NF4 in Triton, the project's own kernel, rather than vLLM's `fused_moe`/Marlin (uniform INT4). Why:
* the quantized cache stays as it is (no format change, no re-quantization of 14 GB, no second quality study:
  the NF4 KL / argmax figures of `engine.tools.quant_quality` hold as they are, the kernel computes the same
  weights);
* NF4's non-uniform code costs one 16-entry table look-up per weight in registers; the traffic, which is what
  bounds a 256-token canvas step, is the same 4.5 bits per weight as INT4 with group 64 and fp16 scales
  (NF4 with double-quantized scales: 4.127 bits);
* vLLM and sgl-kernel do not install beside this CPU torch (they pin their own CUDA torch), so CI could not
  prove them; a Triton kernel runs here under the interpreter.

How a program reads its tile: where the rows hold whole blocks of 64 (K % 64 == 0, every matrix of the
model; `row_blocks`) the K loop takes one block per step, each row's 32 code bytes as 16-byte vectors (the
cache's rows are K-contiguous, so no repack), the nibbles unpacked and looked up in registers (the table is a
select on the code's bits), and the scales of `scale_chunk` blocks decoded once ahead of the inner loop; the
PTX holds that loop to one global read per 16 weight bytes (tests/engine/test_kernels_ptx.py). Other shapes
gather per weight.

Per expert stack one launch: `align` sorts the (token, k) assignments by expert on the device and pads each
expert's group to the M tile (vLLM's `moe_align_block_size`, in torch ops that do not synchronise:
scatter_add, cumsum, argsort, searchsorted; the grid is sized for the worst case and blocks past the end
return at once). gate_up fuses the activation (act(gate) * up) into its epilogue; down multiplies by the
routing weight and writes one row per assignment, and the k rows of a token are summed in a fixed order
(deterministic, no atomics).

`reference_moe` is today's path (dequantize each expert, then matmul): the tests compare the two.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from engine.kernels import configs
from engine.kernels.common import ACT_NONE, activation_code, check_device, dot_in_bf16, source

NF4_CODE = (
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
)
_LUTS: dict[str, torch.Tensor] = {}


def nf4_lut(device: torch.device) -> torch.Tensor:
    key = str(device)
    if key not in _LUTS:
        _LUTS[key] = torch.tensor(NF4_CODE, dtype=torch.float32, device=device)
    return _LUTS[key]


def nf4_kernel_key(gated: bool, round_bf16: bool) -> str:
    """The configuration key (`engine.kernels.configs`) of an NF4 GEMM variant."""
    if gated:
        return configs.NF4_GATED_BF16 if round_bf16 else configs.NF4_GATED_FP32
    return configs.NF4_BF16 if round_bf16 else configs.NF4_FP32


def block_m(device: torch.device) -> int:
    """The M tile every NF4 variant uses (one value, so one `align` serves gate_up and down): 16, since a
    256-token canvas gives ~16 assignments per expert at top-8 of 128."""
    tiles = {c.block_m for key in (configs.NF4_GATED_BF16, configs.NF4_BF16) for c in configs.CONFIGS[key]}
    assert len(tiles) == 1, tiles
    return tiles.pop()


def align(top_k_index: torch.Tensor, num_experts: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(sorted_ids, block_expert): assignment ids (token * k + j) grouped by expert, each group padded with -1
    to a multiple of `block_m`, and the expert of every M block (`num_experts` past the last group). Sizes
    depend only on shapes (worst case: every expert's group padded), so nothing is read back to the host."""
    flat = top_k_index.reshape(-1).to(torch.int64)
    n = flat.numel()
    device = flat.device
    counts = torch.zeros(num_experts, dtype=torch.int64, device=device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    pend = torch.cumsum(padded, 0)
    pstart = pend - padded
    cstart = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)
    expert_of = flat[order]
    dest = pstart[expert_of] + torch.arange(n, device=device) - cstart[expert_of]
    capacity = math.ceil((n + num_experts * (block_m - 1)) / block_m) * block_m
    sorted_ids = torch.full((capacity,), -1, dtype=torch.int32, device=device)
    sorted_ids[dest] = order.to(torch.int32)
    starts = torch.arange(0, capacity, block_m, dtype=torch.int64, device=device)
    block_expert = torch.searchsorted(pend, starts, right=True).to(torch.int32)
    return sorted_ids, block_expert


SCALE_CHUNK = 32  # blocks whose scales gate_up decodes at once (2 x 32 x BLOCK_N fp32 in registers)


def row_blocks(k: int, a_stride: int) -> bool:
    """The vector path applies: every row holds whole blocks of 64 (K % 64 == 0, all of the model's
    matrices), so a block's 32 code bytes are contiguous and 16-byte aligned, and the activation rows are
    16-byte aligned too. Otherwise (odd test shapes) the kernel gathers per weight."""
    return k % 64 == 0 and a_stride % 8 == 0


def scale_chunk(k: int, gated: bool) -> int:
    """Blocks per scale chunk for rows of `k` weights: the next power of two of k / 64, at most `SCALE_CHUNK`
    for gate_up and half that for one matrix (compiled without spills on sm_80..120 at those: a dense
    linear at 32 spills 24 B on sm_86/89/90, gate_up at 16 spills 8 B on sm_120)."""
    cap = SCALE_CHUNK if gated else max(1, SCALE_CHUNK // 2)
    return min(cap, 1 << max(0, (k // 64 - 1).bit_length()))


def _launch(
    a: torch.Tensor,
    sorted_ids: torch.Tensor,
    block_expert: torch.Tensor,
    weight: Any,
    out: torch.Tensor,
    *,
    n: int,
    k: int,
    a_div: int,
    gated: bool,
    act: int,
    route: torch.Tensor | None,
    round_bf16: bool,
) -> None:
    src = source()
    key = nf4_kernel_key(gated, round_bf16)
    config = configs.config_for(key, a.device)
    bn = config.block_n
    if (2 * n if gated else n) * k >= 2**31:
        raise ValueError(f"an NF4 matrix of {n} x {k} is past the kernel's 32-bit in-matrix offsets")
    count = weight.count or 1
    lead = weight.count is not None
    qweight = weight.qweight
    blocks = row_blocks(k, a.stride(0))
    grid = (block_expert.numel(), (n + bn - 1) // bn)
    configs.launch(
        src.nf4_gemm_kernel,
        grid,
        key,
        a.device,
        a,
        a.stride(0),
        sorted_ids,
        block_expert,
        route if route is not None else out,
        out,
        out.stride(0),
        qweight,
        weight.absmax,
        weight.absmax2,
        weight.offset.reshape(-1),
        weight.code2,
        nf4_lut(a.device),
        qweight.shape[-1] if lead else 0,
        weight.absmax.shape[-1] if lead else 0,
        weight.absmax2.shape[-1] if lead else 0,
        n,
        k,
        count,
        A_DIV=a_div,
        GATED=gated,
        ACT=act,
        HAS_ROUTE=route is not None,
        ROUND=round_bf16,
        DOT_BF16=round_bf16 and dot_in_bf16(a.device),
        BLOCKS=blocks,
        CHUNK=scale_chunk(k, gated) if blocks else 1,
        **config.tiles(),
    )


def fused_moe(
    hidden: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
    gate_up: Any,
    down: Any,
    act: int,
) -> torch.Tensor:
    """The experts forward over NF4 stacks `gate_up` (count, 2I, H) and `down` (count, H, I): two launches."""
    check_device(hidden)
    tokens, hidden_dim = hidden.shape
    top_k = top_k_index.shape[-1]
    num_experts = int(gate_up.count)
    inter = gate_up.shape[0] // 2
    round_bf16 = gate_up.compute_dtype == torch.bfloat16
    a = hidden.contiguous()
    sorted_ids, block_expert = align(top_k_index, num_experts, block_m(a.device))
    mid = torch.empty((tokens * top_k, inter), dtype=gate_up.compute_dtype, device=a.device)
    _launch(
        a,
        sorted_ids,
        block_expert,
        gate_up,
        mid,
        n=inter,
        k=hidden_dim,
        a_div=top_k,
        gated=True,
        act=act,
        route=None,
        round_bf16=round_bf16,
    )
    out = torch.empty((tokens * top_k, hidden_dim), dtype=torch.float32, device=a.device)
    route = top_k_weights.reshape(-1).contiguous()
    _launch(
        mid,
        sorted_ids,
        block_expert,
        down,
        out,
        n=hidden_dim,
        k=inter,
        a_div=1,
        gated=False,
        act=ACT_NONE,
        route=route,
        round_bf16=round_bf16,
    )
    return out.view(tokens, top_k, hidden_dim).sum(1).to(hidden.dtype)


def nf4_linear(x: torch.Tensor, weight: Any) -> torch.Tensor:
    """x @ W.T for one NF4 matrix (an `NF4Linear`): the MoE kernel with one expert and every row routed to
    it."""
    check_device(x)
    out_f, in_f = weight.shape
    lead = x.shape[:-1]
    a = x.reshape(-1, in_f).contiguous()
    rows = a.shape[0]
    bm = block_m(a.device)
    capacity = max(bm, (rows + bm - 1) // bm * bm)
    sorted_ids = torch.full((capacity,), -1, dtype=torch.int32, device=a.device)
    sorted_ids[:rows] = torch.arange(rows, dtype=torch.int32, device=a.device)
    block_expert = torch.zeros(capacity // bm, dtype=torch.int32, device=a.device)
    out = torch.empty((rows, out_f), dtype=x.dtype, device=a.device)
    _launch(
        a,
        sorted_ids,
        block_expert,
        weight,
        out,
        n=out_f,
        k=in_f,
        a_div=1,
        gated=False,
        act=ACT_NONE,
        route=None,
        round_bf16=weight.compute_dtype == torch.bfloat16 or x.dtype == torch.bfloat16,
    )
    return out.view(*lead, out_f)


def reference_moe(
    hidden: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
    gate_up: Any,
    down: Any,
    act_fn: Any,
) -> torch.Tensor:
    """Today's path: each hit expert dequantized to the compute dtype, then multiplied (what
    `engine.weights.quantize.nf4_experts_forward` does off CUDA), as the tests' reference."""
    final = torch.zeros_like(hidden)
    top_k = top_k_index.shape[-1]
    flat = top_k_index.reshape(-1)
    weights = top_k_weights.reshape(-1)
    for expert in range(int(gate_up.count)):
        picks = (flat == expert).nonzero().squeeze(1)
        if picks.numel() == 0:
            continue
        tokens = picks // top_k
        x = hidden[tokens]
        gate, up = torch.nn.functional.linear(x, gate_up.dequantize(expert).to(x.dtype)).chunk(2, dim=-1)
        out = torch.nn.functional.linear(act_fn(gate) * up, down.dequantize(expert).to(x.dtype))
        out = out * weights[picks, None]
        final.index_add_(0, tokens, out.to(final.dtype))
    return final


def supports(module: Any) -> bool:
    """The kernel applies to this experts module: NF4 stacks and an activation it fuses."""
    from engine.weights.quantize import NF4Weight

    gate_up = getattr(module, "gate_up_proj", None)
    return (
        isinstance(gate_up, NF4Weight)
        and bool(gate_up.count)
        and activation_code(getattr(module, "act_fn", None)) is not None
    )


def triton_experts_forward(
    self: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """The experts forward registered as `TRITON_IMPLEMENTATION` (transformers' ExpertsInterface
    signature). Where the device refuses the kernel (`KernelsUnavailable`) this layer runs the bitsandbytes
    experts forward instead (later steps take the model's default path: the kernels are then off for the
    device)."""
    act = activation_code(self.act_fn)
    assert act is not None
    try:
        return fused_moe(hidden_states, top_k_index, top_k_weights, self.gate_up_proj, self.down_proj, act)
    except configs.KernelsUnavailable:
        from engine.weights.quantize import nf4_experts_forward

        return nf4_experts_forward(self, hidden_states, top_k_index, top_k_weights)


TRITON_IMPLEMENTATION = "letterpress_nf4_triton"


def register() -> None:
    from transformers.integrations.moe import ExpertsInterface

    ExpertsInterface.register(TRITON_IMPLEMENTATION, triton_experts_forward)
