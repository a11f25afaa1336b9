"""The model's load state, out of the main window: which model is asked for, where its load is (`ModelState`),
and what the status bar, the demo strip and the note above the page say about it.

States and the events that move between them (each event is one method or host signal below):

```
 NOT_LOADED ──load()/loadStarted──▶ LOADING ──loaded──▶ READY (the demo too: `demo` says which)
      │                               │  ▲  └─loadFailed, a model still in use──▶ READY ("Still using …")
      │                               │  └──loadFailed, nothing in use, the demo can stand in: LOADING it
      └──────────loadFailed───────────┴─────loadFailed, nothing in use──▶ ERROR ──load()──▶ LOADING
 READY ──load()/loadStarted──▶ LOADING (a failed load never takes away the model in use)
```

A request asked for while a model loads waits for it (loads and requests share the engine thread): the
running request's line says so, and says where it waits while a server is used (`on_activity`). The server's
own lines ("Server: host · model") are `assist.server_mode`'s; its labels are set before ours on every load.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QMainWindow, QProgressBar

from app.config.model_choice import folder_for
from app.config.settings import Settings
from app.ui.demo_notice import DemoBanner, demo_wording, is_demo_model
from app.ui.model_notice import ModelNotice, fallback_sentence
from app.ui.status import ElidedLabel
from app.ui.widgets import named
from engine.api import EngineError, LoadProgress, ModelInfo

STATUS_LABEL_MAX_PX = 260  # the widest the model and device labels of the status bar grow


class ModelState(enum.Enum):
    """Where the model is; the value is the word the window's `model_state` has always given."""

    NOT_LOADED = "not loaded"
    LOADING = "loading"
    READY = "ready"
    ERROR = "error"


class ModelLoad(QObject):
    """The load state machine: `state` moves only by `load`, `start` and the host's load signals (`listen`);
    every move is announced by `stateChanged(ModelState)`, and the status bar's model label and progress bar
    follow it."""

    stateChanged = Signal(object)  # ModelState
    demoChanged = Signal(bool)  # a load finished: is the built-in demo now the model in use

    def __init__(
        self,
        host: Any,
        window: QMainWindow,
        *,
        settings: Settings | None,
        notice: ModelNotice,
        show_message: Callable[..., None],
        server_action: Callable[[], QAction | None],
        load_real: Callable[[], None],
        model_dir: str | Path | None = None,
        device: str = "auto",
        quantization: str = "auto",
    ) -> None:
        """Puts the model's label (`modelStatus`), progress bar (`loadProgress`) and device label
        (`deviceStatus`) at the end of `window`'s status bar, and makes the demo strip (`banner`, the window
        places it above the page); `load_real()` answers the strip's "Load a real model"."""
        super().__init__(window)
        self.host = host
        self.settings = settings
        self.status = window.statusBar()
        # A long model name or device note ends at a word ("…", all of it in the tooltip) instead of pushing
        # the message away until it is cut inside its first word.
        self.label = named(ElidedLabel(window, max_width=STATUS_LABEL_MAX_PX), "modelStatus")
        self.bar = named(QProgressBar(window), "loadProgress")
        self.bar.setRange(0, 100)
        self.bar.setMaximumWidth(140)
        self.bar.setTextVisible(True)
        self.bar.hide()
        self.device_label = named(ElidedLabel(window, max_width=STATUS_LABEL_MAX_PX), "deviceStatus")
        for widget in (self.label, self.bar, self.device_label):
            self.status.addPermanentWidget(widget)
        # Shown while the built-in demo model is the one loaded: a strip above the page, not in the status
        # bar, where its badge and two buttons took ~480 px and pushed the window past its default 1000 px.
        self.banner = DemoBanner(window)
        self.banner.loadRealModel.connect(load_real)
        self.banner.useServer.connect(self._on_demo_use_server)
        strip = self.banner.layout()
        if isinstance(strip, QHBoxLayout):
            strip.setContentsMargins(10, 4, 10, 4)
            strip.addStretch(1)
        self.notice = notice
        self._show_message = show_message
        self._server_action = server_action
        self.model_dir: str | None = str(model_dir) if model_dir else None
        self.device = device
        self.quantization = quantization
        self.state = ModelState.NOT_LOADED
        self.demo = False  # the built-in demo is the model in use
        self.loading_folder = ""  # the folder (or server URL) the load now running was asked for
        self.fallback_from = ""  # the model that could not be used when the demo was loaded instead
        self._activity, self._activity_shown, self._activity_running = "", "", False

    def listen(self) -> None:
        """Follow the host's load signals (after the server mode's, which this window connected first)."""
        self.host.loadStarted.connect(self._on_load_started)
        self.host.loadProgress.connect(self._on_load_progress)
        self.host.loaded.connect(self._on_loaded)
        self.host.loadFailed.connect(self._on_load_failed)

    # -- transitions -----------------------------------------------------------------------------------------

    def _enter(self, state: ModelState, label: str, tip: str = "") -> None:
        self.state = state
        self.label.setText(label)
        self.label.setToolTip(tip)
        if state is not ModelState.LOADING:
            self.bar.hide()
        if tip and state in (ModelState.ERROR, ModelState.NOT_LOADED):
            self._show_message(tip, 0)
        self.stateChanged.emit(state)

    def no_model(self, reason: str = "") -> None:
        """The start without a model: NOT_LOADED, and why."""
        self._enter(
            ModelState.NOT_LOADED,
            "No model",
            reason or "No model is configured. Choose a model folder with Model ▸ Load model folder…",
        )

    def load(self, model_dir: str | Path, device: str | None = None, quantization: str | None = None) -> None:
        """Load `model_dir` (on `device` with `quantization` when given: they are kept for later loads)."""
        if device is not None:
            self.device = device
        if quantization is not None:
            self.quantization = quantization
        self.model_dir = str(model_dir)
        self.host.load(self.model_dir, self.device, self.quantization)
        self._enter(ModelState.LOADING, "Loading model…", f"Loading {self.model_dir}")

    @Slot(str)
    def _on_load_started(self, folder: str) -> None:
        self.loading_folder = folder
        self.bar.setRange(0, 0)  # busy until the first measurable phase
        self.bar.setValue(0)
        self.bar.show()
        self._enter(ModelState.LOADING, "Loading model…", f"Loading {folder}")

    @Slot(object)
    def _on_load_progress(self, progress: LoadProgress) -> None:
        from app.ui.load_status import describe, percent

        share = percent(progress)
        self.bar.show()
        if share is None:  # a phase without a measurable fraction: a busy bar and "Preparing…", not 0%
            self.bar.setRange(0, 0)
        else:
            self.bar.setRange(0, 100)
            self.bar.setValue(share)
        self.label.setText(describe(progress))

    @Slot(object)
    def _on_loaded(self, info: ModelInfo) -> None:
        demo = self._show_demo_banner(info.path)
        self.demo = demo
        self.demoChanged.emit(demo)  # the panel's figures and the first-run hint name the demo while it runs
        if not (demo and self.fallback_from):  # a model the writer chose: the note about the last one goes
            self.fallback_from = ""
            self.notice.clear("model")
        name = demo_wording().name if demo else info.name
        self._enter(ModelState.READY, f"Ready: {name}", f"{info.path} ({info.parameters:,} parameters)")
        quant = "" if info.quantization in ("", "none") else f", {info.quantization}"
        self.device_label.setText(f"{info.device.upper()} ({info.dtype}{quant})")
        if demo and self.fallback_from:  # the note above the page says why; the status bar line fits
            self._resume_activity("Using the built-in demo.")
            return
        self._resume_activity(
            info.notice or (demo_wording().summary if demo else f"Model {info.name} loaded.")
        )

    @Slot(object)
    def _on_load_failed(self, error: EngineError) -> None:
        message = getattr(error, "message", str(error))
        kind = getattr(error, "kind", "engine_error")
        kept = getattr(self.host, "model_info", None)  # a failed load never takes away the model in use
        if kept is not None:
            self.model_dir = kept.path
            demo = self._show_demo_banner(kept.path)
            name = demo_wording().name if demo else kept.name
            self._enter(ModelState.READY, f"Ready: {name}", f"{kept.path} ({kept.parameters:,} parameters)")
            if kind == "load_cancelled":
                self._resume_activity(f"Loading cancelled; still using {name}.")
                return
            self.notice.show_text(f"{message} Still using {name}.")  # whole, above the page
            self._resume_activity(f"Still using {name}.")
            return
        if self._fall_back_to_demo(kind, message):
            return
        self._enter(ModelState.ERROR, "Model error", message)
        self.notice.show_text(message)

    def _fall_back_to_demo(self, kind: str, message: str) -> bool:
        """No model is in use and the one asked for cannot be used (moved, deleted, no longer a model, too
        big, a server out of reach): load the built-in demo instead, and say so in one sentence above the
        page."""
        from engine.resources import demo_model_dir

        failed = self.loading_folder or self.model_dir or ""
        demo = demo_model_dir()
        if kind == "load_cancelled" or not failed or is_demo_model(failed) or not demo.is_dir():
            return False
        saved = ""
        if self.settings is not None:
            with contextlib.suppress(KeyError):
                typed = self.settings.typed
                saved = typed.server.url if failed.startswith("http") else ""
                saved = saved or folder_for(typed.model.folder)
        self.fallback_from = failed
        self.notice.show_text(fallback_sentence(kind, failed, saved=failed == saved), message)
        self.load(demo)
        return True

    def _show_demo_banner(self, path: str | None) -> bool:
        """The demo banner is visible exactly while the built-in demo model is the loaded one."""
        demo = is_demo_model(path)
        self.banner.set_server_available(self._server_action() is not None)
        self.banner.setVisible(demo)
        return demo

    def _on_demo_use_server(self) -> None:
        action = self._server_action()
        if action is not None:
            action.trigger()

    # -- the running request's line --------------------------------------------------------------------------

    @Slot(str)
    def on_activity(self, text: str) -> None:
        """What the assistant runs stays in the status bar while it runs ("Rewriting: Make it shorter…")."""
        if text:
            self._activity = text
            self._activity_running = True
            self._show_message(self._activity_line(), 0)
        else:
            self._activity_running = False
            if self.status.currentMessage() in (self._activity, self._activity_shown):
                self.status.clearMessage()

    def _activity_line(self) -> str:
        """The running request's line; while a model loads it says the request waits for it (loads and
        requests share the engine thread, so a request asked for mid-load starts when the load is done)."""
        text = self._activity
        if self.state is ModelState.LOADING:
            text = f"{text.rstrip('…')}… waits for the model to finish loading."
        elif getattr(self.host, "backend", "local") == "server":  # says where it waits, from the first moment
            where = self.host.capabilities.where.removeprefix("Server: ")
            text = f"{text.rstrip('…')}… waiting on the server ({where})."
        self._activity_shown = text
        return text

    def _resume_activity(self, loaded: str) -> None:
        """After a load ends: its message, and the request still running (it now runs) stays in view."""
        if self._activity_running:
            self._activity_shown = f"{loaded} {self._activity_line()}"
            self._show_message(self._activity_shown, 0)
        else:
            self._show_message(loaded, tied=False)  # about the model, not the document
