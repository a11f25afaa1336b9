"""A reversible token estimate for servers that do not tokenize for us (Ollama, LM Studio, llama.cpp).

`engine.prompts` fits a request into the model's context by counting tokens: it trims the document far from
the cursor, keeps the brief, the selection and the instruction, and says what it left out. A server of any
model shares no tokenizer with Letterpress, so this one stands in: every `CHARS_PER_TOKEN` characters are one
"token", an over-count for English on any modern vocabulary (about four characters a token), so a prompt it
fits also fits the real model. Its ids decode back to the exact text (`decode`), which is what the text tier
sends.
"""

from __future__ import annotations

from typing import Any, ClassVar

CHARS_PER_TOKEN = 3  # English on BPE vocabularies averages ~4 characters a token: 3 leaves a margin


class EstimatingTokenizer:
    """The slice of a Hugging Face tokenizer `engine.prompts` calls, over fixed-width character chunks."""

    added_tokens_decoder: ClassVar[dict[int, Any]] = {}  # no added tokens: a typed marker stays text

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._ids: dict[str, int] = {}

    def _id(self, piece: str) -> int:
        found = self._ids.get(piece)
        if found is None:
            found = self._ids[piece] = len(self._pieces)
            self._pieces.append(piece)
        return found

    def __call__(
        self, text: str, add_special_tokens: bool = False, return_offsets_mapping: bool = False
    ) -> dict[str, list[Any]]:
        starts = range(0, len(text), CHARS_PER_TOKEN)
        ids = [self._id(text[s : s + CHARS_PER_TOKEN]) for s in starts]
        out: dict[str, list[Any]] = {"input_ids": ids}
        if return_offsets_mapping:
            out["offset_mapping"] = [(s, min(len(text), s + CHARS_PER_TOKEN)) for s in starts]
        return out

    def apply_chat_template(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = True, tokenize: bool = True
    ) -> Any:
        """The one user message's text itself (the server applies its own template)."""
        text = "".join(m["content"] for m in messages)
        return self(text)["input_ids"] if tokenize else text

    def decode(self, ids: list[int]) -> str:
        return "".join(self._pieces[i] for i in ids)


def estimate(text: str) -> int:
    """Tokens `text` takes at most on a real model (an over-count, see the module docstring)."""
    return -(-len(text) // CHARS_PER_TOKEN)
