"""The quantized cache: a second load reads it and gives identical outputs; damaged or foreign caches are
rebuilt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from engine.api import LoadProgress
from engine.weights import qcache
from engine.weights.loader import load_model


def _logits(model) -> torch.Tensor:
    gen = torch.Generator().manual_seed(5)
    canvas = torch.randint(0, 512, (1, 32), generator=gen)
    with torch.no_grad():
        return model(input_ids=torch.tensor([[2, 11, 22, 33]]), decoder_input_ids=canvas).logits


def _load(tiny_dir: Path) -> tuple[object, list[LoadProgress]]:
    seen: list[LoadProgress] = []
    loaded = load_model(tiny_dir, device="cpu", quantization="nf4", on_progress=seen.append)
    return loaded, seen


def _slot(tiny_dir: Path) -> qcache.CacheSlot:
    files = sorted(tiny_dir.glob("*.safetensors"))
    return qcache.slot_for(tiny_dir, files, torch.float32)


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LETTERPRESS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture()
def first(tiny_dir: Path, cache_dir: Path):
    loaded, seen = _load(tiny_dir)
    assert {p.stage for p in seen} >= {"quantizing"}
    assert _slot(tiny_dir).manifest.is_file() and _slot(tiny_dir).data.is_file()
    return loaded


def test_second_load_reads_the_cache_and_gives_identical_outputs(tiny_dir: Path, first) -> None:
    second, seen = _load(tiny_dir)
    stages = {p.stage for p in seen}
    assert "reading cache" in stages and "quantizing" not in stages
    assert second.info.notice.count("rebuilt") == 0
    assert torch.equal(_logits(first.model), _logits(second.model))
    # shared weights stay shared after a cache load too
    assert (
        second.model.model.encoder.language_model.layers[0].experts
        is second.model.model.decoder.layers[0].experts
    )


@pytest.mark.parametrize("damage", ["flip_bytes", "truncate", "other_version", "no_manifest"])
def test_damaged_or_foreign_cache_is_detected_and_rebuilt(tiny_dir: Path, first, damage: str) -> None:
    slot = _slot(tiny_dir)
    if damage == "flip_bytes":
        data = bytearray(slot.data.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
        slot.data.write_bytes(bytes(data))
    elif damage == "truncate":
        with slot.data.open("r+b") as fh:
            fh.truncate(slot.data.stat().st_size - 1000)
    elif damage == "other_version":
        manifest = json.loads(slot.manifest.read_text())
        manifest["format"] = -1
        slot.manifest.write_text(json.dumps(manifest))
    else:
        slot.manifest.unlink()
    again, seen = _load(tiny_dir)
    assert "quantizing" in {p.stage for p in seen}  # rebuilt from the checkpoint, not read from the bad cache
    assert torch.equal(_logits(first.model), _logits(again.model))
    manifest, reason = qcache.read_manifest(slot)
    assert manifest is not None, reason  # and a good cache is in place again
    _third, seen = _load(tiny_dir)
    assert "reading cache" in {p.stage for p in seen}


def test_changed_checkpoint_gets_a_new_cache_key(tiny_dir: Path, tmp_path: Path, cache_dir: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tiny_dir, copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-8:] = bytes(8)  # change the last tensor's values (the content), keep the size
    weights.write_bytes(bytes(data))
    assert _slot(copy).key != _slot(tiny_dir).key
    shutil.copytree(tiny_dir, tmp_path / "same")
    assert _slot(tmp_path / "same").key == _slot(tiny_dir).key  # a copied folder keeps its cache key
