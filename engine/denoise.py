"""The block-diffusion denoising loop: the reference sampler's algorithm, plus what an editor needs.

It calls the model's encoder and decoder exactly the way `DiffusionGemmaGenerationMixin.generate()` does
(same random draws in the same order, same float ops), so an unconstrained single-candidate run reproduces
`model.generate()` token for token under the same seed. On top of that it adds:

- frozen positions: canvas slots holding known tokens (infill's "after" text). They are written into the
  decoder input every step, never sampled, accepted, re-noised, nor counted by the stopping criteria;
- live steps: after every step, only the argmax ids and per-token confidences leave the device, packed into
  one small tensor (one synchronisation per step), and go to `on_step`. On the CPU, where every tensor already
  is host memory, the loop reads them directly and decides when to stop in plain Python; `device_code_path()`
  runs the device path there instead, to count its synchronisations;
- cancellation: a `threading.Event` checked after every step;
- K candidates in one batch, each row drawing from its own `torch.Generator` (seed, seed+1, ...);
- a warm start (`engine.canvas.WarmCanvas`): canvases that start from given tokens, with pinned positions and
  a noise share that also sets where the schedule starts. The logic lives in `engine.canvas`; here are hooks.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from transformers import DynamicCache
from transformers.generation import EosTokenCriteria, MaxLengthCriteria, StoppingCriteriaList
from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationMixin

from engine.api import DenoiseSettings
from engine.kernels import kernels_for
from engine.kernels.vocab_tail import TailFeed
from engine.lean_step import ChunkedFeed
from engine.prefix_cache import PrefillStats, PrefixCache, prefill_prompt

# The sampling rule and its host feed; the rule's pieces (accept_mask, renoise, the draws...) are re-exported,
# importable from here as before (tests prove them by these names): the loop calls them only through the rule.
from engine.sampling import (  # noqa: F401
    AcceptedOnlyFeed,
    SamplingRule,
    SelfConditioningHandoff,
    StableConfident,
    StepFeed,
    accept_mask,
    exponential_draws,
    make_generators,
    noise_ids,
    pin_in_place,
    renoise,
    sample_accepted,
    temperature_schedule,
    token_entropy,
    uniform_draws,
)
from engine.self_conditioning import ChunkedSelfConditioning

if TYPE_CHECKING:
    from transformers import DiffusionGemmaForBlockDiffusion


@dataclass(frozen=True)
class Frozen:
    """Known canvas tokens for the first block: `mask[b, i]` pins `ids[b, i]` at slot i of row b."""

    mask: torch.Tensor  # bool [B, L]
    ids: torch.Tensor  # long [B, L]


@dataclass(slots=True)
class StepState:
    """What one step hands to the caller: host tensors, already copied off the device."""

    block: int
    step: int
    argmax: torch.Tensor  # long [B, L] (cpu)
    confidence: torch.Tensor  # float [B, L] (cpu)
    finished: list[bool]  # per row: the stopping rule fired
    forward_seconds: float  # the decoder forward alone
    step_seconds: float  # forward + sampling + the copy to the host (delivery to `on_step` comes after)


@dataclass
class DenoiseOutput:
    sequences: torch.Tensor  # long [B, prompt + blocks * L] (cpu), tokens after EOS replaced by pad
    prompt_length: int
    forwards: int
    steps: int
    blocks: int
    cancelled: bool
    confidence: torch.Tensor  # float [B, blocks * L] (cpu), final confidence per generated token
    forward_seconds: float = 0.0  # decoder forwards only (device time on CUDA, measured with events)
    deliver_seconds: float = 0.0  # time spent in `on_step` (display decoding and event delivery)
    draw_seconds: float = (
        0.0  # host time drawing the sampler's random numbers (the same draws generate() makes)
    )
    total_seconds: float = 0.0
    syncs: int = 0
    first_step_seconds: float = 0.0
    step_log: list[tuple[float, float]] = field(default_factory=list)  # (decoder forward s, whole step s)
    prefill: PrefillStats = field(
        default_factory=PrefillStats
    )  # the prompt's encode: reused / encoded tokens


StepHook = Callable[[StepState], None]
InputHook = Callable[[int, int, torch.Tensor], None]


class ForwardTimer:
    """Times the decoder forward of each step without adding a synchronisation: wall clock on the CPU, CUDA
    events on a GPU (read after the step's one host copy, by which time they have completed)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._t0 = self._t1 = 0.0
        if self.cuda:
            self._e0 = torch.cuda.Event(enable_timing=True)
            self._e1 = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        if self.cuda:
            self._e0.record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            self._e1.record()
        else:
            self._t1 = time.perf_counter()

    def seconds(self) -> float:
        return self._e0.elapsed_time(self._e1) / 1000.0 if self.cuda else self._t1 - self._t0


_DEVICE_PATH: ContextVar[bool] = ContextVar("letterpress_device_code_path", default=False)


@contextmanager
def device_code_path() -> Iterator[None]:
    """Run the loop's device code path even on the CPU (in this thread, for the duration).

    The benchmark counts host/device synchronisations with a dispatch mode that sees every read of a tensor's
    value; on the CPU the loop's host shortcuts read values freely (they are no synchronisation there), so the
    count that says what a GPU would do is taken on the path a GPU runs.
    """
    token = _DEVICE_PATH.set(True)
    try:
        yield
    finally:
        _DEVICE_PATH.reset(token)


# Up to this many B x L x V uniforms per step (32 MiB of float64) the CPU loop keeps them and turns into
# Exp(1) variates only the rows it accepts (see `sample_accepted`); beyond it, it draws in chunks as above.
_SELECTIVE_LIMIT = 1 << 22


def denoise(
    model: DiffusionGemmaForBlockDiffusion, prompt_ids: torch.Tensor, settings: DenoiseSettings, **kwargs: Any
) -> DenoiseOutput:
    """Generate canvases after `prompt_ids` (see `_denoise` for the arguments); on any exit, including an
    out-of-memory error, no self-conditioning logits are left waiting in the model's hand-off."""
    from engine.fastpath import sync_free_experts

    # The device code path (every GPU run, and the CPU under `device_code_path`) uses an experts forward
    # without per-layer host synchronisations; the CPU's host path keeps the per-expert loop, faster there.
    restore = None
    if prompt_ids.device.type != "cpu" or _DEVICE_PATH.get() or kernels_for(prompt_ids.device):
        restore = sync_free_experts(model)
    if kernels_for(prompt_ids.device):
        from engine.kernels.install import install

        install(
            model
        )  # linears and norms use the kernels while the switch is on, their own forward otherwise
    try:
        return _denoise(model, prompt_ids, settings, **kwargs)
    finally:
        handoff = getattr(model, "_letterpress_sc_handoff", None)
        if handoff is not None:
            handoff.clear()
        if restore is not None and prompt_ids.device.type == "cpu":
            model.set_experts_implementation(restore)


def _handoff_for(model: DiffusionGemmaForBlockDiffusion) -> SelfConditioningHandoff | ChunkedSelfConditioning:
    """The model's self-conditioning hand-off (one pre-hook, registered once): straight into the decoder's
    self-conditioning block, its softmax in row chunks (`engine.self_conditioning`: no full-size fp32 copy,
    the same bits); a model without that block gets the body's keyword hand-off."""
    handoff = getattr(model, "_letterpress_sc_handoff", None)
    if handoff is None:
        decoder = getattr(getattr(model, "model", None), "decoder", None)
        if decoder is not None and hasattr(decoder, "self_conditioning") and hasattr(decoder, "embed_tokens"):
            handoff = ChunkedSelfConditioning(model)
        else:
            handoff = SelfConditioningHandoff(model.model)
        model._letterpress_sc_handoff = handoff  # type: ignore[assignment]
    return handoff


def _denoise(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    settings: DenoiseSettings,
    *,
    max_new_tokens: int,
    eos_token_ids: Sequence[int],
    pad_token_id: int,
    seed: int,
    frozen: Frozen | None = None,
    max_blocks: int | None = None,
    on_step: StepHook | None = None,
    on_decoder_input: InputHook | None = None,
    cancel: threading.Event | None = None,
    fast: Any = None,
    prefix: PrefixCache | None = None,
    document: str = "",
    warm: Any = None,
) -> DenoiseOutput:
    """Generate canvases after `prompt_ids` ([B, P], identical rows for K candidates) until EOS or the limit.

    `max_new_tokens` is rounded up to whole canvases, as in the reference. `fast` is an
    `engine.fastpath.FastPath` (static cache, compiled steps); by default it is used only on CUDA when
    switched on (`LETTERPRESS_FASTPATH=1`), and the plain eager path, which matches `generate()` token for
    token, otherwise. On the plain path the prompt is encoded once for all rows, in chunks, resumed from
    `prefix` (the encoder caches of `document`'s earlier prompts) when given; see `engine.prefix_cache`.

    The stages, in gpt-fast's manner: `_encode` (the prefill of the prompt, then of each finished canvas),
    `_new_block` (a canvas's starting noise, pins and warm start), `_canvas_steps` (a generator of the
    canvas's step states, each made by `_step`), and this loop, which delivers the states, stops and finalises
    canvases.
    """
    run = _Run.start(
        model,
        prompt_ids,
        settings,
        seed=seed,
        fast=fast,
        max_new_tokens=max_new_tokens,
        max_blocks=max_blocks,
    )
    out, canvas_length, batch = run.out, run.canvas_length, run.batch
    prompt_len = prompt_ids.shape[1]
    stopping = StoppingCriteriaList(
        [MaxLengthCriteria(prompt_len + max_new_tokens), EosTokenCriteria(list(eos_token_ids))]
    )
    gen_config = type("GenCfg", (), {"pad_token_id": pad_token_id, "eos_token_id": list(eos_token_ids)})()
    eos_tensor = torch.tensor(list(eos_token_ids), device=run.device)
    pos = _Positions.first(batch, prompt_len, canvas_length, run.device)
    cache = run.new_cache(prompt_len)
    finished_sequences = torch.zeros(batch, dtype=torch.bool, device=run.device)
    input_ids = prompt_ids
    confidences: list[torch.Tensor] = []
    for block in range(run.blocks_limit):
        new_ids = input_ids if block == 0 else input_ids[:, -canvas_length:]
        cache = _encode(run, cache, new_ids, pos, first=block == 0, prefix=prefix, document=document)
        canvas = _new_block(run, block, frozen if block == 0 else None, warm, cache, pos)
        steps = _canvas_steps(run, canvas, cache, pos, on_decoder_input)
        for state, started, sampled_at in steps:
            if on_step is not None:
                on_step(state)
            step_end = time.perf_counter()
            out.forward_seconds += state.forward_seconds
            out.deliver_seconds += step_end - sampled_at
            out.step_log.append((state.forward_seconds, step_end - started))
            if out.steps == 1:
                out.first_step_seconds = step_end - run.started
            if cancel is not None and cancel.is_set():
                out.cancelled = True
                break
            if all(state.finished):
                break
        steps.close()
        input_ids = torch.cat([input_ids, canvas.argmax], dim=-1)
        confidences.append(canvas.conf)
        out.blocks += 1
        if out.cancelled or canvas.pinned_ending:
            break  # a pinned canvas (infill) is one block, and its pinned tokens must survive EOS padding
        input_ids, finished_sequences = DiffusionGemmaGenerationMixin._finalize_canvas(
            input_ids=input_ids,
            finished_sequences=finished_sequences,
            generation_config=gen_config,
            # transformers types it StableAndConfidentStoppingCriteria, yet its own generate() passes a list
            stopping_criteria=stopping,  # type: ignore[arg-type]
            canvas_length=canvas_length,
            eos_tensor=eos_tensor,
        )
        if torch.all(finished_sequences):
            break
        pos.advance(canvas_length, run.device)

    out.sequences = input_ids.cpu()
    out.confidence = torch.cat(confidences, dim=1).float().cpu() if confidences else torch.zeros(batch, 0)
    out.total_seconds = time.perf_counter() - run.started
    return out


class _HostPath:
    """The CPU, where every tensor already is host memory: values are read freely (no synchronisation there),
    the stopping rule runs in plain Python (four fewer kernels per step), the step's tensors are handed over
    as they are, and small canvases feed the sampling rule whole, sampling only their accepted slots (see
    `engine.sampling.AcceptedOnlyFeed`)."""

    def __init__(self, selective: bool) -> None:
        self.selective = selective

    def held_rows(self, canvas: _Canvas) -> torch.Tensor:
        return torch.tensor(canvas.flags)[:, None]

    def stop(self, canvas: _Canvas, argmax: torch.Tensor, entropy: torch.Tensor) -> None:
        done = canvas.stopper.rows_done(argmax, entropy, canvas.fmask)
        canvas.flags = [f or d for f, d in zip(canvas.flags, done, strict=False)]

    def to_host(self, canvas: _Canvas) -> tuple[torch.Tensor, torch.Tensor]:
        return canvas.argmax, canvas.conf


class _DevicePath:
    """A GPU (or the CPU under `device_code_path`): nothing reads a value on the host inside a step; the
    stopping rule stays a device tensor, and one small device->host copy per step carries the ids (exact in
    float32 below 2**24), the confidences and the stopping flags. No data-dependent shapes: they would
    synchronise."""

    selective = False

    def held_rows(self, canvas: _Canvas) -> torch.Tensor:
        return canvas.finished[:, None]

    def stop(self, canvas: _Canvas, argmax: torch.Tensor, entropy: torch.Tensor) -> None:
        canvas.finished = canvas.finished | canvas.stopper(argmax, entropy, canvas.fmask)

    def to_host(self, canvas: _Canvas) -> tuple[torch.Tensor, torch.Tensor]:
        length = canvas.argmax.shape[1]
        packed = torch.cat(
            [
                canvas.argmax.to(torch.float32),
                canvas.conf.to(torch.float32),
                canvas.finished[:, None].to(torch.float32),
            ],
            1,
        ).cpu()
        canvas.flags = [f != 0.0 for f in packed[:, -1].tolist()]  # plain Python from here
        return packed[:, :length].long(), packed[:, length : 2 * length]


@dataclass
class _Run:
    """One call's fixed facts (model, shapes, generators, the code path) and its running totals (`out`)."""

    model: Any  # a DiffusionGemmaForBlockDiffusion (its encoder, decoder and config are read by name)
    settings: DenoiseSettings
    device: torch.device
    batch: int
    canvas_length: int
    vocab: int
    blocks_limit: int
    gens: list[torch.Generator]
    path: _HostPath | _DevicePath
    fast: Any
    handoff: SelfConditioningHandoff | ChunkedSelfConditioning | None
    embed_dtype: torch.dtype
    rule: SamplingRule  # the one sampling rule (engine.sampling): temperatures, draws, acceptance, commit
    timer: ForwardTimer
    out: DenoiseOutput
    started: float
    # LETTERPRESS_KERNELS=triton: the vocabulary tail in one kernel (engine.kernels.vocab_tail), fed the
    # lm_head's raw output (the soft cap fused too) on the plain path
    tail: bool = False

    @classmethod
    def start(
        cls,
        model: Any,
        prompt_ids: torch.Tensor,
        settings: DenoiseSettings,
        *,
        seed: int,
        fast: Any,
        max_new_tokens: int,
        max_blocks: int | None,
    ) -> _Run:
        started = time.perf_counter()
        config = model.config
        device = prompt_ids.device
        batch = prompt_ids.shape[0]
        canvas_length = int(config.canvas_length)
        vocab = int(config.text_config.vocab_size)
        gens = make_generators(seed, batch, device)
        blocks_limit = math.ceil(max_new_tokens / canvas_length)
        if max_blocks is not None:
            blocks_limit = min(blocks_limit, max_blocks)
        embed_dtype = model.model.decoder.embed_tokens.weight.dtype
        timer = ForwardTimer(device)
        path: _HostPath | _DevicePath
        tail = kernels_for(device)
        if device.type == "cpu" and not _DEVICE_PATH.get():
            path = _HostPath(selective=batch * canvas_length * vocab <= _SELECTIVE_LIMIT and not tail)
        else:
            path = _DevicePath()
        if fast is None:
            from engine.fastpath import fastpath_for

            fast = fastpath_for(model, device)
        rule = SamplingRule.for_settings(settings, gens, device)
        handoff = _handoff_for(model) if fast is None else None
        out = DenoiseOutput(
            sequences=prompt_ids,
            prompt_length=prompt_ids.shape[1],
            forwards=0,
            steps=0,
            blocks=0,
            cancelled=False,
            confidence=torch.zeros(batch, 0),
        )
        return cls(
            model,
            settings,
            device,
            batch,
            canvas_length,
            vocab,
            blocks_limit,
            gens,
            path,
            fast,
            handoff,
            embed_dtype,
            rule,
            timer,
            out,
            started,
            tail,
        )

    def new_cache(self, prompt_len: int) -> Any:
        if self.fast is not None:
            return self.fast.cache(self.batch, prompt_len + self.blocks_limit * self.canvas_length)
        return DynamicCache(config=self.model.config.get_text_config(decoder=True))


@dataclass
class _Positions:
    """The encoder's and decoder's attention masks and positions, one canvas further after every block."""

    cur_len: int
    attention_mask: torch.Tensor
    decoder_attention_mask: torch.Tensor
    encoder_position_ids: torch.Tensor
    decoder_position_ids: torch.Tensor

    @classmethod
    def first(cls, batch: int, prompt_len: int, canvas_length: int, device: torch.device) -> _Positions:
        attention_mask = torch.ones((batch, prompt_len), dtype=torch.bool, device=device)
        return cls(
            prompt_len,
            attention_mask,
            torch.nn.functional.pad(attention_mask, (0, canvas_length), value=True),
            torch.arange(0, prompt_len, dtype=torch.int32, device=device).unsqueeze(0),
            torch.arange(prompt_len, prompt_len + canvas_length, dtype=torch.int32, device=device).unsqueeze(
                0
            ),
        )

    def advance(self, canvas_length: int, device: torch.device) -> None:
        self.cur_len += canvas_length
        pad = torch.nn.functional.pad
        self.decoder_attention_mask = pad(self.decoder_attention_mask, (0, canvas_length), value=True)
        self.attention_mask = pad(self.attention_mask, (0, canvas_length), value=True)
        self.encoder_position_ids = self.decoder_position_ids
        self.decoder_position_ids = torch.arange(
            self.cur_len, self.cur_len + canvas_length, dtype=torch.int32, device=device
        ).unsqueeze(0)


@dataclass
class _Canvas:
    """The canvas being denoised: what one step reads and writes."""

    index: int
    canvas: torch.Tensor  # the decoder input
    argmax: torch.Tensor  # the shown ids
    conf: torch.Tensor  # their confidences
    fmask: torch.Tensor | None  # frozen slots (an infill's ending, a warm start's pins)
    fids: torch.Tensor | None
    plan: Any  # the warm start's block plan (`engine.canvas`), or None
    pinned_ending: bool  # an infill's frozen ending: this canvas is the request's only one
    mask_mapping: Any
    stopper: StableConfident
    first_step: int
    finished: torch.Tensor  # per row, on the device path
    flags: list[bool]  # per row, in plain Python
    any_finished: bool = False  # read from the previous step's host copy: no extra device sync
    sc_logits: torch.Tensor | None = None  # the previous step's processed logits, for self-conditioning


def _encode(
    run: _Run,
    cache: Any,
    new_ids: torch.Tensor,
    pos: _Positions,
    *,
    first: bool,
    prefix: PrefixCache | None,
    document: str,
) -> Any:
    """The prefill: the prompt first (on the plain path once for the K rows, chunked, reusing a stored
    prefix), then each finished canvas, into the encoder cache."""
    model = run.model
    if first and run.fast is None:
        cache, run.out.prefill = prefill_prompt(model, new_ids, prefix=prefix, document=document)
        return cache
    new_ids = new_ids.clone(memory_format=torch.contiguous_format)
    encoder = model.model.encoder
    dummy = torch.empty((run.batch, new_ids.shape[1], 0), dtype=model.dtype, device=run.device)
    encoder_masks = encoder.create_masks_for_generate(
        config=model.config,
        inputs_embeds=dummy,
        attention_mask=pos.attention_mask,
        past_key_values=cache,
        position_ids=pos.encoder_position_ids,
        mm_token_type_ids=None,
    )
    encode = run.fast.encoder(first) if run.fast is not None else encoder
    return encode(
        input_ids=new_ids,
        attention_mask=encoder_masks,
        past_key_values=cache,
        position_ids=pos.encoder_position_ids,
    ).past_key_values


def _new_block(
    run: _Run, block: int, frozen: Frozen | None, warm: Any, cache: Any, pos: _Positions
) -> _Canvas:
    """A canvas's start: uniform noise, the frozen slots' known tokens, a warm start's tokens and pins."""
    device, batch = run.device, run.batch
    fmask: torch.Tensor | None = frozen.mask.to(device) if frozen is not None else None
    fids: torch.Tensor | None = frozen.ids.to(device) if frozen is not None else None
    plan = warm.block(block, run.settings.max_steps, device) if warm is not None else None  # engine.canvas
    if plan is not None:
        fmask, fids = plan.merge_frozen(fmask, fids)
    canvas = run.rule.noise(run.vocab, (batch, run.canvas_length), device)
    if fmask is not None and fids is not None:
        canvas = torch.where(fmask, fids, canvas)
    if plan is not None:
        canvas = plan.start_canvas(canvas)
    mask_mapping = run.model.model.decoder.create_diffusion_decoder_attention_mask(
        config=run.model.config,
        inputs_embeds=canvas.unsqueeze(-1),
        past_key_values=cache,
        decoder_attention_mask=pos.decoder_attention_mask,
    )
    return _Canvas(
        index=block,
        canvas=canvas,
        argmax=canvas,
        conf=torch.zeros(batch, run.canvas_length, device=device),
        fmask=fmask,
        fids=fids,
        plan=plan,
        pinned_ending=frozen is not None,
        mask_mapping=mask_mapping,
        stopper=StableConfident(run.settings.stability_threshold, run.settings.confidence_threshold),
        first_step=plan.start_step if plan is not None else run.settings.max_steps,
        finished=torch.zeros(batch, dtype=torch.bool, device=device),
        flags=[False] * batch,
    )


def _canvas_steps(
    run: _Run, canvas: _Canvas, cache: Any, pos: _Positions, on_decoder_input: InputHook | None
) -> Generator[tuple[StepState, float, float], None, None]:
    """The steps of one canvas, from the schedule's start down to step 1: (state, step start, sampled at)."""
    for cur_step in reversed(range(1, canvas.first_step + 1)):
        yield _step(run, canvas, cur_step, cache, pos, on_decoder_input)
        canvas.any_finished = any(canvas.flags)


def _step(
    run: _Run, canvas: _Canvas, cur_step: int, cache: Any, pos: _Positions, on_decoder_input: InputHook | None
) -> tuple[StepState, float, float]:
    """One denoising step: the decoder forward, the sampling rule (sampling, entropy-bound acceptance,
    renoising, the held rows), the stopping rule, the self-conditioning of the next step, and the host copy of
    what the caller sees."""
    t0 = time.perf_counter()
    run.out.forwards += 1
    if on_decoder_input is not None:
        on_decoder_input(canvas.index, cur_step, canvas.canvas)
    processed: torch.Tensor | None = None
    feed: StepFeed
    if run.tail:  # the fused vocabulary tail (engine.kernels.vocab_tail): it also writes the bf16 hand-off
        feed = _fused_feed(run, canvas, cur_step, cache, pos)
    else:
        processed = _forward(run, canvas, cur_step, cache, pos)
        if canvas.plan is not None:
            processed = canvas.plan.suppress_stops(processed)  # in place: no end-of-text before the last pin
        # small canvases on the CPU (at most _SELECTIVE_LIMIT cells): whole, sampling the accepted slots only;
        # otherwise in row chunks (engine.lean_step): no full-vocabulary temporary
        feed = AcceptedOnlyFeed(processed) if run.path.selective else ChunkedFeed(processed)
    result = run.rule.step(
        feed,
        fmask=canvas.fmask,
        fids=canvas.fids,
        # the rows whose stopping rule fired: the previous step's host flags (no extra sync) say which draw
        # nothing, the path's own tensor (host or device) which are held
        held=canvas.flags if canvas.any_finished else (),
        kept=canvas.plan.kept if canvas.plan is not None else None,
        previous=(canvas.canvas, canvas.argmax, canvas.conf),
        held_rows=run.path.held_rows(canvas) if canvas.any_finished else None,
    )
    run.out.draw_seconds = run.rule.draw_seconds
    run.path.stop(canvas, result.argmax, result.entropy)
    if processed is None:  # the fused tail wrote the (pinned) bf16 hand-off itself
        assert isinstance(feed, TailFeed)
        canvas.sc_logits, feed.sc = feed.sc, None
    else:
        if (
            canvas.fmask is not None
        ):  # the frozen slots' self-conditioning: a one-hot belief in the known token
            assert canvas.fids is not None
            processed = pin_in_place(processed, canvas.fmask, canvas.fids)
        canvas.sc_logits = processed.to(run.embed_dtype)
    del processed, feed
    canvas.canvas, canvas.argmax, canvas.conf = result.canvas, result.argmax, result.confidence
    host_ids, host_conf = run.path.to_host(canvas)
    run.out.syncs += 1
    sampled_at = time.perf_counter()
    run.out.steps += 1
    state = StepState(
        canvas.index,
        run.settings.max_steps - cur_step + 1,
        host_ids,
        host_conf,
        canvas.flags,
        run.timer.seconds(),
        sampled_at - t0,
    )
    return state, t0, sampled_at


def _forward(run: _Run, canvas: _Canvas, cur_step: int, cache: Any, pos: _Positions) -> torch.Tensor:
    """The decoder forward of one step, its logits divided by the step's temperature."""
    run.timer.start()
    forward_kwargs = {
        "decoder_input_ids": canvas.canvas,
        "decoder_attention_mask": canvas.mask_mapping,
        "past_key_values": cache,
        "decoder_position_ids": pos.decoder_position_ids,
    }
    temperature = run.rule.temperature(cur_step)
    if run.handoff is not None:  # the body takes the logits from the hand-off; nothing of ours keeps them
        run.handoff.put(canvas.sc_logits)
        canvas.sc_logits = None
        logits = run.model(self_conditioning_logits=None, **forward_kwargs).logits
        run.timer.stop()
        return logits.div_(temperature)  # in place on the forward's own fp32 logits (the same division)
    logits = run.fast.decoder(self_conditioning_logits=canvas.sc_logits, **forward_kwargs).logits
    run.timer.stop()
    return logits / temperature  # a compiled graph's output is its own


def _fused_feed(run: _Run, canvas: _Canvas, cur_step: int, cache: Any, pos: _Positions) -> TailFeed:
    """The forward with the kernels on, as the sampling rule's feed: the body and the lm_head's raw logits
    (the soft cap, temperature, measure, sample and bf16 hand-off are then one kernel,
    `engine.kernels.vocab_tail.TailFeed`), or a compiled graph's soft-capped logits."""
    run.timer.start()
    forward_kwargs = {
        "decoder_input_ids": canvas.canvas,
        "decoder_attention_mask": canvas.mask_mapping,
        "past_key_values": cache,
        "decoder_position_ids": pos.decoder_position_ids,
    }
    softcap: float | None = None
    if run.handoff is not None:
        run.handoff.put(canvas.sc_logits)
        canvas.sc_logits = None
        body = run.model.model(self_conditioning_logits=None, **forward_kwargs)
        logits = run.model.lm_head(body.last_hidden_state)
        softcap = float(run.model.final_logit_softcapping)
    else:  # a compiled graph: its logits come soft-capped
        logits = run.fast.decoder(self_conditioning_logits=canvas.sc_logits, **forward_kwargs).logits
    run.timer.stop()
    return TailFeed(logits, run.rule.temperature(cur_step), softcap, canvas.plan, run.embed_dtype)
