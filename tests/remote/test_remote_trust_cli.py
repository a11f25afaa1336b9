"""Issue 32 through the command line (`python -m engine generate --server`): against a misbehaving stub, every
case ends in one sentence and exit code 2 (never "an unexpected … please report it"), and neither the key nor
URL credentials nor the writer's text go anywhere they should not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import bad_server
from tests.helpers import vllm_scenarios as sc
from tests.helpers.vllm_replay import TEST_KEY, ReplayServer

ROOT = Path(__file__).resolve().parents[2]
ODD_KEY = "sk-live/Ab+Cd=Ef9Gh%Ij"


@pytest.fixture
def stub():
    with ReplayServer() as server:
        yield server


def _generate(url: str, key: str | None = TEST_KEY, *extra: str, tokens: int = 32):
    env = {k: v for k, v in os.environ.items() if k != "LETTERPRESS_API_KEY"}
    env["PYTHONPATH"] = str(ROOT)
    if key is not None:
        env["LETTERPRESS_API_KEY"] = key
    cmd = [
        sys.executable,
        "-m",
        "engine",
        "generate",
        "--server",
        url,
        "--server-model",
        sc.MODEL,
        "--task",
        "draft",
        "--before-file",
        str(_before_file()),
        "--max-new-tokens",
        str(tokens),
        *extra,
    ]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def _before_file() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="lp-trust-"))
    (folder / "before.txt").write_text(sc.BEFORE, encoding="utf-8")
    return folder / "before.txt"


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def _a_sentence(done: subprocess.CompletedProcess[str]) -> str:
    said = _said(done)
    assert done.returncode == 2, said
    assert "unexpected" not in said and "Traceback" not in said and "report it" not in said
    return said


@pytest.mark.parametrize("status", [401, 500])
def test_cli_never_prints_a_key_the_server_echoes(stub, status):
    stub.tamper[("GET", "/v1/models")] = bad_server.json_answer(
        {"error": {"message": f"invalid token Bearer {ODD_KEY} ({ODD_KEY[:8]}…)"}}, status
    )
    said = _a_sentence(_generate(stub.url, ODD_KEY))
    assert f"HTTP {status}" in said and ODD_KEY not in said and ODD_KEY[:8] not in said


@pytest.mark.parametrize("key", ["sk-abc\ndef-secret", "sk-cl\u00e9-secret"])
def test_cli_refuses_a_key_no_header_can_carry_with_a_sentence(stub, key):
    said = _a_sentence(_generate(stub.url, key))
    assert "printable ASCII without spaces" in said and "secret" not in said
    assert stub.seen == []


def test_cli_never_shows_url_credentials(stub):
    url = stub.url.replace("http://", "http://writer:pw-Secret9@")
    stub.tamper[("GET", "/v1/models")] = bad_server.json_answer({"error": {"message": "nope"}}, 403)
    said = _a_sentence(_generate(url))
    assert "pw-Secret9" not in said and stub.url.removeprefix("http://") in said


def test_cli_does_not_follow_a_redirect_to_another_server(stub):
    with ReplayServer() as other:
        stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(
            bad_server.redirect(other.url + "/v1/completions")
        )
        said = _a_sentence(_generate(stub.url))
        assert "did not follow" in said and other.url.removeprefix("http://") in said
        assert other.seen == []


@pytest.mark.parametrize(
    ("path", "answer", "words"),
    [
        ("/v1/models", [{"id": sc.MODEL}], "a list where an object belongs"),
        ("/v1/models", {"data": [{"id": sc.MODEL, "max_model_len": "unlimited"}]}, "'unlimited'"),
    ],
)
def test_cli_a_wrong_shape_is_a_sentence_and_exit_2(stub, path, answer, words):
    stub.tamper[("GET", path)] = bad_server.json_answer(answer)
    said = _a_sentence(_generate(stub.url, None, "--jsonl"))
    error = json.loads(_said_last_line(said))
    assert error["kind"] == "server_bad_answer" and words in error["message"]


def _said_last_line(said: str) -> str:
    return [line for line in said.splitlines() if line.startswith("{")][-1]


def test_cli_a_canvas_probe_with_no_choice_is_a_sentence(stub):
    def empty(handler, body):
        if isinstance(body, dict) and body.get("vllm_xargs", {}).get("diffusion_read_only"):
            return bad_server.json_answer({"choices": []})(handler, body)
        return False

    stub.tamper[("POST", "/v1/completions")] = empty
    assert "'choices' is empty" in _a_sentence(_generate(stub.url))


def test_cli_a_version_as_a_list_is_no_version_and_the_draft_still_comes(stub):
    stub.tamper[("GET", "/version")] = bad_server.json_answer(["0.32.0"])
    done = _generate(stub.url)
    assert done.returncode == 0, _said(done)
    assert done.stdout.strip()


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1"])
def test_cli_a_bad_address_is_a_sentence(url):
    assert "Write it as http://" in _a_sentence(_generate(url))


def test_cli_reads_no_more_than_the_request_allows(stub):
    flood = bad_server.Flood(total=50 * 1024 * 1024, canvases=25)
    stub.tamper[("POST", "/v1/completions")] = bad_server.streamed_only(flood)
    done = _generate(stub.url, TEST_KEY, "--jsonl", tokens=64)
    said = _a_sentence(done)
    assert len(done.stdout) < 64 * 1024  # not 1 GB of reprinted steps
    assert json.loads(_said_last_line(said))["kind"] == "server_too_large" and not flood.finished
