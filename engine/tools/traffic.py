"""The traffic model: bytes moved and FLOPs of every op of one decoder forward (a 256-token canvas x K rows
after `context` tokens), and the predicted time on named cards as the sum over ops of max(bytes / bandwidth,
FLOPs / peak): three columns, today's GPU path, the path with `engine.kernels` on, and the per-op roofline.

How each path's bytes are counted (per weight `w`, per cell `c` of the B x L x V logits, per element `e` of a
T x hidden activation; T = 256 x K tokens):

* NF4 weights, today: bitsandbytes dequantizes a 4-bit matrix (an expert stack:
  `engine.fastpath.reused_stack`) to a bf16 copy and the GEMM reads it back: codes 0.5 B/w + scales (uint8
  read, fp32 written, offset added into a new fp32 array, read by the kernel: 17 B per 64 weights) + 2 B/w
  written + 2 B/w read = 4.77 B/w. Kernels: 0.516 B/w (codes + double-quantized scales, read once,
  `engine.kernels.nf4_moe`).
* int8 weights (nf4-mixed's attention and dense MLP), today: `Int8Linear.forward` casts the codes to fp32 (1 +
  4), multiplies by the scales (4 + 4), casts to bf16 (4 + 2) and the GEMM reads that (2): 21 B/w. Kernels: 1
  B/w.
* The vocabulary tail, today: the lm_head writes bf16 logits, the forward casts them to fp32 and soft-caps
  them in three fp32 ops (2 + 6 + 24 B/c); the step divides by the temperature in place (8), the argmax reads
  (4), the entropy's logsumexp, softmax and product (60), the softmax for the sample and confidence (12 + 4),
  the Exp(1) draws (4), the division and its argmax (12 + 4), the bf16 self-conditioning copy (6): 146 B/c.
  Kernels (`engine.kernels.vocab_tail`, fed the raw bf16 lm_head output): lm_head write 2, two reads 4, the
  bf16 hand-off written 2: 8 B/c. The decoder's own softmax of the hand-off (2 + 4 + 4 + 6 = 16 B/c plus the
  matmul's 2) is model code, unchanged in both paths: what remains of the tail.
* RMSNorms, today: `x.float()`, square, mean, scale, weight, cast: 40 B/e each (8 per layer over the hidden
  size, q/k/v norms over the heads); kernels (`engine.kernels.rmsnorm`): read once, written once, 4 B/e.
* Everything else (residual adds 6 B/e; attention through SDPA reading each row's KV cache once; the embedding
  matmuls) is the same in both paths.
* The roofline: every op reads its inputs and writes its outputs once at their stored precision (weights 0.516
  B/w NF4, 1 B/w int8, 2 B/w bf16; 2 B per activation; norms 4 B/e; the tail 2 + 2 B/c; the hand-off softmax
  2 + 2 B/c).
FLOPs are 2 per multiply-add of the GEMMs and 4 x T x context x heads x head_dim for attention; the vocabulary
ops' few FLOPs per cell are counted too but never bind.

Floor and prediction are kept apart (they used to be one figure, "1.08x the roofline", true by construction):

* the floor: the roofline's bytes at 100% of the card's bandwidth, no launch cost;
* a prediction: the path's bytes as its kernels really move them at an achievable bandwidth
  (`ACHIEVABLE`, 90%: a device-to-device copy on the H200 moved 4.3 of 4.8 TB/s), FLOPs at `MMA_EFFICIENCY`
  of the peak, plus the path's kernel launches x a launch cost, in two columns: eager (`LAUNCH_US_EAGER` per
  launch: Python and the dispatcher between kernels, the GPU waiting) and CUDA graphs (`LAUNCH_US_GRAPH`).
* The fused NF4 experts' bytes come from the kernel's own tiling (`nf4_experts_kernel_bytes`, the tiles of
  `engine.kernels.configs`): every M block of 16 assignments re-reads (re-dequantizes) its expert's whole
  stack, every N tile re-reads its block's real activation rows (a padded row is masked off and reads
  nothing), plus the `align` grouping's launches. Its bytes are moved at `NF4_KERNEL_EFFICIENCY` of the
  achievable bandwidth (the kernel's efficiency: assumed until a card times it). The expected
  number of M blocks per expert is taken over the routing (each expert's count ~ Binomial(T, top_k / E)).
  Re-reads are counted as DRAM traffic: an upper bound where the L2 serves concurrent blocks of one expert.
Launch counts per op are counted from the code paths (`LAUNCHES`), approximately (within a few per layer).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

CANVAS = 256
NF4_BPW = 0.5 + 1 / 64 + 4 / (64 * 256)  # codes + uint8 absmax per 64 + fp32 absmax2 per 64 x 256
NF4_TODAY_BPW = 0.5 + 17 / 64 + 2 + 2  # codes, scale round trip, bf16 copy written, read back by the GEMM
INT8_TODAY_BPW = 1 + 4 + 4 + 4 + 4 + 2 + 2  # to(fp32), * scale, to(bf16), GEMM read
TAIL_TODAY_BPC = 146  # bytes per logits cell, today's lm_head post-processing + step (module docstring)
TAIL_KERNEL_BPC = 8
TAIL_ROOF_BPC = 4
HANDOFF_BPC = 18  # the decoder's softmax of the bf16 hand-off and its cast (model code) + the matmul's read
HANDOFF_ROOF_BPC = 4
NORM_TODAY_BPE = 40
NORM_ROOF_BPE = 4
NORM_KERNEL_BPE = 4  # engine.kernels.rmsnorm: read once, written once
RESIDUAL_BPE = 6

PATHS = ("today", "kernels", "roofline")
ACHIEVABLE = 0.90  # share of the card's bandwidth a streaming kernel reaches
# Share of ACHIEVABLE the fused NF4 experts kernel reaches (assumed, not measured: no card has timed it yet;
# its inner loop issues one 128-bit load per 16 bytes of codes, `tests/engine/test_kernels_ptx.py`, and 4-bit
# dequantizing GEMMs at a few rows per block are reported at 80-90% of a copy's bandwidth). `bench --kernels`
# on a card replaces it.
NF4_KERNEL_EFFICIENCY = 0.85
MMA_EFFICIENCY = 0.70  # share of the tensor peak a small-M GEMM reaches when it is compute-bound
LAUNCH_US_EAGER = 6.0  # per kernel launch in eager PyTorch (CPU dispatch between kernels, GPU idle)
LAUNCH_US_GRAPH = 1.5  # per kernel node replayed from a CUDA graph (launch latency and ramp)
NF4_ALIGN_LAUNCHES = 15  # engine.kernels.nf4_moe.align: torch ops (scatter_add, cumsums, argsort, ...)


@dataclass(frozen=True)
class Card:
    name: str
    bandwidth_gbs: float
    peak_tflops: float  # dense bf16 tensor throughput with fp32 accumulation
    l2_gbs: float = 0.0  # L2 bandwidth: what re-reads of a tile another block just read are served at


# The same published figures as engine.tools.realbench.DEVICE_PEAKS (GeForce cards at fp32 accumulation);
# L2 bandwidths are leads from public microbenchmarks (about 2.5-3x DRAM), not measured here.
CARDS: dict[str, Card] = {
    "3090": Card("RTX 3090", 936, 71, 2500),
    "4090": Card("RTX 4090", 1008, 165, 3500),
    "5090": Card("RTX 5090", 1792, 209, 5000),
    "H100": Card("H100 SXM", 3350, 989, 9000),
    "H200": Card("H200", 4800, 989, 9000),
}


@dataclass(frozen=True)
class Op:
    """One op of the forward, `count` times (e.g. once per layer of a kind), with each path's bytes per
    call."""

    name: str
    count: int
    flops: float
    bytes: dict[str, float]
    launches: dict[str, int] = field(default_factory=dict)  # kernels per call, per path
    rereads: dict[str, float] = field(default_factory=dict)  # bytes re-read (L2-served) per call, per path
    efficiency: dict[str, float] = field(default_factory=dict)  # share of ACHIEVABLE its kernel reaches

    def ms(self, path: str, card: Card) -> float:
        """The op's floor-style time: its bytes at 100% of the bandwidth or its FLOPs at the peak."""
        memory = self.bytes[path] / (card.bandwidth_gbs * 1e9)
        compute = self.flops / (card.peak_tflops * 1e12)
        return self.count * max(memory, compute) * 1e3

    def predicted_ms(self, path: str, card: Card, launch_us: float) -> float:
        """The op's predicted time: bytes at the achievable bandwidth, FLOPs at the GEMM efficiency, plus its
        launches."""
        share = ACHIEVABLE * self.efficiency.get(path, 1.0)
        memory = self.bytes[path] / (card.bandwidth_gbs * 1e9 * share)
        memory += self.rereads.get(path, 0.0) / (card.l2_gbs * 1e9 * share)
        compute = self.flops / (card.peak_tflops * 1e12 * MMA_EFFICIENCY)
        return self.count * (max(memory, compute) * 1e3 + self.launches.get(path, 0) * launch_us / 1e3)


def _weights_bytes(weights: int, storage: str) -> dict[str, float]:
    if storage == "nf4":
        return {"today": weights * NF4_TODAY_BPW, "kernels": weights * NF4_BPW, "roofline": weights * NF4_BPW}
    if storage == "int8":
        return {"today": weights * INT8_TODAY_BPW, "kernels": float(weights), "roofline": float(weights)}
    return dict.fromkeys(PATHS, 2.0 * weights)


def _same(value: float) -> dict[str, float]:
    return dict.fromkeys(PATHS, float(value))


def _add(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {p: a[p] + b[p] for p in PATHS}


def _linear(name: str, count: int, tokens: int, n_in: int, n_out: int, storage: str) -> Op:
    acts = _same(2.0 * tokens * (n_in + n_out))
    return Op(name, count, 2.0 * tokens * n_in * n_out, _add(_weights_bytes(n_in * n_out, storage), acts))


def expected_blocks(tokens: int, top_k: int, experts: int, block_m: int) -> float:
    """Expected number of M blocks of `block_m` assignments over all experts when each of `tokens` tokens
    picks `top_k` of `experts` (each expert's count ~ Binomial(tokens, top_k / experts))."""
    p = top_k / experts
    per_expert = 0.0
    for n in range(1, tokens + 1):
        pmf = math.comb(tokens, n) * p**n * (1 - p) ** (tokens - n)
        per_expert += pmf * math.ceil(n / block_m)
        if n > tokens * p * 4 + 64 and pmf < 1e-12:
            break
    return experts * per_expert


def nf4_experts_kernel_bytes(
    tokens: int, top_k: int, experts: int, hidden: int, inter: int, tiles: tuple[int, int] | None = None
) -> dict[str, float]:
    """Bytes the fused NF4 experts kernels move for one layer, from their tiling: (block_m, block_n) of
    `engine.kernels.configs` (gate_up and down share them). Keys: weights (with the re-reads of every M
    block), activations (A tiles re-read per N tile, outputs, the k-way sum), total; `dram` counts each byte
    once (the stack, the rows, the outputs), `rereads` the rest (served by the L2 when concurrent blocks
    share a tile)."""
    if tiles is None:
        from engine.kernels import configs

        tile = configs.CONFIGS[configs.NF4_GATED_BF16][-1]
        tiles = (tile.block_m, tile.block_n)
    block_m, block_n = tiles
    assigned = tokens * top_k
    blocks = expected_blocks(tokens, top_k, experts, block_m)
    gate_up_w = 2 * inter * hidden * NF4_BPW
    down_w = hidden * inter * NF4_BPW
    weights = blocks * (gate_up_w + down_w)
    # each N tile re-reads its block's activation rows; a padded row (-1) is masked off and reads nothing
    a_gate_up = math.ceil(inter / block_n) * assigned * hidden * 2.0  # bf16 rows
    a_down = math.ceil(hidden / block_n) * assigned * inter * 2.0
    writes = assigned * inter * 2.0 + assigned * hidden * 4.0  # mid (bf16), down's rows (fp32)
    k_sum = assigned * hidden * 4.0 + tokens * hidden * 2.0
    acts = a_gate_up + a_down + writes + k_sum
    dram = experts * (gate_up_w + down_w) + tokens * hidden * 2.0 + assigned * inter * 2.0 + writes + k_sum
    return {
        "blocks": blocks,
        "weights": weights,
        "activations": acts,
        "total": weights + acts,
        "dram": dram,
        "rereads": weights + acts - dram,
    }


def real_text_config() -> dict[str, Any]:
    from engine.tools.real_shape import real_config_dict

    return dict(real_config_dict(30, 262144)["text_config"])


def forward_ops(
    context: int = 8192, alternatives: int = 1, scheme: str = "nf4-mixed", text: dict[str, Any] | None = None
) -> list[Op]:
    """The ops of one decoder forward of the 26B-A4B (or of `text`, a text config) with K = `alternatives`
    rows."""
    from engine.weights.fit import _layer_groups
    from engine.weights.plan import storage_for

    text = text or real_text_config()
    rows = alternatives
    t = CANVAS * rows
    h = int(text["hidden_size"])
    inter = int(text["intermediate_size"])
    moe = int(text["moe_intermediate_size"])
    experts = int(text["num_experts"])
    top_k = int(text["top_k_experts"])
    vocab = int(text["vocab_size"])
    heads = int(text["num_attention_heads"])
    window = int(text.get("sliding_window") or 0)
    attn = storage_for(scheme, "attention")
    dense = storage_for(scheme, "dense_mlp")
    ops: list[Op] = []
    layers = 0
    for (layer_type, kv, hd, has_v), n in sorted(_layer_groups(text).items()):
        layers += n
        kind = layer_type.split("_")[0]
        q_out, kv_out = heads * hd, kv * hd
        proj = h * q_out + h * kv_out * (2 if has_v else 1) + q_out * h
        ops.append(_linear(f"attention q/k/v/o ({kind})", n, t, h, proj // h, attn))
        positions = context + CANVAS
        if layer_type == "sliding_attention" and window:
            positions = min(positions, window + CANVAS)
        kv_bytes = rows * positions * kv * hd * 2 * (2 if has_v else 1)
        qkv_norms = t * (q_out + 2 * kv_out)
        ops.append(
            Op(
                f"attention core, {positions:,} keys ({kind})",
                n,
                4.0 * t * positions * heads * hd,
                _same(kv_bytes + 2.0 * t * q_out * 2),
            )
        )
        ops.append(
            Op(
                f"q/k/v norms ({kind})",
                n,
                0.0,
                {
                    "today": qkv_norms * NORM_TODAY_BPE,
                    "kernels": qkv_norms * NORM_KERNEL_BPE,
                    "roofline": qkv_norms * NORM_ROOF_BPE,
                },
            )
        )
    ops.append(_linear("dense MLP gate/up/down", layers, t, h, 3 * inter, dense))
    ops.append(_linear("router", layers, t, h, experts, "16-bit"))
    stack = experts * (2 * moe * h + h * moe)
    assigned = t * top_k
    expert_flops = 2.0 * assigned * (2 * moe * h + h * moe)
    # activations: today transformers' grouped forward gathers the rows (r+w), writes gate_up, act*up (r, w),
    # down, the weighting (r+w) and the scatter-add (r+w); the kernel reads the rows, writes and reads the
    # intermediate, writes fp32 rows and sums them.
    acts_today = 2.0 * assigned * (2 * h + 2 * moe + 3 * moe + h + 2 * h + 2 * h)
    acts_kernel = assigned * (2.0 * h + 4.0 * moe + 4.0 * h) + t * h * 2.0
    acts_roof = 2.0 * t * h + 4.0 * assigned * moe + 2.0 * t * h
    w = _weights_bytes(stack, "nf4")
    fused = nf4_experts_kernel_bytes(t, top_k, experts, h, moe)
    ops.append(
        Op(
            "experts gate_up + down (NF4)",
            layers,
            expert_flops,
            {
                "today": w["today"] + acts_today,
                "kernels": fused["dram"],
                "roofline": w["roofline"] + acts_roof,
            },
            rereads={"kernels": fused["rereads"]},
            efficiency={"kernels": NF4_KERNEL_EFFICIENCY},
        )
    )
    del acts_kernel  # the tiling's own count replaces the per-assignment estimate
    elems = t * h
    ops.append(
        Op(
            "RMSNorms (8 per layer over hidden)",
            layers,
            0.0,
            {
                "today": 8 * elems * NORM_TODAY_BPE,
                "kernels": 8 * elems * NORM_KERNEL_BPE,
                "roofline": 8 * elems * NORM_ROOF_BPE,
            },
        )
    )
    ops.append(Op("residual adds and scales", layers, 0.0, _same(4 * elems * RESIDUAL_BPE)))
    cells = t * vocab
    embed = 2.0 * vocab * h
    ops.append(
        Op(
            "self-conditioning hand-off softmax",
            1,
            5.0 * cells,
            {
                "today": cells * HANDOFF_BPC,
                "kernels": cells * HANDOFF_BPC,
                "roofline": cells * HANDOFF_ROOF_BPC,
            },
        )
    )
    ops.append(
        Op("self-conditioning matmul (probs @ embedding)", 1, 2.0 * cells * h, _same(embed + 2.0 * t * h))
    )
    ops.append(_linear("self-conditioning MLP", 1, t, h, 3 * inter, dense))
    ops.append(Op("lm_head (tied embedding)", 1, 2.0 * cells * h, _same(embed + 2.0 * t * h)))
    ops.append(
        Op(
            "vocabulary tail (soft cap, temperature, entropy, argmax, sample, hand-off)",
            1,
            30.0 * cells,
            {
                "today": cells * TAIL_TODAY_BPC,
                "kernels": cells * TAIL_KERNEL_BPC,
                "roofline": cells * TAIL_ROOF_BPC,
            },
        )
    )
    return [replace(op, launches=_launches(op.name)) for op in ops]


# Kernels per call of each op, today and with engine.kernels (approximate, counted from the code paths).
LAUNCHES: dict[str, tuple[int, int]] = {
    "attention q/k/v/o": (4 + 6 + 4, 4 + 6 + 4),  # 4 linears (+ int8 dequantize casts today: counted below)
    "attention core": (3, 3),  # SDPA, mask, cache append
    "q/k/v norms": (3 * 6, 3),
    "dense MLP": (3 + 2 + 3 * 3, 3 + 2),  # 3 linears + act, mul (+ int8 casts today)
    "router": (8, 8),
    "experts": (22, NF4_ALIGN_LAUNCHES + 2 + 1),  # today: dequantize, offsets, grouped mm, act, scatter
    "RMSNorms": (8 * 6, 8),
    "residual": (8, 8),
    "self-conditioning hand-off": (4, 4),
    "self-conditioning matmul": (1, 1),
    "self-conditioning MLP": (5, 5),
    "lm_head": (1, 1),
    "vocabulary tail": (14, 1),
}


def _launches(name: str) -> dict[str, int]:
    for key, (today, kernels) in LAUNCHES.items():
        if name.startswith(key):
            return {"today": today, "kernels": kernels, "roofline": 0}
    return {"today": 1, "kernels": 1, "roofline": 0}


def predict_path(ops: Iterable[Op], card: Card, path: str, *, graphs: bool) -> float:
    """Predicted milliseconds of the forward on `card` along `path` (see the module docstring), eager or
    replayed from CUDA graphs."""
    cost = LAUNCH_US_GRAPH if graphs else LAUNCH_US_EAGER
    return sum(op.predicted_ms(path, card, cost) for op in ops)


def launches_per_forward(ops: Iterable[Op], path: str) -> int:
    return sum(op.count * op.launches.get(path, 0) for op in ops)


def predict(ops: Iterable[Op], card: Card, path: str) -> float:
    """Predicted milliseconds of the forward on `card`: the sum over ops of max(bytes / bandwidth, FLOPs /
    peak)."""
    return sum(op.ms(path, card) for op in ops)


def bounds(ops: list[Op], card: Card) -> dict[str, float]:
    """What the kernels' prediction (CUDA graph) could fall to, in ms: `grouped`, every expert's stack read
    once (tokens grouped by expert in one kernel, no re-read per M block or N tile); `grouped_at_full_
    efficiency`, that kernel at the achievable bandwidth itself; `rates_only`, the roofline's own bytes and
    FLOPs at the achievable rates with no launches: no kernel design goes under it while those rates hold."""
    grouped = [replace(op, rereads={}) for op in ops]
    full = [replace(op, rereads={}, efficiency={}) for op in ops]
    return {
        "grouped": predict_path(grouped, card, "kernels", graphs=True),
        "grouped_at_full_efficiency": predict_path(full, card, "kernels", graphs=True),
        "rates_only": sum(op.predicted_ms("roofline", card, 0.0) for op in ops),
    }


def report(context: int = 8192, alternatives: int = 1, scheme: str = "nf4-mixed") -> dict[str, Any]:
    """Per op and per card: the floor (roofline bytes at 100%, no launches) and the predictions (each path's
    bytes at the achievable bandwidth plus its launches, eager and with CUDA graphs), kept apart."""
    ops = forward_ops(context, alternatives, scheme)
    cards = {}
    for key, card in CARDS.items():
        floor = predict(ops, card, "roofline")
        pred = {
            f"{p}_{mode}_ms": round(predict_path(ops, card, p, graphs=mode == "graph"), 2)
            for p in ("today", "kernels")
            for mode in ("eager", "graph")
        }
        cards[key] = {
            **asdict(card),
            "floor_ms": round(floor, 2),
            **pred,
            "today_bytes_ms": round(predict(ops, card, "today"), 2),  # today's bytes at 100%, no launches
            "kernels_graph_vs_floor": round(pred["kernels_graph_ms"] / floor, 2),
            "kernels_eager_vs_floor": round(pred["kernels_eager_ms"] / floor, 2),
        }
    ref = CARDS["4090"]
    rows = [
        {
            "op": op.name,
            "count": op.count,
            "gflop": round(op.count * op.flops / 1e9, 2),
            **{f"{p}_gb": round(op.count * op.bytes[p] / 1e9, 3) for p in PATHS},
            "kernels_reread_gb": round(op.count * op.rereads.get("kernels", 0.0) / 1e9, 3),
            **{f"{p}_launches": op.count * op.launches.get(p, 0) for p in PATHS},
            "floor_ms_4090": round(op.ms("roofline", ref), 3),
            "kernels_graph_ms_4090": round(op.predicted_ms("kernels", ref, LAUNCH_US_GRAPH), 3),
        }
        for op in ops
    ]
    gap = sorted(
        ops, key=lambda op: op.ms("roofline", ref) - op.predicted_ms("kernels", ref, LAUNCH_US_GRAPH)
    )
    ref_floor = predict(ops, ref, "roofline")
    return {
        "context": context,
        "alternatives": alternatives,
        "scheme": scheme,
        "assumptions": {
            "achievable_bandwidth": ACHIEVABLE,
            "mma_efficiency": MMA_EFFICIENCY,
            "nf4_kernel_efficiency": NF4_KERNEL_EFFICIENCY,
            "launch_us_eager": LAUNCH_US_EAGER,
            "launch_us_graph": LAUNCH_US_GRAPH,
        },
        "launches": {p: launches_per_forward(ops, p) for p in ("today", "kernels")},
        "ops": rows,
        "cards": cards,
        "bounds_4090": {k: round(v / ref_floor, 2) for k, v in bounds(ops, ref).items()},
        "remaining_4090": [
            {
                "op": op.name,
                "extra_ms": round(
                    op.predicted_ms("kernels", ref, LAUNCH_US_GRAPH) - op.ms("roofline", ref), 2
                ),
            }
            for op in gap[:4]
        ],
    }


def format_report(r: dict[str, Any]) -> str:
    a = r["assumptions"]
    lines = [
        (
            f"Traffic model: one decoder forward, 256-token canvas x K={r['alternatives']} after "
            f"{r['context']:,} tokens, scheme {r['scheme']} "
            "(engine.tools.traffic; per-op times on an RTX 4090)"
        ),
        (
            "floor: the roofline's bytes at 100% of the bandwidth, no launches. predicted: the bytes each "
            f"path really moves at {a['achievable_bandwidth']:.0%} (re-reads at the L2's; the fused NF4 "
            f"experts at {a['nf4_kernel_efficiency']:.0%} of that, the kernel's efficiency, assumed), "
            "GEMMs at "
            f"{a['mma_efficiency']:.0%} of the peak, plus launches x {a['launch_us_eager']:g} us eager or "
            f"{a['launch_us_graph']:g} us in a CUDA graph ({r['launches']['today']} launches today, "
            f"{r['launches']['kernels']} with the kernels)"
        ),
        (
            f"{'op':<54} {'n':>3} {'GFLOP':>8} {'today GB':>9} {'kern GB':>8} {'reread':>7} {'roof GB':>8} "
            f"{'floor ms':>9} {'kern ms':>8}"
        ),
    ]
    for o in r["ops"]:
        lines.append(
            f"{o['op'][:54]:<54} {o['count']:>3} {o['gflop']:>8.1f} {o['today_gb']:>9.2f} "
            f"{o['kernels_gb']:>8.2f} {o['kernels_reread_gb']:>7.2f} {o['roofline_gb']:>8.2f} "
            f"{o['floor_ms_4090']:>9.2f} {o['kernels_graph_ms_4090']:>8.2f}"
        )
    total = {p: sum(o[f"{p}_gb"] for o in r["ops"]) for p in PATHS}
    lines.append(
        f"{'total bytes':<54} {'':>3} {'':>8} {total['today']:>9.2f} {total['kernels']:>8.2f} "
        f"{sum(o['kernels_reread_gb'] for o in r['ops']):>7.2f} {total['roofline']:>8.2f}"
    )
    lines.append("")
    lines.append(
        f"{'card':<10} {'floor ms':>9} | predicted ms: {'today eager':>11} {'today graph':>11} "
        f"{'kern eager':>10} {'kern graph':>10} | {'kern graph/floor':>16}"
    )
    for c in r["cards"].values():
        lines.append(
            f"{c['name']:<10} {c['floor_ms']:>9.1f} | {'':>13} {c['today_eager_ms']:>11.1f} "
            f"{c['today_graph_ms']:>11.1f} {c['kernels_eager_ms']:>10.1f} {c['kernels_graph_ms']:>10.1f} | "
            f"{c['kernels_graph_vs_floor']:>15.2f}x"
        )
    b = r["bounds_4090"]
    lines.append("")
    lines.append(
        f"Bounds on the RTX 4090, x the floor: every expert stack read once (tokens grouped by expert) "
        f"{b['grouped']:.2f}x; that kernel at {a['achievable_bandwidth']:.0%} of the bandwidth itself "
        f"{b['grouped_at_full_efficiency']:.2f}x; the roofline's own bytes at the achievable rates, no "
        f"launches {b['rates_only']:.2f}x"
    )
    lines.append(
        "Largest gaps between prediction (kernels, CUDA graph) and floor (RTX 4090): "
        + "; ".join(f"{x['op']} +{x['extra_ms']:.2f} ms" for x in r["remaining_4090"])
    )
    return "\n".join(lines)


def main_traffic(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine bench --traffic",
        description="bytes, FLOPs and predicted time per op of one forward",
    )
    parser.add_argument("--context", type=int, default=8192, help="tokens before the canvas (default 8192)")
    parser.add_argument(
        "--alternatives",
        "--candidates",
        dest="alternatives",
        type=int,
        default=1,
        help="K rows denoised together (default 1)",
    )
    parser.add_argument(
        "--scheme",
        choices=["nf4", "nf4-mixed"],
        default="nf4-mixed",
        help="quantization plan (default nf4-mixed, what 'auto' picks on a 24 GB card)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.context < 0 or args.alternatives < 1:
        parser.error("--context must be >= 0 and --alternatives >= 1")
    r = report(args.context, args.alternatives, args.scheme)
    print(json.dumps(r) if args.json else format_report(r))
    return 0
