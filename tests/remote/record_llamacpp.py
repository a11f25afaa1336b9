"""Refresh the llama.cpp recordings the fast text-tier tests replay (tests/remote/test_llamacpp_replay.py).

    bash tests/remote/run_llamacpp.sh record   # builds/serves if needed, records, stops the server
    # or, against a server already running with --api_key letterpress-test-key:
    python tests/remote/record_llamacpp.py http://127.0.0.1:8766/v1 [RUN ...]   (default: every run)

Every exchange goes through a recording proxy to the real server and is written to
tests/remote/recordings/llamacpp/: connect (/v1/models) and one file per run of
tests/helpers/llamacpp_scenarios.RUNS (draft, three alternatives, every rewrite preset, a custom rewrite,
infill), each from a fresh memory of what the server accepts, as the replay starts.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.remote import RemoteEngine, ServerConfig, text_features
from tests.helpers import llamacpp_scenarios as sc
from tests.helpers.vllm_replay import RECORDINGS, TEST_KEY, RecordingProxy, save

FOLDER = RECORDINGS / "llamacpp"


def record(upstream: str, only: tuple[str, ...] = ()) -> None:
    with RecordingProxy(upstream.removesuffix("/v1")) as proxy:
        engine = RemoteEngine(ServerConfig(proxy.url, sc.MODEL, TEST_KEY, context_length=sc.CONTEXT))
        engine.connect()
        save(proxy.settle(), "connect", FOLDER)
        for name, make in sc.RUNS.items():
            if only and name not in only:
                continue
            text_features.forget()
            proxy.exchanges.clear()
            result = engine.run(make())
            print(f"{name}: {[c.text[:70] for c in result.candidates]}")
            save(proxy.settle(), f"run_{name}", FOLDER)
        engine.unload()


if __name__ == "__main__":
    record(sys.argv[1], tuple(sys.argv[2:]))
