"""Find, validate and load a local DiffusionGemma checkpoint: the only place that decides device and dtype.

Loading is offline by construction: local folders only, `local_files_only=True`, safetensors only, no remote
code.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.api import (
    Device,
    EngineError,
    LoadCancelledError,
    LoadProgress,
    ModelInfo,
    ProgressCallback,
    Quantization,
    UnsupportedModelError,
    free_memory_advice,
    is_host_out_of_memory,
    memory_name,
)
from engine.weights import validate
from engine.weights.validate import CheckpointInfo

if TYPE_CHECKING:
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def checkpoint_problems(model_dir: str | Path) -> list[str]:
    """Every reason this folder cannot be loaded, in words a writer can act on (empty when it looks loadable).
    Never raises: see `engine.weights.validate`."""
    return validate.problems(model_dir)


def validate_checkpoint(model_dir: str | Path, cancel: threading.Event | None = None) -> CheckpointInfo:
    """Check the folder is a complete, safe DiffusionGemma checkpoint before spending time loading it (the one
    validation pass shared by the model manager, the loader and the command line)."""
    return validate.validate_folder(model_dir, cancel=cancel)


def resolve_device(device: Device = "auto") -> tuple[str, str]:
    """Pick the device; the second value is a notice for the writer (empty when there is nothing to say)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise UnsupportedModelError("No CUDA GPU is available; choose the CPU device (slow) in Settings.")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    notice = (
        "" if device == "cuda" else "Running on the CPU: fine for the demo model, slow for the full model."
    )
    return device, notice


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    info: ModelInfo


QUANTIZED_SCHEMES = ("nf4", "nf4-mixed")


def choose_quantization(quantization: Quantization, device: str, config: dict[str, Any]) -> str:
    """The storage scheme only (see `choose_precision`)."""
    return choose_precision(quantization, device, config)[0]


def choose_precision(quantization: Quantization, device: str, config: dict[str, Any]) -> tuple[str, str, str]:
    """(scheme, compute dtype name, notice) for a load.

    "auto" never picks a precision the device cannot hold: on CUDA, bf16 when it fits comfortably, else
    "nf4-mixed" (attention and dense MLP at 8 bits) when that fits, else "nf4"; on the CPU, float32, then
    bf16, then the 4-bit schemes, whichever first fits the free RAM, saying why when it is not float32. An
    explicit choice is kept as asked (the fit gate refuses it if it cannot fit).
    """
    from engine.weights.fit import estimate_for_device

    cuda = device == "cuda"
    if quantization != "auto":
        return quantization, "bfloat16" if cuda else "float32", ""
    if cuda:
        options = [("none", "bf16"), ("nf4-mixed", "nf4-mixed"), ("nf4", "nf4")]
    else:
        options = [("none", "fp32"), ("none", "bf16"), ("nf4-mixed", "nf4-mixed"), ("nf4", "nf4")]
    estimates = [
        (scheme, precision, estimate_for_device(config, precision, device))  # type: ignore[arg-type]
        for scheme, precision in options
    ]
    chosen = next(((s, p, e) for s, p, e in estimates if e.verdict == "fits"), None)
    if chosen is None:
        chosen = estimates[-1]  # nothing fits comfortably: the smallest; the gate says whether it fits at all
    scheme, precision, est = chosen
    dtype = "float32" if precision == "fp32" else "bfloat16"
    if cuda or precision == "fp32":
        return scheme, dtype, ""
    first = estimates[0][2]
    return (
        scheme,
        dtype,
        (
            f"Full precision (float32) would need about {first.total_bytes / 1e9:.1f} GB, more than this "
            "machine has free; loading "
            f"{'in bfloat16' if scheme == 'none' else 'with ' + scheme + ' quantization'} "
            f"instead ({est.total_bytes / 1e9:.1f} GB)."
        ),
    )


def load_model(
    model_dir: str | Path,
    *,
    device: Device = "auto",
    quantization: Quantization = "auto",
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> LoadedModel:
    """Load the checkpoint for inference (eval mode, no grad) on the chosen device.

    Weights are streamed tensor by tensor (see `engine.weights.stream_load`): "none" keeps full precision
    (float32 on the CPU, bf16 on CUDA), "nf4" quantizes every linear and expert matrix of the text stack to 4
    bits (cached after the first load). A load that the fit estimate says cannot fit is refused before it
    starts.
    """
    import torch
    from transformers import AutoTokenizer

    from engine.api import OutOfMemoryError, WontFitError
    from engine.weights.fit import estimate_for_device

    if on_progress:
        on_progress(LoadProgress(0, 0, stage="preparing"))
    ckpt = validate_checkpoint(model_dir, cancel)
    dev, notice = resolve_device(device)
    if cancel is not None and cancel.is_set():
        raise LoadCancelledError("Loading was cancelled.")
    quant, dtype_name, precision_notice = choose_precision(quantization, dev, ckpt.config)
    notice = " ".join(n for n in (notice, precision_notice) if n)
    dtype = getattr(torch, dtype_name)
    precision = quant if quant in QUANTIZED_SCHEMES else ("bf16" if dtype == torch.bfloat16 else "fp32")
    fit = estimate_for_device(ckpt.config, precision, dev)  # type: ignore[arg-type]
    if fit.verdict == "wont_fit":
        advice = free_memory_advice(dev)  # RAM on the CPU, GPU memory on a GPU
        raise WontFitError(
            f"{ckpt.path.name} will not fit in the {memory_name(dev)}: {fit.summary} "
            + (
                f"Choose 4-bit quantization, {advice}, or use a smaller model."
                if precision not in QUANTIZED_SCHEMES
                else f"{advice.capitalize()} or use a smaller model."
            )
            + "\n"
            + fit.text()
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(ckpt.path, local_files_only=True, trust_remote_code=False)
        model, load_notice = load_weights(
            ckpt.path,
            ckpt.weight_files,
            dev,
            dtype,
            nf4=quant if quant in QUANTIZED_SCHEMES else False,
            on_progress=on_progress,
            cancel=cancel,
        )
    except EngineError:
        raise
    except torch.OutOfMemoryError as exc:
        if dev == "cuda":
            torch.cuda.empty_cache()
            raise OutOfMemoryError(
                f"The GPU ran out of memory while loading {ckpt.path.name} ({fit.summary}) "
                "Close other programs using the GPU, choose 4-bit quantization, or load on the CPU."
            ) from exc
        raise _out_of_ram(ckpt.path.name, fit.summary) from exc
    except Exception as exc:
        if is_host_out_of_memory(exc):  # torch's CPU allocator says so with a RuntimeError
            raise _out_of_ram(ckpt.path.name, fit.summary) from exc
        raise _explain_failure(ckpt.path, exc) from exc
    if on_progress:
        on_progress(LoadProgress(1, 1, ckpt.weight_bytes, ckpt.weight_bytes, "ready"))
    params = _logical_parameters(model)
    config: Any = model.config  # its fields are typed with their pre-init forms (dict, None) too: read as set
    text = config.text_config
    info = ModelInfo(
        name=ckpt.path.name,
        path=str(ckpt.path),
        device=dev,
        dtype=str(dtype).removeprefix("torch."),
        quantization=quant,
        parameters=params,
        canvas_length=int(config.canvas_length),
        context_length=int(text.max_position_embeddings),
        notice=" ".join(n for n in (notice, load_notice) if n),
    )
    return LoadedModel(model, tokenizer, info)


def _out_of_ram(name: str, summary: str) -> EngineError:
    """The host ran short while loading: the words name RAM, never the GPU (a CPU load has none to close)."""
    from engine.api import OutOfMemoryError

    return OutOfMemoryError(
        f"The computer ran out of memory (RAM) while loading {name} ({summary}) "
        "Close other programs to free RAM, choose 4-bit quantization, or use a smaller model."
    )


def _explain_failure(path: Path, exc: Exception) -> EngineError:
    """A failure after the check passed: check again (the folder may have been moved, deleted or changed, and
    the check says so in the right words), else report the file-level failure without a traceback's
    wording."""
    try:
        validate.validate_folder(path)
    except EngineError as again:
        return again
    if isinstance(exc, OSError):
        return validate._os_error(exc, Path(exc.filename) if exc.filename else path, "file")
    if isinstance(exc, MemoryError):
        from engine.api import OutOfMemoryError

        return OutOfMemoryError(
            f"The computer ran out of memory while loading {path.name}. Close other programs, "
            "choose 4-bit quantization, or use a smaller model."
        )
    return validate.ModelDamagedError(
        f"{path.name} passed the checks but could not be loaded ({type(exc).__name__}: "
        f"{validate._first_line(exc)}). A file may be damaged: download the model again."
    )


def _logical_parameters(model: Any) -> int:
    """Weights the model stands for (an NF4 matrix counts as its unpacked size; shared weights once)."""
    from engine.weights.quantize import Int8Linear, NF4Weight

    seen: set[int] = set()
    total = 0
    for module in model.modules():
        if isinstance(module, (NF4Weight, Int8Linear)):
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
    nf4: bool | str,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    use_cache: bool | None = None,
) -> tuple[DiffusionGemmaForBlockDiffusion, str]:
    """The whole weight load: from the quantized cache when it is valid, else from the checkpoint (then
    written to the cache). Returns the model and a notice for the writer (empty when there is nothing to
    say)."""
    from engine.weights import qcache
    from engine.weights.stream_load import build_skeleton, stream_into

    files = list(weight_files)
    if use_cache is None:
        switch = os.environ.get("LETTERPRESS_QCACHE", "on").strip().lower() or "on"
        if switch not in (
            "on",
            "off",
            "1",
            "0",
        ):  # engine.weights imports only engine.api: said here, not env.py
            logging.getLogger(__name__).warning(
                "LETTERPRESS_QCACHE=%s is ignored: use one of on, off; using the default (on).", switch[:24]
            )
        use_cache = switch not in ("off", "0")
    if not nf4:
        model = build_skeleton(model_dir, dtype, nf4=False)
        stream_into(model, files, device, dtype, on_progress=on_progress, cancel=cancel)
        return model, ""
    scheme = nf4 if isinstance(nf4, str) else "nf4"
    slot = qcache.slot_for(model_dir, files, dtype, scheme) if use_cache else None
    notice = ""
    if slot is not None and slot.manifest.is_file():
        model = build_skeleton(model_dir, dtype, nf4=scheme)
        reason = qcache.load_from_cache(
            slot, model, device, dtype, on_progress=on_progress, cancel=cancel, weight_files=files
        )
        if not reason:
            return model, ""
        del model
        _free(device)
        notice = f"The quantized cache was rebuilt: {reason}."
    model = build_skeleton(model_dir, dtype, nf4=scheme)
    stream_into(model, files, device, dtype, on_progress=on_progress, cancel=cancel, stage="quantizing")
    if slot is not None:
        why = qcache.save_to_cache(slot, model, model_dir, files)
        if why:
            notice = (notice + " " if notice else "") + f"The 4-bit weights were not cached: {why}."
    return model, notice


def _free(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
