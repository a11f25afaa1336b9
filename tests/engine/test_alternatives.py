"""K alternatives are what they claim: batched row k is the single run with seed + k, across canvases.

A row whose stopping rule fired is held while slower rows finish the canvas; it must not keep drawing random
numbers meanwhile, or from its second canvas on it starts from other noise than the single run does (before
the fix: equal in 2 of 6 multi-canvas cases)."""

from __future__ import annotations

import torch

from engine.api import DenoiseSettings

# (seed, confidence threshold): thresholds where the tiny model's rows stop at different steps of a canvas
CASES = [(0, 6.205), (0, 6.21), (0, 6.215), (3, 6.205), (3, 6.21), (7, 6.21)]


def test_batched_row_k_equals_the_single_run_with_seed_plus_k(session) -> None:
    from engine.denoise import denoise

    model, tok = session.model, session.tokenizer
    gen = model.generation_config
    canvas = int(model.config.canvas_length)
    prompt = tok("The quick brown fox", return_tensors="pt").input_ids
    rows = 3
    kwargs = {"max_new_tokens": 3 * canvas, "eos_token_ids": [], "pad_token_id": gen.pad_token_id}
    staggered = 0
    mismatches = []
    for seed, confidence in CASES:
        settings = DenoiseSettings(confidence_threshold=confidence, stability_threshold=0, max_steps=24)
        flags: list[tuple[bool, ...]] = []
        batched = denoise(
            model,
            prompt.repeat(rows, 1),
            settings,
            seed=seed,
            **kwargs,
            on_step=lambda s, seen=flags: seen.append(tuple(s.finished)),
        )
        assert batched.blocks >= 2
        staggered += any(0 < sum(f) < rows for f in flags)
        for k in range(rows):
            single = denoise(model, prompt, settings, seed=seed + k, **kwargs)
            n = single.sequences.shape[1]
            if not torch.equal(batched.sequences[k, :n], single.sequences[0]):
                mismatches.append((seed, confidence, k))
    assert staggered >= 2, "too few cases where rows stopped at different steps"
    assert mismatches == [], f"batched rows differing from their single runs: {mismatches}"
