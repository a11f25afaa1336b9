"""Our loop must reproduce model.generate() token for token (CPU, float32, same seed, same settings)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

import engine.denoise as denoise_module
from engine.api import DenoiseSettings
from engine.denoise import denoise, device_code_path


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
        model,
        ids,
        DenoiseSettings(),
        max_new_tokens=max_new,
        eos_token_ids=gen.eos_token_id,
        pad_token_id=gen.pad_token_id,
        seed=seed,
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
            model,
            ids,
            DenoiseSettings(max_steps=steps),
            max_new_tokens=32,
            eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id,
            seed=3,
        )
        assert torch.equal(ours.sequences, reference), steps


@contextmanager
def cpu_path() -> Iterator[None]:
    """The CPU's default: host-side stopping, and only the accepted slots sampled."""
    yield


@contextmanager
def cpu_path_all_rows() -> Iterator[None]:
    """The CPU path for canvases too large to keep a step's uniforms: every row sampled, in chunks."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(denoise_module, "_SELECTIVE_LIMIT", 0)
        yield


CODE_PATHS = (cpu_path, cpu_path_all_rows, device_code_path)


@pytest.mark.parametrize("path", CODE_PATHS, ids=lambda p: p.__name__)
def test_draft_matches_generate_on_every_code_path(session, path) -> None:
    model, tok = session.model, session.tokenizer
    ids = tok("The quick brown fox", return_tensors="pt").input_ids
    gen = model.generation_config
    torch.manual_seed(1)
    reference = model.generate(ids, max_new_tokens=64).sequences
    with path():
        ours = denoise(
            model,
            ids,
            DenoiseSettings(),
            max_new_tokens=64,
            eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id,
            seed=1,
        )
    assert torch.equal(ours.sequences, reference)


def test_early_stops_match_generate_on_every_code_path(session) -> None:
    """The stopping rule fires where generate()'s fires, on each of the loop's code paths.

    A random tiny model is never stable *and* confident at the default thresholds, so the rule is made to fire
    through its confidence threshold alone (stability 0), at thresholds around the model's mean entropy.
    """
    model, tok = session.model, session.tokenizer
    ids = tok("It was the best of times", return_tensors="pt").input_ids
    gen = model.generation_config
    steps_seen = set()
    for confidence in (6.1, 6.2, 6.25, 6.3):
        settings = DenoiseSettings(confidence_threshold=confidence, stability_threshold=0)
        torch.manual_seed(0)
        reference = model.generate(
            ids, max_new_tokens=64, confidence_threshold=confidence, stability_threshold=0
        ).sequences
        runs = []
        for path in CODE_PATHS:
            with path():
                out = denoise(
                    model,
                    ids,
                    settings,
                    max_new_tokens=64,
                    eos_token_ids=gen.eos_token_id,
                    pad_token_id=gen.pad_token_id,
                    seed=0,
                )
            assert torch.equal(out.sequences, reference), (confidence, path.__name__)
            runs.append(out)
        for other in runs[1:]:
            assert other.steps == runs[0].steps and torch.equal(other.confidence, runs[0].confidence)
        steps_seen.add(runs[0].steps)
    assert any(2 < s < 96 for s in steps_seen), f"no run stopped part-way through a block: {steps_seen}"


def test_candidates_finish_alike_on_every_code_path(session) -> None:
    """K candidates that stop at different steps (the finished rows are held) give the same rows on every
    path."""
    model, tok = session.model, session.tokenizer
    ids = tok("The quick brown fox", return_tensors="pt").input_ids.repeat(3, 1)
    gen = model.generation_config
    settings = DenoiseSettings(confidence_threshold=6.2, stability_threshold=0)

    flags: list[tuple[bool, ...]] = []

    def run():
        return denoise(
            model,
            ids,
            settings,
            max_new_tokens=32,
            eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id,
            seed=5,
            on_step=lambda s: flags.append(tuple(s.finished)),
        )

    host = run()
    assert any(0 < sum(f) < 3 for f in flags), "no step had some rows finished and others not"
    for path in CODE_PATHS[1:]:
        with path():
            other = run()
        assert torch.equal(host.sequences, other.sequences) and host.steps == other.steps, path.__name__
        assert torch.equal(host.confidence, other.confidence), path.__name__
