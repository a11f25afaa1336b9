"""Prefill once, in chunks, and reuse the encoder KV cache of earlier prompts (prompt caching for the
encoder).

The encoder that builds the KV cache over a request's prompt is causal: the keys and values at position i
depend on tokens 0..i only. So the cache built for one request is valid for the next request's identical
leading tokens, and only the rest needs encoding. This module does three things, all on the plain
(`DynamicCache`) path:

- **Prefill once**: the prompt is encoded with batch 1 and the cache is *expanded* (a view, no copy) to the K
  candidate rows, instead of encoding the same prompt K times.
- **Chunked prefill**: the prompt is encoded `chunk` tokens at a time, at chunk boundaries fixed at multiples
  of `chunk` from position 0, so the activations and the encoder masks stay bounded (`chunk` x (window +
  chunk) for sliding layers, `chunk` x prompt for global ones) however long the document is. A prompt of at
  most `chunk` tokens is one encoder call with the very arguments `generate()` uses, so equivalence with it is
  unchanged.
- **Prefix reuse**: `PrefixCache` keeps the caches of the last prompts per document (a small LRU bounded in
  bytes). A new request finds the longest common token prefix with them and resumes encoding from the last
  chunk boundary inside it, so an edit near the cursor costs re-encoding from (the chunk boundary before) the
  edit on.

Exactness, by construction. Floating-point results depend on the shapes an operation runs with (a matmul or an
attention over 300 keys does not round like one over 700). A reused cache is therefore never stitched at an
arbitrary position: encoding always resumes at a chunk boundary, so every chunk of the request runs with
exactly the shapes and inputs a fresh chunked prefill of the same prompt runs with, and the cache is bit for
bit the fresh one (a test compares every layer's tensors and the generated tokens). The one other resume point
is the whole prompt itself, when a request repeats the stored prompt exactly: its end state *is* a fresh
prefill's end state.

Sliding-window layers. A `DynamicSlidingWindowLayer` keeps only the last `window - 1` positions, so a cache
taken at position n cannot be cut back to an earlier position p: the keys before n - window + 1 are gone. Each
entry therefore keeps, for the sliding layers, the keys and values of the last `tail + window - 1` positions
(recorded while encoding), which makes every chunk boundary in the last `tail` tokens a valid resume point;
global layers are kept whole (they are the working cache itself, shared, not copied). An edit further back
than `tail` tokens re-encodes the prompt from the start (still exact, just not faster).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

PREFILL_CHUNK = (
    512  # tokens per encoder call: bounds activations and masks; resume points are multiples of it
)
DEFAULT_TAIL = (
    4 * PREFILL_CHUNK
)  # sliding-layer history kept per entry: edits in the last 2,048 tokens are cheap
PER_DOCUMENT = 3  # entries per document (a draft's and a rewrite's prompts differ from their first line)


@dataclass
class PrefillStats:
    """What one prefill did: how many prompt tokens came from a stored cache and how many were encoded."""

    prompt_tokens: int = 0
    reused_tokens: int = 0
    encoded_tokens: int = 0
    encoder_calls: int = 0
    seconds: float = 0.0


@dataclass
class PrefixEntry:
    """The encoder state of one prompt: all of it for global layers, the last positions for sliding layers."""

    document: str
    tokens: torch.Tensor  # long [n] (cpu)
    full: dict[int, tuple[torch.Tensor, torch.Tensor]]  # layer -> keys, values [1, h, n, d]
    sliding: dict[int, tuple[torch.Tensor, torch.Tensor]]  # layer -> keys, values [1, h, n - start, d]
    sliding_start: int  # first position held by the sliding layers' history
    window: int  # the sliding layers' window (0: none)
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        tensors = [t for kv in (*self.full.values(), *self.sliding.values()) for t in kv]
        self.nbytes = sum(t.numel() * t.element_size() for t in tensors) + self.tokens.numel() * 8

    @property
    def length(self) -> int:
        return int(self.tokens.numel())


class _RecordingSlidingLayer(DynamicSlidingWindowLayer):
    """A sliding-window cache layer that behaves exactly like its parent and, while `record` is a list, also
    keeps every key/value chunk it is given (the parent drops all but the last `window - 1` positions)."""

    def __init__(self, sliding_window: int) -> None:
        super().__init__(sliding_window=sliding_window)
        self.record: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.record_from = 0  # position of the first recorded key
        self.keep = 0  # record at least the last `keep` positions (older chunks are dropped as encoding goes)

    def start_recording(self, at: int, keep: int) -> None:
        self.record, self.record_from, self.keep = [], at, keep

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if self.record is not None:
            self.record.append((key_states, value_states))
            held = sum(k.shape[-2] for k, _ in self.record)
            while len(self.record) > 1 and held - self.record[0][0].shape[-2] >= self.keep:
                dropped = self.record.pop(0)[0].shape[-2]
                held -= dropped
                self.record_from += dropped
        return super().update(key_states, value_states, *args, **kwargs)


def _new_cache(model: Any) -> DynamicCache:
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicSlidingWindowLayer:
            cache.layers[i] = _RecordingSlidingLayer(layer.sliding_window)
    return cache


def _dyn_layers(cache: DynamicCache) -> list[DynamicLayer]:
    """The layers of a `_reusable` cache (DynamicLayers and sliding subclasses), as such: transformers types
    `cache.layers` as a union of layer kinds, some without keys and values."""
    return cast("list[DynamicLayer]", cache.layers)


def _reusable(cache: DynamicCache) -> bool:
    """Only caches made of plain global and sliding layers are understood well enough to store and resume."""
    return all(type(layer) in (DynamicLayer, _RecordingSlidingLayer) for layer in cache.layers)


def lcp(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of two 1-D id tensors."""
    n = min(a.numel(), b.numel())
    if n == 0:
        return 0
    diff = (a[:n] != b[:n]).nonzero()
    return int(diff[0, 0]) if diff.numel() else n


class PrefixCache:
    """A small LRU of encoder caches, bounded by `max_bytes` in total and `per_document` entries per document.

    Thread-safe for the one-engine-thread use it has (a lock guards the table); `clear()` frees everything
    (model unload, out of memory).
    """

    def __init__(
        self,
        max_bytes: int = 1 << 30,
        *,
        per_document: int = PER_DOCUMENT,
        chunk: int = PREFILL_CHUNK,
        tail: int = DEFAULT_TAIL,
    ) -> None:
        if chunk < 1 or tail < 0 or per_document < 1 or max_bytes < 0:
            raise ValueError("chunk and per_document must be at least 1, tail and max_bytes at least 0")
        self.max_bytes = max_bytes
        self.per_document = per_document
        self.chunk = chunk
        self.tail = tail
        self._entries: OrderedDict[int, PrefixEntry] = OrderedDict()  # oldest first
        self._next = 0
        self._lock = threading.Lock()

    # -- the table -------------------------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[PrefixEntry]:
        """Oldest first."""
        return list(self._entries.values())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def best(self, tokens: torch.Tensor, document: str = "") -> tuple[int | None, int]:
        """The stored entry with the longest common prefix with `tokens` (this document's first, on ties), and
        it."""
        best_key, best_len = None, 0
        for key, entry in self._entries.items():
            n = lcp(entry.tokens, tokens)
            if n > best_len or (n == best_len and n > 0 and entry.document == document):
                best_key, best_len = key, n
        return best_key, best_len

    def _put(self, entry: PrefixEntry, replaces: int | None) -> None:
        with self._lock:
            if replaces is not None:
                self._entries.pop(replaces, None)
            if entry.nbytes > self.max_bytes:
                return  # larger than the whole budget: not kept (the request itself still ran)
            self._next += 1
            self._entries[self._next] = entry
            mine = [k for k, e in self._entries.items() if e.document == entry.document]
            for k in mine[: max(0, len(mine) - self.per_document)]:
                del self._entries[k]
            while self.nbytes > self.max_bytes and len(self._entries) > 1:
                self._entries.popitem(last=False)

    # -- prefill ---------------------------------------------------------------------------------------------

    def resume_point(self, entry: PrefixEntry, common: int, length: int) -> int:
        """Where encoding may resume from `entry` for a prompt of `length` tokens sharing `common` leading
        ones: the whole prompt on an exact repeat, else the last chunk boundary within the common part whose
        sliding-window state the entry still holds (0 when none)."""
        if common == length == entry.length:
            return length
        b = min(common, length) // self.chunk * self.chunk
        if b == 0:
            return 0
        window = entry.window
        need = b - min(b, window - 1) if window else b  # first position a sliding layer holds at b
        return b if need >= entry.sliding_start else 0

    def prefill(
        self, model: Any, ids: torch.Tensor, *, document: str = ""
    ) -> tuple[DynamicCache, PrefillStats]:
        """The encoder cache of `ids` ([1, P]), resumed from the best stored entry, and stored for next
        time."""
        tokens = ids[0].detach().to("cpu")
        key, common = self.best(tokens, document)
        entry = self._entries.get(key) if key is not None else None
        start = self.resume_point(entry, common, tokens.numel()) if entry is not None else 0
        cache = _new_cache(model)
        if not _reusable(cache):
            cache, stats = encode_chunked(model, ids, chunk=self.chunk)
            return cache, stats
        if start and entry is not None:
            _restore(cache, entry, start)
            with self._lock:
                self._entries.move_to_end(key)  # type: ignore[arg-type]
        if start == tokens.numel() and entry is not None:
            return cache, PrefillStats(start, start, 0, 0, 0.0)
        keep = self.tail + _window_of(cache)
        for layer in cache.layers:
            if isinstance(layer, _RecordingSlidingLayer):
                layer.start_recording(start, keep)
        cache, stats = encode_chunked(model, ids, chunk=self.chunk, cache=cache, start=start)
        stats.reused_tokens = start
        self._put(self._entry(cache, tokens, document, entry, start), replaces=key if start else None)
        for layer in cache.layers:
            if isinstance(layer, _RecordingSlidingLayer):
                layer.record = None
        return cache, stats

    def _entry(
        self, cache: DynamicCache, tokens: torch.Tensor, document: str, base: PrefixEntry | None, start: int
    ) -> PrefixEntry:
        n = tokens.numel()
        window = _window_of(cache)
        keep_from = max(0, n - self.tail - (window - 1)) if window else n
        full: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        sliding: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        sliding_start = 0
        for i, layer in enumerate(_dyn_layers(cache)):
            if isinstance(layer, _RecordingSlidingLayer):
                assert layer.record is not None
                keys = [k for k, _ in layer.record]
                values = [v for _, v in layer.record]
                lo = layer.record_from
                if lo == start and start and base is not None and keep_from < start:
                    # positions before `start` come from the entry this prefill resumed from
                    bs = base.sliding_start
                    lo = max(bs, keep_from)
                    bk, bv = base.sliding[i]
                    keys.insert(0, bk[:, :, lo - bs : start - bs])
                    values.insert(0, bv[:, :, lo - bs : start - bs])
                cut = max(0, keep_from - lo)
                k = torch.cat(keys, dim=-2)[:, :, cut:]
                v = torch.cat(values, dim=-2)[:, :, cut:]
                sliding[i] = (k.clone(), v.clone()) if cut else (k, v)
                sliding_start = lo + cut
            else:
                assert layer.keys is not None and layer.values is not None
                full[i] = (
                    layer.keys,
                    layer.values,
                )  # the working cache's own tensors: never written in place
        return PrefixEntry(document, tokens.clone(), full, sliding, sliding_start, window)


def _window_of(cache: DynamicCache) -> int:
    for layer in cache.layers:
        if isinstance(layer, DynamicSlidingWindowLayer):
            return int(layer.sliding_window)
    return 0


def _restore(cache: DynamicCache, entry: PrefixEntry, at: int) -> None:
    """Make `cache` hold exactly what a fresh chunked prefill holds after `at` tokens of the entry's
    prompt."""
    for i, layer in enumerate(_dyn_layers(cache)):
        if isinstance(layer, DynamicSlidingWindowLayer):
            keys, values = entry.sliding[i]
            hi = at - entry.sliding_start
            lo = hi - min(at, layer.sliding_window - 1)
            layer.lazy_initialization(keys, values)
            layer.keys, layer.values = keys[:, :, lo:hi], values[:, :, lo:hi]
            layer.cumulative_length = at
        else:
            keys, values = entry.full[i]
            layer.lazy_initialization(keys, values)
            layer.keys, layer.values = keys[:, :, :at], values[:, :, :at]


def encode_chunked(
    model: Any,
    ids: torch.Tensor,
    *,
    chunk: int = PREFILL_CHUNK,
    cache: DynamicCache | None = None,
    start: int = 0,
) -> tuple[DynamicCache, PrefillStats]:
    """Encode `ids[:, start:]` onto `cache` (which holds positions 0..start), `chunk` tokens at a time, with
    chunk boundaries at multiples of `chunk` (so a resumed prefill runs the same shapes as a fresh one)."""
    t0 = time.perf_counter()
    config = model.config
    encoder = model.model.encoder
    device = ids.device
    batch, total = ids.shape
    if cache is None:
        cache = _new_cache(model)
    stats = PrefillStats(prompt_tokens=total)
    pos = start
    while pos < total:
        end = min(total, (pos // chunk + 1) * chunk)
        piece = ids[:, pos:end].clone(memory_format=torch.contiguous_format)
        attention_mask = torch.ones((batch, end), dtype=torch.bool, device=device)
        position_ids = torch.arange(pos, end, dtype=torch.int32, device=device).unsqueeze(0)
        dummy = torch.empty((batch, end - pos, 0), dtype=model.dtype, device=device)
        masks = encoder.create_masks_for_generate(
            config=config,
            inputs_embeds=dummy,
            attention_mask=attention_mask,
            past_key_values=cache,
            position_ids=position_ids,
            mm_token_type_ids=None,
        )
        cache = encoder(
            input_ids=piece, attention_mask=masks, past_key_values=cache, position_ids=position_ids
        ).past_key_values
        stats.encoder_calls += 1
        stats.encoded_tokens += end - pos
        pos = end
    stats.seconds = time.perf_counter() - t0
    return cache, stats


def expand_cache(cache: DynamicCache, batch: int) -> DynamicCache:
    """Share a batch-1 cache across `batch` rows: every layer's keys and values become expanded views (no
    copy); the first write (the next block's encode, or the decoder's concatenation) materialises them per
    row."""
    if batch == 1:
        return cache
    for layer in _dyn_layers(cache):
        if getattr(layer, "is_initialized", False) and layer.keys is not None and layer.keys.numel():
            assert layer.values is not None  # set together with the keys
            layer.keys = layer.keys.expand(batch, *layer.keys.shape[1:])
            layer.values = layer.values.expand(batch, *layer.values.shape[1:])
    return cache


def prefill_prompt(
    model: Any,
    prompt_ids: torch.Tensor,
    *,
    prefix: PrefixCache | None = None,
    document: str = "",
    chunk: int = PREFILL_CHUNK,
) -> tuple[DynamicCache, PrefillStats]:
    """The encoder cache for `prompt_ids` ([B, P]). Identical rows (K candidates of one prompt) are encoded
    once, with batch 1, and shared; rows that differ are encoded together as before. Rows that are one row
    expanded (stride 0, as `engine.plan.Plan.prompt_ids` hands them) are identical by construction: no
    comparison."""
    rows = prompt_ids.shape[0]
    same = rows == 1 or prompt_ids.stride(0) == 0 or bool((prompt_ids == prompt_ids[:1]).all())
    if not same:
        return encode_chunked(model, prompt_ids, chunk=chunk)
    one = prompt_ids[:1]
    if prefix is not None:
        cache, stats = prefix.prefill(model, one, document=document)
    else:
        cache, stats = encode_chunked(model, one, chunk=chunk)
    return expand_cache(cache, rows), stats
