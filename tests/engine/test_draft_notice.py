"""A draft's context notice says that the text after the cursor is not read (issue 27): the notice named what
was left out of the text before the cursor and was silent about the text after it, which a draft never
reads."""

from __future__ import annotations

from pathlib import Path

from engine.api import DraftRequest
from engine.prompts import DRAFT_AFTER_NOTE, build_prompt

DEMO = Path(__file__).resolve().parents[2] / "resources" / "models" / "letterpress-demo"


def test_a_trimmed_drafts_notice_says_the_text_after_the_cursor_is_not_read() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(DEMO)
    before = "The people went out into the field and gathered the grain. " * 60
    prompt = build_prompt(tok, DraftRequest(before=before, after="The rest of the page."), 200)
    assert prompt.notice and prompt.notice.endswith(DRAFT_AFTER_NOTE), prompt.notice
    alone = build_prompt(tok, DraftRequest(before=before), 200)
    assert alone.notice and DRAFT_AFTER_NOTE not in alone.notice
