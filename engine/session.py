"""Request -> prompt -> denoise -> display -> Result, synchronously, on whichever thread calls it.

`Session` is the real `engine.api.Engine`: the GUI's engine thread owns one, the command line another. Every
failure a writer can cause or meet (no model, empty request, too long, out of memory, a bug mid-request) comes
back as an `EngineError` subclass and leaves the session usable.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

from engine import budget as request_budget
from engine import canvas as warm_canvas
from engine import infill, prompts
from engine.api import (
    Candidate,
    CandidateView,
    DenoiseSettings,
    Device,
    DraftRequest,
    EngineError,
    GenerationError,
    InfillRequest,
    LoadProgress,
    ModelInfo,
    ModelNotLoadedError,
    OutOfMemoryError,
    ProgressCallback,
    PromptTooLongError,
    Quantization,
    Request,
    Result,
    RewriteRequest,
    Span,
    Stats,
    StepCallback,
    StepEvent,
    WontFitError,
)
from engine.denoise import DenoiseOutput, Frozen, StepState, denoise
from engine.display import TokenText
from engine.prefix_cache import PrefixCache
from engine.threads import ThreadPolicy, model_bytes
from engine.special_tokens import text_ids
from engine.weights.loader import LoadedModel, load_model

log = logging.getLogger(__name__)


def _release_tensors(model: torch.nn.Module) -> None:
    """Drop every parameter and buffer of a model that is being replaced, so its memory is freed at once by
    reference counting instead of waiting for a full cyclic collection (the modules form cycles). The empty module
    shells that remain are small; the collector takes them whenever it runs."""
    for module in model.modules():
        module._parameters.clear()
        module._buffers.clear()
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor):  # tensors kept as plain attributes (quantized weights' state)
                delattr(module, name)


class Session:
    """Owns one loaded model and runs requests against it."""

    def __init__(self) -> None:
        self._loaded: LoadedModel | None = None
        self._text: TokenText | None = None
        self._eos: list[int] = []
        self._pad = 0
        self.last_output: DenoiseOutput | None = None  # for benchmarks and tests
        # Encoder caches of the last prompts per document (prefix reuse); made at load, freed at unload and OOM.
        self.prefix_cache: PrefixCache | None = None
        self.last_plan: request_budget.RequestPlan | None = None  # the memory plan of the latest request
        self._config: dict[str, Any] = {}
        self.checkpoint_settings = DenoiseSettings()  # the loaded checkpoint's sampler settings (generation_config)
        self.threads: ThreadPolicy | None = None  # the CPU thread policy, re-applied before every request

    # -- Engine protocol ------------------------------------------------------------------------------------

    @property
    def info(self) -> ModelInfo | None:
        return self._loaded.info if self._loaded else None

    @property
    def model(self) -> Any:
        return self._require().model

    @property
    def tokenizer(self) -> Any:
        return self._require().tokenizer

    def load(
        self,
        model_dir: str | Path,
        *,
        device: Device = "auto",
        quantization: Quantization = "auto",
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelInfo:
        # The model in use stays loaded until the new one has loaded completely, so a folder that fails its check
        # or its load never takes away a working model. Only when the new one needs the memory the old one holds
        # is the old one released first, and then loaded again if the new one fails after all.
        held: list[LoadProgress] = []  # "ready" waits until the warm-up below is done

        def relay(progress: LoadProgress) -> None:
            if progress.stage == "ready":
                held.append(progress)
            elif on_progress is not None:
                on_progress(progress)

        try:
            loaded = self._load_new(model_dir, device, quantization, relay, cancel)
        except (WontFitError, OutOfMemoryError) as exc:
            previous = self._loaded
            if previous is None:
                raise
            self.unload()
            try:
                loaded = self._load_new(model_dir, device, quantization, relay, cancel)
            except EngineError as again:
                restored = self._restore(previous.info)
                raise type(again)(again.message + (f" {previous.info.name} was loaded again." if restored else
                                                   f" {previous.info.name} had to be unloaded to try.")) from exc
        tok = loaded.tokenizer
        gen = loaded.model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else tok.eos_token_id
        eos_ids = list(eos) if isinstance(eos, (list, tuple)) else [int(eos)]
        pad = int(gen.pad_token_id if gen.pad_token_id is not None else (tok.pad_token_id or 0))
        text = TokenText(tok, stop_ids={*eos_ids, pad})
        previous_model = self._loaded.model if self._loaded is not None else None
        replaced = previous_model is not None
        self._loaded, self._eos, self._pad, self._text = loaded, eos_ids, pad, text  # the swap, all at once
        self._config = loaded.model.config.to_dict()
        self.checkpoint_settings = DenoiseSettings.from_generation_config(gen)
        self.prefix_cache = PrefixCache(prefix_cache_bytes())  # the old model's cached prefixes go with it
        if previous_model is not None:
            _release_tensors(previous_model)  # its weights go by reference count, now
            del previous_model
            self._free_memory(collect=False)  # no full collection: it held the GIL 220-330 ms, the window froze
        self.threads = ThreadPolicy(model_bytes(loaded.model)) if loaded.info.device == "cpu" else None
        if self.threads is not None:
            self.threads.apply()
        if on_progress is not None:
            on_progress(LoadProgress(0, 0, stage="warming up"))
        self._warm_up(loaded)
        if on_progress is not None:
            on_progress(held[-1] if held else LoadProgress(1, 1, stage="ready"))
        return loaded.info

    def _load_new(self, model_dir: str | Path, device: Device, quantization: Quantization,
                  on_progress: ProgressCallback | None, cancel: threading.Event | None) -> LoadedModel:
        try:
            return load_model(model_dir, device=device, quantization=quantization, on_progress=on_progress,
                              cancel=cancel)
        except torch.cuda.OutOfMemoryError as exc:
            self._free_memory()
            raise OutOfMemoryError(
                "The GPU ran out of memory while loading the model. Close other programs using the GPU, or "
                "choose 4-bit quantization in Settings."
            ) from exc

    def _restore(self, info: ModelInfo) -> bool:
        """Load the model that was in use before a failed replacement (best effort)."""
        try:
            self.load(info.path, device=info.device, quantization=info.quantization)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - the writer is told it is gone
            log.exception("could not load %s again", info.path)
            return False
        return True

    def _warm_up(self, loaded: LoadedModel) -> None:
        """One tiny request through the whole path (chat template, first forward's allocations, lazy imports), so
        the writer's first suggestion is as fast as every later one. A failure here is only logged."""
        request = DraftRequest(before="Hello.", max_new_tokens=1, settings=DenoiseSettings(max_steps=1, seed=0))
        try:
            with torch.inference_mode():
                self._run(loaded, request, None, None)
        except Exception:  # noqa: BLE001 - the real request will report any real problem
            log.warning("warm-up request failed", exc_info=True)
        self.last_output = None
        if self.prefix_cache is not None:
            self.prefix_cache.clear()  # the warm-up's prompt is nobody's document

    def unload(self) -> None:
        if self._loaded is not None:
            self._loaded = None
            self._text = None
            self.prefix_cache = None
            self.threads = None
            self._free_memory()

    def run(
        self, request: Request, on_step: StepCallback | None = None, cancel: threading.Event | None = None
    ) -> Result:
        loaded = self._require()
        if self.threads is not None:
            self.threads.apply()  # the cores free now, in the thread that computes
        try:
            with torch.inference_mode():
                return self._run(loaded, request, on_step, cancel)
        except EngineError:
            raise
        except torch.cuda.OutOfMemoryError as exc:
            if self.prefix_cache is not None:
                self.prefix_cache.clear()
            self._free_memory()
            raise OutOfMemoryError(
                "The GPU ran out of memory for this request. Try fewer alternatives, a shorter selection, or close "
                "other programs using the GPU; the model stays loaded."
            ) from exc
        except Exception as exc:  # a bug must not take the editor down: report it, keep the session usable
            log.exception("generation failed")
            raise GenerationError(f"Generation failed unexpectedly ({type(exc).__name__}: {exc}). Try again.") from exc

    # -- internals ------------------------------------------------------------------------------------------

    def _require(self) -> LoadedModel:
        if self._loaded is None:
            raise ModelNotLoadedError("No model is loaded yet. Open the model manager and load a model.")
        return self._loaded

    @staticmethod
    def _free_memory(collect: bool = True) -> None:
        import gc

        from engine.fastpath import free_stack_buffers

        free_stack_buffers()  # the experts' reused dequantization buffers are rebuilt on the next forward
        if collect:
            gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _run(
        self, loaded: LoadedModel, request: Request, on_step: StepCallback | None, cancel: threading.Event | None
    ) -> Result:
        start = time.perf_counter()
        model, tok, info = loaded.model, loaded.tokenizer, loaded.info
        settings = request.settings.resolved(self.checkpoint_settings)  # the checkpoint's sampler where not changed
        canvas = info.canvas_length
        max_new = self._max_new_tokens(request, canvas)
        if isinstance(request, RewriteRequest) and not request.max_new_tokens:
            # On a short-context model, give the selection room first and the rewrite what is left (whole canvases).
            bare = len(prompts.chat_ids(tok, prompts.with_brief(
                request.brief, prompts.rewrite_message(request.selection, request.instruction))))
            room = (info.context_length - bare) // canvas * canvas
            if room >= canvas:
                max_new = min(max_new, room)
        seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
        warm = self._warm(request, settings, canvas, seed, max_new)
        if warm is not None:  # the warm canvases must all be written
            max_new = max(max_new, warm.blocks * canvas)
        budget = info.context_length - math.ceil(max_new / canvas) * canvas
        if budget < 8:
            if isinstance(request, RewriteRequest):
                raise PromptTooLongError(
                    "The selection is too long for the model to rewrite at once (it can read about "
                    f"{info.context_length // 3:,} tokens of it). Select a shorter passage, a few paragraphs at a time."
                )
            raise PromptTooLongError(
                f"Asking for {max_new:,} new tokens leaves no room for the text before it; ask for fewer "
                "(Settings ▸ Draft length)."
            )
        prompt = prompts.build_prompt(tok, request, budget)

        rows, frozen, middles = self._rows(request, settings, canvas)
        rows, frozen, middles, prompt = self._fit_request(request, rows, frozen, middles, prompt, max_new, canvas)
        if isinstance(request, InfillRequest) and request.canvas is not None and frozen is not None:
            warm = self._infill_warm(request.canvas, frozen, seed)
        elif warm is not None and warm.ids.shape[0] > rows:  # the budget ran fewer rows than asked
            warm = warm.first_rows(rows)
        prompt_ids = torch.tensor([prompt.ids] * rows, dtype=torch.long, device=model.device)
        first_draft = [0.0]
        done_blocks: list[tuple[int, ...]] = [()] * rows  # finished canvases of each row, for multi-block drafts

        def emit(state: StepState) -> None:
            if on_step is None:
                return
            if state.block > blocks_seen[0]:  # a new block began: the previous one's last canvas is final
                blocks_seen[0] = state.block
                for r in range(rows):
                    done_blocks[r] = done_blocks[r] + tuple(last_ids[0][r].tolist())
            last_ids[0] = state.argmax
            # Rows are picked out of the step's tensors only when a view is looked at (most steps are not painted).
            views = tuple(
                CandidateView(make=partial(self._view, state.argmax, state.confidence, r, done_blocks[r],
                                           middles[r] if middles is not None else None, limit=max_new,
                                           pinned=_pins(warm, r, state.block, canvas)))
                for r in range(rows)
            )
            if not first_draft[0]:
                first_draft[0] = time.perf_counter() - start
            on_step(
                StepEvent(
                    request.request_id, state.step, settings.max_steps, state.block, views,
                    time.perf_counter() - start,
                )
            )

        blocks_seen = [0]
        last_ids: list[torch.Tensor] = [torch.empty(rows, 0, dtype=torch.long)]  # the latest step's [rows, L] ids
        out = denoise(
            model, prompt_ids, settings, max_new_tokens=max_new, eos_token_ids=self._eos, pad_token_id=self._pad,
            seed=seed, frozen=frozen, max_blocks=1 if frozen is not None else None, on_step=emit, cancel=cancel,
            prefix=self.prefix_cache, document=getattr(request, "document", ""),
            warm=warm,
        )
        self.last_output = out
        candidates = self._candidates(out, middles, settings.candidates, limit=max_new)
        best = candidates[0] if candidates else None
        stats = Stats(
            forwards=out.forwards,
            new_tokens=len(best.token_ids) if best else 0,
            seconds=time.perf_counter() - start,
            first_draft_seconds=first_draft[0] or out.first_step_seconds,
            steps=out.steps,
            blocks=out.blocks,
            prompt_tokens=out.prefill.prompt_tokens,
            reused_tokens=out.prefill.reused_tokens,
        )
        notice = " ".join(n for n in (prompt.notice, self.last_plan.notice if self.last_plan else "") if n)
        return Result(request.request_id, candidates, stats, cancelled=out.cancelled, notice=notice)

    def _fit_request(
        self, request: Request, rows: int, frozen: Frozen | None, middles: list[int] | None, prompt: prompts.Prompt,
        max_new: int, canvas: int,
    ) -> tuple[int, Frozen | None, list[int] | None, prompts.Prompt]:
        """Budget this request against the device's free memory now (see `engine.budget`): fewer rows, then less
        context, rather than an out-of-memory error halfway."""
        model, tok = self.model, self.tokenizer
        new_tokens = (1 if frozen is not None else math.ceil(max_new / canvas)) * canvas
        bare = len(prompts.build_prompt(tok, _without_context(request), 1 << 30).ids)

        def plan_now() -> request_budget.RequestPlan:
            return request_budget.plan_request(
                self._config, rows=rows, prompt_tokens=len(prompt.ids), new_tokens=new_tokens,
                min_prompt_tokens=min(bare, len(prompt.ids)),
                free_bytes=request_budget.free_device_bytes(model.device), device_label=str(model.device),
            )

        # Cached prefixes are a convenience, the writer's alternatives and context are not: when the request does
        # not fit as asked and the prefix cache holds memory, the cache is dropped first and the request re-planned.
        try:
            plan = plan_now()
            short = plan.rows < rows or plan.context_tokens < len(prompt.ids)
        except OutOfMemoryError:
            short, plan = True, None
        if short and self.prefix_cache is not None and self.prefix_cache.nbytes:
            self.prefix_cache.clear()
            plan = plan_now()
        elif plan is None:
            plan = plan_now()  # nothing to give back: raises the out-of-memory error with its numbers
        self.last_plan = plan
        if plan.rows < rows:
            rows = plan.rows
            if frozen is not None:
                frozen = Frozen(frozen.mask[:rows], frozen.ids[:rows])
            if middles is not None:
                middles = middles[:rows]
        if plan.context_tokens < len(prompt.ids):
            prompt = prompts.build_prompt(tok, request, plan.context_tokens)
        return rows, frozen, middles, prompt

    def _view(
        self, ids_t: torch.Tensor, conf_t: torch.Tensor, row: int, earlier: tuple[int, ...], middle: int | None,
        *, limit: int | None = None, pinned: list[bool] | None = None,
    ) -> tuple[Span, ...]:
        """The spans of one row at one step; runs on the consumer's thread, when (and if) it is looked at."""
        text = self._text
        assert text is not None
        ids, conf = ids_t[row].tolist(), conf_t[row].tolist()
        if middle is not None:  # infill: only the middle slots are suggestion, the pinned ending is the writer's
            if pinned is not None:
                kept = [(t, 1.0 if p else c, p) for t, c, p in zip(ids[:middle], conf[:middle], pinned[:middle],
                                                                   strict=False)]
                return text.spans([k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept])
            return text.spans(*_middle(text, ids, conf, middle))
        shown = text.visible_ids([*earlier, *ids][:limit])
        conf = ([1.0] * len(earlier) + conf)[: len(shown)]
        if pinned is not None:  # pinned words are the writer's (or kept) words: shown settled
            conf = [1.0 if p else c for c, p in zip(conf, pinned, strict=False)] + conf[len(pinned):]
        return text.spans(shown, conf, pinned)

    def _warm(
        self, request: Request, settings: DenoiseSettings, canvas: int, seed: int, max_new: int
    ) -> warm_canvas.WarmCanvas | None:
        """The warm canvas of a rewrite at strength < 1 or of a request that starts from a given canvas."""
        if isinstance(request, RewriteRequest):
            start = request.warm_start()
        elif isinstance(request, DraftRequest):
            start = request.canvas
        else:
            start = None
        if warm_canvas.cold(start):
            return None
        assert start is not None and self._text is not None
        return warm_canvas.plan(
            self.tokenizer, start, rows=settings.candidates, canvas_length=canvas, eos_id=self._eos[0],
            pad_id=self._pad, stop_ids=sorted({*self._eos, self._pad}), seed=seed, decode=self._text.text,
        )

    def _max_new_tokens(self, request: Request, canvas: int) -> int:
        if isinstance(request, DraftRequest):
            return max(1, request.max_new_tokens)
        if isinstance(request, RewriteRequest):
            if request.max_new_tokens:
                return request.max_new_tokens
            selected = len(self.tokenizer(request.selection, add_special_tokens=False)["input_ids"])
            return max(canvas, math.ceil((selected * 2 + 16) / canvas) * canvas)
        return canvas

    def _rows(
        self, request: Request, settings: DenoiseSettings, canvas: int
    ) -> tuple[int, Frozen | None, list[int] | None]:
        """How many batch rows, and for infill the pinned layout of each row and its middle length."""
        if not isinstance(request, InfillRequest):
            return settings.candidates, None, None
        # Only the first canvas of `after` can be pinned; the app sends the whole rest of the document, so
        # tokenize a piece that surely holds a canvas of tokens, not all of it.
        after = request.after[: canvas * 32]
        after_ids = text_ids(self.tokenizer, after) if after else []  # typed control markers stay text
        if request.canvas is not None:  # a warm middle: its tokens fix the length
            middle = len(self._canvas_tokens(request.canvas)[0])
            if not 1 <= middle < canvas:
                raise PromptTooLongError(
                    f"The text to start the gap from takes {middle} tokens; the gap holds between 1 and "
                    f"{canvas - 1} with this model. Select a shorter gap."
                )
            lengths = [middle] * settings.candidates
        elif request.middle_tokens is not None:
            if not 1 <= request.middle_tokens < canvas:
                raise PromptTooLongError(
                    f"The gap can hold between 1 and {canvas - 1} tokens with this model; choose a length in "
                    "that range or use Draft for longer text."
                )
            lengths = [request.middle_tokens] * settings.candidates
        else:
            lengths = infill.search_lengths(canvas, len(after_ids))
        layouts = [infill.layout(after_ids, n, canvas) for n in lengths]
        frozen = Frozen(torch.stack([lay.mask for lay in layouts]), torch.stack([lay.ids for lay in layouts]))
        return len(layouts), frozen, lengths

    def _canvas_tokens(self, start: Any) -> tuple[list[int], list[bool]]:
        assert self._text is not None
        return warm_canvas.segment_ids(self.tokenizer, start.text, start.pins, self._text.text)

    def _infill_warm(self, start: Any, frozen: Frozen, seed: int) -> warm_canvas.WarmCanvas:
        ids, flags = self._canvas_tokens(start)
        return warm_canvas.infill_plan(
            self.tokenizer, start, frozen_mask=frozen.mask, frozen_ids=frozen.ids, middle_ids=ids,
            middle_pins=flags, stop_ids=sorted({*self._eos, self._pad}), seed=seed,
        )

    def _candidates(
        self, out: DenoiseOutput, middles: list[int] | None, wanted: int, *, limit: int | None = None
    ) -> tuple[Candidate, ...]:
        """The distinct rows, best first; a draft or rewrite is cut to the `limit` tokens asked for (the model
        writes whole canvases, so a 32-token request would otherwise come back as a 64- or 256-token one)."""
        text = self._text
        assert text is not None
        generated = out.sequences[:, out.prompt_length :]
        found = []
        for r in range(generated.shape[0]):
            ids = generated[r].tolist()
            conf = out.confidence[r].tolist()
            if middles is not None:
                ids, conf = _middle(text, ids, conf, middles[r])
                shown = ids
            else:
                ids, conf = ids[:limit], conf[:limit]
                while ids and ids[-1] == self._pad:
                    ids.pop()
                shown = text.visible_ids(ids)
            score = sum(conf[: len(shown)]) / len(shown) if shown else 0.0
            decoded = text.text(shown)  # the same safe decoding the ghost text showed, so accept = what was seen
            found.append(Candidate(decoded, tuple(ids), score))
        if middles is not None:  # infill rows are lengths or seeds: best first
            found.sort(key=lambda c: c.confidence, reverse=True)
        return tuple(_distinct_nonempty(found)[: max(1, wanted)])


def prefix_cache_bytes() -> int:
    """The prefix cache's memory bound: `LETTERPRESS_PREFIX_CACHE_MB` (0 turns reuse off), 1 GiB by default."""
    import os

    try:
        mb = float(os.environ.get("LETTERPRESS_PREFIX_CACHE_MB", "1024"))
    except ValueError:
        mb = 1024.0
    return max(0, int(mb * (1 << 20)))


def _pins(warm: warm_canvas.WarmCanvas | None, row: int, block: int, canvas: int) -> list[bool] | None:
    """Pinned flags of a row's positions up to the end of `block` (None without pins)."""
    if warm is None or not bool(warm.pinned.any()):
        return None
    return warm.pinned[row, : (block + 1) * canvas].tolist()


def _without_context(request: Request) -> Request:
    """The request with no surrounding document: the part of the prompt that can never be trimmed."""
    import dataclasses

    if isinstance(request, RewriteRequest):
        return dataclasses.replace(request, before="", after="")
    return dataclasses.replace(request, before=prompts.TRIM_MARK)  # the template and instruction are the floor


def _distinct_nonempty(found: list[Candidate]) -> list[Candidate]:
    """Alternatives worth cycling through: a row that ended at once (empty) or repeats another is dropped, unless
    nothing else is left."""
    seen: set[str] = set()
    kept = []
    for cand in found:
        if cand.text.strip() and cand.text not in seen:
            seen.add(cand.text)
            kept.append(cand)
    return kept or found[:1]


def _middle(text: TokenText, ids: list[int], conf: list[float], middle: int) -> tuple[list[int], list[float]]:
    """An infill row's suggestion: its middle slots up to the first stop id (a row may end its middle early: what
    follows an end-of-turn is not part of it); control spans are left out by `TokenText.spans`."""
    ended = len(text.visible_ids(ids[:middle]))
    return ids[:ended], conf[:ended]
