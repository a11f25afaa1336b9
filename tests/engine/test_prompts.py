"""Token budgeting of the whole document (issue 17): what is kept, what is trimmed first, and the brief."""

from __future__ import annotations

import pytest
import torch

from engine import prompts
from engine.api import DraftRequest, InfillRequest, PromptTooLongError, RewriteRequest
from engine.prefix_cache import lcp
from engine.tools.tiny import SAMPLE_TEXT, train_tokenizer


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(SAMPLE_TEXT)


def _doc(paragraphs: int) -> str:
    return "".join(f"Paragraph {i}. {SAMPLE_TEXT[i % len(SAMPLE_TEXT)]}\n" for i in range(paragraphs))


def _text(tok, prompt: prompts.Prompt) -> str:
    return tok.decode(prompt.ids)


def test_a_document_within_the_budget_is_sent_whole(tok) -> None:
    doc = _doc(20)
    p = prompts.build_prompt(tok, DraftRequest(before=doc), 4000)
    assert not p.notice
    assert p.ids == prompts.chat_ids(tok, prompts.draft_message(doc))


def test_a_long_document_keeps_its_beginning_and_the_text_near_the_cursor(tok) -> None:
    doc = _doc(3000)
    p = prompts.build_prompt(tok, DraftRequest(before=doc), 1000)
    text = _text(tok, p)
    assert len(p.ids) <= 1000
    assert "Paragraph 0." in text  # the document's beginning (title, introduction) stays
    assert "Paragraph 2999." in text  # so does the text just before the cursor
    assert "Paragraph 1500." not in text  # the middle, farthest from both, went first
    assert text.index("Paragraph 0.") < text.index(prompts.TRIM_MARK) < text.index("Paragraph 2999.")
    assert "longer than the model can read" in p.notice and "left out" in p.notice  # the writer is told
    assert len(p.ids) > 900  # the budget is used, not a fixed share of it


def test_typing_at_the_cursor_keeps_the_prompt_prefix_stable(tok) -> None:
    """The cut sits on a fixed grid: a few more words at the cursor change only the prompt's end, so the
    encoder cache of the earlier prompt is reused for almost all of it."""
    doc = _doc(3000)
    first = prompts.build_prompt(tok, DraftRequest(before=doc), 1000)
    shared = []
    for extra in ("The", "The writer", "The writer typed a few more words here"):
        later = prompts.build_prompt(tok, DraftRequest(before=doc + extra), 1000)
        assert len(later.ids) <= 1000
        shared.append(lcp(torch.tensor(first.ids), torch.tensor(later.ids)) / len(first.ids))
    assert min(shared) > 0.9, shared


def test_rewrite_context_is_trimmed_from_the_far_ends_on_both_sides(tok) -> None:
    doc = _doc(3000)
    mid = doc.index("Paragraph 1500.")
    request = RewriteRequest(
        selection="The quick fox.", instruction="Make it shorter.", before=doc[:mid], after=doc[mid:]
    )
    p = prompts.build_prompt(tok, request, 800)
    text = _text(tok, p)
    assert len(p.ids) <= 800
    assert "The quick fox." in text and "Make it shorter." in text  # never trimmed
    assert "Paragraph 1499." in text and "Paragraph 1500." in text  # right around the selection
    assert "Paragraph 2999." not in text  # the after side's far end went
    assert "Paragraph 700." not in text
    assert "after it" in p.notice


def test_the_brief_is_in_every_prompt_and_never_trimmed(tok) -> None:
    brief = "Audience: children aged eight. The captain is called Mara."
    doc = _doc(3000)
    for request in (
        DraftRequest(before=doc, brief=brief),
        RewriteRequest(selection="It was late.", instruction="Shorter.", before=doc, brief=brief),
        InfillRequest(before=doc, after=" The end.", brief=brief),
    ):
        p = prompts.build_prompt(tok, request, 700)
        text = _text(tok, p)
        assert len(p.ids) <= 700
        assert prompts.BRIEF_HEADER in text and "The captain is called Mara." in text
        assert text.index("Mara.") < text.index("Paragraph")  # the stable part first
    assert prompts.BRIEF_HEADER not in _text(tok, prompts.build_prompt(tok, DraftRequest(before="Hi."), 700))


def test_a_brief_too_long_for_the_model_says_so(tok) -> None:
    with pytest.raises(PromptTooLongError) as err:
        prompts.build_prompt(tok, DraftRequest(before="Hello.", brief="word " * 2000), 500)
    assert "brief" in err.value.message
