"""The traffic model's arithmetic (engine.tools.traffic) and `python -m engine bench --traffic`."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine.tools.traffic import (
    ACHIEVABLE,
    CARDS,
    INT8_TODAY_BPW,
    LAUNCH_US_EAGER,
    LAUNCH_US_GRAPH,
    NF4_BPW,
    NF4_KERNEL_EFFICIENCY,
    NF4_TODAY_BPW,
    Card,
    Op,
    forward_ops,
    nf4_experts_kernel_bytes,
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
    assert cards["today_bytes_ms"] == pytest.approx(today, rel=0.03)
    assert cards["floor_ms"] == pytest.approx(roofline, rel=0.02)


@pytest.mark.parametrize("alternatives", [1, 3])
def test_fused_experts_bytes_match_the_kernels_own_grid(alternatives: int) -> None:
    """The model's bytes for the fused NF4 experts against a count from the kernel's launch: `align` on real
    routings (128 experts, top-8) gives the M blocks, the launch grid's N tiles give what each program reads
    (its expert's BLOCK_N rows x K of weights, its block's real activation rows x K), summed over the
    programs."""
    import torch

    from engine.kernels import configs
    from engine.kernels.nf4_moe import align

    tile = configs.CONFIGS[configs.NF4_GATED_BF16][-1]
    hidden, inter, experts, top_k = 2816, 704, 128, 8
    tokens = 256 * alternatives
    counted = []
    for seed in range(6):
        gen = torch.Generator().manual_seed(seed)
        index = torch.rand(tokens, experts, generator=gen).topk(top_k, dim=-1).indices
        _, block_expert = align(index, experts, tile.block_m)
        blocks = int((block_expert < experts).sum())
        weights = acts = 0.0
        for n, k, halves in ((inter, hidden, 2), (hidden, inter, 1)):  # gate_up (gate and up tiles), down
            for n0 in range(0, n, tile.block_n):  # one program per (M block, N tile), as the grid launches
                rows = min(tile.block_n, n - n0)
                weights += blocks * halves * rows * k * NF4_BPW
                acts += tokens * top_k * k * 2.0  # every assignment's row once; padding (-1) is masked off
        counted.append((blocks, weights, acts))
    model = nf4_experts_kernel_bytes(tokens, top_k, experts, hidden, inter)
    blocks, weights, acts = (sum(c[i] for c in counted) / len(counted) for i in range(3))
    assert model["blocks"] == pytest.approx(blocks, rel=0.03)
    assert model["weights"] == pytest.approx(weights, rel=0.03)
    outputs = tokens * top_k * (inter * 2.0 + hidden * 4.0 + hidden * 4.0) + tokens * hidden * 2.0
    assert model["activations"] == pytest.approx(acts + outputs, rel=0.03)
    # every M block re-reads its expert: more than one block per expert on average, so more than the stack
    assert model["weights"] > experts * 3 * inter * hidden * NF4_BPW * (1.3 if alternatives == 1 else 3.0)


@pytest.mark.parametrize("alternatives", [1, 3])
def test_floor_and_prediction_are_apart_and_launches_count(alternatives: int) -> None:
    r = report(8192, alternatives, "nf4-mixed")
    card = r["cards"]["4090"]
    assert card["floor_ms"] < card["kernels_graph_ms"] < card["kernels_eager_ms"] < card["today_eager_ms"]
    assert card["today_graph_ms"] < card["today_eager_ms"]
    eager_cost = (card["kernels_eager_ms"] - card["kernels_graph_ms"]) * 1e3
    launches = r["launches"]["kernels"]
    assert eager_cost == pytest.approx(launches * (LAUNCH_US_EAGER - LAUNCH_US_GRAPH), rel=0.01)
    assert r["launches"]["today"] > launches > 1000  # thousands of launches per forward without graphs
    experts = next(o for o in r["ops"] if o["op"].startswith("experts"))
    assert experts["kernels_reread_gb"] > 0  # the re-dequantization per M block is in the prediction


@pytest.mark.parametrize("alternatives", [1, 3])
def test_the_bounds_fall_in_order_between_the_prediction_and_the_floor(alternatives: int) -> None:
    """Grouping tokens by expert removes exactly the experts' re-reads; running that kernel at full efficiency
    removes its efficiency; the roofline's bytes at the achievable rates is under both and over the floor."""
    r = report(8192, alternatives, "nf4-mixed")
    b, card = r["bounds_4090"], r["cards"]["4090"]
    assert 1.0 < b["rates_only"] < b["grouped_at_full_efficiency"] < b["grouped"]
    assert b["grouped"] < card["kernels_graph_vs_floor"]
    experts = next(o for o in r["ops"] if o["op"].startswith("experts"))
    ref = CARDS["4090"]
    removed = (card["kernels_graph_vs_floor"] - b["grouped"]) * card["floor_ms"]
    assert removed == pytest.approx(  # the re-reads at the L2's bandwidth and the kernel's efficiency
        experts["kernels_reread_gb"] / (ref.l2_gbs * ACHIEVABLE * NF4_KERNEL_EFFICIENCY) * 1e3,
        rel=0.05,
        abs=0.3,
    )


def test_the_prediction_uses_an_achievable_bandwidth_not_the_peak() -> None:
    card = Card("test", bandwidth_gbs=1000, peak_tflops=1e6, l2_gbs=3000)
    op = Op("m", 1, 0.0, {"today": 9e8, "kernels": 9e8, "roofline": 9e8}, launches={"kernels": 10})
    assert op.ms("kernels", card) == pytest.approx(0.9)
    assert op.predicted_ms("kernels", card, launch_us=2.0) == pytest.approx(0.9 / ACHIEVABLE + 0.02)


def test_the_nf4_kernels_efficiency_slows_only_its_own_op() -> None:
    from engine.tools.traffic import NF4_KERNEL_EFFICIENCY

    card = Card("test", bandwidth_gbs=1000, peak_tflops=1e6, l2_gbs=3000)
    plain = Op("m", 1, 0.0, dict.fromkeys(("today", "kernels", "roofline"), 9e8))
    slow = replace(plain, efficiency={"kernels": 0.5})
    assert slow.predicted_ms("kernels", card, 0.0) == pytest.approx(
        2 * plain.predicted_ms("kernels", card, 0.0)
    )
    assert slow.ms("kernels", card) == plain.ms("kernels", card)  # the floor never sees it
    experts = next(op for op in forward_ops(8192, 1) if op.name.startswith("experts"))
    assert experts.efficiency == {"kernels": NF4_KERNEL_EFFICIENCY} and 0 < NF4_KERNEL_EFFICIENCY <= 1
    assert report(8192, 1)["assumptions"]["nf4_kernel_efficiency"] == NF4_KERNEL_EFFICIENCY


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
    assert "experts gate_up + down" in text and "Largest gaps" in text and "floor ms" in text
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
