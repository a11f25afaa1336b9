"""Privacy: a full draft / rewrite / infill with the real engine on a tiny checkpoint, with every way of
opening a network connection patched to fail and to record the attempt. None may happen."""

from __future__ import annotations

import socket

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture
def no_network(monkeypatch):
    attempts: list[str] = []

    def refuse(name):
        def fail(*args, **kwargs):
            attempts.append(f"{name}{args[1:] if name == 'connect' else args}")
            raise OSError(f"network access attempted in an offline test: {name}")

        return fail

    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    return attempts


def test_draft_rewrite_and_infill_run_without_any_network(no_network, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    from app.platform.privacy import enforce_offline

    enforce_offline()  # what the app does at start-up
    from engine.api import DenoiseSettings, DraftRequest, InfillRequest, RewriteRequest
    from engine.session import Session
    from tests.helpers.checkpoints import tiny_checkpoint

    model = tiny_checkpoint(tmp_path_factory)
    session = Session()
    info = session.load(model, device="cpu")
    assert info.device == "cpu"
    fast = DenoiseSettings(max_steps=4, candidates=2, seed=1)
    steps = []
    results = [
        session.run(
            DraftRequest(before="The harbour was quiet. 서울 👋", max_new_tokens=16, settings=fast),
            steps.append,
        ),
        session.run(
            RewriteRequest(
                selection="the boats rested on the grey water",
                instruction="Make it shorter.",
                before="In the morning ",
                after=" until the wind came.",
                settings=fast,
            ),
            steps.append,
        ),
        session.run(
            InfillRequest(
                before="It was the best of times.",
                after="It was the age of wisdom.",
                middle_tokens=8,
                settings=fast,
            ),
            steps.append,
        ),
    ]
    assert all(r.candidates and not r.cancelled for r in results)
    assert len({e.request_id for e in steps}) == 3  # every request streamed its steps
    assert no_network == [], f"network access was attempted: {no_network}"
