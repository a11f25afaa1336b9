"""Checkpoints with the exact layer shapes of DiffusionGemma 26B-A4B, but few layers and a small vocabulary.

Memory and speed claims about the 26B-A4B (4-bit resident size, peak RAM while loading, time per layer
forward) can be measured on one or two of its layers without downloading 50 GB: every layer has the same
shapes. Weights are random bf16 written tensor by tensor (an expert slice at a time), so building one never
holds more than one expert matrix in memory.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# The text config of google/diffusiongemma-26B-A4B-it (only what differs from the transformers defaults
# matters).
REAL_TEXT_CONFIG: dict[str, Any] = {
    "hidden_size": 2816,
    "intermediate_size": 2112,
    "moe_intermediate_size": 704,
    "num_experts": 128,
    "top_k_experts": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_global_key_value_heads": 2,
    "sliding_window": 1024,
    "vocab_size": 262144,
    "num_hidden_layers": 30,
    "max_position_embeddings": 262144,
    "final_logit_softcapping": 30.0,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": 2,
}
REAL_CANVAS = 256


def layer_types(layers: int) -> list[str]:
    """Every 6th layer is global, and the last one always is (as transformers forces)."""
    types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(layers)]
    types[-1] = "full_attention"
    return types


def real_config_dict(layers: int = 30, vocab_size: int = 262144) -> dict[str, Any]:
    """A config.json-shaped dict of the real model (default) or of a cut-down one (fewer layers, small
    vocab)."""
    from engine.tools.tiny import tiny_vision_config

    text = dict(
        REAL_TEXT_CONFIG, num_hidden_layers=layers, vocab_size=vocab_size, layer_types=layer_types(layers)
    )
    return {
        "model_type": "diffusion_gemma",
        "architectures": ["DiffusionGemmaForBlockDiffusion"],
        "canvas_length": REAL_CANVAS,
        "tie_word_embeddings": True,
        "text_config": text,
        "vision_config": tiny_vision_config(),
    }


def _fill(name: str, shape: tuple[int, ...], gen: Any) -> Any:
    import torch

    leaf = name.rsplit(".", 1)[-1]
    if len(shape) <= 1 or leaf in ("scale", "per_expert_scale", "layer_scalar"):
        return torch.ones(shape, dtype=torch.bfloat16)
    return (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)


def make_real_shape(out_dir: str | Path, *, layers: int = 1, vocab_size: int = 4096, seed: int = 0) -> Path:
    """Write a sharded bf16 checkpoint (one shard per layer) with 26B-A4B layer shapes; returns the folder."""
    import torch
    from transformers import DiffusionGemmaConfig
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationConfig

    from engine.tools.tiny import SAMPLE_TEXT, _resolved, generation_defaults, train_tokenizer
    from engine.weights.stream_load import build_skeleton_from_config
    from engine.weights.tensorfile import PlannedTensor, TensorFileWriter

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = DiffusionGemmaConfig(**real_config_dict(layers, vocab_size))
    model = build_skeleton_from_config(config, torch.bfloat16, keep_vision=True)
    state = model.state_dict(keep_vars=True)
    seen: set[int] = set()
    names: list[str] = []
    # Shared encoder/decoder weights are saved once, under the decoder's name, as save_pretrained does.
    for name in sorted(
        state, key=lambda k: (k.startswith("model.encoder.language_model."), k == "lm_head.weight")
    ):
        if id(state[name]) not in seen:
            seen.add(id(state[name]))
            names.append(name)

    def shard_of(name: str) -> str:
        for prefix in ("model.decoder.layers.", "model.encoder.language_model.layers."):
            if name.startswith(prefix):
                return f"layer{int(name[len(prefix) :].split('.')[0]):03d}"
        return "rest"

    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(shard_of(name), []).append(name)
    shard_names = {
        g: f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i, g in enumerate(sorted(groups))
    }
    gen = torch.Generator().manual_seed(seed)
    weight_map: dict[str, str] = {}
    total = 0
    for group, members in sorted(groups.items()):
        plan = [
            PlannedTensor(
                n, torch.bfloat16 if state[n].is_floating_point() else state[n].dtype, tuple(state[n].shape)
            )
            for n in members
        ]
        writer = TensorFileWriter(out / shard_names[group], plan, {"format": "pt"})
        for item in plan:
            if item.name.endswith(("experts.gate_up_proj", "experts.down_proj")):
                for e in range(item.shape[0]):
                    writer.write_part(
                        item.name,
                        _fill(item.name, item.shape[1:], gen).unsqueeze(0),
                        final=e == item.shape[0] - 1,
                    )
            else:
                writer.write(item.name, _fill(item.name, item.shape, gen))
            weight_map[item.name] = shard_names[group]
            total += item.nbytes
        writer.close()
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1), encoding="utf-8"
    )
    config.save_pretrained(out)
    tokenizer = train_tokenizer(SAMPLE_TEXT, vocab_size=512)
    tokenizer.save_pretrained(out)
    tok_config_path = out / "tokenizer_config.json"
    tok_config = json.loads(tok_config_path.read_text(encoding="utf-8"))
    tok_config.setdefault("chat_template", tokenizer.chat_template)
    tok_config_path.write_text(json.dumps(tok_config, indent=2) + "\n", encoding="utf-8")
    DiffusionGemmaGenerationConfig(**_resolved(generation_defaults(tokenizer))).save_pretrained(out)
    return out


def main_make_real_shape(argv: list[str]) -> int:
    """`python -m engine make-real-shape DIR --layers N [--vocab V]`."""
    parser = argparse.ArgumentParser(
        prog="python -m engine make-real-shape", description=__doc__.split("\n")[0]
    )
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.layers < 1 or args.vocab < 512:
        parser.error("--layers must be >= 1 and --vocab >= 512")
    path = make_real_shape(args.out_dir, layers=args.layers, vocab_size=args.vocab, seed=args.seed)
    size = sum(p.stat().st_size for p in path.glob("*.safetensors"))
    print(f"wrote {path} ({args.layers} layer(s), vocab {args.vocab}, {size / 1e9:.2f} GB of bf16 weights)")
    return 0
