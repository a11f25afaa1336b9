"""The sampling rule of a denoising step, in one place: `SamplingRule`.

One step turns the decoder's tempered logits [B, L, V] into the next canvas. The rule, token for token the
reference sampler's (`DiffusionGemmaGenerationMixin._denoising_step` and `EntropyBoundSampler`):

1. per slot (`SamplingRule.measure`, `measure_slots`): the shown token (argmax of the logits, ties to the
   lowest id; the pinned id at frozen slots), its entropy, the fp32 probabilities and the shown token's
   probability (confidence);
2. per slot (`SamplingRule.pick`, `one_sample`): one multinomial sample, argmax(p / q) with q ~ Exp(1) (ATen's
   own one-sample path), the variates drawn from the row's generator in the reference's order
   (`SamplingRule.chunks`, `variates`, `uniforms`; a held row draws nothing);
3. per canvas (`SamplingRule.step`): entropy-bound acceptance (`accept_mask`), the renoising ids drawn after
   the samples (`noise`), the commit (`renoise`; frozen slots get their known token back, a warm start's kept
   slots keep theirs until accepted, held rows keep their whole canvas).

The paths differ only in how they feed it (`StepFeed`): the whole logits on the host, sampling only the
accepted slots (`AcceptedOnlyFeed`, here); row chunks (`engine.lean_step.ChunkedFeed`, the memory-lean step);
the fused vocabulary kernel (`engine.kernels.vocab_tail.TailFeed`), which computes steps 1 and 2 on the
device from the rule's own draws (or Philox seeds) and is proven against the rule by
`tests/engine/test_kernels_tail.py` and `tests/engine/test_sampling_rule.py`. Nothing else in the engine
takes an argmax of logits, draws a sampler variate, or decides what is accepted
(`tests/engine/test_sampling_rule.py` fails if a second implementation appears).

Each piece reproduces the reference bit for bit: the same random draws from the same generators in the same
order, the same float ops. They import nothing of the engine's but its settings, so the loop
(`engine.denoise`), the lean step (`engine.lean_step`) and the kernels build on them without importing each
other.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from engine.api import DenoiseSettings


def make_generators(seed: int, count: int, device: torch.device) -> list[torch.Generator]:
    """One generator per candidate; seed `s` for row 0 reproduces `torch.manual_seed(s)` + `generate()`."""
    gens = []
    for k in range(count):
        g = torch.Generator(device=device)
        g.manual_seed(seed + k)
        gens.append(g)
    return gens


def noise_ids(
    vocab: int,
    shape: tuple[int, int],
    gens: Sequence[torch.Generator],
    device: torch.device,
    held: Sequence[bool] = (),
) -> torch.Tensor:
    """Uniform random token ids [B, L], row b from `gens[b]` (or every row from the one generator).

    Rows marked `held` (their stopping rule fired; the loop keeps their canvas) draw nothing and get zeros, so
    a row's generator advances exactly as in the single run with its seed, whatever the slower rows still
    do."""
    if len(gens) == 1:
        return torch.randint(0, vocab, shape, device=device, generator=gens[0])
    rows = [
        torch.zeros((1, shape[1]), dtype=torch.long, device=device)
        if b < len(held) and held[b]
        else torch.randint(0, vocab, (1, shape[1]), device=device, generator=g)
        for b, g in enumerate(gens)
    ]
    return torch.cat(rows, dim=0)


_EXP_CHUNK = 1 << 20


def exponential_draws(
    shape: tuple[int, int], generator: torch.Generator, device: torch.device
) -> torch.Tensor:
    """`torch.empty(shape).exponential_(1, generator=generator)`, value for value, about 2.5x faster on the
    CPU.

    On the CPU, torch draws each Exp(1) variate serially: a 53-bit uniform u from the Mersenne Twister, then
    `-log1p(-u)` in double precision, rounded to float32. Here the same uniforms come from `uniform_` on a
    float64 tensor (the same generator calls, in the same order) and the logarithm is vectorised; the result
    is bit-identical (checked on 60 million draws, and by `tests/engine/tools/test_bench.py` against
    `exponential_` itself, so a torch change that broke it would fail a test, not change a writer's text). In
    chunks, so the float64 temporary stays small. On a GPU the stock kernel is already fast and is used as is.
    """
    if device.type != "cpu":
        return torch.empty(shape, dtype=torch.float32, device=device).exponential_(1, generator=generator)
    total = shape[0] * shape[1]
    if total <= _EXP_CHUNK:
        uniform = torch.empty(shape, dtype=torch.float64).uniform_(0.0, 1.0, generator=generator)
        return exponential_from_uniform(uniform)
    out = torch.empty(shape, dtype=torch.float32)
    flat = out.view(-1)
    for start in range(0, total, _EXP_CHUNK):
        size = min(_EXP_CHUNK, total - start)
        uniform = torch.empty(size, dtype=torch.float64).uniform_(0.0, 1.0, generator=generator)
        flat[start : start + size].copy_(exponential_from_uniform(uniform))
    return out


def exponential_from_uniform(uniform: torch.Tensor) -> torch.Tensor:
    """Exp(1) variates, float32, from float64 uniforms in [0, 1) the way torch's CPU `exponential_` turns them
    (`-log1p(-u)` in double precision, then rounded); `uniform` is overwritten."""
    return uniform.neg_().log1p_().neg_().to(torch.float32)


def uniform_draws(
    gens: Sequence[torch.Generator], shape: tuple[int, int, int], held: Sequence[bool] = ()
) -> torch.Tensor:
    """The uniforms behind one step's Exp(1) variates ([B x L, V] float64, row block b from generator b): the
    same generator calls, in the same order, as the reference's `exponential_` makes on the CPU."""
    batch, length, vocab = shape
    uniforms = torch.empty((batch * length, vocab), dtype=torch.float64)
    if len(gens) == 1:
        return uniforms.uniform_(0.0, 1.0, generator=gens[0])
    for b, g in enumerate(gens):
        if b < len(held) and held[b]:  # a held row draws nothing (see `noise_ids`)
            uniforms[b * length : (b + 1) * length].fill_(0.5)
        else:
            uniforms[b * length : (b + 1) * length].uniform_(0.0, 1.0, generator=g)
    return uniforms


def sample_accepted(
    probs: torch.Tensor, uniforms: torch.Tensor, accepted: torch.Tensor, noise: torch.Tensor
) -> torch.Tensor:
    """`renoise(sample_with(probs, Exp(uniforms)), accepted, noise)` (see `engine.tools.reference_sampling`),
    computing the samples of accepted slots only.

    A sample survives only where it is accepted, usually a few slots of a canvas, and each slot's sample
    depends on its own row of probabilities and variates alone; so the logarithm (the dearest part of a draw
    after the Mersenne Twister), the division and the argmax run over those rows instead of all of them. The
    uniforms are still drawn for every row: the generator must advance exactly as the reference's does.
    `noise` is overwritten.
    """
    vocab = probs.shape[-1]
    slots = accepted.view(-1).nonzero().squeeze(1)
    q = exponential_from_uniform(uniforms.index_select(0, slots))
    picked = one_sample(probs.view(-1, vocab).index_select(0, slots), q)
    return noise.view(-1).index_copy_(0, slots, picked).view_as(noise)


def one_sample(probs: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The one-sample multinomial of `probs` [..., V] given Exp(1) variates `q` of the same shape:
    argmax(p / q), ATen's own one-sample path (`torch.multinomial(probs, 1)` draws q with `exponential_` and
    does the same), ties to the lowest id. `q` is overwritten."""
    torch.div(probs, q, out=q)
    return torch.argmax(q, dim=-1)


def measure_slots(
    rows: torch.Tensor, fmask: torch.Tensor | None = None, fids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(shown ids, entropy, fp32 probabilities, confidence) of tempered logits `rows` [..., V] (any rows: a
    whole canvas or a chunk of one), `fmask`/`fids` shaped like the rows' leading dimensions.

    The shown id is the argmax of the logits (ties to the lowest id), the pinned id at frozen slots; the
    confidence is its probability (the largest probability, since softmax keeps the order, or the pinned
    token's)."""
    top = torch.argmax(rows, dim=-1)
    entropy = token_entropy(rows)
    probs = torch.softmax(rows, dim=-1, dtype=torch.float32)
    if fmask is not None:
        assert fids is not None
        top = torch.where(fmask, fids, top)
        conf = probs.gather(-1, top.unsqueeze(-1)).squeeze(-1)
    else:
        conf = torch.amax(probs, dim=-1)
    return top, entropy, probs, conf


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """`Categorical(logits=...).entropy()`, bit for bit, with fewer kernels and allocations.

    Categorical clamps the normalised logits at the dtype's minimum only to turn -inf into a finite number;
    the decoder's logits are soft-capped (tanh x 30, then divided by a temperature >= t_min > 0), so they are
    always finite and the clamp is the identity. The product is taken in place: the same elementwise multiply.
    """
    normalized = logits - _finite_logsumexp(logits)
    probs = torch.softmax(normalized, dim=-1)
    return normalized.mul_(probs).sum(-1).neg_()


def _finite_logsumexp(logits: torch.Tensor) -> torch.Tensor:
    """`logits.logsumexp(-1, keepdim=True)` for finite logits: ATen's own kernels in ATen's order (amax,
    subtract, exp, sum, log, add the max back), without the step that zeroes an infinite max, which cannot
    occur here."""
    maxes = torch.amax(logits, dim=-1, keepdim=True)
    return (logits - maxes).exp_().sum(-1, keepdim=True).log_().add_(maxes)


def temperature_schedule(settings: DenoiseSettings, device: torch.device) -> torch.Tensor:
    """The temperature of every step, computed once with the reference processor's float32 tensor ops
    (`t_min + (t_max - t_min) * (step / N)` on an int32 step), element for element the same values."""
    steps = torch.arange(1, settings.max_steps + 1, dtype=torch.int32, device=device)
    return settings.t_min + ((settings.t_max - settings.t_min) * (steps / settings.max_steps))


def accept_mask(entropy: torch.Tensor, entropy_bound: float, frozen: torch.Tensor | None) -> torch.Tensor:
    """Entropy-bound acceptance (arXiv 2505.24857): the k lowest-entropy tokens whose entropy sum minus the
    largest stays within the bound. Frozen slots get +inf entropy so they are never picked."""
    if frozen is not None:
        entropy = entropy.masked_fill(frozen, float("inf"))
    sorted_entropy, order = torch.sort(entropy, dim=-1, descending=False)
    cumulative = torch.cumsum(sorted_entropy, dim=-1)
    chosen = cumulative - sorted_entropy <= entropy_bound
    return torch.empty_like(chosen).scatter_(-1, order, chosen)  # `order` is a permutation: all written


def renoise(
    sampled: torch.Tensor,
    accepted: torch.Tensor,
    noise: torch.Tensor,
    fmask: torch.Tensor | None = None,
    fids: torch.Tensor | None = None,
) -> torch.Tensor:
    """The next decoder input: accepted slots keep the sampled token, every other free slot gets fresh uniform
    noise, frozen slots get their known token back."""
    canvas = torch.where(accepted, sampled, noise)
    return canvas if fmask is None or fids is None else torch.where(fmask, fids, canvas)


# -- the rule ------------------------------------------------------------------------------------------------

Draw = Callable[[tuple[int, int], torch.Generator, torch.device], torch.Tensor]


@dataclass(slots=True)
class StepOut:
    """One step's result: the next decoder input and what the caller sees."""

    canvas: torch.Tensor  # long [B, L]: the next decoder input
    argmax: torch.Tensor  # long [B, L]: the shown ids
    entropy: torch.Tensor  # [B, L]
    confidence: torch.Tensor  # float32 [B, L]: the shown ids' probabilities
    accepted: torch.Tensor  # bool [B, L]: the slots whose sample was committed


@dataclass(frozen=True, slots=True)
class Chunk:
    """Rows `r0:r1` of canvas row `b`, whose variates come from `gen`; `held`: draw nothing for them."""

    b: int
    r0: int
    r1: int
    gen: torch.Generator
    held: bool


class StepFeed(Protocol):
    """How a path hands one step's logits to the rule: `shape` (B, L, V) and `device`; `measure` gives the
    shown ids, entropy and confidence of every slot, drawing the samples' variates through the rule as it
    goes; `sample` then gives the sampled ids (needed at the `accepted` slots only)."""

    shape: tuple[int, int, int]
    device: torch.device

    def measure(
        self,
        rule: SamplingRule,
        fmask: torch.Tensor | None,
        fids: torch.Tensor | None,
        held: Sequence[bool],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...

    def sample(self, accepted: torch.Tensor) -> torch.Tensor: ...


class SamplingRule:
    """The one sampling rule of a denoising step (see the module docstring); every path calls `step`.

    It owns the step's random numbers (the generators, one per row or one for all, the Exp(1) draw, the time
    spent drawing), the temperature schedule and the entropy bound.
    """

    def __init__(
        self,
        gens: Sequence[torch.Generator],
        *,
        entropy_bound: float = DenoiseSettings().entropy_bound,
        temperatures: Sequence[torch.Tensor] = (),
        draw: Draw = exponential_draws,
    ) -> None:
        self.gens = list(gens)
        self.entropy_bound = entropy_bound
        self.temperatures = list(temperatures)
        self._draw = draw
        self.draw_seconds = 0.0  # host time drawing random numbers (the same draws generate() makes)

    @classmethod
    def for_settings(
        cls, settings: DenoiseSettings, gens: Sequence[torch.Generator], device: torch.device
    ) -> SamplingRule:
        # 0-d tensors; list indexing is cheaper than tensor indexing per step
        temperatures = list(temperature_schedule(settings, device))
        return cls(gens, entropy_bound=settings.entropy_bound, temperatures=temperatures)

    # -- what a feed calls ----------------------------------------------------------------------------------

    def temperature(self, cur_step: int) -> torch.Tensor:
        """The temperature of schedule step `cur_step` (N .. 1)."""
        return self.temperatures[cur_step - 1]

    measure = staticmethod(measure_slots)
    pick = staticmethod(one_sample)

    def chunks(self, batch: int, length: int, rows: int, held: Sequence[bool] = ()) -> Iterator[Chunk]:
        """The order of a step's Exp(1) draws: canvas row b from generator b (every row from the one generator
        when there is one), `rows` slots at a time in canvas order; on the CPU that is, value for value, the
        single `exponential_` call of the reference. A `held` row (its stopping rule fired; the loop keeps its
        canvas) draws nothing when rows have generators of their own, so its generator stays where the single
        run with its seed leaves it."""
        single = len(self.gens) == 1
        for b in range(batch):
            gen = self.gens[0] if single else self.gens[b]
            skip = not single and b < len(held) and held[b]
            for r0 in range(0, length, rows):
                yield Chunk(b, r0, min(length, r0 + rows), gen, skip)

    def variates(self, shape: tuple[int, int], gen: torch.Generator, device: torch.device) -> torch.Tensor:
        """Exp(1) variates [rows, V] for one chunk, from its generator (`exponential_draws`), timed."""
        drawn_at = time.perf_counter()
        q = self._draw(shape, gen, device)
        self.draw_seconds += time.perf_counter() - drawn_at
        return q

    def uniforms(self, shape: tuple[int, int, int], held: Sequence[bool] = ()) -> torch.Tensor:
        """Every slot's uniforms at once ([B x L, V] float64, see `uniform_draws`), timed: the host feed turns
        the accepted slots' into variates."""
        drawn_at = time.perf_counter()
        uniforms = uniform_draws(self.gens, shape, held)
        self.draw_seconds += time.perf_counter() - drawn_at
        return uniforms

    def seeds(self, batch: int, device: torch.device, held: Sequence[bool] = ()) -> torch.Tensor:
        """One Philox seed per canvas row for a kernel that draws its variates in registers, drawn on the
        device from the row's generator (no host read); a held row draws none (its seed is 0)."""
        if len(self.gens) == 1:
            return torch.randint(
                0, 2**31 - 1, (batch,), generator=self.gens[0], device=device, dtype=torch.int64
            )
        return torch.cat(
            [
                torch.zeros((1,), dtype=torch.int64, device=device)
                if b < len(held) and held[b]
                else torch.randint(0, 2**31 - 1, (1,), generator=g, device=device, dtype=torch.int64)
                for b, g in enumerate(self.gens)
            ]
        )

    def noise(
        self, vocab: int, shape: tuple[int, int], device: torch.device, held: Sequence[bool] = ()
    ) -> torch.Tensor:
        """Uniform random ids (`noise_ids`), timed: a canvas's starting noise, and each step's renoising ids,
        drawn after the step's variates."""
        drawn_at = time.perf_counter()
        ids = noise_ids(vocab, shape, self.gens, device, held)
        self.draw_seconds += time.perf_counter() - drawn_at
        return ids

    # -- the step -------------------------------------------------------------------------------------------

    def step(
        self,
        feed: StepFeed,
        *,
        fmask: torch.Tensor | None = None,
        fids: torch.Tensor | None = None,
        held: Sequence[bool] = (),
        kept: torch.Tensor | None = None,
        previous: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
        held_rows: torch.Tensor | None = None,
    ) -> StepOut:
        """One step from `feed`: measure (and draw the samples' variates), accept, sample, draw the renoising
        ids, commit.

        `fmask`/`fids`: frozen slots and their known ids (never accepted, renoised nor shown otherwise);
        `held`: per row, in plain Python, the rows whose stopping rule already fired (they draw nothing);
        `previous`: this step's (canvas, shown ids, confidence), which `kept` slots (a warm start's given
        tokens, bool [B, L]) keep until a sample is accepted there and `held_rows` (bool [B, 1], on the
        device: no host read) keep whole. The reference also puts a held row's previous logits back and
        recomputes its entropy, but nothing reads those values again (the row's flag stays set, its canvas,
        ids and confidence are held, rows never see each other): skipped, with its full-size copies.
        """
        argmax, entropy, conf = feed.measure(self, fmask, fids, held)
        accepted = accept_mask(entropy, self.entropy_bound, fmask)
        sampled = feed.sample(accepted)
        batch, length, vocab = feed.shape
        canvas = renoise(
            sampled, accepted, self.noise(vocab, (batch, length), feed.device, held), fmask, fids
        )
        if kept is not None or held_rows is not None:
            assert previous is not None
            before, shown_before, conf_before = previous
            if kept is not None:
                canvas = torch.where(kept & ~accepted, before, canvas)
            if held_rows is not None:
                argmax = torch.where(held_rows, shown_before, argmax)
                canvas = torch.where(held_rows, before, canvas)
                conf = torch.where(held_rows, conf_before, conf)
        return StepOut(canvas, argmax, entropy, conf, accepted)


class ProcessedFeed:
    """What the host feeds share: the step's processed (soft-capped, tempered) logits [B, L, V], their shape
    and device."""

    def __init__(self, processed: torch.Tensor) -> None:
        self.processed = processed
        batch, length, vocab = processed.shape
        self.shape = (batch, length, vocab)
        self.device = processed.device


class AcceptedOnlyFeed(ProcessedFeed):
    """The whole logits at once, on the host, for small canvases: every slot's uniforms are drawn (the
    generators advance exactly as the reference's), but only the accepted slots' become Exp(1) variates and
    samples (`sample_accepted`): the logarithm, the division and the argmax run over a few rows."""

    def __init__(self, processed: torch.Tensor) -> None:
        super().__init__(processed)
        self._probs: torch.Tensor | None = None
        self._uniforms: torch.Tensor | None = None

    def measure(
        self,
        rule: SamplingRule,
        fmask: torch.Tensor | None,
        fids: torch.Tensor | None,
        held: Sequence[bool],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        self._uniforms = rule.uniforms(self.shape, held)
        top, entropy, self._probs, conf = rule.measure(self.processed, fmask, fids)
        return top, entropy, conf

    def sample(self, accepted: torch.Tensor) -> torch.Tensor:
        assert self._probs is not None and self._uniforms is not None
        probs, uniforms, self._probs, self._uniforms = self._probs, self._uniforms, None, None
        unset = torch.zeros(accepted.shape, dtype=torch.long, device=accepted.device)  # never committed
        return sample_accepted(probs, uniforms, accepted, unset)


class StableConfident:
    """The reference stopping rule (argmax canvas stable for `threshold` steps and mean entropy below
    `confidence`), computed over free slots only.

    `__call__` answers with a device tensor (no synchronisation); `rows_done` answers in plain Python for
    tensors that already live in host memory, with the same comparisons (the mean is the same float32 kernel,
    compared with the float32 threshold as torch compares it) but three kernels instead of seven.
    """

    def __init__(self, threshold: int, confidence: float) -> None:
        self.threshold = threshold
        self.confidence = confidence
        self._confidence32 = struct.unpack("f", struct.pack("f", confidence))[0]
        self.history: list[torch.Tensor] = []  # the last `threshold` argmax canvases, oldest first

    def __call__(
        self, argmax: torch.Tensor, entropy: torch.Tensor, frozen: torch.Tensor | None
    ) -> torch.Tensor:
        if self.threshold == 0:
            stable = torch.ones(argmax.shape[0], dtype=torch.bool, device=argmax.device)
        else:
            # The reference keeps a rolled [threshold, B, L] tensor; a list of the same canvases gives the
            # same answer without the roll and the copy (two fewer kernels per step).
            if not self.history:
                self.history = [torch.full_like(argmax, -1)] * self.threshold
            stable = (self.history[0] == argmax).all(dim=-1)
            for past in self.history[1:]:
                stable = stable & (past == argmax).all(dim=-1)
            self.history = [*self.history[1:], argmax]
        return stable & (self._mean_entropy(entropy, frozen) < self.confidence)

    def rows_done(
        self, argmax: torch.Tensor, entropy: torch.Tensor, frozen: torch.Tensor | None
    ) -> list[bool]:
        """`self(argmax, entropy, frozen).tolist()` for host tensors."""
        rows = argmax.shape[0]
        if self.threshold == 0:
            stable = [True] * rows
        else:
            seen = self.history  # empty at first sight: nothing to be stable against
            if rows == 1:
                stable = [len(seen) == self.threshold and all(torch.equal(past, argmax) for past in seen)]
            else:
                stable = [
                    len(seen) == self.threshold and all(torch.equal(past[r], argmax[r]) for past in seen)
                    for r in range(rows)
                ]
            self.history = [*seen, argmax][-self.threshold :]
        if not any(stable):  # the canvas moved: not done, whatever the entropy (the usual case early on)
            return stable
        means = self._mean_entropy(entropy, frozen).tolist()
        return [s and m < self._confidence32 for s, m in zip(stable, means, strict=False)]

    @staticmethod
    def _mean_entropy(entropy: torch.Tensor, frozen: torch.Tensor | None) -> torch.Tensor:
        if frozen is None:
            return torch.mean(entropy, dim=-1)
        free = (~frozen).to(entropy.dtype)
        return (entropy * free).sum(-1) / free.sum(-1).clamp_min(1)


class SelfConditioningHandoff:
    """Passes the previous step's logits to the decoder body without any Python frame holding them afterwards.

    A forward pre-hook on `model.model` (the encoder-decoder body) puts the tensor into its keyword arguments
    and forgets it; `DiffusionGemmaForBlockDiffusion.forward` is called with `self_conditioning_logits=None`,
    so when the body returns, the last reference is gone and the memory is free before the lm_head's logits
    are allocated.
    """

    def __init__(self, body: torch.nn.Module) -> None:
        self._tensor: torch.Tensor | None = None
        self._handle = body.register_forward_pre_hook(self._hook, with_kwargs=True)

    def put(self, tensor: torch.Tensor | None) -> None:
        self._tensor = tensor

    def clear(self) -> None:
        self._tensor = None

    def remove(self) -> None:
        self._tensor = None
        self._handle.remove()

    def _hook(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        tensor, self._tensor = self._tensor, None
        if tensor is None or kwargs.get("self_conditioning_logits") is not None:
            return None
        return args, {**kwargs, "self_conditioning_logits": tensor}


def pin_in_place(processed: torch.Tensor, fmask: torch.Tensor, fids: torch.Tensor) -> torch.Tensor:
    """`torch.where(fmask[..., None], one_hot_belief(fids), processed)` written into `processed` itself.

    The frozen slots' self-conditioning is a one-hot belief in the known token (`finfo.min / 2` everywhere, 0
    at the token), written at the frozen slots without a second B x L x V array.
    """
    index = fids.unsqueeze(-1)
    keep = processed.gather(-1, index)  # the free slots' own value at their `fids` column, put back below
    processed.masked_fill_(fmask.unsqueeze(-1), torch.finfo(processed.dtype).min / 2)
    zero = torch.zeros((), dtype=processed.dtype, device=processed.device)
    return processed.scatter_(-1, index, torch.where(fmask.unsqueeze(-1), zero, keep))
