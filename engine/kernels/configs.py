"""Launch configurations (tiles, warps, pipeline stages) chosen from what the device allows, so a kernel that
fits an H100 still launches on an RTX 4090.

Why: a block's shared memory is set by the tiles and by how many K steps Triton's pipeliner stages ahead
(`num_stages`); the old NF4 GEMM's per-weight gathers were staged element by element, so three stages of a
16 x 64 x 64 gated tile needed 204,800 B, while an RTX 3090/4090/5090 (sm_86/89/120) lets one block opt
in to 101,376 B and an H100/H200 or B200 to 232,448 B. Triton raises `OutOfResources` at the first
launch of a kernel that needs more.

Every kernel has candidates, best first, each with the shared-memory bound it was proven within:
`tests/engine/test_kernels_targets.py` compiles every kernel variant with the configuration chosen for each
of sm_80/86/89/90/100/120 (on the CPU: Triton compiles for a named target without a GPU) and fails when
`metadata.shared` exceeds the bound or the target's limit, or when registers spill. At run time the first
candidate whose bound fits the device's opt-in shared memory per block is used; where none fits (or the
compute capability is below 8.0: no bf16 tensor cores), `unavailable_reason` says why and
`engine.kernels.kernels_for` answers False, so the engine takes the torch path instead of crashing a request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

MIN_CAPABILITY = 80  # bf16 tensor cores (tl.dot on bf16) start with Ampere


@dataclass(frozen=True)
class Target:
    """A GPU architecture the kernels are built for, with its opt-in shared memory per block (bytes)."""

    capability: int
    cards: str
    shared_optin: int


TARGETS: dict[int, Target] = {
    80: Target(80, "A100", 166_912),
    86: Target(86, "RTX 3090 / A6000", 101_376),
    89: Target(89, "RTX 4090 / L40S", 101_376),
    90: Target(90, "H100 / H200", 232_448),
    100: Target(100, "B200", 232_448),
    120: Target(120, "RTX 5090", 101_376),
}


@dataclass(frozen=True)
class Config:
    """One launch configuration and the most shared memory (bytes) it needs on any target, as compiled."""

    num_warps: int
    num_stages: int
    shared_bound: int
    block_m: int = 0
    block_n: int = 0
    block_k: int = 0
    triton: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (99, 0))  # [from, below): Triton versions

    def for_triton(self, version: tuple[int, int]) -> bool:
        return self.triton[0] <= version < self.triton[1]

    def tiles(self) -> dict[str, int]:
        """The tile constexprs of a GEMM kernel (empty for the row kernels)."""
        if not self.block_m:
            return {}
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k}

    def launch(self) -> dict[str, int]:
        return {"num_warps": self.num_warps, "num_stages": self.num_stages}


# Kernel keys: which kernel, and the variant that changes its register and shared-memory needs.
NF4_GATED_BF16 = "nf4_gated_bf16"  # the experts' gate_up: two dequantized tiles, bf16 tensor-core dots
NF4_BF16 = "nf4_bf16"  # the experts' down projection and the NF4 dense linears in bf16
NF4_GATED_FP32 = "nf4_gated_fp32"  # an fp32 model's gate_up (ieee fp32 dots)
NF4_FP32 = "nf4_fp32"
INT8 = "int8"
VOCAB_TAIL = "vocab_tail"
PHILOX = "philox"
RMS_NORM = "rms_norm"
GROUPED_MM = "grouped_mm"  # engine.kernels.grouped_gemm: the bf16 experts' grouped GEMM on cc 8.x

CONFIGS: dict[str, tuple[Config, ...]] = {
    NF4_GATED_BF16: (
        # every card: no staging (Triton's pipeliner would copy the codes in 8-byte cp.async pieces, two per
        # 16 bytes; unstaged they are one 128-bit load), latency hidden by occupancy; 4 warps, so a thread's
        # share of a block's codes is one 16-byte vector (64 rows x 32 B over 128 threads). Triton 3.6 (the
        # lent image's) compiles it at 4 warps too without a spill on sm_89/sm_90 (at 8 it spills 64-72 B);
        # on sm_120 3.6 spills 32 B (3.9, which a writer's install gets, does not)
        Config(4, 1, 16_384, 16, 64, 64),
    ),
    NF4_BF16: (Config(4, 1, 16_384, 16, 64, 64),),  # staged or at 8 warps it spills on 3.6 or 3.9
    # fp32 (ieee FMA dots, an fp32 model: the CPU reference dtype) needs 8 warps not to spill
    NF4_GATED_FP32: (Config(8, 1, 24_576, 16, 32, 64),),
    NF4_FP32: (Config(8, 1, 24_576, 16, 64, 64),),
    INT8: (Config(8, 2, 32_768, 32, 64, 64),),
    VOCAB_TAIL: (Config(8, 1, 4_096),),
    PHILOX: (Config(4, 1, 4_096),),
    RMS_NORM: (Config(4, 1, 4_096),),
    GROUPED_MM: (Config(4, 3, 32_768, 32, 64, 32),),
}


class KernelsUnavailable(RuntimeError):
    """No launch configuration of a kernel fits this device: the caller takes the torch path instead."""


def triton_version() -> tuple[int, int]:
    """(major, minor) of the installed Triton, read from its metadata (no import); (0, 0) when absent."""
    import importlib.metadata

    try:
        major, minor = importlib.metadata.version("triton").split(".")[:2]
        return int(major), int(minor)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return (0, 0)


def select(
    kernel: str, shared_optin: int, capability: int, triton: tuple[int, int] | None = None
) -> Config | None:
    """The first candidate of `kernel` for this Triton that fits a block's opt-in shared memory on a device
    of `capability` (e.g. 89), or None."""
    if capability < MIN_CAPABILITY:
        return None
    version = triton or triton_version()
    return next(
        (c for c in CONFIGS[kernel] if c.shared_bound <= shared_optin and c.for_triton(version)), None
    )


def for_target(kernel: str, target: Target) -> Config | None:
    return select(kernel, target.shared_optin, target.capability)


def why_not(shared_optin: int, capability: int) -> str | None:
    """A sentence saying why the kernels cannot run on such a device, or None when every kernel has a
    configuration that fits."""
    if capability < MIN_CAPABILITY:
        return (
            f"the fused kernels need compute capability 8.0 or newer (bf16 tensor cores); this GPU has "
            f"{capability // 10}.{capability % 10}: using the torch path"
        )
    missing = [k for k in CONFIGS if select(k, shared_optin, capability) is None]
    if not missing:
        return None
    need = min(c.shared_bound for k in missing for c in CONFIGS[k])
    return (
        f"no configuration of {', '.join(missing)} fits this GPU's {shared_optin:,} B of shared memory per "
        f"block (the smallest needs {need:,} B): using the torch path"
    )


_DEVICES: dict[int, tuple[int, int]] = {}  # device index -> (opt-in shared memory, capability)
_DISABLED: dict[int, str] = {}  # device index -> why the kernels were turned off for it
_SAID: set[int] = set()


def device_limits(device: torch.device) -> tuple[int, int]:
    """(opt-in shared memory per block in bytes, compute capability as 10 * major + minor) of a CUDA
    device, read once."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _DEVICES:
        props: Any = torch.cuda.get_device_properties(index)
        shared = int(getattr(props, "shared_memory_per_block_optin", 0) or 0)
        if not shared:
            from triton.runtime import driver

            shared = int(driver.active.utils.get_device_properties(index)["max_shared_mem"])
        _DEVICES[index] = (shared, props.major * 10 + props.minor)
    return _DEVICES[index]


def unavailable_reason(device: torch.device) -> str | None:
    """Why the kernels do not run on this CUDA device (None: they do); said once in the log."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    reason = _DISABLED.get(index) or why_not(*device_limits(device))
    if reason and index not in _SAID:
        _SAID.add(index)
        log.warning("Letterpress kernels off on cuda:%d: %s", index, reason)
    return reason


def config_for(kernel: str, device: torch.device) -> Config:
    """The configuration `kernel` launches with on `device` (the interpreter: the smallest-staged one, whose
    tiles the GPU uses too)."""
    if device.type != "cuda":
        return [c for c in CONFIGS[kernel] if c.for_triton(triton_version())][-1]
    chosen = select(kernel, *device_limits(device))
    if chosen is None:
        raise KernelsUnavailable(why_not(*device_limits(device)) or kernel)
    return chosen


def launch(
    kernel_fn: Any, grid: tuple[int, ...], kernel: str, device: torch.device, *args: Any, **kw: Any
) -> Any:
    """Launch a Triton kernel with the configuration chosen for `device`. Should the device still refuse it
    (Triton's `OutOfResources` at load), the kernels are turned off for that device and
    `KernelsUnavailable` raised, which the callers answer with the torch path."""
    config = config_for(kernel, device)
    try:
        return kernel_fn[grid](*args, **kw, **config.launch())
    except Exception as exc:
        if type(exc).__name__ != "OutOfResources":
            raise
        index = device.index if device.index is not None else torch.cuda.current_device()
        _DISABLED[index] = f"{kernel} did not launch ({exc}): using the torch path"
        raise KernelsUnavailable(_DISABLED[index]) from exc
