"""The traffic model's arithmetic (engine.tools.traffic) and `python -m engine bench --traffic`."""

from __future__ import annotations

import json

import pytest

from engine.tools.traffic import (
    CARDS,
    INT8_TODAY_BPW,
    NF4_BPW,
    NF4_TODAY_BPW,
    Card,
    Op,
    forward_ops,
    predict,
    report,
)


def test_an_op_takes_the_larger_of_its_memory_and_compute_time() -> None:
    card = Card("test", bandwidth_gbs=1000, peak_tflops=100)
    memory_bound = Op("m", 3, flops=1e9, bytes={"today": 2e9, "kernels": 1e9, "roofline": 5e8})
    compute_bound = Op("c", 1, flops=1e12, bytes={"today": 1e6, "kernels": 1e6, "roofline": 1e6})
    assert memory_bound.ms("today", card) == pytest.approx(3 * 2.0)  # 2 GB / 1 TB/s = 2 ms, three times
    assert memory_bound.ms("roofline", card) == pytest.approx(3 * 0.5)
    assert compute_bound.ms("today", card) == pytest.approx(10.0)  # 1 TFLOP / 100 TFLOP/s
    assert predict([memory_bound, compute_bound], card, "kernels") == pytest.approx(3 * 1.0 + 10.0)


def test_weight_bytes_per_path() -> None:
    assert pytest.approx(0.5 + 1 / 64 + 4 / 16384) == NF4_BPW
    assert pytest.approx(4.7656, abs=1e-4) == NF4_TODAY_BPW
    assert INT8_TODAY_BPW == 21
    experts = next(op for op in forward_ops(8192, 1) if op.name.startswith("experts"))
    weights = 128 * (2 * 704 * 2816 + 2816 * 704)
    assert experts.count == 30
    # the issue's figures: 11.8 GB of 4-bit weights, ~103 GB of traffic today (plus the scale round trip)
    assert experts.count * weights * NF4_BPW / 1e9 == pytest.approx(11.78, abs=0.01)
    assert experts.count * experts.bytes["today"] / 1e9 == pytest.approx(111.7, abs=0.5)
    assert experts.bytes["kernels"] < experts.bytes["today"] / 8


@pytest.mark.parametrize(("alternatives", "today", "roofline"), [(1, 172, 26.5), (3, 241, 57.7)])
def test_reproduces_the_issues_4090_figures(alternatives: int, today: float, roofline: float) -> None:
    """Issue 26's model: today 172 / 241 ms, roofline 26.5 / 57.7 ms on a 4090 at 8K (nf4-mixed, auto on 24
    GB)."""
    cards = report(8192, alternatives, "nf4-mixed")["cards"]["4090"]
    assert cards["today_ms"] == pytest.approx(today, rel=0.03)
    assert cards["roofline_ms"] == pytest.approx(roofline, rel=0.02)


def test_the_kernel_path_is_within_one_and_a_half_rooflines_at_k1_8k_on_a_4090() -> None:
    r = report(8192, 1, "nf4-mixed")
    card = r["cards"]["4090"]
    assert card["kernels_ms"] <= 1.5 * card["roofline_ms"]
    assert card["kernels_ms"] < card["today_ms"] / 4
    assert r["remaining_4090"] and r["remaining_4090"][0]["extra_ms"] > 0


def test_longer_context_and_more_alternatives_cost_more() -> None:
    card = CARDS["4090"]
    base = predict(forward_ops(2048, 1), card, "roofline")
    assert predict(forward_ops(32768, 1), card, "roofline") > base
    assert predict(forward_ops(2048, 3), card, "roofline") > base
    # faster cards predict less time for the same forward
    ops = forward_ops(8192, 1)
    assert (
        predict(ops, CARDS["H200"], "today")
        < predict(ops, CARDS["4090"], "today")
        < predict(ops, CARDS["3090"], "today")
    )


def test_bench_traffic_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.__main__ import main

    assert main(["bench", "--traffic", "--context", "2048", "--alternatives", "3"]) == 0
    text = capsys.readouterr().out
    assert "K=3 after 2,048 tokens" in text
    for card in ("RTX 3090", "RTX 4090", "RTX 5090", "H100 SXM", "H200"):
        assert card in text
    assert "experts gate_up + down" in text and "What remains" in text
    assert main(["bench", "--traffic", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["context"] == 8192 and data["alternatives"] == 1 and set(data["cards"]) == set(CARDS)


def test_bench_kernels_says_plainly_when_there_is_no_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from engine.__main__ import main
    from engine.tools.kernel_timing import NO_DEVICE, time_kernels

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: tests/engine/test_kernels_moe.py's gpu marks time it")
    assert time_kernels() == {"timed": False, "message": NO_DEVICE}
    assert main(["bench", "--kernels"]) == 0
    assert capsys.readouterr().out.strip() == "no CUDA device: kernels not timed"


@pytest.mark.gpu
def test_kernel_timing_on_the_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from engine.tools.kernel_timing import time_kernels

    report = time_kernels(experts=8, iters=2)
    assert report["timed"] is True
    for op, entry in report["ops"].items():
        assert "error" not in entry, (op, entry)
        assert all(side["ms"] > 0 for side in entry["sides"].values())
    assert report["ops"]["vocab_tail"]["sides"]["fused_tail"]["argmax_equal"] is True
