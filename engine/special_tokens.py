"""Which token ids are never shown nor written into a document, and which end a suggestion.

From the tokenizer itself, not from how a particular checkpoint's config happens to name things: in
transformers 5, `all_special_ids` covers only the named tokens (`bos`, `eos`, `pad`, `unk`, ...) and
`extra_special_tokens`, while a Gemma 4 tokenizer declares its turn and channel markers (`<|turn>`, `<turn|>`,
`<|channel>`, ...) only in `added_tokens_decoder`, marked special. So the hidden set is the union of all
three, plus the generation config's EOS ids and the pad id; the stop set (where a draft or an infill middle
ends) is the EOS ids and the pad id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any


def hidden_ids(tokenizer: Any, extra: Iterable[int] = ()) -> frozenset[int]:
    """Every id that must never reach the editor: named and extra special tokens, every added token marked
    special, and `extra` (the EOS ids and pad id of the generation config)."""
    ids = {int(i) for i in getattr(tokenizer, "all_special_ids", ()) or ()}
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    for token_id, token in decoder.items():
        if getattr(token, "special", False):
            ids.add(int(token_id))
    ids.update(int(i) for i in extra)
    return frozenset(ids)


def stop_ids(eos_ids: Iterable[int], pad_id: int | None) -> frozenset[int]:
    """Where generated text ends: any EOS id of the generation config, or padding."""
    ids = {int(i) for i in eos_ids}
    if pad_id is not None:
        ids.add(int(pad_id))
    return frozenset(ids)


def cut_at_stop(ids: Sequence[int], stops: frozenset[int]) -> list[int]:
    """The ids before the first stop id (all of them when there is none)."""
    out = []
    for token_id in ids:
        if int(token_id) in stops:
            break
        out.append(int(token_id))
    return out


# --- Gemma 4's control grammar ------------------------------------------------------------------------------
# Gemma 4 writes control text as *spans*: `<|channel>thought\n…<channel|>`,
# `<|tool_call>call:f{…}<tool_call|>`, `<|tool_response>…<tool_response|>`, `<|tool>…<tool|>`,
# `<|image>…<image|>`, `<|audio>…<audio|>`, a new turn `<|turn>user\n…<turn|>`. Hiding only the marker tokens
# leaves "thought\n…" or "call:search{…}" in the draft, so the whole span goes. Single control ids
# (`<|image|>`, `<|audio|>`, `<|video|>`, `<|"|>`, `<|think|>`, `<unusedN>`) are recognised by their text too:
# the Gemma 4 processor adds `<|video|>` at run time without the special flag.
_OPENER = re.compile(r"^<\|([A-Za-z_][A-Za-z0-9_]*)>$")
_CLOSER = re.compile(r"^<([A-Za-z_][A-Za-z0-9_]*)\|>$")
_SINGLE = re.compile(r"^(<\|[^<>\s]*\|>|<unused[0-9]+>|<mask>|\[multimodal\])$")

OPEN, CLOSE, SINGLE = "open", "close", "single"


class ControlGrammar:
    """Classifies ids as span openers, closers or single control ids (by their token text, cached), and finds
    the positions of a canvas that are control text."""

    def __init__(self, tokenizer: Any, hidden: Iterable[int] = ()) -> None:
        self.tokenizer = tokenizer
        self.hidden = frozenset(int(i) for i in hidden)
        self._kinds: dict[int, tuple[str, str] | None] = {}

    def kind(self, token_id: int) -> tuple[str, str] | None:
        """(OPEN, name), (CLOSE, name), (SINGLE, text) or None for ordinary text."""
        token_id = int(token_id)
        if token_id in self._kinds:
            return self._kinds[token_id]
        token = self.tokenizer.convert_ids_to_tokens(token_id)
        found: tuple[str, str] | None = None
        if isinstance(token, str):
            if m := _OPENER.match(token):
                found = (OPEN, m.group(1))
            elif m := _CLOSER.match(token):
                found = (CLOSE, m.group(1))
            elif _SINGLE.match(token):
                found = (SINGLE, token)
        if found is None and token_id in self.hidden:
            found = (SINGLE, str(token))
        self._kinds[token_id] = found
        return found

    def control_ids(self) -> frozenset[int]:
        """Every id of the vocabulary that is control text (for the prompt's check that typed text stays
        text)."""
        size = len(self.tokenizer)
        return frozenset(i for i in range(size) if self.kind(i) is not None)

    def mask(self, ids: Sequence[int], pinned: Sequence[bool] | None = None) -> list[bool]:
        """True where `ids[i]` is control text: a single control id, or any position of a span from its opener
        to its closer (both included). An opener without its closer (the model is mid-span, or the span is cut
        by a stop) hides up to the next pinned token or the end; a closer without an opener hides the free
        text before it (its opener was the last thing before the canvas). Pinned tokens are the writer's and
        never hidden."""
        flags = pinned if pinned is not None else ()
        out = [False] * len(ids)
        open_name: str | None = None
        run_start = 0  # first position of the current run of free (unpinned) tokens
        for i, token_id in enumerate(ids):
            if i < len(flags) and flags[i]:
                open_name = None
                run_start = i + 1
                continue
            kind = self.kind(int(token_id))
            if open_name is not None:
                out[i] = True
                if kind is not None and kind[0] == CLOSE and kind[1] == open_name:
                    open_name = None
                continue
            if kind is None:
                continue
            out[i] = True
            if kind[0] == OPEN:
                open_name = kind[1]
            elif kind[0] == CLOSE:
                for j in range(run_start, i):
                    out[j] = True
        return out


def added_token_texts(tokenizer: Any) -> list[str]:
    """The text of every added token (special or not): what a typed string could collide with."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    texts = {str(getattr(t, "content", t)) for t in decoder.values()}
    return sorted((t for t in texts if t), key=len, reverse=True)


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of the writer's `text` in which a typed `<turn|>`, `<|channel>`, `<|video|>`… stays
    characters.

    A tokenizer matches added tokens before anything else, so a document holding "<turn|>" would end the
    user's turn in the prompt. Text without any added token's string is tokenized as usual (identical ids);
    otherwise it is cut right after the "<" of every such string and the pieces are tokenized apart, so no
    piece can match it.
    """
    plain = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    markers = [m for m in added_token_texts(tokenizer) if len(m) > 1 and m in text]
    if not markers:
        return plain
    pattern = re.compile("|".join(re.escape(m) for m in markers))
    cuts = [m.start() + 1 for m in pattern.finditer(text)]
    ids: list[int] = []
    start = 0
    for cut in [*cuts, len(text)]:
        piece = text[start:cut]
        if piece:
            ids.extend(_piece_ids(tokenizer, piece, markers))
        start = cut
    return ids


def _piece_ids(tokenizer: Any, piece: str, markers: list[str]) -> list[int]:
    """One piece's ids; a piece that still holds a marker (overlapping strings) is cut at every character."""
    if any(m in piece for m in markers) and len(piece) > 1:
        return [i for ch in piece for i in tokenizer(ch, add_special_tokens=False)["input_ids"]]
    return list(tokenizer(piece, add_special_tokens=False)["input_ids"])
