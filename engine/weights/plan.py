"""The quantization plan: which precision each kind of module of the text stack is stored in, and why.

Kinds (by module path, the way DiffusionGemma names them):
* router      `*.router.proj`: 128 outputs per layer, 10.8M weights (22 MB) on the 26B-A4B. Kept 16-bit in
              every plan: at 4 bits only 40-45% of tokens keep the same top-8 expert set on real layer shapes,
              and published 4-bit packs of this model keep it in bf16.
* attention   `*.self_attn.{q,k,v,o}_proj`
* dense MLP   `*.mlp.{gate,up,down}_proj` (the dense MLP beside the experts) and the decoder's
              self-conditioning MLP
* experts     the MoE expert stacks (91% of the weights)
* embedding   the token embedding, tied to the lm_head: a lookup and the self-conditioning matrix, kept 16-bit
* norms       RMSNorm weights, router scales, layer scalars: vectors, kept 16-bit

Schemes: "nf4" puts attention, dense MLP and experts in NF4; "nf4-mixed" keeps attention and the dense MLP at
8 bits (bitsandbytes' int8 row-wise absmax, LLM.int8 storage) and the experts in NF4: 4-bit everywhere makes
the entropy-bound sampler less sure of itself (more steps per canvas), and attention + dense MLP are only ~7%
of the weights. "none" keeps everything in the compute dtype.

This module imports nothing: the per-kind weight counts of a config are `engine.weights.fit.kind_counts`, the
plan of a loaded model `engine.tools.inspect_report.observed_plan`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Kind = Literal["router", "attention", "dense_mlp", "experts", "embedding", "norms"]
Storage = Literal["nf4", "int8", "16-bit", "compute"]
Scheme = Literal["nf4", "nf4-mixed", "none"]

KINDS: tuple[Kind, ...] = ("router", "attention", "dense_mlp", "experts", "embedding", "norms")
KIND_LABELS = {
    "router": "router",
    "attention": "attention",
    "dense_mlp": "dense MLP",
    "experts": "experts",
    "embedding": "embedding",
    "norms": "norms/scales",
}

PLANS: dict[str, dict[Kind, Storage]] = {
    "nf4": {
        "router": "16-bit",
        "attention": "nf4",
        "dense_mlp": "nf4",
        "experts": "nf4",
        "embedding": "16-bit",
        "norms": "16-bit",
    },
    "nf4-mixed": {
        "router": "16-bit",
        "attention": "int8",
        "dense_mlp": "int8",
        "experts": "nf4",
        "embedding": "16-bit",
        "norms": "16-bit",
    },
    "none": dict.fromkeys(KINDS, "compute"),
}

NF4_BYTES_PER_WEIGHT = 0.5 + 1 / 64 + 4 / (64 * 256)
INT8_ROW_SCALE_BYTES = 4


def linear_kind(name: str) -> Kind | None:
    """The kind of a linear layer from its module path (None: not part of the quantized text stack)."""
    leaf = name.rsplit(".", 2)
    if name.endswith("router.proj"):
        return "router"
    if ".self_attn." in name:
        return "attention"
    if ".mlp." in name or ".self_conditioning." in name:
        return "dense_mlp"
    if name == "lm_head" or leaf[-1] == "lm_head":
        return "embedding"
    return None


def storage_for(scheme: str, kind: Kind) -> Storage:
    try:
        return PLANS[scheme][kind]
    except KeyError as exc:
        raise ValueError(f"unknown quantization scheme {scheme!r}; choose one of {', '.join(PLANS)}") from exc


@dataclass(frozen=True)
class PlanRow:
    kind: Kind
    storage: Storage
    weights: int
    bytes: int

    def line(self) -> str:
        return (
            f"{KIND_LABELS[self.kind]:<13} {self.storage:>7}  {self.weights:>15,} weights  "
            f"{self.bytes / 1e9:8.3f} GB"
        )


def storage_bytes(storage: Storage, weights: int, rows: int, compute_bytes: int = 2) -> int:
    if storage == "nf4":
        return math.ceil(weights * NF4_BYTES_PER_WEIGHT)
    if storage == "int8":
        return weights + INT8_ROW_SCALE_BYTES * rows
    if storage == "16-bit":
        return 2 * weights
    return compute_bytes * weights
