"""Compile every kernel for a GPU architecture without a GPU (Triton's own compiler down to a cubin), so a
kernel that runs under the interpreter but would not build for a real card fails on the CPU too.

Run as `python -m engine.kernels.compile_check [CC ...]` (default: every target of `engine.kernels.configs`,
sm_80/86/89/90/100/120), in a process where `TRITON_INTERPRET` is unset (the interpreter replaces the kernels
by Python functions). Each variant is compiled with the configuration chosen for that target; "ok" means a
cubin was built AND its `metadata.shared` is within both the target's opt-in limit and the configuration's
bound AND `ptxas -v` reports no register spill. Prints one line per variant and target (shared memory,
registers, spills) and exits 1 if any failed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.kernels import configs

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


@dataclass(frozen=True)
class Variant:
    """A kernel as a wrapper launches it on a GPU: its Triton function, argument types and constexprs
    (the tiles come from the configuration chosen for the target)."""

    label: str
    kernel: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    config_key: str


def variants() -> list[Variant]:
    """Every kernel variant the wrappers launch on a GPU."""
    return [
        Variant(
            "nf4 gate_up bf16",
            "nf4_gemm_kernel",
            _NF4,
            dict(A_DIV=8, GATED=True, ACT=1, HAS_ROUTE=False, ROUND=True, DOT_BF16=True),
            configs.NF4_GATED_BF16,
        ),
        Variant(
            "nf4 down bf16",
            "nf4_gemm_kernel",
            {**_NF4, "out_ptr": "*fp32"},
            dict(A_DIV=1, GATED=False, ACT=0, HAS_ROUTE=True, ROUND=True, DOT_BF16=True),
            configs.NF4_BF16,
        ),
        Variant(
            "nf4 gate_up fp32",
            "nf4_gemm_kernel",
            {**_NF4, "a_ptr": "*fp32", "out_ptr": "*fp32", "route_ptr": "*fp32"},
            dict(A_DIV=2, GATED=True, ACT=2, HAS_ROUTE=False, ROUND=False, DOT_BF16=False),
            configs.NF4_GATED_FP32,
        ),
        Variant(
            "nf4 down fp32",
            "nf4_gemm_kernel",
            {**_NF4, "a_ptr": "*fp32", "out_ptr": "*fp32", "route_ptr": "*fp32"},
            dict(A_DIV=1, GATED=False, ACT=0, HAS_ROUTE=True, ROUND=False, DOT_BF16=False),
            configs.NF4_FP32,
        ),
        Variant(
            "int8 linear bf16", "int8_gemm_kernel", _INT8, {"ROUND": True, "DOT_BF16": True}, configs.INT8
        ),
        Variant(
            "vocab tail bf16 philox",
            "vocab_tail_kernel",
            _TAIL,
            {"SOFTCAP": True, "USE_Q": False, "WRITE_SC": True, "SC_ROUND": True, "BLOCK_V": 4096},
            configs.VOCAB_TAIL,
        ),
        Variant(
            "vocab tail fp32 given q",
            "vocab_tail_kernel",
            {**_TAIL, "x_ptr": "*fp32"},
            {"SOFTCAP": False, "USE_Q": True, "WRITE_SC": True, "SC_ROUND": True, "BLOCK_V": 4096},
            configs.VOCAB_TAIL,
        ),
        Variant(
            "philox uniforms",
            "philox_uniforms_kernel",
            {"seed_ptr": "*i64", "out_ptr": "*fp32", "V": "i32", "rows_per_seed": "i32"},
            {"BLOCK_V": 4096},
            configs.PHILOX,
        ),
        Variant(
            "grouped mm bf16 (cc 8.x)",
            "grouped_mm",
            {
                "x_ptr": "*bf16",
                "w_ptr": "*bf16",
                "out_ptr": "*bf16",
                "tile_expert_ptr": "*i32",
                "tile_first_ptr": "*i32",
                "ends_ptr": "*i32",
                "N": "i32",
                **{f"stride_{s}": "i32" for s in ("xm", "xk", "we", "wn", "wk", "om", "on")},
            },
            {"K": 2816},
            configs.GROUPED_MM,
        ),
        Variant(
            "rms norm bf16",
            "rms_norm_kernel",
            {"x_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*bf16", "D": "i32", "eps": "fp32"},
            {"HAS_W": True, "ROUND": True, "BLOCK_D": 4096},
            configs.RMS_NORM,
        ),
    ]


@dataclass
class Built:
    """One variant compiled for one target, and whether it would launch there."""

    label: str
    capability: int
    config: configs.Config | None
    shared: int = 0
    registers: int = 0
    spill_bytes: int = 0
    ptx: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.config is not None and not self.problems

    def line(self) -> str:
        head = f"{'ok' if self.ok else 'FAIL':<4} sm_{self.capability:<3} {self.label:<24}"
        if self.config is None:
            return f"{head} {'; '.join(self.problems)}"
        c = self.config
        tiles = f"{c.block_m}x{c.block_n}x{c.block_k} " if c.block_m else ""
        text = (
            f"{head} {tiles}warps {c.num_warps} stages {c.num_stages}: shared {self.shared:,} B "
            f"(bound {c.shared_bound:,}, limit {configs.TARGETS[self.capability].shared_optin:,}), "
            f"{self.registers} registers, {self.spill_bytes} B spilled"
        )
        return text + (f" -- {'; '.join(self.problems)}" if self.problems else "")


def _ptxas_report(ptx: str, capability: int) -> tuple[int, int]:
    """(registers per thread, bytes spilled: stores + loads) from `ptxas -v` on the PTX, with the ptxas
    Triton ships (the metadata of a kernel compiled without a GPU holds no register count)."""
    from triton.backends.nvidia import compiler as nvidia

    try:
        ptxas = nvidia.get_ptxas(capability).path
    except TypeError:  # Triton 3.6 takes no architecture
        ptxas = nvidia.get_ptxas().path
    arch = nvidia.sm_arch_from_capability(capability)
    with tempfile.TemporaryDirectory(prefix="letterpress-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx, encoding="utf-8")
        proc = subprocess.run(
            [ptxas, "-v", f"--gpu-name={arch}", str(src), "-o", str(Path(tmp) / "kernel.cubin")],
            capture_output=True,
            text=True,
            check=False,
        )
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"ptxas failed for {arch}: {text[-500:]}")
    regs = max((int(n) for n in re.findall(r"Used (\d+) registers", text)), default=0)
    spills = sum(int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", text))
    return regs, spills


def _kernel_fn(name: str) -> Any:
    if name == "grouped_mm":
        from engine.kernels.grouped_gemm import _kernel

        return _kernel(False)
    from engine.kernels import triton_src

    return getattr(triton_src, name)


def build(variant: Variant, capability: int) -> Built:
    """Compile `variant` for `capability` with the configuration chosen for that target."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = configs.TARGETS[capability]
    config = configs.for_target(variant.config_key, target)
    built = Built(variant.label, capability, config)
    if config is None:
        built.problems.append(f"no configuration of {variant.config_key} fits {target.shared_optin:,} B")
        return built
    constants = {**variant.constexprs, **config.tiles()}
    sig = {**variant.signature, **dict.fromkeys(constants, "constexpr")}
    try:
        kernel = triton.compile(
            ASTSource(fn=_kernel_fn(variant.kernel), signature=sig, constexprs=constants),
            target=GPUTarget("cuda", capability, 32),
            options=config.launch(),
        )
    except Exception as exc:  # noqa: BLE001  (report every variant, not just the first failure)
        built.problems.append(f"{type(exc).__name__}: {exc}"[:2000])
        return built
    if not kernel.asm.get("cubin"):
        built.problems.append("no cubin")
    built.ptx = kernel.asm.get("ptx", "")
    built.shared = int(kernel.metadata.shared)
    built.registers, built.spill_bytes = _ptxas_report(built.ptx, capability)
    if built.shared > target.shared_optin:
        built.problems.append(
            f"needs {built.shared:,} B of shared memory, {target.cards} allow {target.shared_optin:,}"
        )
    if built.shared > config.shared_bound:
        built.problems.append(
            f"needs {built.shared:,} B, over its configuration's bound {config.shared_bound:,}"
        )
    if built.spill_bytes:
        built.problems.append(f"registers spill ({built.spill_bytes} B)")
    return built


def compile_all(capability: int = 89) -> list[Built]:
    """Every variant compiled for CUDA compute capability `capability`."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("unset TRITON_INTERPRET: the interpreter's kernels cannot be compiled")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    return [build(v, capability) for v in variants()]


def main(argv: list[str]) -> int:
    failed = False
    for cc in [int(a) for a in argv] or sorted(configs.TARGETS):
        for built in compile_all(cc):
            print(built.line(), flush=True)
            failed |= not built.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
