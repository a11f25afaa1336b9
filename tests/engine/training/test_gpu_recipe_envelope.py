"""The demo's GPU recipe inside the lent machine's envelope (engine.training.gpu_recipe_envelope): the same
preflight as gpu-check, at most 8 minutes, and the trained model written back in files the machine returns."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from engine.training import gpu_recipe, gpu_recipe_envelope


def test_more_than_eight_minutes_is_refused_with_what_to_do() -> None:
    gpu_recipe_envelope.check_minutes(8)
    with pytest.raises(gpu_recipe_envelope.RecipeEnvelopeError, match="at most 8"):
        gpu_recipe_envelope.check_minutes(10)


def test_on_the_lent_image_as_it_is_the_recipe_stops_at_the_preflight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.tools import gpu_preflight

    monkeypatch.setattr(gpu_preflight, "installed_versions", lambda: dict(gpu_preflight.LENT_IMAGE))
    assert gpu_recipe.main(["--out", str(tmp_path), "--dry-run", "--no-generate"]) == 2
    said = capsys.readouterr().err
    assert "bitsandbytes is not installed" in said and "transformers 5.17.0" in said
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["preflight"]["ok"] is False
    assert not (tmp_path / "run").exists()  # no training started


def test_the_trained_model_comes_back_in_parts_the_machine_can_return(tmp_path: Path) -> None:
    model = tmp_path / "run" / "model"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(os.urandom(20 * 1024 * 1024))  # incompressible: 2 parts
    (model / "config.json").write_text("{}")
    for name in ("figures.json", "judge.json", "recipe.log"):
        (tmp_path / name).write_text("{}")
    files = gpu_recipe_envelope.pack_return(tmp_path)
    back = sorted((tmp_path / "return").iterdir())
    assert len(back) <= gpu_recipe_envelope.MAX_FILES
    assert all(f.stat().st_size <= 16 * 1024 * 1024 for f in back)
    parts = sorted(f for f in files if ".tar.gz." in f.name)
    assert len(parts) == 2
    joined = b"".join(p.read_bytes() for p in parts)
    with tarfile.open(fileobj=io.BytesIO(joined), mode="r:gz") as tar:
        data = tar.extractfile("model/model.safetensors")
        assert data is not None and data.read() == (model / "model.safetensors").read_bytes()
