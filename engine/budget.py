"""Memory budgeted per request: before a request starts, what it needs is checked against what is free right
now.

The load-time fit (`engine.weights.fit`) says whether the weights and one typical request fit. A request's own
need (KV cache for its context, one denoising step for its candidate rows, the prefill) varies with the number
of alternatives the writer asked for and the length of the document. Rather than failing halfway with an
out-of-memory error, a request that would not fit first gives up alternatives (down to one), then trims the
context it reads (the far end of the document, as the prompt builder already does), and says so in the
result's notice. Only when even one alternative over the bare instruction cannot fit is it refused, with the
numbers. Memory held by the prefix cache (`engine.prefix_cache`) is given back before any of that: the session
drops the cached prefixes and plans again when a request does not fit as asked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.api import OutOfMemoryError, free_memory_advice, memory_name
from engine.weights import fit

# Keep this share of the free memory unplanned: the allocator's rounding, cuBLAS workspaces, other programs.
SAFETY_SHARE = 0.10
SAFETY_BYTES = 256 * 1024**2


@dataclass(frozen=True)
class RequestPlan:
    rows: int  # batch rows to run (candidates, or infill lengths)
    context_tokens: int  # prompt tokens allowed (the prompt is rebuilt to this when it is shorter than asked)
    need_bytes: int  # what the planned request is estimated to add on top of the weights
    free_bytes: int | None  # free device memory when planned (None: unknown, nothing was checked)
    notice: str = ""


def request_bytes(
    config: dict[str, Any], rows: int, context_tokens: int, prefill_rows: int | None = None
) -> int:
    """What a request adds on top of the resident weights (KV cache, one step, the prefill), from the fit."""
    est = fit.estimate(
        config, "bf16", context_tokens=context_tokens, candidates=rows, prefill_rows=prefill_rows
    )
    return est.request_bytes


def free_device_bytes(device: Any) -> int | None:
    """Free memory on `device` now: the driver's free memory plus what torch's allocator holds unused (CUDA);
    available host RAM (CPU). None when it cannot be told."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
        return int(free + torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev))
    if dev.type == "cpu":
        mem = fit.host_memory()
        return mem.free_bytes or None
    return None


def plan_request(
    config: dict[str, Any],
    *,
    rows: int,
    prompt_tokens: int,
    new_tokens: int,
    min_prompt_tokens: int | Callable[[], int],
    free_bytes: int | None,
    device_label: str = "the device",
    need: Callable[[int, int], int] | None = None,
) -> RequestPlan:
    """The largest request (rows first, then context) that fits in `free_bytes`.

    `prompt_tokens` is the prompt as built, `new_tokens` the generated positions (whole canvases) the KV cache
    must hold, `min_prompt_tokens` the prompt without any surrounding context (cannot be trimmed). `need(rows,
    context)` defaults to `request_bytes`. `min_prompt_tokens` may be a function: it is asked only when the
    context must shrink (counting it renders the template once more). Raises `OutOfMemoryError` when one row
    over the bare prompt cannot fit.
    """
    need = need or (lambda r, ctx: request_bytes(config, r, ctx))
    wanted = need(rows, prompt_tokens + new_tokens)
    if free_bytes is None:
        return RequestPlan(rows, prompt_tokens, wanted, None)
    usable = int(free_bytes * (1 - SAFETY_SHARE)) - SAFETY_BYTES
    if wanted <= usable:
        return RequestPlan(rows, prompt_tokens, wanted, free_bytes)
    notes = []
    fitted = rows
    while fitted > 1 and need(fitted, prompt_tokens + new_tokens) > usable:
        fitted -= 1
    if fitted < rows:
        notes.append(
            f"{rows} alternatives would need about {fit.gb(wanted)} with {fit.gb(free_bytes)} free on "
            f"{device_label}; generating {fitted} instead."
        )
    context = prompt_tokens
    if need(fitted, context + new_tokens) > usable:
        floor = min_prompt_tokens() if callable(min_prompt_tokens) else min_prompt_tokens
        lo, hi = floor, prompt_tokens  # the largest context that fits, by bisection
        if need(fitted, lo + new_tokens) > usable:
            raise OutOfMemoryError(
                f"This request needs about {fit.gb(need(1, lo + new_tokens))} of {memory_name(device_label)} "
                f"even with one alternative and no surrounding text, and {device_label} has "
                f"{fit.gb(free_bytes)} free. {free_memory_advice(device_label).capitalize()}, ask for a "
                "shorter draft, or choose 4-bit quantization."
            )
        while lo < hi:
            mid = math.ceil((lo + hi) / 2)
            if need(fitted, mid + new_tokens) <= usable:
                lo = mid
            else:
                hi = mid - 1
        context = lo
        notes.append(
            f"To fit in the {fit.gb(free_bytes)} free on {device_label}, it read {context:,} of the "
            f"{prompt_tokens:,} prompt tokens (the text nearest to your cursor)."
        )
    return RequestPlan(fitted, context, need(fitted, context + new_tokens), free_bytes, " ".join(notes))
