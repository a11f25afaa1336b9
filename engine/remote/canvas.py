"""The canvas-control tier of vLLM's DiffusionGemma `vllm_xargs`, as the remote engine uses it.

vLLM (0.32, `vllm/utils/diffusion.py`) validates: `diffusion_seed_canvas` (exactly one canvas of token ids:
the first canvas starts from it instead of noise), `diffusion_pinned` (canvas positions held through every
step), `diffusion_canvas_length` (a narrower canvas), `diffusion_max_steps` (a step cap),
`diffusion_read_only` (one canvas is the whole output). A build without the tier may ignore unknown xargs
silently, so the probe checks that a pinned token really comes back, not only that the request was accepted.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

from engine.api import InfillRequest, Request, RewriteRequest, ServerError, ServerRejectedError
from engine.remote import shapes
from engine.remote.client import ServerClient

MAX_CANVAS = 8192  # a canvas length a server may claim (DiffusionGemma: 256; the demo: 64)
MAX_VOCAB = 1 << 24  # a vocabulary size a server may claim (DiffusionGemma: 262,144)
PROBE_TOKEN = 7  # any id every vocabulary has; the probe pins it at position 0 and expects it back
_EXACTLY = re.compile(r"must hold exactly (\d+) ids")


def probe_xargs() -> dict[str, Any]:
    return {
        "diffusion_canvas_length": 4,
        "diffusion_seed_canvas": [PROBE_TOKEN, 3, 3, 3],
        "diffusion_pinned": [0],
        "diffusion_max_steps": 1,
        "diffusion_read_only": True,
    }


def probe_body(model: str, prompt: list[int]) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": 4,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
        "vllm_xargs": probe_xargs(),
    }


def probe(client: ServerClient, model: str, prompt: list[int]) -> tuple[bool, str]:
    """(the tier works, why not): one read-only step on a 4-token canvas whose position 0 is pinned."""
    try:
        answer = client.post_json("/v1/completions", probe_body(model, prompt))
    except ServerRejectedError as exc:
        return False, f"it refused the probe ({exc.field or 'vllm_xargs'})"
    ids = shapes.completion_token_ids(answer, client.host)
    if not ids or ids[0] != PROBE_TOKEN:
        return False, "it ignored a pinned position"
    return True, ""


def canvas_length_of(client: ServerClient, model: str, default: int) -> int:
    """The served canvas length, read from vLLM's own refusal of a one-id seed canvas (no other API says
    it)."""
    body = {"model": model, "prompt": [2], "max_tokens": 1, "vllm_xargs": {"diffusion_seed_canvas": [3]}}
    try:
        client.post_json("/v1/completions", body)
    except ServerError as exc:
        found = _EXACTLY.search(exc.message)
        if found and len(found.group(1)) <= 6 and 1 <= int(found.group(1)) <= MAX_CANVAS:
            return int(found.group(1))
    return default  # no length said, or one no DiffusionGemma canvas has: the reference canvas


def token_ids(choice: dict[str, Any] | Any) -> list[int]:
    """The ids of a choice whose logprobs came as "token_id:N" strings (return_tokens_as_token_ids)."""
    lp = choice.get("logprobs") if isinstance(choice, dict) else getattr(choice, "logprobs", None)
    tokens = (lp.get("tokens") if isinstance(lp, dict) else getattr(lp, "tokens", None)) or []
    out = []
    for tok in tokens:
        tok = str(tok)
        if tok.startswith("token_id:"):
            out.append(int(tok.split(":", 1)[1]))
    return out


def noise(rng: random.Random, count: int, vocab: int) -> list[int]:
    return [rng.randrange(4, vocab) for _ in range(count)]


def infill_canvas(
    after_ids: list[int], middle: int, canvas: int, rng: random.Random, vocab: int
) -> tuple[list[int], list[int]]:
    """[noise × middle | after (pinned) | noise]: the text after the gap held in place while the middle
    settles (the local engine's layout, `engine.infill`)."""
    pinned = min(len(after_ids), canvas - middle)
    ids = noise(rng, middle, vocab) + after_ids[:pinned] + noise(rng, canvas - middle - pinned, vocab)
    return ids, list(range(middle, middle + pinned))


def warm_canvas(
    text_ids: list[int],
    pinned_flags: list[bool],
    share: float,
    canvas: int,
    rng: random.Random,
    vocab: int,
    pad: int,
) -> tuple[list[int], list[int]]:
    """A canvas that starts from existing text: a `share` of the unpinned positions as noise, pinned ones
    held."""
    ids = list(text_ids[:canvas]) + [pad] * max(0, canvas - len(text_ids))
    flags = list(pinned_flags[:canvas]) + [False] * max(0, canvas - len(pinned_flags))
    free = [i for i in range(min(len(text_ids), canvas)) if not flags[i]]
    for i in rng.sample(free, k=round(share * len(free))):
        ids[i] = rng.randrange(4, vocab)
    return ids, [i for i, p in enumerate(flags) if p]


def steps_for(share: float, max_steps: int) -> int:
    return max(1, math.ceil(share * max_steps))


def is_warm(request: Request) -> bool:
    if isinstance(request, RewriteRequest):
        return request.warm_start() is not None
    return getattr(request, "canvas", None) is not None and not isinstance(request, InfillRequest)


_VOCAB = re.compile(r"ids must be in \[0, (\d+)\)")


def vocab_size_of(client: ServerClient, model: str, default: int) -> int:
    """The served vocabulary size, from vLLM's refusal of an out-of-range seed id."""
    body = {
        "model": model,
        "prompt": [2],
        "max_tokens": 1,
        "vllm_xargs": {"diffusion_seed_canvas": [1 << 30]},
    }
    try:
        client.post_json("/v1/completions", body)
    except ServerError as exc:
        found = _VOCAB.search(exc.message)
        if found and len(found.group(1)) <= 9 and 8 <= int(found.group(1)) <= MAX_VOCAB:
            return int(found.group(1))
    return default


def pinned_token_flags(
    text: str, offsets: list[tuple[int, int]], pins: tuple[tuple[int, int], ...]
) -> list[bool]:
    """A token is pinned when its characters, less the space it starts with, lie inside a pinned range."""
    flags = []
    for s, e in offsets:
        piece = text[s:e]
        s += len(piece) - len(piece.lstrip())
        flags.append(any(a <= s and e <= b and s < e for a, b in pins))
    return flags


def for_request(
    tokenizer: Any, request: Request, canvas: int, vocab: int, max_steps: int, seed: int
) -> tuple[dict[str, Any] | None, int | None]:
    """The `vllm_xargs` of `request` on a server with canvas control, and for an infill the middle's length
    (None: a plain request, nothing to seed)."""
    rng = random.Random(seed)
    if isinstance(request, InfillRequest):
        after = request.after[: canvas * 32]
        after_ids = tokenizer(after, add_special_tokens=False)["input_ids"] if after else []
        if request.canvas is not None:
            middle = len(tokenizer(request.canvas.text, add_special_tokens=False)["input_ids"])
        else:
            middle = request.middle_tokens or max(2, canvas // 4)
        middle = max(1, min(middle, canvas - 1))
        ids, pins = infill_canvas(list(after_ids), middle, canvas, rng, vocab)
        return {
            "diffusion_seed_canvas": ids,
            "diffusion_pinned": pins,
            "diffusion_max_steps": max_steps,
        }, middle
    start = request.warm_start() if isinstance(request, RewriteRequest) else request.canvas
    if start is None:
        return {"diffusion_max_steps": max_steps}, None
    enc = tokenizer(start.text, add_special_tokens=False, return_offsets_mapping=True)
    flags = pinned_token_flags(start.text, enc["offset_mapping"], start.pins)
    ids, pins = warm_canvas(list(enc["input_ids"]), flags, start.noise, canvas, rng, vocab, pad=0)
    xargs: dict[str, Any] = {
        "diffusion_seed_canvas": ids,
        "diffusion_max_steps": steps_for(start.noise, max_steps),
    }
    if pins:
        xargs["diffusion_pinned"] = pins
    return xargs, None
