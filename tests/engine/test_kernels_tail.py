"""The fused vocabulary tail against today's step (temperature, `sample_chunked`, `pin_in_place`, the bf16
cast), under the Triton interpreter on the CPU.

Tolerance (engine.kernels.vocab_tail): argmax, sample and pinned ids exact; the bf16 self-conditioning logits
bit-exact; entropy within 2e-5 + 1e-5 relative, confidence within 1e-6 + 1e-5 relative (fp32, summation
order).
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.kernels import DEVICE

pytest.importorskip("triton")

from engine.denoise import exponential_draws, token_entropy
from engine.kernels.vocab_tail import philox_uniforms, tail_chunked, tail_philox
from engine.lean_step import sample_chunked
from engine.sampling import pin_in_place

CAP = 30.0


def capped_logits(batch: int, length: int, vocab: int, seed: int, spread: float = 3.0) -> torch.Tensor:
    raw = torch.randn(batch, length, vocab, generator=torch.Generator().manual_seed(seed)) * spread
    return torch.tanh(raw / CAP) * CAP  # what the model's forward hands over (soft-capped fp32)


def gens(batch: int, seed: int) -> list[torch.Generator]:
    return [torch.Generator(device=DEVICE).manual_seed(seed + b) for b in range(batch)]


def reference(
    logits: torch.Tensor,
    temperature: float,
    generators: list[torch.Generator],
    fmask: torch.Tensor | None,
    fids: torch.Tensor | None,
    chunk: int | None = None,
):
    processed = logits / torch.tensor(temperature)
    if chunk is not None:
        import engine.lean_step as lean

        saved = lean.CHUNK_CELLS
        lean.CHUNK_CELLS = chunk * logits.shape[-1]
        try:
            out = sample_chunked(processed, generators, fmask, fids, exponential_draws)
        finally:
            lean.CHUNK_CELLS = saved
    else:
        out = sample_chunked(processed, generators, fmask, fids, exponential_draws)
    if fmask is not None:
        processed = pin_in_place(processed, fmask, fids)
    return (*out, processed.to(torch.bfloat16))


def assert_close(ours, ref) -> None:
    sampled, argmax, entropy, conf, sc = ours
    r_sampled, r_argmax, r_entropy, r_conf, r_sc = ref
    assert torch.equal(argmax, r_argmax)
    assert torch.equal(sampled, r_sampled)
    torch.testing.assert_close(entropy, r_entropy, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(conf, r_conf, atol=1e-6, rtol=1e-5)
    assert torch.equal(sc, r_sc)


@pytest.mark.parametrize(
    ("batch", "length", "vocab", "temperature"),
    [(1, 1, 16, 0.8), (1, 6, 1000, 0.4), (3, 5, 777, 0.63), (2, 4, 5000, 0.55)],
    ids=["one-cell", "one-row", "three-candidates-odd-vocab", "vocab-over-a-tile"],
)
def test_tail_matches_todays_step(batch, length, vocab, temperature) -> None:
    logits = capped_logits(batch, length, vocab, seed=vocab).to(DEVICE)
    ours = tail_chunked(
        logits,
        torch.tensor(temperature),
        gens(batch, 10),
        None,
        None,
        exponential_draws,
        sc_dtype=torch.bfloat16,
    )
    assert_close(ours, reference(logits, temperature, gens(batch, 10), None, None))


def test_tail_with_frozen_slots_pins_ids_confidence_and_self_conditioning() -> None:
    batch, length, vocab = 2, 7, 600
    logits = capped_logits(batch, length, vocab, seed=5).to(DEVICE)
    fmask = torch.zeros(batch, length, dtype=torch.bool)
    fmask[0, [1, 6]] = True
    fmask[1, 0] = True
    fids = torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(6))
    ours = tail_chunked(logits, 0.5, gens(batch, 3), fmask, fids, exponential_draws, sc_dtype=torch.bfloat16)
    assert_close(ours, reference(logits, 0.5, gens(batch, 3), fmask, fids))
    assert ours[1][0, 1] == fids[0, 1] and ours[1][1, 0] == fids[1, 0]


def test_chunked_sampling_draws_in_the_references_order() -> None:
    """Chunks of 2 rows, one generator for three candidates: the same variates go to the same rows."""
    batch, length, vocab = 3, 5, 300
    logits = capped_logits(batch, length, vocab, seed=7).to(DEVICE)
    one = [torch.Generator(device=DEVICE).manual_seed(42)]
    ours = tail_chunked(
        logits, 0.7, one, None, None, exponential_draws, sc_dtype=torch.bfloat16, chunk_rows=2
    )
    ref = reference(logits, 0.7, [torch.Generator(device=DEVICE).manual_seed(42)], None, None, chunk=2)
    assert_close(ours, ref)


def test_soft_cap_fused_matches_capping_first() -> None:
    raw = torch.randn(2, 3, 900, generator=torch.Generator().manual_seed(8)) * 40  # beyond the cap: saturates
    capped = torch.tanh(raw / CAP) * CAP
    ours = tail_chunked(
        raw.to(DEVICE), 0.6, gens(2, 1), None, None, exponential_draws, sc_dtype=None, softcap=CAP
    )
    ref = tail_chunked(capped.to(DEVICE), 0.6, gens(2, 1), None, None, exponential_draws, sc_dtype=None)
    assert ours[4] is None
    assert torch.equal(ours[1], ref[1])
    torch.testing.assert_close(ours[2], ref[2], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours[3], ref[3], atol=1e-5, rtol=1e-4)


def test_in_kernel_draws_sample_what_the_same_uniforms_give() -> None:
    batch, length, vocab = 2, 3, 1500
    logits = capped_logits(batch, length, vocab, seed=9).to(DEVICE)
    seeds = torch.tensor([1234, 98765], device=DEVICE)
    sampled, argmax, entropy, conf, _ = tail_philox(logits, 0.45, seeds, None, None, sc_dtype=None)
    uniforms = philox_uniforms(seeds, batch, length, vocab)
    assert uniforms.min().item() >= 0.0 and uniforms.max().item() < 1.0
    assert uniforms[:length].ne(uniforms[length:]).any()  # each row of candidates has its own stream
    probs = torch.softmax(logits / 0.45, dim=-1).view(-1, vocab)
    expected = torch.argmax(probs / -torch.log(1.0 - uniforms), dim=-1).view(batch, length)
    assert torch.equal(sampled, expected)
    assert torch.equal(argmax, torch.argmax(logits, dim=-1))
    torch.testing.assert_close(entropy, token_entropy(logits / 0.45), atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(conf, probs.amax(-1).view(batch, length), atol=1e-6, rtol=1e-5)


@pytest.mark.slow
def test_real_vocabulary_rows() -> None:
    """Two rows of the real 262,144-token vocabulary, one pinned."""
    vocab = 262_144
    logits = capped_logits(1, 2, vocab, seed=11, spread=6.0).to(DEVICE)
    fmask = torch.tensor([[False, True]])
    fids = torch.tensor([[0, 4321]])
    ours = tail_chunked(logits, 0.4, gens(1, 2), fmask, fids, exponential_draws, sc_dtype=torch.bfloat16)
    assert_close(ours, reference(logits, 0.4, gens(1, 2), fmask, fids))
