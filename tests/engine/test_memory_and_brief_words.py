"""Issue 27: memory refusals name the device that ran short (RAM on a CPU machine, never "close programs using
the GPU" there), and a brief within the loaded model's limit leaves room for the writer's text (on the shipped
demo a 1,500-character brief made every request fail)."""

from __future__ import annotations

import pytest

from engine.api import DraftRequest, OutOfMemoryError, PromptTooLongError, WontFitError
from engine.resources import demo_model_dir


def _config() -> dict:
    from engine.weights.fit import read_config

    return read_config(demo_model_dir())


@pytest.mark.parametrize("device, words, never", [("cpu", "RAM", "GPU"), ("cuda:0", "GPU", "RAM")])
def test_a_request_that_cannot_fit_names_the_memory_of_its_device(device, words, never) -> None:
    from engine.budget import plan_request

    with pytest.raises(OutOfMemoryError) as caught:
        plan_request(
            _config(),
            rows=3,
            prompt_tokens=400,
            new_tokens=64,
            min_prompt_tokens=40,
            free_bytes=1_000_000,
            device_label=device,
        )
    assert words in caught.value.message and never not in caught.value.message


def test_a_model_that_will_not_fit_in_ram_says_ram_on_the_cpu(monkeypatch) -> None:
    from engine.weights import fit
    from engine.weights.loader import load_model

    monkeypatch.setattr(
        fit,
        "estimate_for_device",
        lambda config, precision, device, **kw: fit.estimate(
            config, precision, device=device, available_bytes=10_000_000
        ),
    )
    with pytest.raises(WontFitError) as caught:
        load_model(demo_model_dir(), device="cpu", quantization="none")
    message = caught.value.message
    assert "RAM" in message and "GPU" not in message.split("\n")[0]


def test_a_request_the_cpu_allocator_refuses_says_ram(monkeypatch) -> None:
    from engine.session import Session

    session = Session()
    session._loaded = object()  # type: ignore[assignment] # a loaded model, as far as run() asks

    def short_of_ram(*_a, **_k):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(session, "_run", short_of_ram)
    with pytest.raises(OutOfMemoryError) as caught:
        session.run(DraftRequest(before="Hello."))
    assert "RAM" in caught.value.message and "GPU" not in caught.value.message


def test_the_demos_brief_limit_leaves_room_for_a_draft_and_a_longer_brief_does_not() -> None:
    from transformers import AutoTokenizer

    from engine import prompts

    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir(), local_files_only=True)
    config = _config()
    context = config["text_config"]["max_position_embeddings"]
    canvas = config["canvas_length"]
    limit = prompts.brief_limit(context, canvas, prompts.chars_per_token(tokenizer))
    assert 100 <= limit < 1500  # the demo reads 512 tokens: far less than the dialog's old 4,000 characters
    budget = context - canvas  # a one-canvas draft
    words = "The captain is Mara Lindqvist and the ship is the Maud, launched in 1923. "
    brief = (words * 40)[:limit]
    before = "The harbour was quiet that morning. " * 20
    prompt = prompts.build_prompt(tokenizer, DraftRequest(before=before, brief=brief), budget)
    assert len(prompt.ids) <= budget
    with pytest.raises(PromptTooLongError):  # what every request met with a 1,500-character brief
        prompts.build_prompt(tokenizer, DraftRequest(before=before, brief=(words * 40)[:1500]), budget)
