"""The scripted engine behaves like the real one where the UI can tell: steps, cancel, errors, candidates."""

from __future__ import annotations

import threading
import time

import pytest

from engine.api import (
    DenoiseSettings,
    DraftRequest,
    Engine,
    GenerationError,
    LoadCancelledError,
    ModelIncompleteError,
    ModelNotLoadedError,
    RewriteRequest,
)
from engine.fake import FakeEngine


def loaded(**kwargs) -> FakeEngine:
    engine = FakeEngine(**kwargs)
    engine.load("fake")
    return engine


def test_it_is_an_engine():
    assert isinstance(FakeEngine(), Engine)


def test_text_settles_from_noise_to_the_final_text():
    engine = loaded(texts=["one two three four five six"], steps=6)
    events = []
    result = engine.run(DraftRequest(before="x"), events.append)
    assert [e.step for e in events] == [1, 2, 3, 4, 5, 6]
    assert events[0].text != result.text and events[-1].text == result.text == "one two three four five six"
    mean = [sum(s.confidence for s in e.candidates[0].spans) / len(e.candidates[0].spans) for e in events]
    assert mean[-1] > mean[0]
    assert all(len(e.text) == len(result.text) for e in events), "noise keeps the layout stable (no jumping)"
    assert result.stats.steps == 6 and not result.cancelled


def test_k_candidates_from_one_run():
    engine = loaded(texts=["a", "b"])
    result = engine.run(DraftRequest(before="x", settings=DenoiseSettings(candidates=3)))
    assert [c.text for c in result.candidates] == ["a", "b", "a"]


def test_cancel_is_honoured_within_one_step():
    engine = loaded(steps=5, step_delay=30.0)
    cancel = threading.Event()
    threading.Timer(0.05, cancel.set).start()
    started = time.perf_counter()
    result = engine.run(DraftRequest(before="x"), cancel=cancel)
    assert result.cancelled and result.candidates == ()
    assert time.perf_counter() - started < 30.0 / 2, "cancel must not wait for the step to finish"


def test_busy_steps_also_cancel():
    engine = loaded(steps=3, step_delay=30.0, busy=True)
    cancel = threading.Event()
    threading.Timer(0.05, cancel.set).start()
    assert engine.run(DraftRequest(before="x"), cancel=cancel).cancelled


def test_scripted_failure_at_step_k():
    engine = loaded(steps=6, fail_at_step=3, error=GenerationError("boom, try again"))
    events = []
    with pytest.raises(GenerationError, match="boom"):
        engine.run(DraftRequest(before="x"), events.append)
    assert [e.step for e in events] == [1, 2]


def test_load_failure_and_cancel_and_not_loaded():
    with pytest.raises(ModelIncompleteError):
        FakeEngine(load_error=ModelIncompleteError("missing shard")).load("fake")
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(LoadCancelledError):
        FakeEngine().load("fake", cancel=cancel)
    with pytest.raises(ModelNotLoadedError):
        FakeEngine().run(DraftRequest(before="x"))


def test_empty_rewrite_is_refused():
    from engine.api import EmptyRequestError

    with pytest.raises(EmptyRequestError):
        loaded().run(RewriteRequest(selection="  ", instruction="shorter"))
