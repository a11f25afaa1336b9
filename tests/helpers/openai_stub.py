"""A scripted OpenAI-compatible server on 127.0.0.1 for the text tier's fault tests: it answers from a fixed
text and can misbehave in each way a real server does (`Behaviour`): no model, no chat template, no
completions endpoint, no /infill, `n` ignored, an answer longer than asked, a stream that stops, another model
between requests. The happy paths are covered by replays of a real llama.cpp server
(tests/remote/recordings/llamacpp_*.json); this stub exists for the faults a real server rarely shows on
demand."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Behaviour:
    models: list[str] = field(default_factory=lambda: ["stub-model"])
    owned_by: str = "llamacpp"
    context: int | None = 4096  # None: /v1/models states no context length
    answer: str = "The quiet harbour woke slowly under a grey sky."
    completions: bool = True  # False: /v1/completions answers 404 (a chat-only server)
    chat_template: bool = True  # False: chat answers 400 "no chat template"
    infill: bool = True  # False: /infill answers 404
    honour_n: bool = True
    logprobs: bool = True
    extra_pieces: int = 0  # pieces sent past max_tokens (an answer longer than asked)
    stop_after: int | None = None  # close the connection after this many pieces, without [DONE]
    switch_model_after: int | None = None  # from this request on, answers name another model
    gap: float = 0.0  # seconds between pieces
    first_piece_at: list[float] = field(default_factory=list)  # perf_counter() when each first piece was sent


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        b = self.server.behaviour
        self.server.seen.append(("GET", self.path, None))
        if self.path.startswith("/v1/models"):
            data = []
            for name in b.models:
                item: dict[str, Any] = {"id": name, "object": "model", "owned_by": b.owned_by}
                if b.context:
                    item["meta"] = {"n_ctx_train": b.context}
                data.append(item)
            self._json(200, {"object": "list", "data": data})
        else:
            self._json(404, {"error": {"message": "File Not Found", "code": 404}})

    def do_POST(self) -> None:
        b = self.server.behaviour
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.seen.append(("POST", self.path, body))
        self.server.requests += 1
        if self.path == "/v1/completions" and not b.completions:
            return self._json(404, {"detail": "Not Found"})
        if self.path == "/infill" and not b.infill:
            return self._json(404, {"error": {"message": "File Not Found", "code": 404}})
        if self.path == "/v1/chat/completions" and not b.chat_template:
            return self._json(
                400,
                {"error": {"message": "This model has no chat template; use /v1/completions.", "code": 400}},
            )
        if self.path not in ("/v1/completions", "/v1/chat/completions", "/infill"):
            return self._json(404, {"detail": "Not Found"})
        if not b.logprobs and "logprobs" in body:
            return self._json(
                400, {"error": {"message": "logprobs is not supported", "param": "logprobs", "code": 400}}
            )
        self._stream(body)

    def _stream(self, body: dict[str, Any]) -> None:
        b = self.server.behaviour
        model = body.get("model", "")
        if b.switch_model_after is not None and self.server.requests > b.switch_model_after:
            model = "another-model"
        n = int(body.get("n", 1)) if b.honour_n else 1
        limit = int(body.get("max_tokens") or body.get("n_predict") or 16) + b.extra_pieces
        words = b.answer.split(" ")
        pieces = [(w if i == 0 else " " + w) for i, w in enumerate(words)][:limit]
        while len(pieces) < limit and b.extra_pieces:
            pieces.append(" more")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            for k, piece in enumerate(pieces):
                if k == 0:
                    b.first_piece_at.append(time.perf_counter())  # stamped as it goes on the wire
                for index in range(n):
                    text = piece if index == 0 else piece.upper()
                    self._event(self._chunk(body, model, index, text, None))
                sent += 1
                if b.stop_after is not None and sent >= b.stop_after:
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    self.close_connection = True
                    return
                if b.gap:
                    time.sleep(b.gap)
            for index in range(n):
                self._event(self._chunk(body, model, index, "", "stop"))
            if self.path != "/infill":
                self._raw(b"data: [DONE]\n\n")
            self._raw(b"")
        except OSError:
            self.server.closed_early += 1
            self.close_connection = True

    def _chunk(self, body: dict[str, Any], model: str, index: int, text: str, finish: str | None) -> Any:
        if self.path == "/infill":
            return {"content": text, "stop": finish is not None}
        lp = -0.1 * (index + 1)
        choice: dict[str, Any] = {"index": index, "finish_reason": finish}
        if self.path == "/v1/completions":
            choice["text"] = text
            if "logprobs" in body and text:
                choice["logprobs"] = {"tokens": [text], "token_logprobs": [lp]}
        else:
            choice["delta"] = {"content": text} if text else {}
            if body.get("logprobs") and text:
                choice["logprobs"] = {"content": [{"token": text, "logprob": lp}]}
        return {"id": "x", "object": "chunk", "model": model, "choices": [choice]}

    def _event(self, obj: Any) -> None:
        self._raw(f"data: {json.dumps(obj)}\n\n".encode())

    def _raw(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, obj: Any) -> None:
        payload = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    behaviour: Behaviour
    seen: list[tuple[str, str, Any]]
    requests: int
    closed_early: int


class OpenAIStub:
    """The scripted server; a context manager. `seen` lists (method, path, body) of every request."""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self._srv = _Server(("127.0.0.1", 0), _Handler)
        self._srv.behaviour = behaviour or Behaviour()
        self._srv.seen = []
        self._srv.requests = 0
        self._srv.closed_early = 0
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._srv.serve_forever, name="openai-stub", daemon=True)

    @property
    def behaviour(self) -> Behaviour:
        return self._srv.behaviour

    @property
    def seen(self) -> list[tuple[str, str, Any]]:
        return self._srv.seen

    def paths(self, method: str = "POST") -> list[str]:
        return [p for m, p, _ in self._srv.seen if m == method]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(timeout=5)
