"""Request -> prompt -> denoise -> display -> Result, synchronously, on whichever thread calls it.

`Session` is the real `engine.api.Engine`: the GUI's engine thread owns one, the command line another. Every
failure a writer can cause or meet (no model, empty request, too long, out of memory, a bug mid-request) comes
back as an `EngineError` subclass and leaves the session usable.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from engine import attention
from engine import budget as request_budget
from engine import canvas as warm_canvas
from engine.api import (
    LOCAL_CAPABILITIES,
    Candidate,
    CandidateView,
    Capabilities,
    DenoiseSettings,
    Device,
    DraftRequest,
    EngineError,
    GenerationError,
    LoadProgress,
    ModelInfo,
    ModelNotLoadedError,
    OutOfMemoryError,
    ProgressCallback,
    Quantization,
    Request,
    Result,
    Span,
    Stats,
    StepCallback,
    StepEvent,
    WontFitError,
    is_host_out_of_memory,
)
from engine.denoise import DenoiseOutput, StepState, denoise
from engine.display import TokenText, finished_candidates, row_spans
from engine.plan import ModelFacts, Plan, make_plan
from engine.prefix_cache import PrefixCache
from engine.prompts import brief_limit, chars_per_token
from engine.threads import ThreadPolicy, model_bytes
from engine.weights.loader import LoadedModel, load_model

log = logging.getLogger(__name__)


def _release_tensors(model: torch.nn.Module) -> None:
    """Drop every parameter and buffer of a model that is being replaced, so its memory is freed at once by
    reference counting instead of waiting for a full cyclic collection (the modules form cycles). The empty
    module shells that remain are small; the collector takes them whenever it runs."""
    for module in model.modules():
        module._parameters.clear()
        module._buffers.clear()
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor):  # tensors kept as plain attributes (quantized weights' state)
                delattr(module, name)


def with_brief_limit(loaded: LoadedModel) -> LoadedModel:
    """`loaded` with the most characters of a brief its model reads (`ModelInfo.brief_chars`), counted on its
    own tokenizer: the prompt's rules, so the session sets it and the weights room stays free of them."""
    info = loaded.info
    limit = brief_limit(info.context_length, info.canvas_length, chars_per_token(loaded.tokenizer))
    return dataclasses.replace(loaded, info=dataclasses.replace(info, brief_chars=limit))


class Session:
    """Owns one loaded model and runs requests against it."""

    def __init__(self) -> None:
        self._loaded: LoadedModel | None = None
        self._text: TokenText | None = None
        self._eos: list[int] = []
        self._pad = 0
        self.last_output: DenoiseOutput | None = None  # for benchmarks and tests
        # Encoder caches of the last prompts per document (prefix reuse); made at load, freed at unload and
        # OOM.
        self.prefix_cache: PrefixCache | None = None
        self.last_plan: request_budget.RequestPlan | None = None  # the memory plan of the latest request
        self.last_request_plan: Plan | None = None  # the whole plan of the latest request (`engine.plan`)
        self._config: dict[str, Any] = {}
        self.checkpoint_settings = (
            DenoiseSettings()
        )  # the loaded checkpoint's sampler settings (generation_config)
        self.threads: ThreadPolicy | None = None  # the CPU thread policy, re-applied before every request
        self._running_on: int | None = None  # the thread running a request (its views are made there only)

    # -- Engine protocol ------------------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        """The local model can do everything the app offers (see `engine.api.Capabilities`)."""
        return LOCAL_CAPABILITIES

    @property
    def info(self) -> ModelInfo | None:
        return self._loaded.info if self._loaded else None

    @property
    def model(self) -> Any:
        return self._require().model

    @property
    def tokenizer(self) -> Any:
        return self._require().tokenizer

    # -- what tools and the command line read (never the private fields) -------------------------------------

    @property
    def token_text(self) -> TokenText:
        """Ids -> the safe text the writer sees, for the loaded model."""
        self._require()
        assert self._text is not None
        return self._text

    @property
    def eos_ids(self) -> list[int]:
        return list(self._eos)

    @property
    def pad_id(self) -> int:
        return self._pad

    @property
    def model_facts(self) -> ModelFacts:
        """What planning reads of the loaded model (`engine.plan.ModelFacts`)."""
        return self._facts(self._require())

    def plan(self, request: Request) -> Plan:
        """The plan `run` would execute for `request` now (the memory budget as of now); raises the same
        writer's errors `run` would, before anything runs."""
        return self._plan(self._require(), request)

    def load(
        self,
        model_dir: str | Path,
        *,
        device: Device = "auto",
        quantization: Quantization = "auto",
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelInfo:
        # The model in use stays loaded until the new one has loaded completely, so a folder that fails its
        # check or its load never takes away a working model. Only when the new one needs the memory the old
        # one holds is the old one released first, and then loaded again if the new one fails after all.
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
                raise type(again)(
                    again.message
                    + (
                        f" {previous.info.name} was loaded again."
                        if restored
                        else f" {previous.info.name} had to be unloaded to try."
                    )
                ) from exc
        tok = loaded.tokenizer
        gen = loaded.model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else tok.eos_token_id
        eos_ids = list(eos) if isinstance(eos, (list, tuple)) else [int(eos)]
        pad = int(gen.pad_token_id if gen.pad_token_id is not None else (tok.pad_token_id or 0))
        text = TokenText(tok, stop_ids={*eos_ids, pad})
        previous_model = self._loaded.model if self._loaded is not None else None
        self._loaded, self._eos, self._pad, self._text = loaded, eos_ids, pad, text  # the swap, all at once
        self._config = loaded.model.config.to_dict()
        self.checkpoint_settings = DenoiseSettings.from_generation_config(gen)
        self.prefix_cache = PrefixCache(prefix_cache_bytes())  # the old model's cached prefixes go with it
        if previous_model is not None:
            _release_tensors(previous_model)  # its weights go by reference count, now
            del previous_model
            self._free_memory(
                collect=False
            )  # no full collection: it held the GIL 220-330 ms, the window froze
        self.threads = ThreadPolicy(model_bytes(loaded.model)) if loaded.info.device == "cpu" else None
        if self.threads is not None:
            self.threads.apply()
        if on_progress is not None:
            on_progress(LoadProgress(0, 0, stage="warming up"))
        self._warm_up(loaded)
        if on_progress is not None:
            on_progress(held[-1] if held else LoadProgress(1, 1, stage="ready"))
        return loaded.info

    def _load_new(
        self,
        model_dir: str | Path,
        device: Device,
        quantization: Quantization,
        on_progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> LoadedModel:
        attention.install()  # grouped-query attention without the K/V copy for the 512-dim global layers
        try:
            loaded = load_model(
                model_dir, device=device, quantization=quantization, on_progress=on_progress, cancel=cancel
            )
        except torch.cuda.OutOfMemoryError as exc:
            self._free_memory()
            raise OutOfMemoryError(
                "The GPU ran out of memory while loading the model. Close other programs using the GPU, or "
                "choose 4-bit quantization in Settings."
            ) from exc
        return with_brief_limit(loaded)

    def _restore(self, info: ModelInfo) -> bool:
        """Load the model that was in use before a failed replacement (best effort)."""
        try:
            self.load(info.path, device=info.device, quantization=info.quantization)  # type: ignore[arg-type]
        except Exception:
            log.exception("could not load %s again", info.path)
            return False
        return True

    def _warm_up(self, loaded: LoadedModel) -> None:
        """One tiny request through the whole path (chat template, first forward's allocations, lazy imports),
        so the writer's first suggestion is as fast as every later one. A failure here is only logged."""
        request = DraftRequest(
            before="Hello.", max_new_tokens=1, settings=DenoiseSettings(max_steps=1, seed=0)
        )
        try:
            with torch.inference_mode():
                self._run(loaded, request, None, None)
        except Exception:
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
        self._running_on = threading.get_ident()
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
                "The GPU ran out of memory for this request. Try fewer alternatives, a shorter selection, or "
                "close other programs using the GPU; the model stays loaded."
            ) from exc
        except (MemoryError, RuntimeError) as exc:
            if not is_host_out_of_memory(exc):
                log.exception("generation failed")
                raise GenerationError(
                    f"Generation failed unexpectedly ({type(exc).__name__}: {exc}). Try again."
                ) from exc
            if self.prefix_cache is not None:  # the CPU allocator ran short: RAM, not the GPU
                self.prefix_cache.clear()
            self._free_memory()
            raise OutOfMemoryError(
                "The computer ran out of memory (RAM) for this request. Try fewer alternatives, a shorter "
                "selection, or close other programs to free RAM; the model stays loaded."
            ) from exc
        except Exception as exc:  # a bug must not take the editor down: report it, keep the session usable
            log.exception("generation failed")
            raise GenerationError(
                f"Generation failed unexpectedly ({type(exc).__name__}: {exc}). Try again."
            ) from exc
        finally:
            self._running_on = None

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
        self,
        loaded: LoadedModel,
        request: Request,
        on_step: StepCallback | None,
        cancel: threading.Event | None,
    ) -> Result:
        start = time.perf_counter()
        return self._execute(loaded, self._plan(loaded, request), on_step, cancel, start)

    def _plan(self, loaded: LoadedModel, request: Request) -> Plan:
        plan = make_plan(
            request, self._facts(loaded), self.checkpoint_settings, prefix_cache=self.prefix_cache
        )
        self.last_request_plan, self.last_plan = plan, plan.memory
        return plan

    def _facts(self, loaded: LoadedModel) -> ModelFacts:
        assert self._text is not None
        return ModelFacts(
            tokenizer=loaded.tokenizer,
            canvas_length=loaded.info.canvas_length,
            context_length=loaded.info.context_length,
            eos_ids=tuple(self._eos),
            pad_id=self._pad,
            config=self._config,
            device=loaded.model.device,
            decode=self._text.text,
        )

    def _execute(
        self,
        loaded: LoadedModel,
        plan: Plan,
        on_step: StepCallback | None,
        cancel: threading.Event | None,
        start: float,
    ) -> Result:
        """Run a plan: the denoising loop over its rows, each step relayed as a `StepEvent`, then the
        result."""
        relay = _StepRelay(self, plan, on_step, start) if on_step is not None else None
        out = denoise(
            loaded.model,
            plan.prompt_ids(loaded.model.device),
            plan.settings,
            max_new_tokens=plan.max_new_tokens,
            eos_token_ids=self._eos,
            pad_token_id=self._pad,
            seed=plan.seed,
            frozen=plan.frozen,
            max_blocks=plan.max_blocks,
            on_step=relay,
            cancel=cancel,
            prefix=self.prefix_cache,
            document=plan.document,
            warm=plan.warm,
        )
        self.last_output = out
        candidates = self._candidates(out, plan.middles, plan.settings.candidates, limit=plan.max_new_tokens)
        best = candidates[0] if candidates else None
        stats = Stats(
            forwards=out.forwards,
            new_tokens=len(best.token_ids) if best else 0,
            seconds=time.perf_counter() - start,
            first_draft_seconds=(relay.first_draft if relay is not None else 0.0) or out.first_step_seconds,
            steps=out.steps,
            blocks=out.blocks,
            prompt_tokens=out.prefill.prompt_tokens,
            reused_tokens=out.prefill.reused_tokens,
        )
        return Result(plan.request.request_id, candidates, stats, cancelled=out.cancelled, notice=plan.notice)

    def _view(
        self,
        ids_t: torch.Tensor,
        conf_t: torch.Tensor,
        row: int,
        earlier: tuple[int, ...],
        middle: int | None,
        *,
        limit: int | None = None,
        pinned: list[bool] | None = None,
    ) -> tuple[Span, ...]:
        """The spans of one row at one step, made on the thread that runs the request: a step crosses to the
        UI thread as plain data, so the UI never reads a tensor nor writes the shared `TokenText` cache."""
        if self._running_on is not None and threading.get_ident() != self._running_on:
            raise RuntimeError("a step's view was made outside the thread running the request")
        assert self._text is not None
        return row_spans(
            self._text,
            ids_t[row].tolist(),
            conf_t[row].tolist(),
            earlier=earlier,
            middle=middle,
            limit=limit,
            pinned=pinned,
        )

    def _candidates(
        self, out: DenoiseOutput, middles: Sequence[int] | None, wanted: int, *, limit: int | None = None
    ) -> tuple[Candidate, ...]:
        """The distinct rows, best first (see `engine.display.finished_candidates`)."""
        assert self._text is not None
        generated = out.sequences[:, out.prompt_length :]
        rows = [(generated[r].tolist(), out.confidence[r].tolist()) for r in range(generated.shape[0])]
        return finished_candidates(
            self._text, rows, pad_id=self._pad, wanted=wanted, middles=middles, limit=limit
        )


class _StepRelay:
    """The loop's step states -> `StepEvent`s for the caller: keeps each row's finished canvases across the
    blocks of a multi-block draft, and when the first draft was shown."""

    def __init__(self, session: Session, plan: Plan, on_step: StepCallback, start: float) -> None:
        self._session, self._plan, self._on_step, self._start = session, plan, on_step, start
        self._block = 0
        self._last_ids: torch.Tensor | None = None  # the latest step's [rows, L] ids
        self._done: list[tuple[int, ...]] = [()] * plan.rows  # finished canvases of each row
        self.first_draft = 0.0

    def __call__(self, state: StepState) -> None:
        plan = self._plan
        if state.block > self._block:  # a new block began: the previous one's last canvas is final
            self._block = state.block
            assert self._last_ids is not None
            self._done = [done + tuple(self._last_ids[r].tolist()) for r, done in enumerate(self._done)]
        self._last_ids = state.argmax
        canvas = int(state.argmax.shape[1])
        # Each row's spans are made here, on the engine's thread: the event the UI receives is plain data.
        views = tuple(
            CandidateView(
                self._session._view(
                    state.argmax,
                    state.confidence,
                    r,
                    self._done[r],
                    plan.middles[r] if plan.middles is not None else None,
                    limit=plan.max_new_tokens,
                    pinned=_pins(plan.warm, r, state.block, canvas),
                ),
                row=r,
            )
            for r in range(plan.rows)
        )
        now = time.perf_counter() - self._start
        if not self.first_draft:
            self.first_draft = now
        self._on_step(
            StepEvent(
                plan.request.request_id,
                state.step,
                plan.settings.max_steps,
                state.block,
                views,
                time.perf_counter() - self._start,
            )
        )


def prefix_cache_bytes() -> int:
    """The prefix cache's memory bound: `LETTERPRESS_PREFIX_CACHE_MB` (0 turns reuse off), 1 GiB by
    default."""
    from engine.env import env_float

    mb = env_float("LETTERPRESS_PREFIX_CACHE_MB", 1024.0, low=0.0, high=1024.0 * 1024, meaning="1024 MB")
    return int(mb * (1 << 20))


def _pins(warm: warm_canvas.WarmCanvas | None, row: int, block: int, canvas: int) -> list[bool] | None:
    """Pinned flags of a row's positions up to the end of `block` (None without pins)."""
    if warm is None or not bool(warm.pinned.any()):
        return None
    return warm.pinned[row, : (block + 1) * canvas].tolist()
