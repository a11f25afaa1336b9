"""What every HTTP request to a server is held to, whichever client sends it (`httpx` for the small endpoints,
the `openai` client's `httpx2` for completions): `Guard.hooks()` are event hooks for either library.

- A redirect to another origin (scheme, host, port) is never followed: the writer's text would go to a server
  they did not choose (httpx drops the key on the way, but not the prompt). `ServerRedirectError` says where
  the server tried to send it. A redirect within the same origin is followed as usual.
- No more is read than the request can need: a completion (`max_tokens` x `n`) at most `PER_TOKEN_BYTES` a
  token plus `BASE_BYTES`, any other answer `SMALL_ANSWER_BYTES` plus `PER_SENT_BYTE` per byte sent; counted
  after decompression, so a small gzip bomb is cut as early as a plain flood. `ServerTooLargeError` stops it.
"""

from __future__ import annotations

import json
from typing import Any

from engine.api import ServerRedirectError, ServerTooLargeError
from engine.remote import address

PER_TOKEN_BYTES = 2048  # one token of a streamed canvas: its text and logprobs JSON, escaped, with headroom
BASE_BYTES = 64 * 1024  # the envelope of a completion stream (ids, usage, the SSE framing of each canvas)
SMALL_ANSWER_BYTES = 1024 * 1024  # /v1/models, /version, /health, error bodies
PER_SENT_BYTE = 64  # /tokenize, /detokenize: the answer grows with what was sent
_TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "n_predict")


def read_limit(request: Any) -> tuple[int, int]:
    """(bytes the answer to `request` may hold, tokens it asked for; 0 when it asked for none)."""
    try:
        content = bytes(request.content or b"")
    except Exception:  # noqa: BLE001 - a streamed request body (we send none): the general bound
        content = b""
    tokens = 0
    if content[:1] == b"{":
        try:
            body = json.loads(content)
        except ValueError:
            body = None
        if isinstance(body, dict):
            asked = next((body[f] for f in _TOKEN_FIELDS if type(body.get(f)) is int), 0)
            given = body.get("n")
            n: int = given if type(given) is int else 1
            tokens = max(0, int(asked)) * max(1, n)
    if tokens:
        return BASE_BYTES + tokens * PER_TOKEN_BYTES, tokens
    return SMALL_ANSWER_BYTES + PER_SENT_BYTE * len(content), 0


def size_label(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MB"
    return f"{max(1, count // 1024)} KB"


class _CappedDecoder:
    """Wraps a response's content decoder: counts what it yields and stops past the cap."""

    def __init__(self, inner: Any, cap: int, fail: Any) -> None:
        self.inner, self.left, self.fail = inner, cap, fail

    def _count(self, out: bytes) -> bytes:
        self.left -= len(out)
        if self.left < 0:
            raise self.fail()
        return out

    def _take(self, out: Any) -> Any:
        if isinstance(out, bytes):  # httpx: a decoder returns bytes
            return self._count(out)
        return (self._count(part) for part in out)  # httpx2: it yields them

    def decode(self, data: bytes) -> Any:
        return self._take(self.inner.decode(data))

    def flush(self) -> Any:
        return self._take(self.inner.flush())


class Guard:
    """The hooks of one server's clients: `shown` names it in sentences."""

    def __init__(self, server: address.ServerAddress) -> None:
        self.server = server

    def hooks(self) -> dict[str, list[Any]]:
        return {"response": [self.on_response]}

    def on_response(self, response: Any) -> None:
        request = response.request
        if response.has_redirect_location:
            location = response.headers.get("location", "")
            try:
                target = request.url.join(location)
            except Exception:  # noqa: BLE001 - an unparsable Location is no address to follow
                target = location
            there = address.origin(target)
            if there != address.origin(request.url):
                raise ServerRedirectError(
                    f"The server at {self.server.shown} tried to send your request, with your text in it, "
                    f"to {address.shown_origin(there, str(location))}, another server (HTTP "
                    f"{response.status_code}). Letterpress did not follow it, so nothing was sent there. "
                    "Check the address in Model ▸ Use a server… (or --server); if the server moved, enter "
                    "its new address."
                )
        cap, tokens = read_limit(request)
        path = str(getattr(request.url, "path", "")) or "/"

        def too_large() -> ServerTooLargeError:
            asked = f"a request of {tokens:,} tokens" if tokens else f"its answer to {path}"
            return ServerTooLargeError(
                f"The server at {self.server.shown} sent more than {size_label(cap)} for {asked}, far more "
                "than that can hold, so Letterpress stopped reading it. Your document was not changed; "
                "check that the address is a DiffusionGemma (or OpenAI-compatible) server."
            )

        get_decoder = getattr(response, "_get_content_decoder", None)
        if get_decoder is not None:  # httpx and httpx2 both decode through it, in read() and iter_bytes()
            response._decoder = _CappedDecoder(get_decoder(), cap, too_large)
