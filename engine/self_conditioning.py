"""The decoder's self-conditioning input computed in row chunks: no full-size fp32 copy of the previous
logits.

transformers computes `softmax(logits, dtype=float32).to(bf16) @ embed` over the whole [B, L, V] array: with
bf16 logits the fp32 softmax (4 bytes per canvas x vocabulary cell) and the fp32 copy of its input that the
kernel makes (4 more) sit beside the logits themselves (2): 10 bytes per cell, the step's high-water mark as
the process sees it (a dispatch-mode tracker under `inference_mode` sees only the softmax's output: 8).

Here the decoder is called without `self_conditioning_logits` (it then passes zeros to its self-conditioning
block), and a forward pre-hook on that block replaces the zeros by the same soft embeddings, computed with the
softmax in chunks of rows into one bf16 array; the logits are dropped before the matmul. Softmax is per row
and the matmul sees the identical bf16 array, so the result is bit-identical to transformers'; the peak of
this moment is the logits + the bf16 probabilities + one chunk: about 4 bytes per cell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import DiffusionGemmaForBlockDiffusion

CHUNK_ROWS = 32  # canvas rows per softmax chunk: 32 x 262,144 cells, 64 MB of fp32 (x2 for the kernel's copy)


def soft_embeddings(
    held: list[torch.Tensor], embed: Any, dtype: torch.dtype, chunk_rows: int = CHUNK_ROWS
) -> torch.Tensor:
    """`matmul(logits.softmax(-1, dtype=float32).to(embed.weight.dtype), embed.weight) *
    embed.embed_scale.to(dtype)` with the softmax computed `chunk_rows` rows at a time. The logits are taken
    out of `held` (a one-item list), so with no other reference they are freed before the matmul."""
    logits = held.pop()
    weight = embed.weight
    shape = logits.shape
    flat = logits.reshape(-1, shape[-1])
    probs = torch.empty(flat.shape, dtype=weight.dtype, device=flat.device)
    for r0 in range(0, flat.shape[0], chunk_rows):
        probs[r0 : r0 + chunk_rows] = flat[r0 : r0 + chunk_rows].softmax(dim=-1, dtype=torch.float32)
    del flat, logits
    return torch.matmul(probs.view(shape), weight) * embed.embed_scale.to(dtype)


class ChunkedSelfConditioning:
    """Holds the previous step's logits for one decoder call and feeds them to the self-conditioning block in
    chunks (see the module docstring). `put(logits)` before the forward; nothing else keeps them."""

    def __init__(self, model: DiffusionGemmaForBlockDiffusion) -> None:
        decoder = model.model.decoder
        self._embed = decoder.embed_tokens
        self._tensor: torch.Tensor | None = None
        self._handle = decoder.self_conditioning.register_forward_pre_hook(self._hook)

    def put(self, tensor: torch.Tensor | None) -> None:
        self._tensor = tensor

    def clear(self) -> None:
        self._tensor = None

    def remove(self) -> None:
        self._tensor = None
        self._handle.remove()

    def _hook(self, module: torch.nn.Module, args: tuple[Any, ...]) -> Any:
        if self._tensor is None:
            return None
        held, self._tensor = [self._tensor], None
        inputs_embeds = args[0]
        return (inputs_embeds, soft_embeddings(held, self._embed, inputs_embeds.dtype), *args[2:])
