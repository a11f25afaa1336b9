"""The GPU fast path: a static KV cache, the decoder step under `torch.compile(mode="reduce-overhead")` (CUDA
graphs, as `model.generate()` does with a static cache), and a grouped quantized-experts forward.

Status: written without a GPU to measure on, so it is behind a switch and OFF by default. Turn it on with
`LETTERPRESS_FASTPATH=1` (the engine) or `python -m engine bench --fastpath` (the benchmark); measure it on a GPU
(`pytest -m gpu tests/engine/test_bench.py`, `python -m engine bench --real-shape --experts grouped`) before making
it the default. What is checked on the CPU: the grouped experts forward gives the per-expert loop's result, and
the batched stack dequantization is bit-identical to dequantizing expert by expert.

Why a grouped experts forward: `nf4_experts_forward` (engine.weights.quantize) walks the hit experts one by one; with a
256-token canvas nearly all 128 experts of every layer are hit, so each layer issues ~256 4-bit matmuls, and for
multi-token inputs bitsandbytes' `matmul_4bit` dequantizes the expert to a bf16 temporary and then multiplies: ~1,000
kernel launches per layer, ~30,000 per forward. Here each stack (gate_up, down) is dequantized in ONE kernel into
one bf16 buffer and multiplied with ONE grouped GEMM (`torch._grouped_mm`, via transformers' grouped forward):
about 10 launches per layer, no host synchronisation. It still writes and reads a bf16 copy of the experts (about
6x the 4-bit bytes), so its floor is ~6x the roofline; a fused 4-bit grouped GEMM (dequantize in registers) is the
next step, to be chosen by measurement.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from torch import nn

from engine.weights.quantize import NESTED_BLOCKSIZE, NF4_BLOCKSIZE, NF4Weight

log = logging.getLogger(__name__)

GROUPED_IMPLEMENTATION = "letterpress_nf4_grouped"
ENV_SWITCH = "LETTERPRESS_FASTPATH"


def fastpath_requested() -> bool:
    """The switch: `LETTERPRESS_FASTPATH=1` turns the fast path on (CUDA only)."""
    return os.environ.get(ENV_SWITCH, "0").lower() in ("1", "on", "true", "yes")


def dequantize_stack(weight: NF4Weight) -> torch.Tensor:
    """All matrices of an NF4 expert stack as one [count, out, in] tensor in the compute dtype.

    When every expert spans whole nested-scale groups (true for the 26B-A4B: 61,952 and 30,976 blocks of 64, both
    multiples of 256), the stack is one contiguous NF4 array and dequantizes in two kernels (scales, then codes);
    otherwise expert by expert. Same values either way.
    """
    count = weight.count
    if count is None:
        raise ValueError("dequantize_stack needs an expert stack")
    out_f, in_f = weight.shape
    numel = out_f * in_f
    blocks = weight.absmax.shape[-1]
    if numel % NF4_BLOCKSIZE or blocks % NESTED_BLOCKSIZE:
        return torch.stack([weight.dequantize(e) for e in range(count)])
    from bitsandbytes import functional

    scales = functional.dequantize_blockwise(
        weight.absmax.reshape(-1), absmax=weight.absmax2.reshape(-1), code=weight.code2, blocksize=NESTED_BLOCKSIZE
    ).view(count, blocks)
    scales = (scales + weight.offset.view(count, 1)).float().reshape(-1)
    dense = torch.ops.bitsandbytes.dequantize_4bit(
        weight.qweight.reshape(-1, 1), scales, NF4_BLOCKSIZE, "nf4", [count * out_f, in_f], weight.compute_dtype
    )
    return dense.view(count, out_f, in_f)


class _DenseExperts:
    """The experts module seen with dense stacks, for transformers' grouped forward (everything else is the
    module's own: routing flags, activation, gate)."""

    def __init__(self, experts: nn.Module, gate_up: torch.Tensor, down: torch.Tensor) -> None:
        object.__setattr__(self, "_experts", experts)
        object.__setattr__(self, "gate_up_proj", gate_up)
        object.__setattr__(self, "down_proj", down)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._experts, name)


def grouped_nf4_experts_forward(
    self: nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """The experts forward with one dequantization and one grouped GEMM per stack (see the module docstring)."""
    from transformers.integrations.moe import grouped_mm_experts_forward

    gate_up = dequantize_stack(self.gate_up_proj)
    down = dequantize_stack(self.down_proj)
    view = _DenseExperts(self, gate_up, down)
    return grouped_mm_experts_forward(view, hidden_states.to(gate_up.dtype), top_k_index, top_k_weights)  # type: ignore[arg-type]


def register_grouped_experts() -> None:
    from transformers.integrations.moe import ExpertsInterface

    ExpertsInterface.register(GROUPED_IMPLEMENTATION, grouped_nf4_experts_forward)


def use_grouped_experts(model: nn.Module) -> bool:
    """Switch a loaded NF4 model to the grouped experts forward; False if the model has no NF4 experts."""
    if not any(isinstance(m, NF4Weight) and m.count for m in model.modules()):
        return False
    register_grouped_experts()
    model.set_experts_implementation(GROUPED_IMPLEMENTATION)
    return True


class FastPath:
    """What the denoising loop swaps in on CUDA: a static cache and compiled encoder/decoder calls.

    Mirrors `DiffusionGemmaGenerationMixin._compile_functions`: the first (prefill) encoder call runs eagerly
    (its length varies), later encoder calls and every decoder step run compiled with CUDA graphs; the compiled
    functions are kept on the model so later requests reuse them.
    """

    def __init__(self, model: nn.Module, *, compile: bool = True, grouped_experts: bool = True) -> None:
        self.model = model
        self.compile = compile
        if grouped_experts:
            use_grouped_experts(model)
        cached = getattr(model, "_letterpress_compiled", None)
        if compile and cached is None:
            cached = (
                torch.compile(model.model.encoder, mode="reduce-overhead", fullgraph=False),
                torch.compile(model.forward, mode="reduce-overhead", fullgraph=False),
            )
            model._letterpress_compiled = cached  # type: ignore[assignment]
        self.encoder_compiled, self.decoder_compiled = cached if compile else (model.model.encoder, model.forward)

    def cache(self, batch: int, max_length: int) -> Any:
        """A static cache big enough for the prompt and every canvas of this request (reused across requests when
        the batch matches and it is big enough, as `generate()` does)."""
        from transformers import StaticCache

        config = self.model.config.get_text_config(decoder=True)
        existing = getattr(self.model, "_letterpress_static_cache", None)
        if (existing is not None and getattr(existing, "_letterpress_batch", None) == batch
                and existing.get_max_length() >= max_length):
            existing.reset()
            return existing
        cache = StaticCache(config=config, max_cache_len=max_length)
        cache._letterpress_batch = batch  # type: ignore[attr-defined]
        self.model._letterpress_static_cache = cache  # type: ignore[assignment]
        return cache

    def encoder(self, prefill: bool) -> Any:
        return self.model.model.encoder if prefill or not self.compile else self.encoder_compiled

    def decoder(self, **kwargs: Any) -> Any:
        if self.compile:
            torch.compiler.cudagraph_mark_step_begin()
        return self.decoder_compiled(**kwargs)


def fastpath_for(model: nn.Module, device: torch.device) -> FastPath | None:
    """The fast path when it is switched on and the model is on CUDA, else None (the plain eager loop)."""
    if device.type != "cuda" or not fastpath_requested():
        return None
    existing = getattr(model, "_letterpress_fastpath", None)
    if existing is None:
        existing = FastPath(model)
        model._letterpress_fastpath = existing  # type: ignore[assignment]
    return existing
