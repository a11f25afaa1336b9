"""The fused vocabulary tail of a denoising step: one kernel, two passes over each row of the logits.

Today's path (`engine.lean_step.sample_chunked`, then `pin_in_place` and the bf16 cast of the
self-conditioning logits) reads and writes the B x L x V fp32 logits ~22 times per step: the temperature
division, argmax, the entropy's logsumexp and softmax and product, the softmax again, the Exp(1) draws, the
division, the argmax of the ratio, the pin, the cast. Here one program per row reads the logits twice (pass 1:
max, argmax, sum of exponentials and the entropy, online; pass 2: probabilities, confidence, the sample and
the self-conditioning logits) and writes the bf16 hand-off once: 2 reads + 1 half-size write per cell, nothing
row-sized in memory.

Random numbers: on the CPU path (and in the tests) the kernel reads the Exp(1) variates the reference would
use, drawn chunk by chunk from each row's generator in the reference's order (`draw`), so the sample is the
reference's sample. On CUDA it draws them in registers (Philox, `tl.rand(seed, offset)`, q = -log(1 - u)) from
one seed per row taken from that row's generator: as random, not the stock stream (on a GPU the reference's
stream was not reproduced before either, see `engine.lean_step`). `philox_uniforms` writes the very uniforms
the kernel draws, so a test can check the sample against the reference given the same uniform numbers.

Tolerance against the reference, measured by the tests: argmax, the sample and the pinned ids exactly; entropy
within 2e-5 absolute + 1e-5 relative and confidence within 1e-6 absolute + 1e-5 relative (fp32, only the
summation order differs); the self-conditioning logits bit-exact (the same division, then ties-to-even to
bf16).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from engine.kernels import configs
from engine.kernels.common import check_device, source

Draw = Callable[[tuple[int, int], torch.Generator, torch.device], torch.Tensor]
TailOut = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]


def _block_v(vocab: int, device: torch.device) -> int:
    cap = 4096 if device.type == "cuda" else 1 << 16
    return max(16, min(cap, 1 << max(0, (vocab - 1).bit_length())))


def _temp_tensor(temperature: torch.Tensor | float, device: torch.device) -> torch.Tensor:
    if isinstance(temperature, torch.Tensor):
        return temperature.reshape(1).to(device=device, dtype=torch.float32)
    return torch.tensor([float(temperature)], dtype=torch.float32, device=device)


def _frozen_ids(
    fmask: torch.Tensor | None, fids: torch.Tensor | None, shape: tuple[int, int], device: torch.device
) -> torch.Tensor:
    if fmask is None:
        return torch.full(shape, -1, dtype=torch.int64, device=device)
    assert fids is not None
    return torch.where(fmask.to(device), fids.to(device=device, dtype=torch.int64), -1)


def _run(
    rows: torch.Tensor,
    temp: torch.Tensor,
    fid: torch.Tensor,
    outs: tuple[torch.Tensor, ...],
    sc: torch.Tensor | None,
    *,
    q: torch.Tensor | None,
    seeds: torch.Tensor | None,
    rows_per_seed: int,
    softcap: float | None,
) -> None:
    src = source()
    n, vocab = rows.shape
    sampled, argmax, entropy, conf = outs
    dummy = seeds if seeds is not None else fid
    configs.launch(
        src.vocab_tail_kernel,
        (n,),
        configs.VOCAB_TAIL,
        rows.device,
        rows,
        rows.stride(0),
        temp,
        q if q is not None else rows,
        q.stride(0) if q is not None else 0,
        dummy,
        fid,
        sampled,
        argmax,
        entropy,
        conf,
        sc if sc is not None else rows,
        sc.stride(0) if sc is not None else 0,
        vocab,
        max(1, rows_per_seed),
        float(softcap or 1.0),
        SOFTCAP=softcap is not None,
        USE_Q=q is not None,
        WRITE_SC=sc is not None,
        SC_ROUND=sc is not None and sc.dtype == torch.bfloat16,
        BLOCK_V=_block_v(vocab, rows.device),
    )


def _outputs(
    batch: int, length: int, vocab: int, device: torch.device, sc_dtype: torch.dtype | None
) -> tuple[tuple[torch.Tensor, ...], torch.Tensor | None]:
    outs = (
        torch.empty((batch, length), dtype=torch.long, device=device),
        torch.empty((batch, length), dtype=torch.long, device=device),
        torch.empty((batch, length), dtype=torch.float32, device=device),
        torch.empty((batch, length), dtype=torch.float32, device=device),
    )
    sc = None if sc_dtype is None else torch.empty((batch, length, vocab), dtype=sc_dtype, device=device)
    return outs, sc


def tail_chunked(
    logits: torch.Tensor,
    temperature: torch.Tensor | float,
    gens: Sequence[torch.Generator],
    fmask: torch.Tensor | None,
    fids: torch.Tensor | None,
    draw: Draw,
    *,
    sc_dtype: torch.dtype | None,
    softcap: float | None = None,
    chunk_rows: int | None = None,
) -> TailOut:
    """(sampled, argmax, entropy, confidence, self-conditioning logits) of `logits` [B, L, V] / temperature,
    with the Exp(1) variates of each row chunk drawn by `draw` from the row's generator in the reference's
    order (the same chunks as `engine.lean_step.sample_chunked`): the reference's sample, for CPU runs and
    tests."""
    from engine.lean_step import chunk_rows as default_chunk

    check_device(logits)
    batch, length, vocab = logits.shape
    device = logits.device
    temp = _temp_tensor(temperature, device)
    fid = _frozen_ids(fmask, fids, (batch, length), device)
    outs, sc = _outputs(batch, length, vocab, device, sc_dtype)
    step = chunk_rows or default_chunk(vocab)
    for b in range(batch):
        gen = gens[b] if len(gens) > 1 else gens[0]
        for r0 in range(0, length, step):
            r1 = min(length, r0 + step)
            q = draw((r1 - r0, vocab), gen, device)
            _run(
                logits[b, r0:r1],
                temp,
                fid[b, r0:r1],
                tuple(o[b, r0:r1] for o in outs),
                None if sc is None else sc[b, r0:r1],
                q=q,
                seeds=None,
                rows_per_seed=1,
                softcap=softcap,
            )
    sampled, argmax, entropy, conf = outs
    return sampled, argmax, entropy, conf, sc


def row_seeds(gens: Sequence[torch.Generator], batch: int, device: torch.device) -> torch.Tensor:
    """One Philox seed per canvas row b, drawn on the device from row b's generator (no host read)."""
    if len(gens) == 1:
        return torch.randint(0, 2**31 - 1, (batch,), generator=gens[0], device=device, dtype=torch.int64)
    return torch.cat(
        [torch.randint(0, 2**31 - 1, (1,), generator=g, device=device, dtype=torch.int64) for g in gens]
    )


def tail_philox(
    logits: torch.Tensor,
    temperature: torch.Tensor | float,
    seeds: torch.Tensor,
    fmask: torch.Tensor | None,
    fids: torch.Tensor | None,
    *,
    sc_dtype: torch.dtype | None,
    softcap: float | None = None,
) -> TailOut:
    """The same outputs with the variates drawn in the kernel from `seeds` [B] (one launch for all B x L
    rows)."""
    check_device(logits)
    batch, length, vocab = logits.shape
    device = logits.device
    rows = logits.reshape(batch * length, vocab)
    outs, sc = _outputs(batch, length, vocab, device, sc_dtype)
    _run(
        rows,
        _temp_tensor(temperature, device),
        _frozen_ids(fmask, fids, (batch, length), device).view(-1),
        tuple(o.view(-1) for o in outs),
        None if sc is None else sc.view(batch * length, vocab),
        q=None,
        seeds=seeds.to(device=device, dtype=torch.int64),
        rows_per_seed=length,
        softcap=softcap,
    )
    sampled, argmax, entropy, conf = outs
    return sampled, argmax, entropy, conf, sc


def philox_uniforms(seeds: torch.Tensor, batch: int, length: int, vocab: int) -> torch.Tensor:
    """[B * L, V] uniforms exactly as `tail_philox` draws them (for tests and reference checks)."""
    check_device(seeds)
    out = torch.empty((batch * length, vocab), dtype=torch.float32, device=seeds.device)
    configs.launch(
        source().philox_uniforms_kernel,
        (batch * length,),
        configs.PHILOX,
        seeds.device,
        seeds.to(torch.int64),
        out,
        vocab,
        length,
        BLOCK_V=_block_v(vocab, seeds.device),
    )
    return out
