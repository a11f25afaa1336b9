"""Corrections to bitsandbytes 0.50.2's operator registrations that the real 26B-A4B stacks need.

1. The fake (meta / FakeTensor) kernel of `bitsandbytes::dequantize_4bit.out` checks `out.shape == shape`,
   where `out.shape` is a `torch.Size` (a tuple) and `shape` the op's `int[]` argument (a list): a tuple never
   equals a list, so the check fails for every call. `torch.compile` traces with fake tensors, so compiling
   anything that writes a dequantized stack into a buffer (`engine.fastpath.reused_stack`, the path the
   26B-A4B's stacks take) raises; tiny test stacks take another branch and never saw it. The corrected kernel
   compares `tuple(out.shape) == tuple(shape)`. Reported upstream as
   docs/upstream/bitsandbytes-fake-kernel.md.
2. `dequantize_4bit.out` has CUDA and XPU kernels only. A CPU kernel (dequantize with the CPU
`dequantize_4bit`
   kernel, copy into `out`) lets the CPU tests execute the one-kernel stack branch the real stacks take on a
   GPU.

Both are installed once, on first use, and only where needed: the fake kernel is probed at a tiny shape first,
so a bitsandbytes release that fixes it keeps its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

_BLOCKSIZES = (32, 64, 128, 256, 512, 1024, 2048, 4096)
_installed: dict[str, bool] = {}


def _fake_out(
    A: torch.Tensor,
    absmax: torch.Tensor,
    blocksize: int,
    quant_type: str,
    shape: Sequence[int],
    dtype: torch.dtype,
    out: torch.Tensor,
) -> None:
    """bitsandbytes' own checks, with the shape compared as tuples."""
    torch._check(blocksize in _BLOCKSIZES, lambda: f"invalid blocksize {blocksize}")
    torch._check(
        quant_type in ("nf4", "fp4"), lambda: f"quant_type must be 'nf4' or 'fp4', got {quant_type!r}"
    )
    torch._check(absmax.dtype == torch.float32, lambda: f"absmax must be float32, got {absmax.dtype}")
    torch._check(
        dtype in (torch.float16, torch.bfloat16, torch.float32),
        lambda: f"Blockwise 4bit dequantization only supports 16/32-bit floats, but got {dtype}",
    )
    torch._check(
        tuple(out.shape) == tuple(shape), lambda: f"Expected out.shape == {tuple(shape)}, got {out.shape}"
    )
    torch._check(out.device == A.device, lambda: f"Expected out.device == {A.device}, got {out.device}")
    torch._check(out.dtype == dtype, lambda: f"Expected out.dtype == {dtype}, got {out.dtype}")


def _cpu_out(
    A: torch.Tensor,
    absmax: torch.Tensor,
    blocksize: int,
    quant_type: str,
    shape: Sequence[int],
    dtype: torch.dtype,
    out: torch.Tensor,
) -> None:
    """The CPU stand-in for the CUDA in-place kernel: same op and arguments, result copied into `out` (it
    holds a temporary of the output's size, which the CUDA kernel does not)."""
    out.copy_(
        torch.ops.bitsandbytes.dequantize_4bit.default(A, absmax, blocksize, quant_type, list(shape), dtype)
    )


def fake_kernel_is_broken() -> bool:
    """Does the registered fake kernel of `dequantize_4bit.out` reject a correct call? (Probed on meta
    tensors.)"""
    A = torch.empty(64, 1, dtype=torch.uint8, device="meta")
    absmax = torch.empty(2, dtype=torch.float32, device="meta")
    out = torch.empty(2, 64, dtype=torch.bfloat16, device="meta")
    try:
        torch.ops.bitsandbytes.dequantize_4bit.out(A, absmax, 64, "nf4", [2, 64], torch.bfloat16, out=out)
    except RuntimeError:
        return True
    return False


def install() -> dict[str, bool]:
    """Register what is missing or wrong (once); returns what was installed: {"fake_out": ..., "cpu_out":
    ...}."""
    if _installed:
        return dict(_installed)
    import bitsandbytes  # noqa: F401  (defines the ops)

    broken = fake_kernel_is_broken()
    if broken:
        torch.library.register_fake("bitsandbytes::dequantize_4bit.out", _fake_out, allow_override=True)
    op = torch.ops.bitsandbytes.dequantize_4bit.out
    has_cpu = op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CPU)
    if not has_cpu:
        torch.library.register_kernel("bitsandbytes::dequantize_4bit.out", "cpu", _cpu_out)
    _installed.update(fake_out=broken, cpu_out=not has_cpu)
    return dict(_installed)
