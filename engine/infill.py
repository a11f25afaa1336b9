"""Infill as a constrained canvas: the middle is free, the text after the gap is pinned.

Design: the prompt is the text before the gap (see `engine.prompts`). The first canvas is laid out as
`[middle slots (n) | tokens of `after` | free slots]`. The `after` tokens are frozen: written into the decoder
input at every step and never sampled, accepted or re-noised, so the model reads the ending bidirectionally
while it denoises the middle, and the ending comes back byte for byte (the returned text is
`before + middle + after` with the writer's own `after` string, never a re-decoding of it). Slots after the
pinned ending stay free: the engine cannot know whether `after` is the true end of the document, so it does
not pin an end-of-text there, and whatever the model writes in them is discarded.

Length: `n` is either given or searched. The search runs several lengths as one batch (one row each, each its
own seed) and ranks rows by the mean confidence of their middle tokens; shorter middles can end early because
special tokens inside the middle are dropped from the text.

Limits: the middle must fit in one canvas together with at least the start of `after` (n <= canvas - 1);
only the first `canvas - n` tokens of `after` are pinned (the rest still follows in the document, unseen by
the model); a middle longer than one canvas is not supported: select a shorter gap or use draft.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class InfillLayout:
    middle: int  # number of free middle slots at the start of the canvas
    pinned: int  # number of `after` tokens pinned right after them
    mask: torch.Tensor  # bool [L]
    ids: torch.Tensor  # long [L]


def layout(after_ids: list[int], middle: int, canvas_length: int) -> InfillLayout:
    if not 1 <= middle < canvas_length:
        raise ValueError(f"middle length must be between 1 and {canvas_length - 1}")
    pinned = min(len(after_ids), canvas_length - middle)
    mask = torch.zeros(canvas_length, dtype=torch.bool)
    ids = torch.zeros(canvas_length, dtype=torch.long)
    mask[middle : middle + pinned] = True
    ids[middle : middle + pinned] = torch.tensor(after_ids[:pinned], dtype=torch.long)
    return InfillLayout(middle, pinned, mask, ids)


def search_lengths(canvas_length: int, after_tokens: int) -> list[int]:
    """Candidate middle lengths for the automatic search: a spread from a phrase to half a canvas, keeping
    room to pin at least a few tokens of the ending."""
    room = canvas_length - min(after_tokens, max(4, canvas_length // 8))
    lengths = sorted({max(2, canvas_length // d) for d in (16, 8, 4, 2)})
    return [n for n in lengths if n <= room] or [max(1, min(room, canvas_length - 1))]
