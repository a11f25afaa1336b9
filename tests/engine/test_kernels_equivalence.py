"""The engine with `LETTERPRESS_KERNELS=triton` (Triton's interpreter on the CPU) still writes what it wrote
without: the fused vocabulary tail against `model.generate()` token for token, and the fused NF4 experts and
linears against the dequantize-then-matmul path on the NF4-quantized tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.helpers.kernels import DEVICE

pytest.importorskip("triton")

from engine.api import DenoiseSettings
from engine.denoise import Frozen, denoise

pytestmark = pytest.mark.skipif(
    DEVICE.type != "cpu", reason="the interpreter run; on a GPU see kernel_timing"
)


def _run(model, ids, settings: DenoiseSettings, seed: int, max_new: int, frozen: Frozen | None = None):
    gen = model.generation_config
    return denoise(
        model,
        ids,
        settings,
        max_new_tokens=max_new,
        eos_token_ids=gen.eos_token_id,
        pad_token_id=gen.pad_token_id,
        seed=seed,
        frozen=frozen,
    )


def test_fused_tail_draft_matches_generate(session, monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = session.model, session.tokenizer
    ids = tok("The quick brown fox", return_tensors="pt").input_ids
    torch.manual_seed(1)
    reference = model.generate(ids, max_new_tokens=32, max_denoising_steps=12).sequences
    monkeypatch.setenv("LETTERPRESS_KERNELS", "triton")
    calls = []
    import engine.kernels.vocab_tail as tail

    real = tail.tail_chunked
    monkeypatch.setattr(tail, "tail_chunked", lambda *a, **k: calls.append(1) or real(*a, **k))
    ours = _run(model, ids, DenoiseSettings(max_steps=12), seed=1, max_new=32)
    assert calls, "the fused tail did not run"
    assert torch.equal(ours.sequences, reference)


def test_fused_tail_infill_matches_the_unfused_loop(session, monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = session.model, session.tokenizer
    ids = tok("A writer drafts", return_tensors="pt").input_ids
    mask = torch.zeros(1, 32, dtype=torch.bool)
    mask[0, 20:] = True
    frozen = Frozen(mask=mask, ids=torch.randint(5, 400, (1, 32), generator=torch.Generator().manual_seed(2)))
    settings = DenoiseSettings(max_steps=12)
    plain = _run(model, ids, settings, seed=4, max_new=32, frozen=frozen)
    monkeypatch.setenv("LETTERPRESS_KERNELS", "triton")
    fused = _run(model, ids, settings, seed=4, max_new=32, frozen=frozen)
    assert torch.equal(fused.sequences, plain.sequences)
    assert torch.equal(fused.sequences[0, -12:], frozen.ids[0, 20:])
    torch.testing.assert_close(fused.confidence, plain.confidence, atol=1e-5, rtol=1e-4)


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


def test_fused_nf4_experts_and_linears_write_the_same_draft(
    nf4_session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.weights.quantize import NF4Weight

    model, tok = nf4_session.model, nf4_session.tokenizer
    ids = tok("It was the best of times", return_tensors="pt").input_ids
    settings = DenoiseSettings(max_steps=6)
    plain = _run(model, ids, settings, seed=3, max_new=32)
    monkeypatch.setenv("LETTERPRESS_KERNELS", "triton")
    dense_copies = []
    real = NF4Weight.dequantize
    monkeypatch.setattr(NF4Weight, "dequantize", lambda self, *a: dense_copies.append(1) or real(self, *a))
    fused = _run(model, ids, settings, seed=3, max_new=32)
    assert dense_copies == [], "a 4-bit matrix was dequantized to a dense copy with the kernels on"
    assert torch.equal(fused.sequences, plain.sequences)
