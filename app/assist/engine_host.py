"""The bridge to the engine: one worker thread owns the engine and the model; the UI thread only sends
requests.

Requests go in through a queue as immutable objects. Step events, results, errors and load progress come back
as Qt signals that are always emitted on the UI thread (the worker emits private signals that are queued to
this object's thread, which re-emits them). Latest request wins: submitting a request sets the cancel event of
the one that is running, and queued older requests are skipped. Step events are coalesced: if the UI is busy,
only the newest step of a request is delivered, and it is always delivered before that request's result.

The real engine is created lazily inside the worker thread, so importing this module never imports torch.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal, Slot

from engine.api import (
    LOCAL_CAPABILITIES,
    Capabilities,
    Device,
    Engine,
    EngineError,
    GenerationError,
    LoadCancelledError,
    LoadProgress,
    ModelInfo,
    Quantization,
    Request,
    Result,
    StepEvent,
)

log = logging.getLogger(__name__)


def scrub(text: str) -> str:
    """`text` without the server key or credentials (`engine.remote.redact`, imported only when needed)."""
    from engine.remote.redact import scrub as hide

    return hide(text)


EngineFactory = Callable[[], Engine]


def default_engine_factory() -> Engine:
    """The real engine. Imported here, inside the engine thread, so importing the app never imports torch."""
    from engine.threads import preload_torch_libraries, prepare_openmp, reserve_ui_core

    prepare_openmp()  # before torch loads OpenMP (a no-op when `python -m app` already did it)
    reserve_ui_core()  # the UI thread shares these cores: compute on the others
    preload_torch_libraries()  # the big dlopen without the GIL: the window keeps painting meanwhile
    from engine.session import Session

    return Session()


@dataclass(frozen=True)
class _Load:
    model_dir: str
    device: Device
    quantization: Quantization
    cancel: threading.Event


@dataclass(frozen=True)
class _Switch:
    """Change the backend behind the interface: "local" (the factory's engine) or "server" (`factory`)."""

    kind: str
    factory: EngineFactory | None
    model_dir: str | None = None  # local: loaded when no local model is loaded any more
    device: Device = "auto"
    quantization: Quantization = "auto"


@dataclass(frozen=True)
class _Run:
    request: Request
    cancel: threading.Event


_STOP = object()


def _no_collector_pauses() -> contextlib.AbstractContextManager[None]:
    """`engine.threads.no_collector_pauses` (torch-free): the load's million objects never trigger a full
    GC."""
    from engine.threads import no_collector_pauses

    return no_collector_pauses()


class EngineHost(QObject):
    """Owns the engine thread. All public signals arrive on the thread that created the host (the UI
    thread)."""

    stepped = Signal(object)  # StepEvent
    finished = Signal(object)  # Result
    failed = Signal(int, object)  # request id, EngineError
    loadStarted = Signal(str)  # model folder
    loadProgress = Signal(object)  # LoadProgress
    loaded = Signal(object)  # ModelInfo
    loadFailed = Signal(object)  # EngineError

    _stepReady = Signal()
    _finishedX = Signal(object)
    _failedX = Signal(int, object)
    _loadStartedX = Signal(str)
    _loadProgressX = Signal(object)
    _loadedX = Signal(object)
    _loadFailedX = Signal(object)

    def __init__(self, factory: EngineFactory | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._factory = factory or default_engine_factory
        self._queue: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()
        self._latest_step: StepEvent | None = None
        self._step_pending = False
        self._run_cancel: threading.Event | None = None
        self._load_cancel: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self.engine: Engine | None = None
        self.backend = "local"  # "local" or "server": which engine requests go to (set on the engine thread)
        self._wanted = "local"  # the same, as the UI thread last asked for it
        self._parked: dict[str, Engine] = {}  # the other backend's engine (a loaded local model stays loaded)
        self.model_info: ModelInfo | None = None
        self.running_request: int | None = None
        q = Qt.ConnectionType.QueuedConnection
        self._stepReady.connect(self._on_step_ready, q)
        self._finishedX.connect(self.finished, q)
        self._failedX.connect(self.failed, q)
        self._loadStartedX.connect(self.loadStarted, q)
        self._loadProgressX.connect(self.loadProgress, q)
        self._loadedX.connect(self._on_loaded, q)
        self._loadFailedX.connect(self.loadFailed, q)

    # -- UI-thread API ---------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="letterpress-engine", daemon=True)
            self._thread.start()

    def load(
        self, model_dir: str | Path, device: Device = "auto", quantization: Quantization = "auto"
    ) -> None:
        """Load (or replace) the model in the engine thread; progress and the outcome come back as signals.

        The model in use stays loaded (and `model_info` stays set) until the new one has loaded completely: a
        folder that fails its check or its load never takes away a working model."""
        if self._wanted == "server":  # a model folder while on a server: back to the local engine first
            self._wanted = "local"
            self._queue.put(_Switch("local", None))
        self._queue_load(model_dir, device, quantization)

    def _queue_load(
        self, model_dir: str | Path, device: Device = "auto", quantization: Quantization = "auto"
    ) -> None:
        self.cancel()
        if self._load_cancel is not None:
            self._load_cancel.set()
        self._load_cancel = threading.Event()
        self._queue.put(_Load(str(model_dir), device, quantization, self._load_cancel))

    def use_server(self, factory: EngineFactory, url: str) -> None:
        """Send requests to a server from now on: `factory` makes its engine (`engine.remote.RemoteEngine`),
        which connects and probes it as its load (`loaded` / `loadFailed` as for a model). The local model, if
        one is loaded, stays loaded for `use_local`."""
        self.cancel()
        self._wanted = "server"
        self._queue.put(_Switch("server", factory))
        self._queue_load(url)

    def use_local(
        self, model_dir: str | Path | None, device: Device = "auto", quantization: Quantization = "auto"
    ) -> None:
        """Back to the local model: the one still loaded is used at once (`loaded` is emitted again), else
        `model_dir` is loaded."""
        self.cancel()
        self._wanted = "local"
        self._queue.put(_Switch("local", None, str(model_dir) if model_dir else None, device, quantization))

    @property
    def wanted_backend(self) -> str:
        """ "local" or "server": where the UI last asked requests to go (the engine thread follows in
        order)."""
        return self._wanted

    @property
    def capabilities(self) -> Capabilities:
        """What the engine in use can do (the local model: everything)."""
        engine = self.engine
        caps = getattr(engine, "capabilities", None) if engine is not None else None
        return caps if isinstance(caps, Capabilities) else LOCAL_CAPABILITIES

    def cancel_load(self) -> None:
        if self._load_cancel is not None:
            self._load_cancel.set()

    def submit(self, request: Request) -> int:
        """Queue a request, cancelling the one before it; returns its id."""
        cancel = threading.Event()
        with self._lock:
            if self._run_cancel is not None:
                self._run_cancel.set()
            self._run_cancel = cancel
        self._queue.put(_Run(request, cancel))
        return request.request_id

    def cancel(self) -> None:
        """Cancel the running (or queued) request; its result arrives with `cancelled=True`."""
        with self._lock:
            if self._run_cancel is not None:
                self._run_cancel.set()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Cancel everything and stop the thread (the engine is dropped with it)."""
        self.cancel()
        self.cancel_load()
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join(timeout)
            self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- UI-thread slots -------------------------------------------------------------------------------------

    @Slot()
    def _on_step_ready(self) -> None:
        with self._lock:
            event, self._latest_step, self._step_pending = self._latest_step, None, False
        if event is not None:
            self.stepped.emit(event)

    @Slot(object)
    def _on_loaded(self, info: ModelInfo) -> None:
        self.model_info = info
        self.loaded.emit(info)

    # -- worker thread ---------------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                if isinstance(item, _Switch):
                    self._do_switch(item)
                elif isinstance(item, _Load):
                    self._do_load(item)
                elif isinstance(item, _Run):
                    self._do_run(item)
            except Exception:  # a bug must not kill the thread that the whole UI depends on
                log.exception("engine thread: unexpected error")

    def _ensure_engine(self) -> Engine:
        if self.engine is None:
            self.engine = self._factory()
        return self.engine

    def _do_switch(self, item: _Switch) -> None:
        if item.kind == self.backend == "local":
            return
        current = self.engine
        if self.backend == "local":
            if current is not None:
                self._parked["local"] = current  # its model stays loaded for the way back
        elif current is not None:
            current.unload()  # a server's connections are closed
        if item.kind == "server":
            self.engine = item.factory() if item.factory is not None else None
        else:
            self.engine = self._parked.pop("local", None)
        self.backend = item.kind
        if item.kind == "local":
            info = self.engine.info if self.engine is not None else None
            self.model_info = info
            if info is not None:
                self._loadedX.emit(info)  # the local model is still loaded: in use again at once
            elif item.model_dir is not None:
                self._do_load(_Load(item.model_dir, item.device, item.quantization, threading.Event()))

    def _do_load(self, item: _Load) -> None:
        if item.cancel.is_set():
            if item.cancel is self._load_cancel:  # cancelled before it started (not replaced): say so
                self._loadFailedX.emit(LoadCancelledError("Loading was cancelled."))
            return
        self._loadStartedX.emit(item.model_dir)
        try:
            with _no_collector_pauses():  # imports and load without collector pauses that freeze the UI
                if self.engine is None:
                    self._loadProgressX.emit(LoadProgress(0, 0, stage="starting"))
                engine = (
                    self._ensure_engine()
                )  # no unload(): the engine swaps models only once the new one is in
                info = engine.load(
                    item.model_dir,
                    device=item.device,
                    quantization=item.quantization,
                    on_progress=self._loadProgressX.emit,
                    cancel=item.cancel,
                )
        except EngineError as exc:
            self._leave_a_failed_server()
            self._loadFailedX.emit(exc)
        except Exception as exc:
            log.exception("model load failed")
            self._leave_a_failed_server()  # whatever went wrong, never left on a server that is not in use
            self._loadFailedX.emit(
                EngineError(
                    f"The model could not be loaded ({type(exc).__name__}); the model in use stays loaded. "
                    "See the log for details."
                )
            )
        else:
            self._loadedX.emit(info)

    def _leave_a_failed_server(self) -> None:
        """A server that cannot be used: requests go where they went before (the local model)."""
        if self.backend == "server":
            self._wanted = "local"
            self._do_switch(_Switch("local", None))

    def _do_run(self, item: _Run) -> None:
        request = item.request
        if item.cancel.is_set():
            self._finishedX.emit(Result(request.request_id, (), cancelled=True))
            return
        self.running_request = request.request_id
        try:
            result = self._ensure_engine().run(request, self._on_engine_step, item.cancel)
        except EngineError as exc:
            self._failedX.emit(request.request_id, exc)
        except Exception as exc:
            log.exception("request %s failed", request.request_id)
            said = scrub(str(exc))[:300]  # an HTTP library's error can quote the key it sent
            self._failedX.emit(request.request_id, GenerationError(f"Generation failed: {said}. Try again."))
        else:
            self._finishedX.emit(result)
        finally:
            self.running_request = None

    def _on_engine_step(self, event: StepEvent) -> None:
        with self._lock:
            self._latest_step = event
            if self._step_pending:
                return
            self._step_pending = True
        self._stepReady.emit()


__all__ = ["EngineFactory", "EngineHost", "LoadProgress", "default_engine_factory"]
