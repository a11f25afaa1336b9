"""The tokenizer `engine.prompts` needs, answered by the server's `/tokenize` (vLLM), so a remote prompt is
built by the same prompt builder as a local one and rendered with the served checkpoint's own chat template.

Only what the prompt builder calls is here: `apply_chat_template` (one user turn plus the opening of the
model's turn) and `__call__` with offsets (used to trim a document longer than the model reads). vLLM returns
token strings, not offsets; the offsets are rebuilt from them (SentencePiece-style "▁" spaces and <0xNN> byte
pieces), which is exact for the Gemma tokenizers and only ever moves a trim point otherwise.
"""

from __future__ import annotations

import re
from typing import Any

from engine.remote import shapes
from engine.remote.client import ServerClient

_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


class ServerTokenizer:
    def __init__(self, client: ServerClient, model: str) -> None:
        self.client = client
        self.model = model
        self.calls = 0  # round trips made (tests and the overhead figures read it)

    def apply_chat_template(
        self,
        messages: list[dict[str, str]],
        add_generation_prompt: bool = True,
        tokenize: bool = True,
        **_: Any,
    ) -> list[int]:
        self.calls += 1
        body = {
            "model": self.model,
            "messages": messages,
            "add_generation_prompt": add_generation_prompt,
            "add_special_tokens": False,
        }
        return shapes.tokenize(self.client.post_json("/tokenize", body), self.client.host)[0]

    def __call__(
        self, text: str, add_special_tokens: bool = False, return_offsets_mapping: bool = False, **_: Any
    ) -> dict[str, Any]:
        self.calls += 1
        body = {
            "model": self.model,
            "prompt": text,
            "add_special_tokens": add_special_tokens,
            "return_token_strs": bool(return_offsets_mapping),
        }
        ids, pieces = shapes.tokenize(self.client.post_json("/tokenize", body), self.client.host)
        out: dict[str, Any] = {"input_ids": ids}
        if return_offsets_mapping:
            out["offset_mapping"] = offsets_from_pieces(text, pieces)
            if len(out["offset_mapping"]) != len(ids):  # a server without token strings: spread evenly
                out["offset_mapping"] = _even(len(text), len(ids))
        return out


def offsets_from_pieces(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Character offsets of each token in `text`, from its token strings; clamped to the text, never
    failing."""
    offsets: list[tuple[int, int]] = []
    pos = 0
    pending: list[int] = []  # indices of byte pieces not yet resolved into a character
    raw = bytearray()
    for i, piece in enumerate(pieces):
        byte = _BYTE.match(piece)
        if byte:
            raw.append(int(byte.group(1), 16))
            pending.append(i)
            offsets.append((pos, pos))
            try:
                char = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            end = min(len(text), pos + len(char))
            for j in pending:
                offsets[j] = (pos, end)
            pos, pending, raw = end, [], bytearray()
            continue
        surface = piece.replace("▁", " ")
        if text.startswith(surface, pos):
            end = pos + len(surface)
        else:
            found = text.find(surface, pos, pos + len(surface) + 8) if surface else -1
            end = found + len(surface) if found >= 0 else min(len(text), pos + len(surface))
        end = min(len(text), end)
        offsets.append((pos, end))
        pos = end
    return offsets


def _even(length: int, count: int) -> list[tuple[int, int]]:
    if count == 0:
        return []
    step = length / count
    return [(round(i * step), round((i + 1) * step)) for i in range(count)]
