"""HTTP transport to one server: `httpx` for /health, /version, /tokenize and /v1/models, the official
`openai` client for /v1/completions; and `translate`, which turns every way a request can fail into a typed
`engine.api.ServerError` whose message says what happened, where, and what the writer can do.

Nothing here retries on its own (`max_retries=0`): a retry doubles a slow server's wait without the writer
knowing, and the app resends when the writer asks again.
"""

from __future__ import annotations

import json
import re
import ssl
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from engine.api import (
    ServerAuthError,
    ServerDiedError,
    ServerError,
    ServerFailedError,
    ServerKeyError,
    ServerModelNotFoundError,
    ServerRejectedError,
    ServerTimeoutError,
    ServerTLSError,
    ServerUnreachableError,
)
from engine.remote import address, redact
from engine.remote.transport import Guard

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 120.0  # seconds without a byte from the server; the first request of a new shape can take 30 s
LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}
_KNOWN_FIELDS = (
    "seed",
    "temperature",
    "suffix",
    "top_p",
    "top_k",
    "n",
    "max_tokens",
    "logprobs",
    "stop",
    "prompt",
    "model",
    "vllm_xargs",
    "diffusion_seed_canvas",
    "diffusion_pinned",
    "diffusion_read_only",
    "diffusion_max_steps",
    "diffusion_canvas_length",
)


def base_url(url: str) -> str:
    """The server's root URL: scheme://host:port without a trailing slash or /v1 (both spellings are
    common)."""
    return address.normalize(url)


def host_label(url: str) -> str:
    """host:port as the writer typed it, for sentences and the status bar: never the credentials in front
    of it, and never an exception for an address that cannot be used."""
    return address.shown(url)


def is_plain_http_to_another_machine(url: str) -> bool:
    """http:// to a host that is not this machine: the writer's text would cross a network unencrypted."""
    found = address.origin(base_url(url))
    if found is None:
        return False  # not an address at all: connecting refuses it with a sentence
    scheme, host, _port = found
    return scheme == "http" and host not in LOOPBACK and not host.startswith("127.")


@dataclass(frozen=True)
class Timeouts:
    connect: float = CONNECT_TIMEOUT
    read: float = READ_TIMEOUT


class ServerClient:
    """One server: a pooled `httpx.Client` for the small endpoints and an `openai.OpenAI` for completions."""

    def __init__(self, url: str, api_key: str | None = None, timeouts: Timeouts | None = None) -> None:
        timeouts = timeouts or Timeouts()
        self.address = address.parse(url)  # a ServerAddressError before anything connects
        problem = redact.check_key(api_key)
        if problem:
            raise ServerKeyError(problem)
        redact.remember(api_key)
        self.url = self.address.public_url  # credentials travel as Basic auth (below), never in a URL
        self.host = self.address.shown
        # user:password@ in the address is HTTP Basic auth (a proxy in front of the server); a key, when
        # there is one, is what the server reads instead.
        auth = (
            (self.address.username, self.address.password) if self.address.username and not api_key else None
        )
        self.timeouts = timeouts
        guard = Guard(self.address)  # no redirect to another origin; no answer larger than the request needs
        timeout = httpx.Timeout(timeouts.read, connect=timeouts.connect)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=timeout,
            trust_env=False,
            follow_redirects=True,
            event_hooks=guard.hooks(),
            auth=auth,
        )
        # The openai client brings its own HTTP stack (httpx or, in newer releases, httpx2): give it its own
        # timeout object and client, never ours.
        self.openai = openai.OpenAI(
            base_url=self.url + "/v1",
            api_key=api_key or "no-key",
            max_retries=0,
            timeout=openai.Timeout(timeouts.read, connect=timeouts.connect),
            http_client=openai.DefaultHttpxClient(trust_env=False, event_hooks=guard.hooks(), auth=auth),
        )

    def close(self) -> None:
        self.http.close()
        self.openai.close()

    def get_json(self, path: str) -> Any:
        try:
            response = self.http.get(path)
        except Exception as exc:
            raise translate(exc, self.host, read_timeout=self.timeouts.read) from exc
        return _json_or_raise(response, self.host)

    def post_json(self, path: str, body: dict[str, Any]) -> Any:
        try:
            response = self.http.post(path, json=body)
        except Exception as exc:
            raise translate(exc, self.host, read_timeout=self.timeouts.read) from exc
        return _json_or_raise(response, self.host)

    def health(self) -> bool:
        """True when /health answers 200 (vLLM answers it without a key)."""
        try:
            return self.http.get("/health").status_code == 200
        except httpx.HTTPError:
            return False


def _json_or_raise(response: httpx.Response, host: str) -> Any:
    if response.status_code >= 400:
        raise status_error(response.status_code, _body(response), host)
    try:
        return response.json()
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested deeper than Python parses
        raise ServerFailedError(
            f"The server at {host} answered something that is not JSON; is it an "
            "OpenAI-compatible server (vLLM)?"
        ) from exc


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError):
        return response.text


def error_message(body: Any) -> tuple[str, str]:
    """The server's own message and the field it names, from an OpenAI-style error body."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("detail") or "")
            param = err.get("param")
            return message, str(param) if param else ""
        return str(err), ""
    return str(body or ""), ""


def rejected_field(message: str, param: str = "", sent: tuple[str, ...] = ()) -> str:
    """The request field a 400 names: the error's `param` (vLLM says "extra_args" for `vllm_xargs`), else the
    first field of the request (`sent`) that the message mentions, else the first known field it mentions."""
    if param == "extra_args":
        return "vllm_xargs"
    if param:
        return param
    try:
        detail = json.loads(message)
    except ValueError:
        detail = None
    if isinstance(detail, list) and detail and isinstance(detail[0], dict) and detail[0].get("loc"):
        return str(detail[0]["loc"][-1])
    lowered = message.lower()
    for name in (*sent, *_KNOWN_FIELDS):
        if re.search(rf"\b{re.escape(name)}\b", lowered):
            return name
    return ""


def status_error(
    status: int, body: Any, host: str, model: str = "", sent: tuple[str, ...] = ()
) -> ServerError:
    """The sentence for an HTTP error status; what the server said is quoted with every secret removed."""
    message, param = error_message(body)
    shown = redact.shown(message)
    said = f" It said: {shown}" if shown else ""
    if status in (401, 403):
        return ServerAuthError(
            f"The server at {host} refused the API key (HTTP {status}). Check the key in Model ▸ Use a "
            f"server… (or LETTERPRESS_API_KEY).{said}"
        )
    if status == 404 and ("model" in message.lower() or param == "model"):
        which = f" '{model}'" if model else ""
        return ServerModelNotFoundError(
            f"The server at {host} does not serve the model{which}. Pick one of the models it lists in Model "
            f"▸ Use a server….{said}"
        )
    if status == 404:
        return ServerFailedError(
            f"The server at {host} has no such endpoint (HTTP 404); is it an "
            f"OpenAI-compatible server (vLLM)?{said}"
        )
    if status == 400 or status == 422:
        field = redact.shown(rejected_field(message, param, sent), 60)  # the server named it: plain
        named = f" the field '{field}'" if field else " the request"
        return ServerRejectedError(f"The server at {host} rejected{named} (HTTP {status}).{said}", field)
    if status >= 500:
        return ServerFailedError(
            f"The server at {host} failed while answering (HTTP {status}); after an engine error vLLM stops, "
            f"so it may need restarting. Your document was not changed.{said}"
        )
    return ServerFailedError(f"The server at {host} answered HTTP {status}.{said}")


def translate(
    exc: BaseException,
    host: str,
    *,
    streaming: bool = False,
    model: str = "",
    read_timeout: float = READ_TIMEOUT,
    sent: tuple[str, ...] = (),
) -> ServerError:
    """Any failure of a call to the server as a typed error with a sentence; `streaming`: the answer had
    begun."""
    found = _server_error_in(exc)
    if found is not None:
        return found  # said by the transport's guard (a redirect, too large an answer) or a shape check
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if exc.body is not None else exc.message
        if isinstance(body, dict) and "message" in body and "error" not in body:
            body = {"error": body}  # the openai client hands over the inner error object
        return status_error(exc.status_code, body, host, model, sent)
    cause: BaseException = exc
    if isinstance(exc, openai.APIConnectionError) and exc.__cause__ is not None:
        cause = exc.__cause__
    text = redact.shown(f"{type(cause).__name__}: {cause}", 400)  # an HTTP library may quote the request
    if isinstance(exc, openai.APITimeoutError) or _is(cause, "TimeoutException"):
        if _is(cause, "ConnectTimeout"):
            return ServerUnreachableError(
                f"The server at {host} did not accept a connection within "
                f"{CONNECT_TIMEOUT:.0f} s. Check the address and that it is running."
            )
        return ServerTimeoutError(
            f"The server at {host} sent nothing for {read_timeout:g} s, so the request was given up. It may "
            "be busy or overloaded; try again, or ask for less. Your document was not changed."
        )
    if _is_tls(cause):
        return ServerTLSError(
            f"A secure (https) connection to {host} failed ({text[:200]}). Check that the server speaks "
            "https on that port and that its certificate is trusted "
            "here, or use http:// for a server on this machine."
        )
    if streaming or _is(cause, "RemoteProtocolError", "ReadError"):
        return ServerDiedError(
            f"The server at {host} stopped answering in the middle of the request ({text[:160]}). It may "
            "have crashed or restarted; your document was not changed."
        )
    if _is(cause, "ConnectError", "NetworkError") or isinstance(cause, (OSError, openai.APIConnectionError)):
        return ServerUnreachableError(
            f"Letterpress cannot reach a server at {host} ({text[:160]}). Check the address and port, and "
            "that the server is running."
        )
    return ServerFailedError(f"The request to {host} failed ({text[:200]}).")


def _server_error_in(exc: BaseException) -> ServerError | None:
    """The `ServerError` that `exc` is or was raised from (the openai client wraps what a hook raised)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 6:
        if isinstance(current, ServerError):
            return current
        current = current.__cause__ or current.__context__
        seen += 1
    return None


def _is(exc: BaseException, *names: str) -> bool:
    """`exc` is one of httpx's (or httpx2's, which newer openai releases use) exception classes named
    `names`."""
    return any(
        k.__name__ in names and k.__module__.split(".")[0] in ("httpx", "httpx2", "httpcore")
        for k in type(exc).__mro__
    )


def _is_tls(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 6:
        if isinstance(exc, ssl.SSLError) or "SSL" in str(exc) or "CERTIFICATE" in str(exc).upper():
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False
