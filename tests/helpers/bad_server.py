"""Answers a misbehaving server sends, for `ReplayServer.tamper` (tests/helpers/vllm_replay.py): a JSON body
of the wrong shape, an error that echoes the key, a redirect to another host, a stream far larger than asked.

Each builder returns `answer(handler, body) -> bool`; `streamed_only` ones answer only the streamed
/v1/completions request of a draft (`"stream": true`), so the connection's own probes still get the recorded
answers of a real vLLM and the misbehaviour meets the request the writer made.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Answer = Callable[[Any, Any], bool]


def json_answer(body: Any, status: int = 200) -> Answer:
    payload = json.dumps(body).encode()

    def answer(handler: Any, _sent: Any) -> bool:
        handler._send(status, "application/json", payload)
        return True

    return answer


def streamed_only(inner: Answer) -> Answer:
    """`inner` for the streamed completion (the writer's request), the recording for everything else."""

    def answer(handler: Any, sent: Any) -> bool:
        if isinstance(sent, dict) and sent.get("stream") is True:
            return inner(handler, sent)
        return False

    return answer


def redirect(location: str, status: int = 307) -> Answer:
    def answer(handler: Any, _sent: Any) -> bool:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        return True

    return answer


def chunk(text: str, index: int = 0) -> bytes:
    """One SSE event of a streamed /v1/completions answer holding `text` for choice `index`."""
    body = {
        "id": "cmpl-bad",
        "object": "text_completion",
        "created": 0,
        "model": "letterpress-demo",
        "choices": [{"index": index, "text": text, "logprobs": None, "finish_reason": None}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


class Flood:
    """A streamed answer of `total` bytes of text in `canvases` events; `written` counts what got out before
    the client hung up, `finished` whether all of it did."""

    def __init__(self, total: int, canvases: int) -> None:
        self.total, self.canvases = total, canvases
        self.written = 0
        self.finished = False

    def __call__(self, handler: Any, _sent: Any) -> bool:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        piece = "word " * (self.total // self.canvases // 5)
        try:
            for _ in range(self.canvases):
                data = chunk(piece)
                handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                handler.wfile.flush()
                self.written += len(data)
            done = b"data: [DONE]\n\n"
            handler.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
            handler.wfile.flush()
            self.finished = True
        except OSError:  # the client stopped reading: what a capped reader does
            handler.close_connection = True
        return True
