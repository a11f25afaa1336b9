"""The reference sampler's plain kernels, kept to prove the loop's faster ones against (never run by a
request).

`generate()` draws one multinomial sample per slot from the full Exp(1) variates of every row; the loop's one
sampling rule (`engine.sampling.SamplingRule`) computes only what it needs, whichever way it is fed
(`AcceptedOnlyFeed` on the CPU, `engine.lean_step.ChunkedFeed` elsewhere). These are the straightforward
versions, draw for draw what the reference does, that the benchmark's tests compare the rule with.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.sampling import exponential_draws, noise_ids


def sample_one(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """`torch.multinomial(probs, 1, generator=generator).squeeze(-1)` for 2-D `probs`, draw for draw.

    It is ATen's own one-sample path (argmax of p / q with q ~ Exp(1), the same `exponential_` call on the
    same generator, so the same ids) minus its argument checks, which read `max`, `min` and `sum` back to the
    host: two device synchronisations per step on a GPU. Our probabilities come from a softmax, so the checks
    cannot fail.
    """
    q = torch.empty_like(probs).exponential_(1, generator=generator)
    torch.div(probs, q, out=q)
    return torch.argmax(q, dim=-1)


def draw_step(
    gens: Sequence[torch.Generator], shape: tuple[int, int, int], device: torch.device
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The random numbers one step consumes, in the reference's order on each generator: Exp(1) variates for
    the one-sample multinomial (B x L x V), then the uniform renoising ids (B x L). Neither depends on the
    model's output. (Drawing them on a helper thread during the forward was measured and rejected: on a busy
    CPU the GIL hand-offs cost more than the ~0.3 ms of draws.)"""
    batch, length, vocab = shape
    rows = batch * length if len(gens) == 1 else length
    qs = [exponential_draws((rows, vocab), g, device) for g in gens]
    return qs, noise_ids(vocab, (batch, length), gens, device)


def sample_with(probs: torch.Tensor, qs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The one-sample multinomial of `probs` [B, L, V] given pre-drawn Exp(1) variates (see `sample_one`)."""
    batch, length, vocab = probs.shape
    if len(qs) == 1:
        q = qs[0]
        torch.div(probs.view(-1, vocab), q, out=q)
        return torch.argmax(q, dim=-1).view(batch, length)
    rows = []
    for b, q in enumerate(qs):
        torch.div(probs[b], q, out=q)
        rows.append(torch.argmax(q, dim=-1))
    return torch.stack(rows, dim=0)
