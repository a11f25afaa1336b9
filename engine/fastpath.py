"""The GPU fast path: a static KV cache, the decoder step under `torch.compile(mode="reduce-overhead")` (CUDA
graphs, as `model.generate()` does with a static cache), and a grouped quantized-experts forward.

The default GPU path uses one piece of it: `sync_free_nf4_experts_forward` (device-side offsets, a grouped
GEMM over stacks dequantized into one reused buffer), switched on by the denoising loop on its device code
path, so a decoder step has no per-layer host synchronisation.

Status of the rest: written without a GPU to measure on, so it is behind a switch and OFF by default. Turn it
on with `LETTERPRESS_FASTPATH=1` (the engine) or `python -m engine bench --fastpath` (the benchmark); measure
it on a GPU (`pytest -m gpu tests/engine/tools/test_bench.py`,
`python -m engine bench --real-shape --experts grouped`) before making it the default. What is checked on the
CPU: the grouped experts forward gives the per-expert loop's result, and the batched stack dequantization is
bit-identical to dequantizing expert by expert.

Why a grouped experts forward: `nf4_experts_forward` (engine.weights.quantize) walks the hit experts one by
one; with a 256-token canvas nearly all 128 experts of every layer are hit, so each layer issues ~256 4-bit
matmuls, and for multi-token inputs bitsandbytes' `matmul_4bit` dequantizes the expert to a bf16 temporary and
then multiplies: ~1,000 kernel launches per layer, ~30,000 per forward. Here each stack (gate_up, down) is
dequantized in ONE kernel into one bf16 buffer and multiplied with ONE grouped GEMM (`torch._grouped_mm`, via
transformers' grouped forward): about 10 launches per layer, no host synchronisation. It still writes and
reads a bf16 copy of the experts (about 6x the 4-bit bytes), so its floor is ~6x the roofline; a fused 4-bit
grouped GEMM (dequantize in registers) is the next step, to be chosen by measurement.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from engine.weights import bnb_fixes
from engine.weights.quantize import NESTED_BLOCKSIZE, NF4_BLOCKSIZE, NF4Experts, NF4Weight

if TYPE_CHECKING:
    from transformers import DiffusionGemmaForBlockDiffusion

log = logging.getLogger(__name__)

GROUPED_IMPLEMENTATION = "letterpress_nf4_grouped"
ENV_SWITCH = "LETTERPRESS_FASTPATH"


def fastpath_requested() -> bool:
    """The switch: `LETTERPRESS_FASTPATH=1` turns the fast path on (CUDA only)."""
    from engine.env import env_choice

    on_off = {
        "1": "on",
        "on": "on",
        "true": "on",
        "yes": "on",
        "0": "off",
        "off": "off",
        "false": "off",
        "no": "off",
    }
    return env_choice(ENV_SWITCH, "off", on_off, meaning="off") == "on"


def dequantize_stack(weight: NF4Weight) -> torch.Tensor:
    """All matrices of an NF4 expert stack as one [count, out, in] tensor in the compute dtype.

    When every expert spans whole nested-scale groups (true for the 26B-A4B: 61,952 and 30,976 blocks of 64,
    both multiples of 256), the stack is one contiguous NF4 array and dequantizes in two kernels (scales, then
    codes); otherwise expert by expert. Same values either way.
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

    bnb_fixes.install()

    scales = functional.dequantize_blockwise(
        weight.absmax.reshape(-1),
        absmax=weight.absmax2.reshape(-1),
        code=weight.code2,
        blocksize=NESTED_BLOCKSIZE,
    ).view(count, blocks)
    scales = (scales + weight.offset.view(count, 1)).float().reshape(-1)
    dense = torch.ops.bitsandbytes.dequantize_4bit(
        weight.qweight.reshape(-1, 1),
        scales,
        NF4_BLOCKSIZE,
        "nf4",
        [count * out_f, in_f],
        weight.compute_dtype,
    )
    return dense.view(count, out_f, in_f)


SYNC_FREE_IMPLEMENTATION = "letterpress_nf4_sync_free"
_STACK_BUFFERS: dict[tuple[str, str, torch.dtype], torch.Tensor] = {}


def reused_stack(weight: NF4Weight, slot: str) -> torch.Tensor:
    """`dequantize_stack(weight)` written into one buffer per (slot, device, dtype) that every layer reuses
    (layers run one after another), instead of a new ~1 GB allocation per layer and forward: the fit counts it
    once (`engine.weights.fit.experts_buffer_bytes`). Expert by expert into the buffer when the stack is not
    one contiguous NF4 array; in one kernel per stack when it is (the 26B-A4B's are)."""
    if (
        torch.compiler.is_compiling()
    ):  # traced: inference tensors cannot go through AOT autograd; no autograd here
        with torch.no_grad():
            return _fill_stack(weight, slot)
    # A normal tensor (never an inference tensor), written without autograd: an eager prefill and a compiled
    # decoder step, inside or outside inference mode, can all write the same buffer.
    with torch.inference_mode(False), torch.no_grad():
        return _fill_stack(weight, slot)


def _fill_stack(weight: NF4Weight, slot: str) -> torch.Tensor:
    count = weight.count
    if count is None:
        raise ValueError("reused_stack needs an expert stack")
    out_f, in_f = weight.shape
    key = (slot, str(weight.qweight.device), weight.compute_dtype)
    buf = _STACK_BUFFERS.get(key)
    if buf is None or buf.shape != (count, out_f, in_f):
        _STACK_BUFFERS.pop(key, None)
        buf = torch.empty((count, out_f, in_f), dtype=weight.compute_dtype, device=weight.qweight.device)
        _STACK_BUFFERS[key] = buf
    blocks = weight.absmax.shape[-1]
    if (out_f * in_f) % NF4_BLOCKSIZE or blocks % NESTED_BLOCKSIZE:
        for e in range(count):
            buf[e].copy_(weight.dequantize(e))
        return buf
    from bitsandbytes import functional

    bnb_fixes.install()  # the corrected fake kernel (torch.compile) and the CPU kernel of dequantize_4bit.out

    scales = functional.dequantize_blockwise(
        weight.absmax.reshape(-1),
        absmax=weight.absmax2.reshape(-1),
        code=weight.code2,
        blocksize=NESTED_BLOCKSIZE,
    ).view(count, blocks)
    scales = (scales + weight.offset.view(count, 1)).float().reshape(-1)
    torch.ops.bitsandbytes.dequantize_4bit.out(
        weight.qweight.reshape(-1, 1),
        scales,
        NF4_BLOCKSIZE,
        "nf4",
        [count * out_f, in_f],
        weight.compute_dtype,
        out=buf.view(count * out_f, in_f),
    )
    return buf


def free_stack_buffers() -> None:
    """Drop the reused dequantization buffers (after an out-of-memory error, or when a model is unloaded)."""
    _STACK_BUFFERS.clear()


GROUPED_MM_ENV = (
    "LETTERPRESS_GROUPED_MM"  # "torch" | "triton" | "auto" (default): which grouped GEMM the experts use
)


def grouped_mm_kind(device: torch.device) -> str:
    """Which grouped GEMM the sync-free experts forward uses on `device`.

    "torch" (`torch.nn.functional.grouped_mm`): the CPU, and CUDA compute capability 9.x/10.x, where PyTorch
    has device-side kernels. "triton" (`engine.kernels.grouped_gemm`): CUDA 8.x (RTX 3090/4090, A100...),
    where PyTorch's op copies the offsets to the host and runs one GEMM per expert (~61 syncs per decoder
    step). `LETTERPRESS_GROUPED_MM=torch|triton` overrides the choice (the CPU tests force "triton" to run the
    8.x path under Triton's interpreter).
    """
    forced = os.environ.get(GROUPED_MM_ENV, "auto").lower()
    if forced in ("torch", "triton"):
        return forced
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 9:
        return "triton"
    return "torch"


def sync_free_nf4_experts_forward(
    self: NF4Experts, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """The GPU default experts forward: tokens sorted by expert, offsets computed on the device (histc +
    cumsum), one grouped GEMM per stack over the dequantized stack in a reused buffer. No count ever reaches
    the host, so a decoder step keeps the loop's one synchronisation (the per-expert loop read
    `bincount().tolist()` in every MoE layer: ~30 syncs per step). On compute capability 8.x the grouped GEMM
    is our Triton kernel, whose group offsets stay on the device (see `grouped_mm_kind`)."""
    from transformers.integrations.moe import grouped_mm_experts_forward

    gate_up = reused_stack(self.gate_up_proj, "gate_up")
    down = reused_stack(self.down_proj, "down")
    view = _DenseExperts(self, gate_up, down)
    if grouped_mm_kind(hidden_states.device) == "triton":
        return device_offsets_experts_forward(
            view, hidden_states.to(gate_up.dtype), top_k_index, top_k_weights
        )
    return grouped_mm_experts_forward(view, hidden_states.to(gate_up.dtype), top_k_index, top_k_weights)  # type: ignore[arg-type]


def device_offsets_experts_forward(
    experts: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """transformers' grouped experts forward (same steps, same order) with the Triton grouped GEMM: every op
    is one that runs without a host synchronisation on CUDA (sort, histc with fixed bounds, cumsum, gathers,
    index writes, the kernel launch); `tests/engine/test_syncs.py` lists the ops and fails on any that would
    sync."""
    from engine.kernels.grouped_gemm import grouped_mm_nt

    device = hidden_states.device
    num_top_k = top_k_index.size(-1)
    num_tokens, hidden_dim = hidden_states.shape
    num_experts = int(experts.num_experts)
    sample_weights = top_k_weights.reshape(-1)
    expert_ids = top_k_index.reshape(-1)
    expert_ids_g, perm = torch.sort(expert_ids)
    selected = hidden_states[perm // num_top_k]
    sample_weights_g = sample_weights[perm]
    histc_input = expert_ids_g.float() if device.type in ("cpu", "mps") else expert_ids_g.int()
    tokens_per_expert = torch.histc(histc_input, bins=num_experts, min=0, max=num_experts - 1)
    offsets = torch.cumsum(tokens_per_expert, dim=0, dtype=torch.int32)
    proj = grouped_mm_nt(selected, experts.gate_up_proj, offsets)
    proj = experts._apply_gate(proj)
    proj = grouped_mm_nt(proj, experts.down_proj, offsets)
    weighted = proj * sample_weights_g.unsqueeze(-1)
    inv_perm = torch.empty_like(perm)
    inv_perm[perm] = torch.arange(perm.size(0), device=device)
    weighted = weighted[inv_perm]
    return weighted.view(num_tokens, num_top_k, hidden_dim).sum(dim=1).to(hidden_states.dtype)


def sync_free_experts(model: DiffusionGemmaForBlockDiffusion) -> str | None:
    """Switch `model`'s experts to a forward without host synchronisations; returns the implementation it had
    (to restore), or None when nothing changed. NF4 experts get `sync_free_nf4_experts_forward`,
    full-precision ones transformers' own grouped GEMM forward."""
    text = getattr(model.config, "text_config", model.config)
    current = getattr(text, "_experts_implementation", None)
    if not any(type(m).__name__.endswith("TextExperts") for m in model.modules()):
        return None
    nf4 = any(isinstance(m, NF4Weight) and m.count for m in model.modules())
    wanted = SYNC_FREE_IMPLEMENTATION if nf4 else "grouped_mm"
    if nf4 and _triton_experts(model):  # LETTERPRESS_KERNELS=triton: the fused 4-bit kernel, also sync-free
        if current == TRITON_IMPLEMENTATION:
            return None
        _switch(model, TRITON_IMPLEMENTATION)
        return current
    if current in (wanted, GROUPED_IMPLEMENTATION):
        return None
    if nf4:
        from transformers.integrations.moe import ExpertsInterface

        ExpertsInterface.register(SYNC_FREE_IMPLEMENTATION, sync_free_nf4_experts_forward)
    model.set_experts_implementation(wanted)
    return current


TRITON_IMPLEMENTATION = "letterpress_nf4_triton"


def _triton_experts(model: nn.Module) -> bool:
    """`LETTERPRESS_KERNELS=triton` and the model's NF4 experts can run the fused kernel
    (engine.kernels.nf4_moe)."""
    from engine.kernels import kernels_for

    device = next((b.device for b in model.buffers() if not b.is_meta), torch.device("cpu"))
    if not kernels_for(device):
        return False
    from engine.kernels.nf4_moe import supports

    return all(supports(m) for m in model.modules() if type(m).__name__.endswith("TextExperts"))


def _switch(model: DiffusionGemmaForBlockDiffusion, implementation: str) -> None:
    from engine.kernels.nf4_moe import register

    register()
    model.set_experts_implementation(implementation)


class _DenseExperts:
    """The experts module seen with dense stacks, for transformers' grouped forward (everything else is the
    module's own: routing flags, activation, gate)."""

    def __init__(self, experts: object, gate_up: torch.Tensor, down: torch.Tensor) -> None:
        object.__setattr__(self, "_experts", experts)
        object.__setattr__(self, "gate_up_proj", gate_up)
        object.__setattr__(self, "down_proj", down)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._experts, name)


def grouped_nf4_experts_forward(
    self: NF4Experts, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """The experts forward with one dequantization and one grouped GEMM per stack (see the module docstring),
    into the reused buffers (no new ~1.5 GB of bf16 stacks per layer and forward)."""
    from transformers.integrations.moe import grouped_mm_experts_forward

    gate_up = reused_stack(self.gate_up_proj, "gate_up")
    down = reused_stack(self.down_proj, "down")
    view = _DenseExperts(self, gate_up, down)
    return grouped_mm_experts_forward(view, hidden_states.to(gate_up.dtype), top_k_index, top_k_weights)  # type: ignore[arg-type]


def register_grouped_experts() -> None:
    from transformers.integrations.moe import ExpertsInterface

    ExpertsInterface.register(GROUPED_IMPLEMENTATION, grouped_nf4_experts_forward)


def use_grouped_experts(model: DiffusionGemmaForBlockDiffusion) -> bool:
    """Switch a loaded NF4 model to the grouped experts forward; False if the model has no NF4 experts."""
    if not any(isinstance(m, NF4Weight) and m.count for m in model.modules()):
        return False
    register_grouped_experts()
    model.set_experts_implementation(GROUPED_IMPLEMENTATION)
    return True


class FastPath:
    """What the denoising loop swaps in on CUDA: a static cache and compiled encoder/decoder calls.

    Mirrors `DiffusionGemmaGenerationMixin._compile_functions`: the first (prefill) encoder call runs eagerly
    (its length varies), later encoder calls and every decoder step run compiled with CUDA graphs; the
    compiled functions are kept on the model so later requests reuse them.
    """

    def __init__(
        self, model: DiffusionGemmaForBlockDiffusion, *, compile: bool = True, grouped_experts: bool = True
    ) -> None:
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
        self.encoder_compiled, self.decoder_compiled = (
            cached if compile and cached is not None else (model.model.encoder, model.forward)
        )

    def cache(self, batch: int, max_length: int) -> Any:
        """A static cache big enough for the prompt and every canvas of this request (reused across requests
        when the batch matches and it is big enough, as `generate()` does)."""
        from transformers import StaticCache

        config = self.model.config.get_text_config(decoder=True)
        existing = getattr(self.model, "_letterpress_static_cache", None)
        if (
            existing is not None
            and getattr(existing, "_letterpress_batch", None) == batch
            and existing.get_max_length() >= max_length
        ):
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


def fastpath_for(model: DiffusionGemmaForBlockDiffusion, device: torch.device) -> FastPath | None:
    """The fast path when it is switched on and the model is on CUDA, else None (the plain eager loop)."""
    if device.type != "cuda" or not fastpath_requested():
        return None
    existing = getattr(model, "_letterpress_fastpath", None)
    if existing is None:
        existing = FastPath(model)
        model._letterpress_fastpath = existing  # type: ignore[assignment]
    return existing
