"""The demo model settles in 12 steps: its generation_config declares it, and a request left at the reference
default (48, the app's default) takes the checkpoint's steps; a writer's own choice still wins."""

from __future__ import annotations

import json
from pathlib import Path

from engine.api import DenoiseSettings, DraftRequest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "resources" / "models" / "letterpress-demo"


def test_the_demo_model_declares_its_measured_default():
    config = json.loads((DEMO / "generation_config.json").read_text())
    assert config["max_denoising_steps"] == 12


def test_a_default_request_on_the_demo_runs_its_12_steps_and_an_explicit_choice_wins():
    from engine.session import Session

    session = Session()
    session.load(DEMO, device="cpu")
    events = []
    default = session.run(
        DraftRequest(before="The harbour", max_new_tokens=16, settings=DenoiseSettings(seed=0)),
        on_step=events.append,
    )
    assert default.stats.steps <= 12 and {e.max_steps for e in events} == {12}
    events.clear()
    chosen = session.run(
        DraftRequest(before="The harbour", max_new_tokens=16, settings=DenoiseSettings(max_steps=20, seed=0)),
        on_step=events.append,
    )
    assert {e.max_steps for e in events} == {20} and chosen.stats.steps <= 20
