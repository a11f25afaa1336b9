"""Each task end to end on a tiny checkpoint, and every failure a writer can meet as a typed, usable error."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
import torch

from engine.api import (
    DenoiseSettings,
    DraftRequest,
    EmptyRequestError,
    GenerationError,
    InfillRequest,
    ModelIncompleteError,
    ModelNotFoundError,
    ModelNotLoadedError,
    OutOfMemoryError,
    PromptTooLongError,
    RewriteRequest,
    UnsupportedModelError,
)
from engine.session import Session

FAST = DenoiseSettings(max_steps=6, seed=1)


@pytest.mark.parametrize(
    "request_",
    [
        DraftRequest(before="It was the best of times,", max_new_tokens=64, settings=FAST),
        RewriteRequest(
            selection="The harbour was quiet.",
            instruction="Make it shorter.",
            before="Morning.",
            after="Then wind.",
            settings=FAST,
        ),
        InfillRequest(before="The boats rested", after=" until the wind came.", settings=FAST),
    ],
    ids=["draft", "rewrite", "infill"],
)
def test_each_task_streams_steps_and_returns_text(session, request_) -> None:
    events = []
    result = session.run(request_, on_step=events.append)
    assert result.request_id == request_.request_id
    assert events and all(e.request_id == request_.request_id for e in events)
    assert [e.step for e in events if e.block == 0] == list(
        range(1, len([e for e in events if e.block == 0]) + 1)
    )
    assert result.candidates and isinstance(result.text, str)
    assert result.stats.forwards == result.stats.steps > 0
    assert result.stats.first_draft_seconds > 0
    assert not result.cancelled
    # What was shown at the last step is what accepting inserts.
    if not isinstance(request_, InfillRequest):
        assert events[-1].text == result.text


def test_k_alternatives(session) -> None:
    result = session.run(
        DraftRequest(
            before="The quick brown fox",
            max_new_tokens=32,
            settings=DenoiseSettings(max_steps=5, candidates=3, seed=4),
        )
    )
    assert len(result.candidates) == 3
    assert len({c.token_ids for c in result.candidates}) == 3


def test_infill_with_automatic_length_returns_best_first(session) -> None:
    result = session.run(
        InfillRequest(
            before="It was", after=" of times.", settings=DenoiseSettings(max_steps=5, candidates=2, seed=0)
        )
    )
    assert len(result.candidates) == 2
    assert result.candidates[0].confidence >= result.candidates[1].confidence


def test_cancelled_request_reports_it(session) -> None:
    cancel = threading.Event()
    cancel.set()
    result = session.run(DraftRequest(before="Hello", settings=DenoiseSettings(max_steps=30)), cancel=cancel)
    assert result.cancelled and result.stats.steps == 1


@pytest.mark.parametrize(
    "request_",
    [
        RewriteRequest(selection="   ", instruction="Shorter."),
        RewriteRequest(selection="text", instruction=""),
        DraftRequest(before="  "),
        InfillRequest(before="", after=""),
    ],
)
def test_empty_requests_are_refused_with_advice(session, request_) -> None:
    with pytest.raises(EmptyRequestError) as err:
        session.run(request_)
    assert err.value.message


def test_long_context_is_trimmed_with_a_notice(session) -> None:
    before = "the harbour was quiet and the boats rested " * 2000  # far beyond 4096 positions
    result = session.run(DraftRequest(before=before, max_new_tokens=32, settings=FAST))
    assert "longer than the model can read" in result.notice


def test_selection_longer_than_the_context_is_refused(session) -> None:
    with pytest.raises(PromptTooLongError):
        session.run(
            RewriteRequest(selection="word " * 6000, instruction="Shorter.", max_new_tokens=32, settings=FAST)
        )


def test_whole_long_document_rewrite_says_to_select_less(session) -> None:
    with pytest.raises(PromptTooLongError, match="Select a shorter passage"):
        session.run(RewriteRequest(selection="word " * 6000, instruction="Shorter.", settings=FAST))


def test_out_of_memory_is_reported_and_session_stays_usable(session, monkeypatch) -> None:
    import engine.session as session_module

    real = session_module.denoise

    def boom(*a, **k):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(session_module, "denoise", boom)
    with pytest.raises(OutOfMemoryError) as err:
        session.run(DraftRequest(before="Hello", settings=FAST))
    assert "memory" in err.value.message
    monkeypatch.setattr(session_module, "denoise", real)
    assert session.run(DraftRequest(before="Hello", max_new_tokens=32, settings=FAST)).candidates


def test_unexpected_exception_becomes_generation_error(session, monkeypatch) -> None:
    import engine.session as session_module

    monkeypatch.setattr(session_module, "denoise", lambda *a, **k: 1 / 0)
    with pytest.raises(GenerationError):
        session.run(DraftRequest(before="Hello", settings=FAST))


def test_run_without_a_model() -> None:
    with pytest.raises(ModelNotLoadedError):
        Session().run(DraftRequest(before="x"))


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError):
        Session().load(tmp_path / "nowhere")


def test_incomplete_checkpoint(tiny_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_dir, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(ModelIncompleteError, match="incomplete"):
        Session().load(broken)
    (broken / "tokenizer.json").unlink()
    shutil.copy(tiny_dir / "model.safetensors", weights)
    with pytest.raises(ModelIncompleteError, match="tokenizer"):
        Session().load(broken)


def test_not_a_diffusion_gemma(tiny_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(tiny_dir, other)
    config = json.loads((other / "config.json").read_text())
    config["model_type"] = "llama"
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="DiffusionGemma"):
        Session().load(other)


def test_bidirectional_all_is_refused_before_it_crashes_the_encoder(tiny_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "bidi"
    shutil.copytree(tiny_dir, other)
    config = json.loads((other / "config.json").read_text())
    config["text_config"]["use_bidirectional_attention"] = "all"
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="use_bidirectional_attention"):
        Session().load(other)


def test_pickle_only_and_remote_code_are_refused(tiny_dir: Path, tmp_path: Path) -> None:
    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_dir, pickled)
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    with pytest.raises(UnsupportedModelError, match="pickle"):
        Session().load(pickled)
    remote = tmp_path / "remote"
    shutil.copytree(tiny_dir, remote)
    config = json.loads((remote / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "evil.Model"}
    (remote / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match="own code"):
        Session().load(remote)


def test_tiny_checkpoint_has_a_small_vision_tower(tiny_dir: Path) -> None:
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    config = DiffusionGemmaConfig.from_pretrained(tiny_dir)
    model = DiffusionGemmaForBlockDiffusion(config)
    vision = sum(p.numel() for p in model.model.encoder.vision_tower.parameters())
    assert vision < 10_000  # the default config would build a full-size Gemma 4 vision tower


def test_alternatives_skip_empty_and_repeated_rows() -> None:
    from engine.api import Candidate
    from engine.display import distinct_nonempty as _distinct_nonempty

    rows = [
        Candidate("", (5,), 0.9),
        Candidate(" a", (1,), 0.5),
        Candidate(" a", (1,), 0.4),
        Candidate(" b", (2,), 0.3),
    ]
    assert [c.text for c in _distinct_nonempty(rows)] == [" a", " b"]
    assert [c.text for c in _distinct_nonempty([Candidate("", (5,), 0.9)])] == [""]  # never nothing at all
