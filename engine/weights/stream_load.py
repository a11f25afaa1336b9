"""Stream a checkpoint into an empty model one tensor at a time: the only path that puts weights on a device.

The model is first built as a skeleton whose parameters live on the meta device (no memory), then every tensor
of the checkpoint is read (plain file I/O, one tensor or one expert slice at a time), moved to the target
device, quantized to NF4 or cast to the compute dtype, and put in place; the host copy is dropped straight
away. Peak host RAM is therefore the final resident size (when the target is the CPU) plus one tensor, and
peak GPU memory the final size plus one tensor. Progress is reported per tensor and `cancel` is honoured
between tensors (and between expert slices of the large stacked expert tensors).
"""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from engine.api import (
    LoadCancelledError,
    LoadProgress,
    ModelDamagedError,
    ModelIncompleteError,
    ProgressCallback,
)
from engine.weights import tensorfile
from engine.weights.quantize import Int8Linear, NF4Weight, convert_to_nf4, register_experts_implementation
from engine.weights.tensorfile import TensorEntry, TensorFileReader

if TYPE_CHECKING:
    from transformers import DiffusionGemmaForBlockDiffusion

# Letterpress is text-only: the vision tower and its projection are never loaded (they are ~1 GB in bf16 on
# the 26B-A4B). Their checkpoint tensors are skipped.
SKIPPED_PREFIXES = ("model.encoder.vision_tower.", "model.encoder.embed_vision.")


@dataclass
class StreamStats:
    tensors: int = 0
    bytes_read: int = 0
    skipped: int = 0
    quantized: int = 0
    unexpected: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _params_on_meta(dtype: torch.dtype) -> Iterator[None]:
    """Build modules with parameters on the meta device but real buffers (rotary tables, scales), under the
    compute dtype as the default, which is what `from_pretrained(dtype=...)` does."""
    original = nn.Module.register_parameter

    def register(self: nn.Module, name: str, param: nn.Parameter | None) -> None:
        if param is not None and not param.is_meta:
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        original(self, name, param)

    previous = torch.get_default_dtype()
    nn.Module.register_parameter = register  # type: ignore[method-assign]
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        nn.Module.register_parameter = original  # type: ignore[method-assign]
        torch.set_default_dtype(previous)


def build_skeleton(
    model_dir: Path, dtype: torch.dtype, *, nf4: bool | str
) -> DiffusionGemmaForBlockDiffusion:
    """An empty DiffusionGemmaForBlockDiffusion (text stack only) for the checkpoint in `model_dir`."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir, local_files_only=True, trust_remote_code=False)
    model = build_skeleton_from_config(config, dtype, nf4=nf4)
    if (model_dir / "generation_config.json").is_file():
        model.generation_config = model.generation_config_class.from_pretrained(
            model_dir, local_files_only=True
        )
    return model


def build_skeleton_from_config(
    config: Any, dtype: torch.dtype, *, nf4: bool | str = False, keep_vision: bool = False
) -> DiffusionGemmaForBlockDiffusion:
    """Parameters on meta, buffers real; quantized modules in place of linears/experts when `nf4` (True or a
    scheme of `engine.weights.plan`: "nf4", "nf4-mixed")."""
    from transformers import DiffusionGemmaForBlockDiffusion

    config.dtype = dtype
    with _params_on_meta(dtype):
        model = DiffusionGemmaForBlockDiffusion(config)
    if not keep_vision:
        encoder = model.model.encoder
        encoder.vision_tower = None
        encoder.embed_vision = None
    if nf4:
        convert_to_nf4(model, dtype, nf4 if isinstance(nf4, str) else "nf4")
    return model


class _Targets:
    """Where each checkpoint name goes: an NF4 module to quantize into, or a parameter/buffer (with all
    aliases)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.refs: dict[int, list[tuple[nn.Module, str]]] = {}
        for module in model.modules():
            for table in (module._parameters, module._buffers):
                for name, tensor in table.items():
                    if tensor is not None:
                        self.refs.setdefault(id(tensor), []).append((module, name))
        self.done: set[int] = set()

    def resolve(self, key: str) -> tuple[str, Any]:
        """("nf4", module) | ("nf4_part", (module, buffer_name)) | ("tensor", tensor) | ("unknown", None)."""
        prefix, _, attr = key.rpartition(".")
        try:
            module = self.model.get_submodule(key)
        except AttributeError:
            module = None
        if isinstance(module, (NF4Weight, Int8Linear)):
            return "nf4", module
        try:
            owner = self.model.get_submodule(prefix)
        except AttributeError:
            return "unknown", None
        if isinstance(owner, (NF4Weight, Int8Linear)):
            if attr == "weight":
                return "nf4", owner
            if attr in owner._buffers:
                return "nf4_part", (owner, attr)
            return "unknown", None
        tensor: torch.Tensor | None = owner._parameters.get(attr)
        if tensor is None:
            tensor = owner._buffers.get(attr)
        if tensor is None:
            return "unknown", None
        return "tensor", tensor

    def assign(self, old: torch.Tensor, new: torch.Tensor) -> None:
        """Put `new` wherever `old` is referenced, so tied weights stay one tensor."""
        aliases = self.refs.pop(id(old), [])
        value: torch.Tensor = nn.Parameter(new, requires_grad=False) if isinstance(old, nn.Parameter) else new
        for module, name in aliases:
            # Any: the parameter table or the buffer table (their value types differ)
            table: dict[str, Any] = module._parameters if name in module._parameters else module._buffers
            table[name] = value
        self.refs.setdefault(id(value), []).extend(aliases)
        self.done.add(id(value))


def _cast(tensor: torch.Tensor, device: str, dtype: torch.dtype) -> torch.Tensor:
    if tensor.is_floating_point():
        return tensor.to(device=device, dtype=dtype)
    return tensor.to(device=device)


def stream_into(
    model: DiffusionGemmaForBlockDiffusion,
    files: list[Path],
    device: str,
    dtype: torch.dtype,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    stage: str = "loading",
    checksums: dict[str, int] | None = None,
) -> StreamStats:
    """Fill the skeleton from `files`. With `checksums` (a quantized cache), every tensor's CRC32 is verified
    and stored NF4 buffers are taken as they are; otherwise NF4 targets are quantized from the full-precision
    weight."""
    register_experts_implementation()
    targets = _Targets(model)
    stats = StreamStats()
    plan: list[tuple[Path, TensorEntry]] = []
    for path in files:
        with TensorFileReader(path) as listing:
            for entry in listing.entries.values():
                if entry.name.startswith(SKIPPED_PREFIXES):
                    stats.skipped += 1
                else:
                    plan.append((path, entry))
    for path, entry in plan:  # every shape, before a single weight is read (the NF4 and full-precision paths)
        _check_shape(path, entry, *targets.resolve(entry.name), quantizing=checksums is None)
    total = len(plan)
    bytes_total = sum(e.nbytes for _, e in plan)

    def report(done: int, nbytes: int) -> None:
        if on_progress is not None:
            on_progress(LoadProgress(done, total, nbytes, bytes_total, stage))

    def check_cancel() -> None:
        if cancel is not None and cancel.is_set():
            raise LoadCancelledError("Loading was cancelled.")

    report(0, 0)
    filled: set[int] = set()  # quantized modules written from the checkpoint (or the cache)
    readers: dict[Path, TensorFileReader] = {}
    try:
        for index, (path, entry) in enumerate(plan):
            check_cancel()
            reader = readers.get(path)
            if reader is None:
                for other in readers.values():
                    other.close()
                readers = {path: (reader := TensorFileReader(path))}
            kind, target = targets.resolve(entry.name)
            if kind == "nf4" and checksums is None:
                _quantize_entry(
                    reader,
                    entry,
                    target,
                    device,
                    dtype,
                    check_cancel,
                    # B023: called within this iteration
                    lambda part: report(index, stats.bytes_read + part),  # noqa: B023
                )
                stats.quantized += 1
                filled.add(id(target))
            elif kind == "nf4_part":
                module, name = target
                _assign_checked(
                    reader,
                    entry,
                    checksums,
                    # B023: called within this iteration
                    lambda t: _set_buffer(module, name, t.to(device)),  # noqa: B023
                )
                filled.add(id(module))
            elif kind == "tensor":
                if id(target) in targets.done:
                    pass  # a tied weight saved twice: the first copy is already in place
                elif checksums is None and _converted_in_rows(entry, device, dtype):
                    targets.assign(
                        target,
                        _read_cast_in_rows(
                            reader,
                            entry,
                            device,
                            dtype,
                            # B023: called within this iteration
                            lambda part: report(index, stats.bytes_read + part),  # noqa: B023
                        ),
                    )
                else:
                    _assign_checked(
                        reader,
                        entry,
                        checksums,
                        # B023: called within this iteration
                        lambda t: targets.assign(target, _cast(t, device, dtype)),  # noqa: B023
                        # B023: called within this iteration
                        lambda part: report(index, stats.bytes_read + part),  # noqa: B023
                    )
            else:
                stats.unexpected.append(entry.name)
            stats.tensors += 1
            stats.bytes_read += entry.nbytes
            report(index + 1, stats.bytes_read)
    finally:
        for reader in readers.values():
            reader.close()
    check_keys(model, targets, filled, stats.unexpected)
    if on_progress is not None and torch.device(device).type != "cpu":
        on_progress(LoadProgress(0, 0, stage="moving to the GPU"))  # the buffers built with the model
    _finish(model, device)
    return stats


def _check_shape(path: Path, entry: TensorEntry, kind: str, target: Any, *, quantizing: bool) -> None:
    """A checkpoint tensor must have exactly the shape the model built from config.json expects; a transposed
    or foreign weight would otherwise load "successfully" and fail every request."""
    if kind == "tensor":
        expected = tuple(target.shape)
    elif kind == "nf4" and quantizing:
        expected = ((target.count,) if target.count is not None else ()) + tuple(target.shape)
    else:
        return
    if tuple(entry.shape) != expected:
        raise ModelDamagedError(
            f"{path.name}: tensor {entry.name} has shape {list(entry.shape)}, but the model config.json "
            f"describes needs {list(expected)}; the weights and config.json do not belong together (or a "
            "weight was saved transposed). Download the model again."
        )


class CheckpointMismatchError(ModelIncompleteError):
    """The checkpoint's tensors are not the model's: names the model does not have, or weights and persistent
    buffers it has that the checkpoint does not fill (they would silently keep their initial values)."""

    kind = "checkpoint_mismatch"

    def __init__(self, message: str, unexpected: list[str], missing: list[str]) -> None:
        super().__init__(message)
        self.unexpected = unexpected
        self.missing = missing


def check_keys(model: nn.Module, targets: _Targets, filled: set[int], unexpected: list[str]) -> None:
    """Raise `CheckpointMismatchError` unless every checkpoint tensor found a place and every parameter and
    persistent buffer of the model (shared ones once) was written."""
    written = targets.done
    missing = []
    seen: set[int] = set()
    quantized = {
        id(b): id(m)
        for m in model.modules()
        if isinstance(m, (NF4Weight, Int8Linear))
        for b in m._buffers.values()
        if b is not None
    }
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        owner = quantized.get(id(tensor))
        if owner is not None:
            if owner not in filled:
                missing.append(name)
        elif id(tensor) not in written:
            missing.append(name)
    if unexpected or missing:
        parts = []
        if missing:
            parts.append(
                f"{len(missing)} weight(s)/buffer(s) the model needs are not in it (first: {missing[0]})"
            )
        if unexpected:
            parts.append(
                f"{len(unexpected)} tensor(s) in it belong to no part of the model (first: {unexpected[0]})"
            )
        raise CheckpointMismatchError(
            "The checkpoint does not match its config.json: " + "; ".join(parts) + ". It may be from another "
            "model or a damaged download; download the model again.",
            unexpected,
            missing,
        )


def _set_buffer(module: nn.Module, name: str, value: torch.Tensor) -> None:
    old = module._buffers[name]
    if old is not None and (tuple(old.shape) != tuple(value.shape) or old.dtype != value.dtype):
        raise ModelIncompleteError(
            f"stored {name} has shape {tuple(value.shape)}, expected {tuple(old.shape)}"
        )
    module._buffers[name] = value
    if isinstance(module, NF4Weight):
        module._states = None


def _converted_in_rows(entry: TensorEntry, device: str, dtype: torch.dtype) -> bool:
    """A big floating tensor that must be cast or moved: converting it whole took seconds with the bar
    standing."""
    needs_work = entry.dtype != dtype or torch.device(device).type != "cpu"
    return (
        needs_work
        and entry.dtype.is_floating_point
        and len(entry.shape) > 1
        and entry.shape[0] > 1
        and entry.nbytes > tensorfile.READ_CHUNK
    )


def _read_cast_in_rows(
    reader: TensorFileReader,
    entry: TensorEntry,
    device: str,
    dtype: torch.dtype,
    report_part: Callable[[int], None],
) -> torch.Tensor:
    """Read, cast and place a tensor about READ_CHUNK bytes at a time, reporting each part (a 1 GB bf16 expert
    tensor cast to float32 in one piece held the bar for 2-3 s); it also never holds the whole raw copy."""
    rows = entry.shape[0]
    row_bytes = entry.nbytes // rows
    per = max(1, tensorfile.READ_CHUNK // max(1, row_bytes))
    out = torch.empty(entry.shape, dtype=dtype, device=device)
    for start in range(0, rows, per):
        n = min(per, rows - start)
        raw = reader.read_bytes(entry, start * row_bytes, n * row_bytes)
        out[start : start + n].copy_(torch.frombuffer(raw, dtype=entry.dtype).reshape((n, *entry.shape[1:])))
        report_part((start + n) * row_bytes)
    return out


def _assign_checked(
    reader: TensorFileReader,
    entry: TensorEntry,
    checksums: dict[str, int] | None,
    put: Callable[[torch.Tensor], None],
    report_part: Callable[[int], None] | None = None,
) -> None:
    raw = reader.read_bytes(entry, on_chunk=report_part)
    if checksums is not None:
        expected = checksums.get(entry.name)
        if expected is None or zlib.crc32(raw) != expected:
            raise CacheCorruptError(f"{reader.path.name}: tensor {entry.name} does not match its checksum")
    tensor = (
        torch.frombuffer(raw, dtype=entry.dtype).reshape(entry.shape) if raw else torch.empty(entry.shape)
    )
    put(tensor)


class CacheCorruptError(ModelIncompleteError):
    """A quantized-cache tensor failed its checksum (caught by the cache, which rebuilds)."""


def _quantize_entry(
    reader: TensorFileReader,
    entry: TensorEntry,
    module: NF4Weight | Int8Linear,
    device: str,
    dtype: torch.dtype,
    check_cancel: Callable[[], None],
    report_part: Callable[[int], None],
) -> None:
    """Quantize one checkpoint tensor into `module`, an expert slice at a time for stacked experts."""
    if module.count is None:
        weight = reader.read(entry.name).to(device)
        module.store(_quant_input(weight, dtype))
        return
    if entry.shape[0] != module.count:
        raise ModelIncompleteError(
            f"{entry.name} has {entry.shape[0]} experts, the config says {module.count}"
        )
    module.materialize(device)
    row_bytes = entry.nbytes // module.count
    for expert in range(module.count):
        check_cancel()
        weight = reader.read_row(entry.name, expert).to(device)
        module.store(_quant_input(weight, dtype), expert)
        report_part((expert + 1) * row_bytes)


def _quant_input(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # Quantize from the checkpoint's own precision when the kernels take it (bf16/fp16/fp32), else the compute
    # one.
    if weight.dtype in (torch.bfloat16, torch.float16, torch.float32):
        return weight
    return weight.to(dtype)


def _finish(model: DiffusionGemmaForBlockDiffusion, device: str) -> None:
    """Move the buffers built at construction (rotary tables, scales) to the device; refuse to leave holes."""
    missing = []
    for name, tensor in list(model.named_parameters(remove_duplicate=True)) + list(
        model.named_buffers(remove_duplicate=True)
    ):
        if tensor.is_meta:
            missing.append(name)
    if missing:
        raise ModelIncompleteError(
            f"The checkpoint lacks {len(missing)} weight(s) the model needs (first: {missing[0]}); "
            "download the model again."
        )
    for module in model.modules():
        for name, buf in list(module._buffers.items()):
            if buf is not None and buf.device.type != torch.device(device).type:
                module._buffers[name] = buf.to(device)
    model.eval()
    model.requires_grad_(False)
    if any(isinstance(m, NF4Weight) for m in model.modules()):
        from engine.weights.quantize import EXPERTS_IMPLEMENTATION

        model.set_experts_implementation(EXPERTS_IMPLEMENTATION)
