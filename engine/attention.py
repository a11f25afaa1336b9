"""Exact grouped-query attention without copying K/V to every query head, for the 512-dim global layers.

transformers' SDPA attention uses SDPA's own GQA (`enable_gqa`) only without a mask and for head dims <= 256;
the 26B-A4B's global layers have 512-dim heads and 16 query heads over 2 K/V heads, so it calls `repeat_kv`,
which copies keys and values 8 times: 32 KiB per position per row per global layer (about 1.1 GB per row at
32K), the largest term the fit missed. Here the queries are reshaped instead: the 8 query heads of one group
are stacked along the query axis, so each K/V head serves its own group in one SDPA call. Same products, same
softmax per query row: the result equals the reference within floating-point tolerance (the reduction order
inside SDPA may differ).

Only that case is changed; everything else (and so every CPU test on the tiny model, whose heads are 16-dim)
goes to transformers' function as before. The mask, when it differs between query rows, is repeated for the
stacked rows (one byte per query row x key when boolean: 2 KiB per position per row; counted by the fit).
"""

from __future__ import annotations

from typing import Any

import torch

SDPA_GQA_MAX_HEAD_DIM = (
    256  # transformers' use_gqa_in_sdpa: larger heads (or any mask) fall back to repeat_kv
)
_installed: dict[str, Any] = {}


def needs_grouped_queries(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
) -> bool:
    """Would transformers copy K/V here (groups > 1, several query rows, and no SDPA GQA)? Only for heads
    larger than SDPA's GQA limit: smaller heads keep transformers' own path."""
    from transformers.integrations.sdpa_attention import use_gqa_in_sdpa

    groups = int(getattr(module, "num_key_value_groups", 1) or 1)
    if groups <= 1 or query.shape[2] == 1 or key.shape[-1] <= SDPA_GQA_MAX_HEAD_DIM:
        return False
    return not use_gqa_in_sdpa(attention_mask, key, value)


def grouped_query_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    scaling: float | None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """softmax(q k^T * scaling + mask) v with q [B, Hq, Lq, D] and k, v [B, Hkv, Lk, D] (query head h uses K/V
    head h // (Hq / Hkv), as `repeat_kv` pairs them); returns [B, Lq, Hq, D] like transformers' SDPA
    function."""
    batch, q_heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    groups = q_heads // kv_heads
    stacked = query.reshape(batch, kv_heads, groups * q_len, dim)  # head h = g_kv * groups + g: a view
    mask = attention_mask
    if mask is not None and mask.shape[-2] != 1:
        if mask.shape[1] == 1:
            mask = (
                mask[:, :, None]
                .expand(batch, 1, groups, q_len, mask.shape[-1])
                .reshape(batch, 1, groups * q_len, mask.shape[-1])
            )
        else:  # one mask per query head: a view in the same stacked order
            mask = mask.expand(batch, q_heads, q_len, mask.shape[-1]).reshape(
                batch, kv_heads, groups * q_len, mask.shape[-1]
            )
    out = torch.nn.functional.scaled_dot_product_attention(
        stacked, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling, is_causal=False
    )
    return out.reshape(batch, q_heads, q_len, dim).transpose(1, 2).contiguous()


def sdpa_attention_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, with `grouped_query_attention` where it would have copied K/V."""
    stock = _installed["stock"]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # with a mask, transformers' SDPA call is not causal either (the mask says it); without one a causal call
    # would need the stacked rows' causal alignment, which stays with transformers
    if (
        (not causal or attention_mask is not None)
        and kwargs.get("position_bias") is None
        and kwargs.get("cache") is None
        and needs_grouped_queries(module, query, key, value, attention_mask)
    ):
        return grouped_query_attention(
            query, key, value, attention_mask, scaling=scaling, dropout=dropout
        ), None
    return stock(
        module,
        query,
        key,
        value,
        attention_mask,
        dropout=dropout,
        scaling=scaling,
        is_causal=is_causal,
        **kwargs,
    )


def install() -> None:
    """Make transformers' "sdpa" attention this one (idempotent; the stock function is kept and called)."""
    if _installed:
        return
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    _installed["stock"] = ALL_ATTENTION_FUNCTIONS["sdpa"]
    ALL_ATTENTION_FUNCTIONS["sdpa"] = sdpa_attention_forward
