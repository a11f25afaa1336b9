"""One validation pass over a model folder, before anything is allocated or loaded.

The model manager, the loader, `python -m engine generate` and `inspect` all call `validate_folder`, so a
folder is refused the same way everywhere, with one sentence that names the file and says what to do. The
sentence fits the case (each case is its own error type, see `engine.api`):

* not a model folder at all (`/tmp`, an empty folder): NotAModelFolderError;
* an interrupted download (missing or truncated files): ModelIncompleteError;
* a permission problem: ModelUnreadableError;
* a damaged file (JSON that does not parse, a safetensors header that lies): ModelDamagedError;
* a model Letterpress cannot run (another architecture, pickle weights, fp8, remote code, absurd sizes):
  UnsupportedModelError.

Everything is bounded: files are opened only when they are regular files (a FIFO would block), every read has
a length cap, the safetensors header is capped at 100 MB (the format's own limit), and config values are
range-checked against `LIMITS` before anything (the fit estimate, the skeleton) uses them. This module is pure
Python (no torch) so the checks are cheap and can run on any thread.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import struct
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from engine.api import (
    EngineError,
    LoadCancelledError,
    ModelDamagedError,
    ModelIncompleteError,
    ModelNotFoundError,
    ModelUnreadableError,
    NotAModelFolderError,
    UnsupportedModelError,
)
from engine.weights import soundness

MODEL_ID = "google/diffusiongemma-26B-A4B-it"
DOWNLOAD = f"hf download {MODEL_ID} --local-dir <folder>"
RERUN = f"Run the download again; it resumes where it stopped ({DOWNLOAD})."

MAX_HEADER_BYTES = 100_000_000  # the safetensors format caps the JSON header at 100 MB
MAX_SMALL_JSON_BYTES = (
    16 * 1024**2
)  # config.json, tokenizer_config.json, chat_template.json (real ones: < 1 MB)
MAX_INDEX_BYTES = 64 * 1024**2  # model.safetensors.index.json (the 26B-A4B's is ~100 KB)
MAX_TOKENIZER_BYTES = 512 * 1024**2  # tokenizer.json (Gemma's is ~33 MB)
MAX_TEMPLATE_BYTES = 4 * 1024**2  # chat_template.jinja (a few KB)
MAX_SHARDS = 10_000
MAX_LISTED = 10_000  # directory entries looked at to tell "not a model folder" from "incomplete"

# Bytes per element of every dtype the safetensors format knows; Letterpress loads the ones in
# LOADABLE_DTYPES.
DTYPE_BYTES: dict[str, float] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "F4": 0.5,
    "F6_E2M3": 0.75,
    "F6_E3M2": 0.75,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "C64": 8,
}
LOADABLE_DTYPES = frozenset({"BF16", "F16", "F32", "F64", "U8", "I8", "I16", "I32", "I64", "BOOL"})

# Bounds on config.json values. The largest plausible checkpoint of this family is taken as ~8x each dimension
# of the biggest Gemma-family model published (26B-A4B: hidden 2816, 30 layers, 128 experts of width 704,
# dense width 2112, vocabulary 262,144, canvas 256; Gemma 3 27B: hidden 5376, 62 layers, 128K context), and
# its total weights are capped at 2 trillion (4 TB in bf16, ~80x the 26B-A4B). Anything outside is a damaged
# or foreign config, and refusing it here keeps every later step (the fit estimate, the skeleton) bounded.
LIMITS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 512),
    "hidden_size": (1, 65_536),
    "intermediate_size": (1, 262_144),
    "num_attention_heads": (1, 1_024),
    "num_key_value_heads": (1, 1_024),
    "num_global_key_value_heads": (1, 1_024),
    "head_dim": (1, 4_096),
    "global_head_dim": (1, 4_096),
    "num_experts": (0, 2_048),
    "top_k_experts": (0, 2_048),
    "moe_intermediate_size": (0, 65_536),
    "vocab_size": (1, 2_097_152),
    "max_position_embeddings": (1, 16_777_216),
    "sliding_window": (0, 16_777_216),
}
REQUIRED = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "vocab_size",
)
CANVAS_LIMITS = (1, 8_192)
MAX_TOTAL_WEIGHTS = 2 * 10**12
LAYER_TYPES = frozenset({"sliding_attention", "full_attention"})


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    config: dict[str, Any]
    weight_files: tuple[Path, ...]
    weight_bytes: int


# ------------------------------------------------------------------------------------------------------------
# Files: stat first (never block on a FIFO, never follow a loop), read with a cap, errors as sentences


def _os_error(exc: OSError, path: Path, what: str = "file") -> EngineError:
    """The sentence for an OS error on `path`, by cause (never the raw exception text alone)."""
    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM):
        return ModelUnreadableError(
            f"Letterpress is not allowed to read the {what} {path} (permission denied). Give your user read "
            f"access (for example: chmod -R u+rX '{path}'), or choose a copy of the model you own."
        )
    if exc.errno == errno.ELOOP:
        return ModelNotFoundError(
            f"{path} is a symbolic link that loops back on itself, so there is nothing to read. Point the "
            "link at the real model folder, or choose that folder directly."
        )
    if isinstance(exc, FileNotFoundError):
        return ModelIncompleteError(
            f"The {what} {path} disappeared while it was being checked (moved or deleted?). Choose the "
            "folder again once it is back in place."
        )
    return ModelUnreadableError(
        f"The {what} {path} cannot be read ({exc.strerror or type(exc).__name__}). Check the disk and that "
        "the folder is mounted, then try again."
    )


def _stat(path: Path, what: str = "file") -> os.stat_result | None:
    """os.stat, or None when nothing is there; every other failure is a sentence."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        raise _os_error(exc, path, what) from exc


def _regular(path: Path, what: str = "file") -> os.stat_result | None:
    """The stat of a regular file at `path`, None if absent; a FIFO, device or folder in its place is
    refused."""
    st = _stat(path, what)
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a pipe, socket or device"
        raise ModelDamagedError(
            f"{path} is {kind}, not a regular file, so Letterpress will not read it. Replace it with the "
            f"real {path.name} from the download."
        )
    return st


def read_capped(path: Path, limit: int, what: str = "file") -> bytes:
    """The whole file, refused (unread) when it is larger than `limit` bytes."""
    st = _regular(path, what)
    if st is None:
        raise ModelIncompleteError(f"{path} is missing; the download did not finish. {RERUN}")
    if st.st_size > limit:
        raise ModelDamagedError(
            f"{path} is {st.st_size:,} bytes, more than the {limit:,} a real {path.name} can be; it is "
            "damaged or not part of this model. Download it again."
        )
    try:
        with open(path, "rb") as fh:  # read what stat saw (+1 to notice growth), never a buffer of `limit`
            return fh.read(min(limit, st.st_size) + 1)[:limit]
    except OSError as exc:
        raise _os_error(exc, path, what) from exc


def read_json(path: Path, limit: int = MAX_SMALL_JSON_BYTES, *, want: type = dict) -> Any:
    """Parse a capped JSON file; a damaged file (bad UTF-8, bad JSON, wrong top-level type) is a sentence."""
    raw = read_capped(path, limit)
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelDamagedError(
            f"{path} is not UTF-8 text (byte {exc.start} is invalid), "
            f"so it is damaged. Download {path.name} again."
        ) from exc
    except (ValueError, RecursionError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise ModelDamagedError(
            f"{path} is not valid JSON{where}, so it is damaged or was cut short. Download {path.name} again."
        ) from exc
    if not isinstance(value, want):
        kinds: dict[type, str] = {list: "a list", dict: "an object", str: "a string"}
        got = kinds.get(type(value), type(value).__name__)
        expected = "an object ({...})" if want is dict else want.__name__
        raise ModelDamagedError(
            f"{path} holds {got} where {expected} is expected, so it is damaged or not a model file. "
            f"Download {path.name} again."
        )
    return value


# ------------------------------------------------------------------------------------------------------------
# config.json


def config_int(section: dict[str, Any], key: str, where: str, *, default: int | None = None) -> int:
    """An integer config value within LIMITS (or `default` when absent/null); anything else is a sentence."""
    value = section.get(key)
    if value is None:
        if default is None:
            raise ModelDamagedError(
                f"{where} has no '{key}', which every DiffusionGemma config sets; it is damaged or not a "
                "DiffusionGemma config. Download config.json again."
            )
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            value = int(value)
        else:
            raise ModelDamagedError(
                f"{where} sets '{key}' to {_show(value)}, which is not a whole number; the file is damaged. "
                "Download config.json again."
            )
    low, high = LIMITS.get(key, (0, 2**31))
    if not low <= value <= high:
        raise UnsupportedModelError(
            f"{where} sets '{key}' to {value:,}, outside what a DiffusionGemma model can have ({low:,} to "
            f"{high:,}); the file is damaged or belongs to another model. Download config.json again."
        )
    return value


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def text_section(config: dict[str, Any], where: str = "config.json") -> dict[str, Any]:
    text = config.get("text_config", config)
    if text is None:
        text = config
    if not isinstance(text, dict):
        raise ModelDamagedError(
            f"{where}: 'text_config' is {_show(text)}, not an object; download config.json again."
        )
    return text


def check_config(config: Any, where: str = "config.json") -> dict[str, Any]:
    """Type- and range-check everything later code computes with; returns the text section. Constant time."""
    if not isinstance(config, dict):
        raise ModelDamagedError(f"{where} is not a JSON object; it is damaged. Download config.json again.")
    model_type = config.get("model_type")
    if model_type != "diffusion_gemma":
        shown = model_type if isinstance(model_type, str) and len(model_type) < 60 else "unknown"
        raise UnsupportedModelError(
            f"{where} describes a '{shown}' model; Letterpress runs DiffusionGemma checkpoints (model_type "
            f"'diffusion_gemma'), such as {MODEL_ID}."
        )
    if "auto_map" in config:
        raise UnsupportedModelError(
            f"{where} asks to run its own code (auto_map); Letterpress never does that."
        )
    soundness.check_config_numbers(config, where)
    text = text_section(config, where)
    if text.get("use_bidirectional_attention") == "all":
        raise UnsupportedModelError(
            f"{where} sets use_bidirectional_attention='all', which transformers 5.23 cannot run in the "
            "encoder; remove that key from text_config in config.json."
        )
    values = {k: config_int(text, k, where) for k in REQUIRED}
    for key in LIMITS:
        if key not in values:
            values[key] = config_int(text, key, where, default=0 if key not in ("head_dim",) else 256)
    canvas = config.get("canvas_length")
    if canvas is not None and (
        isinstance(canvas, bool)
        or not isinstance(canvas, int)
        or not CANVAS_LIMITS[0] <= canvas <= CANVAS_LIMITS[1]
    ):
        raise UnsupportedModelError(
            f"{where} sets 'canvas_length' to {_show(canvas)}; a DiffusionGemma canvas is a whole number of "
            f"tokens from {CANVAS_LIMITS[0]} to {CANVAS_LIMITS[1]:,}. Download config.json again."
        )
    if values["top_k_experts"] > values["num_experts"]:
        raise UnsupportedModelError(
            f"{where} routes each token to {values['top_k_experts']} experts but has only "
            f"{values['num_experts']}; the file is damaged. Download config.json again."
        )
    if values["num_key_value_heads"] > values["num_attention_heads"]:
        raise UnsupportedModelError(
            f"{where} has more key/value heads ({values['num_key_value_heads']}) than attention heads "
            f"({values['num_attention_heads']}); the file is damaged. Download config.json again."
        )
    layers = values["num_hidden_layers"]
    types = text.get("layer_types")
    if types is not None and (
        not isinstance(types, list) or len(types) != layers or not all(t in LAYER_TYPES for t in types)
    ):
        raise ModelDamagedError(
            f"{where}: 'layer_types' must list {layers} entries, each 'sliding_attention' or "
            "'full_attention'; the file is damaged. Download config.json again."
        )
    per_layer = text.get("per_layer_config")
    if per_layer is not None:
        if not isinstance(per_layer, dict) or len(per_layer) > layers:
            raise ModelDamagedError(f"{where}: 'per_layer_config' is malformed; download config.json again.")
        for key, override in per_layer.items():
            if not str(key).isdigit() or int(key) >= layers or not isinstance(override, dict):
                raise ModelDamagedError(
                    f"{where}: 'per_layer_config' names layer {_show(key)}, which the model does not have; "
                    "download config.json again."
                )
            for field in ("num_key_value_heads", "head_dim"):
                if field in override:
                    config_int(override, field, f"{where} (per_layer_config, layer {key})")
    total = rough_weight_count(values)
    if total > MAX_TOTAL_WEIGHTS:
        raise UnsupportedModelError(
            f"{where} describes a model of about {total / 1e9:,.0f} billion weights, far beyond any "
            f"DiffusionGemma checkpoint (the largest plausible is {MAX_TOTAL_WEIGHTS / 1e12:.0f} trillion); "
            "the file is damaged. Download config.json again."
        )
    return text


def rough_weight_count(v: dict[str, int]) -> int:
    """An upper-bound weight count in closed form (no per-layer loop), for the plausibility check only."""
    h, heads, kv, hd = v["hidden_size"], v["num_attention_heads"], v["num_key_value_heads"], v["head_dim"]
    hd = max(hd, v.get("global_head_dim") or 0)
    kv = max(kv, v.get("num_global_key_value_heads") or 0)
    attention = 2 * h * heads * hd + 2 * h * kv * hd
    mlp = 3 * h * v["intermediate_size"]
    experts = v["num_experts"] * (3 * h * v["moe_intermediate_size"] + h)
    return v["num_hidden_layers"] * (attention + mlp + experts) + v["vocab_size"] * h


# ------------------------------------------------------------------------------------------------------------
# safetensors headers


@dataclass(frozen=True)
class RawEntry:
    """One tensor of a safetensors header, already checked (dtype known, offsets inside the data)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # relative to the start of the data section
    end: int


@dataclass(frozen=True)
class Header:
    length: int  # the JSON header's length; data starts at 8 + length
    entries: dict[str, RawEntry]
    metadata: dict[str, str]
    file_size: int


class HeaderError(ValueError):
    """A safetensors file whose header cannot be trusted; `kind` says which error type the caller should
    raise."""

    def __init__(self, message: str, kind: str = "damaged") -> None:
        super().__init__(message)
        self.kind = kind


def parse_header(fh: Any, size: int, name: str) -> Header:
    """Read and check the header of an open safetensors file of `size` bytes (one bounded read)."""
    raw = fh.read(8)
    if len(raw) != 8:
        raise HeaderError(f"{name} is only {size} bytes, too short to be a safetensors file", "incomplete")
    (length,) = struct.unpack("<Q", raw)
    if length < 2 or length > MAX_HEADER_BYTES:
        raise HeaderError(
            f"{name} declares a {length:,}-byte header; the "
            f"safetensors format allows 2 to {MAX_HEADER_BYTES:,}"
        )
    if length > size - 8:
        raise HeaderError(
            f"{name} is {size:,} bytes, shorter than its own {length:,}-byte header", "incomplete"
        )
    blob = fh.read(length)
    if len(blob) != length:
        raise HeaderError(f"{name} ended while its header was being read", "incomplete")
    try:
        header = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HeaderError(f"{name} has a header that is not valid JSON") from exc
    if not isinstance(header, dict):
        raise HeaderError(f"{name} has a header that is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise HeaderError(f"{name} has malformed __metadata__")
    data_size = size - 8 - length
    entries: dict[str, RawEntry] = {}
    spans: list[tuple[int, int, str]] = []
    for tname, spec in header.items():
        if not isinstance(spec, dict):
            raise HeaderError(f"{name}: tensor {tname[:80]} is described by {_show(spec)}, not an object")
        dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
            raise HeaderError(f"{name}: tensor {tname[:80]} has an unknown dtype {_show(dtype)}")
        if dtype not in LOADABLE_DTYPES:
            raise HeaderError(
                f"{name} stores tensor {tname[:80]} as {dtype}, a number format Letterpress cannot load "
                "(it loads bf16, fp16 and fp32 checkpoints)",
                "unsupported",
            )
        if (
            not isinstance(shape, list)
            or len(shape) > 8
            or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**40 for d in shape)
        ):
            raise HeaderError(f"{name}: tensor {tname[:80]} has a malformed shape {_show(shape)}")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        ):
            raise HeaderError(f"{name}: tensor {tname[:80]} has no valid data_offsets")
        begin, end = offsets
        if not 0 <= begin <= end < 2**62:
            raise HeaderError(f"{name}: tensor {tname[:80]} has impossible data_offsets {_show(offsets)}")
        numel = math.prod(shape)
        if numel * DTYPE_BYTES[dtype] != end - begin:
            raise HeaderError(
                f"{name}: tensor {tname[:80]} has shape {shape} ({dtype}) but {end - begin:,} bytes of data"
            )
        entries[tname] = RawEntry(tname, dtype, tuple(shape), begin, end)
        spans.append((begin, end, tname))
    spans.sort()
    last = spans[-1][1] if spans else 0
    if last > data_size:  # the commonest broken download: the file stops before the data its header promises
        raise HeaderError(
            f"{name} is {size:,} bytes but its header says {8 + length + last:,}, so it is incomplete",
            "incomplete",
        )
    cursor = 0
    for begin, end, tname in spans:
        if begin != cursor:
            raise HeaderError(f"{name}: tensor {tname[:80]} does not start where the previous one ends")
        cursor = end
    if cursor != data_size:
        raise HeaderError(f"{name} is {size:,} bytes but its header accounts for {8 + length + cursor:,}")
    return Header(length, entries, {str(k): str(v) for k, v in metadata.items()}, size)


def read_header(path: Path) -> Header:
    """`parse_header` on a file, with file-system failures and lying headers turned into sentences."""
    st = _regular(path, "weight file")
    if st is None:
        raise ModelIncompleteError(f"The weight file {path} is missing; the download did not finish. {RERUN}")
    try:
        with open(path, "rb") as fh:
            return parse_header(fh, st.st_size, str(path))
    except HeaderError as exc:
        raise header_error(exc, path) from exc
    except OSError as exc:
        raise _os_error(exc, path, "weight file") from exc


def header_error(exc: HeaderError, path: Path) -> EngineError:
    if exc.kind == "incomplete":
        return ModelIncompleteError(f"{exc}: the download of {path.name} did not finish. {RERUN}")
    if exc.kind == "unsupported":
        return UnsupportedModelError(f"{exc}. Download the bf16 version of the model ({MODEL_ID}).")
    return ModelDamagedError(f"{exc}, so the file is damaged. Delete {path.name} and download it again.")


def expected_shape(text: dict[str, Any], name: str) -> tuple[int, ...] | None:
    """The shape config.json fixes for a text-stack tensor, for the names whose shape does not depend on
    details this check does not model (global-attention head sizes, per-layer overrides); None when not
    checked here. The loader compares every tensor with the model it builds, before reading any weight
    (stream_load)."""
    if "vision" in name:
        return None
    h, inter = text["hidden_size"], text["intermediate_size"]
    experts, moe = text.get("num_experts") or 0, text.get("moe_intermediate_size") or 0
    if name.endswith("embed_tokens.weight"):
        return (text["vocab_size"], h)
    for stem in ("mlp.", "self_conditioning."):
        if f".{stem}" in name or name.startswith(stem):
            leaf = name.rsplit(".", 2)[-2:]
            if leaf in (["gate_proj", "weight"], ["up_proj", "weight"]):
                return (inter, h)
            if leaf == ["down_proj", "weight"]:
                return (h, inter)
    if ".layers." not in name:
        return None
    index_text, _, rest = name.split(".layers.", 1)[1].partition(".")
    if not index_text.isdigit():
        return None
    if experts and rest == "experts.gate_up_proj":
        return (experts, 2 * moe, h)
    if experts and rest == "experts.down_proj":
        return (experts, h, moe)
    if experts and rest == "router.proj.weight":
        return (experts, h)
    index = int(index_text)
    types = text.get("layer_types")
    layer_type = (
        types[index]
        if isinstance(types, list) and index < len(types)
        else ("sliding_attention" if (index + 1) % 6 else "full_attention")
    )
    overridden = str(index) in (text.get("per_layer_config") or {})
    if layer_type != "sliding_attention" or overridden or not rest.startswith("self_attn."):
        return None
    heads, kv, hd = text["num_attention_heads"], text["num_key_value_heads"], text.get("head_dim") or 256
    return {
        "self_attn.q_proj.weight": (heads * hd, h),
        "self_attn.k_proj.weight": (kv * hd, h),
        "self_attn.v_proj.weight": (kv * hd, h),
        "self_attn.o_proj.weight": (h, heads * hd),
    }.get(rest)


def check_header_against_config(header: Header, text: dict[str, Any], path: Path) -> None:
    """The shapes a config fixes, without building the model: the embedding, the layer and expert counts, and
    the linear layers whose shapes follow from the sizes alone (a transposed or foreign weight is caught
    here)."""
    layers = text["num_hidden_layers"]
    for entry in header.entries.values():
        name = entry.name
        problem = ""
        want = expected_shape(text, name)
        if ".layers." in name and "vision" not in name:
            index = name.split(".layers.", 1)[1].split(".", 1)[0]
            if index.isdigit() and int(index) >= layers:
                problem = f"belongs to layer {index}, but config.json has {layers} layers"
        if not problem and want is not None and entry.shape != want:
            problem = f"has shape {list(entry.shape)} where config.json implies {list(want)}"
            if tuple(reversed(entry.shape)) == want:
                problem += " (it was saved transposed)"
        if problem:
            raise ModelDamagedError(
                f"{path.name}: tensor {name} {problem}; the weights and config.json belong to different "
                "models or one is damaged. Download the model again."
            )


# ------------------------------------------------------------------------------------------------------------
# The folder


def _confined(folder: Path, name: Any, index: Path) -> Path:
    """A shard named by the index, which must be a plain relative path inside the folder."""
    if not isinstance(name, str) or not name or "\0" in name:
        raise ModelDamagedError(
            f"{index} names a weight file {_show(name)}, which is not a file name; download the index again."
        )
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if (
        posix.is_absolute()
        or windows.is_absolute()
        or windows.drive
        or ".." in posix.parts
        or ".." in windows.parts
    ):
        raise ModelDamagedError(
            f"{index} points at {name[:120]}, outside the model folder; Letterpress only reads files inside "
            "it. The index is damaged or was tampered with: download it again."
        )
    if not name.endswith(".safetensors"):
        raise ModelDamagedError(
            f"{index} names {name[:120]}, which is not a .safetensors file; download it again."
        )
    return folder / name


def _listing(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as it:
            names = []
            for entry in it:
                names.append(entry.name)
                if len(names) >= MAX_LISTED:
                    break
            return names
    except OSError as exc:
        raise _os_error(exc, folder, "folder") from exc


def _open_folder(model_dir: str | Path) -> Path:
    path = Path(model_dir).expanduser()
    try:
        os.stat(path)
    except FileNotFoundError as exc:
        if os.path.islink(path):
            raise ModelNotFoundError(
                f"{path} is a symbolic link to {os.readlink(path)}, which does not exist. Point it at the "
                "model folder, or choose the folder itself."
            ) from exc
        raise ModelNotFoundError(
            f"The model folder {path} does not exist (was it moved or deleted?). Choose the folder you "
            "downloaded the model into."
        ) from exc
    except NotADirectoryError as exc:
        raise ModelNotFoundError(
            f"{path} is not a folder: a part of that path is a file. Choose the model folder."
        ) from exc
    except OSError as exc:
        raise _os_error(exc, path, "folder") from exc
    if not path.is_dir():
        raise NotAModelFolderError(
            f"{path} is a file, not a folder. Choose the folder "
            "that holds config.json and the .safetensors files."
        )
    return path


def validate_folder(model_dir: str | Path, *, cancel: threading.Event | None = None) -> CheckpointInfo:
    """The whole pass: folder, config.json and generation_config.json (types, ranges, finite numbers), weights
    (index, headers, shapes, finite in a sampled check), tokenizer, and the chat template rendered once with a
    deadline. `cancel` (the load's Cancel) stops it between files and inside the template render."""
    path = _open_folder(model_dir)
    names = _listing(path)
    config_path = path / "config.json"
    if _regular(config_path) is None:
        model_like = [
            n
            for n in names
            if n.endswith((".safetensors", ".bin", ".pt", ".gguf"))
            or n in ("tokenizer.json", "tokenizer.model", "model.safetensors.index.json")
        ]
        if not model_like:
            raise NotAModelFolderError(
                f"{path} is not a model folder: it has no config.json, no tokenizer and no weights. Choose "
                "the folder you downloaded the model into (the one "
                "passed to --local-dir), which holds config.json."
            )
        raise ModelIncompleteError(
            f"{path} has {model_like[0]} but no config.json, so the download did not finish. {RERUN}"
        )
    config = read_json(config_path)
    text = check_config(config, str(config_path))
    sizes: dict[str, Any] = {k: config_int(text, k, str(config_path), default=0) for k in LIMITS}
    sizes["head_dim"] = config_int(text, "head_dim", str(config_path), default=256)
    sizes["layer_types"] = text.get("layer_types")
    sizes["per_layer_config"] = text.get("per_layer_config") or {}
    gen_path = path / "generation_config.json"
    if _regular(gen_path) is not None:
        soundness.check_generation_config(read_json(gen_path), gen_path, sizes["vocab_size"])
    weights = _weight_files(path, names, sizes, cancel)
    check_tokenizer(path, sizes["vocab_size"], cancel)
    total = 0
    for shard in weights:
        st = _stat(shard, "weight file")
        total += st.st_size if st is not None else 0
    return CheckpointInfo(path, config, weights, total)


def _cancelled(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise LoadCancelledError("Loading was cancelled.")


def _finite(header: Header, shard: Path, names: set[str] | None = None) -> None:
    """The sampled NaN/infinity check of a shard's tensors (those the index assigns to it, when given)."""
    entries = [
        (e.name, e.dtype, e.begin, e.end) for e in header.entries.values() if names is None or e.name in names
    ]
    soundness.check_finite_samples(shard, 8 + header.length, entries)


def _weight_files(
    path: Path, names: list[str], text: dict[str, Any], cancel: threading.Event | None = None
) -> tuple[Path, ...]:
    index = path / "model.safetensors.index.json"
    if _regular(index) is not None:
        data = read_json(index, MAX_INDEX_BYTES)
        weight_map = data.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelDamagedError(
                f"{index} has no 'weight_map' of tensor names to files; it is damaged. Download it again."
            )
        shards: dict[Path, set[str]] = {}
        for tensor, name in weight_map.items():
            shards.setdefault(_confined(path, name, index), set()).add(str(tensor))
            if len(shards) > MAX_SHARDS:
                raise ModelDamagedError(
                    f"{index} names more than {MAX_SHARDS:,} weight files; it is damaged."
                )
        missing = [s.name for s in sorted(shards) if _regular(s, "weight file") is None]
        if missing:
            raise ModelIncompleteError(
                f"{path} is missing {len(missing)} weight shard(s): {', '.join(missing[:3])}. "
                f"The download did not finish. {RERUN}"
            )
        for shard in sorted(shards):
            _cancelled(cancel)
            header = read_header(shard)
            check_header_against_config(header, text, shard)
            extra = sorted(header.entries.keys() - shards[shard])
            # the loader reads every tensor of a shard: an unlisted copy would replace the listed one
            if extra:
                listed = weight_map.get(extra[0])
                where = (
                    f"which the index says is in {listed}"
                    if isinstance(listed, str)
                    else "which the index does not list at all"
                )
                raise ModelDamagedError(
                    f"{shard.name} also holds tensor {extra[0][:80]}, {where}; the shards and the index come "
                    "from "
                    "different downloads, and Letterpress will not guess which copy is right. Download the "
                    "model again."
                )
            _finite(header, shard)
            absent = sorted(shards[shard] - header.entries.keys())
            if absent:
                raise ModelDamagedError(
                    f"{index} says {shard.name} holds {absent[0]}, but that file has no such tensor; the "
                    "index and the weights come from different downloads. Download the model again."
                )
        return tuple(sorted(shards))
    single = path / "model.safetensors"
    if _regular(single, "weight file") is not None:
        header = read_header(single)
        check_header_against_config(header, text, single)
        _cancelled(cancel)
        _finite(header, single)
        return (single,)
    if any(n.endswith((".bin", ".pt", ".pth", ".ckpt")) for n in names):
        raise UnsupportedModelError(
            f"{path} only has pickle weights (.bin/.pt), which can run code when loaded; "
            "Letterpress loads .safetensors only. Download the safetensors version."
        )
    others = sorted(n for n in names if n.endswith(".safetensors"))
    if others:
        raise ModelIncompleteError(
            f"{path} has {others[0]} but neither model.safetensors nor model.safetensors.index.json, which "
            f"says how the shards fit together; the download did not finish. {RERUN}"
        )
    raise ModelIncompleteError(
        f"{path} has config.json but no model.safetensors weights; the download did not finish. {RERUN}"
    )


# ------------------------------------------------------------------------------------------------------------
# Tokenizer and chat template


def check_tokenizer(path: Path, vocab_size: int, cancel: threading.Event | None = None) -> None:
    """tokenizer.json must parse and fit the vocabulary; a chat template must exist and parse."""
    tok_json = path / "tokenizer.json"
    st = _regular(tok_json)
    if st is not None:
        key = (os.path.realpath(tok_json), st.st_size, st.st_mtime_ns)
        size = _PARSED_TOKENIZERS.get(key)
        if size is None:
            size = _parse_tokenizer(tok_json)
            if len(_PARSED_TOKENIZERS) >= 64:
                _PARSED_TOKENIZERS.clear()
            _PARSED_TOKENIZERS[key] = size
        if vocab_size and size > vocab_size:
            raise UnsupportedModelError(
                f"{tok_json} has {size:,} tokens but the model only knows {vocab_size:,}; the tokenizer "
                "belongs to another model. Download this model's tokenizer.json again."
            )
    elif _regular(path / "tokenizer.model") is None:
        raise ModelIncompleteError(
            f"{path} has no tokenizer (tokenizer.json); the download did not finish. {RERUN}"
        )
    template = chat_template(path)
    if not template:
        raise ModelIncompleteError(
            f"{path} has no chat template (chat_template.jinja, or 'chat_template' in "
            "tokenizer_config.json); Letterpress builds every prompt with it. Download those two files again."
        )
    try:
        import jinja2

        jinja2.Environment().parse(template)
    except ImportError:  # pragma: no cover
        pass
    except Exception as exc:
        raise ModelDamagedError(
            f"The chat template in {path} does not parse ({_first_line(exc)}); download chat_template.jinja "
            "and tokenizer_config.json again."
        ) from exc
    _cancelled(cancel)
    rendered = (template, tuple(sorted(_special_tokens(path).items())))
    if rendered not in _RENDERED_TEMPLATES:
        soundness.render_template_once(path, template, _special_tokens(path), cancel=cancel)
        if len(_RENDERED_TEMPLATES) >= 64:
            _RENDERED_TEMPLATES.clear()
        _RENDERED_TEMPLATES.add(rendered)


# A template that rendered once renders again: the model manager re-checks as the path is typed.
_RENDERED_TEMPLATES: set[tuple[str, tuple[tuple[str, str], ...]]] = set()


def _special_tokens(path: Path) -> dict[str, str]:
    """bos/eos/pad/unk token strings from tokenizer_config.json, as transformers hands them to the
    template."""
    file = path / "tokenizer_config.json"
    if _regular(file) is None:
        return {}
    config = read_json(file)
    out: dict[str, str] = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


# A real tokenizer.json (Gemma's: ~33 MB) takes a noticeable fraction of a second to parse; the model manager
# re-checks a folder as the path is typed and the loader checks it again, so an unchanged file (same real
# path, size and modification time) is parsed once. Values: its vocabulary size.
_PARSED_TOKENIZERS: dict[tuple[str, int, int], int] = {}


def _parse_tokenizer(tok_json: Path) -> int:
    raw = read_capped(tok_json, MAX_TOKENIZER_BYTES)
    try:
        from tokenizers import Tokenizer

        return int(Tokenizer.from_str(raw.decode("utf-8")).get_vocab_size(with_added_tokens=True))
    except ImportError:  # pragma: no cover - tokenizers ships with transformers
        read_json(tok_json, MAX_TOKENIZER_BYTES)
        return 0
    except Exception as exc:
        raise ModelDamagedError(
            f"{tok_json} cannot be parsed as a tokenizer ({_first_line(exc)}); it is damaged or cut short. "
            "Download tokenizer.json again."
        ) from exc


def chat_template(path: Path) -> str:
    """The checkpoint's chat template text ('' when there is none), from wherever transformers would read
    it."""
    jinja = path / "chat_template.jinja"
    if _regular(jinja) is not None:
        raw = read_capped(jinja, MAX_TEMPLATE_BYTES)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelDamagedError(f"{jinja} is not UTF-8 text; download it again.") from exc
        if text.strip():
            return text
    for name in ("tokenizer_config.json", "chat_template.json"):
        file = path / name
        if _regular(file) is None:
            continue
        value = read_json(file).get("chat_template")
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list):  # named templates: [{"name": ..., "template": ...}]
            for item in value:
                if (
                    isinstance(item, dict)
                    and isinstance(item.get("template"), str)
                    and item["template"].strip()
                ):
                    return item["template"]
    return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0][:160] if text else type(exc).__name__) or type(exc).__name__


def problems(model_dir: str | Path) -> list[str]:
    """Every reason the folder cannot be loaded, as sentences (empty when it passes). Never raises."""
    try:
        validate_folder(model_dir)
    except EngineError as exc:
        return [exc.message]
    except (
        OSError,
        ValueError,
        RecursionError,
        MemoryError,
    ) as exc:  # a bug here must still read as a sentence
        return [f"{model_dir} could not be checked ({type(exc).__name__}: {_first_line(exc)})."]
    return []
