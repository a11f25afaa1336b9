"""One host synchronisation per decoder step on the device code path, the model's forward included.

The per-expert loop read `bincount().tolist()` in every MoE layer (one sync per layer: ~30 per step on the
26B-A4B); the device code path now runs an experts forward whose offsets stay on the device. Counted with the
benchmark's dispatch-mode counter on the CPU, on the path a GPU runs (`engine.denoise.device_code_path`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.api import DenoiseSettings, DraftRequest
from engine.tools.bench import Case, _count_engine_syncs


@pytest.fixture(scope="module")
def nf4_session(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    from engine.session import Session

    mp = pytest.MonkeyPatch()
    mp.setenv("LETTERPRESS_CACHE_DIR", str(tmp_path_factory.mktemp("qc")))
    s = Session()
    try:
        s.load(tiny_dir, device="cpu", quantization="nf4")
    finally:
        mp.undo()
    return s


CASE = Case("draft", "draft", lambda s: DraftRequest("It was the best of times", max_new_tokens=32, settings=s), 3)  # one canvas


@pytest.mark.parametrize("which", ["full", "nf4"])
def test_one_sync_per_decoder_step_on_the_device_path(session, nf4_session, which: str) -> None:
    s = session if which == "full" else nf4_session
    outside, inside = _count_engine_syncs(s, s.model, CASE, DenoiseSettings(seed=3, max_steps=6))
    assert inside == 0.0, f"{which}: the decoder forward synchronised {inside} times per step"
    assert outside == 1.0


def test_the_loop_experts_forward_would_be_counted(nf4_session, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter sees the old per-layer sync: with the sync-free switch disabled, the forward syncs again."""
    import engine.fastpath as fastpath

    monkeypatch.setattr(fastpath, "sync_free_experts", lambda model: None)
    _, inside = _count_engine_syncs(nf4_session, nf4_session.model, CASE, DenoiseSettings(seed=3, max_steps=6))
    assert inside >= 2.0  # one per MoE layer (2 decoder layers in the tiny model)


def test_sync_free_experts_give_the_loops_tokens(nf4_session) -> None:
    from engine.denoise import denoise, device_code_path

    model, tok = nf4_session.model, nf4_session.tokenizer
    ids = tok("The quick brown fox", return_tensors="pt").input_ids
    gen = model.generation_config
    kwargs = dict(max_new_tokens=32, eos_token_ids=gen.eos_token_id, pad_token_id=gen.pad_token_id, seed=4)
    host = denoise(model, ids, DenoiseSettings(max_steps=8), **kwargs)
    with device_code_path():
        device = denoise(model, ids, DenoiseSettings(max_steps=8), **kwargs)
    assert torch.equal(host.sequences, device.sequences)
    assert model.config.text_config._experts_implementation == "letterpress_nf4"  # the CPU host path is restored
