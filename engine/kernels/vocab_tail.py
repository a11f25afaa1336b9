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

The kernel is a feed of the sampling rule (`TailFeed`, see `engine.sampling`): what it computes per row is
the rule's per-slot part, proven against the rule (`tests/engine/test_sampling_rule.py`); what is accepted,
committed and held, and the order of every draw, is the rule's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from engine.kernels import configs
from engine.kernels.common import check_device, source

if TYPE_CHECKING:
    from engine.sampling import SamplingRule

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
    held: Sequence[bool] = (),
) -> TailOut:
    """(sampled, argmax, entropy, confidence, self-conditioning logits) of `logits` [B, L, V] / temperature,
    with the Exp(1) variates of each row chunk drawn by `draw` from the row's generator in the sampling rule's
    order (`engine.sampling.SamplingRule.chunks`, the chunks of `engine.lean_step.ChunkedFeed`): the
    reference's sample, for CPU runs and tests. A `held` row draws nothing (the kernel gets q = 1 there: its
    sample is never used)."""
    from engine.lean_step import chunk_rows as default_chunk
    from engine.sampling import SamplingRule

    check_device(logits)
    batch, length, vocab = logits.shape
    device = logits.device
    temp = _temp_tensor(temperature, device)
    fid = _frozen_ids(fmask, fids, (batch, length), device)
    outs, sc = _outputs(batch, length, vocab, device, sc_dtype)
    rule = SamplingRule(gens, draw=draw)
    for c in rule.chunks(batch, length, chunk_rows or default_chunk(vocab), held):
        b, r0, r1 = c.b, c.r0, c.r1
        if c.held:
            q = torch.ones((r1 - r0, vocab), dtype=torch.float32, device=device)
        else:
            q = rule.variates((r1 - r0, vocab), c.gen, device)
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


def row_seeds(
    gens: Sequence[torch.Generator], batch: int, device: torch.device, held: Sequence[bool] = ()
) -> torch.Tensor:
    """One Philox seed per canvas row b, drawn on the device from row b's generator (no host read): the
    sampling rule's `SamplingRule.seeds`."""
    from engine.sampling import SamplingRule

    return SamplingRule(gens).seeds(batch, device, held)


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


class TailFeed:
    """The fused kernel as the sampling rule's feed (`engine.sampling.StepFeed`): the lm_head's raw logits
    (`softcap` given: the kernel applies the soft cap) or a compiled forward's soft-capped ones, divided by
    the step's temperature in the kernel; the kernel measures and samples every slot in two passes and
    writes the bf16 self-conditioning hand-off (`sc`). Its random numbers come from the rule: on CUDA one
    Philox seed per row (`SamplingRule.seeds`), elsewhere (the interpreter) the rule's own Exp(1) draws in the
    rule's order (`tail_chunked`). A warm canvas's stop suppression edits the tempered logits, so there the
    soft cap and the temperature are applied first, as on the unfused path, and the kernel divides by 1."""

    def __init__(
        self,
        logits: torch.Tensor,
        temperature: torch.Tensor,
        softcap: float | None,
        plan: Any,
        sc_dtype: torch.dtype | None,
    ) -> None:
        batch, length, vocab = logits.shape
        self.shape = (batch, length, vocab)
        self.device = logits.device
        self._logits: torch.Tensor | None = logits
        self._temperature = temperature
        self._softcap = softcap
        self._plan = plan
        self._sc_dtype = sc_dtype
        self._sampled: torch.Tensor | None = None
        self.sc: torch.Tensor | None = None  # the bf16 self-conditioning hand-off, once measured

    def measure(
        self,
        rule: SamplingRule,
        fmask: torch.Tensor | None,
        fids: torch.Tensor | None,
        held: Sequence[bool],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits, self._logits = self._logits, None  # the kernel's input is not kept past the kernel
        assert logits is not None
        temperature, softcap = self._temperature, self._softcap
        if self._plan is not None:
            if softcap is not None:
                logits = torch.tanh(logits.float() / softcap) * softcap
                softcap = None
            logits = self._plan.suppress_stops(logits.float().div_(temperature))
            temperature = torch.ones((), device=logits.device)
        if logits.device.type == "cuda":
            seeds = rule.seeds(logits.shape[0], logits.device, held)
            out = tail_philox(
                logits, temperature, seeds, fmask, fids, sc_dtype=self._sc_dtype, softcap=softcap
            )
        else:
            out = tail_chunked(
                logits,
                temperature,
                rule.gens,
                fmask,
                fids,
                rule.variates,
                sc_dtype=self._sc_dtype,
                softcap=softcap,
                held=held,
            )
        del logits
        self._sampled, argmax, entropy, conf, self.sc = out
        return argmax, entropy, conf

    def sample(self, accepted: torch.Tensor) -> torch.Tensor:
        assert self._sampled is not None
        sampled, self._sampled = self._sampled, None
        return sampled
