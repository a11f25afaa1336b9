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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache
from transformers.generation import EosTokenCriteria, MaxLengthCriteria, StoppingCriteriaList
from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationMixin

from engine.api import DenoiseSettings
from engine.lean_step import sample_chunked
from engine.prefix_cache import PrefillStats, PrefixCache, prefill_prompt
from engine.sampling import (  # re-exported: the loop's kernels, importable from here as before
    SelfConditioningHandoff,
    StableConfident,
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
    draw_seconds: float = 0.0  # host time drawing the sampler's random numbers (the same draws generate() makes)
    total_seconds: float = 0.0
    syncs: int = 0
    first_step_seconds: float = 0.0
    step_log: list[tuple[float, float]] = field(default_factory=list)  # (decoder forward s, whole step s)
    prefill: PrefillStats = field(default_factory=PrefillStats)  # the prompt's encode: reused / encoded tokens


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


# Up to this many B x L x V uniforms per step (32 MiB of float64) the CPU loop keeps them and turns into Exp(1)
# variates only the rows it accepts (see `sample_accepted`); beyond it, it draws in chunks as above.
_SELECTIVE_LIMIT = 1 << 22


def denoise(model: torch.nn.Module, prompt_ids: torch.Tensor, settings: DenoiseSettings, **kwargs: Any) -> DenoiseOutput:
    """Generate canvases after `prompt_ids` (see `_denoise` for the arguments); on any exit, including an
    out-of-memory error, no self-conditioning logits are left waiting in the model's hand-off."""
    from engine.fastpath import sync_free_experts

    # The device code path (every GPU run, and the CPU under `device_code_path`) uses an experts forward without
    # per-layer host synchronisations; the CPU's host path keeps the per-expert loop, faster there.
    restore = None
    if prompt_ids.device.type != "cpu" or _DEVICE_PATH.get():
        restore = sync_free_experts(model)
    try:
        return _denoise(model, prompt_ids, settings, **kwargs)
    finally:
        handoff = getattr(model, "_letterpress_sc_handoff", None)
        if handoff is not None:
            handoff.clear()
        if restore is not None and prompt_ids.device.type == "cpu":
            model.set_experts_implementation(restore)


def _handoff_for(model: torch.nn.Module) -> SelfConditioningHandoff:
    """The model's self-conditioning hand-off (one pre-hook on its body, registered once)."""
    handoff = getattr(model, "_letterpress_sc_handoff", None)
    if handoff is None:
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
    `engine.fastpath.FastPath` (static cache, compiled steps); by default it is used only on CUDA when switched on
    (`LETTERPRESS_FASTPATH=1`), and the plain eager path, which matches `generate()` token for token, otherwise.
    On the plain path the prompt is encoded once for all rows, in chunks, resumed from `prefix` (the encoder
    caches of `document`'s earlier prompts) when given; see `engine.prefix_cache`.
    """
    start = time.perf_counter()
    config = model.config
    device = prompt_ids.device
    batch, prompt_len = prompt_ids.shape
    canvas_length = int(config.canvas_length)
    vocab = int(config.text_config.vocab_size)
    gens = make_generators(seed, batch, device)
    blocks_limit = math.ceil(max_new_tokens / canvas_length)
    if max_blocks is not None:
        blocks_limit = min(blocks_limit, max_blocks)
    embed_dtype = model.model.decoder.embed_tokens.weight.dtype
    timer = ForwardTimer(device)
    on_host = device.type == "cpu" and not _DEVICE_PATH.get()
    # On the CPU, sample only the accepted slots (no data-dependent shapes on a device: they would synchronise).
    selective = on_host and batch * canvas_length * vocab <= _SELECTIVE_LIMIT

    input_ids = prompt_ids
    cur_len = prompt_len
    if fast is None:
        from engine.fastpath import fastpath_for

        fast = fastpath_for(model, device)
    if fast is not None:
        cache = fast.cache(batch, prompt_len + blocks_limit * canvas_length)
    else:
        cache = DynamicCache(config=config.get_text_config(decoder=True))
    attention_mask = torch.ones((batch, cur_len), dtype=torch.bool, device=device)
    decoder_attention_mask = torch.nn.functional.pad(attention_mask, (0, canvas_length), value=True)
    encoder_position_ids = torch.arange(0, cur_len, dtype=torch.int32, device=device).unsqueeze(0)
    decoder_position_ids = torch.arange(cur_len, cur_len + canvas_length, dtype=torch.int32, device=device).unsqueeze(0)
    temperatures = list(temperature_schedule(settings, device))  # 0-d tensors; list indexing is cheaper
    eos_tensor = torch.tensor(list(eos_token_ids), device=device)
    stopping = StoppingCriteriaList(
        [MaxLengthCriteria(prompt_len + max_new_tokens), EosTokenCriteria(list(eos_token_ids))]
    )
    gen_config = type("GenCfg", (), {"pad_token_id": pad_token_id, "eos_token_id": list(eos_token_ids)})()

    handoff = _handoff_for(model) if fast is None else None

    def draw(shape: tuple[int, int], generator: torch.Generator, where: torch.device) -> torch.Tensor:
        drawn_at = time.perf_counter()
        q = exponential_draws(shape, generator, where)
        out.draw_seconds += time.perf_counter() - drawn_at
        return q

    finished_sequences = torch.zeros(batch, dtype=torch.bool, device=device)
    out = DenoiseOutput(
        sequences=prompt_ids, prompt_length=prompt_len, forwards=0, steps=0, blocks=0, cancelled=False,
        confidence=torch.zeros(batch, 0),
    )
    confidences: list[torch.Tensor] = []
    is_prefill = True
    for block in range(blocks_limit):
        new_ids = input_ids if is_prefill else input_ids[:, -canvas_length:]
        if is_prefill and fast is None:  # prefill once for the K rows, chunked, reusing a stored prefix
            cache, out.prefill = prefill_prompt(model, new_ids, prefix=prefix, document=document)
        else:
            new_ids = new_ids.clone(memory_format=torch.contiguous_format)
            encoder = model.model.encoder
            dummy = torch.empty((batch, new_ids.shape[1], 0), dtype=model.dtype, device=device)
            encoder_masks = encoder.create_masks_for_generate(
                config=config, inputs_embeds=dummy, attention_mask=attention_mask, past_key_values=cache,
                position_ids=encoder_position_ids, mm_token_type_ids=None,
            )
            encode = fast.encoder(is_prefill) if fast is not None else encoder
            cache = encode(
                input_ids=new_ids, attention_mask=encoder_masks, past_key_values=cache,
                position_ids=encoder_position_ids,
            ).past_key_values
        is_prefill = False

        block_frozen = frozen if block == 0 else None
        fmask = block_frozen.mask.to(device) if block_frozen is not None else None
        fids = block_frozen.ids.to(device) if block_frozen is not None else None
        plan = warm.block(block, settings.max_steps, device) if warm is not None else None  # engine.canvas
        if plan is not None:
            fmask, fids = plan.merge_frozen(fmask, fids)
        canvas = noise_ids(vocab, (batch, canvas_length), gens, device)
        if fmask is not None:
            canvas = torch.where(fmask, fids, canvas)
        if plan is not None:
            canvas = plan.start_canvas(canvas)
        sc_logits: torch.Tensor | None = None
        mask_mapping = model.model.decoder.create_diffusion_decoder_attention_mask(
            config=config, inputs_embeds=canvas.unsqueeze(-1), past_key_values=cache,
            decoder_attention_mask=decoder_attention_mask,
        )
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        flags = [False] * batch
        stopper = StableConfident(settings.stability_threshold, settings.confidence_threshold)
        argmax = canvas
        conf = torch.zeros(batch, canvas_length, device=device)
        any_finished = False  # read from the previous step's host copy: no extra device sync
        first_step = plan.start_step if plan is not None else settings.max_steps
        for cur_step in reversed(range(1, first_step + 1)):
            t0 = time.perf_counter()
            out.forwards += 1
            if on_decoder_input is not None:
                on_decoder_input(block, cur_step, canvas)
            timer.start()
            forward_kwargs = dict(
                decoder_input_ids=canvas, decoder_attention_mask=mask_mapping, past_key_values=cache,
                decoder_position_ids=decoder_position_ids,
            )
            if handoff is not None:  # the body takes the logits from the hand-off; nothing of ours keeps them
                handoff.put(sc_logits)
                sc_logits = None
                logits = model(self_conditioning_logits=None, **forward_kwargs).logits
            else:
                logits = fast.decoder(self_conditioning_logits=sc_logits, **forward_kwargs).logits
            timer.stop()
            # In place on the forward's own fp32 logits (the same division); a compiled graph's output is its own.
            processed = logits.div_(temperatures[cur_step - 1]) if handoff is not None else logits / temperatures[
                cur_step - 1]
            del logits
            if plan is not None:
                processed = plan.suppress_stops(processed)  # in place: no end-of-text before the last pin
            if selective:  # small canvases on the CPU: at most _SELECTIVE_LIMIT cells, sample accepted slots only
                probs = torch.softmax(processed, dim=-1, dtype=torch.float32)
                drawn_at = time.perf_counter()
                uniforms = uniform_draws(gens, (batch, canvas_length, vocab))
                noise = noise_ids(vocab, (batch, canvas_length), gens, device)
                out.draw_seconds += time.perf_counter() - drawn_at
                new_argmax = torch.argmax(processed, dim=-1)
                entropy = token_entropy(processed)
                if fmask is not None:
                    new_argmax = torch.where(fmask, fids, new_argmax)
                accepted_mask = accept_mask(entropy, settings.entropy_bound, fmask)
                new_canvas = sample_accepted(probs, uniforms, accepted_mask, noise)
                if fmask is not None:
                    new_canvas = torch.where(fmask, fids, new_canvas)
                # The probability of the shown (argmax) token, for display: the largest probability (softmax keeps
                # the order), or at frozen slots the pinned token's.
                if fmask is None:
                    new_conf = torch.amax(probs, dim=-1)
                else:
                    new_conf = probs.gather(-1, new_argmax.unsqueeze(-1)).squeeze(-1)
                del probs, uniforms
            else:  # every row sampled, in row chunks (see engine.lean_step): no full-vocabulary temporary
                sampled, new_argmax, entropy, new_conf = sample_chunked(processed, gens, fmask, fids, draw)
                drawn_at = time.perf_counter()
                noise = noise_ids(vocab, (batch, canvas_length), gens, device)
                out.draw_seconds += time.perf_counter() - drawn_at
                accepted_mask = accept_mask(entropy, settings.entropy_bound, fmask)
                new_canvas = renoise(sampled, accepted_mask, noise, fmask, fids)
            if plan is not None:
                new_canvas = plan.hold(new_canvas, canvas, accepted_mask)
            if any_finished:
                # Finished rows are held. The reference also puts their previous logits back into `processed` and
                # recomputes the entropy, but nothing reads those values again (the row's flag stays set, its
                # canvas, argmax and confidence are held, rows never see each other): skipped, with its full-size
                # copies.
                if on_host:
                    finished = torch.tensor(flags)
                keep = finished[:, None]
                new_argmax = torch.where(keep, argmax, new_argmax)
                new_canvas = torch.where(keep, canvas, new_canvas)
                new_conf = torch.where(keep, conf, new_conf)
            if on_host:  # the stopping rule in plain Python: four fewer kernels per step
                flags = [f or done for f, done in zip(flags, stopper.rows_done(new_argmax, entropy, fmask))]
            else:
                finished = finished | stopper(new_argmax, entropy, fmask)
            if fmask is not None:  # the frozen slots' self-conditioning: a one-hot belief in the known token
                processed = pin_in_place(processed, fmask, fids)
            sc_logits = processed.to(embed_dtype)
            del processed
            canvas, argmax, conf = new_canvas, new_argmax, new_conf

            if on_host:  # the tensors already are host memory: hand them over as they are
                host_ids, host_conf = argmax, conf
            else:  # one small device->host copy per step: ids (exact in float32 below 2**24), confidences, flags
                packed = torch.cat(
                    [argmax.to(torch.float32), conf.to(torch.float32), finished[:, None].to(torch.float32)], 1
                ).cpu()
                host_ids, host_conf = packed[:, :canvas_length].long(), packed[:, canvas_length : 2 * canvas_length]
                flags = [f != 0.0 for f in packed[:, -1].tolist()]  # plain Python from here
            out.syncs += 1
            sampled_at = time.perf_counter()
            forward_s = timer.seconds()
            out.steps += 1
            state = StepState(
                block, settings.max_steps - cur_step + 1, host_ids, host_conf, flags, forward_s, sampled_at - t0
            )
            if on_step is not None:
                on_step(state)
            step_end = time.perf_counter()
            out.forward_seconds += forward_s
            out.deliver_seconds += step_end - sampled_at
            out.step_log.append((forward_s, step_end - t0))
            if out.steps == 1:
                out.first_step_seconds = step_end - start
            if cancel is not None and cancel.is_set():
                out.cancelled = True
                break
            any_finished = any(flags)
            if all(flags):
                break

        input_ids = torch.cat([input_ids, argmax], dim=-1)
        confidences.append(conf)
        out.blocks += 1
        if out.cancelled or block_frozen is not None:
            break  # a pinned canvas (infill) is one block, and its pinned tokens must survive EOS padding
        input_ids, finished_sequences = DiffusionGemmaGenerationMixin._finalize_canvas(
            input_ids=input_ids, finished_sequences=finished_sequences, generation_config=gen_config,
            stopping_criteria=stopping, canvas_length=canvas_length, eos_tensor=eos_tensor,
        )
        if torch.all(finished_sequences):
            break
        cur_len += canvas_length
        decoder_attention_mask = torch.nn.functional.pad(decoder_attention_mask, (0, canvas_length), value=True)
        attention_mask = torch.nn.functional.pad(attention_mask, (0, canvas_length), value=True)
        encoder_position_ids = decoder_position_ids
        decoder_position_ids = torch.arange(cur_len, cur_len + canvas_length, dtype=torch.int32, device=device).unsqueeze(0)

    out.sequences = input_ids.cpu()
    out.confidence = torch.cat(confidences, dim=1).float().cpu() if confidences else torch.zeros(batch, 0)
    out.total_seconds = time.perf_counter() - start
    return out


