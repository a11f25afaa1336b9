"""A warm-started canvas: denoising that starts from text the writer (or an earlier suggestion) already has.

The reference sampler (`DiffusionGemmaGenerationMixin.generate()`) starts every canvas from uniform random tokens
and runs the whole temperature schedule. A diffusion model does not need to: its denoiser reads any canvas. A
`WarmCanvas` says, per canvas position,

- **pinned**: the position holds a known token that is never sampled, accepted, re-noised nor counted by the
  stopping rule, exactly like infill's ending (`engine.infill`); it is merged into the loop's frozen mask, so the
  model's self-conditioning there is a one-hot belief in the pinned token. A pinned token comes back byte for
  byte. So that it cannot be cut off, end-of-text and padding are banned at every free position *before* the
  last pinned one (otherwise the model could end the text in front of a pinned word and EOS padding would
  erase it);
- **noised**: the position starts as uniform noise, like every position of a cold canvas;
- **kept** (neither): the position starts as its given token and is exempt from re-noising: it holds its token
  until the model accepts a sampled token there (the reference's `accept_canvas` without the `renoise_canvas`
  that follows it). The model sees it clean at every step and may revise it; the final text is the argmax
  canvas, as always.

The **noise share** `s` (0..1) is the fraction of the unpinned positions that start as noise, chosen uniformly at
random (from the request's seed, on a generator of its own: the sampler's generators draw exactly what they draw
for a cold canvas). The temperature schedule starts at the matching point: of the `N` steps whose temperatures
run from `t_max` down to `t_min`, only the last `ceil(s * N)` run (at least one), so a light edit runs few,
cool steps and `s = 1` runs the full schedule from a canvas that is all noise but for the pins. "Rewrite
strength" in the editor is this noise share. With `s = 1` and no pins a warm canvas is a cold one: the loop makes
the same draws and returns the same tokens as `generate()` (checked by the tests).

Layout: the given text is tokenized, followed by one end-of-text token and padding to the end of its last
canvas; the tokens after the text are positions like any other (noised or kept), so a warm rewrite can grow or
shrink only by what the model writes in noised positions and by moving its end-of-text; a light edit therefore
changes length little. With `WarmStart.pin_end` the end-of-text and the padding after it are pinned too: the
text keeps its token count and ends exactly where it ended (a re-roll in place whose last word is kept; without
it a noised tail after a pinned last word let the model write on past it, e.g. "sein.ies. eyes up his…").
Pins are character ranges of the text; each maximal pinned run is tokenized on its own (checked to decode back
to exactly its characters), so pinned tokens never straddle a pin's edge.

Infill (`infill_plan`): the canvas text is the middle; its token count fixes the middle length (no length
search), its pins are pinned inside the middle, and infill's pinned ending stays where `engine.infill` puts it.

Limits: every row of a batch (the K alternatives) shares the canvas text and pins but draws its own noised
positions (seed, seed+1, ...). The warm canvas covers as many whole canvases as the text needs; blocks after it
start cold. An infill middle must fit in its one canvas with at least one token of the ending.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
import dataclasses
from dataclasses import dataclass

import torch

from engine.api import EngineError, WarmStart
from engine.special_tokens import text_ids


class CanvasError(EngineError):
    """The warm canvas cannot be laid out (pins outside the text, a pin that does not tokenize back)."""

    kind = "canvas_error"


@dataclass(frozen=True)
class BlockPlan:
    """The warm start of one canvas (block): tensors of shape [B, L] on the loop's device."""

    ids: torch.Tensor  # long: the given token at every position
    pinned: torch.Tensor  # bool: never resampled
    kept: torch.Tensor  # bool: start as the given token, exempt from re-noising
    ban: tuple[torch.Tensor, torch.Tensor] | None  # (rows, cols) of free positions before the last pin
    stop_ids: torch.Tensor  # long [S]
    start_step: int  # the schedule runs cur_step = start_step .. 1
    has_pins: bool = False  # decided on the host, so the loop never reads a device tensor for it

    def merge_frozen(
        self, fmask: torch.Tensor | None, fids: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The loop's frozen mask and ids with this block's pins added."""
        if not self.has_pins:
            return fmask, fids
        if fmask is None or fids is None:
            return self.pinned, self.ids
        return fmask | self.pinned, torch.where(self.pinned, self.ids, fids)

    def start_canvas(self, canvas: torch.Tensor) -> torch.Tensor:
        """The first decoder input: kept positions hold their token (noise and pins are already in `canvas`)."""
        return torch.where(self.kept, self.ids, canvas)

    def suppress_stops(self, processed: torch.Tensor) -> torch.Tensor:
        """Ban end-of-text/padding before the last pin (in place on the step's own tempered logits; the indices
        were found on the host once per canvas, so this adds no synchronisation)."""
        if self.ban is None:
            return processed
        rows, cols = self.ban
        processed[rows[:, None], cols[:, None], self.stop_ids[None, :]] = torch.finfo(processed.dtype).min / 2
        return processed

    def hold(self, new_canvas: torch.Tensor, canvas: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
        """Kept positions that were not accepted this step keep their token instead of fresh noise."""
        return torch.where(self.kept & ~accepted, canvas, new_canvas)


@dataclass(frozen=True)
class WarmCanvas:
    """A warm start over the first `ids.shape[1] // L` canvases of a request (host tensors, [B, T])."""

    ids: torch.Tensor
    pinned: torch.Tensor
    noised: torch.Tensor
    noise: float
    stop_ids: tuple[int, ...]
    canvas_length: int
    text_tokens: int  # tokens of the given text (before its end-of-text)

    @property
    def blocks(self) -> int:
        return self.ids.shape[1] // self.canvas_length

    def first_rows(self, rows: int) -> WarmCanvas:
        """The same warm start for only the first `rows` candidates (when the memory budget runs fewer)."""
        return dataclasses.replace(self, ids=self.ids[:rows], pinned=self.pinned[:rows], noised=self.noised[:rows])

    def start_step(self, max_steps: int) -> int:
        return start_step(self.noise, max_steps)

    def block(self, index: int, max_steps: int, device: torch.device) -> BlockPlan | None:
        """The plan of canvas `index`, or None past the warm canvases (those start cold)."""
        if index >= self.blocks:
            return None
        L = self.canvas_length
        sl = slice(index * L, (index + 1) * L)
        pinned = self.pinned[:, sl]  # host tensors: every decision below is made before anything moves
        ban = None
        # No end-of-text before the last pin, nor before the last kept token of the given text: an end in an
        # earlier canvas would silently drop kept text of the later ones (the request ends there). Per row, as
        # each row keeps its own positions.
        positions = torch.arange(self.ids.shape[1])
        kept_text = ~self.pinned & ~self.noised & (positions < self.text_tokens)
        anchors = self.pinned | kept_text
        if bool(anchors.any()):
            last = torch.where(anchors, positions, -1).amax(dim=1, keepdim=True)  # [B, 1]; -1: nothing to keep
            before = (positions[None, :] <= last)[:, sl] & ~pinned  # the last kept token itself too
            if bool(before.any()):
                rows, cols = before.nonzero(as_tuple=True)
                ban = (rows.to(device), cols.to(device))
        return BlockPlan(
            ids=self.ids[:, sl].to(device),
            pinned=pinned.to(device),
            kept=(~pinned & ~self.noised[:, sl]).to(device),
            ban=ban,
            stop_ids=torch.tensor(self.stop_ids, dtype=torch.long, device=device),
            start_step=self.start_step(max_steps),
            has_pins=bool(pinned.any()),
        )


def start_step(noise: float, max_steps: int) -> int:
    """Where a canvas with this noise share enters the schedule: the last ceil(noise x N) steps run (>= 1)."""
    return max(1, min(max_steps, math.ceil(noise * max_steps - 1e-9)))


def segment_ids(tokenizer: object, text: str, pins: Sequence[tuple[int, int]], decode: object) -> tuple[
    list[int], list[bool]
]:
    """Token ids of `text` with a pinned flag each: pinned runs are tokenized on their own, so a pin's tokens
    cover exactly its characters. `decode(ids) -> str` is the display decoder, used to check the round trip."""
    merged = merge_ranges(pins, len(text))
    ids: list[int] = []
    flags: list[bool] = []
    pos = 0
    for start, end in [*merged, (len(text), len(text))]:
        for piece, pin in ((text[pos:start], False), (text[start:end], True)):
            if not piece:
                continue
            piece_ids = text_ids(tokenizer, piece)  # typed control markers stay text
            if pin and decode(piece_ids) != piece:  # type: ignore[operator]
                raise CanvasError(
                    f"The pinned text {piece!r} does not survive tokenization unchanged; pin whole words instead."
                )
            ids.extend(piece_ids)
            flags.extend([pin] * len(piece_ids))
        pos = end
    return ids, flags


def merge_ranges(pins: Sequence[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """Sorted, merged, validated character ranges (`start < end <= length`)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted((int(s), int(e)) for s, e in pins):
        if not 0 <= start < end <= length:
            raise CanvasError(
                f"The pin {start}..{end} is outside the canvas text (0..{length}); give character ranges inside it."
            )
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def plan(
    tokenizer: object,
    warm: WarmStart,
    *,
    rows: int,
    canvas_length: int,
    eos_id: int,
    pad_id: int,
    stop_ids: Sequence[int],
    seed: int,
    decode: object,
    max_tokens: int | None = None,
) -> WarmCanvas:
    """Lay `warm` out on whole canvases for `rows` batch rows; row r draws its noised positions from seed + r."""
    ids, flags = segment_ids(tokenizer, warm.text, warm.pins, decode)
    if max_tokens is not None and len(ids) + 1 > max_tokens:
        raise CanvasError(
            f"The text to start from takes {len(ids) + 1} tokens, more than the {max_tokens} this request can "
            "write; select less text."
        )
    text_tokens = len(ids)
    total = max(1, math.ceil((text_tokens + 1) / canvas_length)) * canvas_length
    layout = ids + [eos_id] + [pad_id] * (total - text_tokens - 1)
    pin_row = flags + [warm.pin_end] * (total - text_tokens)
    ids_t = torch.tensor([layout] * rows, dtype=torch.long)
    pinned = torch.tensor([pin_row] * rows, dtype=torch.bool)
    noised = torch.zeros(rows, total, dtype=torch.bool)
    free = (~pinned[0]).nonzero().squeeze(1)
    count = round(warm.noise * free.numel())
    for r in range(rows):
        g = torch.Generator().manual_seed(seed + r + 0x5EED)
        chosen = free[torch.randperm(free.numel(), generator=g)[:count]]
        noised[r, chosen] = True
    return WarmCanvas(ids_t, pinned, noised, warm.noise, tuple(stop_ids), canvas_length, text_tokens)


def infill_plan(
    tokenizer: object,
    warm: WarmStart,
    *,
    frozen_mask: torch.Tensor,
    frozen_ids: torch.Tensor,
    middle_ids: list[int],
    middle_pins: list[bool],
    stop_ids: Sequence[int],
    seed: int,
) -> WarmCanvas:
    """The warm start of an infill canvas laid out by `engine.infill`: `middle_ids` in the middle slots (pinned
    where `middle_pins` says), the ending frozen as infill froze it, the noise share over the other free slots."""
    rows, length = frozen_mask.shape
    n = len(middle_ids)
    ids = frozen_ids.clone()
    ids[:, :n] = torch.tensor(middle_ids, dtype=torch.long)
    pinned = torch.zeros(rows, length, dtype=torch.bool)
    pinned[:, :n] = torch.tensor(middle_pins, dtype=torch.bool)
    noised = torch.zeros(rows, length, dtype=torch.bool)
    free = (~pinned[0] & ~frozen_mask[0]).nonzero().squeeze(1)
    count = round(warm.noise * free.numel())
    for r in range(rows):
        g = torch.Generator().manual_seed(seed + r + 0x5EED)
        noised[r, free[torch.randperm(free.numel(), generator=g)[:count]]] = True
    return WarmCanvas(ids, pinned, noised, warm.noise, tuple(stop_ids), length, n)


def cold(warm: WarmStart | None) -> bool:
    """A warm start that changes nothing: all noise, no pins (the loop then runs exactly as `generate()`)."""
    return warm is None or (warm.noise >= 1.0 and not warm.pins and not warm.pin_end)
