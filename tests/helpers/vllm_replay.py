"""Recordings of a real vLLM server, and a stub that replays them (for fast tests of the remote engine).

A recording is one exchange: the request (method, path, JSON body, whether it carried the right key) and the
real server's answer (status, content type, JSON body or the list of SSE events). `RecordingProxy` sits
between a client and a real server and writes every exchange (see tests/remote/record_vllm.py); `ReplayServer`
answers a request only with the recording made for exactly that request (same method, path, body and key), and
599 with "no recording" otherwise, so a test can never pass on an answer no vLLM gave. Failure knobs replay a
real answer late (`delay`), slowly (`gap` between events), or cut it after `cut_after` events (a server dying
mid-stream, as a killed vLLM does); none invents an answer.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import httpx

RECORDINGS = Path(__file__).resolve().parents[1] / "remote" / "recordings"
TEST_KEY = "letterpress-test-key"  # the key the recorded server was started with (--api-key)


def canonical(body: Any) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def key_of(method: str, path: str, body: Any, authorized: bool) -> str:
    return f"{method} {path} {canonical(body)} {'key' if authorized else 'nokey'}"


def _authorized(headers: Any, key: str) -> bool:
    return (headers.get("Authorization") or headers.get("authorization") or "") == f"Bearer {key}"


OVERRIDES = ("engine_dead",)  # answers to requests another recording also has: replayed only when asked for


def load_recordings(folder: Path = RECORDINGS, overrides: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Every recording, keyed by its request; `overrides` (file stems) are laid over the others, last."""
    found: dict[str, dict[str, Any]] = {}
    paths = [p for p in sorted(folder.glob("*.json")) if p.stem not in OVERRIDES]
    paths += [folder / f"{name}.json" for name in overrides]
    for path in paths:
        for rec in json.loads(path.read_text(encoding="utf-8")):
            req = rec["request"]
            found[key_of(req["method"], req["path"], req.get("body"), req["authorized"])] = rec
    return found


@dataclass
class Knobs:
    delay: float = 0.0  # seconds before the answer's first byte
    gap: float = 0.0  # seconds between SSE events
    cut_after: int | None = None  # close the connection after this many SSE events (a server that dies)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        return

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def do_GET(self) -> None:
        self._answer("GET", None)

    def do_POST(self) -> None:
        self._answer("POST", self._body())

    def _answer(self, method: str, body: Any) -> None:
        srv = self.server
        path = self.path.split("?")[0]
        srv.seen.append((method, path, body))
        tamper = srv.tamper.get((method, path))
        if tamper is not None and tamper(self, body):  # a misbehaving server (tests/helpers/bad_server.py)
            return
        rec = srv.recordings.get(key_of(method, path, body, _authorized(self.headers, TEST_KEY)))
        if rec is None and path == "/health":  # vLLM answers /health with or without a key
            rec = srv.recordings.get(key_of(method, path, body, True))
        if rec is None:
            self._send(
                599,
                "application/json",
                json.dumps({"error": {"message": f"no recording for {method} {path}"}}).encode(),
            )
            return
        time.sleep(srv.knobs.delay)
        resp = rec["response"]
        if "events" not in resp:
            payload = resp["body"] if isinstance(resp["body"], str) else json.dumps(resp["body"])
            self._send(resp["status"], resp.get("content_type", "application/json"), payload.encode())
            return
        self.send_response(resp["status"])
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, event in enumerate(resp["events"]):
            if srv.knobs.cut_after is not None and i >= srv.knobs.cut_after:
                self.wfile.flush()
                self.connection.shutdown(2)  # the server went away mid-answer
                self.close_connection = True
                return
            if i:
                time.sleep(srv.knobs.gap)
            data = event.encode()
            try:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            except OSError:  # the client closed the stream (a cancel)
                srv.closed_early += 1
                self.close_connection = True
                return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send(self, status: int, ctype: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except OSError:  # the client gave up waiting (a timeout test)
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    recordings: dict[str, dict[str, Any]]
    knobs: Knobs
    seen: list[tuple[str, str, Any]]
    closed_early: int
    tamper: dict[tuple[str, str], Any]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a capped read, a cancel) is no server error worth a traceback."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class ReplayServer:
    """A stub vLLM on 127.0.0.1 and an ephemeral port that only replays recordings; a context manager."""

    def __init__(
        self,
        knobs: Knobs | None = None,
        folder: Path = RECORDINGS,
        overrides: tuple[str, ...] = (),
        host: str = "127.0.0.1",
    ) -> None:
        self._srv = _Server((host, 0), _Handler)
        self._srv.recordings = load_recordings(folder, overrides)
        self._srv.knobs = knobs or Knobs()
        self._srv.seen = []
        self._srv.closed_early = 0
        self._srv.tamper = {}
        self._thread = threading.Thread(
            target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self._srv.server_address[0]}:{self._srv.server_address[1]}"

    @property
    def tamper(self) -> dict[tuple[str, str], Any]:
        """(method, path) -> answer(handler, body): what a misbehaving server sends instead of a recording
        (it returns False to let the recording answer after all)."""
        return self._srv.tamper

    @property
    def knobs(self) -> Knobs:
        return self._srv.knobs

    @property
    def seen(self) -> list[tuple[str, str, Any]]:
        return self._srv.seen

    @property
    def closed_early(self) -> int:
        return self._srv.closed_early

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.shutdown()
        self._srv.server_close()


class RecordingProxy:
    """Forwards every request to a real server and keeps each exchange (as `ReplayServer` reads them)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[dict[str, Any]] = []
        self._busy = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                proxy._forward(self, "GET", None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                proxy._forward(self, "POST", json.loads(raw) if raw else None)

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._srv.daemon_threads = True
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._srv.server_address[1]}"

    def settle(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The exchanges once every forwarded request has finished (a stream ends after its client moved
        on)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if not self._busy:
                    break
            time.sleep(0.05)
        return self.exchanges

    def _forward(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        with self._lock:
            self._busy += 1
        try:
            self._forward_one(handler, method, body)
        finally:
            with self._lock:
                self._busy -= 1

    def _forward_one(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        headers = {k: v for k, v in handler.headers.items() if k.lower() in ("authorization", "content-type")}
        rec: dict[str, Any] = {
            "request": {
                "method": method,
                "path": handler.path.split("?")[0],
                "body": body,
                "authorized": _authorized(handler.headers, TEST_KEY),
            }
        }
        with (
            httpx.Client(timeout=httpx.Timeout(300, connect=5), trust_env=False) as client,
            client.stream(
                method,
                self.upstream + handler.path,
                headers=headers,
                content=json.dumps(body).encode() if body is not None else None,
            ) as up,
        ):
            ctype = up.headers.get("content-type", "application/json")
            handler.send_response(up.status_code)
            handler.send_header("Content-Type", ctype)
            if ctype.startswith("text/event-stream"):
                handler.send_header("Transfer-Encoding", "chunked")
                handler.end_headers()
                events = []
                buffer = ""
                gone = False  # the client closed its stream early (a cancel, a rewrite past its window)
                for text in up.iter_text():
                    buffer += text
                    while "\n\n" in buffer:
                        event, buffer = buffer.split("\n\n", 1)
                        event += "\n\n"
                        events.append(event)  # recorded whole even after the client left
                        data = event.encode()
                        try:
                            if not gone:
                                handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                                handler.wfile.flush()
                        except OSError:
                            gone = True
                if not gone:
                    handler.wfile.write(b"0\r\n\r\n")
                rec["response"] = {"status": up.status_code, "events": events}
            else:
                payload = up.read()
                handler.send_header("Content-Length", str(len(payload)))
                handler.end_headers()
                handler.wfile.write(payload)
                try:
                    parsed: Any = json.loads(payload)
                except ValueError:
                    parsed = payload.decode("utf-8", "replace")
                rec["response"] = {"status": up.status_code, "content_type": ctype, "body": parsed}
        self.exchanges.append(rec)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.shutdown()
        self._srv.server_close()


def save(exchanges: list[dict[str, Any]], name: str, folder: Path = RECORDINGS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(exchanges, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
