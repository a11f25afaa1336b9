"""The teacher's decoding settings: one small module both teacher backends import (no import circle)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    """Decoding settings: recorded with every chunk, part of what makes it reproducible."""

    temperature: float = 0.7
    top_p: float = 0.9
    repetition_penalty: float = 1.1
    max_new_tokens: int = 200
