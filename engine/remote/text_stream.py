"""One streamed POST to a server of any model: server-sent events read with a cap, as parsed JSON objects.

Why not the `openai` client here: every byte a server sends is untrusted, and a stream must end where the
request's own size does (an answer longer than asked is not read on, a single endless line is not buffered).
`EventStream` reads raw chunks, splits lines itself, stops at `max_bytes`, and turns any HTTP status into the
typed sentence of `engine.remote.client.status_error`; a 404 for an endpoint (not a model) is
`MissingEndpointError`, which the text tier uses to fall back and remember. A server that ignores
`stream: true` and answers one JSON object is read (capped) as one event. `close()` may be called from
another thread (a cancel): the read in progress then fails and the caller treats it as cancelled.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx

from engine.api import ServerDiedError, ServerFailedError
from engine.remote.client import ServerClient, error_message, status_error, translate

MAX_ERROR_BYTES = 64 * 1024  # an error body is a sentence; a server sending more is not read on
MAX_LINE_BYTES = 256 * 1024  # one event of one token is a few hundred bytes


class MissingEndpointError(ServerFailedError):
    """HTTP 404 (or 405/501) for the path itself: this server has no such endpoint."""


class AnswerTooLongError(ServerFailedError):
    """The server sent more than the request allows; what was read within the cap is kept by the caller."""


class EventStream:
    """POST `body` to `path` with `stream: true`; iterate for events (dicts) until `[DONE]` or the end."""

    def __init__(
        self, client: ServerClient, path: str, body: dict[str, Any], *, max_bytes: int, model: str = ""
    ) -> None:
        self.client, self.path, self.body = client, path, body
        self.max_bytes = max_bytes
        self.model = model
        self.read_bytes = 0
        self.done = False  # the server said [DONE] (or sent its whole answer as one object)
        self._response: httpx.Response | None = None
        self._closed = False

    def open(self) -> None:
        """Send the request and check the status (raises the typed error of a refusal)."""
        for attempt in (1, 2):
            try:
                request = self.client.http.build_request("POST", self.path, json=self.body)
                self._response = self.client.http.send(request, stream=True)
                break
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                # A pooled connection the server closed after its last answer (llama.cpp's Python server
                # does after a failed stream): the request never reached the model, so send it once more.
                if attempt == 2:
                    raise translate(exc, self.client.host, read_timeout=self.client.timeouts.read) from exc
            except Exception as exc:
                raise translate(exc, self.client.host, read_timeout=self.client.timeouts.read) from exc
        response = self._response
        assert response is not None
        if response.status_code >= 400:
            raw = self._read_capped(response, MAX_ERROR_BYTES)
            self.close()
            body: Any
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            message, _ = error_message(body)
            if response.status_code in (404, 405, 501) and "model" not in message.lower():
                raise MissingEndpointError(
                    f"The server at {self.client.host} has no {self.path} endpoint "
                    f"(HTTP {response.status_code})."
                )
            raise status_error(response.status_code, body, self.client.host, self.model, tuple(self.body))

    def _read_capped(self, response: httpx.Response, cap: int) -> bytes:
        got = b""
        with contextlib.suppress(Exception):  # an error body that breaks off is still an error
            for chunk in response.iter_bytes():
                got += chunk
                if len(got) >= cap:
                    break
        return got[:cap]

    @property
    def closed(self) -> bool:
        """Closed by the caller (a cancel, or the end of a read)."""
        return self._closed

    def close(self) -> None:
        self._closed = True
        if self._response is not None:
            with contextlib.suppress(Exception):  # closing a dead stream is fine
                self._response.close()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._response is None:
            self.open()
        response = self._response
        assert response is not None
        if "json" in response.headers.get("content-type", ""):
            yield self._whole_json(response)
            return
        buffer = b""
        try:
            for chunk in response.iter_bytes():
                self.read_bytes += len(chunk)
                if self.read_bytes > self.max_bytes:
                    raise AnswerTooLongError(
                        f"The server at {self.client.host} sent more than the request asked for; "
                        "Letterpress stopped reading it."
                    )
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    event = self._event(line)
                    if event is not None:
                        yield event
                    if self.done:
                        return
                if len(buffer) > MAX_LINE_BYTES:
                    raise ServerFailedError(
                        f"The server at {self.client.host} sent an event of more than "
                        f"{MAX_LINE_BYTES // 1024} KiB; that is not a streamed answer."
                    )
        except (ServerFailedError, ServerDiedError):
            raise
        except Exception as exc:
            if self._closed:
                return  # closed from a cancel
            raise translate(
                exc,
                self.client.host,
                streaming=True,
                model=self.model,
                read_timeout=self.client.timeouts.read,
            ) from exc
        if buffer.strip():
            event = self._event(buffer)
            if event is not None:
                yield event

    def _event(self, line: bytes) -> dict[str, Any] | None:
        text = line.decode("utf-8", "replace").strip()
        if not text.startswith("data:"):
            return None  # blank lines, comments (": ping"), "event:" names
        data = text[5:].strip()
        if data == "[DONE]":
            self.done = True
            return None
        try:
            found = json.loads(data)
        except ValueError as exc:
            raise ServerFailedError(
                f"The server at {self.client.host} streamed something that is not JSON; is it an "
                "OpenAI-compatible server?"
            ) from exc
        if not isinstance(found, dict):
            raise ServerFailedError(
                f"The server at {self.client.host} streamed an event that is not an object."
            )
        if "error" in found and not found.get("choices"):
            message, _ = error_message(found)
            raise ServerFailedError(
                f"The server at {self.client.host} stopped with an error while answering: {message[:300]}. "
                "Your document was not changed."
            )
        return found

    def _whole_json(self, response: httpx.Response) -> dict[str, Any]:
        raw = self._read_capped(response, self.max_bytes + 1)
        if len(raw) > self.max_bytes:
            raise AnswerTooLongError(
                f"The server at {self.client.host} sent more than the request asked for; Letterpress "
                "stopped reading it."
            )
        try:
            found = json.loads(raw)
        except ValueError as exc:
            raise ServerFailedError(
                f"The server at {self.client.host} answered something that is not JSON."
            ) from exc
        if not isinstance(found, dict):
            raise ServerFailedError(f"The server at {self.client.host} answered JSON that is not an object.")
        self.done = True
        return found
