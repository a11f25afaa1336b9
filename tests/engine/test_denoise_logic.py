"""Acceptance, renoising, stopping, frozen positions, cancellation and K candidates of our loop."""

from __future__ import annotations

import threading

import pytest
import torch

from engine.api import DenoiseSettings
from engine.denoise import Frozen, StableConfident, accept_mask, denoise, renoise, token_entropy


@pytest.mark.parametrize("scale", [0.01, 3.0, 75.0])
def test_entropy_matches_categorical(scale) -> None:
    logits = torch.randn(2, 7, 50) * scale
    logits[0, 0] = 0.0  # a flat row
    assert torch.equal(token_entropy(logits), torch.distributions.Categorical(logits=logits).entropy())


def test_accepts_lowest_entropy_tokens_within_the_bound() -> None:
    entropy = torch.tensor([[0.5, 0.01, 0.02, 0.3, 0.04]])
    chosen = accept_mask(entropy, 0.1, None)
    # sorted: 0.01, 0.02, 0.04, 0.3, 0.5 -> prefix sums minus the max: 0, 0.01, 0.03, 0.07, 0.37
    assert chosen.tolist() == [[False, True, True, True, True]]
    assert accept_mask(entropy, 0.02, None).tolist() == [[False, True, True, False, False]]


def test_lowest_entropy_token_is_always_accepted() -> None:
    entropy = torch.tensor([[5.0, 4.0, 6.0]])
    assert accept_mask(entropy, 1e-6, None).tolist() == [[False, True, False]]


def test_frozen_slots_are_never_accepted() -> None:
    entropy = torch.tensor([[0.0, 0.0, 0.5, 0.0]])
    frozen = torch.tensor([[True, False, False, True]])
    assert accept_mask(entropy, 10.0, frozen).tolist() == [[False, True, True, False]]


def test_stops_only_when_stable_and_confident() -> None:
    stop = StableConfident(threshold=1, confidence=0.1)
    ids = torch.tensor([[1, 2, 3]])
    low = torch.full((1, 3), 0.01)
    assert not stop(ids, low, None).item()  # first sight: nothing to be stable against
    assert stop(ids, low, None).item()
    assert not stop(torch.tensor([[1, 2, 4]]), low, None).item()  # changed
    assert not stop(torch.tensor([[1, 2, 4]]), torch.full((1, 3), 0.5), None).item()  # unsure


def test_stopping_ignores_frozen_slots() -> None:
    stop = StableConfident(threshold=1, confidence=0.1)
    frozen = torch.tensor([[False, True]])
    entropy = torch.tensor([[0.01, 9.0]])  # the frozen slot's entropy must not count
    stop(torch.tensor([[5, 6]]), entropy, frozen)
    assert stop(torch.tensor([[5, 6]]), entropy, frozen).item()


@pytest.mark.parametrize("threshold", [0, 1, 2, 3])
@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("with_frozen", [False, True])
def test_host_stopping_rule_agrees_with_the_tensor_rule(threshold, rows, with_frozen) -> None:
    """The CPU loop asks `rows_done`; it must fire on exactly the steps the tensor rule (the reference's)
    fires."""
    gen = torch.Generator().manual_seed(threshold * 10 + rows)
    frozen = torch.rand(rows, 8, generator=gen) < 0.3 if with_frozen else None
    tensor_rule = StableConfident(threshold, confidence=0.005)
    host_rule = StableConfident(threshold, confidence=0.005)
    ids = torch.randint(0, 3, (rows, 8), generator=gen)
    fired = 0
    for step in range(60):
        if step % 4:  # mostly stable canvases, so that the stability branch is exercised both ways
            ids = torch.where(torch.rand(rows, 8, generator=gen) < 0.05, torch.randint(0, 3, (rows, 8)), ids)
        # entropies straddling the threshold, including the float32 neighbours of 0.005 itself
        entropy = torch.full((rows, 8), 0.005) * torch.tensor([0.5, 1.0, 1.0 + 1e-7, 2.0])[step % 4]
        if step % 7 == 0:
            entropy = torch.nextafter(entropy, torch.zeros_like(entropy))
        expected = tensor_rule(ids, entropy, frozen).tolist()
        assert host_rule.rows_done(ids, entropy, frozen) == expected, step
        fired += sum(expected)
    assert fired, "the rule never fired: the test would not notice a host rule that never stops"


def _prompt(session, text: str = "It was the best of times", rows: int = 1) -> torch.Tensor:
    ids = session.tokenizer(text, return_tensors="pt").input_ids
    return ids.repeat(rows, 1)


def _run(session, ids, settings, **kw):
    gen = session.model.generation_config
    return denoise(
        session.model,
        ids,
        settings,
        max_new_tokens=kw.pop("max_new_tokens", 32),
        eos_token_ids=gen.eos_token_id,
        pad_token_id=gen.pad_token_id,
        seed=kw.pop("seed", 0),
        **kw,
    )


def test_live_steps_report_argmax_and_confidence_every_step(session) -> None:
    states = []
    out = _run(session, _prompt(session), DenoiseSettings(max_steps=6), on_step=states.append)
    assert [s.step for s in states] == list(range(1, out.steps + 1))
    for s in states:
        assert s.argmax.shape == (1, 32) and s.argmax.device.type == "cpu"
        assert ((s.confidence > 0) & (s.confidence <= 1)).all()
    assert out.syncs == out.steps  # one host copy per step


def test_frozen_tokens_are_in_every_decoder_input_and_output(session) -> None:
    mask = torch.zeros(1, 32, dtype=torch.bool)
    mask[0, 10:20] = True
    ids = torch.zeros(1, 32, dtype=torch.long)
    ids[0, 10:20] = torch.arange(300, 310)
    seen = []
    out = _run(
        session,
        _prompt(session),
        DenoiseSettings(max_steps=10),
        frozen=Frozen(mask, ids),
        max_blocks=1,
        on_decoder_input=lambda b, s, canvas: seen.append(canvas.clone()),
    )
    assert len(seen) == out.steps
    for canvas in seen:
        assert torch.equal(canvas[0, 10:20], torch.arange(300, 310))
    generated = out.sequences[0, out.prompt_length :]
    assert torch.equal(generated[10:20], torch.arange(300, 310))


def test_cancel_stops_within_one_step(session) -> None:
    cancel = threading.Event()
    states = []

    def on_step(state):
        states.append(state)
        if state.step == 3:
            cancel.set()

    out = _run(
        session,
        _prompt(session),
        DenoiseSettings(max_steps=40),
        on_step=on_step,
        cancel=cancel,
        max_new_tokens=96,
    )
    assert out.cancelled
    assert out.steps == 3 and len(states) == 3


def test_k_candidates_come_from_one_batch_and_differ(session) -> None:
    forwards = []
    out = _run(
        session,
        _prompt(session, rows=3),
        DenoiseSettings(max_steps=8),
        on_decoder_input=lambda b, s, c: forwards.append(c.shape[0]),
    )
    assert set(forwards) == {3}  # one batched forward per step, not three runs
    rows = out.sequences[:, out.prompt_length :]
    assert len({tuple(r.tolist()) for r in rows}) == 3


def test_same_seed_same_text_different_seed_different_text(session) -> None:
    a = _run(session, _prompt(session), DenoiseSettings(max_steps=8), seed=11)
    b = _run(session, _prompt(session), DenoiseSettings(max_steps=8), seed=11)
    c = _run(session, _prompt(session), DenoiseSettings(max_steps=8), seed=12)
    assert torch.equal(a.sequences, b.sequences)
    assert not torch.equal(a.sequences, c.sequences)


def test_renoise_keeps_accepted_refills_rejected_and_restores_frozen() -> None:
    sampled = torch.tensor([[10, 11, 12, 13]])
    accepted = torch.tensor([[True, False, True, False]])
    noise = torch.tensor([[90, 91, 92, 93]])
    assert renoise(sampled, accepted, noise).tolist() == [[10, 91, 12, 93]]
    fmask = torch.tensor([[False, False, False, True]])
    fids = torch.tensor([[0, 0, 0, 7]])
    assert renoise(sampled, accepted, noise, fmask, fids).tolist() == [[10, 91, 12, 7]]


@pytest.mark.parametrize("steps", [1, 2])
def test_max_steps_bounds_the_loop(session, steps: int) -> None:
    out = _run(session, _prompt(session), DenoiseSettings(max_steps=steps))
    assert out.steps <= steps * out.blocks
