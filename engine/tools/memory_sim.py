"""What the real 26B-A4B needs on a GPU at a context and a candidate count, simulated on the meta device.

The whole 30-layer model with the real config is built on the meta device (NF4 stacks, no storage), the
request's state is set up as the loop holds it at its largest moment (every row's KV cache at the full
context, the request's own prefix-cache entry, the incoming self-conditioning logits) and one decoder forward
runs on it, on the GPU code path (sync-free experts, grouped-query attention). Every storage an op creates is
counted from the op that makes it until its last tensor dies; the peak, plus the weights and the request's
state, is the simulated need. A prefill chunk (the encoder over `PREFILL_CHUNK` tokens against the cache) is
simulated the same way.

Stand-in limits: a fused kernel's scratch space (SDPA's memory-efficient kernel, the grouped GEMM) is
invisible, so SDPA is counted as its output only (what the memory-efficient kernel allocates; the math
fallback would also hold the attention weights); allocator rounding and the CUDA context are not simulated
(the fit's fixed overhead is left out of the comparison); the sampling step after the forward is the fit's
fixed chunk, not simulated.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from engine.tools.step_memory import LiveTensorBytes


class LiveStorageBytes(LiveTensorBytes):
    """Peak live storage bytes of ops under it, meta tensors included (keyed by their storage object)."""

    def __init__(self, ignore: Any = (), adopt: Any = ()) -> None:
        """`ignore`: tensors whose storages are never counted (the weights: a view of one is no new memory);
        `adopt`: tensors that exist already and count as live until they die (the request's state)."""
        super().__init__()
        self._ignored = {t.untyped_storage()._cdata for t in ignore}
        for t in adopt:
            self._track(t)

    def _key(self, tensor: torch.Tensor, storage: torch.UntypedStorage) -> int | None:
        """The storage object's address: meta storages have no data pointer but are distinct objects."""
        key = int(storage._cdata)
        return None if key in self._ignored else key


@dataclass(frozen=True)
class SimulatedNeed:
    context: int
    rows: int
    weights: int
    kv_cache: int  # every row's cache + the request's prefix-cache entry
    self_conditioning: int  # the incoming self-conditioning logits
    decoder_peak: (
        int  # live bytes at the peak of a decoder forward, the request's state (cache, logits) included
    )
    prefill_peak: int  # live bytes at the peak of a prefill chunk, its batch-1 cache included

    @property
    def total(self) -> int:
        return self.weights + max(self.decoder_peak, self.prefill_peak)

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "total": self.total}


def _storage_bytes(tensors: Any) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            s = t.untyped_storage()
            seen[s._cdata] = s.nbytes()
    return sum(seen.values())


_MODELS: dict[tuple[int, int], Any] = {}


def real_meta_model(layers: int = 30, vocab_size: int = 262144) -> Any:
    """The real-config model on meta, NF4 (bf16 compute), on the GPU code path's experts forward."""
    key = (layers, vocab_size)
    if key not in _MODELS:
        from transformers import DiffusionGemmaConfig

        from engine import attention, fastpath
        from engine.tools.real_shape import real_config_dict
        from engine.weights.stream_load import build_skeleton_from_config

        attention.install()
        config = DiffusionGemmaConfig(**real_config_dict(layers, vocab_size))
        # transformers types `to` as the unbound function (self = the device)
        model = build_skeleton_from_config(config, torch.bfloat16, nf4=True).to("meta").eval()  # type: ignore[arg-type]
        fastpath.sync_free_experts(model)
        _MODELS[key] = model
    return _MODELS[key]


@contextmanager
def _sdpa_as_output_only() -> Any:
    """SDPA counted as the memory-efficient kernel allocates: its output (see the module docstring)."""
    real = torch.nn.functional.scaled_dot_product_attention

    def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *a: Any, **k: Any) -> torch.Tensor:
        return query.new_empty((*query.shape[:-1], value.shape[-1]))

    torch.nn.functional.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = real


def _cache(model: Any, rows: int, positions: int) -> Any:
    from transformers import DynamicCache

    text = model.config.get_text_config(decoder=True)
    cache = DynamicCache(config=text)
    window = int(text.sliding_window)
    for i, kind in enumerate(text.layer_types):
        layer = text.per_layer_config[i] if hasattr(text, "per_layer_config") else text
        kv, hd = int(layer.num_key_value_heads), int(layer.head_dim)
        n = min(positions, window) if kind == "sliding_attention" else positions
        k = torch.empty(rows, kv, n, hd, dtype=torch.bfloat16, device="meta")
        cache.update(k, torch.empty_like(k), i)
    return cache


def _handoff(model: Any) -> Any:
    from engine.sampling import SelfConditioningHandoff

    return SelfConditioningHandoff(model.model)


def simulate(
    context: int,
    rows: int,
    *,
    layers: int = 30,
    vocab_size: int = 262144,
    canvas: int = 256,
    prefill_chunk: int | None = None,
) -> SimulatedNeed:
    """The simulated need of one request at `context` prompt tokens and `rows` candidates (see the module)."""
    from engine.weights.fit import PREFILL_CHUNK

    model = real_meta_model(layers, vocab_size)
    chunk = prefill_chunk or PREFILL_CHUNK
    weights = _storage_bytes([*model.parameters(), *model.buffers()])
    with torch.no_grad(), _sdpa_as_output_only():
        # the largest moment of a step: the last canvas of the context, every row's cache full
        cache = _cache(model, rows, context)
        entry = _cache(model, 1, context)  # the request's own prefix-cache entry
        state = [t for c in (cache, entry) for layer in c.layers for t in (layer.keys, layer.values)]
        kv = _storage_bytes(state)
        sc = torch.empty(rows, canvas, vocab_size, dtype=torch.bfloat16, device="meta")
        ids = torch.zeros(rows, canvas, dtype=torch.long, device="meta")
        weights_t = [*model.parameters(), *model.buffers()]
        from engine import fastpath

        fastpath.free_stack_buffers()  # the reused expert buffers are made inside the forward, and so counted
        tracker = LiveStorageBytes(ignore=weights_t, adopt=[*state, sc])
        del state
        handoff = _handoff(
            model
        )  # as the loop does: no frame keeps the incoming logits once the body read them
        handoff.put(sc)
        del sc
        try:
            with tracker:
                out = model(decoder_input_ids=ids, past_key_values=cache, self_conditioning_logits=None)
                del out
        finally:
            handoff.remove()
        decoder_peak = tracker.peak
        del cache, entry
        # a prefill chunk at the end of the context (batch 1), against its cache
        pre_cache = _cache(model, 1, max(0, context - chunk))
        piece = torch.zeros(1, min(chunk, context), dtype=torch.long, device="meta")
        fastpath.free_stack_buffers()
        pre_state = [t for layer in pre_cache.layers for t in (layer.keys, layer.values)]
        tracker = LiveStorageBytes(ignore=weights_t, adopt=pre_state)
        del pre_state
        with tracker:
            model.model.encoder(input_ids=piece, past_key_values=pre_cache)
        prefill_peak = tracker.peak
        fastpath.free_stack_buffers()
    return SimulatedNeed(
        context, rows, weights, kv, rows * canvas * vocab_size * 2, decoder_peak, prefill_peak
    )
