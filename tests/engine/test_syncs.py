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


CASE = Case(
    "draft", "draft", lambda s: DraftRequest("It was the best of times", max_new_tokens=32, settings=s), 3
)  # one canvas


@pytest.mark.parametrize("which", ["full", "nf4"])
def test_one_sync_per_decoder_step_on_the_device_path(session, nf4_session, which: str) -> None:
    s = session if which == "full" else nf4_session
    outside, inside = _count_engine_syncs(s, s.model, CASE, DenoiseSettings(seed=3, max_steps=6))
    assert inside == 0.0, f"{which}: the decoder forward synchronised {inside} times per step"
    assert outside == 1.0


def test_the_loop_experts_forward_would_be_counted(nf4_session, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter sees the old per-layer sync: with the sync-free switch disabled, the forward syncs
    again."""
    import engine.fastpath as fastpath

    monkeypatch.setattr(fastpath, "sync_free_experts", lambda model: None)
    _, inside = _count_engine_syncs(
        nf4_session, nf4_session.model, CASE, DenoiseSettings(seed=3, max_steps=6)
    )
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
    assert (
        model.config.text_config._experts_implementation == "letterpress_nf4"
    )  # the CPU host path is restored


def _audit_decoder_forwards(session, monkeypatch: pytest.MonkeyPatch, grouped_mm: str):
    """Every ATen op inside the decoder forwards of one draft on the device code path, with the syncs a CUDA
    device of compute capability 8.6 (RTX 3090) would make (`engine.tools.sync_audit`). The Triton
    interpreter's own work while it emulates a kernel launch is left out (on a GPU the launch is
    asynchronous)."""
    import engine.kernels.grouped_gemm as gg
    from engine.denoise import device_code_path
    from engine.tools.sync_audit import auditing

    monkeypatch.setenv("LETTERPRESS_GROUPED_MM", grouped_mm)
    state = {"forward": 0, "kernel": 0}
    real_kernel = gg._kernel

    class Launch:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            def run(*a, **k):
                state["kernel"] += 1
                try:
                    return self.kernel[grid](*a, **k)
                finally:
                    state["kernel"] -= 1

            return run

    monkeypatch.setattr(gg, "_kernel", lambda interpret: Launch(real_kernel(interpret)))
    model = session.model
    original = model.forward

    def forward(*a, **k):
        state["forward"] += 1
        try:
            return original(*a, **k)
        finally:
            state["forward"] -= 1

    monkeypatch.setattr(model, "forward", forward)
    with (
        auditing((8, 6), quiet=lambda: not state["forward"] or state["kernel"] > 0) as audit,
        device_code_path(),
    ):
        session.run(CASE.build(DenoiseSettings(seed=3, max_steps=4)), on_step=lambda e: None)
    return audit


def test_no_op_of_the_8x_experts_path_syncs_on_cuda(nf4_session, monkeypatch: pytest.MonkeyPatch) -> None:
    """On compute capability 8.x the decoder forward runs no op that synchronises on CUDA (the Triton grouped
    GEMM keeps the offsets on the device), and no function on the experts path reads a value to the host."""
    from engine import fastpath
    from engine.kernels import grouped_gemm
    from engine.tools.sync_audit import source_reads

    audit = _audit_decoder_forwards(nf4_session, monkeypatch, "triton")
    assert audit.ops["sort"] > 0 and audit.ops["histc"] > 0  # the audit saw the experts path
    assert audit.total_syncs == 0, f"ops that sync on CUDA: {dict(audit.syncing)}"
    path = (
        fastpath.sync_free_nf4_experts_forward,
        fastpath.device_offsets_experts_forward,
        fastpath.reused_stack,
        fastpath._fill_stack,
        grouped_gemm.grouped_mm_nt,
        grouped_gemm.tile_schedule,
    )
    assert source_reads(*path) == []


def test_the_audit_sees_torchs_grouped_mm_sync_on_8x(nf4_session, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: torch's grouped GEMM (what transformers' forward calls) is a sync on 8.x, twice per
    MoE layer per forward; the per-expert loop's bincount + tolist is seen too."""
    from engine.tools.sync_audit import source_reads
    from engine.weights.quantize import nf4_experts_forward

    audit = _audit_decoder_forwards(nf4_session, monkeypatch, "torch")
    assert audit.syncing["_grouped_mm"] + audit.syncing["grouped_mm"] >= 2 * 2
    assert [r.split(": ")[-1] for r in source_reads(nf4_experts_forward)] == [".tolist()"]
