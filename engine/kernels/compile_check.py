"""Compile every kernel for a GPU architecture without a GPU (Triton's own compiler down to a cubin), so a
kernel that runs under the interpreter but would not build for a real card fails on the CPU too.

Run as `python -m engine.kernels.compile_check [CC ...]` (default 89: the RTX 4090), in a process where
`TRITON_INTERPRET` is unset (the interpreter replaces the kernels by Python functions). Prints one line per
kernel variant and exits 1 if any failed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_NF4 = {
    "a_ptr": "*bf16",
    "stride_am": "i32",
    "sorted_ptr": "*i32",
    "block_expert_ptr": "*i32",
    "route_ptr": "*bf16",
    "out_ptr": "*bf16",
    "stride_om": "i32",
    "qweight_ptr": "*u8",
    "absmax_ptr": "*u8",
    "absmax2_ptr": "*fp32",
    "offset_ptr": "*fp32",
    "code2_ptr": "*fp32",
    "lut_ptr": "*fp32",
    "q_stride": "i32",
    "s_stride": "i32",
    "s2_stride": "i32",
    "N": "i32",
    "K": "i32",
    "num_experts": "i32",
}
_TAIL = {
    "x_ptr": "*bf16",
    "stride_x": "i32",
    "temp_ptr": "*fp32",
    "q_ptr": "*fp32",
    "stride_q": "i32",
    "seed_ptr": "*i64",
    "fid_ptr": "*i64",
    "sampled_ptr": "*i64",
    "argmax_ptr": "*i64",
    "entropy_ptr": "*fp32",
    "conf_ptr": "*fp32",
    "sc_ptr": "*bf16",
    "stride_sc": "i32",
    "V": "i32",
    "rows_per_seed": "i32",
    "cap": "fp32",
}
_INT8 = {
    "a_ptr": "*bf16",
    "stride_am": "i32",
    "cb_ptr": "*i8",
    "scb_ptr": "*fp32",
    "out_ptr": "*bf16",
    "stride_om": "i32",
    "M": "i32",
    "N": "i32",
    "K": "i32",
}
_TILES = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64}


def variants() -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    """(kernel name, signature, constexprs) for what the wrappers launch on a GPU."""
    return [
        (
            "nf4_gemm_kernel",
            _NF4,
            dict(A_DIV=8, GATED=True, ACT=1, HAS_ROUTE=False, ROUND=True, DOT_BF16=True, **_TILES),
        ),
        (
            "nf4_gemm_kernel",
            {**_NF4, "out_ptr": "*fp32"},
            dict(A_DIV=1, GATED=False, ACT=0, HAS_ROUTE=True, ROUND=True, DOT_BF16=True, **_TILES),
        ),
        (
            "nf4_gemm_kernel",
            {**_NF4, "a_ptr": "*fp32", "out_ptr": "*fp32", "route_ptr": "*fp32"},
            dict(A_DIV=2, GATED=True, ACT=2, HAS_ROUTE=False, ROUND=False, DOT_BF16=False, **_TILES),
        ),
        (
            "int8_gemm_kernel",
            _INT8,
            {"ROUND": True, "DOT_BF16": True, "BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64},
        ),
        (
            "vocab_tail_kernel",
            _TAIL,
            {"SOFTCAP": True, "USE_Q": False, "WRITE_SC": True, "SC_ROUND": True, "BLOCK_V": 4096},
        ),
        (
            "vocab_tail_kernel",
            {**_TAIL, "x_ptr": "*fp32"},
            {"SOFTCAP": False, "USE_Q": True, "WRITE_SC": True, "SC_ROUND": True, "BLOCK_V": 4096},
        ),
        (
            "philox_uniforms_kernel",
            {"seed_ptr": "*i64", "out_ptr": "*fp32", "V": "i32", "rows_per_seed": "i32"},
            {"BLOCK_V": 4096},
        ),
        (
            "rms_norm_kernel",
            {"x_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*bf16", "D": "i32", "eps": "fp32"},
            {"HAS_W": True, "ROUND": True, "BLOCK_D": 4096},
        ),
    ]


def compile_all(capability: int = 89) -> list[tuple[str, str]]:
    """[(variant, "ok" or the error)] for every variant, compiled for CUDA compute capability `capability`."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("unset TRITON_INTERPRET: the interpreter's kernels cannot be compiled")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from engine.kernels import triton_src

    results = []
    for name, signature, constants in variants():
        label = f"{name}({', '.join(f'{k}={v}' for k, v in constants.items())}) sm_{capability}"
        sig = {**signature, **dict.fromkeys(constants, "constexpr")}
        try:
            kernel = triton.compile(
                ASTSource(fn=getattr(triton_src, name), signature=sig, constexprs=constants),
                target=GPUTarget("cuda", capability, 32),
            )
            results.append((label, "ok" if kernel.asm.get("cubin") else "no cubin"))
        except Exception as exc:  # noqa: BLE001  (report every variant, not just the first failure)
            results.append((label, f"{type(exc).__name__}: {exc}"[:2000]))
    return results


def main(argv: list[str]) -> int:
    failed = False
    for cc in [int(a) for a in argv] or [89]:
        for label, outcome in compile_all(cc):
            print(f"{outcome if outcome != 'ok' else 'ok':<4} {label}")
            failed |= outcome != "ok"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
