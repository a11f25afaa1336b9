"""The model manager: finds cached checkpoints, says what is wrong with a folder, loads with progress and
cancel, and explains failures with a fix."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel

from app.assist.engine_host import EngineHost
from app.config.settings import Settings
from app.ui.model_dialog import (
    FitRow,
    Inspection,
    ModelDialog,
    find_cached_checkpoints,
    inspect_folder,
)
from engine.api import OutOfMemoryError
from engine.fake import FakeEngine
from engine.resources import demo_model_dir

DEMO = demo_model_dir()


def write_safetensors(path: Path, n_floats: int = 4, name: str = "w") -> None:
    header = json.dumps(
        {name: {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}
    ).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * (4 * n_floats))


def fake_checkpoint(folder: Path, *, shards: int = 2) -> Path:
    """A DiffusionGemma folder that passes validation: the demo's config and tokenizer, small sharded weights
    (zeros; enough for the checks, which read headers only)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((DEMO / name).read_bytes())
    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    for i, name in enumerate(names):
        write_safetensors(folder / name, name=f"t{i}")
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {f"t{i}": n for i, n in enumerate(names)}})
    )
    return folder


def no_fit(folder: str, device: str) -> Inspection:
    return inspect_folder(folder, device)


@pytest.fixture
def host(qtbot):
    engines: list[FakeEngine] = []

    def factory():
        engines.append(FakeEngine(load_steps=50, load_delay=0.02))
        return engines[-1]

    h = EngineHost(factory)
    h.engines = engines  # type: ignore[attr-defined]
    h.start()
    yield h
    h.shutdown()


def make_dialog(qtbot, host, tmp_path, **kw):
    settings = Settings(tmp_path / "cfg")
    dlg = ModelDialog(host, settings, cache_dirs=kw.pop("cache_dirs", []), **kw)
    qtbot.addWidget(dlg)
    return dlg, settings


def wait_checked(qtbot, dlg):
    qtbot.waitUntil(lambda: dlg.inspection is not None, timeout=10000)


def test_finds_diffusiongemma_snapshots_in_the_hub_cache(tmp_path, qtbot, host):
    cache = tmp_path / "hub"
    snap = fake_checkpoint(cache / "models--google--diffusiongemma-26B-A4B-it" / "snapshots" / "abc123def456")
    (cache / "models--google--diffusiongemma-26B-A4B-it" / "refs").mkdir()
    (cache / "models--google--diffusiongemma-26B-A4B-it" / "refs" / "main").write_text("abc123def456")
    other = cache / "models--org--bert" / "snapshots" / "r1"
    other.mkdir(parents=True)
    (other / "config.json").write_text(json.dumps({"model_type": "bert"}))
    found = find_cached_checkpoints([cache])
    assert [(m.repo_id, m.path, m.is_main) for m in found] == [
        ("google/diffusiongemma-26B-A4B-it", snap, True)
    ]
    dlg, _ = make_dialog(qtbot, host, tmp_path, cache_dirs=[cache])
    assert dlg.cached.count() == 2  # the built-in demo, always offered first, and the cached snapshot
    assert dlg.cached.item(0).text().startswith("Built-in demo")
    dlg.choose(str(snap))
    wait_checked(qtbot, dlg)
    assert dlg.inspection.loadable and dlg.load_button.isEnabled()


def test_hub_cache_location_follows_hf_home(tmp_path, monkeypatch):
    from app.ui.model_dialog import hf_cache_dirs

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    (tmp_path / "hfhome" / "hub").mkdir(parents=True)
    assert hf_cache_dirs()[0] == tmp_path / "hfhome" / "hub"


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda d: (d / "model-00002-of-00002.safetensors").unlink(), ["missing", "hf download"]),
        (
            lambda d: (d / "model-00001-of-00002.safetensors").write_bytes(
                (d / "model-00001-of-00002.safetensors").read_bytes()[:-3]
            ),
            ["incomplete", "hf download"],
        ),
        (lambda d: (d / "tokenizer.json").unlink(), ["tokenizer"]),
        (
            lambda d: (d / "config.json").write_text(
                json.dumps({**json.loads((d / "config.json").read_text()), "auto_map": {}})
            ),
            ["own code", "safetensors"],
        ),
    ],
)
def test_broken_folders_are_explained_and_cannot_be_loaded(tmp_path, qtbot, host, damage, words):
    folder = fake_checkpoint(tmp_path / "m")
    damage(folder)
    dlg, _ = make_dialog(qtbot, host, tmp_path)
    dlg.choose(str(folder))
    wait_checked(qtbot, dlg)
    text = dlg.findChild(QLabel, "modelCheck").text()
    for w in words:
        assert w in text
    assert not dlg.load_button.isEnabled()


def test_missing_folder_says_to_choose_the_download_folder(tmp_path, qtbot, host):
    dlg, _ = make_dialog(qtbot, host, tmp_path)
    dlg.choose(str(tmp_path / "nowhere"))
    wait_checked(qtbot, dlg)
    assert "does not exist" in dlg.check_label.text() and "hf download" in dlg.check_label.text()


def test_load_shows_progress_and_remembers_the_model(tmp_path, qtbot, host):
    folder = fake_checkpoint(tmp_path / "m")
    dlg, settings = make_dialog(qtbot, host, tmp_path)
    dlg.choose(str(folder))
    wait_checked(qtbot, dlg)
    values = []
    dlg.progress.valueChanged.connect(values.append)
    with qtbot.waitSignal(host.loaded, timeout=10000):
        dlg.load_button.click()
        assert dlg.cancel_button.isEnabled() and not dlg.load_button.isEnabled()
    assert "Loaded" in dlg.status.text()
    assert len(set(values)) > 3 and values[-1] == 1000
    assert settings["model.folder"] == str(folder)
    assert not dlg.cancel_button.isEnabled()


def test_cancelling_a_load_says_so_and_allows_a_retry(tmp_path, qtbot, host):
    folder = fake_checkpoint(tmp_path / "m")
    dlg, settings = make_dialog(qtbot, host, tmp_path)
    dlg.choose(str(folder))
    wait_checked(qtbot, dlg)
    dlg.load_button.click()
    qtbot.waitUntil(lambda: dlg.progress.value() > 0, timeout=10000)
    with qtbot.waitSignal(host.loadFailed, timeout=10000):
        dlg.cancel_button.click()
    assert "cancelled" in dlg.status.text().lower()
    assert dlg.load_button.isEnabled() and host.model_info is None
    assert settings["model.folder"] == ""


def test_out_of_memory_load_failure_explains_the_fix(tmp_path, qtbot):
    h = EngineHost(
        lambda: FakeEngine(load_error=OutOfMemoryError("The GPU ran out of memory while loading."))
    )
    h.start()
    try:
        folder = fake_checkpoint(tmp_path / "m")
        dlg, _ = make_dialog(qtbot, h, tmp_path)
        dlg.choose(str(folder))
        wait_checked(qtbot, dlg)
        with qtbot.waitSignal(h.loadFailed, timeout=10000):
            dlg.load()
        assert "ran out of memory" in dlg.status.text() and "nf4" in dlg.status.text()
    finally:
        h.shutdown()


def test_fit_badges_are_shown_per_precision(tmp_path, qtbot, host):
    folder = fake_checkpoint(tmp_path / "m")

    def inspector(f: str, device: str) -> Inspection:
        return Inspection(
            f,
            summary="ok",
            device="cuda",
            fit=(
                FitRow("nf4", "fits", 15.2, 24.0, weights_gb=14.1, runtime_gb=1.1),
                FitRow("bf16", "wont_fit", 52.0, 24.0, weights_gb=50.9, runtime_gb=1.1),
            ),
        )

    dlg, _ = make_dialog(qtbot, host, tmp_path, inspector=inspector)
    dlg.choose(str(folder))
    wait_checked(qtbot, dlg)
    assert dlg.fit_verdicts() == {"nf4": "fits", "bf16": "wont_fit"}
    t = dlg.fit_table
    assert [t.item(r, 1).text() for r in range(2)] == ["Fits", "Won't fit"]
    headers = [t.horizontalHeaderItem(c).text() for c in range(t.columnCount())]
    assert headers == ["Precision", "Fit", "Weights", "Runtime", "Total", "Available"]
    assert [t.item(1, c).text() for c in (2, 3, 4)] == ["50.9 GB", "1.1 GB", "52.0 GB"]
    assert "24.0 GB" in t.item(1, 5).text()


def test_real_fit_estimate_gives_a_verdict_per_precision(tmp_path):
    """With the real model's shapes and a CPU, the 26B checkpoint's numbers come from engine.weights.fit."""
    folder = fake_checkpoint(tmp_path / "m")
    config = {
        "model_type": "diffusion_gemma",
        "canvas_length": 256,
        "text_config": {
            "hidden_size": 2816,
            "intermediate_size": 2112,
            "num_hidden_layers": 30,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "num_experts": 128,
            "moe_intermediate_size": 704,
            "vocab_size": 262144,
            "num_global_key_value_heads": 2,
            "global_head_dim": 512,
        },
    }
    (folder / "config.json").write_text(json.dumps(config))
    result = inspect_folder(str(folder), "cpu")
    assert result.loadable
    assert [r.precision for r in result.fit] == [
        "nf4",
        "nf4-mixed",
        "bf16",
        "fp32",
    ]  # the badge shows both 4-bit plans
    needs = [r.needed_gb for r in result.fit]
    assert needs[0] < needs[1] < needs[2] < needs[3]
    assert all(r.verdict in ("fits", "tight", "wont_fit", "unknown") for r in result.fit)
    assert "weights" in result.fit[0].note  # the arithmetic travels with the verdict


def test_estimate_failure_still_allows_loading(tmp_path, monkeypatch):
    from engine.weights import fit

    def broken(*_a, **_k):
        raise RuntimeError("no estimate for this one")

    monkeypatch.setattr(fit, "estimate_for_device", broken)
    folder = fake_checkpoint(tmp_path / "m")
    result = inspect_folder(str(folder), "cpu")
    assert result.loadable and result.fit == () and "still try to load" in result.fit_note
