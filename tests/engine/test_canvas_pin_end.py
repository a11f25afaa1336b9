"""`WarmStart.pin_end`: a warm canvas whose end is pinned ends exactly where its text ends (issue 16b's trial:
a re-roll whose last word was kept grew garbage glued onto it, "sein.ies. eyes up his…", because the
end-of-text after the text was noised like any free position)."""

from __future__ import annotations

import pytest

from engine import canvas as warm_canvas
from engine.api import DenoiseSettings, DraftRequest, WarmStart

TEXT = "the people went out into the field and gathered the grain before night."


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_word_pinned_with_the_end_comes_back_as_exactly_the_text(session, seed: int) -> None:
    warm = WarmStart(TEXT, pins=((0, len(TEXT)),), pin_end=True)
    request = DraftRequest(
        before="In the morning",
        canvas=warm,
        max_new_tokens=32,
        settings=DenoiseSettings(seed=seed, candidates=2),
    )
    result = session.run(request)
    assert result.candidates and all(
        c.text == TEXT for c in result.candidates
    )  # identical rows come back once


def test_a_pinned_end_keeps_the_last_pinned_word_last(session) -> None:
    last = TEXT.rindex(" night.")
    warm = WarmStart(TEXT, pins=((0, 10), (last, len(TEXT))), pin_end=True)
    for seed in range(3):
        result = session.run(
            DraftRequest(
                before="In the morning",
                canvas=warm,
                max_new_tokens=32,
                settings=DenoiseSettings(seed=seed, candidates=2),
            )
        )
        for cand in result.candidates:
            assert cand.text.startswith(TEXT[:10]) and cand.text.endswith(" night."), cand.text


def test_pin_end_is_not_a_cold_canvas() -> None:
    assert warm_canvas.cold(WarmStart(TEXT))
    assert not warm_canvas.cold(WarmStart(TEXT, pin_end=True))


def test_the_cli_pin_end_option(tiny_dir, tmp_path) -> None:
    from tests.engine.test_canvas_cli import _done, _engine

    init = tmp_path / "canvas.txt"
    init.write_text(TEXT, encoding="utf-8")
    pins = tmp_path / "pins.txt"
    pins.write_text(f"0 {len(TEXT)}\n", encoding="utf-8")
    before = tmp_path / "before.txt"
    before.write_text("In the morning", encoding="utf-8")
    done = _done(
        _engine(
            "generate",
            "--model",
            str(tiny_dir),
            "--before-file",
            str(before),
            "--init-file",
            str(init),
            "--pin-file",
            str(pins),
            "--pin-end",
            "--seed",
            "2",
            "--jsonl",
        )
    )
    assert [c["text"] for c in done["candidates"]] == [TEXT]
    run = _engine("generate", "--model", str(tiny_dir), "--pin-end")
    assert run.returncode != 0 and "need --init-file" in run.stderr + run.stdout
