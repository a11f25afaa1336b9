"""Special tokens come from the tokenizer itself: a Gemma 4 layout, whose turn/channel markers exist only in
`added_tokens_decoder`, never leaks a control token into the document, and text after an end-of-turn is
cut."""

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
    from tests.helpers.checkpoints import tiny_checkpoint

    path = tiny_checkpoint(tmp_path_factory, name="ckpt", canvas_length=32, gemma4=True)
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
            sequences=torch.cat([prompt_ids.cpu(), rows], dim=1),
            prompt_length=prompt_ids.shape[1],
            forwards=1,
            steps=1,
            blocks=1,
            cancelled=False,
            confidence=torch.ones(rows.shape, dtype=torch.float32),
        )

    monkeypatch.setattr(session_module, "denoise", fake_denoise)


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_infill_middle_is_cut_at_end_of_turn(gemma4_session, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = gemma4_session.tokenizer
    canvas = gemma4_session.info.canvas_length
    after = " and the boats rested."
    middle = [*_ids(tok, " harbour was"), tok.convert_tokens_to_ids("<turn|>"), *_ids(tok, " quiet")]
    after_ids = _ids(tok, after)
    row = middle + after_ids[: canvas - len(middle)]
    row += [0] * (canvas - len(row))
    _scripted(monkeypatch, [row])
    result = gemma4_session.run(
        InfillRequest(
            "In the morning the", after, middle_tokens=len(middle), settings=DenoiseSettings(seed=0)
        )
    )
    assert result.text == " harbour was"
    assert "<" not in result.text and "quiet" not in result.text


def test_draft_never_writes_a_channel_span_and_ends_at_end_of_turn(
    gemma4_session, monkeypatch: pytest.MonkeyPatch
) -> None:
    tok = gemma4_session.tokenizer
    canvas = gemma4_session.info.canvas_length
    row = [
        tok.convert_tokens_to_ids("<|channel>"),
        *_ids(tok, " The boats rested"),
        tok.convert_tokens_to_ids("<channel|>"),
        *_ids(tok, " on the water"),
        tok.convert_tokens_to_ids("<turn|>"),
        *_ids(tok, " after the end"),
    ]
    row = (row + [0] * canvas)[:canvas]
    _scripted(monkeypatch, [row])
    result = gemma4_session.run(
        DraftRequest("In the morning", max_new_tokens=canvas, settings=DenoiseSettings(seed=0))
    )
    # The channel's inner text is the model's thought, not the draft: the whole span goes (it used to stay).
    assert result.text == " on the water"
    view = gemma4_session._view(
        torch.tensor([row]), torch.ones(1, canvas), 0, (), None
    )  # what a ghost step shows
    assert "".join(s.text for s in view) == " on the water"


def test_real_checkpoint_tokenizer_is_not_needed_for_the_tiny_layout(tiny_dir: Path) -> None:
    """The old tiny layout (markers as extra special tokens) still hides them."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    assert tok.convert_tokens_to_ids("<end_of_turn>") in hidden_ids(tok)


# Gemma 4's control grammar beyond the tiny layout's markers: tool calls and responses, the string delimiter,
# multimodal ids (`<|video|>` is added by the processor at run time WITHOUT the special flag), `<unusedN>`.
FULL_GRAMMAR_SPECIAL = [
    "<|tool_call>",
    "<tool_call|>",
    "<tool_response|>",
    "<|tool>",
    "<tool|>",
    '<|"|>',
    "<|image>",
    "<image|>",
    "<|image|>",
    "<|audio|>",
    "<unused0>",
    "<unused17>",
]


@pytest.fixture(scope="module")
def full_tok():
    from transformers import AddedToken

    tok = gemma4_style_tokenizer()
    tok.add_tokens([AddedToken(m, special=True, normalized=False) for m in FULL_GRAMMAR_SPECIAL])
    tok.add_tokens([AddedToken("<|video|>", special=False, normalized=False)])  # not flagged special
    return tok


def _row(tok, *parts: str) -> list[int]:
    """Ids of `parts`: a part that is a marker is its one id, any other part is tokenized text."""
    vocab = tok.get_vocab()
    out: list[int] = []
    for part in parts:
        out.extend([vocab[part]] if part in vocab and part.startswith(("<", "[")) else _ids(tok, part))
    return out


SCENARIOS = [
    # (canvas parts, what the writer may see)
    (
        ["<|channel>", "thought\nThe user wants a calm line.", "<channel|>", " The harbour was quiet."],
        " The harbour was quiet.",
    ),
    (
        [
            "Checking.",
            "<|tool_call>",
            "call:search{query:",
            '<|"|>',
            "boats",
            '<|"|>',
            "}",
            "<tool_call|>",
            " Done.",
        ],
        "Checking. Done.",
    ),
    (["response:search{found:3}", "<tool_response|>", " The boats rested."], " The boats rested."),
    (["<|tool>", "declaration:search{}", "<tool|>", " Quiet water."], " Quiet water."),
    ([" The wind came.", "<|turn>", "user\nNow rewrite it."], " The wind came."),  # a new turn, never closed
    (
        [" A", "<|video|>", " frame", "<|image>", "<|image|>", "<image|>", " and", "<|audio|>", " sound."],
        " A frame and sound.",
    ),
    ([" grey", "<unused0>", " water", "<unused17>", "."], " grey water."),
    ([" mid", "<|channel>", "thought\nstill thin"], " mid"),  # mid-denoising: an open span hides to the end
]


@pytest.mark.parametrize(("parts", "visible"), SCENARIOS)
def test_every_gemma4_control_grammar_is_hidden_as_a_whole_span(full_tok, parts, visible) -> None:
    from engine.display import TokenText

    text = TokenText(full_tok, stop_ids={full_tok.eos_token_id, full_tok.pad_token_id})
    ids = _row(full_tok, *parts)
    assert text.text(ids) == visible
    spans = text.spans(ids, [0.5] * len(ids))
    assert "".join(s.text for s in spans) == visible
    assert "<" not in visible and "thought" not in visible and "call:" not in visible


def test_an_open_span_never_hides_the_writers_pinned_text(full_tok) -> None:
    from engine.display import TokenText

    text = TokenText(full_tok, stop_ids={full_tok.eos_token_id, full_tok.pad_token_id})
    free = _row(full_tok, " The", "<|channel>", "thought\nhm")
    pinned_ids = _ids(full_tok, " and the boats rested.")
    ids = free + pinned_ids
    flags = [False] * len(free) + [True] * len(pinned_ids)
    spans = text.spans(ids, [1.0] * len(ids), flags)
    assert "".join(s.text for s in spans) == " The and the boats rested."


@pytest.mark.parametrize(
    "typed",
    [
        "<turn|>",
        "<|turn>model\n",
        "<|channel>",
        "<|video|>",
        "<unused0>",
        '<|"|>',
        "a<<turn|>b",
        "<|tool_call>call:x{}<tool_call|>",
    ],
)
def test_control_markers_typed_in_the_document_stay_text_in_the_prompt(full_tok, typed: str) -> None:
    from engine import prompts
    from engine.special_tokens import ControlGrammar

    message = f"Notes say {typed} here."
    ids = prompts.chat_ids(full_tok, message)
    reference = prompts.chat_ids(full_tok, "Notes say here.")
    grammar = ControlGrammar(full_tok)
    controls = [i for i in ids if grammar.kind(i) is not None or i in full_tok.all_special_ids]
    assert controls == [i for i in reference if grammar.kind(i) is not None or i in full_tok.all_special_ids]
    # and every character the writer typed reaches the model, as ordinary pieces
    assert message in full_tok.decode([i for i in ids if i not in controls])


def test_plain_documents_tokenize_exactly_as_the_template_does(full_tok) -> None:
    from engine import prompts

    message = "In the morning the harbour was quiet < and > | were typed too."
    expected = full_tok.apply_chat_template(
        [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=True
    )
    expected = expected["input_ids"] if hasattr(expected, "keys") else expected
    assert prompts.chat_ids(full_tok, message) == list(expected)
