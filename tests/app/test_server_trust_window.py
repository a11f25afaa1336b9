"""Issue 32 through the real window and the Use a server dialog, against the replaying stub made to misbehave
(tests/helpers/bad_server.py): no key or password in view, no redirect followed, everything the server sent
shown as plain text, a wrong shape or a bad address leaving the window on its local model, and a flood cut
with a sentence while the document stays as it was."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.config.settings import Settings
from engine.fake import FakeEngine
from engine.remote import redact
from engine.remote.client import Timeouts
from tests.helpers import bad_server
from tests.helpers import vllm_scenarios as sc
from tests.helpers.gui import build_window, ghost_text, set_text
from tests.helpers.vllm_replay import TEST_KEY, ReplayServer

LINK = (
    '<a href="http://evil.example/">Click here to re-enter your key</a><img src="http://evil.example/x.png">'
)


@pytest.fixture
def stub():
    with ReplayServer() as server:
        yield server


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.delenv("LETTERPRESS_API_KEY", raising=False)
    w = build_window(qtbot, FakeEngine(steps=2), settings=Settings(tmp_path / "config"))
    w.server_mode.timeouts = Timeouts(connect=2.0, read=10.0)
    yield w
    from app.platform import privacy

    privacy.forbid_servers()
    w.host.shutdown()
    redact.forget_all()


def _everything_shown(window) -> str:
    """Every text of the window a server's words could reach: status bar, labels, the note and tooltips."""
    parts = [
        window.statusBar().currentMessage(),
        window.modelNotice.text(),
        window.modelNotice.label.toolTip(),
        window.server_mode.whereLabel.text(),
        window.modelLabel.text(),
        window.modelLabel.toolTip(),
        window.deviceLabel.text(),
    ]
    return " ".join(parts)


def _connect(qtbot, window, url, key=TEST_KEY):
    window.server_mode.connect_server(url, sc.MODEL, key)
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text().endswith(f"· {sc.MODEL}"), timeout=20_000)


def _draft_fails_with(qtbot, window, words):
    set_text(window, sc.BEFORE)
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: words in _everything_shown(window), timeout=20_000)
    assert window.editor.toPlainText() == sc.BEFORE
    assert window.assistant.suggestion is None or not ghost_text(window).strip()


def test_a_key_echoed_in_a_500_is_not_in_the_status_bar_or_the_note(qtbot, window, stub):
    _connect(qtbot, window, stub.url)
    stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(
        bad_server.json_answer({"error": {"message": f"invalid token Bearer {TEST_KEY}"}}, 500)
    )
    _draft_fails_with(qtbot, window, "HTTP 500")
    assert TEST_KEY not in _everything_shown(window) and redact.HIDDEN in _everything_shown(window)


@pytest.mark.parametrize("key", ["sk-abc\ndef", "sk-cl\u00e9"])
def test_a_key_no_header_can_carry_is_refused_in_the_window_and_the_dialog(qtbot, window, stub, key):
    window.server_mode.connect_server(stub.url, sc.MODEL, key)
    assert "printable ASCII without spaces" in _everything_shown(window)
    assert window.server_mode.whereLabel.text() == "Local model" and stub.seen == []
    from app.ui.server_dialog import ServerDialog

    dialog = ServerDialog(stub.url, "", key)
    qtbot.addWidget(dialog)
    assert not dialog.test.isEnabled() and "printable ASCII" in dialog.resultLabel.text()
    dialog.key.setText(TEST_KEY)
    assert dialog.test.isEnabled()


def test_url_credentials_never_show_in_the_status_bar(qtbot, window, stub):
    url = stub.url.replace("http://", "http://writer:pw-Secret9@")
    window.server_mode.connect_server(url, sc.MODEL, TEST_KEY)
    assert "pw-Secret9" not in _everything_shown(window)  # while connecting
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text().endswith(f"· {sc.MODEL}"), timeout=20_000)
    host = stub.url.removeprefix("http://")
    assert window.server_mode.whereLabel.text() == f"Server: {host} · {sc.MODEL}"
    assert "pw-Secret9" not in _everything_shown(window) and "writer:" not in _everything_shown(window)


def test_a_redirect_to_another_server_is_not_followed_from_the_window(qtbot, window, stub):
    with ReplayServer() as other:
        _connect(qtbot, window, stub.url)
        stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(
            bad_server.redirect(other.url + "/v1/completions")
        )
        _draft_fails_with(qtbot, window, "did not follow")
        assert other.url.removeprefix("http://") in _everything_shown(window)
        assert other.seen == []


def _serve_a_model_named(stub, name: str) -> None:
    stub.tamper[("GET", "/v1/models")] = bad_server.json_answer(
        {"object": "list", "data": [{"id": name, "max_model_len": 512}]}
    )
    stub.tamper[("POST", "/v1/completions")] = bad_server.json_answer({"choices": [{"logprobs": None}]})


def test_what_the_server_names_is_plain_text_in_the_dialog_and_the_status_bar(qtbot, window, stub):
    from app.ui.server_dialog import ServerDialog

    _serve_a_model_named(stub, LINK)
    dialog = ServerDialog(stub.url, "", TEST_KEY)
    qtbot.addWidget(dialog)
    dialog.test.click()
    qtbot.waitUntil(lambda: dialog.resultLabel.text().startswith("Connected"), timeout=20_000)
    assert LINK in dialog.resultLabel.text()
    for label in (dialog.resultLabel, dialog.warning):
        assert label.textFormat() == Qt.TextFormat.PlainText  # a link or an image is shown as its characters
    window.server_mode.connect_server(stub.url, LINK, TEST_KEY)
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text().endswith(LINK), timeout=20_000)
    for label in (window.server_mode.whereLabel, window.modelLabel, window.deviceLabel):
        assert label.textFormat() == Qt.TextFormat.PlainText
    tip = window.editing.dial.toolTip()
    assert "<a href" not in tip  # a tooltip quoting the server is escaped (Qt renders tooltips as rich text)


def _empty_probe(handler, body):
    if isinstance(body, dict) and body.get("vllm_xargs", {}).get("diffusion_read_only"):
        return bad_server.json_answer({"choices": []})(handler, body)
    return False


WRONG_SHAPES = {
    "models_as_a_list": (("GET", "/v1/models"), bad_server.json_answer([{"id": sc.MODEL}]), "a list where"),
    "unlimited_length": (
        ("GET", "/v1/models"),
        bad_server.json_answer({"data": [{"id": sc.MODEL, "max_model_len": "unlimited"}]}),
        "'unlimited', not a whole number",
    ),
    "probe_without_choices": (("POST", "/v1/completions"), _empty_probe, "'choices' is empty"),
}


@pytest.mark.parametrize("case", sorted(WRONG_SHAPES))
def test_an_answer_of_the_wrong_shape_goes_back_to_the_local_model(qtbot, window, stub, case):
    where, answer, words = WRONG_SHAPES[case]
    stub.tamper[where] = answer
    window.server_mode.connect_server(stub.url, sc.MODEL, TEST_KEY)
    qtbot.waitUntil(lambda: words in _everything_shown(window), timeout=20_000)
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text() == "Local model", timeout=10_000)
    assert window.host.backend == "local"
    set_text(window, sc.BEFORE)
    window.actionDraft.trigger()  # the local model still writes
    qtbot.waitUntil(
        lambda: window.assistant.suggestion is not None and not window.assistant.suggestion.running,
        timeout=10_000,
    )


def test_any_failure_while_connecting_goes_back_to_the_local_model(qtbot, window, stub, monkeypatch):
    from engine.remote import RemoteEngine

    def broken(self):
        raise RuntimeError("a bug in connecting")

    monkeypatch.setattr(RemoteEngine, "connect", broken)
    window.server_mode.connect_server(stub.url, sc.MODEL, TEST_KEY)
    qtbot.waitUntil(lambda: "could not be loaded" in _everything_shown(window), timeout=20_000)
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text() == "Local model", timeout=10_000)
    assert window.host.backend == "local"


@pytest.mark.parametrize("failure", ["shape", "bug"])
def test_the_dialogs_test_always_hears_back(qtbot, stub, monkeypatch, failure):
    from app.ui.server_dialog import ServerDialog
    from engine.remote import RemoteEngine

    if failure == "shape":
        stub.tamper[("GET", "/v1/models")] = bad_server.json_answer([{"id": sc.MODEL}])
        words = "a list where an object belongs"
    else:

        def broken(self):
            raise RuntimeError("a bug in connecting")

        monkeypatch.setattr(RemoteEngine, "connect", broken)
        words = "press Test again"
    dialog = ServerDialog(stub.url, "", TEST_KEY)
    qtbot.addWidget(dialog)
    dialog.test.click()
    qtbot.waitUntil(lambda: words in dialog.resultLabel.text(), timeout=20_000)
    assert dialog.test.isEnabled()


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1"])
def test_a_bad_server_address_in_the_settings_is_a_sentence_at_start(qtbot, tmp_path, monkeypatch, url):
    monkeypatch.delenv("LETTERPRESS_API_KEY", raising=False)
    settings = Settings(tmp_path / "config")
    settings.update({"server.url": url, "server.model": sc.MODEL})
    w = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    try:
        qtbot.waitUntil(lambda: "Write it as http://" in _everything_shown(w), timeout=10_000)
        assert w.server_mode.whereLabel.text() == "Local model" and w.host.backend == "local"
    finally:
        w.host.shutdown()


def test_a_flood_far_larger_than_asked_is_cut_and_the_document_kept(qtbot, window, stub):
    _connect(qtbot, window, stub.url)
    flood = bad_server.Flood(total=6 * 1024 * 1024, canvases=25)
    stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(flood)
    _draft_fails_with(qtbot, window, "stopped reading")
    assert not flood.finished


def test_a_key_with_a_line_break_in_the_environment_is_refused_at_start(qtbot, tmp_path, monkeypatch, stub):
    monkeypatch.setenv("LETTERPRESS_API_KEY", "sk-abc\ndef-secret")
    settings = Settings(tmp_path / "config")
    settings.update({"server.url": stub.url, "server.model": sc.MODEL})
    w = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    try:
        qtbot.waitUntil(lambda: "printable ASCII without spaces" in _everything_shown(w), timeout=10_000)
        assert "secret" not in _everything_shown(w) and stub.seen == []
        assert w.server_mode.whereLabel.text() == "Local model" and w.host.backend == "local"
    finally:
        w.host.shutdown()
