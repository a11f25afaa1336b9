"""Every answer a server sends, parsed against the shape its endpoint must have, in one place.

A server can answer anything: a list where an object belongs, "unlimited" where a number belongs, no choice at
all. Each function here takes the decoded JSON of one endpoint and returns typed values, or raises
`ServerAnswerError` with one sentence naming the server, the endpoint and what was wrong (the offending value
quoted short and scrubbed of secrets), so no `AttributeError`, `ValueError` or `IndexError` from a bad answer
ever reaches the writer as "please report it". Optional parts (the version) fall back instead of failing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.api import ServerAnswerError
from engine.remote import redact

MAX_NAME = 256  # characters of a model id a server may send; longer is no model name


@dataclass(frozen=True)
class ServedModel:
    id: str
    max_model_len: int
    root: str = ""


@dataclass(frozen=True)
class StreamChoice:
    """One choice of one streamed chunk of /v1/completions."""

    index: int
    text: str
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float | None, ...] = ()


def quoted(value: Any, limit: int = 40) -> str:
    """A server's value as a sentence may show it: short, one line, secrets hidden."""
    return redact.shown(repr(value) if not isinstance(value, str) else f"'{value}'", limit)


def wrong(host: str, endpoint: str, what: str) -> ServerAnswerError:
    return ServerAnswerError(
        f"The server at {host} answered {endpoint} in a shape Letterpress cannot use: {what}. Is it a "
        "DiffusionGemma server with an OpenAI-compatible API (vLLM)? Your document was not changed."
    )


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def whole(value: Any) -> bool:
    return type(value) is int


def need_object(answer: Any, host: str, endpoint: str) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise wrong(host, endpoint, f"{_kind(answer)} where an object belongs")
    return answer


def need_list(value: Any, host: str, endpoint: str, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise wrong(host, endpoint, f"'{field}' is {_kind(value)}, not a list")
    return value


def models(answer: Any, host: str) -> tuple[ServedModel, ...]:
    """/v1/models: {"data": [{"id": str, "max_model_len": int | null, "root": str | null}, ...]}."""
    endpoint = "/v1/models"
    data = need_list(need_object(answer, host, endpoint).get("data", []), host, endpoint, "data")
    found = []
    for item in data:
        entry = need_object(item, host, endpoint + " (a model in 'data')")
        name, length, root = entry.get("id"), entry.get("max_model_len"), entry.get("root")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not name.isprintable():
            raise wrong(host, endpoint, f"a model's id is {quoted(name)}, not a model name")
        if length is not None and (not whole(length) or length < 0):
            raise wrong(host, endpoint, f"max_model_len of '{name}' is {quoted(length)}, not a whole number")
        if root is not None and not isinstance(root, str):
            raise wrong(host, endpoint, f"root of '{name}' is {quoted(root)}, not a name")
        found.append(ServedModel(name, length or 0, root or ""))
    return tuple(found)


def version(answer: Any) -> str:
    """/version: {"version": str}; optional, so anything else is "" (no version shown)."""
    value = answer.get("version") if isinstance(answer, dict) else None
    if isinstance(value, str) and len(value) <= 64 and value.isprintable():
        return redact.shown(value, 64, partial=False)
    return ""


def shown_name(model: ServedModel) -> str:
    """A model id as the writer sees it (status bar, dialog): plain, one line, no secret in it."""
    return redact.shown(model.id, MAX_NAME, partial=False)


def completion_token_ids(answer: Any, host: str) -> list[int]:
    """The token ids of the first choice of a non-streamed /v1/completions answer asked with
    return_tokens_as_token_ids ("token_id:N" strings)."""
    endpoint = "/v1/completions"
    choices = need_list(need_object(answer, host, endpoint).get("choices"), host, endpoint, "choices")
    if not choices:
        raise wrong(host, endpoint, "'choices' is empty, so there is no answer")
    choice = need_object(choices[0], host, endpoint + " (a choice)")
    logprobs = choice.get("logprobs")
    if logprobs is None:
        return []
    tokens = need_list(need_object(logprobs, host, endpoint).get("tokens") or [], host, endpoint, "tokens")
    return token_ids(tokens, host)


def token_ids(tokens: Any, host: str) -> list[int]:
    """Ids from "token_id:N" strings; other strings are not ids and are skipped."""
    out = []
    for tok in tokens:
        text = str(tok)
        if text.startswith("token_id:"):
            number = text.split(":", 1)[1]
            if not number.isdigit() or len(number) > 12:
                raise wrong(host, "/v1/completions", f"the token {quoted(text)} is not a token id")
            out.append(int(number))
    return out


def tokenize(answer: Any, host: str) -> tuple[list[int], list[str]]:
    """/tokenize: {"tokens": [int, ...], "token_strs": [str, ...] | null}."""
    endpoint = "/tokenize"
    body = need_object(answer, host, endpoint)
    tokens = need_list(body.get("tokens"), host, endpoint, "tokens")
    if not all(whole(t) and t >= 0 for t in tokens):
        bad = next(t for t in tokens if not (whole(t) and t >= 0))
        raise wrong(host, endpoint, f"the token {quoted(bad)} is not a token id")
    strs = body.get("token_strs") or []
    if not isinstance(strs, list) or not all(isinstance(s, str) for s in strs):
        strs = []  # optional: the offsets are then spread evenly
    return list(tokens), list(strs)


def detokenize(answer: Any, host: str) -> str:
    """/detokenize: {"prompt": str}."""
    text = need_object(answer, host, "/detokenize").get("prompt")
    if not isinstance(text, str):
        raise wrong(host, "/detokenize", f"'prompt' is {_kind(text)}, not text")
    return text


def stream_choices(chunk: Any, host: str, n: int) -> list[StreamChoice]:
    """The choices of one streamed /v1/completions chunk (an `openai` object or a dict), checked: an index
    from 0 to n-1, text, and logprobs as parallel lists of token strings and numbers."""
    endpoint = "/v1/completions (streamed)"
    choices = _get(chunk, "choices")
    if choices is None:
        return []
    choices = need_list(choices, host, endpoint, "choices")
    out = []
    for choice in choices:
        index, text = _get(choice, "index"), _get(choice, "text")
        if not whole(index) or not 0 <= index < max(n, 1):
            raise wrong(host, endpoint, f"a choice's index is {quoted(index)}, not one of 0 to {n - 1}")
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise wrong(host, endpoint, f"a choice's text is {_kind(text)}, not text")
        lp = _get(choice, "logprobs")
        tokens = _get(lp, "tokens") if lp is not None else None
        values = _get(lp, "token_logprobs") if lp is not None else None
        tokens = tokens if isinstance(tokens, list) else []
        values = values if isinstance(values, list) else []
        kept_tokens = tuple(str(t) for t in tokens)
        kept_values = tuple(
            float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
            for v in values
        )
        out.append(StreamChoice(index, text, kept_tokens, kept_values))
    return out


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


# The text tier (any OpenAI-compatible model: engine.remote.text_backend): its model list and streamed pieces.


@dataclass(frozen=True)
class TextModel:
    """A model of /v1/models as the text tier reads it: its id, the context length where the server states
    it (vLLM `max_model_len`, LM Studio `max_context_length`, llama.cpp `meta.n_ctx_train`; 0: not said),
    and who serves it (`owned_by`: "vllm", "llamacpp", "library" for Ollama…)."""

    id: str
    context_length: int
    owned_by: str = ""


@dataclass(frozen=True)
class TextPiece:
    """One choice of one streamed chunk of /v1/completions, /v1/chat/completions or llama.cpp's /infill."""

    index: int
    text: str
    logprobs: tuple[float, ...] = ()
    finished: bool = False


_CONTEXT_KEYS = ("max_model_len", "context_length", "max_context_length", "loaded_context_length")


def text_models(answer: Any, host: str) -> tuple[TextModel, ...]:
    """/v1/models of any OpenAI-compatible server: {"data": [{"id": str, ...}, ...]} (a few servers say
    "models" and "name"); a name that is not text is a wrong shape, an entry without a usable name is skipped,
    a context length that is not a positive whole number is "not said"."""
    endpoint = "/v1/models"
    body = need_object(answer, host, endpoint)
    data = body.get("data", body.get("models", []))
    found = []
    for item in need_list(data, host, endpoint, "data"):
        if not isinstance(item, dict):
            continue
        name = item.get("id") or item.get("name") or item.get("model")
        if name is not None and not isinstance(name, str):  # a name of the wrong kind is a wrong shape
            raise wrong(host, endpoint, f"a model's id is {quoted(name)}, not a model name")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not name.isprintable():
            continue
        owner = item.get("owned_by")
        found.append(
            TextModel(name, _context_of(item, name, host), owner[:40] if isinstance(owner, str) else "")
        )
    return tuple(found)


def _context_of(item: dict[str, Any], name: str, host: str) -> int:
    """The first context length the entry states; one stated as anything but a whole number is a wrong
    shape (as for the DiffusionGemma tier), one not stated is 0."""
    meta = item.get("meta")
    places = [(k, item.get(k)) for k in _CONTEXT_KEYS]
    if isinstance(meta, dict):
        places += [("meta.n_ctx", meta.get("n_ctx")), ("meta.n_ctx_train", meta.get("n_ctx_train"))]
    for key, value in places:
        if value is None:
            continue
        if not whole(value) or value < 0:
            raise wrong(host, "/v1/models", f"{key} of '{name}' is {quoted(value)}, not a whole number")
        if value > 0:
            return int(value)
    return 0


def text_pieces(chunk: Any, host: str, path: str, n: int) -> list[TextPiece]:
    """The pieces of one streamed chunk: completions' `text`, chat's `delta.content` (or a whole
    `message`), /infill's `content`; an index outside 0..n-1 or text that is not text is a wrong shape."""
    endpoint = f"{path} (streamed)"
    chunk = need_object(chunk, host, endpoint)
    if path == "/infill":
        content = chunk.get("content", "")
        if not isinstance(content, str):
            raise wrong(host, endpoint, f"'content' is {_kind(content)}, not text")
        return [TextPiece(0, content, (), bool(chunk.get("stop")))]
    choices = chunk.get("choices")
    if choices is None:
        return []
    out = []
    for choice in need_list(choices, host, endpoint, "choices"):
        choice = need_object(choice, host, endpoint + " (a choice)")
        index = choice.get("index", 0)
        if not whole(index) or not 0 <= index < max(n, 1):
            raise wrong(host, endpoint, f"a choice's index is {quoted(index)}, not one of 0 to {n - 1}")
        text: Any = choice.get("text")
        if text is None:
            part = choice.get("delta", choice.get("message"))
            text = part.get("content") if isinstance(part, dict) else None
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise wrong(host, endpoint, f"a choice's text is {_kind(text)}, not text")
        out.append(
            TextPiece(index, text, _text_logprobs(choice.get("logprobs")), bool(choice.get("finish_reason")))
        )
    return out


def _text_logprobs(lp: Any) -> tuple[float, ...]:
    """Completions' `token_logprobs` or chat's `content[].logprob`; anything else: none."""
    if not isinstance(lp, dict):
        return ()
    values: list[Any] = []
    if isinstance(lp.get("token_logprobs"), list):
        values = lp["token_logprobs"]
    elif isinstance(lp.get("content"), list):
        values = [c.get("logprob") for c in lp["content"] if isinstance(c, dict)]
    return tuple(
        float(v)
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    )
