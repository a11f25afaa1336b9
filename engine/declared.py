"""What a checkpoint folder declares about its own sampler, read from its JSON without importing torch.

Why: the help of the command line and the app's Settings show the default number of denoising steps before any
model is loaded; the default that actually runs is the checkpoint's own `max_denoising_steps` (the demo's 12,
the reference's 48), so the shown default must be read from the same file, not printed as a constant.
"""

from __future__ import annotations

import json
from pathlib import Path

REFERENCE_STEPS = 48  # DiffusionGemmaGenerationConfig's default, used when a checkpoint declares none


def declared_steps(model_dir: str | Path | None) -> int | None:
    """The checkpoint's `max_denoising_steps` (generation_config.json), or None when absent or unreadable."""
    if model_dir is None:
        return None
    try:
        config = json.loads((Path(model_dir) / "generation_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    steps = config.get("max_denoising_steps") if isinstance(config, dict) else None
    return steps if type(steps) is int and steps >= 1 else None


def default_steps(model_dir: str | Path | None) -> int:
    """The steps a request left at the default runs on this checkpoint."""
    return declared_steps(model_dir) or REFERENCE_STEPS
