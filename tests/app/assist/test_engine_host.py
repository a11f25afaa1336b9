"""The engine thread: loads and runs off the UI thread, signals arrive on the UI thread, latest request
wins."""

from __future__ import annotations

import threading

from PySide6.QtCore import QThread

from app.assist.engine_host import EngineHost
from engine.api import DraftRequest, GenerationError
from engine.fake import FakeEngine


def make_host(qtbot, engine):
    host = EngineHost(lambda: engine)
    host.start()
    with qtbot.waitSignal(host.loaded, timeout=5000):
        host.load("fake")
    return host


def test_load_and_run_happen_in_the_engine_thread_and_signals_on_the_ui_thread(qtbot):
    engine = FakeEngine(steps=3)
    progress = []
    host = EngineHost(lambda: engine)
    host.loadProgress.connect(progress.append)
    host.start()
    with qtbot.waitSignal(host.loaded, timeout=5000):
        host.load("fake")
    threads = []
    host.stepped.connect(lambda _e: threads.append(QThread.currentThread()))
    with qtbot.waitSignal(host.finished, timeout=5000) as result:
        host.submit(DraftRequest(before="x"))
    assert not result.args[0].cancelled
    assert set(engine.thread_names) == {"letterpress-engine"}
    assert threading.current_thread().name not in engine.thread_names
    assert threads and all(t is QThread.currentThread() for t in threads)
    assert progress and progress[-1].fraction == 1.0
    host.shutdown()
    assert not host.alive


def test_latest_request_wins(qtbot):
    host = make_host(qtbot, FakeEngine(steps=100, step_delay=0.02))
    results = {}
    host.finished.connect(lambda r: results.setdefault(r.request_id, r))
    first, second = DraftRequest(before="a"), DraftRequest(before="b")
    host.submit(first)
    qtbot.waitUntil(lambda: host.running_request == first.request_id, timeout=5000)
    host.submit(second)
    host.cancel()  # and cancelling stops the newest too
    qtbot.waitUntil(lambda: len(results) == 2, timeout=10_000)
    assert results[first.request_id].cancelled and results[second.request_id].cancelled
    third = DraftRequest(before="c")
    fourth = DraftRequest(before="d")
    host.submit(third)
    host.submit(fourth)
    qtbot.waitUntil(lambda: fourth.request_id in results, timeout=20_000)
    assert results[third.request_id].cancelled and not results[fourth.request_id].cancelled
    host.shutdown()


def test_errors_come_back_as_signals_and_the_thread_survives(qtbot):
    engine = FakeEngine(steps=3, fail_at_step=2, error=GenerationError("scripted"))
    host = make_host(qtbot, engine)
    with qtbot.waitSignal(host.failed, timeout=5000) as failed:
        request = DraftRequest(before="x")
        host.submit(request)
    assert failed.args[0] == request.request_id and failed.args[1].message == "scripted"
    engine.fail_at_step = None
    with qtbot.waitSignal(host.finished, timeout=5000):
        host.submit(DraftRequest(before="y"))
    host.shutdown()


def test_unexpected_exceptions_become_generation_errors(qtbot):
    engine = FakeEngine(steps=2, fail_at_step=1, error=None)
    engine.error = ZeroDivisionError("bug")  # not an EngineError: a bug in the engine
    host = make_host(qtbot, engine)
    with qtbot.waitSignal(host.failed, timeout=5000) as failed:
        host.submit(DraftRequest(before="x"))
    assert isinstance(failed.args[1], GenerationError) and "Try again" in failed.args[1].message
    host.shutdown()
