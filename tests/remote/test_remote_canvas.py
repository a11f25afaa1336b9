"""The canvas-control arguments the remote engine would send to a server that holds pinned positions, and the
offsets it rebuilds from vLLM's token strings. Pure functions: no server."""

from __future__ import annotations

import random

from engine.api import DenoiseSettings, DraftRequest, InfillRequest, RewriteRequest, WarmStart
from engine.remote import canvas
from engine.remote.client import is_plain_http_to_another_machine, rejected_field
from engine.remote.tokenizer import offsets_from_pieces


class _Tok:
    """Words as tokens (id = position in a growing vocabulary), with exact offsets."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=False):
        ids, offsets, pos = [], [], 0
        for word in text.split(" "):
            piece = word if pos == 0 else " " + word
            ids.append(self.vocab.setdefault(piece, 100 + len(self.vocab)))
            offsets.append((pos, pos + len(piece)))
            pos += len(piece)
        return {"input_ids": ids, "offset_mapping": offsets}


def test_infill_pins_the_ending_right_after_the_gap():
    tok = _Tok()
    request = InfillRequest(before="A", after="the end of it", middle_tokens=5)
    xargs, middle = canvas.for_request(tok, request, canvas=16, vocab=4096, max_steps=12, seed=1)
    after = tok("the end of it")["input_ids"]
    assert middle == 5 and xargs["diffusion_pinned"] == [5, 6, 7, 8]
    assert xargs["diffusion_seed_canvas"][5:9] == after and len(xargs["diffusion_seed_canvas"]) == 16
    assert xargs["diffusion_max_steps"] == 12


def test_a_warm_rewrite_noises_a_share_and_caps_the_steps():
    tok = _Tok()
    text = "one two three four five six seven eight"
    request = RewriteRequest(selection=text, instruction="Shorter.", strength=0.5)
    xargs, middle = canvas.for_request(tok, request, canvas=16, vocab=4096, max_steps=12, seed=3)
    kept = sum(a == b for a, b in zip(xargs["diffusion_seed_canvas"], tok(text)["input_ids"], strict=False))
    assert middle is None and kept == 4 and xargs["diffusion_max_steps"] == 6
    assert "diffusion_pinned" not in xargs


def test_pins_are_the_tokens_inside_the_pinned_characters():
    tok = _Tok()
    warm = WarmStart("keep this word here", pins=((5, 9),), noise=1.0)
    xargs, _ = canvas.for_request(
        tok, DraftRequest(before="x", canvas=warm), canvas=8, vocab=4096, max_steps=12, seed=0
    )
    assert xargs["diffusion_pinned"] == [1]
    assert xargs["diffusion_seed_canvas"][1] == tok("keep this")["input_ids"][1]


def test_a_cold_request_only_caps_the_steps():
    xargs, middle = canvas.for_request(
        _Tok(),
        DraftRequest(before="x", settings=DenoiseSettings(max_steps=9)),
        canvas=8,
        vocab=4096,
        max_steps=9,
        seed=0,
    )
    assert xargs == {"diffusion_max_steps": 9} and middle is None


def test_noise_never_uses_the_special_ids():
    rng = random.Random(0)
    assert min(canvas.noise(rng, 500, 4096)) >= 4


def test_offsets_from_sentencepiece_pieces_and_byte_fallback():
    text = "A café\nend"
    pieces = ["A", "▁caf", "<0xC3>", "<0xA9>", "<0x0A>", "end"]
    assert offsets_from_pieces(text, pieces) == [(0, 1), (1, 5), (5, 6), (5, 6), (6, 7), (7, 10)]


def test_rejected_field_from_vllm_messages():
    seed_message = (
        "The temperature, min_p, seed, min_tokens, logit_bias, bad_words, and allowed_token_ids sampling "
        "parameters are not yet supported with diffusion models."
    )
    assert rejected_field(seed_message, "", ("model", "prompt", "seed")) == "seed"
    assert rejected_field(seed_message, "", ("model", "prompt", "temperature")) == "temperature"
    assert rejected_field("bad canvas", "extra_args") == "vllm_xargs"


def test_plain_http_warning_only_for_another_machine():
    assert not is_plain_http_to_another_machine("http://127.0.0.1:8000")
    assert not is_plain_http_to_another_machine("localhost:8000")
    assert not is_plain_http_to_another_machine("https://gpu-box:8000")
    assert is_plain_http_to_another_machine("http://gpu-box:8000/v1")
