"""Find, validate and load a local DiffusionGemma checkpoint: the only place that decides device and dtype.

Loading is offline by construction: local folders only, `local_files_only=True`, safetensors only, no remote code.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.api import (
    Device,
    LoadCancelledError,
    LoadProgress,
    ModelIncompleteError,
    ModelInfo,
    ModelNotFoundError,
    ProgressCallback,
    Quantization,
    UnsupportedModelError,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    config: dict[str, Any]
    weight_files: tuple[Path, ...]
    weight_bytes: int


def checkpoint_problems(model_dir: str | Path) -> list[str]:
    """Every reason this folder cannot be loaded, in words a writer can act on (empty when it looks loadable)."""
    try:
        validate_checkpoint(model_dir)
    except (ModelNotFoundError, ModelIncompleteError, UnsupportedModelError) as exc:
        return [exc.message]
    return []


def validate_checkpoint(model_dir: str | Path) -> CheckpointInfo:
    """Check the folder is a complete, safe DiffusionGemma checkpoint before spending time loading it."""
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        raise ModelNotFoundError(
            f"The model folder {path} does not exist. Choose the folder you downloaded the model into."
        )
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ModelIncompleteError(f"{path} has no config.json; it is not a complete model checkpoint.")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelIncompleteError(f"{config_path} cannot be read ({exc}); download the model again.") from exc
    if config.get("model_type") != "diffusion_gemma":
        raise UnsupportedModelError(
            f"{path} holds a '{config.get('model_type', 'unknown')}' model; Letterpress runs DiffusionGemma "
            "checkpoints (model_type 'diffusion_gemma')."
        )
    if "auto_map" in config:
        raise UnsupportedModelError(f"{path} asks to run its own code (auto_map); Letterpress never does that.")
    text = config.get("text_config") or {}
    if text.get("use_bidirectional_attention") == "all":
        raise UnsupportedModelError(
            f"{path} sets use_bidirectional_attention='all', which transformers 5.23 cannot run in the encoder; "
            "remove that key from text_config in config.json."
        )
    weights = _weight_files(path)
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer.model")):
        raise ModelIncompleteError(f"{path} has no tokenizer (tokenizer.json); download the full checkpoint.")
    return CheckpointInfo(path, config, weights, sum(f.stat().st_size for f in weights))


def _weight_files(path: Path) -> tuple[Path, ...]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError) as exc:
            raise ModelIncompleteError(f"{index} is unreadable ({exc}); download the model again.") from exc
        shards = sorted({path / name for name in weight_map.values()})
        missing = [s.name for s in shards if not s.is_file()]
        if missing:
            raise ModelIncompleteError(
                f"{path} is missing {len(missing)} weight shard(s): {', '.join(missing[:3])}. "
                "The download did not finish; run the download command again."
            )
        for shard in shards:
            _check_safetensors_header(shard)
        return tuple(shards)
    single = path / "model.safetensors"
    if single.is_file():
        _check_safetensors_header(single)
        return (single,)
    if any(path.glob("*.bin")) or any(path.glob("*.pt")):
        raise UnsupportedModelError(
            f"{path} only has pickle weights (.bin/.pt), which can run code when loaded; "
            "Letterpress loads .safetensors only. Download the safetensors version."
        )
    raise ModelIncompleteError(f"{path} has no model.safetensors weights.")


def _check_safetensors_header(shard: Path) -> None:
    """A truncated shard is the commonest broken download: compare the header's extent with the file size."""
    size = shard.stat().st_size
    try:
        with shard.open("rb") as fh:
            header_len = int.from_bytes(fh.read(8), "little")
            if header_len <= 0 or header_len > size - 8:
                raise ValueError("bad header length")
            header = json.loads(fh.read(header_len))
    except (OSError, ValueError) as exc:
        raise ModelIncompleteError(f"{shard.name} is damaged ({exc}); download it again.") from exc
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + header_len + end != size:
        raise ModelIncompleteError(
            f"{shard.name} is {size:,} bytes but should be {8 + header_len + end:,}; the download is incomplete."
        )


def resolve_device(device: Device = "auto") -> tuple[str, str]:
    """Pick the device; the second value is a notice for the writer (empty when there is nothing to say)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise UnsupportedModelError("No CUDA GPU is available; choose the CPU device (slow) in Settings.")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    notice = "" if device == "cuda" else "Running on the CPU: fine for the demo model, slow for the full model."
    return device, notice


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    info: ModelInfo


def choose_quantization(quantization: Quantization, device: str, config: dict[str, Any]) -> str:
    """"auto": NF4 on CUDA unless the bf16 weights fit comfortably; full precision on the CPU."""
    if quantization != "auto":
        return quantization
    if device != "cuda":
        return "none"
    from engine.weights.fit import estimate_for_device

    return "none" if estimate_for_device(config, "bf16", "cuda").verdict == "fits" else "nf4"


def load_model(
    model_dir: str | Path,
    *,
    device: Device = "auto",
    quantization: Quantization = "auto",
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> LoadedModel:
    """Load the checkpoint for inference (eval mode, no grad) on the chosen device.

    Weights are streamed tensor by tensor (see `engine.weights.stream_load`): "none" keeps full precision (float32 on the
    CPU, bf16 on CUDA), "nf4" quantizes every linear and expert matrix of the text stack to 4 bits (cached after
    the first load). A load that the fit estimate says cannot fit is refused before it starts.
    """
    import torch
    from transformers import AutoTokenizer

    from engine.api import OutOfMemoryError, WontFitError
    from engine.weights.fit import estimate_for_device

    ckpt = validate_checkpoint(model_dir)
    dev, notice = resolve_device(device)
    if cancel is not None and cancel.is_set():
        raise LoadCancelledError("Loading was cancelled.")
    quant = choose_quantization(quantization, dev, ckpt.config)
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    precision = "nf4" if quant == "nf4" else ("bf16" if dtype == torch.bfloat16 else "fp32")
    fit = estimate_for_device(ckpt.config, precision, dev)
    if fit.verdict == "wont_fit":
        raise WontFitError(
            f"{ckpt.path.name} will not fit: {fit.summary} "
            + ("Choose 4-bit quantization, close other programs using the GPU, or use a smaller model."
               if precision != "nf4" else "Close other programs using the GPU or use a smaller model.")
            + "\n" + fit.text()
        )
    tokenizer = AutoTokenizer.from_pretrained(ckpt.path, local_files_only=True, trust_remote_code=False)
    try:
        model, load_notice = load_weights(
            ckpt.path, ckpt.weight_files, dev, dtype, nf4=quant == "nf4", on_progress=on_progress, cancel=cancel
        )
    except torch.OutOfMemoryError as exc:
        if dev == "cuda":
            torch.cuda.empty_cache()
        raise OutOfMemoryError(
            f"The GPU ran out of memory while loading {ckpt.path.name} ({fit.summary}) "
            "Close other programs using the GPU, choose 4-bit quantization, or load on the CPU."
        ) from exc
    if on_progress:
        on_progress(LoadProgress(1, 1, ckpt.weight_bytes, ckpt.weight_bytes, "ready"))
    params = _logical_parameters(model)
    text = model.config.text_config
    info = ModelInfo(
        name=ckpt.path.name,
        path=str(ckpt.path),
        device=dev,
        dtype=str(dtype).removeprefix("torch."),
        quantization=quant,
        parameters=params,
        canvas_length=int(model.config.canvas_length),
        context_length=int(text.max_position_embeddings),
        notice=" ".join(n for n in (notice, load_notice) if n),
    )
    return LoadedModel(model, tokenizer, info)


def _logical_parameters(model: Any) -> int:
    """Weights the model stands for (an NF4 matrix counts as its unpacked size; shared weights once)."""
    from engine.weights.quantize import NF4Weight

    seen: set[int] = set()
    total = 0
    for module in model.modules():
        if isinstance(module, NF4Weight):
            if id(module) not in seen:
                seen.add(id(module))
                total += module.logical_numel
            continue
        for p in module._parameters.values():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
    return total


def load_weights(
    model_dir: Path,
    weight_files: tuple[Path, ...] | list[Path],
    device: str,
    dtype: torch.dtype,
    *,
    nf4: bool,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    use_cache: bool | None = None,
) -> tuple[nn.Module, str]:
    """The whole weight load: from the quantized cache when it is valid, else from the checkpoint (then written to
    the cache). Returns the model and a notice for the writer (empty when there is nothing to say)."""
    from engine.weights import qcache
    from engine.weights.stream_load import build_skeleton, stream_into

    files = list(weight_files)
    if use_cache is None:
        use_cache = os.environ.get("LETTERPRESS_QCACHE", "on") != "off"
    if not nf4:
        model = build_skeleton(model_dir, dtype, nf4=False)
        stream_into(model, files, device, dtype, on_progress=on_progress, cancel=cancel)
        return model, ""
    slot = qcache.slot_for(model_dir, files, dtype) if use_cache else None
    notice = ""
    if slot is not None and slot.manifest.is_file():
        model = build_skeleton(model_dir, dtype, nf4=True)
        reason = qcache.load_from_cache(slot, model, device, dtype, on_progress=on_progress, cancel=cancel)
        if not reason:
            return model, ""
        del model
        _free(device)
        notice = f"The quantized cache was rebuilt: {reason}."
    model = build_skeleton(model_dir, dtype, nf4=True)
    stream_into(model, files, device, dtype, on_progress=on_progress, cancel=cancel, stage="quantizing")
    if slot is not None:
        why = qcache.save_to_cache(slot, model, model_dir)
        if why:
            notice = (notice + " " if notice else "") + f"The 4-bit weights were not cached: {why}."
    return model, notice


def _free(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
