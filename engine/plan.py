"""Request -> one immutable plan, computed once, before anything runs.

A plan fixes everything a request's run depends on: the sampler settings and seed, the prompt ids (the chat
template rendered once, trimmed to the token budget), how many batch rows run (candidates, or an infill's
lengths), an infill's frozen slots, the warm canvas of a light rewrite or a re-roll, how many tokens are
written, the memory budget and the notices the writer is shown. `engine.session.Session` executes plans;
nothing in the run goes back to planning.

The chat template is rendered once for a request that fits: the prompt without its surrounding context (the
floor the memory budget may trim to, and a rewrite's room on a short-context model) is rendered only when it
is needed. The memory is planned once; a second time only when the request does not fit as asked and the
prefix cache gives its memory back first (`engine.budget`).
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from engine import budget as request_budget
from engine import canvas as warm_canvas
from engine import infill, prompts
from engine.api import (
    DenoiseSettings,
    DraftRequest,
    InfillRequest,
    OutOfMemoryError,
    PromptTooLongError,
    Request,
    RewriteRequest,
    WarmStart,
)
from engine.denoise import Frozen
from engine.lengths import LengthWindow, length_window
from engine.prefix_cache import PrefixCache
from engine.special_tokens import text_ids


@dataclass(frozen=True)
class ModelFacts:
    """What planning reads of the loaded model: its tokenizer, shapes and special ids, never its weights."""

    tokenizer: Any
    canvas_length: int
    context_length: int
    eos_ids: tuple[int, ...]
    pad_id: int
    config: Mapping[str, Any]  # the model config as a dict (the memory estimate reads its shapes)
    device: torch.device
    decode: Callable[[Sequence[int]], str]  # ids -> the safe text the writer sees (`TokenText.text`)

    @property
    def stop_ids(self) -> list[int]:
        return sorted({*self.eos_ids, self.pad_id})


@dataclass(frozen=True)
class Plan:
    """One request, fixed: what `Session` runs and reports, nothing computed twice."""

    request: Request
    settings: DenoiseSettings  # resolved against the checkpoint's defaults
    seed: int
    prompt: prompts.Prompt  # the one prompt (ids and the trim notice)
    rows: int  # batch rows: candidates, or an infill's lengths, after the memory budget
    max_new_tokens: (
        int  # tokens the writer asked for (the model writes whole canvases; results are cut to this)
    )
    frozen: Frozen | None  # an infill's pinned ending, per row
    middles: tuple[int, ...] | None  # an infill row's middle length
    warm: warm_canvas.WarmCanvas | None  # the canvases a light rewrite / re-roll / warm infill starts from
    memory: request_budget.RequestPlan  # the memory budget's decision

    @property
    def notice(self) -> str:
        """What the writer is told about the plan: a trimmed document, fewer alternatives, less context."""
        return " ".join(n for n in (self.prompt.notice, self.memory.notice) if n)

    @property
    def max_blocks(self) -> int | None:
        return 1 if self.frozen is not None else None  # a pinned canvas (infill) is one block

    @property
    def document(self) -> str:
        return getattr(self.request, "document", "")

    def prompt_ids(self, device: torch.device | str) -> torch.Tensor:
        """[rows, P]: the one prompt row, expanded (a view, no copy) to the batch; the prefill sees the
        stride-0 rows and encodes the prompt once for all of them (`engine.prefix_cache.prefill_prompt`)."""
        one = torch.tensor([self.prompt.ids], dtype=torch.long, device=device)
        return one.expand(self.rows, -1)


def make_plan(
    request: Request,
    model: ModelFacts,
    defaults: DenoiseSettings,
    *,
    prefix_cache: PrefixCache | None = None,
) -> Plan:
    """The plan of `request` on `model`. Raises the writer's errors (empty request, too long, out of memory)
    before anything runs. `prefix_cache` gives its memory back when the request would not fit as asked."""
    settings = request.settings.resolved(defaults)  # the checkpoint's sampler where not changed
    canvas = model.canvas_length
    max_new = max_new_tokens(request, model)
    seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
    warm = _warm(request, settings, model, seed)
    floor = _Floor(model.tokenizer, request)
    prompt, max_new = _prompt_and_length(request, model, max_new, warm, floor)
    rows, frozen, middles = _rows(request, settings, model)
    new_tokens = (1 if frozen is not None else math.ceil(max_new / canvas)) * canvas
    memory = _fit_memory(model, rows, len(prompt.ids), new_tokens, floor, prefix_cache)
    if memory.rows < rows:
        rows = memory.rows
        if frozen is not None:
            frozen = Frozen(frozen.mask[:rows], frozen.ids[:rows])
        if middles is not None:
            middles = middles[:rows]
    if memory.context_tokens < len(prompt.ids):
        prompt = prompts.build_prompt(model.tokenizer, request, memory.context_tokens)
    if isinstance(request, InfillRequest) and request.canvas is not None and frozen is not None:
        warm = _infill_warm(request.canvas, frozen, model, seed)
    elif warm is not None and warm.ids.shape[0] > rows:  # the budget runs fewer rows than asked
        warm = warm.first_rows(rows)
    return Plan(request, settings, seed, prompt, rows, max_new, frozen, middles, warm, memory)


def max_new_tokens(request: Request, model: ModelFacts) -> int:
    """The tokens a request writes before the room of the context is considered."""
    canvas = model.canvas_length
    if isinstance(request, DraftRequest):
        return max(1, request.max_new_tokens)
    if isinstance(request, RewriteRequest):
        if request.max_new_tokens:
            return request.max_new_tokens
        selected = len(model.tokenizer(request.selection, add_special_tokens=False)["input_ids"])
        return max(canvas, math.ceil((selected * 2 + 16) / canvas) * canvas)
    return canvas


class _Floor:
    """The prompt without any surrounding document, rendered at most once and only when asked for: the part of
    the prompt no budget can trim, and a rewrite's measure of the room it leaves."""

    def __init__(self, tokenizer: Any, request: Request) -> None:
        self._tokenizer, self._request = tokenizer, request
        self._tokens: int | None = None

    def tokens(self) -> int:
        if self._tokens is None:
            bare = prompts.build_prompt(self._tokenizer, without_context(self._request), 1 << 30)
            self._tokens = len(bare.ids)
        return self._tokens


def without_context(request: Request) -> Request:
    """The request with no surrounding document: the part of the prompt that can never be trimmed."""
    if isinstance(request, RewriteRequest):
        return dataclasses.replace(request, before="", after="")
    return dataclasses.replace(
        request, before=prompts.TRIM_MARK
    )  # the template and instruction are the floor


def _prompt_and_length(
    request: Request, model: ModelFacts, max_new: int, warm: warm_canvas.WarmCanvas | None, floor: _Floor
) -> tuple[prompts.Prompt, int]:
    """The prompt and the tokens to write, sharing the context: on a short-context model a rewrite gives the
    selection room first and the rewrite what is left (whole canvases).

    The room is measured only when the prompt does not fit untrimmed beside the full rewrite: when it does,
    the bare prompt (shorter still) leaves at least as much room, and the rewrite keeps its full length."""
    canvas = model.canvas_length

    def written(tokens: int) -> int:  # the warm canvases must all be written
        return max(tokens, warm.blocks * canvas) if warm is not None else tokens

    def budget(tokens: int) -> int:
        return model.context_length - math.ceil(tokens / canvas) * canvas

    if isinstance(request, RewriteRequest) and not request.max_new_tokens:
        full = written(max_new)
        if budget(full) >= 8:
            try:
                prompt = prompts.build_prompt(model.tokenizer, request, budget(full))
            except PromptTooLongError:
                prompt = None
            if prompt is not None and not prompt.notice:
                return prompt, full
        room = (model.context_length - floor.tokens()) // canvas * canvas
        if room >= canvas:
            max_new = min(max_new, room)
    max_new = written(max_new)
    if budget(max_new) < 8:
        if isinstance(request, RewriteRequest):
            raise PromptTooLongError(
                "The selection is too long for the model to rewrite at once (it can read about "
                f"{model.context_length // 3:,} tokens of it). Select "
                "a shorter passage, a few paragraphs at a time."
            )
        raise PromptTooLongError(
            f"Asking for {max_new:,} new tokens leaves no room for the text before it; ask for fewer "
            "(Settings ▸ Draft length)."
        )
    return prompts.build_prompt(model.tokenizer, request, budget(max_new)), max_new


def _fit_memory(
    model: ModelFacts,
    rows: int,
    prompt_tokens: int,
    new_tokens: int,
    floor: _Floor,
    prefix_cache: PrefixCache | None,
) -> request_budget.RequestPlan:
    """Budget the request against the device's free memory now (see `engine.budget`): fewer rows, then less
    context, rather than an out-of-memory error halfway.

    Cached prefixes are a convenience, the writer's alternatives and context are not: when the request does
    not fit as asked and the prefix cache holds memory, the cache is dropped first and the request planned
    again."""

    def plan_now() -> request_budget.RequestPlan:
        return request_budget.plan_request(
            dict(model.config),
            rows=rows,
            prompt_tokens=prompt_tokens,
            new_tokens=new_tokens,
            min_prompt_tokens=lambda: min(floor.tokens(), prompt_tokens),
            free_bytes=request_budget.free_device_bytes(model.device),
            device_label=str(model.device),
        )

    reclaimable = prefix_cache is not None and prefix_cache.nbytes > 0
    try:
        plan = plan_now()
    except OutOfMemoryError:
        if not reclaimable:
            raise
        plan = None
    if plan is not None and ((plan.rows == rows and plan.context_tokens >= prompt_tokens) or not reclaimable):
        return plan
    assert prefix_cache is not None
    prefix_cache.clear()
    return plan_now()


def _warm(
    request: Request, settings: DenoiseSettings, model: ModelFacts, seed: int
) -> warm_canvas.WarmCanvas | None:
    """The warm canvas of a rewrite at strength < 1 or of a request that starts from a given canvas."""
    start: WarmStart | None
    window = None
    if isinstance(request, RewriteRequest):
        start = request.warm_start()
        if request.max_new_tokens is None:  # the app's rewrites: the length follows the selection (canvas.py)
            window = (
                _reroll_window(model, start)
                if request.canvas and start
                else _length_window(model, request.selection, request.instruction)
            )
            start = start or WarmStart(request.selection, noise=1.0)
    elif isinstance(request, DraftRequest):
        start = request.canvas
        window = _reroll_window(model, start) if start is not None else None  # a re-roll keeps its length
    else:
        start = None
    if window is None and warm_canvas.cold(start):
        return None
    assert start is not None
    return warm_canvas.plan(
        model.tokenizer,
        start,
        rows=settings.candidates,
        canvas_length=model.canvas_length,
        eos_id=model.eos_ids[0],
        pad_id=model.pad_id,
        stop_ids=model.stop_ids,
        seed=seed,
        decode=model.decode,
        window=window,
    )


def _reroll_window(model: ModelFacts, start: WarmStart) -> LengthWindow:
    """A re-roll keeps its canvas's length: that of the shown tokens when it carries them (`WarmStart.ids`),
    else of its text tokenized."""
    shown = warm_canvas.shown_ids(start, model.decode)
    return length_window(len(shown[0])) if shown is not None else _length_window(model, start.text, "")


def _length_window(model: ModelFacts, text: str, instruction: str) -> LengthWindow:
    tokens = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    return length_window(len(tokens), instruction)


def _rows(
    request: Request, settings: DenoiseSettings, model: ModelFacts
) -> tuple[int, Frozen | None, tuple[int, ...] | None]:
    """How many batch rows, and for infill the pinned layout of each row and its middle length."""
    if not isinstance(request, InfillRequest):
        return settings.candidates, None, None
    canvas = model.canvas_length
    # Only the first canvas of `after` can be pinned; the app sends the whole rest of the document, so
    # tokenize a piece that surely holds a canvas of tokens, not all of it.
    after = request.after[: canvas * 32]
    after_ids = text_ids(model.tokenizer, after) if after else []  # typed control markers stay text
    if request.canvas is not None:  # a warm middle: its tokens fix the length
        middle = len(canvas_tokens(request.canvas, model)[0])
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
    return len(layouts), frozen, tuple(lengths)


def canvas_tokens(start: WarmStart, model: ModelFacts) -> tuple[list[int], list[bool]]:
    """The token ids of a warm start (the shown ones when it carries them) and which of them are pinned."""
    return warm_canvas.canvas_ids(model.tokenizer, start, model.decode)


def _infill_warm(start: WarmStart, frozen: Frozen, model: ModelFacts, seed: int) -> warm_canvas.WarmCanvas:
    ids, flags = canvas_tokens(start, model)
    return warm_canvas.infill_plan(
        model.tokenizer,
        start,
        frozen_mask=frozen.mask,
        frozen_ids=frozen.ids,
        middle_ids=ids,
        middle_pins=flags,
        stop_ids=model.stop_ids,
        seed=seed,
    )
