"""How long a rewrite may come out: the length window both engines hold a rewrite to, the local one in tokens
(`engine.canvas` pins end-of-text outside it) and the text tier in words (`engine.remote.text_prompts`).

Plain arithmetic, importable without torch, so both tiers share one rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LengthWindow:
    """How long a rewrite may come out, in tokens: at least `low` (end-of-text is banned before it) and at
    most `high` (the positions from `high` on are pinned end-of-text and padding).

    Why: a warm canvas at a high strength, or a rewrite from pure noise, re-noises the end-of-text and the
    padding after the selection, and the model then writes on to the end of its canvas (a 12-word selection
    came back as 55-60 words, a re-roll of 11 words as 56). The window follows the selection and the
    instruction: "shorter" aims at 0.6x the selection, "longer" at 1.6x, any other at 1x, with room either
    side."""

    low: int
    high: int


SHORTER, LONGER = 0.6, 1.6


def length_factor(instruction: str) -> float:
    """How long the instruction wants the rewrite, as a share of the selection (Shorter / Longer / the
    same)."""
    words = instruction.lower()
    if any(k in words for k in ("shorter", "shorten", "more concise", "condense", "trim")):
        return SHORTER
    if any(k in words for k in ("longer", "lengthen", "expand", "more detail", "elaborate")):
        return LONGER
    return 1.0


def length_window(selected_tokens: int, instruction: str = "") -> LengthWindow:
    """The window for a rewrite of `selected_tokens` following `instruction` (a re-roll passes no instruction:
    it keeps its canvas's length). Shorter stays below the selection and Longer above it."""
    n = max(1, selected_tokens)
    factor = length_factor(instruction)
    target = max(1, round(factor * n))
    low = max(1, math.floor(target * 0.75))
    high = max(low + 1, math.ceil(target * 1.3) + 1)
    if factor < 1:
        high = min(high, max(1, n - 1))
        low = min(low, high - 1) if high > 1 else 0
    elif factor > 1:
        low = max(low, n + 1)
        high = max(high, low + 1)
    return LengthWindow(low, high)


__all__ = ["LONGER", "SHORTER", "LengthWindow", "length_factor", "length_window"]
