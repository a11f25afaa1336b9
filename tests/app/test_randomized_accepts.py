"""Seeded random sequences of partial accepts, Esc, undo, redo and alternative cycling over rewrites and
infills, typed as keys into the real window (scripted engine), sometimes while the suggestion is still
denoising.

After every single action the document must be one of the states a writer could have made on purpose: the
original, or the original with the region replaced by a prefix of the alternative that was accepted
(whitespace at the two joins aside, and there checked on its own: no doubled space, no glued words) — never
anything else. The machinery and the oracle are in tests/helpers/sequences.py.
"""

from __future__ import annotations

import random
import re

import pytest

from engine import fake
from engine.fake import FakeEngine
from tests.helpers.gui import build_window
from tests.helpers.sequences import ALTERNATIVES, run_rounds

pytestmark = pytest.mark.usefixtures("user_dirs")

ROUNDS_PER_SEED = 8
ACTIONS_PER_ROUND = 9
SEEDS = range(5)  # 5 seeds x 8 rounds x 9 actions = 360 actions


@pytest.mark.parametrize("seed", SEEDS)
def test_random_accepts_escapes_undos_and_redos_only_ever_leave_states_a_writer_meant(
    qtbot, settings, seed, record_property
):
    rng = random.Random(1000 + seed)
    engine = FakeEngine(
        texts=lambda req: ALTERNATIVES[req.request_id % len(ALTERNATIVES) :] + ALTERNATIVES,
        steps=6,
        step_delay=0.01,
    )
    window = build_window(qtbot, engine, settings=settings)
    total, accepted_rounds, changed = run_rounds(qtbot, window, rng, ROUNDS_PER_SEED, ACTIONS_PER_ROUND)
    record_property("actions", total)
    record_property("document_changes", changed)
    print(f"seed {seed}: {total} actions, {changed} changed the document, {accepted_rounds} rounds accepted")
    assert changed >= total // 5, "most sequences should move through accepted, undone and redone states"
    assert total == ROUNDS_PER_SEED * ACTIONS_PER_ROUND
    assert accepted_rounds >= ROUNDS_PER_SEED // 2, "the sequences should have exercised accepts"


def _trailing_words(text: str) -> list[str]:
    """Words that keep their trailing whitespace, as `engine.display` cuts the real model's text (the scripted
    engine's own words lead with theirs)."""
    return re.findall(r"\s*\S+\s*", text) if text.strip() else [text]


@pytest.mark.parametrize("seed", range(5))
def test_random_sequences_with_the_real_engines_word_spans_in_a_narrow_window(
    qtbot, settings, seed, monkeypatch
):
    # With trailing-space words and lines that wrap, "accept next line" ends at a wrapped space: the case that
    # doubled the writer's space after the region (found trying the demo model under Xvfb).
    monkeypatch.setattr(fake, "_words", _trailing_words)
    rng = random.Random(3000 + seed)
    engine = FakeEngine(
        texts=lambda req: ALTERNATIVES[req.request_id % len(ALTERNATIVES) :] + ALTERNATIVES,
        steps=6,
        step_delay=0.01,
    )
    window = build_window(qtbot, engine, settings=settings)
    window.resize(420, 600)  # the toolbar keeps the window wider; large text makes the ghost wrap often
    for _ in range(8):
        window.editor.zoom_in()
    total, accepted_rounds, _changed = run_rounds(qtbot, window, rng, ROUNDS_PER_SEED, ACTIONS_PER_ROUND)
    assert total == ROUNDS_PER_SEED * ACTIONS_PER_ROUND
    assert accepted_rounds >= ROUNDS_PER_SEED // 2
