"""First streamed token to the window on the text tier: from the moment the server sends a draft's first
piece to the moment the editor shows it as ghost text (issue 31's target: <= 50 ms), through the whole path
(HTTP stream, `TextEngine`, the engine thread, the host's queued signal, the controller, the ghost painter).

The server is the scripted stub on 127.0.0.1 (tests/helpers/openai_stub.py), which stamps `perf_counter()` as
it writes each answer's first piece and then waits 0.3 s, so the first piece is alone on the wire; the window
is the real one (offscreen Qt). Prints JSON: per-round milliseconds, the median and the worst.

    QT_QPA_PLATFORM=offscreen python tests/remote/bench_text_stream.py [rounds]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def bench(rounds: int = 10) -> dict[str, Any]:
    from PySide6.QtWidgets import QApplication

    from app.config.settings import Settings
    from app.platform import privacy
    from engine.fake import FakeEngine
    from engine.remote.client import Timeouts
    from tests.helpers.gui import ghost_text, set_text
    from tests.helpers.openai_stub import Behaviour, OpenAIStub

    app = QApplication.instance() or QApplication([])
    from app.assist.engine_host import EngineHost
    from app.main_window import MainWindow

    shown: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, OpenAIStub(Behaviour(answer="and the gulls", gap=0.3)) as stub:
        fake = FakeEngine(steps=2)
        host = EngineHost(lambda: fake)
        host.start()
        window = MainWindow(host, settings=Settings(Path(tmp) / "config"), model_dir="fake")
        window.show()
        _wait(app, lambda: window.model_state in ("ready", "error"))
        window.server_mode.timeouts = Timeouts(connect=2.0, read=10.0)
        window.server_mode.connect_server(stub.url, "stub-model", None)
        _wait(app, lambda: window.server_mode.whereLabel.text().endswith("· stub-model"))
        window.assistant.changed.connect(
            lambda: shown.append(time.perf_counter()) if ghost_text(window).strip() else None
        )
        latencies = []
        for _ in range(rounds):
            shown.clear()
            sent_before = len(stub.behaviour.first_piece_at)
            set_text(window, "The boats came in at dawn,")
            window.actionDraft.trigger()
            _wait(app, lambda n=sent_before: len(stub.behaviour.first_piece_at) > n and bool(shown))
            latencies.append((shown[0] - stub.behaviour.first_piece_at[-1]) * 1000)
            _wait(
                app,
                lambda: window.assistant.suggestion is not None and not window.assistant.suggestion.running,
            )
            window.assistant.dismiss()
        privacy.forbid_servers()
        window.host.shutdown()
        window.close()
    return {
        "rounds": rounds,
        "first_piece_to_ghost_ms": [round(x, 1) for x in latencies],
        "median_ms": round(statistics.median(latencies), 1),
        "worst_ms": round(max(latencies), 1),
        "target_ms": 50,
    }


def _wait(app: Any, ready: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > end:
            raise TimeoutError("the window did not get there in time")
        app.processEvents()
        time.sleep(0.001)


if __name__ == "__main__":
    print(json.dumps(bench(int(sys.argv[1]) if len(sys.argv) > 1 else 10), indent=2))
