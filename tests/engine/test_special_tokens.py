"""Special tokens come from the tokenizer itself: a Gemma 4 layout, whose turn/channel markers exist only in
`added_tokens_decoder`, never leaks a control token into the document, and text after an end-of-turn is cut."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.api import DenoiseSettings, DraftRequest, InfillRequest
from engine.denoise import DenoiseOutput
from engine.special_tokens import cut_at_stop, hidden_ids, stop_ids
from engine.tools.tiny import GEMMA4_MARKERS, gemma4_style_tokenizer


@pytest.fixture(scope="module")
def gemma4_tok():
    return gemma4_style_tokenizer()


@pytest.fixture(scope="module")
def gemma4_session(tmp_path_factory: pytest.TempPathFactory):
    from engine.session import Session
    from engine.tools.tiny import make_tiny

    path = make_tiny(tmp_path_factory.mktemp("g4") / "ckpt", canvas_length=32, gemma4=True)
    s = Session()
    s.load(path, device="cpu")
    return s


def test_markers_are_only_in_added_tokens_decoder_like_gemma4(gemma4_tok) -> None:
    marker_ids = {gemma4_tok.convert_tokens_to_ids(m) for m in GEMMA4_MARKERS}
    assert not marker_ids & set(gemma4_tok.all_special_ids)  # the layout that made control tokens leak
    hidden = hidden_ids(gemma4_tok)
    assert marker_ids <= hidden
    assert {gemma4_tok.bos_token_id, gemma4_tok.eos_token_id, gemma4_tok.pad_token_id} <= hidden
    assert 300 not in hidden and gemma4_tok.convert_tokens_to_ids("<0x41>") not in hidden  # ordinary pieces


def test_generation_config_eos_ids_stop_and_are_hidden(gemma4_session) -> None:
    tok = gemma4_session.tokenizer
    end_of_turn = tok.convert_tokens_to_ids("<turn|>")
    assert end_of_turn in gemma4_session._eos
    assert end_of_turn in gemma4_session._text.stop_ids and end_of_turn in gemma4_session._text.special_ids
    assert cut_at_stop([5, 6, end_of_turn, 7], stop_ids([end_of_turn], 0)) == [5, 6]


def test_prompt_uses_the_checkpoints_gemma4_turn_markers(gemma4_session) -> None:
    from engine import prompts

    tok = gemma4_session.tokenizer
    ids = prompts.chat_ids(tok, "Hello")
    assert tok.convert_tokens_to_ids("<|turn>") in ids and tok.convert_tokens_to_ids("<turn|>") in ids
    assert ids[-1] != tok.convert_tokens_to_ids("<turn|>")  # the model's turn is left open


def _scripted(monkeypatch: pytest.MonkeyPatch, canvas_rows: list[list[int]]) -> None:
    """Make the session's loop return these canvases (one block) after the real prompt."""
    import engine.session as session_module

    def fake_denoise(model, prompt_ids, settings, **kwargs):
        rows = torch.tensor(canvas_rows[: prompt_ids.shape[0]], dtype=torch.long)
        return DenoiseOutput(
            sequences=torch.cat([prompt_ids.cpu(), rows], dim=1), prompt_length=prompt_ids.shape[1], forwards=1,
            steps=1, blocks=1, cancelled=False, confidence=torch.ones(rows.shape, dtype=torch.float32),
        )

    monkeypatch.setattr(session_module, "denoise", fake_denoise)


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_infill_middle_is_cut_at_end_of_turn(gemma4_session, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = gemma4_session.tokenizer
    canvas = gemma4_session.info.canvas_length
    after = " and the boats rested."
    middle = _ids(tok, " harbour was") + [tok.convert_tokens_to_ids("<turn|>")] + _ids(tok, " quiet")
    after_ids = _ids(tok, after)
    row = middle + after_ids[: canvas - len(middle)]
    row += [0] * (canvas - len(row))
    _scripted(monkeypatch, [row])
    result = gemma4_session.run(InfillRequest("In the morning the", after, middle_tokens=len(middle),
                                              settings=DenoiseSettings(seed=0)))
    assert result.text == " harbour was"
    assert "<" not in result.text and "quiet" not in result.text


def test_draft_never_writes_a_channel_marker_and_ends_at_end_of_turn(gemma4_session,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    tok = gemma4_session.tokenizer
    canvas = gemma4_session.info.canvas_length
    row = ([tok.convert_tokens_to_ids("<|channel>")] + _ids(tok, " The boats rested")
           + [tok.convert_tokens_to_ids("<channel|>")] + _ids(tok, " on the water")
           + [tok.convert_tokens_to_ids("<turn|>")] + _ids(tok, " after the end"))
    row = (row + [0] * canvas)[:canvas]
    _scripted(monkeypatch, [row])
    result = gemma4_session.run(DraftRequest("In the morning", max_new_tokens=canvas, settings=DenoiseSettings(seed=0)))
    assert result.text == " The boats rested on the water"
    view = gemma4_session._view(torch.tensor([row]), torch.ones(1, canvas), 0, (), None)  # what a ghost step shows
    assert "".join(s.text for s in view) == " The boats rested on the water"


def test_real_checkpoint_tokenizer_is_not_needed_for_the_tiny_layout(tiny_dir: Path) -> None:
    """The old tiny layout (markers as extra special tokens) still hides them."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    assert tok.convert_tokens_to_ids("<end_of_turn>") in hidden_ids(tok)
