"""Requests -> what the text tier sends a server of any model: chat messages, a raw-text prompt, a length.

The user's turn is the local engine's own message (`engine.prompts`: the same headers, the brief first, the
whole document trimmed far from the cursor when it does not fit, and the same notice saying what was left
out), counted with `EstimatingTokenizer` because the server's tokenizer is not at hand. A system turn asks for
the text only, since an instruction-tuned model otherwise opens with "Sure! Here is…". A draft on a server
with `/v1/completions` is a plain continuation of the text before the cursor (what a base or chat model
continues best); on a chat-only server it is the local engine's "Continue this text." message.

Rewrites keep the local engine's length window (`engine.lengths.length_window`, here in words since the
server's tokens are not countable): "shorter" aims at 0.6x the selection, "longer" at 1.6x, anything else at
1x, and an answer is cut to the window's top (`engine.remote.text_answers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine import prompts
from engine.api import (
    DraftRequest,
    InfillRequest,
    PromptTooLongError,
    Request,
    RewriteRequest,
)
from engine.lengths import length_factor, length_window
from engine.remote.text_tokens import EstimatingTokenizer, estimate

SYSTEM = (
    "You are the writing assistant of a text editor. Answer with the requested text only: no greeting, no "
    "introduction, no explanation, no notes, no quotation marks around it, no markdown."
)
INFILL_TOKENS = 48  # the gap asked for when the request does not say (about 35 words)
TOKENS_PER_WORD = 2  # an over-count (English is ~1.3 tokens a word), so a cut, not max_tokens, ends a rewrite


@dataclass(frozen=True)
class Words:
    """How many words a rewrite may have: at least `low`, at most `high`, aiming at `target`."""

    low: int
    high: int
    target: int


@dataclass(frozen=True)
class TextPlan:
    """One request as the text tier sends it."""

    kind: Literal["draft", "rewrite", "infill"]
    user: str  # the user's turn (chat), also the source of a completions-only prompt
    continuation: str  # a draft's raw-text prompt for /v1/completions ("" for other kinds)
    max_tokens: int
    n: int
    notice: str = ""
    words: Words | None = None  # a rewrite's window
    selection: str = ""
    before: str = ""  # infill and draft: the text the answer must join (trimmed as it was sent)
    after: str = ""

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self.user}]

    def completion_prompt(self) -> str:
        """The prompt for /v1/completions: the continuation for a draft, else the chat turns as plain text
        (a model whose chat template the server lacks)."""
        if self.continuation:
            return self.continuation
        answer = {"rewrite": "Rewritten text:", "infill": "Missing text:"}.get(self.kind, "Text:")
        return f"{SYSTEM}\n\n{self.user}\n\n{answer}\n"


def word_window(selection: str, instruction: str) -> Words:
    """The local engine's length window (`engine.lengths.length_window`) over words, at least one word and
    its top never past twice the selection."""
    n = max(1, len(selection.split()))
    window = length_window(n, instruction)
    target = max(1, round(length_factor(instruction) * n))
    return Words(max(1, window.low), min(window.high, max(2, 2 * n)), target)


def plan(request: Request, context_length: int, candidates: int) -> TextPlan:
    """The messages, prompt and length of `request` within `context_length` tokens."""
    tokenizer = EstimatingTokenizer()
    n = max(1, min(request.settings.candidates, candidates))
    if isinstance(request, RewriteRequest):
        words = word_window(request.selection, request.instruction)
        max_tokens = request.max_new_tokens or words.high * TOKENS_PER_WORD + 16
        hint = f"\n\nAnswer with the rewritten text only, about {words.target} words."
        prompt = _fit(tokenizer, request, context_length, max_tokens + estimate(SYSTEM + hint))
        return TextPlan(
            "rewrite",
            tokenizer.decode(prompt.ids) + hint,
            "",
            max_tokens,
            n,
            prompt.notice,
            words,
            selection=request.selection,
        )
    if isinstance(request, InfillRequest):
        max_tokens = request.middle_tokens or INFILL_TOKENS
        prompt = _fit(tokenizer, request, context_length, max_tokens + estimate(SYSTEM), infill=True)
        user = tokenizer.decode(prompt.ids)
        return TextPlan(
            "infill", user, "", max_tokens, n, prompt.notice, before=request.before, after=request.after
        )
    assert isinstance(request, DraftRequest)
    max_tokens = max(1, request.max_new_tokens)
    prompt = _fit(tokenizer, request, context_length, max_tokens + estimate(SYSTEM))
    user = tokenizer.decode(prompt.ids)
    head = prompts.with_brief(request.brief, prompts.draft_message("", request.instruction))
    kept_before = user[len(head) :] if user.startswith(head) else request.before
    continuation = kept_before.rstrip()  # a BPE model continues "word" better than "word " (its space)
    if request.brief.strip() or request.instruction.strip():
        steer = "\n".join(p for p in (request.brief.strip(), request.instruction.strip()) if p)
        continuation = f"{steer}\n\n{kept_before}"
    return TextPlan("draft", user, continuation, max_tokens, n, prompt.notice, before=kept_before)


def _fit(
    tokenizer: EstimatingTokenizer, request: Request, context: int, reserved: int, *, infill: bool = False
) -> prompts.Prompt:
    budget = context - reserved
    if budget < 16:
        raise PromptTooLongError(
            f"Asking for {reserved:,} new tokens leaves no room for the text before it (the server's model "
            f"reads {context:,} tokens at once); ask for less, or set a larger context length in Model ▸ Use "
            "a server…."
        )
    return prompts.build_prompt(tokenizer, request, budget, infill_after_in_prompt=infill)
