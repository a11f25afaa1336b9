"""The text tier against a real llama.cpp server (opt-in: `bash tests/remote/run_llamacpp.sh test`, which
builds llama-cpp-python from its sdist once, serves SmolLM2-135M-Instruct on 127.0.0.1 with --api_key and sets
LETTERPRESS_LLAMACPP=1, LETTERPRESS_LLAMACPP_URL and LETTERPRESS_LLAMACPP_STATE). The engine, the command line
and the window draft, rewrite with every preset, infill and offer alternatives; a cancel ends a stream; the
last test stops the server in the middle of an answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.api import REWRITE_PRESETS, DenoiseSettings, DraftRequest, ServerError
from engine.remote import RemoteEngine, ServerConfig, text_features
from engine.remote.client import Timeouts
from tests.helpers import llamacpp_scenarios as sc
from tests.helpers.vllm_replay import TEST_KEY

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("LETTERPRESS_LLAMACPP") != "1",
        reason="needs a real llama.cpp server: tests/remote/run_llamacpp.sh",
    ),
]
URL = os.environ.get("LETTERPRESS_LLAMACPP_URL", "http://127.0.0.1:8766/v1")


@pytest.fixture(scope="module")
def engine():
    text_features.forget()
    e = RemoteEngine(ServerConfig(URL, sc.MODEL, TEST_KEY, Timeouts(read=300), context_length=sc.CONTEXT))
    e.connect()
    yield e
    e.unload()


@pytest.mark.parametrize("name", sorted(sc.RUNS))
def test_every_task_and_preset_comes_back_as_text(engine, name):
    events = []
    result = engine.run(sc.RUNS[name](), on_step=events.append)
    assert result.text.strip() and not result.cancelled, result
    assert len(events) >= 2  # streamed


def test_alternatives_are_distinct_and_ranked(engine):
    result = engine.run(
        DraftRequest(before=sc.BEFORE, max_new_tokens=24, settings=DenoiseSettings(candidates=3))
    )
    texts = [c.text for c in result.candidates]
    assert len(texts) >= 2 and len(set(texts)) == len(texts)


def test_a_cancel_mid_stream_ends_the_request(engine):
    cancel = threading.Event()
    events = []

    def on_step(event):
        events.append(event)
        if len(events) == 3:
            cancel.set()

    started = time.perf_counter()
    result = engine.run(DraftRequest(before=sc.BEFORE, max_new_tokens=200), on_step, cancel)
    assert result.cancelled and len(events) < 20 and time.perf_counter() - started < 60


@pytest.mark.parametrize("task", ["draft", "rewrite", "infill"])
def test_cli_against_the_server(tmp_path, task):
    files = {"before": sc.DOC_BEFORE, "selection": sc.SELECTION, "after": sc.DOC_AFTER}
    args = []
    for name, text in files.items():
        if (task == "draft" and name != "before") or (task == "infill" and name == "selection"):
            continue
        (tmp_path / f"{name}.txt").write_text(text, encoding="utf-8")
        args += [f"--{name}-file", str(tmp_path / f"{name}.txt")]
    if task == "rewrite":
        args += ["--instruction", REWRITE_PRESETS["formal"]]
    env = {**os.environ, "LETTERPRESS_API_KEY": TEST_KEY}
    cmd = [sys.executable, "-m", "engine", "generate", "--server", URL, "--server-context", "2048"]
    cmd += ["--task", task, "--jsonl", "--max-new-tokens", "32", *args]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["event"] == "done" and last["candidates"][0]["text"].strip()


def test_window_drafts_rewrites_with_every_preset_infills_and_cycles_alternatives(qtbot, tmp_path):
    from PySide6.QtCore import Qt

    from app.config.settings import Settings
    from engine.fake import FakeEngine
    from tests.helpers.gui import build_window, ghost_text, set_text

    settings = Settings(tmp_path / "config")
    settings.set("server.context", sc.CONTEXT)
    window = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    window.server_mode.timeouts = Timeouts(read=300)
    window.server_mode.connect_server(URL, sc.MODEL, TEST_KEY)
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text().endswith(f"· {sc.MODEL}"), timeout=60_000)
    assert not window.editing.dial.isEnabled()

    def settle():
        qtbot.waitUntil(
            lambda: window.assistant.suggestion is not None and not window.assistant.suggestion.running,
            timeout=300_000,
        )

    text = sc.DOC_BEFORE + sc.SELECTION + sc.DOC_AFTER
    start, end = len(sc.DOC_BEFORE), len(sc.DOC_BEFORE) + len(sc.SELECTION)
    set_text(window, text)
    window.actionDraft.trigger()
    settle()
    if window.assistant.alternatives[1] > 1:
        window.actionNextAlternative.trigger()
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText().startswith(text) and window.editor.toPlainText() != text
    for preset in sorted(REWRITE_PRESETS):
        set_text(window, text, select=(start, end))
        window.findChild(type(window.actionRewrite), f"actionPreset_{preset}").trigger()
        settle()
        shown = ghost_text(window)
        assert shown.strip(), preset  # a rewrite came back (a small model may return the text as it was)
        qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
        now = window.editor.toPlainText()
        assert now.startswith(sc.DOC_BEFORE) and now.endswith(sc.DOC_AFTER), preset
        assert " ".join(shown.split()) in " ".join(now.split()), preset
    set_text(window, sc.DOC_BEFORE + sc.DOC_AFTER, cursor=len(sc.DOC_BEFORE))
    window.actionInfill.trigger()
    settle()
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    now = window.editor.toPlainText()
    assert now.startswith(sc.DOC_BEFORE) and now.endswith(sc.DOC_AFTER.strip())
    assert len(now) > len(sc.DOC_BEFORE + sc.DOC_AFTER)
    from app.platform import privacy

    privacy.forbid_servers()
    window.host.shutdown()


def test_zz_server_stopped_mid_answer(engine):
    """Last: it ends the server."""
    state = Path(os.environ.get("LETTERPRESS_LLAMACPP_STATE", "/tmp/letterpress-llamacpp-8766"))
    pid = int((state / "pid").read_text())
    caught: list[BaseException] = []
    events = []

    def ask() -> None:
        try:
            engine.run(DraftRequest(before=sc.BEFORE, max_new_tokens=400), on_step=events.append)
        except BaseException as exc:  # noqa: BLE001
            caught.append(exc)

    worker = threading.Thread(target=ask)
    worker.start()
    deadline = time.monotonic() + 60
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(pid, signal.SIGKILL)
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert caught and isinstance(caught[0], ServerError), caught
    assert "stopped answering" in caught[0].message or "cannot reach" in caught[0].message
