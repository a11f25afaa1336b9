"""The block-diffusion training objective, reconstructed from transformers' DiffusionGemma code.

Sources (transformers 5.23, `models/diffusion_gemma/`):
- `generation_diffusion_gemma.py::generate`: the encoder writes the clean prefix into a KV cache
  (`model.model.encoder(input_ids, attention_mask, position_ids, past_key_values)`), then the decoder refines
  a canvas of `config.canvas_length` tokens with `forward(decoder_input_ids, past_key_values,
  decoder_position_ids=arange(cur_len, cur_len + canvas_length), self_conditioning_logits)`; canvases start as
  uniform random vocabulary tokens (`initialize_canvas`) and are re-noised with uniform random tokens at a
  rate that falls from t_max to t_min (`renoise_canvas`). Finished answers are followed by `<pad>`
  (`_finalize_canvas`).
- `modeling_diffusion_gemma.py::DiffusionGemmaDecoderModel.forward`: self-conditioning feeds the softmax of
  the previous logits as soft embeddings, zeroed per example by `self_conditioning_mask` ("Useful for
  training, where self-conditioning is enabled per example with some probability").

Recipe (uniform-noise discrete diffusion, as in D3PM-uniform / UDLM, with Analog-Bits-style
self-conditioning):
1. Encode the clean prefix (left-padded to the batch's longest; positions count real tokens only, as a batch
   of one sees them at inference).
2. Sample t ~ U(0, 1) per example; replace each noisable canvas token by a uniform random token with
probability t.
3. With probability 1/2 per example, run a no-grad decoder pass and feed its detached logits as
   `self_conditioning_logits` (masked per example) to the second, trained pass.
4. Loss: cross-entropy over ALL noisable canvas positions, corrupted or not. With uniform noise the model
cannot
   tell which tokens are corrupt, and the sampler takes its argmax (and entropy) at every position, so every
   position must be predicted; frozen positions (infill's pinned after-text) are excluded. `<pad>` targets
   (the slots after `<end_of_turn>`, which `_finalize_canvas` overwrites with pad anyway) weigh 0.1: at full
   weight they dominate a small model's early training, and the sampler then accepts confident pads first and
   ends drafts before they start (seen in a first run: empty drafts at step 400).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from engine.training.examples import Example


@dataclass
class Batch:
    prefix: torch.Tensor  # (B, L) left-padded
    prefix_mask: torch.Tensor  # (B, L) bool
    prefix_positions: torch.Tensor  # (B, L)
    canvas_positions: torch.Tensor  # (B, C)
    target: torch.Tensor  # (B, C)
    noisable: torch.Tensor  # (B, C) bool

    def to(self, device: str | torch.device) -> Batch:
        """The same batch on `device` (training on a GPU; the random draws follow the batch's device)."""
        return Batch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


def collate(examples: list[Example], pad_id: int) -> Batch:
    longest = max(len(e.prefix) for e in examples)
    prefix = torch.full((len(examples), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), longest), dtype=torch.bool)
    for i, e in enumerate(examples):
        prefix[i, longest - len(e.prefix) :] = torch.tensor(e.prefix)
        mask[i, longest - len(e.prefix) :] = True
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    lengths = mask.sum(-1, keepdim=True)
    canvas = len(examples[0].target)
    return Batch(
        prefix=prefix,
        prefix_mask=mask,
        prefix_positions=positions,
        canvas_positions=lengths + torch.arange(canvas)[None, :],
        target=torch.tensor([e.target for e in examples]),
        noisable=torch.tensor([e.noisable for e in examples]),
    )


def encode_prefix(model: Any, batch: Batch) -> DynamicCache:
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    model.model.encoder(
        input_ids=batch.prefix,
        attention_mask=batch.prefix_mask,
        position_ids=batch.prefix_positions,
        past_key_values=cache,
        use_cache=True,
    )
    return cache


def decode(
    model: Any,
    batch: Batch,
    canvas: torch.Tensor,
    cache: Any,
    sc_logits: torch.Tensor | None = None,
    sc_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    decoder_mask = torch.cat([batch.prefix_mask, torch.ones_like(canvas, dtype=torch.bool)], dim=1)
    return model(
        decoder_input_ids=canvas,
        past_key_values=cache,
        decoder_attention_mask=decoder_mask,
        decoder_position_ids=batch.canvas_positions,
        self_conditioning_logits=sc_logits,
        self_conditioning_mask=sc_mask,
    ).logits


def noise(
    batch: Batch, t: torch.Tensor, vocab_size: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Replace each noisable canvas token by a uniform random token with probability t (per example)."""
    shape = batch.target.shape
    dev = batch.target.device
    corrupt = (torch.rand(shape, generator=generator).to(dev) < t[:, None].to(dev)) & batch.noisable
    random_ids = torch.randint(0, vocab_size, shape, generator=generator).to(dev)
    return torch.where(corrupt, random_ids, batch.target)


def diffusion_loss(
    model: Any,
    batch: Batch,
    self_conditioning_prob: float = 0.5,
    pad_id: int | None = None,
    pad_weight: float = 1.0,
) -> torch.Tensor:
    """Mean cross-entropy over the noisable canvas positions; `<pad>` targets weigh `pad_weight`."""
    vocab = model.config.get_text_config().vocab_size
    b = batch.target.shape[0]
    cache = encode_prefix(model, batch)
    canvas = noise(batch, torch.rand(b), vocab)
    sc_mask = (torch.rand(b) < self_conditioning_prob).to(batch.target.device)
    sc_logits = None
    if bool(sc_mask.any()):
        with torch.no_grad():
            sc_logits = decode(model, batch, canvas, cache).detach()
    logits = decode(model, batch, canvas, cache, sc_logits, sc_mask if sc_logits is not None else None)
    losses = F.cross_entropy(logits.flatten(0, 1), batch.target.flatten(), reduction="none").view_as(
        batch.target
    )
    weight = batch.noisable.float()
    if pad_id is not None:
        weight = torch.where(batch.target == pad_id, weight * pad_weight, weight)
    return (losses * weight).sum() / weight.sum().clamp(min=1)


@torch.no_grad()
def denoising_scores(
    model: Any, batch: Batch, t: float, pad_id: int, seed: int = 0, mode_id: int | None = None
) -> tuple[int, int, torch.Tensor, float, dict[str, int]]:
    """(correct, total, targets, summed cross-entropy) over corrupted non-pad positions at noise level t, and
    counts over all non-pad positions: the model's correct argmaxes, the identity's (keep the noisy canvas)
    and the unigram mode's (`mode_id`), so the model can be compared with the best context-free denoiser.

    One decoder pass, argmax, no self-conditioning; the corruption is seeded so every model sees the same
    canvas.
    """
    generator = torch.Generator().manual_seed(seed)
    vocab = model.config.get_text_config().vocab_size
    b, c = batch.target.shape
    dev = batch.target.device
    corrupt = (
        (torch.rand((b, c), generator=generator) < t).to(dev) & batch.noisable & (batch.target != pad_id)
    )
    random_ids = torch.randint(0, vocab, (b, c), generator=generator).to(dev)
    canvas = torch.where(corrupt, random_ids, batch.target)
    cache = encode_prefix(model, batch)
    logits = decode(model, batch, canvas, cache).float()
    predicted = logits.argmax(-1)
    correct = int(((predicted == batch.target) & corrupt).sum())
    ce = (
        F.cross_entropy(logits[corrupt], batch.target[corrupt], reduction="sum")
        if bool(corrupt.any())
        else 0.0
    )
    content = batch.noisable & (batch.target != pad_id)
    counts = {
        "all": int(content.sum()),
        "model": int(((predicted == batch.target) & content).sum()),
        "identity": int(((canvas == batch.target) & content).sum()),
        "mode": int(((batch.target == mode_id) & content).sum()) if mode_id is not None else 0,
    }
    return correct, int(corrupt.sum()), batch.target[corrupt], float(ce), counts


def denoising_accuracy(
    model: Any, batch: Batch, t: float, pad_id: int, seed: int = 0
) -> tuple[int, int, torch.Tensor]:
    """(correct, total, targets) over corrupted non-pad positions at noise level t (see
    `denoising_scores`)."""
    correct, total, targets, _, _ = denoising_scores(model, batch, t, pad_id, seed)
    return correct, total, targets
