"""Tiny DiffusionGemma checkpoints and Gemma-style tokenizers, built locally (nothing comes from a hub).

Tests, benchmarks and the demo-model trainer all need a checkpoint that loads with `from_pretrained` exactly
like the real one: same model class, same config keys, a `tokenizer.json` whose pieces behave like Gemma's
(SentencePiece-style "▁" word marks, `<0xNN>` byte-fallback tokens, `<bos>`/`<eos>`/`<pad>` at ids 2/1/0) and
a chat template in `tokenizer_config.json`. The model weights are random; `engine/training` makes a useful
one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]

# Gemma's turn format, written as a template so the engine never hard-codes it.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{{ message['content'] }}<end_of_turn>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)

# A few sentences so the tiny tokenizer has real merges (and multi-byte text goes through byte fallback).
SAMPLE_TEXT = [
    "The quick brown fox jumps over the lazy dog. A writer drafts, rewrites and fills gaps in a document.",
    "It was the best of times, it was the worst of times, it "
    "was the age of wisdom, it was the age of foolishness.",
    "Letterpress refines a whole block of text in parallel, the way a printing press sets a page at once.",
    "Please rewrite the following paragraph so that it is shorter and more formal.",
    "Continue the story from where it stops. Fill the missing part between the two passages.",
    "In the morning the harbour was quiet, and the boats rested on the grey water until the wind came.",
]


# Gemma 4's turn and channel markers. In the real tokenizer they are ordinary added tokens marked special in
# `added_tokens_decoder` (not named, not `extra_special_tokens`), which is what `gemma4_style_tokenizer`
# copies.
GEMMA4_MARKERS = ["<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_response>", "<|think|>"]
GEMMA4_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<|turn>{{ role }}\n{{ message['content'] }}<turn|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)


def gemma4_style_tokenizer(texts: Iterable[str] = SAMPLE_TEXT, vocab_size: int = 512) -> Any:
    """The tiny tokenizer laid out like Gemma 4's: only `<bos>`/`<eos>`/`<pad>`/`<unk>` are named special
    tokens; the turn/channel markers exist only in `added_tokens_decoder` (special), and the chat template
    uses them."""
    from transformers import AddedToken

    tok = train_tokenizer(texts, vocab_size=vocab_size, extra_special=(), chat_template=GEMMA4_CHAT_TEMPLATE)
    tok.add_tokens([AddedToken(m, special=True, normalized=False) for m in GEMMA4_MARKERS])
    return tok


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 512,
    *,
    extra_special: Iterable[str] | None = None,
    chat_template: str = CHAT_TEMPLATE,
) -> Any:
    """Train a Gemma-shaped BPE tokenizer (byte fallback, "▁" spaces) and return a `PreTrainedTokenizerFast`.

    Ids 0..5 are the special tokens, 6..261 the 256 byte tokens, then the learned pieces, so any text
    round-trips and partial UTF-8 sequences appear exactly as they do with the real Gemma vocabulary.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    base = len(SPECIAL_TOKENS) + len(BYTE_TOKENS)
    if vocab_size <= base:
        raise ValueError(f"vocab_size must exceed {base} (specials + bytes)")
    draft = Tokenizer(models.BPE(unk_token="<unk>"))
    draft.normalizer = normalizers.Replace(" ", "▁")
    draft.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(BYTE_TOKENS), special_tokens=SPECIAL_TOKENS, show_progress=False
    )
    draft.train_from_iterator(list(texts), trainer=trainer)

    # Re-number: specials, then byte tokens as ordinary pieces (not "special", so decoding keeps them).
    spec = json.loads(draft.to_str())
    learned = sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + BYTE_TOKENS)}
    for tok, _ in learned:
        if tok not in vocab:
            vocab[tok] = len(vocab)
    spec["model"]["vocab"] = vocab
    spec["model"]["byte_fallback"] = True
    spec["model"]["fuse_unk"] = True
    for added in spec["added_tokens"]:
        added["id"] = vocab[added["content"]]
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=list(extra_special)
        if extra_special is not None
        else ["<start_of_turn>", "<end_of_turn>"],
        chat_template=chat_template,
        model_max_length=1_000_000,
    )


def tiny_vision_config() -> dict[str, Any]:
    """The smallest Gemma 4 vision tower that builds; without it the config builds a full-size one."""
    return {
        "model_type": "gemma4_vision",
        "hidden_size": 8,
        "intermediate_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 1,
        "num_key_value_heads": 1,
        "head_dim": 8,
        "position_embedding_size": 16,
        "patch_size": 4,
        "pooling_kernel_size": 1,
    }


def tiny_config(
    vocab_size: int,
    *,
    canvas_length: int = 32,
    hidden_size: int = 64,
    layers: int = 2,
    experts: int = 4,
    top_k: int = 2,
    max_positions: int = 4096,
) -> Any:
    """A DiffusionGemmaConfig with the real structure (sliding + global layers, MoE beside a dense MLP)."""
    from transformers import DiffusionGemmaConfig

    layer_types = ["sliding_attention"] * (layers - 1) + ["full_attention"]
    text = {
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "intermediate_size": hidden_size * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": hidden_size // 4,
        "global_head_dim": hidden_size // 4,
        "num_global_key_value_heads": 1,
        "sliding_window": 64,
        "num_experts": experts,
        "top_k_experts": top_k,
        "moe_intermediate_size": hidden_size // 2,
        "max_position_embeddings": max_positions,
        "layer_types": layer_types,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
    }
    return DiffusionGemmaConfig(
        text_config=text, vision_config=tiny_vision_config(), canvas_length=canvas_length
    )


def generation_defaults(tokenizer: Any, max_new_tokens: int = 256) -> dict[str, Any]:
    """The reference sampler's defaults, with Gemma's stop tokens (<eos>, <end_of_turn>; for a Gemma 4 layout
    <eos>, <turn|>, <|tool_response>, as its generation_config.json lists them)."""
    vocab = tokenizer.get_vocab()
    if "<turn|>" in vocab:
        eos = [tokenizer.eos_token_id, vocab["<turn|>"], vocab["<|tool_response>"]]
    else:
        eos = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<end_of_turn>")]
    return {
        "max_new_tokens": max_new_tokens,
        "max_denoising_steps": 48,
        "sampler_config": {"entropy_bound": 0.1, "_cls_name": "EntropyBoundSamplerConfig"},
        "t_min": 0.4,
        "t_max": 0.8,
        "stability_threshold": 1,
        "confidence_threshold": 0.005,
        "bos_token_id": tokenizer.bos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": eos,
    }


def save_checkpoint(model: Any, tokenizer: Any, out_dir: str | Path, *, max_new_tokens: int = 256) -> Path:
    """Write model (safetensors), config, generation config and tokenizer the way a hub checkpoint looks."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationConfig

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = DiffusionGemmaGenerationConfig(
        **_resolved(generation_defaults(tokenizer, max_new_tokens))
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # transformers 5 writes the template to chat_template.jinja; keep it in tokenizer_config.json too, where
    # older readers (and our validator) look for it.
    config_path = out / "tokenizer_config.json"
    tok_config = json.loads(config_path.read_text(encoding="utf-8"))
    tok_config.setdefault("chat_template", tokenizer.chat_template)
    config_path.write_text(json.dumps(tok_config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def _resolved(params: dict[str, Any]) -> dict[str, Any]:
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    params = dict(params)
    sampler = dict(params["sampler_config"])
    sampler.pop("_cls_name", None)
    params["sampler_config"] = EntropyBoundSamplerConfig(**sampler)
    return params


def make_tiny(
    out_dir: str | Path,
    *,
    seed: int = 0,
    canvas_length: int = 32,
    vocab_size: int = 512,
    max_positions: int = 4096,
    gemma4: bool = False,
) -> Path:
    """Write a random-weight tiny checkpoint that loads in well under a second on CPU (`max_positions`: its
    context length, e.g. 32768 for the long-document benchmark; `gemma4`: with the Gemma 4 tokenizer layout,
    see `gemma4_style_tokenizer`)."""
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    if gemma4:
        tokenizer = gemma4_style_tokenizer(SAMPLE_TEXT, vocab_size=vocab_size)
    else:
        tokenizer = train_tokenizer(SAMPLE_TEXT, vocab_size=vocab_size)
    torch.manual_seed(seed)
    config = tiny_config(len(tokenizer), canvas_length=canvas_length, max_positions=max_positions)
    model = DiffusionGemmaForBlockDiffusion(config).eval()
    return save_checkpoint(model, tokenizer, out_dir)
