"""Step memory: the lean step's measured peak per canvas x vocabulary cell, and the fit estimate that covers
it."""

from __future__ import annotations

import pytest
import torch

from engine.tools.step_memory import LiveTensorBytes, measure_step_memory, tiny_body_model
from engine.weights import fit


def test_tracker_counts_live_storages_and_their_peak() -> None:
    tracker = LiveTensorBytes()
    with torch.inference_mode(), tracker:
        a = torch.zeros(1000, dtype=torch.float32)  # 4,000 bytes
        view = a[10:]  # a view: no new storage
        b = torch.ones(500, dtype=torch.float64)  # 4,000 bytes
        del a
        assert tracker.live == 8000  # `view` keeps a's storage alive
        del view
        c = b * 2
        del b, c
    assert tracker.peak == 8000 and tracker.live == 0


@pytest.mark.slow
def test_lean_step_is_at_most_8_bytes_per_cell_at_three_candidates() -> None:
    """The Done-when figure: the real vocabulary and canvas, a tiny bf16 body, the device code path, measured
    under no_grad as the process allocates (under inference_mode the tracker missed the fp32 copy the
    self-conditioning softmax makes of its input: 10.0 B/cell by the process before the chunked
    self-conditioning)."""
    result = measure_step_memory(3, model=tiny_body_model(dtype=torch.bfloat16))
    print("\n" + result.line())
    assert result.vocab == 262_144 and result.canvas == 256
    assert result.bytes_per_cell <= 8.05


@pytest.fixture(scope="module")
def mid_vocab_model():
    return tiny_body_model(vocab=16_384, canvas=256, dtype=torch.bfloat16)


@pytest.mark.parametrize(("candidates", "frozen"), [(1, False), (3, False), (3, True), (8, False)])
def test_fit_step_term_is_never_below_the_measured_peak(
    mid_vocab_model, candidates: int, frozen: bool
) -> None:
    measured = measure_step_memory(candidates, model=mid_vocab_model, frozen=frozen)
    config = mid_vocab_model.config.to_dict()
    est = fit.estimate(config, "bf16", context_tokens=16, candidates=candidates)
    assert est.candidates == candidates
    # The whole request on top of the weights: KV cache, step, prefill. The measured run holds all of them.
    assert est.request_bytes >= measured.peak_bytes, (measured.line(), est.text())
    # ... and the step term alone covers the vocabulary-sized part without being wildly pessimistic.
    assert est.logits_bytes >= 8.0 * measured.cells
    assert est.logits_bytes <= measured.peak_bytes + fit.STEP_CHUNK_BYTES + measured.cells


@pytest.mark.slow
def test_the_process_sees_at_most_8_bytes_per_cell_at_three_candidates() -> None:
    """Vocabulary 65,536 (a quarter of the real one: the fixed sampling chunk is then small beside 3 x 256 x
    65,536 cells), measured under no_grad. It was 10 B/cell: the self-conditioning softmax's fp32 copy of its
    input."""
    result = measure_step_memory(3, model=tiny_body_model(vocab=65_536, dtype=torch.bfloat16))
    assert result.bytes_per_cell <= 8.05, result.line()


def test_estimate_scales_with_candidates_and_context() -> None:
    from engine.tools.real_shape import real_config_dict

    config = real_config_dict()
    one = fit.estimate(config, "nf4", context_tokens=8192, candidates=1)
    three = fit.estimate(config, "nf4", context_tokens=8192, candidates=3)
    long = fit.estimate(config, "nf4", context_tokens=32768, candidates=3)
    assert three.logits_bytes > 2.9 * one.logits_bytes - fit.STEP_CHUNK_BYTES * 3
    # each row's cache, plus the request's one prefix-cache entry (a row's worth): 2 rows' worth at K=1
    assert three.kv_cache_bytes - one.kv_cache_bytes == 2 * (one.kv_cache_bytes // 2)
    assert long.kv_cache_bytes > three.kv_cache_bytes and long.activations_bytes > three.activations_bytes
    assert fit.estimate(config, "nf4", batch=3).total_bytes == three.total_bytes  # `batch` is the old name
    assert "3 candidates" in three.summary


def test_bench_step_memory_mode_reports_bytes_per_cell(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.tools.bench import format_step_memory, run_step_memory

    report = run_step_memory([3], vocab=4096)
    assert [r["frozen"] for r in report["runs"]] == [False, True]
    assert report["bytes_per_cell_at_3"] == max(r["bytes_per_cell"] for r in report["runs"])
    text = format_step_memory(report)
    assert "bytes per cell" in text and "bytes_per_cell_at_3" in text


def test_fit_assumes_the_loops_prefill_chunk() -> None:
    from engine.prefix_cache import PREFILL_CHUNK

    assert fit.PREFILL_CHUNK == PREFILL_CHUNK
