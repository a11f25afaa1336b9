"""Issue 32, case 11: a checkpoint whose generation_config.json is what transformers' own `save_pretrained`
writes (`"t_min": null, "t_max": null, "max_denoising_steps": null, …`: the fields it was not given) loads,
with transformers' meaning of null (the model's defaults: 0.4 / 0.8 / 48); values that are set and wrong are
still refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.api import DenoiseSettings, ModelDamagedError
from engine.declared import REFERENCE_STEPS, default_steps
from engine.resources import demo_model_dir
from engine.weights.validate import validate_folder

ROOT = Path(__file__).resolve().parents[2]


def _saved_by_transformers(tmp_path: Path, **given: object) -> Path:
    """The demo checkpoint with the generation config transformers writes for a model that sets only its
    token ids (and `given`)."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationConfig

    folder = tmp_path / "saved-by-transformers"
    shutil.copytree(demo_model_dir(), folder)
    (folder / "generation_config.json").unlink()
    DiffusionGemmaGenerationConfig(
        bos_token_id=2, eos_token_id=[1, 5], pad_token_id=0, **given
    ).save_pretrained(folder)
    return folder


def test_the_generation_config_transformers_writes_holds_nulls_and_passes_the_check(tmp_path):
    folder = _saved_by_transformers(tmp_path)
    written = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    assert written["t_min"] is None and written["t_max"] is None and written["max_denoising_steps"] is None
    validate_folder(folder)  # no "sets t_min None and t_max None … Download generation_config.json again"
    assert default_steps(folder) == REFERENCE_STEPS


def test_nulls_mean_the_models_defaults_as_transformers_reads_them(tmp_path):
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationConfig

    folder = _saved_by_transformers(tmp_path)
    settings = DenoiseSettings.from_generation_config(DiffusionGemmaGenerationConfig.from_pretrained(folder))
    assert (settings.t_min, settings.t_max, settings.max_steps) == (0.4, 0.8, 48)
    assert settings == DenoiseSettings()


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"t_min": 0.9}, "sets t_min 0.9 and t_max None"),  # set, and above the default t_max 0.8
        ({"t_max": 1.5}, "t_max 1.5"),
        ({"confidence_threshold": -1.0}, "confidence_threshold to -1.0"),
        ({"sampler_config": {"entropy_bound": 0}}, "entropy_bound to 0"),
    ],
)
def test_values_that_are_set_and_wrong_are_still_refused(tmp_path, given, words):
    folder = _saved_by_transformers(tmp_path)
    path = folder / "generation_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(given)
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ModelDamagedError, match=words.replace("(", r"\(")):
        validate_folder(folder)


@pytest.mark.slow
def test_cli_drafts_from_a_checkpoint_saved_by_transformers(tmp_path):
    folder = _saved_by_transformers(tmp_path)
    before = tmp_path / "before.txt"
    before.write_text("The harbour was quiet when the boats came home.", encoding="utf-8")
    cmd = [
        sys.executable,
        "-m",
        "engine",
        "generate",
        "--model",
        str(folder),
        "--device",
        "cpu",
        "--task",
        "draft",
        "--before-file",
        str(before),
        "--max-new-tokens",
        "16",
        "--jsonl",
    ]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["event"] == "done"
