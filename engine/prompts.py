"""Requests -> prompt token ids, through the checkpoint's own chat template (never a hard-coded Gemma format).

Each task is one user turn; the model's turn is what the canvas denoises:
- draft:   "Continue this text." + the text before the cursor; the model turn is the continuation.
- rewrite: the instruction + the selected text (and, when there is any, the surrounding text as context);
           the model turn is the rewritten passage.
- infill:  "Fill in the gap." + the text before the gap; the model turn is the missing middle *followed by the
           text after the gap*, which the engine pins into the canvas as frozen tokens (see `engine.infill`), so
           the model reads the ending bidirectionally instead of from the prompt.

Context that does not fit the model's window is trimmed at the far end (the start of `before`, the end of
`after`), never the selection or the instruction, and the trim is reported as a notice.
"""

from __future__ import annotations

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

DRAFT_HEADER = "Continue this text."
REWRITE_HEADER = "Rewrite this text."
INFILL_HEADER = "Fill in the gap."
TRIM_MARK = "…"


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


def chat_ids(tokenizer: Any, message: str) -> list[int]:
    """Token ids of one user turn followed by the opening of the model's turn."""
    encoded = tokenizer.apply_chat_template(
        [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=True
    )
    if hasattr(encoded, "keys"):
        encoded = encoded["input_ids"]
    return list(encoded)


def build_prompt(tokenizer: Any, request: Request, budget: int) -> Prompt:
    """Token ids for `request`, trimming context so the prompt takes at most `budget` tokens."""
    _check_not_empty(request)
    if isinstance(request, DraftRequest):
        return _fit(tokenizer, budget, request.before, "", lambda b, a: draft_message(b, request.instruction))
    if isinstance(request, RewriteRequest):
        return _fit(
            tokenizer,
            budget,
            request.before,
            request.after,
            lambda b, a: rewrite_message(request.selection, request.instruction, b, a),
        )
    if isinstance(request, InfillRequest):
        return _fit(tokenizer, budget, request.before, "", lambda b, a: infill_message(b, request.instruction))
    raise TypeError(f"unknown request type {type(request).__name__}")


def _check_not_empty(request: Request) -> None:
    if isinstance(request, RewriteRequest) and not request.selection.strip():
        raise EmptyRequestError("Select the text you want rewritten first.")
    if isinstance(request, RewriteRequest) and not request.instruction.strip():
        raise EmptyRequestError("Choose how to rewrite the selection (a preset or your own instruction).")
    if isinstance(request, DraftRequest) and not (request.before.strip() or request.instruction.strip()):
        raise EmptyRequestError("Write a few words first (or give an instruction) so there is something to continue.")
    if isinstance(request, InfillRequest) and not (request.before.strip() or request.after.strip()):
        raise EmptyRequestError("Infill needs text before or after the gap.")


def _fit(tokenizer: Any, budget: int, before: str, after: str, render: Any) -> Prompt:
    """Shrink `before` from its start and `after` from its end until the prompt fits (binary search on chars)."""
    ids = chat_ids(tokenizer, render(before, after))
    if len(ids) <= budget:
        return Prompt(ids)
    bare = chat_ids(tokenizer, render("", ""))
    if len(bare) > budget:
        raise PromptTooLongError(
            f"The selection and instruction alone take {len(bare):,} tokens, more than the {budget:,} the model "
            "can read at once. Select a shorter passage."
        )
    lo, hi = 0, 1.0  # share of the context kept
    best = bare
    for _ in range(14):
        mid = (lo + hi) / 2
        kept_before = before[len(before) - int(len(before) * mid) :] if before else ""
        kept_after = after[: int(len(after) * mid)] if after else ""
        candidate = chat_ids(
            tokenizer,
            render(TRIM_MARK + kept_before if kept_before else "", kept_after + TRIM_MARK if kept_after else ""),
        )
        if len(candidate) <= budget:
            lo, best = mid, candidate
        else:
            hi = mid
    kept = int(round(lo * 100))
    return Prompt(
        best,
        notice=f"The document is longer than the model can read at once; it saw the {kept}% of the surrounding "
        "text nearest to your cursor.",
    )
