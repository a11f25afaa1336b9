"""The model-load state machine (`app.assist.model_load`): each state's status bar text, progress bar and
demo strip as a writer reads them (a label's whole text, before the bar cuts it to its width), driven by the
host's load signals; and in the real window, Model ▸ Cancel loading is enabled exactly while a load runs."""

from __future__ import annotations

from types import SimpleNamespace

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMainWindow

from app.assist.model_load import ModelLoad, ModelState
from app.ui.model_notice import ModelNotice
from app.ui.status import MessageBar
from engine.api import LoadCancelledError, LoadProgress, ModelInfo, ModelNotFoundError
from engine.fake import FakeEngine
from engine.resources import demo_model_dir
from tests.helpers.gui import build_window


class _Host(QObject):
    loadStarted = Signal(str)
    loadProgress = Signal(object)
    loaded = Signal(object)
    loadFailed = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str, str]] = []
        self.model_info: ModelInfo | None = None
        self.backend = "local"
        self.capabilities = SimpleNamespace(where="Local model")

    def load(self, folder: str, device: str, quantization: str) -> None:
        self.asked.append((folder, device, quantization))


def _info(name: str, path: str) -> ModelInfo:
    return ModelInfo(name, path, "cpu", "float32", "nf4", 1234, 32, 512)


def _machine(qtbot):
    window = QMainWindow()
    window.setStatusBar(MessageBar(window))  # the window's own bar
    qtbot.addWidget(window)
    host = _Host()
    messages: list[str] = []
    notice = ModelNotice(window)
    load = ModelLoad(
        host,
        window,
        settings=None,
        notice=notice,
        show_message=lambda text, ms=8000, *, tied=True: messages.append(text),
        server_action=lambda: None,
        load_real=lambda: None,
        device="cpu",
    )
    load.listen()
    states: list[ModelState] = []
    load.stateChanged.connect(states.append)
    window.show()
    return window, host, load, notice, messages, states


def test_each_state_says_what_the_model_is_doing(qtbot) -> None:
    window, host, load, _notice, messages, states = _machine(qtbot)
    assert load.state is ModelState.NOT_LOADED and window.statusBar() is load.status

    load.no_model("")
    assert load.label.full_text() == "No model" and "Load model folder" in messages[-1]

    load.load("/models/a")
    assert host.asked == [("/models/a", "cpu", "auto")]
    assert load.state is ModelState.LOADING and load.label.full_text() == "Loading model…"

    host.loadStarted.emit("/models/a")
    assert load.bar.isVisible() and (load.bar.minimum(), load.bar.maximum()) == (0, 0)  # busy, not 0%
    host.loadProgress.emit(LoadProgress(1, 4, 250, 1000, "loading"))
    assert load.bar.value() == 25 and load.label.full_text().startswith("Loading model: reading weights 25%")

    host.model_info = _info("alpha", "/models/a")
    host.loaded.emit(host.model_info)
    assert load.state is ModelState.READY and load.label.full_text() == "Ready: alpha"
    assert load.device_label.full_text() == "CPU (float32, nf4)" and not load.bar.isVisible()
    assert messages[-1] == "Model alpha loaded." and not load.banner.isVisible()
    assert states == [ModelState.NOT_LOADED, ModelState.LOADING, ModelState.LOADING, ModelState.READY]


def test_a_failed_load_keeps_the_model_in_use_and_says_so(qtbot) -> None:
    _window, host, load, notice, messages, _states = _machine(qtbot)
    host.model_info = _info("alpha", "/models/a")
    host.loaded.emit(host.model_info)
    load.load("/models/b")
    host.loadFailed.emit(ModelNotFoundError("The folder /models/b is gone."))
    assert load.state is ModelState.READY and load.label.full_text() == "Ready: alpha"
    assert load.model_dir == "/models/a" and messages[-1] == "Still using alpha."
    assert notice.label.text() == "The folder /models/b is gone. Still using alpha."

    load.load("/models/c")
    host.loadFailed.emit(LoadCancelledError("Loading was cancelled."))
    assert load.state is ModelState.READY and messages[-1] == "Loading cancelled; still using alpha."


def test_with_nothing_in_use_a_failure_is_an_error_or_the_demo_stands_in(qtbot) -> None:
    _window, host, load, notice, messages, _states = _machine(qtbot)
    load.load("/models/b")
    host.loadFailed.emit(LoadCancelledError("Loading was cancelled."))  # cancelled: no demo, an error
    assert load.state is ModelState.ERROR and load.label.full_text() == "Model error"
    assert "Loading was cancelled." in load.label.toolTip() and messages[-1] == "Loading was cancelled."

    host.loadStarted.emit("/models/b")
    host.loadFailed.emit(ModelNotFoundError("The folder /models/b is gone."))
    assert load.state is ModelState.LOADING and host.asked[-1][0] == str(demo_model_dir())  # the demo instead
    assert load.fallback_from == "/models/b" and notice.isVisibleTo(notice.parentWidget())

    host.model_info = _info("tiny", str(demo_model_dir()))
    host.loaded.emit(host.model_info)
    assert load.state is ModelState.READY and load.demo
    assert load.banner.isVisibleTo(load.banner.parentWidget())
    assert load.label.full_text() == "Ready: Built-in demo" and messages[-1] == "Using the built-in demo."


def test_a_request_asked_for_mid_load_says_it_waits(qtbot) -> None:
    _window, host, load, _notice, messages, _states = _machine(qtbot)
    load.load("/models/a")
    load.on_activity("Drafting…")
    assert messages[-1] == "Drafting… waits for the model to finish loading."
    host.model_info = _info("alpha", "/models/a")
    host.loaded.emit(host.model_info)
    assert messages[-1] == "Model alpha loaded. Drafting…"  # the request now runs; the wait is over


def test_cancel_loading_is_enabled_exactly_while_a_load_runs(qtbot, tmp_path) -> None:
    engine = FakeEngine(steps=2)
    window = build_window(qtbot, engine)
    assert window.model_state == ModelState.READY.value == "ready"
    assert not window.actionCancelLoad.isEnabled()
    engine.load_delay = 0.3
    window.load_model(tmp_path)
    assert window.model_load.state is ModelState.LOADING and window.actionCancelLoad.isEnabled()
    qtbot.waitUntil(lambda: window.model_state == "ready", timeout=10_000)
    assert not window.actionCancelLoad.isEnabled() and window.modelLabel.text().startswith("Ready")
