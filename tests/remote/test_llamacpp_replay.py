"""The text tier against a stub that replays a real llama.cpp server's answers (llama-cpp-python 0.3.36
serving SmolLM2-135M-Instruct; tests/remote/recordings/llamacpp, refreshed by
`bash tests/remote/run_llamacpp.sh record`). Every request must be one the real server was sent: the stub
answers anything else with 599, which fails the test."""

from __future__ import annotations

import json

import pytest

from engine.remote import RemoteEngine, ServerConfig, text_features
from engine.remote.client import Timeouts
from tests.helpers import llamacpp_scenarios as sc
from tests.helpers.vllm_replay import RECORDINGS, TEST_KEY, ReplayServer

FOLDER = RECORDINGS / "llamacpp"
pytestmark = pytest.mark.skipif(not (FOLDER / "connect.json").is_file(), reason="no llama.cpp recordings")


@pytest.fixture
def engine():
    with ReplayServer(folder=FOLDER) as server:
        e = RemoteEngine(
            ServerConfig(server.url, sc.MODEL, TEST_KEY, Timeouts(2.0, 10.0), context_length=sc.CONTEXT)
        )
        e.connect()
        yield e
        e.unload()


def _recorded_pieces(name: str) -> int:
    events = 0
    for exchange in json.loads((FOLDER / f"run_{name}.json").read_text(encoding="utf-8")):
        events += sum(1 for e in exchange["response"].get("events", []) if '"content"' in e or '"text"' in e)
    return events


@pytest.mark.parametrize("name", sorted(sc.RUNS))
def test_every_recorded_run_replays_to_text_with_the_document_joined(engine, name):
    text_features.forget()
    events = []
    result = engine.run(sc.RUNS[name](), on_step=events.append)
    assert result.text.strip() and not result.cancelled
    assert len(events) >= 2  # the ghost grew piece by piece, not in one lump at the end
    if name.startswith("rewrite"):
        words = len(result.text.split()) / len(sc.SELECTION.split())
        assert 0.3 <= words <= 2.0 and result.text == result.text.strip()
    if name == "infill":
        assert not result.text.endswith("By morning") and result.text[0] != " "
    assert _recorded_pieces(name) >= 1


def test_the_recorded_server_is_the_text_tier_with_its_context_from_the_writer(engine):
    caps = engine.capabilities
    assert caps.model_kind == "text" and not caps.canvas_control
    assert caps.context_length == sc.CONTEXT and caps.where.endswith(f"· {sc.MODEL}")
