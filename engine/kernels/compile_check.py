"""Compile every kernel for a GPU architecture without a GPU (Triton's own compiler down to a cubin), so a
kernel that runs under the interpreter but would not build for a real card fails on the CPU too.

`python -m engine.kernels.compile_check --loads [CC ...]` prints, per NF4 variant, the global reads of its
K loop's innermost loop (one JSON line each), which `tests/engine/test_kernels_ptx.py` holds to a budget.

Run as `python -m engine.kernels.compile_check [CC ...]` (default: every target of `engine.kernels.configs`,
sm_80/86/89/90/100/120), in a process where `TRITON_INTERPRET` is unset (the interpreter replaces the kernels
by Python functions). Each variant is compiled with the configuration chosen for that target; "ok" means a
cubin was built AND its `metadata.shared` is within both the target's opt-in limit and the configuration's
bound AND `ptxas -v` reports no register spill. Prints one line per variant and target (shared memory,
registers, spills) and exits 1 if any failed.
"""

from __future__ import annotations

import dataclasses
import json
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
# The model's shapes: gate_up reads rows of hidden 2816 = 44 blocks, down rows of 704 = 11, a dense linear
# up to 8,192 (the vector path, `engine.kernels.nf4_moe.row_blocks`; CHUNK as `scale_chunk` picks it).
_ROWS_2816 = {"BLOCKS": True, "CHUNK": 32}
_ROWS_704 = {"BLOCKS": True, "CHUNK": 16}
_ROWS_4096 = {"BLOCKS": True, "CHUNK": 16}
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
            dict(A_DIV=8, GATED=True, ACT=1, HAS_ROUTE=False, ROUND=True, DOT_BF16=True, **_ROWS_2816),
            configs.NF4_GATED_BF16,
        ),
        Variant(
            "nf4 down bf16",
            "nf4_gemm_kernel",
            {**_NF4, "out_ptr": "*fp32"},
            dict(A_DIV=1, GATED=False, ACT=0, HAS_ROUTE=True, ROUND=True, DOT_BF16=True, **_ROWS_704),
            configs.NF4_BF16,
        ),
        Variant(
            "nf4 linear bf16",  # an NF4 dense linear (the "nf4" plan's attention): rows of 4,096 = 64 blocks
            "nf4_gemm_kernel",
            _NF4,
            dict(A_DIV=1, GATED=False, ACT=0, HAS_ROUTE=False, ROUND=True, DOT_BF16=True, **_ROWS_4096),
            configs.NF4_BF16,
        ),
        Variant(
            "nf4 gate_up fp32",
            "nf4_gemm_kernel",
            {**_NF4, "a_ptr": "*fp32", "out_ptr": "*fp32", "route_ptr": "*fp32"},
            dict(A_DIV=2, GATED=True, ACT=2, HAS_ROUTE=False, ROUND=False, DOT_BF16=False, **_ROWS_2816),
            configs.NF4_GATED_FP32,
        ),
        Variant(
            "nf4 down fp32",
            "nf4_gemm_kernel",
            {**_NF4, "a_ptr": "*fp32", "out_ptr": "*fp32", "route_ptr": "*fp32"},
            dict(A_DIV=1, GATED=False, ACT=0, HAS_ROUTE=True, ROUND=False, DOT_BF16=False, **_ROWS_704),
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


# The NF4 kernel's arguments that point at weight data (a stack's codes, scales and tables).
NF4_WEIGHT_ARGS = ("qweight_ptr", "absmax_ptr", "absmax2_ptr", "offset_ptr", "code2_ptr", "lut_ptr")
_REG = re.compile(r"%[a-z]+\d+")
_GLOBAL_READ = re.compile(r"\b(ld\.global[.\w:]*|cp\.async[.\w:]*\.shared[.\w:]*\.global[.\w:]*)")


@dataclass(frozen=True)
class LoopLoads:
    """The global-memory reads one thread issues in one iteration of an innermost loop of a kernel's PTX
    (`ld.global*` and `cp.async ... .global`), split into reads of weight data (their address derives from
    one of the weight arguments) and the rest (activations, routing)."""

    weight_loads: int
    weight_bytes: int
    other_loads: int
    other_bytes: int
    kinds: dict[str, int]

    def within_budget(self, bytes_per_load: int = 16) -> bool:
        """At most one weight read instruction per `bytes_per_load` weight bytes."""
        return self.weight_loads > 0 and self.weight_loads * bytes_per_load <= self.weight_bytes


def _read_bytes(op: str, line: str) -> int:
    if op.startswith("cp.async"):
        size = re.search(r",\s*(\d+)\s*(?:,|;)", line)
        return int(size.group(1)) if size else 0
    width = re.search(r"\.[bufs](8|16|32|64|128)\b", op)
    lanes = re.search(r"\.v(2|4|8)\b", op)
    return (int(width.group(1)) // 8 if width else 0) * (int(lanes.group(1)) if lanes else 1)


def inner_loops(ptx: str) -> list[list[str]]:
    """The bodies of the innermost loops: from each label LLVM marks "This Inner Loop Header" to the last
    branch back to it."""
    lines = ptx.splitlines()
    loops = []
    for i, line in enumerate(lines):
        label = re.match(r"^(\$L__BB\d+_\d+):", line)
        if not label or not any("This Inner Loop Header" in x for x in lines[i : i + 4]):
            continue
        branch = re.compile(rf"\bbra(?:\.uni)?\s+\{label.group(1)};")
        back = [j for j in range(i + 1, len(lines)) if branch.search(lines[j])]
        if back:
            loops.append(lines[i : back[-1] + 1])
    return loops


def _taints(ptx: str, params: list[str]) -> dict[str, frozenset[str]]:
    """For every register, the kernel arguments its value derives from (through arithmetic and loads),
    propagated to a fixed point over the whole function."""
    taint: dict[str, frozenset[str]] = {}
    instrs = []
    for raw in ptx.splitlines():
        line = re.sub(r"^\s*@!?%p\d+\s+", "", raw.split("//")[0]).strip()
        if not line or line.endswith(":") or line.startswith((".", "{", "}", "$")):
            continue
        param = re.match(r"ld\.param\S*\s+(%\w+),\s*\[\w+_param_(\d+)", line)
        if param:
            index = int(param.group(2))
            taint[param.group(1)] = frozenset([params[index]] if index < len(params) else [])
            continue
        head, _, rest = line.partition(" ")
        regs = _REG.findall(rest)
        if not regs or head.startswith(("st.", "bra", "bar", "ret", "setmaxnreg")):
            continue
        if head.startswith(("ld.", "cp.async")) and "[" in rest:
            dst_part, _, addr = rest.partition("[")
            instrs.append((_REG.findall(dst_part), _REG.findall(addr)))
        else:
            instrs.append((regs[:1], regs[1:]))
    changed = True
    while changed:
        changed = False
        for dsts, srcs in instrs:
            got = frozenset().union(*(taint.get(r, frozenset()) for r in srcs))
            for d in dsts:
                if not got <= taint.get(d, frozenset()):
                    taint[d] = taint.get(d, frozenset()) | got
                    changed = True
    return taint


def loop_loads(
    ptx: str, params: list[str], weight_args: tuple[str, ...] = NF4_WEIGHT_ARGS
) -> list[LoopLoads]:
    """Per innermost loop of `ptx`, the global reads of one iteration (`params`: the kernel's non-constexpr
    arguments in order, as the PTX numbers its parameters)."""
    taint = _taints(ptx, params)
    out = []
    for body in inner_loops(ptx):
        counts = [0, 0, 0, 0]
        kinds: dict[str, int] = {}
        for raw in body:
            line = raw.split("//")[0]
            found = _GLOBAL_READ.search(line)
            if not found:
                continue
            op = found.group(1)
            addr = line[line.index("[", found.end()) :] if op.startswith("ld") else line.split(",")[1]
            src = frozenset().union(*(taint.get(r, frozenset()) for r in _REG.findall(addr.split("]")[0])))
            weight = bool(src & set(weight_args))
            counts[0 if weight else 2] += 1
            counts[1 if weight else 3] += _read_bytes(op, line)
            kinds[op] = kinds.get(op, 0) + 1
        out.append(LoopLoads(counts[0], counts[1], counts[2], counts[3], kinds))
    return out


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
        # pointers 16-byte aligned, as Triton's launcher specializes them for torch's allocations
        aligned = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t.startswith("*")}
        kernel = triton.compile(
            ASTSource(fn=_kernel_fn(variant.kernel), signature=sig, constexprs=constants, attrs=aligned),
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


def nf4_loop_loads(capability: int) -> list[dict[str, Any]]:
    """Every NF4 variant compiled for `capability`, with the global reads of its K loop's innermost loop (the
    one that reads the codes) per thread and iteration."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("unset TRITON_INTERPRET: the interpreter's kernels cannot be compiled")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    rows = []
    for variant in variants():
        if variant.kernel != "nf4_gemm_kernel":
            continue
        built = build(variant, capability)
        loops = [x for x in loop_loads(built.ptx, list(variant.signature)) if x.weight_loads]
        rows.append(
            {
                "label": variant.label,
                "capability": capability,
                "built": built.ok,
                "loops": [dataclasses.asdict(x) for x in loops],
            }
        )
    return rows


def main(argv: list[str]) -> int:
    if argv[:1] == ["--loads"]:
        for cc in [int(a) for a in argv[1:]] or sorted(configs.TARGETS):
            for row in nf4_loop_loads(cc):
                print(json.dumps(row), flush=True)
        return 0
    failed = False
    for cc in [int(a) for a in argv] or sorted(configs.TARGETS):
        for built in compile_all(cc):
            print(built.line(), flush=True)
            failed |= not built.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
