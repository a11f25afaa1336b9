"""Our loop must reproduce model.generate() token for token (CPU, float32, same seed, same settings)."""

from __future__ import annotations

import pytest
import torch

from engine.api import DenoiseSettings
from engine.denoise import denoise


@pytest.mark.parametrize(
    ("prompt", "seed", "max_new"),
    [("It was the best of times, it was", 0, 32), ("The quick brown fox", 1, 64), ("A writer drafts", 7, 96)],
)
def test_unconstrained_draft_matches_generate(session, prompt: str, seed: int, max_new: int) -> None:
    model, tok = session.model, session.tokenizer
    ids = tok(prompt, return_tensors="pt").input_ids
    gen = model.generation_config
    torch.manual_seed(seed)
    reference = model.generate(ids, max_new_tokens=max_new).sequences
    ours = denoise(
        model, ids, DenoiseSettings(), max_new_tokens=max_new, eos_token_ids=gen.eos_token_id,
        pad_token_id=gen.pad_token_id, seed=seed,
    )
    assert torch.equal(ours.sequences, reference)
    assert ours.steps > 0


def test_equivalence_holds_with_short_schedules(session) -> None:
    model, tok = session.model, session.tokenizer
    ids = tok("In the morning the harbour", return_tensors="pt").input_ids
    gen = model.generation_config
    for steps in (1, 5, 12):
        torch.manual_seed(3)
        reference = model.generate(ids, max_new_tokens=32, max_denoising_steps=steps).sequences
        ours = denoise(
            model, ids, DenoiseSettings(max_steps=steps), max_new_tokens=32, eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id, seed=3,
        )
        assert torch.equal(ours.sequences, reference), steps
