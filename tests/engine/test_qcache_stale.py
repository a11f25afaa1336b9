"""The 4-bit cache is never served for a shard that changed, even between the fingerprint's sampled regions
and
with its modification time put back (issue 22): the manifest keeps each shard's full hash and file
identity."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest
import torch

from engine.api import LoadProgress
from engine.weights import qcache
from engine.weights.loader import load_model

pytestmark = pytest.mark.slow  # four NF4 loads of the tiny checkpoint: ~70 s on a loaded CPU


@pytest.fixture()
def setup(tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LETTERPRESS_CACHE_DIR", str(tmp_path / "cache"))
    # A 50 GB shard is sampled in 16 x 64 KiB; the tiny one (690 KB) would be read whole. Two 4 KiB samples
    # give
    # the tiny shard the real one's blind spots: everything between its first and last 4 KiB.
    monkeypatch.setattr(qcache, "SAMPLES_PER_SHARD", 2)
    monkeypatch.setattr(qcache, "SAMPLE_BYTES", 4096)
    copy = tmp_path / "model"
    shutil.copytree(tiny_dir, copy)
    return copy


def _load(folder: Path):
    seen: list[LoadProgress] = []
    loaded = load_model(folder, device="cpu", quantization="nf4", on_progress=seen.append)
    return loaded, {p.stage for p in seen}


def _embedding(loaded) -> torch.Tensor:
    return loaded.model.get_input_embeddings().weight.detach().float().clone()


def _change_between_samples(shard: Path) -> None:
    """Zero the embedding's values in the middle of the file, keep the size, header and timestamps."""
    raw = shard.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    name = next(k for k in header if k.endswith("embed_tokens.weight"))
    begin, end = header[name]["data_offsets"]
    start = 8 + n + begin + (end - begin) // 4
    stop = 8 + n + begin + 3 * (end - begin) // 4
    assert start > 8 + n + 4096 and stop < len(raw) - 4096  # outside both sampled windows
    st = shard.stat()
    with shard.open("r+b") as fh:
        fh.seek(start)
        fh.write(bytes(stop - start))
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_shard_changed_between_the_sampled_regions_is_not_served_from_the_cache(setup: Path) -> None:
    first, stages = _load(setup)
    assert "quantizing" in stages
    shard = setup / "model.safetensors"
    key = qcache.slot_for(setup, [shard], torch.float32).key
    _change_between_samples(shard)
    assert qcache.slot_for(setup, [shard], torch.float32).key == key  # the sampled fingerprint cannot see it
    again, stages = _load(setup)
    assert "reading cache" not in stages and "quantizing" in stages
    assert "changed since the cache was made" in again.info.notice
    assert not torch.equal(_embedding(first), _embedding(again))  # the new weights, not the stale ones
    third, stages = _load(setup)
    assert "reading cache" in stages  # the rebuilt cache serves the changed shard
    assert torch.equal(_embedding(third), _embedding(again))


def test_a_copied_folder_still_reads_the_cache(setup: Path, tmp_path: Path) -> None:
    _load(setup)
    moved = tmp_path / "elsewhere" / "model"  # the cache folder is named after the checkpoint folder
    shutil.copytree(setup, moved)  # new inode and change time, same bytes: hashed once, then trusted
    _, stages = _load(moved)
    assert "reading cache" in stages and "quantizing" not in stages
