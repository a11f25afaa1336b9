"""`python -m engine bench --real-shape --layers N`: how fast is one canvas forward of the 26B-A4B, really?

It builds N decoder layers with the exact 26B-A4B shapes (engine.tools.real_shape's config) straight on the
device, with random weights stored as the app stores them (NF4 via `NF4Weight.store`, every expert of a stack
holding the same random codes: the kernels' cost does not depend on the values, and quantizing 256 matrices
per layer would dominate a short GPU lease). For each prefix length (2K and 8K by default) it encodes the
prefix into the KV cache, then times one 256-token canvas forward of the decoder (self-conditioning included),
layer by layer with CUDA events, and extrapolates: 25 sliding-window layers x their time + 5 global layers x
theirs + the rest (embedding, self-conditioning, lm_head; scaled to the full vocabulary if a smaller one was
built). The roofline beside it is the full model's bytes read / bandwidth and FLOPs / peak, with the
arithmetic printed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

REAL_VOCAB = 262144
REAL_LAYERS = 30
CANVAS = 256

# Published specs: HBM/GDDR bandwidth in GB/s and dense bf16 tensor throughput in TFLOP/s (no sparsity).
# Matched by substring of torch.cuda.get_device_name(), most specific first.
DEVICE_PEAKS: list[tuple[str, float, float]] = [
    ("h200", 4800, 989),
    ("h100 nvl", 3900, 835),
    ("h100 pcie", 2000, 756),
    ("h100", 3350, 989),
    ("gh200", 4000, 989),
    ("a100-sxm4-80gb", 2039, 312),
    ("a100 80gb pcie", 1935, 312),
    ("a100", 1555, 312),
    ("l40s", 864, 362),
    ("rtx 5090", 1792, 209),
    ("rtx 4090", 1008, 165),
    ("rtx 3090", 936, 71),
    ("rtx 6000 ada", 960, 364),
    ("a10", 600, 125),
]


def device_peaks(name: str) -> tuple[float, float] | None:
    lowered = name.lower()
    for key, bandwidth, tflops in DEVICE_PEAKS:
        if key in lowered:
            return bandwidth, tflops
    return None


def build_model(layers: int, vocab: int, device: str, quantize: str = "nf4", seed: int = 0) -> Any:
    """N layers of the 26B-A4B on `device`, random weights, NF4 stored as the app stores them."""
    import torch
    from torch import nn
    from transformers import DiffusionGemmaConfig

    from engine.tools.real_shape import real_config_dict
    from engine.weights.quantize import EXPERTS_IMPLEMENTATION, NF4Weight, register_experts_implementation
    from engine.weights.stream_load import build_skeleton_from_config

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    config = DiffusionGemmaConfig(**real_config_dict(layers, vocab))
    model = build_skeleton_from_config(config, dtype, nf4=quantize == "nf4")
    gen = torch.Generator(device=device).manual_seed(seed)

    def random(shape: tuple[int, ...], leaf: str) -> torch.Tensor:
        if len(shape) <= 1 or leaf in ("scale", "per_expert_scale", "layer_scalar"):
            return torch.ones(shape, dtype=dtype, device=device)
        return (torch.randn(shape, generator=gen, device=device) * 0.02).to(dtype)

    done: set[int] = set()
    for module in model.modules():
        if isinstance(module, NF4Weight):
            if id(module) in done:
                continue
            done.add(id(module))
            module.materialize(device)
            module.store(random(module.shape, "weight"), 0 if module.count else None)
            if module.count:  # the same codes in every expert of the stack
                for name in ("qweight", "absmax", "absmax2", "offset"):
                    buf = getattr(module, name)
                    buf[1:] = buf[0]
            continue
    replaced: dict[int, tuple[Any, Any]] = {}
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None or not param.is_meta:
                continue
            if id(param) not in replaced:
                replaced[id(param)] = (
                    param,
                    nn.Parameter(random(tuple(param.shape), name), requires_grad=False),
                )
            module._parameters[name] = replaced[id(param)][1]
        for name, buf in list(module._buffers.items()):
            if buf is not None and buf.device.type != torch.device(device).type:
                module._buffers[name] = buf.to(device)
    model.eval()
    model.requires_grad_(False)
    if quantize == "nf4":
        register_experts_implementation()
        model.set_experts_implementation(EXPERTS_IMPLEMENTATION)
    return model


class _LayerTimer:
    """Per-layer forward time via pre/post hooks: CUDA events on a GPU, wall clock on the CPU."""

    def __init__(self, layers: Any, cuda: bool) -> None:
        import torch

        self.cuda = cuda
        self.marks: list[list[Any]] = [[] for _ in layers]
        self.handles = []
        for i, layer in enumerate(layers):
            self.handles.append(layer.register_forward_pre_hook(self._mark(i, torch)))
            self.handles.append(layer.register_forward_hook(self._mark(i, torch, post=True)))

    def _mark(self, i: int, torch: Any, post: bool = False) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            if self.cuda:
                event = torch.cuda.Event(enable_timing=True)
                event.record()
                self.marks[i].append(event)
            else:
                self.marks[i].append(time.perf_counter())

        return hook

    def reset(self) -> None:
        self.marks = [[] for _ in self.marks]

    def seconds(self) -> list[list[float]]:
        out = []
        for marks in self.marks:
            pairs = list(zip(marks[::2], marks[1::2], strict=False))
            out.append([(a.elapsed_time(b) / 1000.0) if self.cuda else b - a for a, b in pairs])
        return out

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def roofline(
    prefix: int, *, quantize: str, bandwidth_gbs: float | None, peak_tflops: float | None
) -> dict[str, Any]:
    """Bytes read and FLOPs of one canvas forward of the full 26B-A4B after `prefix` tokens, and the time
    floors."""
    from engine.tools.real_shape import real_config_dict
    from engine.weights.fit import (
        _layer_groups,
        kv_cache_bytes,
        param_counts,
        plan_weight_bytes,
        weight_bytes,
    )

    config = real_config_dict(REAL_LAYERS, REAL_VOCAB)
    text = config["text_config"]
    counts = param_counts(config)
    h, heads = int(text["hidden_size"]), int(text["num_attention_heads"])
    window = int(text["sliding_window"])
    top_k, experts_n = int(text["top_k_experts"]), int(text["num_experts"])
    w_bytes, w_text = plan_weight_bytes(config, "nf4") if quantize == "nf4" else weight_bytes(counts, "bf16")
    embed_again = 2 * counts.embedding  # the tied matrix is read twice: self-conditioning and lm_head
    kv, kv_text = kv_cache_bytes(config, prefix, CANVAS)
    logits = 4 * CANVAS * REAL_VOCAB * 2
    total_bytes = w_bytes + embed_again + kv + logits
    active = counts.linear + counts.experts * top_k // experts_n
    dense_flops = 2 * CANVAS * active
    head_flops = 2 * 2 * CANVAS * REAL_VOCAB * h
    attn_flops = 0
    for (layer_type, _, hd, _), n in _layer_groups(text).items():
        ctx = prefix + CANVAS if layer_type == "full_attention" else min(prefix + CANVAS, window + CANVAS)
        attn_flops += n * 4 * CANVAS * ctx * heads * hd
    flops = dense_flops + head_flops + attn_flops
    out: dict[str, Any] = {
        "bytes": total_bytes,
        "flops": flops,
        "arithmetic": [
            f"weights {w_bytes / 1e9:.2f} GB ({w_text})",
            f"+ embedding read again for the other of self-conditioning/lm_head {embed_again / 1e9:.2f} GB",
            f"+ KV cache {kv / 1e9:.3f} GB ({kv_text})",
            f"+ logits traffic {logits / 1e9:.2f} GB (4 x {CANVAS} x {REAL_VOCAB:,} bf16 arrays)",
            f"= {total_bytes / 1e9:.2f} GB read per forward",
            f"FLOPs: 2 x {CANVAS} tokens x {active / 1e9:.3f} B active weights (linears + "
            f"{top_k}/{experts_n} of the experts) = {dense_flops / 1e12:.3f} T; + lm_head and "
            f"self-conditioning 2 x 2 x {CANVAS} x {REAL_VOCAB:,} x {h} = {head_flops / 1e12:.3f} T; + "
            f"attention over the prefix {attn_flops / 1e12:.3f} T = {flops / 1e12:.3f} TFLOP",
        ],
    }
    if bandwidth_gbs and peak_tflops:
        mem_ms = total_bytes / (bandwidth_gbs * 1e9) * 1e3
        cmp_ms = flops / (peak_tflops * 1e12) * 1e3
        out.update(
            bandwidth_gbs=bandwidth_gbs,
            peak_tflops=peak_tflops,
            memory_ms=round(mem_ms, 3),
            compute_ms=round(cmp_ms, 3),
            roofline_ms=round(max(mem_ms, cmp_ms), 3),
        )
        out["arithmetic"].append(
            f"floor = max({total_bytes / 1e9:.2f} GB / {bandwidth_gbs:g} GB/s = {mem_ms:.2f} ms, "
            f"{flops / 1e12:.3f} TFLOP / {peak_tflops:g} TFLOP/s "
            f"= {cmp_ms:.2f} ms) = {max(mem_ms, cmp_ms):.2f} ms"
        )
    return out


def run_real_shape(
    *,
    layers: int = 2,
    device: str = "auto",
    vocab: int | None = None,
    prefixes: list[int] | None = None,
    quantize: str = "nf4",
    experts: str = "loop",
    iters: int = 3,
    bandwidth_gbs: float | None = None,
    peak_tflops: float | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build, time and extrapolate (see the module docstring); returns the report."""
    import torch
    from transformers import DynamicCache

    from engine.tools.real_shape import layer_types
    from engine.weights.loader import resolve_device

    dev, _ = resolve_device(device)  # type: ignore[arg-type]
    cuda = dev == "cuda"
    vocab = vocab or (REAL_VOCAB if cuda else 4096)
    prefixes = prefixes or [2048, 8192]
    name = torch.cuda.get_device_name() if cuda else "cpu"
    peaks = device_peaks(name) if cuda else None
    bandwidth_gbs = bandwidth_gbs or (peaks[0] if peaks else None)
    peak_tflops = peak_tflops or (peaks[1] if peaks else None)

    t0 = time.perf_counter()
    model = build_model(layers, vocab, dev, quantize)
    if experts == "grouped":
        from engine.fastpath import use_grouped_experts

        use_grouped_experts(model)
    build_s = time.perf_counter() - t0
    if log:
        log(f"built {layers} layer(s), vocab {vocab:,}, {quantize}, on {name} in {build_s:.1f} s")
    config = model.config
    decoder_layers = model.model.decoder.layers
    types = list(config.text_config.layer_types)
    timer = _LayerTimer(decoder_layers, cuda)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    results = []
    try:
        with torch.inference_mode():
            for prefix in prefixes:
                cache = DynamicCache(config=config.get_text_config(decoder=True))
                ids = torch.randint(0, vocab, (1, prefix), device=dev)
                mask = torch.ones((1, prefix), dtype=torch.bool, device=dev)
                positions = torch.arange(0, prefix, dtype=torch.int32, device=dev).unsqueeze(0)
                encoder = model.model.encoder
                dummy = torch.empty((1, prefix, 0), dtype=model.dtype, device=dev)
                enc_masks = encoder.create_masks_for_generate(
                    config=config,
                    inputs_embeds=dummy,
                    attention_mask=mask,
                    past_key_values=cache,
                    position_ids=positions,
                    mm_token_type_ids=None,
                )
                sync()
                t = time.perf_counter()
                cache = encoder(
                    input_ids=ids, attention_mask=enc_masks, past_key_values=cache, position_ids=positions
                ).past_key_values
                sync()
                prefill_s = time.perf_counter() - t
                canvas = torch.randint(0, vocab, (1, CANVAS), device=dev)
                dec_mask = torch.nn.functional.pad(mask, (0, CANVAS), value=True)
                mapping = model.model.decoder.create_diffusion_decoder_attention_mask(
                    config=config,
                    inputs_embeds=canvas.unsqueeze(-1),
                    past_key_values=cache,
                    decoder_attention_mask=dec_mask,
                )
                dec_pos = torch.arange(prefix, prefix + CANVAS, dtype=torch.int32, device=dev).unsqueeze(0)
                sc = torch.randn((1, CANVAS, vocab), device=dev).to(
                    model.model.decoder.embed_tokens.weight.dtype
                )

                inputs = {
                    "decoder_input_ids": canvas,
                    "self_conditioning_logits": sc,
                    "decoder_attention_mask": mapping,
                    "past_key_values": cache,
                    "decoder_position_ids": dec_pos,
                }

                def forward(inputs: dict[str, Any] = inputs) -> None:
                    model(**inputs)

                forward()  # warm-up
                sync()
                timer.reset()
                totals = []
                for _ in range(max(1, iters)):
                    t = time.perf_counter()
                    forward()
                    sync()
                    totals.append(time.perf_counter() - t)
                per_layer = timer.seconds()
                head_s = _vocab_matmul_seconds(model, vocab, sync) if vocab != REAL_VOCAB else 0.0
                results.append(
                    _extrapolate(
                        prefix,
                        prefill_s,
                        totals,
                        per_layer,
                        types,
                        layer_types(REAL_LAYERS),
                        vocab,
                        quantize,
                        bandwidth_gbs,
                        peak_tflops,
                        head_s,
                    )
                )
                if log:
                    log(_line(results[-1]))
                del forward, inputs, cache, mapping, sc
                if cuda:
                    torch.cuda.empty_cache()
    finally:
        timer.remove()
    return {
        "benchmark": "real-shape-forward",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "device": dev,
        "device_name": name,
        "torch": torch.__version__,
        "layers_built": layers,
        "layer_types_built": types,
        "vocab_built": vocab,
        "quantize": quantize,
        "experts_forward": experts,
        "iters": iters,
        "build_seconds": round(build_s, 2),
        "peak_memory_gb": round(torch.cuda.max_memory_allocated() / 1e9, 2) if cuda else None,
        "prefixes": results,
    }


def _vocab_matmul_seconds(model: Any, vocab: int, sync: Callable[[], None]) -> float:
    """One [canvas, hidden] x [hidden, vocab] product with the built embedding: the part of the head that
    grows with the vocabulary (lm_head and self-conditioning each do one)."""
    import torch

    weight = model.model.decoder.embed_tokens.weight
    x = torch.randn((CANVAS, weight.shape[1]), device=weight.device).to(weight.dtype)
    x @ weight.t()
    sync()
    t = time.perf_counter()
    for _ in range(3):
        x @ weight.t()
    sync()
    return (time.perf_counter() - t) / 3


def _extrapolate(
    prefix: int,
    prefill_s: float,
    totals: list[float],
    per_layer: list[list[float]],
    types: list[str],
    real_types: list[str],
    vocab: int,
    quantize: str,
    bandwidth_gbs: float | None,
    peak_tflops: float | None,
    vocab_matmul_s: float = 0.0,
) -> dict[str, Any]:
    total = statistics.median(totals)
    medians = [statistics.median(x) if x else 0.0 for x in per_layer]
    by_type: dict[str, float] = {}
    for kind in ("sliding_attention", "full_attention"):
        got = [m for m, t in zip(medians, types, strict=False) if t == kind]
        if got:
            by_type[kind] = statistics.median(got)
    notes = []
    for kind in ("sliding_attention", "full_attention"):
        if kind not in by_type:
            other = next(iter(by_type.values()))
            by_type[kind] = other
            notes.append(f"no {kind.split('_')[0]} layer built: its time is taken from the other kind")
    rest = max(0.0, total - sum(medians))
    # Of the rest, only the two canvas x vocabulary products grow with the vocabulary: add them at full size.
    rest_full = rest + 2 * vocab_matmul_s * (REAL_VOCAB / vocab - 1)
    if vocab != REAL_VOCAB:
        notes.append(
            f"built with a {vocab:,}-token vocabulary: the lm_head and self-conditioning products are "
            f"scaled to {REAL_VOCAB:,} from a timed {CANVAS} x {vocab} one (softmax/softcap over the full "
            "vocabulary not included)"
        )
    layers_30 = sum(by_type[t] for t in real_types)
    estimate = layers_30 + rest_full
    roof = roofline(prefix, quantize=quantize, bandwidth_gbs=bandwidth_gbs, peak_tflops=peak_tflops)
    entry: dict[str, Any] = {
        "prefix": prefix,
        "prefill_ms": round(prefill_s * 1e3, 3),
        "forward_ms_built": round(total * 1e3, 3),
        "sliding_layer_ms": round(by_type["sliding_attention"] * 1e3, 3),
        "global_layer_ms": round(by_type["full_attention"] * 1e3, 3),
        "rest_ms_built": round(rest * 1e3, 3),
        "rest_ms_full_vocab": round(rest_full * 1e3, 3),
        "extrapolated_30_layers_ms": round(estimate * 1e3, 3),
        "extrapolation": (
            f"25 x {by_type['sliding_attention'] * 1e3:.3f} ms (sliding) + 5 x "
            f"{by_type['full_attention'] * 1e3:.3f} ms (global) + {rest_full * 1e3:.3f} ms (embedding, "
            f"self-conditioning, lm_head) = {estimate * 1e3:.3f} ms"
        ),
        "notes": notes,
        "roofline": roof,
    }
    if "roofline_ms" in roof:
        entry["ratio_to_roofline"] = round(estimate * 1e3 / roof["roofline_ms"], 2)
    return entry


def _line(r: dict[str, Any]) -> str:
    ratio = (
        f", {r['ratio_to_roofline']}x the roofline ({r['roofline']['roofline_ms']} ms)"
        if "ratio_to_roofline" in r
        else " (no roofline: unknown device peaks)"
    )
    return (
        f"prefix {r['prefix']:>6}: prefill {r['prefill_ms']:.1f} ms; canvas forward of the built layers "
        f"{r['forward_ms_built']:.2f} ms; 30 layers ~ {r['extrapolated_30_layers_ms']:.2f} ms{ratio}"
    )


def format_real_shape(report: dict[str, Any]) -> str:
    lines = [
        f"real-shape forward on {report['device_name']} ({report['device']}), {report['layers_built']} "
        f"layer(s) built ({', '.join(t.split('_')[0] for t in report['layer_types_built'])}), vocab "
        f"{report['vocab_built']:,}, {report['quantize']}, experts forward: {report['experts_forward']}"
    ]
    for r in report["prefixes"]:
        lines.append(_line(r))
        lines.append("  " + r["extrapolation"])
        lines += ["  " + a for a in r["roofline"]["arithmetic"]]
        lines += ["  note: " + n for n in r["notes"]]
    return "\n".join(lines)
