"""Over 200 random infill cases the pinned ending is in every decoder input and comes back unchanged."""

from __future__ import annotations

import random

import torch

from engine.api import DenoiseSettings, InfillRequest

WORDS = [
    "the",
    "harbour",
    "was",
    "quiet",
    "and",
    "boats",
    "rested",
    "on",
    "grey",
    "water",
    "안녕",
    "세계",
    "漢字",
    "😀",
    "café",
    "naïve",
    "—",
    "«quote»",
]


def _phrase(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def test_two_hundred_random_infills_keep_the_ending(session, monkeypatch) -> None:
    import engine.session as session_module

    inputs: list[torch.Tensor] = []
    real_denoise = session_module.denoise

    def spy(*args, **kwargs):  # observe the decoder input of every step
        kwargs["on_decoder_input"] = lambda b, s, c: inputs.append(c.clone())
        return real_denoise(*args, **kwargs)

    monkeypatch.setattr(session_module, "denoise", spy)
    rng = random.Random(1234)
    tok = session.tokenizer
    canvas = session.info.canvas_length
    for case in range(200):
        before = _phrase(rng, 0, 12)
        after = (
            (" " if rng.random() < 0.7 else "") + _phrase(rng, 1, 30) + ("\n" if rng.random() < 0.3 else "")
        )
        middle = rng.randint(1, canvas // 2)
        after_ids = tok(after, add_special_tokens=False)["input_ids"]
        pinned = min(len(after_ids), canvas - middle)
        inputs.clear()
        request = InfillRequest(
            before=before,
            after=after,
            middle_tokens=middle,
            settings=DenoiseSettings(max_steps=4, seed=case),
        )
        result = session.run(request)
        assert inputs, case
        expected = torch.tensor(after_ids[:pinned])
        for canvas_in in inputs:
            assert torch.equal(canvas_in[0, middle : middle + pinned], expected), case
        final = session.last_output.sequences[0, session.last_output.prompt_length :]
        assert torch.equal(final[middle : middle + pinned], expected), case
        # The pinned tokens decode back to exactly the start of `after` (a character cut by the canvas edge is
        # held back): nothing was re-tokenized or garbled.
        assert after.startswith(session._text.text(after_ids[:pinned])), case
        document = before + result.text + after
        assert document.endswith(after) and document.startswith(before)
        assert "\ufffd" not in result.text
