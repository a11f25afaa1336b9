"""Issue 32: a server is trusted with the writer's text and key and nothing more. Against the replaying stub
made to misbehave on purpose (tests/helpers/bad_server.py): secrets echoed back are hidden, a key that no
header can carry is refused at entry, URL credentials are never shown, a redirect to another origin is not
followed, a wrong shape is a sentence, and no more is read than the request can need."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from engine.api import (
    ServerAddressError,
    ServerAnswerError,
    ServerAuthError,
    ServerFailedError,
    ServerKeyError,
    ServerRedirectError,
    ServerTooLargeError,
    ServerUnreachableError,
)
from engine.remote import RemoteEngine, ServerConfig, redact
from engine.remote.client import ServerClient, Timeouts
from tests.helpers import bad_server
from tests.helpers import vllm_scenarios as sc
from tests.helpers.vllm_replay import TEST_KEY, ReplayServer

ODD_KEY = "sk-live/Ab+Cd=Ef9Gh%Ij"  # characters that URL-encoding changes


@pytest.fixture
def stub():
    with ReplayServer() as server:
        yield server


_opened: list[RemoteEngine] = []


@pytest.fixture(autouse=True)
def _close_engines():
    yield
    while _opened:
        _opened.pop().unload()
    redact.forget_all()


def _engine(url: str, key: str | None = TEST_KEY, *, connect: bool = True) -> RemoteEngine:
    engine = RemoteEngine(ServerConfig(url, sc.MODEL, key, Timeouts(connect=2.0, read=20.0)))
    _opened.append(engine)
    if connect:
        engine.connect()
    return engine


def _echoes(key: str) -> dict[str, str]:
    return {
        "whole": f"invalid token {key}",
        "bearer": f"invalid token Bearer {key}",
        "header": f"rejected header Authorization: Bearer {key}",
        "partial": f"Incorrect API key provided: {key[:8]}****{key[-4:]}.",
        "url_encoded": f"bad request to /v1/models?api_key={quote(key, safe='')}",
    }


@pytest.mark.parametrize("status", [401, 500])
@pytest.mark.parametrize("form", ["whole", "bearer", "header", "partial", "url_encoded"])
def test_a_key_the_server_echoes_back_is_never_shown(stub, status, form):
    said = _echoes(ODD_KEY)[form]
    stub.tamper[("GET", "/v1/models")] = bad_server.json_answer({"error": {"message": said}}, status)
    with pytest.raises((ServerAuthError, ServerFailedError)) as info:
        _engine(stub.url, ODD_KEY)
    message = info.value.message
    assert f"HTTP {status}" in message and "It said:" in message
    for leak in (ODD_KEY, quote(ODD_KEY, safe=""), ODD_KEY[:8], ODD_KEY[-6:]):
        assert leak not in message
    assert redact.HIDDEN in message


def test_a_bearer_token_of_someone_else_is_hidden_too():
    assert "abc123secret" not in redact.scrub("proxy said: Authorization: Bearer abc123secret (denied)")
    assert redact.scrub("see http://writer:pw@host:8000/v1") == "see http://host:8000/v1"


@pytest.mark.parametrize("key", ["sk-abc\ndef-secret", "sk-abc def", "sk-cl\u00e9-secret", "sk-\x07bell"])
def test_a_key_no_header_can_carry_is_refused_with_a_sentence_before_anything_is_sent(stub, key):
    with pytest.raises(ServerKeyError) as info:
        _engine(stub.url, key)
    message = info.value.message
    assert "printable ASCII without spaces" in message and "Use a server" in message
    assert key not in message and "secret" not in message and "def" not in message.split("(")[0]
    assert stub.seen == []  # refused before any request
    with pytest.raises(ServerKeyError):
        ServerClient(stub.url, key)


def test_url_credentials_are_never_shown_but_still_sent_as_basic_auth(stub):
    url = stub.url.replace("http://", "http://writer:pw-Secret9@")
    engine = _engine(url)  # the key is what the server reads
    host = stub.url.removeprefix("http://")
    assert engine.capabilities.where == f"Server: {host} · {sc.MODEL}"
    assert engine.info is not None and "pw-Secret9" not in engine.info.path
    engine.unload()
    stub.tamper[("GET", "/v1/models")] = bad_server.json_answer(
        {"error": {"message": f"no access for {url} (pw-Secret9)"}}, 403
    )
    with pytest.raises(ServerAuthError) as info:
        _engine(url)
    assert "pw-Secret9" not in info.value.message and host in info.value.message


def test_an_unreachable_address_with_credentials_names_only_host_and_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServerUnreachableError) as info:
        _engine(f"http://writer:pw-Secret9@127.0.0.1:{port}")
    assert "pw-Secret9" not in info.value.message and "writer" not in info.value.message
    assert f"127.0.0.1:{port}" in info.value.message


def test_a_redirect_to_another_origin_is_not_followed_and_says_where(stub):
    with ReplayServer() as other:
        engine = _engine(stub.url)
        stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(
            bad_server.redirect(other.url + "/v1/completions")
        )
        with pytest.raises(ServerRedirectError) as info:
            engine.run(sc.draft())
        assert other.url.removeprefix("http://") in info.value.message
        assert "did not follow" in info.value.message
        assert other.seen == []  # the writer's prompt never reached the other server


def test_a_redirect_within_the_same_server_is_followed(stub):
    engine = _engine(stub.url)
    moved = []

    def once(handler, body):
        if moved:
            return False  # the recording answers the redirected request
        moved.append(body)
        return bad_server.redirect("/v1/completions?moved=1")(handler, body)

    stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(once)
    assert engine.run(sc.draft()).text.strip() and moved


@pytest.mark.parametrize(
    ("path", "answer", "words"),
    [
        ("/v1/models", [{"id": sc.MODEL}], "a list where an object belongs"),
        (
            "/v1/models",
            {"data": [{"id": sc.MODEL, "max_model_len": "unlimited"}]},
            "max_model_len of 'letterpress-demo' is 'unlimited', not a whole number",
        ),
        ("/v1/models", {"data": "all of them"}, "'data' is a string, not a list"),
        ("/v1/models", {"data": [{"id": 7}]}, "a model's id is 7"),
    ],
)
def test_a_wrong_shape_is_one_sentence_naming_the_server(stub, path, answer, words):
    stub.tamper[("GET", path)] = bad_server.json_answer(answer)
    with pytest.raises(ServerAnswerError) as info:
        _engine(stub.url)
    assert words in info.value.message and stub.url.removeprefix("http://") in info.value.message


def test_the_canvas_probe_answered_with_no_choice_is_a_sentence(stub):
    def empty(handler, body):
        if isinstance(body, dict) and body.get("vllm_xargs", {}).get("diffusion_read_only"):
            return bad_server.json_answer({"choices": []})(handler, body)
        return False

    stub.tamper[("POST", "/v1/completions")] = empty
    with pytest.raises(ServerAnswerError, match="'choices' is empty"):
        _engine(stub.url)


@pytest.mark.parametrize("answer", [["0.32.0"], {"version": 32}, "0.32"])
def test_a_version_of_the_wrong_shape_is_no_version_and_the_server_is_still_used(stub, answer):
    stub.tamper[("GET", "/version")] = bad_server.json_answer(answer)
    engine = _engine(stub.url)
    assert engine.capabilities.server_version == ""
    assert engine.run(sc.draft()).text.strip()


def test_streamed_choices_of_the_wrong_shape_are_a_sentence(stub):
    engine = _engine(stub.url)

    def bad_index(handler, body):
        data = bad_server.chunk("text", index=9)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        return True

    stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(bad_index)
    with pytest.raises(ServerAnswerError, match="index is 9"):
        engine.run(sc.draft())


def test_an_answer_far_larger_than_asked_is_cut_with_a_sentence(stub):
    engine = _engine(stub.url)
    flood = bad_server.Flood(total=50 * 1024 * 1024, canvases=25)
    stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(flood)
    request = sc.draft().__class__(before=sc.BEFORE, max_new_tokens=64)
    events = []
    with pytest.raises(ServerTooLargeError) as info:
        engine.run(request, on_step=events.append)
    assert "a request of 64 tokens" in info.value.message and "stopped reading" in info.value.message
    assert not flood.finished and events == []


def test_a_small_answer_that_inflates_is_cut_as_early_as_a_plain_flood(stub):
    import gzip

    bomb = gzip.compress(b'{"data": [' + b" " * (40 * 1024 * 1024) + b"]}")

    def answer(handler, body):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(bomb)))
        handler.end_headers()
        handler.wfile.write(bomb)
        return True

    stub.tamper[("GET", "/v1/models")] = answer
    with pytest.raises(ServerTooLargeError, match="its answer to /v1/models"):
        _engine(stub.url)


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1", "ftp://127.0.0.1:8000", "http://"])
def test_an_address_that_cannot_be_used_is_a_sentence(url):
    with pytest.raises(ServerAddressError) as info:
        _engine(url, connect=False).connect()
    assert "Write it as http://" in info.value.message


def test_what_a_server_says_is_quoted_as_plain_text(stub):
    said = "bad \x1b[2J\x1b[31mred\x1b[0m \u202eenil\nnext line"
    stub.tamper[("GET", "/v1/models")] = bad_server.json_answer({"error": {"message": said}}, 500)
    with pytest.raises(ServerFailedError) as info:
        _engine(stub.url)
    message = info.value.message
    assert "\x1b" not in message and "\u202e" not in message and "\n" not in message
    assert "red" in message and "next line" in message


def test_a_model_id_that_is_the_key_is_not_shown(stub):
    stub.tamper[("GET", "/v1/models")] = bad_server.json_answer({"data": [{"id": ODD_KEY}]})
    stub.tamper[("POST", "/v1/completions")] = bad_server.json_answer({"choices": [{"logprobs": None}]})
    engine = RemoteEngine(ServerConfig(stub.url, None, ODD_KEY, Timeouts(connect=2.0, read=20.0)))
    _opened.append(engine)
    engine.connect()
    assert ODD_KEY not in engine.capabilities.where and redact.HIDDEN in engine.capabilities.where


def test_more_pieces_of_answer_than_tokens_asked_are_cut(stub):
    engine = _engine(stub.url)

    def trickle(handler, body):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            for _ in range(500):  # one character a piece: each would reprint the whole text so far
                data = bad_server.chunk("a")
                handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except OSError:
            handler.close_connection = True
        return True

    stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(trickle)
    events = []
    with pytest.raises(ServerTooLargeError, match="more pieces of answer"):
        engine.run(sc.draft(), on_step=events.append)
    assert len(events) <= 32 + 8


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("Please use basic auth here", "Please use basic auth here"),  # words, not a credential
        ("max 512 tokens; you asked 600 tokens", "max 512 tokens; you asked 600 tokens"),
        ("Basic dXNlcjpwYXNzd29yZA== refused", "Basic [hidden] refused"),
        ("GET /v1/models?api_key=xyz123&x=1", "GET /v1/models?api_key=[hidden]&x=1"),
        ('{"token": "abc"}', '{"token": "[hidden]"}'),
    ],
)
def test_credentials_of_anyone_are_hidden_and_ordinary_words_kept(said, shown):
    assert redact.scrub(said) == shown


def test_a_canvas_length_no_model_has_is_not_believed(stub):
    def huge(handler, body):
        xargs = body.get("vllm_xargs", {}) if isinstance(body, dict) else {}
        if xargs.get("diffusion_seed_canvas") == [3]:  # the canvas-length question
            message = "diffusion_seed_canvas must hold exactly 99999999999999 ids"
            return bad_server.json_answer({"error": {"message": message}}, 400)(handler, body)
        return False

    stub.tamper[("POST", "/v1/completions")] = huge
    assert _engine(stub.url).canvas_length == 256  # the reference canvas, not 10**14 tokens per request


@pytest.mark.parametrize(
    ("answer", "words"),
    [({"tokens": "many"}, "'tokens' is a string, not a list"), ({"tokens": [1, -2]}, "the token -2")],
)
def test_a_tokenizer_answer_of_the_wrong_shape_is_a_sentence_and_the_server_stays(stub, answer, words):
    engine = _engine(stub.url)
    stub.tamper[("POST", "/tokenize")] = bad_server.json_answer(answer)
    with pytest.raises(ServerAnswerError, match=words):
        engine.run(sc.draft())
    del stub.tamper[("POST", "/tokenize")]
    assert engine.run(sc.draft()).text.strip()  # still connected: the next request works
