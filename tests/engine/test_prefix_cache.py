"""Prefix reuse and prefill once (issue 17; issue 15 item 3): exact, bounded, and encoded once for K rows.

The tiny checkpoint has a 64-token sliding window on its first layer and a global second layer; the prompts
here are a few hundred tokens and the chunks small, so resumes cross the window and chunk boundaries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from engine.api import DenoiseSettings, DraftRequest
from engine.denoise import denoise
from engine.prefix_cache import PrefixCache, encode_chunked, lcp, prefill_prompt

CHUNK = 48
TAIL = 96


def _ids(session, n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    vocab = session.tokenizer.vocab_size if hasattr(session.tokenizer, "vocab_size") else 512
    return torch.randint(8, min(vocab, 500), (1, n), generator=g)


def _assert_same_cache(a, b) -> None:
    assert len(a.layers) == len(b.layers)
    for la, lb in zip(a.layers, b.layers, strict=True):
        assert la.get_seq_length() == lb.get_seq_length()
        assert la.keys.shape == lb.keys.shape
        assert torch.equal(la.keys, lb.keys) and torch.equal(la.values, lb.values)


@contextmanager
def encoder_calls(model) -> Iterator[list[tuple[int, int]]]:
    """Record (batch, tokens) of every encoder call."""
    encoder = model.model.encoder
    seen: list[tuple[int, int]] = []
    original = encoder.forward

    def forward(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(tuple(ids.shape))
        return original(*args, **kwargs)

    encoder.forward = forward
    try:
        yield seen
    finally:
        del encoder.forward


def test_lcp() -> None:
    a = torch.tensor([1, 2, 3, 4])
    assert lcp(a, torch.tensor([1, 2, 9])) == 2
    assert lcp(a, a) == 4
    assert lcp(a, torch.tensor([5])) == 0
    assert lcp(a, torch.tensor([], dtype=torch.long)) == 0


@torch.inference_mode()
def test_resumed_cache_is_bit_for_bit_a_fresh_one(session) -> None:
    model = session.model
    store = PrefixCache(chunk=CHUNK, tail=TAIL)
    first = _ids(session, 400)
    store.prefill(model, first)
    assert len(store) == 1

    # An edit near the end: resumes at the last chunk boundary before it, encodes only from there.
    edited = torch.cat([first[:, :350], _ids(session, 70, seed=1)], dim=1)
    cache, stats = store.prefill(model, edited)
    assert stats.reused_tokens == 350 // CHUNK * CHUNK
    assert stats.encoded_tokens == edited.shape[1] - stats.reused_tokens
    fresh, _ = encode_chunked(model, edited, chunk=CHUNK)
    _assert_same_cache(cache, fresh)

    # An exact repeat encodes nothing and is the fresh cache.
    cache, stats = store.prefill(model, edited)
    assert (stats.reused_tokens, stats.encoded_tokens, stats.encoder_calls) == (420, 0, 0)
    _assert_same_cache(cache, fresh)

    # A request that is a prefix of the stored one (the cursor moved back a little).
    shorter = edited[:, :380]
    cache, stats = store.prefill(model, shorter)
    assert stats.reused_tokens == 380 // CHUNK * CHUNK
    _assert_same_cache(cache, encode_chunked(model, shorter, chunk=CHUNK)[0])


@torch.inference_mode()
def test_an_edit_before_the_kept_tail_re_encodes_and_stays_exact(session) -> None:
    model = session.model
    store = PrefixCache(chunk=CHUNK, tail=TAIL)
    first = _ids(session, 400)
    store.prefill(model, first)
    early = torch.cat([first[:, :100], _ids(session, 300, seed=2)], dim=1)  # sliding history there is gone
    cache, stats = store.prefill(model, early)
    assert stats.reused_tokens == 0 and stats.encoded_tokens == 400
    _assert_same_cache(cache, encode_chunked(model, early, chunk=CHUNK)[0])


@torch.inference_mode()
def test_reused_prefix_gives_exactly_the_fresh_tokens_for_k_rows(session) -> None:
    model = session.model
    gen = model.generation_config
    settings = DenoiseSettings(max_steps=6)
    prompt = _ids(session, 300, seed=3).repeat(3, 1)
    edited = torch.cat([prompt[:, :280], _ids(session, 25, seed=4).repeat(3, 1)], dim=1)

    def run(ids: torch.Tensor, store: PrefixCache):
        return denoise(
            model,
            ids,
            settings,
            max_new_tokens=64,
            eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id,
            seed=9,
            prefix=store,
        )

    for ids in (prompt, edited):
        fresh = run(ids, PrefixCache(chunk=CHUNK, tail=TAIL))  # a cold store: a fresh chunked prefill
        assert fresh.prefill.reused_tokens == 0
        warm_store = PrefixCache(chunk=CHUNK, tail=TAIL)
        run(prompt, warm_store)
        warm = run(ids, warm_store)
        assert warm.prefill.reused_tokens > 0
        assert torch.equal(warm.sequences, fresh.sequences)
        assert torch.equal(warm.confidence, fresh.confidence)


@torch.inference_mode()
def test_prefill_once_encodes_the_prompt_with_batch_one_for_k_rows(session) -> None:
    """Issue 15 item 3: K candidate rows share one batch-1 prefill, chunked so no call exceeds the chunk."""
    model = session.model
    gen = model.generation_config
    prompt = _ids(session, 130, seed=5)
    with encoder_calls(model) as calls:
        cache, stats = prefill_prompt(model, prompt.repeat(4, 1), chunk=CHUNK)
    assert calls == [(1, 48), (1, 48), (1, 34)]
    assert stats.encoder_calls == 3 and stats.encoded_tokens == 130
    assert all(layer.keys.shape[0] == 4 for layer in cache.layers)
    assert all(
        layer.keys.untyped_storage().nbytes() == cache.layers[i].keys[:1].untyped_storage().nbytes()
        for i, layer in enumerate(cache.layers)
    )  # an expanded view: no K copies

    with encoder_calls(model) as calls:
        out = denoise(
            model,
            prompt.repeat(3, 1),
            DenoiseSettings(max_steps=3),
            max_new_tokens=64,
            eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id,
            seed=2,
        )
    assert calls[0] == (1, 130)  # the prompt once (one chunk at the default size) ...
    assert all(c[0] == 3 for c in calls[1:])  # ... later blocks' canvases per row
    # Row k of the batch equals a single run with seed + k: the rows share one prompt encode.
    for k in range(3):
        single = denoise(
            model,
            prompt,
            DenoiseSettings(max_steps=3),
            max_new_tokens=64,
            eos_token_ids=gen.eos_token_id,
            pad_token_id=gen.pad_token_id,
            seed=2 + k,
        )
        assert torch.equal(out.sequences[k], single.sequences[0]), k


@torch.inference_mode()
def test_rows_that_differ_are_still_encoded_together(session) -> None:
    model = session.model
    rows = torch.cat([_ids(session, 40, seed=6), _ids(session, 40, seed=7)])
    with encoder_calls(model) as calls:
        prefill_prompt(model, rows, chunk=CHUNK)
    assert calls == [(2, 40)]


@torch.inference_mode()
def test_the_store_is_bounded_in_bytes_and_per_document(session) -> None:
    model = session.model
    probe = PrefixCache(chunk=CHUNK, tail=TAIL)
    probe.prefill(model, _ids(session, 200))
    one = probe.entries()[0].nbytes
    assert one > 0 and probe.nbytes == one

    store = PrefixCache(max_bytes=int(one * 2.5), chunk=CHUNK, tail=TAIL, per_document=5)
    for seed in range(5):
        store.prefill(model, _ids(session, 200, seed=10 + seed), document=f"doc{seed}")
        assert store.nbytes <= store.max_bytes
    assert [e.document for e in store.entries()] == ["doc3", "doc4"]  # least recently used went first

    per_doc = PrefixCache(chunk=CHUNK, tail=TAIL, per_document=2)
    for seed in range(4):
        per_doc.prefill(model, _ids(session, 100, seed=20 + seed), document="a")
    per_doc.prefill(model, _ids(session, 100, seed=30), document="b")
    assert [e.document for e in per_doc.entries()] == ["a", "a", "b"]

    tiny = PrefixCache(max_bytes=one // 2, chunk=CHUNK, tail=TAIL)
    tiny.prefill(model, _ids(session, 200))
    assert len(tiny) == 0  # larger than the whole budget: not kept

    # Sliding-layer history is bounded by the tail, whatever the prompt length.
    long_store = PrefixCache(chunk=CHUNK, tail=TAIL)
    long_store.prefill(model, _ids(session, 900, seed=40))
    entry = long_store.entries()[0]
    for keys, _ in entry.sliding.values():
        assert keys.shape[-2] == TAIL + entry.window - 1
    assert entry.sliding_start == 900 - TAIL - entry.window + 1


@torch.inference_mode()
def test_a_successor_prompt_replaces_the_entry_it_resumed_from(session) -> None:
    model = session.model
    store = PrefixCache(chunk=CHUNK, tail=TAIL)
    doc = _ids(session, 300, seed=50)
    store.prefill(model, doc, document="d")
    typed = torch.cat([doc, _ids(session, 10, seed=51)], dim=1)  # the writer typed a few more words
    _, stats = store.prefill(model, typed, document="d")
    assert stats.reused_tokens == 288
    assert len(store) == 1 and store.entries()[0].length == 310


def test_session_reuses_the_prefix_of_a_repeated_request(session) -> None:
    before = "In the morning the harbour was quiet, and the boats rested on the grey water. " * 12
    settings = DenoiseSettings(max_steps=4, seed=3)
    assert session.prefix_cache is not None
    session.prefix_cache.clear()
    first = session.run(DraftRequest(before=before, max_new_tokens=32, settings=settings))
    again = session.run(DraftRequest(before=before, max_new_tokens=32, settings=settings))
    assert first.stats.reused_tokens == 0 and first.stats.prompt_tokens > 0
    assert again.stats.reused_tokens == again.stats.prompt_tokens == first.stats.prompt_tokens
    assert again.candidates == first.candidates


def test_prefix_cache_rejects_nonsense_bounds() -> None:
    with pytest.raises(ValueError):
        PrefixCache(chunk=0)


@torch.inference_mode()
def test_chunked_prefill_keeps_the_encoder_masks_bounded(session) -> None:
    """Issue 15 item 3: each call's sliding-window mask is chunk x (window - 1 + chunk) at most, however long
    the prompt; the global mask grows only linearly (chunk x prompt), never prompt x prompt."""
    model = session.model
    window = int(model.config.text_config.sliding_window)
    encoder = model.model.encoder
    shapes: list[dict[str, tuple[int, ...] | None]] = []
    original = encoder.forward

    def forward(*args, **kwargs):
        masks = kwargs["attention_mask"]
        shapes.append({k: None if v is None else tuple(v.shape) for k, v in masks.items()})
        return original(*args, **kwargs)

    encoder.forward = forward
    try:
        encode_chunked(model, _ids(session, 600, seed=60), chunk=CHUNK)
    finally:
        del encoder.forward
    assert len(shapes) == -(-600 // CHUNK)
    for s in shapes:
        sliding = s["sliding_attention"]
        assert sliding is None or (sliding[-2] <= CHUNK and sliding[-1] <= window - 1 + CHUNK), s
        full = s["full_attention"]
        assert full is None or (full[-2] <= CHUNK and full[-1] <= 600), s
