"""A grouped GEMM whose group sizes stay on the device: the experts' matmul for GPUs of compute capability
8.x.

`torch._grouped_mm` has its fast kernels on compute capability 9.x/10.x only; on an RTX 3090/4090 (8.6/8.9) it
copies `offs` to the host and runs one GEMM per expert, twice per MoE layer: about 61 host synchronisations
per decoder step on the 26B-A4B instead of 1. This kernel reads the offsets on the device instead.

The launch grid is static: rows sorted by expert are cut into tiles of `BLOCK_M` rows that never straddle two
experts; there are at most ceil(S / BLOCK_M) + E such tiles (S rows, E experts), so the grid has that many
programs along M, and the (expert, first row) of each is computed on the device (`tile_schedule`, cumsum +
searchsorted: static shapes, no data-dependent op). Programs past the last tile return at once.

On the CPU the very same kernel body runs under Triton's interpreter (`interpret=True`), which is how the
tests prove it; CUDA runs it compiled.
"""

from __future__ import annotations

from typing import Any

import torch

try:
    import triton.language as tl
except (
    ImportError
):  # pragma: no cover - triton ships with CUDA torch; the CPU CI installs it for the interpreter
    tl = None

BLOCK_M = 32
BLOCK_N = 64
BLOCK_K = 32


def tile_schedule(
    offsets: torch.Tensor, total_rows: int, block_m: int = BLOCK_M
) -> tuple[torch.Tensor, torch.Tensor]:
    """(expert, first row) of every tile of rows sorted by expert, `-1` for tiles past the last one.

    `offsets` are the cumulative row counts per expert (what transformers passes `grouped_mm`), on the device.
    Everything is computed on the device with static shapes: the number of tiles is the bound
    ceil(total_rows / block_m) + experts, not the data-dependent count.
    """
    experts = offsets.shape[0]
    ends = offsets.to(torch.int64)
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    tiles_per_expert = (ends - starts + block_m - 1) // block_m
    tile_ends = torch.cumsum(tiles_per_expert, 0)
    bound = (total_rows + block_m - 1) // block_m + experts
    tile = torch.arange(bound, device=offsets.device, dtype=torch.int64)
    expert = torch.searchsorted(tile_ends, tile, right=True)
    valid = expert < experts
    safe = expert.clamp(max=experts - 1)
    local = tile - (tile_ends[safe] - tiles_per_expert[safe])
    first = starts[safe] + local * block_m
    return torch.where(valid, safe, -1).to(torch.int32), first.to(torch.int32)


def _grouped_mm_body(
    x_ptr,
    w_ptr,
    out_ptr,
    tile_expert_ptr,
    tile_first_ptr,
    ends_ptr,
    N,
    K: tl.constexpr,  # the K loop's bound as a Python int: Triton 3.6's interpreter cannot iterate over a
    # runtime scalar with NumPy 2 ("only 0-dimensional arrays can be converted"); two values per model
    stride_xm,
    stride_xk,
    stride_we,
    stride_wn,
    stride_wk,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
) -> None:
    """out[rows] = x[rows] @ w[e].T for one tile of rows of expert e and one block of output columns."""
    tile = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(tile_expert_ptr + tile)
    if expert >= 0:
        first = tl.load(tile_first_ptr + tile)
        end = tl.load(ends_ptr + expert)
        rows = first + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < end
        col_ok = cols < N
        acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)  # tl.full, not tl.zeros: a builtin, so the
        # interpreter runs it even when triton was imported without TRITON_INTERPRET
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            k_ok = ks < K
            a = tl.load(
                x_ptr + rows[:, None] * stride_xm + ks[None, :] * stride_xk,
                mask=row_ok[:, None] & k_ok[None, :],
                other=0.0,
            )
            b = tl.load(
                w_ptr + expert.to(tl.int64) * stride_we + ks[:, None] * stride_wk + cols[None, :] * stride_wn,
                mask=k_ok[:, None] & col_ok[None, :],
                other=0.0,
            )
            acc += tl.dot(a, b)
        tl.store(
            out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on,
            acc.to(out_ptr.dtype.element_ty),
            mask=row_ok[:, None] & col_ok[None, :],
        )


_KERNELS: dict[bool, Any] = {}


def _kernel(interpret: bool) -> Any:
    kernel = _KERNELS.get(interpret)
    if kernel is None:
        if interpret:
            from triton.runtime.interpreter import InterpretedFunction

            kernel = InterpretedFunction(_grouped_mm_body)
        else:
            import triton

            kernel = triton.jit(_grouped_mm_body)
        _KERNELS[interpret] = kernel
    return kernel


def grouped_mm_nt(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Rows of `x` [S, K] sorted by expert times their expert's `w[e]` [N, K] transposed: [S, N].

    `offsets[e]` is the end row of expert e (cumulative counts, on the device); rows past `offsets[-1]` are
    zero. CUDA tensors run the compiled kernel; CPU tensors run the same kernel under Triton's interpreter
    (slow: for tests at small shapes; in float32, as NumPy has no bfloat16, so a bf16 call is computed in fp32
    and cast).
    """
    rows, k = x.shape
    experts, n, k_w = w.shape
    if k != k_w or offsets.shape[0] != experts:
        raise ValueError(
            f"grouped_mm_nt: x {tuple(x.shape)}, w {tuple(w.shape)}, offsets {tuple(offsets.shape)}"
        )
    interpret = x.device.type != "cuda"
    if interpret and x.dtype != torch.float32:  # the interpreter computes with NumPy, which has no bfloat16
        return grouped_mm_nt(x.float(), w.float(), offsets).to(x.dtype)
    out = torch.zeros(rows, n, dtype=x.dtype, device=x.device)
    tile_expert, tile_first = tile_schedule(offsets, rows)
    ends = offsets.to(torch.int32)
    grid = (tile_expert.shape[0], (n + BLOCK_N - 1) // BLOCK_N)
    from engine.kernels import configs

    configs.launch(
        _kernel(interpret),
        grid,
        configs.GROUPED_MM,
        x.device,
        x,
        w,
        out,
        tile_expert,
        tile_first,
        ends,
        n,
        k,
        x.stride(0),
        x.stride(1),
        w.stride(0),
        w.stride(1),
        w.stride(2),
        out.stride(0),
        out.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
    )
    return out
