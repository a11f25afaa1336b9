"""The fit estimate: right parameter counts, visible arithmetic, and the verdict for the real 26B-A4B."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.tools.real_shape import real_config_dict
from engine.weights import fit

CARD_24GB = 24 * 1024**3 - 1024**3  # a 24 GB card with ~1 GB taken by the desktop and the driver


def _skeleton_params(config: dict) -> int:
    from transformers import DiffusionGemmaConfig

    from engine.weights.stream_load import build_skeleton_from_config

    model = build_skeleton_from_config(DiffusionGemmaConfig(**config), torch.bfloat16)
    return sum(p.numel() for p in model.parameters())  # parameters() counts shared ones once


@pytest.mark.parametrize("layers", [1, 7])
def test_param_counts_match_the_model_transformers_builds(layers: int) -> None:
    config = real_config_dict(layers, vocab_size=4096)
    counts = fit.param_counts(config)
    # layer_scalar is a buffer, not a parameter: one per layer
    assert counts.total - layers == _skeleton_params(config)


def test_real_26b_a4b_at_4_bits_and_8k_context_fits_a_24gb_card(capsys: pytest.CaptureFixture[str]) -> None:
    config = real_config_dict()
    counts = fit.param_counts(config)
    assert 25.0e9 < counts.total < 25.5e9 and 22.5e9 < counts.experts < 23.0e9  # ~25.2B, 22.8B in experts
    est = fit.estimate(
        config,
        "nf4",
        context_tokens=8192,
        device="cuda:0 (24 GB card)",
        available_bytes=CARD_24GB,
        candidates=fit.DEFAULT_CANDIDATES,
    )
    print("\n" + est.text())  # shown with `pytest -s`; the README quotes it
    assert est.verdict == "fits"
    assert 12e9 < est.weights_bytes < 16e9
    assert est.total_bytes == sum(
        (est.weights_bytes, est.kv_cache_bytes, est.logits_bytes, est.activations_bytes, est.overhead_bytes)
    )
    text = est.text()
    for part in (
        "weights",
        "KV cache",
        "logits",
        "self-conditioning",
        "activations",
        "overhead",
        "total",
        "fits",
    ):
        assert part in text
    assert "x 0.5159 bytes" in text  # the arithmetic, not just the result


def test_real_model_in_bf16_or_8bit_does_not_fit_a_24gb_card() -> None:
    config = real_config_dict()
    assert fit.estimate(config, "bf16", available_bytes=CARD_24GB).verdict == "wont_fit"
    assert fit.estimate(config, "int8", available_bytes=CARD_24GB).verdict == "wont_fit"
    assert fit.estimate(config, "bf16", available_bytes=80 * 1024**3).verdict == "fits"


def test_verdict_thresholds() -> None:
    config = real_config_dict()
    total = fit.estimate(config, "nf4").total_bytes
    assert fit.estimate(config, "nf4", available_bytes=int(total / 0.95)).verdict == "tight"
    assert fit.estimate(config, "nf4", available_bytes=total - 1).verdict == "wont_fit"
    assert fit.estimate(config, "nf4").verdict == "unknown"
    longer = fit.estimate(config, "nf4", context_tokens=32768)
    assert longer.kv_cache_bytes > fit.estimate(config, "nf4").kv_cache_bytes


def test_load_that_cannot_fit_is_refused_with_numbers(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.api import WontFitError
    from engine.weights.loader import load_model

    monkeypatch.setattr(fit, "host_memory", lambda: fit.DeviceMemory("cpu", "host RAM", 10**6, 10**6))
    with pytest.raises(WontFitError) as err:
        load_model(tiny_dir, device="cpu", quantization="none")
    assert "GB" in err.value.message and "weights" in err.value.message


def test_quantization_plan_keeps_router_and_norms_16_bit_and_mixed_adds_8_bit() -> None:

    config = real_config_dict()
    for scheme in ("nf4", "nf4-mixed"):
        rows = {r.kind: r for r in fit.plan_rows(config, scheme)}
        assert rows["router"].storage == rows["norms"].storage == rows["embedding"].storage == "16-bit"
        assert rows["experts"].storage == "nf4"
        assert 10.8e6 < rows["router"].weights < 10.9e6 and rows["router"].bytes == 2 * rows["router"].weights
        assert sum(r.weights for r in rows.values()) == fit.param_counts(config).total
    mixed = {r.kind: r.storage for r in fit.plan_rows(config, "nf4-mixed")}
    assert mixed["attention"] == mixed["dense_mlp"] == "int8"
    nf4 = fit.estimate(config, "nf4", available_bytes=CARD_24GB, candidates=3)
    both = fit.estimate(config, "nf4-mixed", available_bytes=CARD_24GB, candidates=3)
    assert (
        0.7e9 < both.weights_bytes - nf4.weights_bytes < 0.9e9
    )  # attention + dense MLP: 1 byte instead of 0.52
    assert nf4.verdict == "fits" and both.verdict in ("fits", "tight")  # +0.8 GB of 8-bit weights
    assert "router" in fit.plan_text(config, "nf4") and "int8" in both.text()


def _fit_vs_simulation(context: int, candidates: int) -> tuple[int, int]:
    from engine.tools.memory_sim import simulate
    from engine.tools.real_shape import real_config_dict
    from engine.weights.fit import estimate

    need = simulate(context, candidates).total
    est = estimate(real_config_dict(), "nf4", context_tokens=context, candidates=candidates)
    return est.total_bytes - est.overhead_bytes, need


def test_fit_holds_the_simulated_need_where_it_used_to_run_out() -> None:
    """32K context, 3 alternatives, the real config on the meta device (engine.tools.memory_sim): the fit said
    21.26 GB while the run needed 23.45 GB (the 512-dim global layers' K/V copy, the prefix-cache entry)."""
    fit_bytes, need = _fit_vs_simulation(32768, 3)
    assert fit_bytes >= need, f"fit {fit_bytes / 1e9:.3f} GB < simulated {need / 1e9:.3f} GB"


@pytest.mark.slow
@pytest.mark.parametrize("candidates", range(1, 9))
@pytest.mark.parametrize("context", [8192, 16384, 32768])
def test_fit_holds_the_simulated_need_at_every_context_and_candidate_count(
    context: int, candidates: int
) -> None:
    """Every point the budget may plan (8K/16K/32K x K = 1..8), excluding the fixed CUDA overhead on both
    sides; ~10 s a point (a 30-layer forward on the meta device)."""
    fit_bytes, need = _fit_vs_simulation(context, candidates)
    assert fit_bytes >= need, f"fit {fit_bytes / 1e9:.3f} GB < simulated {need / 1e9:.3f} GB"
