"""NF4 (4-bit NormalFloat, bitsandbytes) storage for every linear and every MoE expert matrix of the text
stack.

Why our own modules instead of `BitsAndBytesConfig(load_in_4bit=True)`: bitsandbytes only replaces
`nn.Linear`, so the MoE experts (3-D parameters, 91% of the 26B-A4B's weights) stay in bf16 (~46 GB), and on
DiffusionGemma it also misses the encoder/decoder linears, which are shared. Here:

* `NF4Weight` holds one matrix, or a stack of independently quantized matrices (one per expert), as plain
  buffers (packed 4-bit codes, double-quantized block scales), so a quantized model is an ordinary state dict
  that can be cached as safetensors and moved between devices.
* `NF4Linear` replaces `nn.Linear`; its forward is `bitsandbytes.matmul_4bit` (fused kernel on CUDA).
* The experts keep transformers' `DiffusionGemmaTextExperts` module; their `gate_up_proj`/`down_proj` become
  `NF4Weight` stacks and the forward is registered in transformers' `ExpertsInterface` as "letterpress_nf4".
* Modules shared by the encoder and the decoder are converted once and the same module object is put in both
  places, so shared weights are quantized once and stay shared.

What stays in higher precision, and why: the token embedding (a lookup, and the self-conditioning multiplies
the softmax of the logits by it, so it must stay a dense matrix) and the `lm_head`, which is tied to it (a
4-bit copy would cost memory instead of saving it); RMSNorm weights, router `scale`/`per_expert_scale` and
`layer_scalar` (vectors: a few KB per layer). The vision tower is not loaded at all (Letterpress is
text-only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import DiffusionGemmaForBlockDiffusion

NF4_BLOCKSIZE = 64
NESTED_BLOCKSIZE = 256
QUANT_CHUNK = 1 << 22  # weights quantized per call (a multiple of the block size)
EXPERTS_IMPLEMENTATION = "letterpress_nf4"
# Bump when the stored layout changes: quantized caches written by another format version are rebuilt.
FORMAT_VERSION = 2  # 2: the router stays 16-bit; int8 attention/dense MLP in nf4-mixed


def _bnb() -> Any:
    import bitsandbytes

    return bitsandbytes


class NF4Weight(nn.Module):
    """One (out, in) matrix, or `count` of them stacked, each NF4-quantized in blocks of 64 with
    double-quantized block scales (absmax stored as uint8 + one float per 256 blocks + one offset), as in
    QLoRA."""

    # Buffers registered in __init__ (declared so attribute reads type as tensors, not `Tensor | Module`).
    qweight: torch.Tensor
    absmax: torch.Tensor
    absmax2: torch.Tensor
    offset: torch.Tensor
    code2: torch.Tensor

    def __init__(
        self,
        shape: tuple[int, int],
        count: int | None = None,
        *,
        device: torch.device | str = "meta",
        dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        super().__init__()
        self.shape = (int(shape[0]), int(shape[1]))
        self.count = count
        self.compute_dtype = dtype
        n = self.shape[0] * self.shape[1]
        blocks = math.ceil(n / NF4_BLOCKSIZE)
        lead = () if count is None else (count,)
        self.register_buffer("qweight", torch.empty(*lead, (n + 1) // 2, dtype=torch.uint8, device=device))
        self.register_buffer("absmax", torch.empty(*lead, blocks, dtype=torch.uint8, device=device))
        self.register_buffer(
            "absmax2",
            torch.empty(*lead, math.ceil(blocks / NESTED_BLOCKSIZE), dtype=torch.float32, device=device),
        )
        self.register_buffer("offset", torch.empty(lead, dtype=torch.float32, device=device))
        self.register_buffer("code2", torch.empty(256, dtype=torch.float32, device=device))
        self._states: list[Any] | None = None

    @property
    def logical_numel(self) -> int:
        """How many weights this stands for (what the bf16 parameter had)."""
        return self.shape[0] * self.shape[1] * (self.count or 1)

    def extra_repr(self) -> str:
        return f"shape={self.shape}, count={self.count}, nf4"

    def materialize(self, device: torch.device | str) -> None:
        """Allocate real (uninitialised) storage on `device` so `store` can fill it piece by piece."""
        for name, buf in list(self._buffers.items()):
            if buf is not None and buf.is_meta:
                self._buffers[name] = torch.empty(buf.shape, dtype=buf.dtype, device=device)
        self._states = None

    def store(self, weight: torch.Tensor, index: int | None = None) -> None:
        """Quantize `weight` (out, in) on its device and keep it (as stack entry `index` for expert
        stacks)."""
        functional = _bnb().functional
        if tuple(weight.shape) != self.shape:
            raise ValueError(f"expected a {self.shape} matrix, got {tuple(weight.shape)}")
        if self.qweight.is_meta:
            self.materialize(weight.device)
        flat = weight.reshape(-1)
        packed_out = self.qweight if index is None else self.qweight[index]
        # First level (4-bit codes + one absmax per 64 weights) is block-local, so it is done in chunks to
        # bound the temporaries (~13 bytes per weight in bitsandbytes' CPU path); the second level (absmax
        # quantized in blocks of 256 around their mean) needs all the absmax values and runs once. Same bits
        # as one quantize_4bit call.
        absmax = torch.empty(self.absmax.shape[-1], dtype=torch.float32, device=weight.device)
        for start in range(0, flat.numel(), QUANT_CHUNK):
            chunk = flat[start : start + QUANT_CHUNK]
            packed, state = functional.quantize_4bit(
                chunk, blocksize=NF4_BLOCKSIZE, compress_statistics=False, quant_type="nf4"
            )
            packed_out[start // 2 : start // 2 + packed.numel()].copy_(packed.view(-1))
            first = start // NF4_BLOCKSIZE
            absmax[first : first + state.absmax.numel()].copy_(state.absmax)
            del packed, state
        offset = absmax.mean()
        qabsmax, nested = functional.quantize_blockwise(absmax - offset, blocksize=NESTED_BLOCKSIZE)
        if index is None:
            self.absmax.copy_(qabsmax)
            self.absmax2.copy_(nested.absmax)
            self.offset.copy_(offset)
        else:
            self.absmax[index].copy_(qabsmax)
            self.absmax2[index].copy_(nested.absmax)
            self.offset[index].copy_(offset)
        self.code2.copy_(nested.code)
        self._states = None

    def _apply(self, fn: Any, recurse: bool = True) -> NF4Weight:
        self._states = None  # cached QuantStates point at the old tensors
        return super()._apply(fn, recurse)

    def quant_state(self, index: int | None = None, *, flat: bool = False) -> Any:
        """The bitsandbytes QuantState of the matrix (or of stack entry `index`); cached until the buffers
        move.

        `flat=True` describes it as a 1-D array: bitsandbytes' CPU dequantize kernel mishandles rows shorter
        than a block (e.g. in_features 32 < 64), while the flat layout is exact on every backend."""
        if self._states is None or self._states[0][0] is not self.qweight:
            self._states = [(self.qweight, {})]
        cache = self._states[0][1]
        key = (-1 if index is None else index, flat)
        state = cache.get(key)
        if state is None:
            functional = _bnb().functional
            pick = (lambda t: t) if index is None else (lambda t: t[index])
            nested = functional.QuantState(
                absmax=pick(self.absmax2), code=self.code2, blocksize=NESTED_BLOCKSIZE, dtype=torch.float32
            )
            state = functional.QuantState(
                absmax=pick(self.absmax),
                shape=torch.Size([self.shape[0] * self.shape[1]] if flat else self.shape),
                code=functional.get_4bit_type("nf4", device=self.qweight.device),
                blocksize=NF4_BLOCKSIZE,
                quant_type="nf4",
                dtype=self.compute_dtype,
                offset=pick(self.offset),
                state2=nested,
            )
            cache[key] = state
        return state

    def packed(self, index: int | None = None) -> torch.Tensor:
        return self.qweight if index is None else self.qweight[index]

    def dequantize(self, index: int | None = None) -> torch.Tensor:
        """The (out, in) matrix back in the compute dtype (for checks and exports; forwards never need it)."""
        functional = _bnb().functional
        flat = functional.dequantize_4bit(self.packed(index).view(-1, 1), self.quant_state(index, flat=True))
        return flat.view(self.shape)

    def matmul(self, x: torch.Tensor, index: int | None = None) -> torch.Tensor:
        """x @ W.T with W the stored matrix: bitsandbytes' fused 4-bit GEMM on CUDA, dequantize + matmul
        elsewhere (which is what bitsandbytes does on the CPU anyway)."""
        if x.device.type == "cuda":
            return _bnb().matmul_4bit(
                x, self.packed(index).view(-1, 1).t(), quant_state=self.quant_state(index)
            )
        return torch.nn.functional.linear(x, self.dequantize(index).to(x.dtype))


class NF4Linear(NF4Weight):
    """Drop-in replacement for a bias-free `nn.Linear` whose weight is stored in NF4."""

    def __init__(self, in_features: int, out_features: int, **kwargs: Any) -> None:
        super().__init__((out_features, in_features), None, **kwargs)
        self.in_features = in_features
        self.out_features = out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.matmul(x)


class Int8Linear(nn.Module):
    """A bias-free linear stored at 8 bits: int8 codes with one absmax scale per output row (bitsandbytes'
    `int8_vectorwise_quant`, the LLM.int8 storage). The forward dequantizes to the compute dtype and
    multiplies, so activations stay 16-bit (no outlier decomposition to get wrong)."""

    CB: torch.Tensor  # buffers registered in __init__
    SCB: torch.Tensor

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        device: torch.device | str = "meta",
        dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.shape = (out_features, in_features)
        self.count = None
        self.compute_dtype = dtype
        self.register_buffer("CB", torch.empty(out_features, in_features, dtype=torch.int8, device=device))
        self.register_buffer("SCB", torch.empty(out_features, dtype=torch.float32, device=device))

    @property
    def logical_numel(self) -> int:
        return self.in_features * self.out_features

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"

    def materialize(self, device: torch.device | str) -> None:
        for name, buf in list(self._buffers.items()):
            if buf is not None and buf.is_meta:
                self._buffers[name] = torch.empty(buf.shape, dtype=buf.dtype, device=device)

    def store(self, weight: torch.Tensor, index: int | None = None) -> None:
        if tuple(weight.shape) != self.shape:
            raise ValueError(f"expected a {self.shape} matrix, got {tuple(weight.shape)}")
        codes, scales, _ = _bnb().functional.int8_vectorwise_quant(
            weight.to(torch.float16 if weight.is_cuda else torch.float32)
        )
        self._buffers["CB"] = codes.to(weight.device).contiguous()
        self._buffers["SCB"] = scales.to(device=weight.device, dtype=torch.float32).contiguous()

    def dequantize(self, index: int | None = None) -> torch.Tensor:
        return (self.CB.to(torch.float32) * (self.SCB / 127.0).unsqueeze(1)).to(self.compute_dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.dequantize().to(x.dtype))


def quantized_modules(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """Every distinct quantized module (NF4 or int8) with its first name."""
    seen: set[int] = set()
    for name, module in model.named_modules(remove_duplicate=False):
        if isinstance(module, (NF4Weight, Int8Linear)) and id(module) not in seen:
            seen.add(id(module))
            yield name, module


class NF4Experts(Protocol):
    """A transformers `*TextExperts` module after `_convert_experts`: its stacks are NF4 modules."""

    gate_up_proj: NF4Weight
    down_proj: NF4Weight
    act_fn: Callable[[torch.Tensor], torch.Tensor]


def nf4_experts_forward(
    self: NF4Experts, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """The MoE experts forward over NF4 stacks: the stock loop over hit experts, one fused 4-bit GEMM each.

    With a 256-token canvas and top-8 of 128 experts nearly every expert is hit in every forward, so the loop
    over hit experts is the common case; tokens are grouped by expert with one sort and one host sync.
    """
    gate_up: NF4Weight = self.gate_up_proj
    down: NF4Weight = self.down_proj
    num_experts = gate_up.count or 0
    top_k = top_k_index.shape[-1]
    final = torch.zeros_like(hidden_states)
    with torch.no_grad():
        flat = top_k_index.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=num_experts).tolist()
    flat_weights = top_k_weights.reshape(-1)
    start = 0
    for expert, count in enumerate(counts[:num_experts]):
        if count == 0:
            continue
        picks = order[start : start + count]
        start += count
        tokens = picks // top_k
        gate, up = gate_up.matmul(hidden_states[tokens], expert).chunk(2, dim=-1)
        out = down.matmul(self.act_fn(gate) * up, expert)
        out = out * flat_weights[picks, None]
        final.index_add_(0, tokens, out.to(final.dtype))
    return final


def register_experts_implementation() -> None:
    """Make "letterpress_nf4" a valid `experts_implementation` in transformers (idempotent)."""
    from transformers.integrations.moe import ExpertsInterface

    ExpertsInterface.register(EXPERTS_IMPLEMENTATION, nf4_experts_forward)


# ------------------------------------------------------------------------------------------------------------
# Which modules are quantized, and converting a (meta) model skeleton to NF4 modules.


def text_stacks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The text stack of a DiffusionGemmaForBlockDiffusion: encoder language model and decoder (with
    self-cond.)."""
    inner = cast("DiffusionGemmaForBlockDiffusion", model).model
    return [("model.encoder.language_model", inner.encoder.language_model), ("model.decoder", inner.decoder)]


def is_experts(module: nn.Module) -> bool:
    return type(module).__name__.endswith("TextExperts")


def convert_to_nf4(model: nn.Module, compute_dtype: torch.dtype, scheme: str = "nf4") -> int:
    """Replace the text stack's linears and experts by quantized storage following the plan of `scheme`
    (`engine.weights.plan`: "nf4" or "nf4-mixed"; the router always stays 16-bit), on meta, filled by the
    loader. Tied modules map to one converted module. Returns how many modules were converted."""
    from engine.weights.plan import linear_kind, storage_for

    register_experts_implementation()
    converted: dict[int, nn.Module] = {}  # id of the original weight Parameter -> replacement module
    experts_done: dict[int, nn.Module] = {}
    count = 0
    for _, stack in text_stacks(model):
        for parent_name, parent in list(stack.named_modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    kind = linear_kind(f"{parent_name}.{name}" if parent_name else name)
                    storage = storage_for(scheme, kind) if kind is not None else "nf4"
                    if storage not in ("nf4", "int8"):
                        continue  # the router (and anything else the plan keeps 16-bit)
                    if getattr(child, "bias", None) is not None:  # torch types it as always set
                        raise ValueError("quantized linears do not support biases; DiffusionGemma has none")
                    key = id(child.weight)
                    if key not in converted:
                        cls = Int8Linear if storage == "int8" else NF4Linear
                        converted[key] = cls(child.in_features, child.out_features, dtype=compute_dtype)
                        count += 1
                    setattr(parent, name, converted[key])
                elif is_experts(child) and not isinstance(child.gate_up_proj, NF4Weight):
                    key = id(child.gate_up_proj)
                    if key not in experts_done:
                        _convert_experts(child, compute_dtype)
                        experts_done[key] = child
                        count += 1
                    setattr(parent, name, experts_done[key])
    return count


def _convert_experts(experts: Any, compute_dtype: torch.dtype) -> None:
    # Any: a transformers `*TextExperts` module (no common class) whose stacks are 3-D Parameters.
    count, two_i, hidden = experts.gate_up_proj.shape
    _, _, inter = experts.down_proj.shape
    del experts._parameters["gate_up_proj"]
    del experts._parameters["down_proj"]
    experts.gate_up_proj = NF4Weight((two_i, hidden), count, dtype=compute_dtype)
    experts.down_proj = NF4Weight((hidden, inter), count, dtype=compute_dtype)


def nf4_modules(model: nn.Module) -> Iterator[tuple[str, NF4Weight]]:
    """Every distinct NF4 module with its first name."""
    seen: set[int] = set()
    for name, module in model.named_modules(remove_duplicate=False):
        if isinstance(module, NF4Weight) and id(module) not in seen:
            seen.add(id(module))
            yield name, module


def unquantized_text_weights(model: nn.Module) -> list[str]:
    """Names of text-stack linears/experts still in full precision (empty after a complete NF4 load)."""
    left = []
    for prefix, stack in text_stacks(model):
        for name, module in stack.named_modules():
            if name.endswith("router.proj"):
                continue  # kept 16-bit on purpose (engine.weights.plan)
            if isinstance(module, nn.Linear) or (
                is_experts(module) and isinstance(module.gate_up_proj, nn.Parameter)
            ):
                left.append(f"{prefix}.{name}")
    return left
