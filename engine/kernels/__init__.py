"""Fused GPU kernels (Triton), each beside the pure-torch path it replaces, proven on the CPU under the
interpreter.

* `nf4_moe`     a 4-bit grouped GEMM over the quantized cache's NF4 stacks: one launch per expert stack,
                tokens grouped by expert on the device, codes and scales dequantized in registers (no bf16
                stack copy, no host synchronisation); also the NF4 dense linears (one "expert", every token
                routed to it).
* `int8_gemm`   the nf4-mixed plan's int8 linears (row-wise absmax) multiplied without the fp32 weight copy.
* `vocab_tail`  the per-row, vocabulary-sized work of a denoising step (soft cap, temperature, entropy,
                argmax, confidence, the one-sample multinomial, the self-conditioning hand-off) in two passes
                over a row.
* `rmsnorm`     DiffusionGemma's RMSNorm read once and written once.
* `install`     wraps a loaded model's quantized linears and norms behind the switch (the denoising loop calls
                it); the experts switch through `engine.fastpath.sync_free_experts`.

Imports: torch, triton (lazily), `engine.weights.quantize` (the layouts) and `engine.lean_step` (the
chunking), `engine.sampling`; never `engine.fastpath`, `engine.tools` or `engine.training`.
`engine.weights` does not import this package.

The one switch is `LETTERPRESS_KERNELS`: "triton" turns the kernels on (on CUDA, and on CPU tensors when
`TRITON_INTERPRET=1` was set before Triton was imported: the interpreter, for tests), "off" (the default)
keeps today's path. It is off by default because no kernel has run on a GPU yet (see docs/performance.md):
turning it on by default is for the session that times it on one. "auto" means "triton" on CUDA when Triton
imports.

Where no launch configuration fits the card (`engine.kernels.configs`: shared memory per block, compute
capability), `kernels_for` answers False for that device and says why once in the log, and a launch the device
still refuses turns the kernels off for it: the request goes on on the torch path.

Nothing here imports Triton at import time: the kernels are decorated when first used, so the interpreter
switch, read by Triton when a kernel is decorated, can be set by a test before that.
"""

from __future__ import annotations

import importlib.util
import os

import torch

ENV_SWITCH = "LETTERPRESS_KERNELS"


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def interpreting() -> bool:
    """Triton's interpreter is on: kernels run on CPU tensors (numpy), slowly, for correctness checks."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def mode() -> str:
    """The switch's value: "triton", "auto" or "off" (anything else counts as off)."""
    value = os.environ.get(ENV_SWITCH, "off").strip().lower()
    return value if value in ("triton", "auto") else "off"


def kernels_for(device: torch.device | str) -> bool:
    """Whether the fused kernels run for tensors on `device` under the current switch."""
    dev = torch.device(device)
    chosen = mode()
    if chosen == "off" or not triton_installed():
        return False
    if dev.type == "cuda":
        from engine.kernels.configs import unavailable_reason

        return unavailable_reason(dev) is None
    return chosen == "triton" and dev.type == "cpu" and interpreting()
