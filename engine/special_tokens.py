"""Which token ids are never shown nor written into a document, and which end a suggestion.

From the tokenizer itself, not from how a particular checkpoint's config happens to name things: in transformers 5,
`all_special_ids` covers only the named tokens (`bos`, `eos`, `pad`, `unk`, ...) and `extra_special_tokens`, while a
Gemma 4 tokenizer declares its turn and channel markers (`<|turn>`, `<turn|>`, `<|channel>`, ...) only in
`added_tokens_decoder`, marked special. So the hidden set is the union of all three, plus the generation config's
EOS ids and the pad id; the stop set (where a draft or an infill middle ends) is the EOS ids and the pad id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def hidden_ids(tokenizer: Any, extra: Iterable[int] = ()) -> frozenset[int]:
    """Every id that must never reach the editor: named and extra special tokens, every added token marked special,
    and `extra` (the EOS ids and pad id of the generation config)."""
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
