"""Model ▸ Use a server…: the presets name the servers writers run, Test lists a text model's models and says
what its tier can do, and the dialog shows its whole sentence (issue 34: an error was cut off at "…Check the"
until the dialog was resized)."""

from __future__ import annotations

import socket

import pytest

from app.ui.server_dialog import ANOTHER_SERVER, PRESETS, ServerDialog
from engine.remote import text_features
from tests.helpers.openai_stub import Behaviour, OpenAIStub


@pytest.fixture(autouse=True)
def _fresh():
    text_features.forget()
    yield
    text_features.forget()


def test_the_presets_fill_their_default_addresses_and_a_typed_address_finds_its_preset(qtbot):
    dialog = ServerDialog()
    qtbot.addWidget(dialog)
    names = [dialog.preset.itemText(i) for i in range(dialog.preset.count())]
    assert names == [
        "Ollama on this computer",
        "LM Studio on this computer",
        "llama.cpp server on this computer",
        "Another server…",
    ]
    assert dialog.url.text() == "http://127.0.0.1:11434/v1"  # a new writer starts with Ollama's address
    dialog.preset.setCurrentIndex(1)
    assert dialog.url.text() == "http://127.0.0.1:1234/v1"
    dialog.url.setText("http://127.0.0.1:8080")
    assert dialog.preset.currentText() == "llama.cpp server on this computer"
    dialog.url.setText("https://gpu-box:8000/v1")
    assert dialog.preset.currentText() == ANOTHER_SERVER
    assert dict(PRESETS)["LM Studio on this computer"].endswith(":1234/v1")


def test_test_lists_the_models_of_a_text_server_and_says_what_works(qtbot):
    with OpenAIStub(Behaviour(models=["smollm2", "gemma3"], context=None)) as stub:
        dialog = ServerDialog(stub.url)
        qtbot.addWidget(dialog)
        dialog.test.click()
        qtbot.waitUntil(lambda: dialog.resultLabel.text().startswith("Connected"), timeout=20_000)
        text = dialog.resultLabel.text()
        assert "smollm2" in text and "ordinary text model" in text and "need DiffusionGemma" in text
        assert "context length not stated" in text
        assert [dialog.model.itemText(i) for i in range(dialog.model.count())] == ["smollm2", "gemma3"]
        dialog.model.setCurrentText("gemma3")
        dialog.context.setValue(8192)
        choice = dialog.choice()
        assert (choice.model, choice.context_length) == ("gemma3", 8192)


def test_the_dialog_grows_to_show_a_whole_error_sentence(qtbot):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # nothing listens: connection refused
    dialog = ServerDialog(url)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.test.click()
    qtbot.waitUntil(lambda: "cannot reach a server" in dialog.resultLabel.text(), timeout=20_000)
    label = dialog.resultLabel
    assert "Check the address" in label.text()
    layout = dialog.layout()
    # the whole dialog is as tall as its content needs at its width: nothing squeezed, no line cut off
    qtbot.waitUntil(lambda: dialog.height() >= layout.totalHeightForWidth(dialog.width()), timeout=5_000)
    assert label.heightForWidth(label.width()) <= label.height()
