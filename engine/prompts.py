"""Requests -> prompt token ids, through the checkpoint's own chat template (never a hard-coded Gemma format).

Each task is one user turn; the model's turn is what the canvas denoises:
- draft:   "Continue this text." + the text before the cursor; the model turn is the continuation.
- rewrite: the instruction + the selected text (and, when there is any, the surrounding text as context);
           the model turn is the rewritten passage.
- infill:  "Fill in the gap." + the text before the gap; the model turn is the missing middle *followed by the
           text after the gap*, which the engine pins into the canvas as frozen tokens (see `engine.infill`),
           so the model reads the ending bidirectionally instead of from the prompt.

The writer's document brief (style, audience, names, facts), when there is one, opens every message: it is the
most stable part of a document's prompts, so prefix reuse (`engine.prefix_cache`) keeps it encoded.

The whole document is sent; what does not fit the token budget is trimmed far from the region first: `after`
loses its end, `before` loses the text between the document's beginning (kept, up to `HEAD_TOKENS`) and the
text nearest the cursor. The cut falls on a fixed character grid, so while the writer types at the cursor
successive prompts keep the same leading text (and reuse its encoder cache) until the cut moves on by a grid
step. Never the selection, the instruction or the brief; the trim is reported as a notice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.api import (
    DraftRequest,
    EmptyRequestError,
    InfillRequest,
    PromptTooLongError,
    Request,
    RewriteRequest,
)
from engine.special_tokens import added_token_texts, text_ids

DRAFT_HEADER = "Continue this text."
REWRITE_HEADER = "Rewrite this text."
INFILL_HEADER = "Fill in the gap."
TRIM_MARK = "…"
BRIEF_HEADER = "About this document (follow this brief):"
HEAD_TOKENS = 512  # the document's beginning kept when the middle is trimmed (at most an eighth of the room)
_CHARS_PER_TOKEN = 16  # generous: text spans at most this many characters per token, to tokenize pieces only


@dataclass(frozen=True)
class Prompt:
    ids: list[int]
    notice: str = ""


def draft_message(before: str, instruction: str = "") -> str:
    head = f"{DRAFT_HEADER} {instruction.strip()}".strip()
    return f"{head}\n\n{before}"


def rewrite_message(selection: str, instruction: str, before: str = "", after: str = "") -> str:
    head = f"{REWRITE_HEADER} {instruction.strip()}".strip()
    context = ""
    if before.strip() or after.strip():
        context = f"\n\nContext before:\n{before}\n\nContext after:\n{after}"
    return f"{head}\n\n{selection}{context}"


def infill_message(before: str, instruction: str = "") -> str:
    head = f"{INFILL_HEADER} {instruction.strip()}".strip()
    return f"{head}\n\n{before}"


def infill_by_instruction_message(before: str, after: str, instruction: str = "") -> str:
    """Infill for an engine that cannot pin the ending into the canvas (a server without canvas control): both
    sides of the gap go in the prompt, and the model's turn is only the missing middle."""
    head = f"{INFILL_HEADER} {instruction.strip()}".strip()
    return (
        f"{head} Write only the missing text between the two parts.\n\nText before the gap:\n{before}"
        f"\n\nText after the gap:\n{after}"
    )


_CONTENT_SLOT = "\ue000letterpress-message\ue000"  # a private-use marker no template or document holds


def chat_ids(tokenizer: Any, message: str) -> list[int]:
    """Token ids of one user turn followed by the opening of the model's turn.

    The message is the writer's text: a `<turn|>` or `<|channel>` typed in the document must stay characters,
    not end the turn. When the message holds no added token's string the template is tokenized whole (the ids
    every earlier version produced); otherwise the template is rendered around a slot and the message goes in
    as text (`engine.special_tokens.text_ids`).
    """
    if not any(m in message for m in added_token_texts(tokenizer) if len(m) > 1):
        encoded = tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=True
        )
        if hasattr(encoded, "keys"):
            encoded = encoded["input_ids"]
        return list(encoded)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": _CONTENT_SLOT}], add_generation_prompt=True, tokenize=False
    )
    head, slot, tail = str(rendered).partition(_CONTENT_SLOT)
    if not slot:
        raise ValueError("the chat template does not place the message's text in the prompt")

    def template(part):
        return list(tokenizer(part, add_special_tokens=False)["input_ids"]) if part else []

    return template(head) + text_ids(tokenizer, message) + template(tail)


BRIEF_SHARE = 4  # a brief may take at most a quarter of what the model reads beside its canvas
BRIEF_SAFETY = 0.85  # a writer's brief (names, numbers) takes more tokens per character than the sample
BRIEF_SAMPLE = (
    "Audience: general readers. British spelling. The captain is Mara Lindqvist; the ship is the Maud, "
    "launched in 1923 at Tromso. Keep sentences short, avoid jargon, and never change a quoted name."
)
CHARS_PER_TOKEN_GUESS = 3.5  # English text on a large vocabulary, when no tokenizer is at hand (a server)


def chars_per_token(tokenizer: Any) -> float:
    """Characters per token of brief-like English text on `tokenizer` (the guess when it cannot count)."""
    try:
        ids = tokenizer(BRIEF_SAMPLE, add_special_tokens=False)["input_ids"]
    except Exception:  # noqa: BLE001 - a tokenizer that cannot count leaves the guess
        return CHARS_PER_TOKEN_GUESS
    return len(BRIEF_SAMPLE) / max(1, len(ids))


def brief_limit(context_length: int, canvas_length: int, per_token: float = CHARS_PER_TOKEN_GUESS) -> int:
    """The most characters of a brief the model reads beside a request: a quarter of its context after one
    canvas, in characters of brief-like text, rounded down to 50 (0 when the context is not known).

    Why a share: the brief opens every prompt and is never trimmed, so a brief the size of the context leaves
    no room for the writer's text and every request fails (the demo reads 512 tokens; a 1,500-character brief
    took them all)."""
    if context_length <= 0:
        return 0
    room = max(0, context_length - max(0, canvas_length)) // BRIEF_SHARE
    return int(room * per_token * BRIEF_SAFETY) // 50 * 50


def with_brief(brief: str, message: str) -> str:
    """The message with the document brief in front (unchanged when there is none)."""
    brief = brief.strip()
    return f"{BRIEF_HEADER}\n{brief}\n\n{message}" if brief else message


DRAFT_AFTER_NOTE = "A draft reads only the text before the cursor; the text after it is not read."


def build_prompt(
    tokenizer: Any, request: Request, budget: int, *, infill_after_in_prompt: bool = False
) -> Prompt:
    """Token ids for `request`, trimming context so the prompt takes at most `budget` tokens.

    `infill_after_in_prompt`: an infill whose ending cannot be pinned in the canvas puts it in the prompt."""
    _check_not_empty(request)
    brief = getattr(request, "brief", "")
    if isinstance(request, DraftRequest):
        prompt = _fit(
            tokenizer,
            budget,
            request.before,
            "",
            lambda b, a: with_brief(brief, draft_message(b, request.instruction)),
        )
        if prompt.notice and request.after.strip():  # say what the notice leaves out: a draft never reads on
            prompt = Prompt(prompt.ids, notice=f"{prompt.notice} {DRAFT_AFTER_NOTE}")
        return prompt
    if isinstance(request, RewriteRequest):
        return _fit(
            tokenizer,
            budget,
            request.before,
            request.after,
            lambda b, a: with_brief(brief, rewrite_message(request.selection, request.instruction, b, a)),
        )
    if isinstance(request, InfillRequest) and infill_after_in_prompt:
        return _fit(
            tokenizer,
            budget,
            request.before,
            request.after,
            lambda b, a: with_brief(brief, infill_by_instruction_message(b, a, request.instruction)),
        )
    if isinstance(request, InfillRequest):
        return _fit(
            tokenizer,
            budget,
            request.before,
            "",
            lambda b, a: with_brief(brief, infill_message(b, request.instruction)),
        )
    raise TypeError(f"unknown request type {type(request).__name__}")


def _check_not_empty(request: Request) -> None:
    if isinstance(request, RewriteRequest) and not request.selection.strip():
        raise EmptyRequestError("Select the text you want rewritten first.")
    if isinstance(request, RewriteRequest) and not request.instruction.strip():
        raise EmptyRequestError("Choose how to rewrite the selection (a preset or your own instruction).")
    if isinstance(request, DraftRequest) and not (request.before.strip() or request.instruction.strip()):
        raise EmptyRequestError(
            "Write a few words first (or give an instruction) so there is something to continue."
        )
    if isinstance(request, InfillRequest) and not (request.before.strip() or request.after.strip()):
        raise EmptyRequestError("Infill needs text before or after the gap.")


def _fit(tokenizer: Any, budget: int, before: str, after: str, render: Any) -> Prompt:
    """The prompt with as much context as `budget` allows: see the module docstring for what goes first."""
    if len(before) + len(after) <= budget * 8:  # could fit (text averages ~4 characters a token): count it
        ids = chat_ids(tokenizer, render(before, after))
        if len(ids) <= budget:
            return Prompt(ids)
    bare = chat_ids(tokenizer, render("", ""))
    if len(bare) > budget:
        raise PromptTooLongError(
            f"The selection, instruction and document brief alone take {len(bare):,} tokens, more than the "
            f"{budget:,} the model can read at once. Select a shorter passage (or shorten the brief)."
        )
    room = budget - len(bare) - 8  # the trim marks and the joins take a few tokens
    after_tokens = len(_tokens(tokenizer, after[: room * _CHARS_PER_TOKEN])[0]) if after else 0
    keep_after = min(after_tokens, room // 2) if before else min(after_tokens, room)
    keep_before = room - keep_after
    for _ in range(12):
        kept_before, head_chars, near_chars = _trim_before(tokenizer, before, keep_before, room)
        kept_after = _trim_after(tokenizer, after, keep_after)
        ids = chat_ids(tokenizer, render(kept_before, kept_after))
        if len(ids) <= budget:
            break
        over = len(ids) - budget
        keep_before = max(0, keep_before - over - max(8, keep_before // 16))
        keep_after = max(0, keep_after - over // 2 - max(4, keep_after // 16))
    else:
        kept_before, kept_after, head_chars, near_chars = "", "", 0, 0
        ids = bare
    return Prompt(ids, notice=_notice(before, after, head_chars, near_chars, kept_after))


def _tokens(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def _trim_before(tokenizer: Any, before: str, keep: int, room: int) -> tuple[str, int, int]:
    """`before` cut to about `keep` tokens: the document's beginning, a mark, then the text nearest the
    cursor. Returns the text, and how many characters of the beginning and of the near part it kept."""
    if keep <= 0 or not before:
        return "", 0, 0
    head = min(HEAD_TOKENS, keep // 8)
    near = keep - head
    # The near part: tokenize only a tail piece of the document, growing it until it holds `near` tokens.
    piece = min(len(before), near * 4 + 64)
    while True:
        start = len(before) - piece
        ids, offsets = _tokens(tokenizer, before[start:])
        if len(ids) > near or start == 0:
            break
        piece = min(len(before), piece * 2)
    if len(ids) <= near and start == 0 and head == 0:
        return before, 0, len(before)
    cut = start + (offsets[len(ids) - near][0] if len(ids) > near else 0)
    grid = max(64, room // 4)  # characters: about a sixteenth of the room in tokens
    cut = min(len(before), math.ceil(cut / grid) * grid)
    space = before.find(" ", cut, cut + 64)
    if space >= 0:
        cut = space + 1
    head_end = 0
    if head:
        head_ids, head_offsets = _tokens(tokenizer, before[: head * _CHARS_PER_TOKEN])
        head_end = head_offsets[head][0] if len(head_ids) > head else len(before[: head * _CHARS_PER_TOKEN])
        space = before.rfind(" ", 0, head_end)
        head_end = space + 1 if space > 0 else head_end
        head_end = min(head_end, cut)
    if head_end >= cut:
        return before, len(before), 0
    near_text = before[cut:]
    if head_end:
        return f"{before[:head_end]}\n{TRIM_MARK}\n{near_text}", head_end, len(near_text)
    return TRIM_MARK + near_text, 0, len(near_text)


def _trim_after(tokenizer: Any, after: str, keep: int) -> str:
    """The first `keep` tokens of `after` (the far end goes), with a mark when anything was cut."""
    if keep <= 0 or not after:
        return ""
    ids, offsets = _tokens(tokenizer, after[: (keep + 1) * _CHARS_PER_TOKEN])
    if len(ids) <= keep and len(after) <= (keep + 1) * _CHARS_PER_TOKEN:
        return after
    end = offsets[keep][0] if len(ids) > keep else len(after)
    return after[:end] + TRIM_MARK


def _notice(before: str, after: str, head: int, near: int, kept_after: str) -> str:
    left_out = len(before) - head - near + max(0, len(after) - len(kept_after.removesuffix(TRIM_MARK)))
    seen = []
    if head:
        seen.append(f"the document's first {head:,} characters")
    if near:
        seen.append(f"the {near:,} characters before the cursor")
    if kept_after:
        seen.append(f"{len(kept_after.removesuffix(TRIM_MARK)):,} after it")
    what = ", ".join(seen) if seen else "none of the surrounding text"
    return (
        f"The document is longer than the model can read at once: it saw {what}; {left_out:,} characters "
        "farther from the cursor were left out."
    )
