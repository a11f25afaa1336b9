"""The text tier (any OpenAI-compatible model) against the scripted stub: what it sends, what comes back,
and every case of "Bad input and faults" of issue 31 (a sentence, nothing half-written, the next request
works)."""

from __future__ import annotations

import threading

import pytest

from engine.api import (
    REWRITE_PRESETS,
    DenoiseSettings,
    DraftRequest,
    Engine,
    InfillRequest,
    RewriteRequest,
    ServerError,
    ServerModelNotFoundError,
)
from engine.remote import RemoteEngine, ServerConfig, text_features
from engine.remote.client import Timeouts
from tests.helpers.openai_stub import Behaviour, OpenAIStub

_opened: list[RemoteEngine] = []


@pytest.fixture(autouse=True)
def _fresh():
    text_features.forget()
    yield
    while _opened:
        _opened.pop().unload()
    text_features.forget()


def _engine(stub: OpenAIStub, **config) -> RemoteEngine:
    engine = RemoteEngine(ServerConfig(stub.url, timeouts=Timeouts(connect=2.0, read=5.0), **config))
    _opened.append(engine)
    engine.connect()
    return engine


def _stub(**behaviour) -> OpenAIStub:
    return OpenAIStub(Behaviour(**behaviour))


def test_a_model_that_is_not_diffusiongemma_gets_the_text_tier_with_its_limits_said():
    with _stub() as stub:
        engine = _engine(stub)
        caps = engine.capabilities
        assert isinstance(engine, Engine) and caps.model_kind == "text"
        assert caps.where == f"Server: {stub.url.split('//')[1].removesuffix('/v1')} · stub-model"
        assert not caps.canvas_control and "DiffusionGemma" in caps.canvas_control_reason
        assert "strength, pins and re-roll" in caps.canvas_control_reason
        assert caps.context_length == 4096
        assert stub.paths() == []  # connecting sent no request a llama.cpp server does not know


def test_a_draft_continues_the_text_on_completions_and_streams_piece_by_piece():
    with _stub(answer="and the gulls circled the masts.") as stub:
        engine = _engine(stub)
        events = []
        result = engine.run(
            DraftRequest(before="The boats came in at dawn,", max_new_tokens=20), events.append
        )
        assert result.text == " and the gulls circled the masts."
        assert [e.text for e in events][:2] == [" and", " and the"]  # the ghost grows as pieces arrive
        path, body = stub.seen[-1][1], stub.seen[-1][2]
        assert path == "/v1/completions" and body["stream"] is True
        assert body["prompt"].endswith("The boats came in at dawn,") and body["max_tokens"] == 20


@pytest.mark.parametrize("preset", sorted(REWRITE_PRESETS))
def test_every_rewrite_preset_goes_as_chat_with_its_instruction(preset):
    with _stub(answer="Sure! Here is the rewritten text:\n\nThe harbour woke under a grey sky.") as stub:
        engine = _engine(stub)
        selection = "The harbour was waking up slowly under the grey sky."
        result = engine.run(RewriteRequest(selection=selection, instruction=REWRITE_PRESETS[preset]))
        assert result.text == "The harbour woke under a grey sky."  # greeting and label dropped
        _method, path, body = stub.seen[-1]
        assert path == "/v1/chat/completions"
        user = body["messages"][-1]["content"]
        assert REWRITE_PRESETS[preset] in user and selection in user


def test_a_rewrite_longer_than_its_window_is_cut_at_a_sentence_and_not_read_on():
    long = "One two three four five. Six seven eight nine ten. " * 8
    with _stub(answer=long.strip()) as stub:
        engine = _engine(stub)
        selection = "Alpha beta gamma delta epsilon."
        result = engine.run(RewriteRequest(selection=selection, instruction=REWRITE_PRESETS["formal"]))
        assert result.text == "One two three four five."  # 5 words: the window of a 5-word selection
        assert stub.seen[-1][2]["max_tokens"] <= 2 * 2 * 5 + 16


def test_infill_uses_llamacpps_infill_and_joins_both_sides():
    with _stub(answer="over the lazy") as stub:
        engine = _engine(stub)
        result = engine.run(InfillRequest(before="The fox jumped", after="dog."))
        assert result.text == " over the lazy "
        assert stub.seen[-1][1] == "/infill" and stub.seen[-1][2]["input_suffix"] == "dog."


def test_infill_without_the_infill_endpoint_asks_by_instruction_and_remembers():
    with _stub(answer="over the lazy dog.", infill=False) as stub:
        engine = _engine(stub)
        result = engine.run(InfillRequest(before="The fox jumped", after="dog."))
        assert result.text == " over the lazy "  # the repeated ending is cut so it joins "dog."
        assert stub.paths() == ["/infill", "/v1/chat/completions"]
        engine.run(InfillRequest(before="The fox jumped", after="dog."))
        assert stub.paths()[2:] == ["/v1/chat/completions"]  # /infill is not asked again


def test_alternatives_come_from_n_best_first_by_the_servers_logprobs():
    with _stub(answer="a calm sea") as stub:
        engine = _engine(stub)
        result = engine.run(
            DraftRequest(before="Beyond the wall lay", settings=DenoiseSettings(candidates=3))
        )
        assert [c.text for c in result.candidates] == [" a calm sea", " A CALM SEA"]  # two distinct of three
        assert stub.seen[-1][2]["n"] == 3 and len(stub.paths()) == 1


def test_n_ignored_the_other_alternatives_are_asked_one_at_a_time():
    with _stub(answer="a calm sea", honour_n=False) as stub:
        engine = _engine(stub)
        engine.run(DraftRequest(before="Beyond the wall lay", settings=DenoiseSettings(candidates=3)))
        bodies = [b for m, p, b in stub.seen if m == "POST"]
        assert [b.get("n", 1) for b in bodies] == [3, 1, 1]
        engine.run(DraftRequest(before="Beyond the wall lay", settings=DenoiseSettings(candidates=2)))
        assert all("n" not in b for m, p, b in stub.seen[len(bodies) + 1 :] if m == "POST")


def test_a_server_that_offers_no_model_is_a_sentence():
    with _stub(models=[]) as stub, pytest.raises(ServerError, match=r"serves no model\. Load one"):
        _engine(stub)


def test_a_model_without_a_chat_template_is_asked_on_completions_instead():
    with _stub(answer="The harbour woke.", chat_template=False) as stub:
        engine = _engine(stub)
        result = engine.run(RewriteRequest(selection="The harbour wakes.", instruction="Make it past tense."))
        assert result.text == "The harbour woke."
        assert stub.paths() == ["/v1/chat/completions", "/v1/completions"]
        assert "Rewritten text:" in stub.seen[-1][2]["prompt"]


def test_a_context_length_the_server_does_not_state_is_assumed_and_said_or_taken_from_the_writer():
    with _stub(context=None) as stub:
        engine = _engine(stub)
        assert engine.capabilities.context_length == 2048
        result = engine.run(DraftRequest(before="The boats came in at dawn,"))
        assert "does not say how much text its model reads" in result.notice
        told = _engine(stub, context_length=8192)
        assert told.capabilities.context_length == 8192
        assert told.run(DraftRequest(before="The boats came in at dawn,")).notice == ""


def test_an_answer_longer_than_asked_is_not_read_past_the_request():
    with _stub(answer="word " * 10, extra_pieces=500) as stub:
        engine = _engine(stub)
        result = engine.run(DraftRequest(before="Begin:", max_new_tokens=12))
        assert len(result.text.split()) <= 12 + 2
        assert "past the length asked for" in result.notice


def test_a_stream_that_stops_is_a_sentence_and_the_next_request_works():
    with _stub(stop_after=2) as stub:
        engine = _engine(stub)
        with pytest.raises(ServerError, match="stopped answering"):
            engine.run(DraftRequest(before="The boats came in at dawn,"))
        stub.behaviour.stop_after = None
        assert engine.run(DraftRequest(before="The boats came in at dawn,")).text


def test_a_404_for_completions_on_a_chat_only_server_drafts_by_chat_and_remembers():
    with _stub(answer="Sure, here it is:\nand the gulls circled.", completions=False) as stub:
        engine = _engine(stub)
        result = engine.run(DraftRequest(before="The boats came in at dawn,"))
        assert result.text == " and the gulls circled."
        assert stub.paths() == ["/v1/completions", "/v1/chat/completions"]
        engine.run(DraftRequest(before="The boats came in at dawn,"))
        assert stub.paths()[2:] == ["/v1/chat/completions"]


def test_a_server_that_changes_model_between_requests_is_stopped_with_a_sentence():
    with _stub(switch_model_after=1) as stub:
        engine = _engine(stub)
        assert engine.run(DraftRequest(before="The boats came in at dawn,")).text
        with pytest.raises(ServerModelNotFoundError, match="now answers with the model 'another-model'"):
            engine.run(DraftRequest(before="The boats came in at dawn,"))


def test_logprobs_refused_are_dropped_once_and_remembered():
    with _stub(logprobs=False) as stub:
        engine = _engine(stub)
        assert engine.run(DraftRequest(before="The boats came in at dawn,")).text
        engine.run(DraftRequest(before="The boats came in at dawn,"))
        bodies = [b for m, p, b in stub.seen if m == "POST"]
        assert ["logprobs" in b for b in bodies] == [True, False, False]


def test_a_cancel_mid_stream_returns_at_once_and_closes_the_stream():
    with _stub(answer="word " * 200, gap=0.05) as stub:
        engine = _engine(stub)
        cancel = threading.Event()

        def on_step(event):
            if len(event.text.split()) >= 3:
                cancel.set()

        result = engine.run(DraftRequest(before="Begin:", max_new_tokens=200), on_step, cancel)
        assert result.cancelled
