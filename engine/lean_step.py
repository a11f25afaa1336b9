"""The memory-lean denoising step: every full-vocabulary array is freed, reused or chunked as soon as it is
consumed.

One step works on B x L x V cells (3 candidates x 256 canvas x 262,144 vocabulary = 201 million). The plain
way (`generate()`'s) keeps the logits, the processed logits, their fp32 softmax, the Exp(1) draws, the
entropy's two temporaries and the self-conditioning copy alive at once: ~26 bytes per cell, 5.3 GB at three
candidates. Here:

* the self-conditioning logits are handed to the decoder through `engine.sampling.SelfConditioningHandoff`, so
  no frame of ours (or of `DiffusionGemmaForBlockDiffusion.forward`) keeps them alive once the decoder body
  has read them: they are gone before the lm_head and the soft cap allocate the new logits;
* the temperature is applied in place on the forward's own fp32 logits (the same division, so the same bits);
* argmax, entropy, softmax, confidence and the one-sample multinomial run over row chunks of at most
  `CHUNK_CELLS` cells, drawing each chunk's Exp(1) variates from the row's own generator in the reference's
  order;
* the rows that already stopped are not rewritten with their previous logits (the reference does it only to
  feed values that are never used again: a finished row's canvas, argmax and confidence are held, its stopping
  flag stays set, and rows never see each other), so no extra full-size `where` and no second entropy pass;
* an infill's pinned self-conditioning is written in place at the frozen slots instead of a second full array
  (`engine.sampling.pin_in_place`).

Measured with `engine.tools.step_memory` (peak of live tensor bytes through a denoising run, real vocabulary,
tiny body).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from engine.sampling import token_entropy

CHUNK_CELLS = (
    1 << 23
)  # cells per sampling chunk: 32 rows of a 262,144 vocabulary, ~140 MB of fp32 temporaries


def chunk_rows(vocab: int) -> int:
    """Rows per sampling chunk for this vocabulary (at least one)."""
    return max(1, CHUNK_CELLS // max(1, vocab))


def sample_chunked(
    processed: torch.Tensor,
    gens: Sequence[torch.Generator],
    fmask: torch.Tensor | None,
    fids: torch.Tensor | None,
    draw: Any,
    held: Sequence[bool] = (),
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sampled, argmax, entropy, confidence) of `processed` [B, L, V] without any full-size temporary.

    A row marked `held` (its stopping rule fired; the loop keeps its canvas) draws no variates: its generator
    stays where the single run with its seed leaves it, so its next canvas starts from the same noise.

    Row b's Exp(1) variates come from `gens[b]` (or `gens[0]` for every row when there is one generator),
    chunk after chunk in row order: on the CPU that is, value for value, the single `exponential_` call the
    reference makes; on a GPU the draws are as random but not the reference's exact stream.
    `draw(shape, generator, device)` makes the variates (`engine.sampling.exponential_draws`). `argmax` has
    the frozen ids at frozen slots, and the confidence is the probability of the shown token (the largest
    probability, or the pinned token's).
    """
    batch, length, vocab = processed.shape
    device = processed.device
    step = chunk_rows(vocab)
    sampled = torch.empty((batch, length), dtype=torch.long, device=device)
    argmax = torch.empty((batch, length), dtype=torch.long, device=device)
    entropy = torch.empty((batch, length), dtype=processed.dtype, device=device)
    conf = torch.empty((batch, length), dtype=torch.float32, device=device)
    for b in range(batch):
        gen = gens[b] if len(gens) > 1 else gens[0]
        for r0 in range(0, length, step):
            r1 = min(length, r0 + step)
            rows = processed[b, r0:r1]
            top = torch.argmax(rows, dim=-1)
            entropy[b, r0:r1] = token_entropy(rows)
            probs = torch.softmax(rows, dim=-1, dtype=torch.float32)
            if fmask is not None:
                assert fids is not None
                top = torch.where(fmask[b, r0:r1], fids[b, r0:r1], top)
                conf[b, r0:r1] = probs.gather(-1, top.unsqueeze(-1)).squeeze(-1)
            else:
                conf[b, r0:r1] = torch.amax(probs, dim=-1)
            argmax[b, r0:r1] = top
            if b < len(held) and held[b] and len(gens) > 1:
                sampled[b, r0:r1] = top  # never used: the row is held
                del probs
                continue
            q = draw((r1 - r0, vocab), gen, device)
            torch.div(probs, q, out=q)
            del probs
            sampled[b, r0:r1] = torch.argmax(q, dim=-1)
            del q
    return sampled, argmax, entropy, conf
