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
* the sampling rule's per-slot part (`engine.sampling.SamplingRule`: argmax, entropy, softmax, confidence
  and the one-sample multinomial) runs over row chunks of at most `CHUNK_CELLS` cells (`ChunkedFeed`), each
  chunk's Exp(1) variates drawn through the rule from the row's own generator in the reference's order;
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

from engine.sampling import ProcessedFeed, SamplingRule

CHUNK_CELLS = (
    1 << 23
)  # cells per sampling chunk: 32 rows of a 262,144 vocabulary, ~140 MB of fp32 temporaries


def chunk_rows(vocab: int) -> int:
    """Rows per sampling chunk for this vocabulary (at least one)."""
    return max(1, CHUNK_CELLS // max(1, vocab))


class ChunkedFeed(ProcessedFeed):
    """The memory-lean way to feed the sampling rule: `processed` [B, L, V] in row chunks (`chunk_rows`),
    each chunk measured and sampled before the next, so no full-size temporary exists; the samples of every
    slot are kept (accepted or not, as the reference draws them)."""

    def __init__(self, processed: torch.Tensor) -> None:
        super().__init__(processed)
        self._sampled: torch.Tensor | None = None

    def measure(
        self,
        rule: SamplingRule,
        fmask: torch.Tensor | None,
        fids: torch.Tensor | None,
        held: Sequence[bool],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        self._sampled, argmax, entropy, conf = measure_chunked(self.processed, rule, fmask, fids, held)
        return argmax, entropy, conf

    def sample(self, accepted: torch.Tensor) -> torch.Tensor:
        assert self._sampled is not None
        sampled, self._sampled = self._sampled, None
        return sampled


def measure_chunked(
    processed: torch.Tensor,
    rule: SamplingRule,
    fmask: torch.Tensor | None,
    fids: torch.Tensor | None,
    held: Sequence[bool] = (),
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sampled, argmax, entropy, confidence) of `processed` [B, L, V], chunk by chunk in the rule's order
    (`SamplingRule.chunks`); a held row's chunks draw nothing (its "sample" is its argmax, never used)."""
    batch, length, vocab = processed.shape
    device = processed.device
    sampled = torch.empty((batch, length), dtype=torch.long, device=device)
    argmax = torch.empty((batch, length), dtype=torch.long, device=device)
    entropy = torch.empty((batch, length), dtype=processed.dtype, device=device)
    conf = torch.empty((batch, length), dtype=torch.float32, device=device)
    for c in rule.chunks(batch, length, chunk_rows(vocab), held):
        b, r0, r1 = c.b, c.r0, c.r1
        frozen = None if fmask is None else fmask[b, r0:r1]
        known = None if fids is None or fmask is None else fids[b, r0:r1]
        top, entropy[b, r0:r1], probs, conf[b, r0:r1] = rule.measure(processed[b, r0:r1], frozen, known)
        argmax[b, r0:r1] = top
        if c.held:
            sampled[b, r0:r1] = top  # never used: the row is held
            del probs
            continue
        q = rule.variates((r1 - r0, vocab), c.gen, device)
        sampled[b, r0:r1] = rule.pick(probs, q)
        del probs, q
    return sampled, argmax, entropy, conf


def sample_chunked(
    processed: torch.Tensor,
    gens: Sequence[torch.Generator],
    fmask: torch.Tensor | None,
    fids: torch.Tensor | None,
    draw: Any,
    held: Sequence[bool] = (),
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sampled, argmax, entropy, confidence) of `processed` [B, L, V] without any full-size temporary: the
    chunked feed's measurement (`measure_chunked`) under a rule with generators `gens` and the Exp(1) draw
    `draw(shape, generator, device)` (`engine.sampling.exponential_draws`).

    Row b's Exp(1) variates come from `gens[b]` (or `gens[0]` for every row when there is one generator),
    chunk after chunk in row order: on the CPU that is, value for value, the single `exponential_` call the
    reference makes; on a GPU the draws are as random but not the reference's exact stream. A row marked
    `held` draws no variates. `argmax` has the frozen ids at frozen slots, and the confidence is the
    probability of the shown token (the largest probability, or the pinned token's).
    """
    return measure_chunked(processed, SamplingRule(gens, draw=draw), fmask, fids, held)
