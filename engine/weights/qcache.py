"""The quantized cache: NF4 weights saved after the first load, read directly by the next loads.

Quantizing 25B weights takes minutes; reading 14 GB back takes seconds. The cache lives under the user cache
dir (platformdirs; `LETTERPRESS_CACHE_DIR` overrides it), one folder per checkpoint content and compute dtype:

    <cache>/quantized/<checkpoint name>-<fingerprint>-<dtype>/weights.safetensors
                                                            /manifest.json   (written last: the commit marker)

It is never trusted blindly. The fingerprint hashes config.json and, per shard, its size, its safetensors
header and 16 sampled 64 KiB chunks, so a re-downloaded or changed checkpoint gets a new key (reading all 50
GB to hash it would cost more than quantizing). Because a sample can miss a change between its regions, the
manifest also records every shard's full SHA-256 (computed once, when the cache is written) and its file
identity (size, modification and change times, inode): a load whose shard still has the same identity trusts
it (the change time
moves on every write and cannot be set back by tools such as `cp -p` or `touch`), any other shard is hashed
in full
and a mismatch rebuilds the cache, so a changed shard is never served stale. The manifest records the format
version, the bitsandbytes version, the
fingerprint and a CRC32 of every tensor; a load checks all of them and every tensor's CRC as it streams, and a
cache that is stale, truncated, corrupted or from another version is deleted and rebuilt from the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from engine.api import LoadCancelledError, ModelIncompleteError, ProgressCallback
from engine.weights.quantize import FORMAT_VERSION
from engine.weights.tensorfile import PlannedTensor, TensorFileError, TensorFileWriter

if TYPE_CHECKING:
    from transformers import DiffusionGemmaForBlockDiffusion

log = logging.getLogger(__name__)

DATA_NAME = "weights.safetensors"
MANIFEST_NAME = "manifest.json"
SAMPLES_PER_SHARD = 16
SAMPLE_BYTES = 64 * 1024


def cache_root() -> Path:
    override = os.environ.get("LETTERPRESS_CACHE_DIR")
    if override:
        return Path(override) / "quantized"
    import platformdirs

    return Path(platformdirs.user_cache_dir("letterpress", appauthor=False)) / "quantized"


def _bnb_version() -> str:
    import bitsandbytes

    return str(bitsandbytes.__version__)


def fingerprint(model_dir: Path, weight_files: tuple[Path, ...] | list[Path]) -> str:
    """A content key for the checkpoint that costs a few MB of reads, not the whole checkpoint."""
    h = hashlib.sha256()
    h.update((model_dir / "config.json").read_bytes())
    for shard in sorted(weight_files, key=lambda p: p.name):
        size = shard.stat().st_size
        h.update(f"{shard.name}:{size}".encode())
        with shard.open("rb") as fh:
            header_len = int.from_bytes(fh.read(8), "little")
            h.update(fh.read(min(header_len, size)))
            for i in range(SAMPLES_PER_SHARD):
                fh.seek(
                    (size - SAMPLE_BYTES) * i // max(1, SAMPLES_PER_SHARD - 1) if size > SAMPLE_BYTES else 0
                )
                h.update(fh.read(SAMPLE_BYTES))
    return h.hexdigest()[:24]


def shard_identity(path: Path) -> dict[str, int]:
    """What changes whenever the file's bytes may have: size, mtime, ctime (moved by every write, and not
    settable
    by user tools), inode and device."""
    st = path.stat()
    return {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "ino": st.st_ino,
        "dev": st.st_dev,
    }


def content_hash(path: Path) -> str:
    """The full SHA-256 of a shard (read in 8 MiB chunks; ~1-2 GB/s)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _shard_records(weight_files: tuple[Path, ...] | list[Path]) -> dict[str, dict[str, Any]]:
    return {shard.name: {**shard_identity(shard), "sha256": content_hash(shard)} for shard in weight_files}


def check_shards(
    slot: CacheSlot, manifest: dict[str, Any], weight_files: tuple[Path, ...] | list[Path]
) -> str:
    """'' when every shard is the one the cache was made from, else why not. A shard whose identity changed is
    hashed in full; when it still matches (a copied or restored folder) the manifest learns its new
    identity."""
    records = manifest.get("shards")
    if not isinstance(records, dict):
        return "cache was written without the shards' full hashes (an older Letterpress)"
    if sorted(records) != sorted(shard.name for shard in weight_files):
        return "the checkpoint's weight files are not the ones the cache was made from"
    learned = False
    for shard in weight_files:
        record = records[shard.name]
        try:
            identity = shard_identity(shard)
        except OSError as exc:
            return f"{shard.name} cannot be read ({exc.strerror})"
        if isinstance(record, dict) and all(record.get(k) == v for k, v in identity.items()):
            continue
        try:
            digest = content_hash(shard)
        except OSError as exc:
            return f"{shard.name} cannot be read ({exc.strerror})"
        if not isinstance(record, dict) or record.get("sha256") != digest:
            return f"{shard.name} changed since the cache was made"
        record.update(identity)
        learned = True
    if learned:
        try:
            tmp = slot.folder / (MANIFEST_NAME + ".partial")
            tmp.write_text(json.dumps(manifest), encoding="utf-8")
            os.replace(tmp, slot.manifest)
        except OSError:
            pass  # the next load hashes again; nothing is served wrong
    return ""


@dataclass(frozen=True)
class CacheSlot:
    folder: Path
    key: str
    dtype: str

    @property
    def data(self) -> Path:
        return self.folder / DATA_NAME

    @property
    def manifest(self) -> Path:
        return self.folder / MANIFEST_NAME


def slot_for(
    model_dir: Path, weight_files: tuple[Path, ...] | list[Path], dtype: torch.dtype, scheme: str = "nf4"
) -> CacheSlot:
    key = fingerprint(model_dir, weight_files)
    dtype_name = str(dtype).removeprefix("torch.") + ("" if scheme == "nf4" else f"-{scheme}")
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_dir.name)[:60]
    return CacheSlot(cache_root() / f"{safe_name}-{key}-{dtype_name}", key, dtype_name)


def read_manifest(
    slot: CacheSlot, weight_files: tuple[Path, ...] | list[Path] | None = None
) -> tuple[dict[str, Any] | None, str]:
    """The manifest if the cache looks usable, else None and the reason (for the log and the notice). With
    `weight_files`, the checkpoint's shards must also be the ones the cache was made from (see
    check_shards)."""
    if not slot.manifest.is_file():
        return (
            None,
            "no cache yet" if not slot.folder.exists() else "cache has no manifest (unfinished write)",
        )
    try:
        manifest = json.loads(slot.manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"cache manifest unreadable ({exc})"
    expected = {
        "format": FORMAT_VERSION,
        "bitsandbytes": _bnb_version(),
        "fingerprint": slot.key,
        "dtype": slot.dtype,
    }
    for field, value in expected.items():
        if manifest.get(field) != value:
            return None, f"cache is from another {field} ({manifest.get(field)!r}, need {value!r})"
    try:
        size = slot.data.stat().st_size
    except OSError:
        return None, "cache data file is missing"
    if size != manifest.get("data_bytes"):
        return (
            None,
            f"cache data file is {size:,} bytes, the manifest "
            f"says {manifest.get('data_bytes'):,} (truncated)",
        )
    if weight_files is not None:
        why = check_shards(slot, manifest, weight_files)
        if why:
            return None, why
    return manifest, ""


def discard(slot: CacheSlot, reason: str) -> None:
    log.warning("Discarding the quantized cache %s: %s", slot.folder, reason)
    shutil.rmtree(slot.folder, ignore_errors=True)


def load_from_cache(
    slot: CacheSlot,
    model: DiffusionGemmaForBlockDiffusion,
    device: str,
    dtype: torch.dtype,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    weight_files: tuple[Path, ...] | list[Path] | None = None,
) -> str:
    """Fill the NF4 skeleton `model` from the cache; returns "" on success, else why the cache was rejected
    (it is then deleted, and the caller quantizes from the checkpoint with a fresh skeleton)."""
    from engine.weights.stream_load import CacheCorruptError, stream_into

    manifest, reason = read_manifest(slot, weight_files)
    if manifest is None:
        if slot.folder.exists():
            discard(slot, reason)
        return reason
    try:
        stats = stream_into(
            model,
            [slot.data],
            device,
            dtype,
            on_progress=on_progress,
            cancel=cancel,
            stage="reading cache",
            checksums={k: int(v) for k, v in manifest["crc32"].items()},
        )
    except LoadCancelledError:
        raise
    except (
        CacheCorruptError,
        TensorFileError,
        ModelIncompleteError,
        KeyError,
        ValueError,
        RuntimeError,
    ) as exc:
        reason = f"cache failed its checks ({exc})"
        discard(slot, reason)
        return reason
    if stats.unexpected:
        reason = f"cache holds {len(stats.unexpected)} unknown tensor(s), e.g. {stats.unexpected[0]}"
        discard(slot, reason)
        return reason
    return ""


def save_to_cache(
    slot: CacheSlot, model: nn.Module, model_dir: Path, weight_files: tuple[Path, ...] | list[Path] = ()
) -> str:
    """Write the loaded NF4 model to the cache (tensor by tensor); returns "" or why it was not written.

    Failure to write (disk full, read-only cache dir) never fails the load: the next load just quantizes
    again.
    """
    state = model.state_dict(keep_vars=True)
    seen: set[int] = set()
    plan: list[PlannedTensor] = []
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if id(tensor) in seen:
            continue  # shared encoder/decoder weights: stored once, restored by the skeleton's sharing
        seen.add(id(tensor))
        plan.append(PlannedTensor(name, tensor.dtype, tuple(tensor.shape)))
        tensors[name] = tensor
    need = sum(p.nbytes for p in plan)
    try:
        slot.folder.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(slot.folder).free
        if free < need * 1.05:
            shutil.rmtree(slot.folder, ignore_errors=True)
            return f"not enough disk space for the quantized cache ({need / 1e9:.1f} GB needed)"
        _remove_stale(slot, model_dir)
        tmp = slot.folder / (DATA_NAME + ".partial")
        crcs: dict[str, int] = {}
        writer = TensorFileWriter(tmp, plan, {"format": "pt", "letterpress": f"nf4-v{FORMAT_VERSION}"})
        try:
            for item in plan:
                data = tensors[item.name].detach().to("cpu").contiguous()
                crcs[item.name] = zlib.crc32(_bytes_of(data))
                writer.write(item.name, data)
        except BaseException:
            writer.abandon()
            raise
        writer.close()
        os.replace(tmp, slot.data)
        manifest = {
            "format": FORMAT_VERSION,
            "bitsandbytes": _bnb_version(),
            "torch": torch.__version__,
            "fingerprint": slot.key,
            "dtype": slot.dtype,
            "checkpoint": str(model_dir.resolve()),
            "data_bytes": slot.data.stat().st_size,
            "crc32": crcs,
            "shards": _shard_records(weight_files or sorted(model_dir.glob("*.safetensors"))),
        }
        tmp_manifest = slot.folder / (MANIFEST_NAME + ".partial")
        tmp_manifest.write_text(json.dumps(manifest), encoding="utf-8")
        os.replace(tmp_manifest, slot.manifest)
    except (OSError, ValueError, RuntimeError) as exc:
        shutil.rmtree(slot.folder, ignore_errors=True)
        return f"could not write the quantized cache ({exc})"
    return ""


def _bytes_of(tensor: torch.Tensor) -> memoryview | bytes:
    if not tensor.numel():
        return b""
    return tensor.reshape(-1).view(torch.uint8).numpy().data  # the array's buffer as a memoryview


def _remove_stale(slot: CacheSlot, model_dir: Path) -> None:
    """Other caches of the same checkpoint folder (an older download) will never be read again: free their
    disk."""
    root = slot.folder.parent
    here = str(model_dir.resolve())
    for folder in root.iterdir() if root.is_dir() else []:
        if folder == slot.folder or not (folder / MANIFEST_NAME).is_file():
            continue
        try:
            other = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if other.get("checkpoint") == here and other.get("dtype") == slot.dtype:
            shutil.rmtree(folder, ignore_errors=True)
