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
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
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


@dataclass(frozen=True)
class Card:
    name: str
    bandwidth_gbs: float
    peak_tflops: float  # dense bf16 tensor throughput with fp32 accumulation


# The same published figures as engine.tools.realbench.DEVICE_PEAKS (GeForce cards at fp32 accumulation).
CARDS: dict[str, Card] = {
    "3090": Card("RTX 3090", 936, 71),
    "4090": Card("RTX 4090", 1008, 165),
    "5090": Card("RTX 5090", 1792, 209),
    "H100": Card("H100 SXM", 3350, 989),
    "H200": Card("H200", 4800, 989),
}


@dataclass(frozen=True)
class Op:
    """One op of the forward, `count` times (e.g. once per layer of a kind), with each path's bytes per
    call."""

    name: str
    count: int
    flops: float
    bytes: dict[str, float]

    def ms(self, path: str, card: Card) -> float:
        memory = self.bytes[path] / (card.bandwidth_gbs * 1e9)
        compute = self.flops / (card.peak_tflops * 1e12)
        return self.count * max(memory, compute) * 1e3


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
    ops.append(
        Op(
            "experts gate_up + down (NF4)",
            layers,
            expert_flops,
            {
                "today": w["today"] + acts_today,
                "kernels": w["kernels"] + acts_kernel,
                "roofline": w["roofline"] + acts_roof,
            },
        )
    )
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
    return ops


def predict(ops: Iterable[Op], card: Card, path: str) -> float:
    """Predicted milliseconds of the forward on `card`: the sum over ops of max(bytes / bandwidth, FLOPs /
    peak)."""
    return sum(op.ms(path, card) for op in ops)


def report(context: int = 8192, alternatives: int = 1, scheme: str = "nf4-mixed") -> dict[str, Any]:
    ops = forward_ops(context, alternatives, scheme)
    cards = {}
    for key, card in CARDS.items():
        times = {p: round(predict(ops, card, p), 2) for p in PATHS}
        cards[key] = {
            **asdict(card),
            **{f"{p}_ms": v for p, v in times.items()},
            "today_vs_roofline": round(times["today"] / times["roofline"], 2),
            "kernels_vs_roofline": round(times["kernels"] / times["roofline"], 2),
        }
    rows = [
        {
            "op": op.name,
            "count": op.count,
            "gflop": round(op.count * op.flops / 1e9, 2),
            **{f"{p}_gb": round(op.count * op.bytes[p] / 1e9, 3) for p in PATHS},
            **{f"{p}_ms_4090": round(op.ms(p, CARDS["4090"]), 3) for p in PATHS},
        }
        for op in ops
    ]
    ref = CARDS["4090"]
    remains = sorted(ops, key=lambda op: op.ms("roofline", ref) - op.ms("kernels", ref))[:4]
    return {
        "context": context,
        "alternatives": alternatives,
        "scheme": scheme,
        "ops": rows,
        "cards": cards,
        "remaining_4090": [
            {"op": op.name, "extra_ms": round(op.ms("kernels", ref) - op.ms("roofline", ref), 2)}
            for op in remains
            if op.ms("kernels", ref) > op.ms("roofline", ref) + 0.005
        ],
    }


def format_report(r: dict[str, Any]) -> str:
    lines = [
        (
            f"Traffic model: one decoder forward, 256-token canvas x K={r['alternatives']} after "
            f"{r['context']:,} tokens, scheme {r['scheme']} "
            "(engine.tools.traffic; per-op times on an RTX 4090)"
        ),
        (
            f"{'op':<62} {'n':>3} {'GFLOP':>8} {'today GB':>9} {'kern GB':>8} {'roof GB':>8} "
            f"{'today ms':>9} {'kern ms':>8} {'roof ms':>8}"
        ),
    ]
    for o in r["ops"]:
        lines.append(
            f"{o['op'][:62]:<62} {o['count']:>3} {o['gflop']:>8.1f} {o['today_gb']:>9.2f} "
            f"{o['kernels_gb']:>8.2f} {o['roofline_gb']:>8.2f} {o['today_ms_4090']:>9.2f} "
            f"{o['kernels_ms_4090']:>8.2f} {o['roofline_ms_4090']:>8.2f}"
        )
    total = {p: sum(o[f"{p}_gb"] for o in r["ops"]) for p in PATHS}
    lines.append(
        f"{'total bytes':<62} {'':>3} {'':>8} {total['today']:>9.2f} {total['kernels']:>8.2f} "
        f"{total['roofline']:>8.2f}"
    )
    lines.append("")
    lines.append(
        f"{'card':<10} {'GB/s':>6} {'TFLOP/s':>8} {'today ms':>9} {'kernels ms':>11} {'roofline ms':>12} "
        f"{'today/roof':>11} {'kernels/roof':>13}"
    )
    for c in r["cards"].values():
        lines.append(
            f"{c['name']:<10} {c['bandwidth_gbs']:>6g} {c['peak_tflops']:>8g} {c['today_ms']:>9.1f} "
            f"{c['kernels_ms']:>11.1f} {c['roofline_ms']:>12.1f} {c['today_vs_roofline']:>10.2f}x "
            f"{c['kernels_vs_roofline']:>12.2f}x"
        )
    if r["remaining_4090"]:
        lines.append("")
        lines.append(
            "What remains above the roofline with the kernels (RTX 4090): "
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
