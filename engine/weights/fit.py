"""Will this checkpoint fit? An estimate from `config.json` alone, before a single weight is read.

The GUI shows the verdict ("fits" / "tight" / "won't fit") next to each model and device, and the loader
refuses to start a load that cannot fit. Every number is shown with its arithmetic, because a wrong VRAM
estimate is one of the things writers complain about most: they should be able to check it.

What is counted (bytes resident on the device while generating):
* weights: the text stack (the vision tower is never loaded). At 4 bits every linear and expert matrix costs
  0.5 byte per weight plus its double-quantized scales (1 byte per 64 weights + 4 bytes per 16,384), while the
  embedding (tied to the output head) and the norm/scale vectors stay 16-bit. 8-bit is LLM.int8-style (1 byte
  per weight + a 4-byte scale per row) for comparison only; Letterpress loads bf16/fp32 or NF4.
* KV cache for the context: sliding-window layers keep at most window + canvas positions, global layers all of
  them; keys and values in 16 bits.
* step memory (logits, self-conditioning, sampling): per candidate row, canvas x vocabulary cells at the bytes
  per cell measured for the lean step (`engine.tools.step_memory`, ~8 bytes: the incoming self-conditioning
  logits with their fp32 softmax and 16-bit copy inside the decoder), plus one fixed chunk of sampling
  scratch. A test holds this to at least the measured peak for 1, 3 and 8 candidates.
* activations of the prefill (encoding the prompt): per token and prefill row, the top-k expert intermediates,
  the dense MLP intermediates and a few hidden-size copies, in chunks of at most `prefill_chunk` tokens; plus
  the encoder's dense sliding-window mask (query x key bytes per prefill row).
* a fixed overhead for the CUDA context, kernels and allocator slack.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.weights.plan import KIND_LABELS, KINDS, Kind, PlanRow, storage_bytes, storage_for

Precision = Literal["fp32", "bf16", "int8", "nf4", "nf4-mixed"]
Verdict = Literal["fits", "tight", "wont_fit", "unknown"]

GIB = 1024**3
DEFAULT_CONTEXT = 8192
CUDA_OVERHEAD = int(
    0.75 * GIB
)  # CUDA context + cuBLAS workspace + allocator fragmentation, measured ballpark
HOST_OVERHEAD = int(1.0 * GIB)  # Python, torch and transformers themselves
FITS_SHARE = 0.90  # "fits" leaves >= 10% of the free memory; "tight" uses 90-100% of it
NF4_BYTES_PER_WEIGHT = 0.5 + 1 / 64 + 4 / (64 * 256)
NF4_NUMERATOR = 8192 + 256 + 4  # NF4_BYTES_PER_WEIGHT = NF4_NUMERATOR / 16384
INT8_ROW_SCALE_BYTES = 4
# Step memory of the lean loop (engine.lean_step) per canvas x vocabulary cell, measured under no_grad (every
# allocation the process makes; under inference_mode the tracker missed the self-conditioning softmax's fp32
# copy of its input, 10 B/cell, now computed in row chunks by engine.self_conditioning: 8.00 at 3 candidates)
# by `engine.tools.step_memory.measure_step_memory` (8.00 at 1, 3 and 8 candidates, bf16 and fp32 bodies;
# docs/performance.md) and rounded up; the decoder body holding the incoming self-conditioning logits, their
# fp32 softmax and its 16-bit copy is the largest moment. A test holds it to at least the measured peak.
STEP_BYTES_PER_CELL_BF16 = 8.5
# Fixed sampling scratch per step: one chunk of rows (engine.lean_step.CHUNK_CELLS) of fp32 softmax, draws and
# entropy temporaries, whatever the candidate count.
STEP_CHUNK_BYTES = 5 * 4 * (1 << 23)
# Prompt tokens encoded per forward: the loop prefills once (batch 1, expanded to the candidate rows) in
# chunks of `engine.prefix_cache.PREFILL_CHUNK` tokens (a test holds the two equal); the activation term
# assumes it.
PREFILL_CHUNK = 512
DEFAULT_CANDIDATES = 3  # the app's default number of alternatives (app/settings.py "denoise.alternatives")


@dataclass(frozen=True)
class ParamCounts:
    """Weights of the text stack by kind (shared encoder/decoder weights counted once)."""

    experts: int
    linear: int  # attention, dense MLP, router and self-conditioning projections
    embedding: int  # token embedding, tied to the output head
    other: int  # norms, router scales, layer scalars
    linear_rows: int  # output rows of the linears + experts (for 8-bit row scales)

    @property
    def total(self) -> int:
        return self.experts + self.linear + self.embedding + self.other

    @property
    def quantizable(self) -> int:
        return self.experts + self.linear


@dataclass(frozen=True)
class FitEstimate:
    precision: Precision
    context_tokens: int
    canvas_tokens: int
    weights_bytes: int
    kv_cache_bytes: int
    logits_bytes: int
    activations_bytes: int
    overhead_bytes: int
    device: str
    available_bytes: int | None
    verdict: Verdict
    lines: tuple[str, ...]
    candidates: int = 1

    @property
    def request_bytes(self) -> int:
        """What one request adds on top of the resident weights: KV cache, step memory, prefill
        activations."""
        return self.kv_cache_bytes + self.logits_bytes + self.activations_bytes

    @property
    def total_bytes(self) -> int:
        return (
            self.weights_bytes
            + self.kv_cache_bytes
            + self.logits_bytes
            + self.activations_bytes
            + self.overhead_bytes
        )

    @property
    def summary(self) -> str:
        avail = "unknown free memory" if self.available_bytes is None else f"{gb(self.available_bytes)} free"
        word = {"fits": "fits", "tight": "is tight", "wont_fit": "won't fit", "unknown": "may or may not fit"}
        rows = f", {self.candidates} candidates" if self.candidates > 1 else ""
        return (
            f"{self.precision} at {self.context_tokens:,} tokens of context{rows} needs about "
            f"{gb(self.total_bytes)} on {self.device} ({avail}): it {word[self.verdict]}."
        )

    def text(self) -> str:
        return "\n".join(self.lines)


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


MAX_VALUE = 2**62  # far above any real config value; keeps every product below float range and 4300 digits


def _int(section: dict[str, Any], key: str, default: int | None = None) -> int:
    """A non-negative whole-number config value, or a typed error that names it (never
    ValueError/KeyError)."""
    from engine.api import ModelDamagedError

    value = section.get(key)
    if value is None:
        if default is None:
            raise ModelDamagedError(f"config.json has no '{key}'; download config.json again.")
        return default
    if isinstance(value, float) and value.is_integer() and abs(value) < MAX_VALUE:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_VALUE:
        raise ModelDamagedError(
            f"config.json sets '{key}' to {str(value)[:40]!s}, which is not a size a model can "
            "have; download config.json again."
        )
    return value


def _text(config: dict[str, Any]) -> dict[str, Any]:
    from engine.api import ModelDamagedError

    text = config.get("text_config") or config if isinstance(config, dict) else None
    if not isinstance(text, dict):
        raise ModelDamagedError(
            "config.json is not a JSON object with a 'text_config' object; download it again."
        )
    return text


def _default_type(index: int) -> str:
    return "sliding_attention" if (index + 1) % 6 else "full_attention"


def _layer_groups(text: dict[str, Any]) -> dict[tuple[str, int, int, bool], int]:
    """(layer type, kv heads, head dim, has v_proj) -> number of layers with that shape.

    Computed by counting, not by walking the layers, so the estimate takes constant memory and time however
    many layers a config claims (only explicit `layer_types` and `per_layer_config` entries, which are bounded
    by the size of config.json, are looked at one by one)."""
    layers = _int(text, "num_hidden_layers")
    types = text.get("layer_types")
    if types:
        if not isinstance(types, list):
            types = []
        base: dict[str, int] = {}
        for t in types[:layers]:
            base[str(t)] = base.get(str(t), 0) + 1
        if len(types) < layers:  # a short list: the rest follow the default 5-sliding-1-global pattern
            full = layers // 6 - len(types) // 6
            base["full_attention"] = base.get("full_attention", 0) + full
            base["sliding_attention"] = base.get("sliding_attention", 0) + (layers - len(types) - full)
    else:
        base = {"full_attention": layers // 6, "sliding_attention": layers - layers // 6}
    groups: dict[tuple[str, int, int, bool], int] = {}
    per_layer = text.get("per_layer_config") or {}
    if isinstance(per_layer, dict):
        for key, overrides in per_layer.items():
            if not (str(key).isdigit() and int(key) < layers and isinstance(overrides, dict) and overrides):
                continue
            index = int(key)
            layer_type = str(types[index]) if types and index < len(types) else _default_type(index)
            shape = _attention_shape(text, layer_type, overrides)
            base[layer_type] = base.get(layer_type, 0) - 1
            groups[(layer_type, *shape)] = groups.get((layer_type, *shape), 0) + 1
    for layer_type, n in base.items():
        if n > 0:
            shape = _attention_shape(text, layer_type, None)
            groups[(layer_type, *shape)] = groups.get((layer_type, *shape), 0) + n
    return groups


def _attention_shape(
    text: dict[str, Any], layer_type: str, overrides: dict[str, Any] | None
) -> tuple[int, int, bool]:
    """(kv heads, head dim, has v_proj) of a layer; global layers use the global head dim and share K with V.

    A saved config carries the global-layer overrides in `per_layer_config` (keyed by layer index)."""
    has_v = layer_type != "full_attention"
    if overrides:
        return (
            _int(overrides, "num_key_value_heads", _int(text, "num_key_value_heads")),
            _int(overrides, "head_dim", _int(text, "head_dim", 256)),
            has_v,
        )
    if layer_type == "full_attention":
        heads = _int(text, "num_global_key_value_heads", 0) or _int(text, "num_key_value_heads")
        return heads, _int(text, "global_head_dim", 0) or 512, False
    return _int(text, "num_key_value_heads"), _int(text, "head_dim", 256), True


def param_counts(config: dict[str, Any]) -> ParamCounts:
    """Count the text-stack weights the way DiffusionGemma builds them (verified against a real model in
    tests)."""
    text = _text(config)
    h = _int(text, "hidden_size")
    inter = _int(text, "intermediate_size")
    heads = _int(text, "num_attention_heads")
    experts_n = _int(text, "num_experts", 0)
    moe = _int(text, "moe_intermediate_size", 0)
    vocab = _int(text, "vocab_size")
    experts = linear = other = rows = 0
    for (_layer_type, kv, hd, has_v), n in _layer_groups(text).items():
        q, k, v, o = h * heads * hd, h * kv * hd, (h * kv * hd if has_v else 0), heads * hd * h
        mlp = 3 * h * inter
        router = h * experts_n
        linear += n * (q + k + v + o + mlp + router)
        rows += n * (heads * hd + kv * hd + (kv * hd if has_v else 0) + h + 2 * inter + h + experts_n)
        experts += n * experts_n * (2 * moe * h + h * moe)
        rows += n * experts_n * (2 * moe + h)
        # 7 RMSNorm weights of width h, q/k norms, router scale + per-expert scale, layer scalar
        other += n * (7 * h + 2 * hd + h + experts_n + 1)
    linear += 3 * h * inter  # self-conditioning block (decoder only)
    rows += 2 * inter + h
    other += h + h  # final norm, self-conditioning pre-norm
    return ParamCounts(experts, linear, vocab * h, other, rows)


def kind_counts(config: dict[str, Any]) -> tuple[dict[Kind, int], dict[Kind, int]]:
    """Weights and output rows per module kind (`engine.weights.plan`) of the text stack (shared
    encoder/decoder weights once), from config.json alone; the same arithmetic as `param_counts`, split by
    kind."""
    text = _text(config)
    h = _int(text, "hidden_size")
    inter = _int(text, "intermediate_size")
    heads = _int(text, "num_attention_heads")
    experts_n = _int(text, "num_experts", 0)
    moe = _int(text, "moe_intermediate_size", 0)
    counts: dict[Kind, int] = dict.fromkeys(KINDS, 0)
    rows: dict[Kind, int] = dict.fromkeys(KINDS, 0)
    for (_layer_type, kv, hd, has_v), n in _layer_groups(text).items():
        counts["attention"] += n * (
            h * heads * hd + h * kv * hd + (h * kv * hd if has_v else 0) + heads * hd * h
        )
        rows["attention"] += n * (heads * hd + kv * hd + (kv * hd if has_v else 0) + h)
        counts["dense_mlp"] += n * 3 * h * inter
        rows["dense_mlp"] += n * (2 * inter + h)
        counts["router"] += n * h * experts_n
        rows["router"] += n * experts_n
        counts["experts"] += n * experts_n * 3 * moe * h
        rows["experts"] += n * experts_n * (2 * moe + h)
        counts["norms"] += n * (7 * h + 2 * hd + h + experts_n + 1)
    counts["dense_mlp"] += 3 * h * inter  # self-conditioning block (decoder only)
    rows["dense_mlp"] += 2 * inter + h
    counts["norms"] += 2 * h
    counts["embedding"] = _int(text, "vocab_size") * h
    return counts, rows


def plan_rows(config: dict[str, Any], scheme: str, compute_bytes: int = 2) -> list[PlanRow]:
    """The plan for `scheme` per module kind, with the weights and bytes of each kind."""
    counts, rows = kind_counts(config)
    return [
        PlanRow(
            k,
            storage_for(scheme, k),
            counts[k],
            storage_bytes(storage_for(scheme, k), counts[k], rows[k], compute_bytes),
        )
        for k in KINDS
    ]


def plan_text(config: dict[str, Any], scheme: str) -> str:
    rows = plan_rows(config, scheme)
    total = sum(r.bytes for r in rows)
    return "\n".join(
        [
            f"quantization plan '{scheme}' (per module kind):",
            *("  " + r.line() for r in rows),
            f"  {'total':<13} {'':>7}  {sum(r.weights for r in rows):>15,} weights  {total / 1e9:8.3f} GB",
        ]
    )


def weight_bytes(counts: ParamCounts, precision: Precision) -> tuple[int, str]:
    """Resident weight bytes and the arithmetic that gave them."""
    if precision == "fp32":
        return 4 * counts.total, f"{counts.total:,} weights x 4 bytes"
    if precision == "bf16":
        return 2 * counts.total, f"{counts.total:,} weights x 2 bytes"
    dense = 2 * (counts.embedding + counts.other)
    if precision == "int8":
        q = counts.quantizable + INT8_ROW_SCALE_BYTES * counts.linear_rows
        return q + dense, (
            f"{counts.quantizable:,} linear/expert weights x 1 byte + {counts.linear_rows:,} rows x 4-byte "
            f"scale + {counts.embedding + counts.other:,} embedding/norm weights x 2 bytes"
        )
    q = -(-counts.quantizable * NF4_NUMERATOR // 16384)  # exact integer ceil (no float overflow)
    return q + dense, (
        f"{counts.quantizable:,} linear/expert weights x {NF4_BYTES_PER_WEIGHT:.4f} bytes (4 bits + scales)"
        f" + {counts.embedding + counts.other:,} embedding/norm weights x 2 bytes"
    )


def plan_weight_bytes(config: dict[str, Any], scheme: str) -> tuple[int, str]:
    """Resident weight bytes of a quantized scheme, from its plan per module kind (`engine.weights.plan`: the
    router, embedding and norms 16-bit; attention and dense MLP NF4 or int8; experts NF4)."""
    rows = plan_rows(config, scheme)
    parts = []
    for storage in ("nf4", "int8", "16-bit"):
        picked = [r for r in rows if r.storage == storage]
        if not picked:
            continue
        weights = sum(r.weights for r in picked)
        per = {
            "nf4": f"{NF4_BYTES_PER_WEIGHT:.4f} bytes (4 bits + scales)",
            "int8": "1 byte (int8) + 4-byte row scales",
            "16-bit": "2 bytes",
        }[storage]
        names = "/".join(KIND_LABELS[r.kind] for r in picked)
        parts.append(f"{weights:,} {names} weights x {per}")
    return sum(r.bytes for r in rows), " + ".join(parts)


def experts_buffer_bytes(config: dict[str, Any]) -> tuple[int, str]:
    """The GPU experts forward's one reused dequantization buffer (`engine.fastpath.reused_stack`): one
    layer's gate_up and down stacks in bf16, shared by every layer."""
    text = _text(config)
    experts_n = _int(text, "num_experts", 0)
    h, moe = _int(text, "hidden_size"), _int(text, "moe_intermediate_size", 0)
    total = 2 * experts_n * 3 * moe * h
    return total, f"{total / 1e9:.2f} GB reused bf16 expert stacks ({experts_n} x 3 x {moe} x {h} x 2 bytes)"


def kv_cache_bytes(config: dict[str, Any], context: int, canvas: int, batch: int = 1) -> tuple[int, str]:
    text = _text(config)
    window = _int(text, "sliding_window", 0)
    groups: dict[tuple[str, int, int], int] = {}
    for (layer_type, kv, hd, _), n in _layer_groups(text).items():
        groups[(layer_type, kv, hd)] = groups.get((layer_type, kv, hd), 0) + n
    total = 0
    parts = []
    for (layer_type, kv, hd), n in sorted(groups.items()):
        positions = context + canvas
        if layer_type == "sliding_attention" and window:
            positions = min(positions, window + canvas)
        total += n * 2 * kv * hd * 2 * positions * batch
        parts.append(
            f"{n} {layer_type.split('_')[0]} layers x 2 (K,V) x {kv} heads x {hd} dims x 2 bytes x "
            f"{positions:,} positions" + (f" x {batch}" if batch > 1 else "")
        )
    return total, " + ".join(parts)


def attention_copy_bytes(config: dict[str, Any], queries: int, keys: int, rows: int = 1) -> tuple[int, str]:
    """The transient copies one attention layer makes, at its largest layer: the decoder's read of the encoder
    cache concatenates the layer's K and V with the canvas's (a new K,V of `keys` positions per row), and the
    grouped-query attention of the 512-dim global layers repeats a row-varying mask for the stacked query
    heads (`engine.attention`: one byte per query x key x group; no K/V copy any more). Layers run one at a
    time, so the largest layer counts, once."""
    text = _text(config)
    heads = _int(text, "num_attention_heads", 1)
    worst, how = 0, ""
    for (layer_type, kv, hd, _), _n in _layer_groups(text).items():
        positions = keys
        window = _int(text, "sliding_window", 0)
        if layer_type == "sliding_attention" and window:
            positions = min(keys, window + queries)
        kv_copy = 2 * kv * hd * 2 * positions * rows
        groups = heads // max(1, kv)
        mask = groups * queries * positions * rows if hd > 256 and groups > 1 else 0
        if kv_copy + mask > worst:
            worst = kv_copy + mask
            how = (
                f"largest layer ({layer_type.split('_')[0]}): {rows} x 2 (K,V) x {kv} x {hd} x 2 bytes x "
                f"{positions:,} positions"
                + (f" + mask {groups} groups x {queries:,} x {positions:,}" if mask else "")
            )
    return worst, how


def logits_bytes(config: dict[str, Any], canvas: int, batch: int = 1) -> tuple[int, str]:
    """One denoising step's vocabulary-sized memory for `batch` candidate rows (see
    `engine.tools.step_memory`)."""
    vocab = _int(_text(config), "vocab_size")
    cells = batch * canvas * vocab
    scratch = min(STEP_CHUNK_BYTES, 5 * 4 * cells)
    total = math.ceil(cells * STEP_BYTES_PER_CELL_BF16) + scratch
    return total, (
        f"{batch} x {canvas} canvas x {vocab:,} vocabulary x {STEP_BYTES_PER_CELL_BF16} bytes per cell "
        f"(measured lean step) + {scratch / 1e9:.2f} GB sampling chunk"
    )


def activation_bytes(
    config: dict[str, Any], chunk: int, rows: int = 1, context: int | None = None
) -> tuple[int, str]:
    """Prefill activations for `rows` rows encoding `chunk` tokens at a time, plus the encoder's dense
    sliding-window mask (one byte per query x key pair per row) over `context` keys."""
    text = _text(config)
    h = _int(text, "hidden_size")
    per_token = (
        _int(text, "top_k_experts", 0) * 3 * _int(text, "moe_intermediate_size", 0)
        + 3 * _int(text, "intermediate_size")
        + 8 * h
    )
    keys = max(chunk, context or chunk)
    mask = rows * chunk * keys
    how = (
        f"{rows} row(s) x {chunk:,} tokens x {per_token:,} values "
        f"x 2 bytes + {rows} x {chunk:,} x {keys:,} mask bytes"
    )
    return 2 * rows * chunk * per_token + mask, how


def estimate(
    config: dict[str, Any],
    precision: Precision,
    *,
    context_tokens: int = DEFAULT_CONTEXT,
    batch: int = 1,
    device: str = "cuda",
    available_bytes: int | None = None,
    candidates: int | None = None,
    prefill_rows: int | None = None,
    prefill_chunk: int = PREFILL_CHUNK,
) -> FitEstimate:
    """The resident-memory estimate for `precision`, a context and a candidate count (`candidates`, alias of
    `batch`: batch rows of one request), compared with `available_bytes` if known.

    `prefill_rows` is how many rows the prompt is encoded for (default 1: the loop prefills once and expands
    the cache to the rows), `prefill_chunk` the most prompt tokens encoded per forward. The KV cache is
    counted per row: after the first canvas each row's cache is its own copy.
    """
    rows = max(1, candidates if candidates is not None else batch)
    canvas = _int(config, "canvas_length", 256) if isinstance(config, dict) else 256
    canvas = canvas or 256
    counts = param_counts(config)
    w, w_how = (
        plan_weight_bytes(config, precision)
        if precision in ("nf4", "nf4-mixed")
        else weight_bytes(counts, precision)
    )
    kv, kv_how = kv_cache_bytes(config, context_tokens, canvas, rows)
    # the request's own prefix-cache entry (`engine.prefix_cache`): one batch-1 copy of the prompt's cache,
    # held on the device beside the rows' caches while the request runs
    entry, entry_how = kv_cache_bytes(config, context_tokens, canvas, 1)
    kv, kv_how = kv + entry, f"{kv_how} + prefix-cache entry ({entry_how})"
    lg, lg_how = logits_bytes(config, canvas, rows)
    prefill = min(context_tokens, prefill_chunk) + canvas
    act, act_how = activation_bytes(config, prefill, prefill_rows or 1, context_tokens + canvas)
    pre_copy, pre_copy_how = attention_copy_bytes(config, prefill, context_tokens + canvas, prefill_rows or 1)
    # the decoder's forward: rows x canvas tokens of activations and its attention copies (the prefill's or
    # the decoder's moment, whichever is larger: they never overlap)
    dec, dec_how = activation_bytes(config, canvas, rows, None)
    dec_copy, dec_copy_how = attention_copy_bytes(config, canvas, context_tokens + canvas, rows)
    if dec + dec_copy > act + pre_copy:
        act, act_how = dec + dec_copy, f"decoder: {dec_how} + {dec_copy_how}"
    else:
        act, act_how = act + pre_copy, f"prefill: {act_how} + {pre_copy_how}"
    if precision in ("nf4", "nf4-mixed") and device.startswith("cuda"):
        buf, buf_how = experts_buffer_bytes(config)
        act, act_how = act + buf, f"{act_how} + {buf_how}"
    overhead = CUDA_OVERHEAD if device.startswith("cuda") else HOST_OVERHEAD
    total = w + kv + lg + act + overhead
    if available_bytes is None:
        verdict: Verdict = "unknown"
    elif total <= FITS_SHARE * available_bytes:
        verdict = "fits"
    elif total <= available_bytes:
        verdict = "tight"
    else:
        verdict = "wont_fit"
    on_cuda = device.startswith("cuda")
    overhead_how = "CUDA context, kernels, allocator slack" if on_cuda else "Python, torch, transformers"
    lines = [
        f"weights      {gb(w):>10}  = {w_how}",
        f"KV cache     {gb(kv):>10}  = {kv_how}",
        f"step (logits, self-conditioning, sampling) {gb(lg)} = {lg_how}",
        f"activations  {gb(act):>10}  = {act_how}",
        f"overhead     {gb(overhead):>10}  = {overhead_how}",
        f"total        {gb(total):>10}",
    ]
    if available_bytes is not None:
        lines.append(
            f"available    {gb(available_bytes):>10}  on {device}; fits <= {FITS_SHARE:.0%} of it "
            f"({gb(FITS_SHARE * available_bytes)}), tight <= 100% -> {verdict}"
        )
    est = FitEstimate(
        precision,
        context_tokens,
        canvas,
        w,
        kv,
        lg,
        act,
        overhead,
        device,
        available_bytes,
        verdict,
        tuple(lines),
        rows,
    )
    return FitEstimate(**{**est.__dict__, "lines": (est.summary, *lines)})


def read_config(model_dir: str | Path) -> dict[str, Any]:
    """config.json, read with the validation pass's cap (a typed error, never an unbounded read)."""
    from engine.weights.validate import read_json

    return read_json(Path(model_dir) / "config.json")


@dataclass(frozen=True)
class DeviceMemory:
    device: str  # "cuda:0" or "cpu"
    name: str
    total_bytes: int
    free_bytes: int


def host_memory() -> DeviceMemory:
    total = free = 0
    try:
        info = dict(
            (line.split(":")[0], int(line.split()[1]) * 1024)
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.split()[1:2] and line.split()[1].isdigit()
        )
        total, free = info.get("MemTotal", 0), info.get("MemAvailable", 0)
    except OSError:
        pass
    if not total and hasattr(os, "sysconf"):
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError):
            pass
    return DeviceMemory("cpu", "host RAM", total, free)


def devices_found() -> list[DeviceMemory]:
    """Every CUDA device (with its free memory now) and the host."""
    found = []
    try:
        import torch

        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                free, total = torch.cuda.mem_get_info(i)
                found.append(DeviceMemory(f"cuda:{i}", torch.cuda.get_device_name(i), total, free))
    except (ImportError, RuntimeError):
        pass
    found.append(host_memory())
    return found


def estimate_for_device(
    config: dict[str, Any],
    precision: Precision,
    device: str,
    *,
    context_tokens: int = DEFAULT_CONTEXT,
    candidates: int = 1,
) -> FitEstimate:
    """The estimate against what is free right now on `device` ("cpu", "cuda" or "cuda:N")."""
    want = "cuda:0" if device == "cuda" else device
    mem = next((d for d in devices_found() if d.device == want), None)
    return estimate(
        config,
        precision,
        context_tokens=context_tokens,
        candidates=candidates,
        device=f"{want} ({mem.name})" if mem else want,
        available_bytes=mem.free_bytes if mem and mem.free_bytes else None,
    )
