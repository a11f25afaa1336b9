"""Ghost text never shows broken characters, whatever state the canvas is in."""

from __future__ import annotations

import pytest

from engine.display import TokenText


@pytest.fixture(scope="module")
def text(session) -> TokenText:
    tok = session.tokenizer
    return TokenText(tok, stop_ids={tok.eos_token_id, tok.pad_token_id})


def _ids(session, s: str) -> list[int]:
    return session.tokenizer(s, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize(
    "sample", ["안녕하세요, 세계!", "日本語のテキスト。", "emoji 😀👍🏽 ok", "مرحبا بالعالم", "café déjà vu"]
)
def test_full_text_round_trips(session, text: TokenText, sample: str) -> None:
    assert text.text(_ids(session, sample)) == sample


@pytest.mark.parametrize("sample", ["한국어 문장", "😀 smile", "漢字"])
def test_every_prefix_is_valid_text_and_holds_back_partial_characters(session, text, sample: str) -> None:
    ids = _ids(session, sample)
    shown_before = ""
    for cut in range(1, len(ids) + 1):
        shown = text.text(ids[:cut])
        shown.encode("utf-8")  # valid UTF-8, no surrogates
        assert "\ufffd" not in shown
        assert sample.startswith(shown)  # never a wrong or half character, only a shorter prefix
        assert len(shown) >= len(shown_before)
        shown_before = shown


def test_stray_bytes_and_control_characters_are_dropped(session, text) -> None:
    tok = session.tokenizer
    lone_continuation = tok.convert_tokens_to_ids("<0x95>")
    bell = tok.convert_tokens_to_ids("<0x07>")
    ids = [*_ids(session, "good"), lone_continuation, bell, *_ids(session, " words")]
    assert text.text(ids) == "good words"


def test_words_take_the_confidence_of_their_weakest_token(session, text) -> None:
    ids = _ids(session, "the harbour was quiet")
    conf = [0.9] * len(ids)
    conf[-1] = 0.2  # last token belongs to "quiet"
    spans = text.spans(ids, conf)
    assert "".join(s.text for s in spans) == "the harbour was quiet"
    assert spans[-1].text.strip() == "quiet" and spans[-1].confidence == pytest.approx(0.2)
    assert all(s.confidence == pytest.approx(0.9) for s in spans[:-1])


def test_visible_ids_stop_at_end_of_text(session, text) -> None:
    tok = session.tokenizer
    ids = [*_ids(session, "done"), tok.eos_token_id, *_ids(session, " noise")]
    assert text.text(text.visible_ids(ids)) == "done"
