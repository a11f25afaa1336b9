"""Figures of the remote engine against a real server, in one run (printed as JSON; see README "Use a
server"):

- first feedback: from `run()` to the server's response headers (it accepted the request and is working; the
  app shows its "waiting on the server" placeholder before that, when the request is made);
- first canvas: from `run()` to the first committed canvas (the first text in the editor);
- overhead: the remote engine's whole request (prompt through /tokenize, stream, events) against a bare
  `openai` client streaming the same token ids with the same arguments, interleaved, median over rounds.

    python tests/remote/bench_vllm.py http://127.0.0.1:8765 [rounds]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.remote import RemoteEngine, ServerConfig
from engine.remote.backend import completion_kwargs
from engine.remote.client import Timeouts
from tests.helpers import vllm_scenarios as sc
from tests.helpers.vllm_replay import TEST_KEY


def bench(url: str, rounds: int = 6) -> dict[str, float]:
    engine = RemoteEngine(ServerConfig(url, sc.MODEL, TEST_KEY, Timeouts(read=300)))
    started = time.perf_counter()
    engine.connect()
    connect = time.perf_counter() - started
    assert engine._client is not None
    bare = engine._client.openai
    ours, theirs, firsts, headers = [], [], [], []
    engine.run(sc.draft())  # warm the shape (the first request of a new shape takes 11-33 s on a CPU)
    for i in range(rounds):
        request = sc.draft()
        call = engine.plan(request)
        kwargs = completion_kwargs(sc.MODEL, call)
        order = ("ours", "bare") if i % 2 == 0 else ("bare", "ours")
        for who in order:
            t0 = time.perf_counter()
            if who == "ours":
                engine.run(request)
                ours.append(time.perf_counter() - t0)
                firsts.append(engine.last_timings.get("first_canvas", 0.0))
                headers.append(engine.last_timings.get("headers", 0.0))
            else:
                for _chunk in bare.completions.create(**kwargs):
                    pass
                theirs.append(time.perf_counter() - t0)
    return {
        "connect_s": round(connect, 3),
        "first_feedback_s": round(statistics.median(headers), 3),
        "first_canvas_s": round(statistics.median(firsts), 3),
        "remote_engine_s": round(statistics.median(ours), 3),
        "bare_openai_s": round(statistics.median(theirs), 3),
        "overhead_ratio": round(statistics.median(ours) / statistics.median(theirs), 3),
        "rounds": rounds,
    }


if __name__ == "__main__":
    figures = bench(
        sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8765",
        int(sys.argv[2]) if len(sys.argv) > 2 else 6,
    )
    print(json.dumps(figures))
