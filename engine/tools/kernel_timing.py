"""GPU timings of the fused kernels against today's path, for the prepared GPU script and `bench --kernels`.

`time_kernels()` returns a dict (JSON-ready). Without a CUDA device (or without Triton) it says so and times
nothing: {"timed": false, "message": "no CUDA device: kernels not timed"}. With one, on real 26B-A4B shapes
and random NF4 weights (one layer's expert stacks, 128 experts top-8, a 256 x K token canvas; a 256 x K x
262,144 vocabulary tail; one dense-MLP-sized NF4 and int8 linear), each side is run `iters` times after a
warm-up and timed with CUDA events (median). Beside each: the traffic model's bytes for that op
(engine.tools.traffic), the achieved bandwidth, and the largest difference from today's output (a correctness
check on the real device).

Sides: experts, today's GPU default (`engine.fastpath.sync_free_nf4_experts_forward`: stack dequantized into a
reused bf16 buffer + grouped GEMM) and bitsandbytes' per-expert loop (`nf4_experts_forward`) against
`engine.kernels.nf4_moe.fused_moe`; the tail, `sample_chunked` + bf16 cast (after the soft cap the forward
does) against `tail_philox` on raw bf16 logits; linears, `bitsandbytes.matmul_4bit` and `Int8Linear`'s fp32
round trip against `nf4_linear` / `int8_linear`.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from typing import Any

NO_DEVICE = "no CUDA device: kernels not timed"


def _median_ms(fn: Callable[[], Any], iters: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _max_diff(a: Any, b: Any) -> float:
    return float((a.float() - b.float()).abs().max().item())


def time_kernels(*, alternatives: int = 1, experts: int = 128, iters: int = 10) -> dict[str, Any]:
    """The timings (see the module docstring); {"timed": False, "message": ...} without a CUDA device."""
    import torch

    from engine.kernels import triton_installed

    if not torch.cuda.is_available():
        return {"timed": False, "message": NO_DEVICE}
    if not triton_installed():
        return {"timed": False, "message": "triton is not installed: kernels not timed"}
    from engine.tools.realbench import device_peaks

    name = torch.cuda.get_device_name()
    peaks = device_peaks(name)
    report: dict[str, Any] = {
        "timed": True,
        "device": name,
        "alternatives": alternatives,
        "experts": experts,
        "iters": iters,
        "ops": {},
    }
    for label, run in (("experts", _experts), ("vocab_tail", _tail), ("linears", _linears)):
        try:
            report["ops"][label] = run(alternatives=alternatives, experts=experts, iters=iters)
        except Exception as exc:  # noqa: BLE001  (one failing kernel must not hide the others' figures)
            report["ops"][label] = {"error": f"{type(exc).__name__}: {exc}"}
        torch.cuda.empty_cache()
    if peaks is not None:
        bandwidth = peaks[0]
        for entry in report["ops"].values():
            for side in entry.get("sides", {}).values():
                if side.get("ms") and entry.get("model_bytes"):
                    side["achieved_gbs"] = round(entry["model_bytes"] / (side["ms"] / 1e3) / 1e9, 1)
                    side["share_of_bandwidth"] = round(side["achieved_gbs"] / bandwidth, 3)
        report["bandwidth_gbs"], report["peak_tflops"] = peaks
    return report


def _experts(*, alternatives: int, experts: int, iters: int) -> dict[str, Any]:
    import torch
    from transformers.activations import ACT2FN

    from engine.fastpath import reused_stack
    from engine.kernels.nf4_moe import fused_moe
    from engine.tools.traffic import NF4_BPW
    from engine.weights.quantize import NF4Weight, nf4_experts_forward

    device = torch.device("cuda")
    hidden, inter, top_k, tokens = 2816, 704, 8, 256 * alternatives
    gate_up = NF4Weight((2 * inter, hidden), experts, device=device)
    down = NF4Weight((hidden, inter), experts, device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    for e in range(experts):
        gate_up.store(torch.randn(2 * inter, hidden, device=device, generator=gen) * 0.02, e)
        down.store(torch.randn(hidden, inter, device=device, generator=gen) * 0.02, e)
    x = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16, generator=gen)
    index = torch.rand(tokens, experts, device=device, generator=gen).topk(top_k, dim=-1).indices
    weights = torch.softmax(torch.randn(tokens, top_k, device=device, generator=gen), -1).to(torch.bfloat16)
    act = ACT2FN["gelu_pytorch_tanh"]

    class Module(torch.nn.Module):
        gate_up_proj: NF4Weight  # declared, so the module is an NF4Experts to the type checker
        down_proj: NF4Weight
        act_fn: Callable[[torch.Tensor], torch.Tensor]

    module = Module()
    module.gate_up_proj, module.down_proj, module.act_fn = gate_up, down, act

    def today() -> Any:
        from transformers.integrations.moe import grouped_mm_experts_forward

        from engine.fastpath import _DenseExperts

        view = _DenseExperts(module, reused_stack(gate_up, "gate_up"), reused_stack(down, "down"))
        return grouped_mm_experts_forward(view, x, index, weights)  # type: ignore[arg-type]

    fused = fused_moe(x, index, weights, gate_up, down, act=1)
    sides = {
        "fused_nf4": {"ms": _median_ms(lambda: fused_moe(x, index, weights, gate_up, down, act=1), iters)},
        "today_dequantize_grouped": {"ms": _median_ms(today, iters), "max_diff": _max_diff(today(), fused)},
        "bitsandbytes_loop": {
            "ms": _median_ms(lambda: nf4_experts_forward(module, x, index, weights), iters)
        },
    }
    stack = experts * 3 * inter * hidden
    return {
        "shape": (
            f"{experts} experts x ({2 * inter}x{hidden} + {hidden}x{inter}), {tokens} tokens top-{top_k}"
        ),
        "model_bytes": stack * NF4_BPW,
        "sides": sides,
    }


def _tail(*, alternatives: int, experts: int, iters: int) -> dict[str, Any]:
    import torch

    from engine.denoise import exponential_draws
    from engine.kernels.vocab_tail import row_seeds, tail_philox
    from engine.lean_step import sample_chunked
    from engine.tools.traffic import TAIL_KERNEL_BPC

    device = torch.device("cuda")
    vocab, length, cap = 262_144, 256, 30.0
    gen = torch.Generator(device=device).manual_seed(1)
    raw = (torch.randn(alternatives, length, vocab, device=device, generator=gen) * 8).to(torch.bfloat16)
    gens = [torch.Generator(device=device).manual_seed(k) for k in range(alternatives)]
    temp = torch.tensor(0.6, device=device)

    def today() -> Any:
        logits = torch.tanh(raw.float() / cap) * cap  # the forward's post-processing
        processed = logits.div_(temp)
        out = sample_chunked(processed, gens, None, None, exponential_draws)
        return out, processed.to(torch.bfloat16)

    def fused() -> Any:
        return tail_philox(
            raw, temp, row_seeds(gens, alternatives, device), None, None, sc_dtype=torch.bfloat16, softcap=cap
        )

    (_, ref_argmax, ref_entropy, _), _ = today()
    _, argmax, entropy, _, _ = fused()
    sides = {
        "fused_tail": {
            "ms": _median_ms(fused, iters),
            "argmax_equal": bool(torch.equal(argmax, ref_argmax)),
            "entropy_max_diff": _max_diff(entropy, ref_entropy),
        },
        "today_sample_chunked": {"ms": _median_ms(today, iters)},
    }
    return {
        "shape": f"{alternatives} x {length} x {vocab:,}",
        "model_bytes": alternatives * length * vocab * TAIL_KERNEL_BPC,
        "sides": sides,
    }


def _linears(*, alternatives: int, experts: int, iters: int) -> dict[str, Any]:
    import torch

    from engine.kernels.int8_gemm import int8_linear
    from engine.kernels.nf4_moe import nf4_linear
    from engine.tools.traffic import NF4_BPW
    from engine.weights.quantize import Int8Linear, NF4Linear

    device = torch.device("cuda")
    n_in, n_out, tokens = 2816, 3 * 2112, 256 * alternatives
    w = torch.randn(n_out, n_in, device=device) * 0.02
    nf4 = NF4Linear(n_in, n_out, device=device)
    nf4.store(w)
    int8 = Int8Linear(n_in, n_out, device=device)
    int8.store(w)
    x = torch.randn(tokens, n_in, device=device, dtype=torch.bfloat16)
    import bitsandbytes

    def bnb() -> Any:
        return bitsandbytes.matmul_4bit(x, nf4.packed().view(-1, 1).t(), quant_state=nf4.quant_state())

    def int8_today() -> Any:
        return torch.nn.functional.linear(x, int8.dequantize().to(x.dtype))

    sides = {
        "nf4_fused": {
            "ms": _median_ms(lambda: nf4_linear(x, nf4), iters),
            "max_diff": _max_diff(nf4_linear(x, nf4), bnb()),
        },
        "nf4_bitsandbytes": {"ms": _median_ms(bnb, iters)},
        "int8_fused": {
            "ms": _median_ms(lambda: int8_linear(x, int8), iters),
            "max_diff": _max_diff(int8_linear(x, int8), int8_today()),
        },
        "int8_today_fp32_round_trip": {"ms": _median_ms(int8_today, iters)},
    }
    return {
        "shape": f"{tokens} x {n_in} @ {n_in} x {n_out}",
        "model_bytes": n_in * n_out * NF4_BPW,
        "sides": sides,
    }


def format_timings(report: dict[str, Any]) -> str:
    if not report.get("timed"):
        return str(report["message"])
    lines = [
        f"Fused kernels on {report['device']} (K={report['alternatives']}, median of {report['iters']}):"
    ]
    for op, entry in report["ops"].items():
        if "error" in entry:
            lines.append(f"  {op}: error {entry['error']}")
            continue
        lines.append(f"  {op} [{entry['shape']}]")
        for side, figures in entry["sides"].items():
            extra = ", ".join(f"{k} {v}" for k, v in figures.items() if k != "ms")
            lines.append(f"    {side:<28} {figures['ms']:8.3f} ms  {extra}")
    return "\n".join(lines)


def main_kernels(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine bench --kernels",
        description="time the fused Triton kernels against today's path on the GPU",
    )
    parser.add_argument("--alternatives", "--candidates", dest="alternatives", type=int, default=1)
    parser.add_argument("--experts", type=int, default=128, help="experts in the timed stack (default 128)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = time_kernels(alternatives=args.alternatives, experts=args.experts, iters=args.iters)
    print(json.dumps(report) if args.json else format_timings(report))
    return 0
