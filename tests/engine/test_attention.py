"""Grouped-query attention without the K/V copy equals transformers' repeat_kv + SDPA, at the global layers'
head shape (16 query heads over 2 K/V heads of 512 dims), and transformers' own path is kept everywhere
else."""

from __future__ import annotations

import types

import pytest
import torch

from engine import attention


def _module(groups: int, causal: bool = False) -> types.SimpleNamespace:
    return types.SimpleNamespace(num_key_value_groups=groups, is_causal=causal, training=False)


def _reference(q, k, v, mask, groups):
    from transformers.integrations.sdpa_attention import repeat_kv

    out = torch.nn.functional.scaled_dot_product_attention(
        q, repeat_kv(k, groups), repeat_kv(v, groups), attn_mask=mask, scale=1.0
    )
    return out.transpose(1, 2)


@pytest.mark.parametrize("mask_kind", ["bool_rows", "float_rows", "broadcast_keys", "per_head"])
def test_grouped_queries_equal_the_kv_copy_at_the_global_layer_shape(mask_kind: str) -> None:
    gen = torch.Generator().manual_seed(0)
    batch, q_heads, kv_heads, q_len, k_len, dim = 2, 16, 2, 12, 40, 512
    q = torch.randn(batch, q_heads, q_len, dim, generator=gen) / dim**0.5
    k = torch.randn(batch, kv_heads, k_len, dim, generator=gen)
    v = torch.randn(batch, kv_heads, k_len, dim, generator=gen)
    allowed = torch.rand(batch, 1, q_len, k_len, generator=gen) > 0.3
    allowed[..., 0] = True
    mask = {
        "bool_rows": allowed,
        "float_rows": torch.where(allowed, 0.0, float("-inf")),
        "broadcast_keys": allowed[:, :, :1],
        "per_head": (torch.rand(batch, q_heads, q_len, k_len, generator=gen) > 0.3)
        | (torch.arange(k_len) == 0),
    }[mask_kind]
    module = _module(q_heads // kv_heads)
    assert attention.needs_grouped_queries(module, q, k, v, mask)
    attention.install()
    out, _ = attention.sdpa_attention_forward(module, q, k, v, mask, scaling=1.0, is_causal=False)
    torch.testing.assert_close(out, _reference(q, k, v, mask, q_heads // kv_heads), rtol=1e-5, atol=1e-5)


def test_small_heads_and_single_queries_keep_transformers_path() -> None:
    q = torch.randn(1, 4, 8, 16)
    k = torch.randn(1, 2, 8, 16)
    assert not attention.needs_grouped_queries(_module(2), q, k, k, torch.ones(1, 1, 8, 8, dtype=torch.bool))
    q512, k512 = torch.randn(1, 4, 1, 512), torch.randn(1, 2, 8, 512)
    assert not attention.needs_grouped_queries(_module(2), q512, k512, k512, None)


def test_no_kv_copy_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory the fix is for: no tensor of the repeated K/V's size is created."""
    from engine.tools.step_memory import LiveTensorBytes

    q = torch.randn(1, 16, 16, 512)
    k = torch.randn(1, 2, 2048, 512)
    mask = torch.ones(1, 1, 16, 2048, dtype=torch.bool)
    attention.install()
    with LiveTensorBytes() as live:
        attention.sdpa_attention_forward(_module(8), q, k, k, mask, scaling=1.0, is_causal=False)
    repeated = 16 * 2048 * 512 * 4
    assert live.peak < repeated / 2, f"peak {live.peak:,} bytes: a K/V copy ({repeated:,}) was made"
