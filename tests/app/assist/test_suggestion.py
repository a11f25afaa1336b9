"""The join rules on their own: what the region holds for an accepted suggestion between the writer's text."""

from __future__ import annotations

import pytest

from app.assist.suggestion import join, needs_space, units


def region(left_text: str, text: str, right_text: str, original: str = "", complete: bool = True) -> str:
    """The document after the region between `left_text` and `right_text` is given `text`."""
    joined = join(left_text[-1:], text, right_text[:1], original=original, complete=complete)
    return left_text + joined.text + right_text


@pytest.mark.parametrize(
    ("left", "text", "right", "original", "expected"),
    [
        # a space after a space is dropped at the start
        ("morning. ", " another day began.", "", "", "morning. another day began."),
        # a word right after a word gets a space
        ("Hello", "world", "", "", "Hello world"),
        ("night.", "She slept.", "", "", "night. She slept."),
        # a leading space after punctuation is kept as the separator
        ("Start:", " alpha", "", "", "Start: alpha"),
        # no trailing space before a newline, none doubled before a space
        ("A", " b ", "\nNext", "", "A b\nNext"),
        ("A", " b ", " next", "", "A b next"),
        # a word glued to the following word gets a space
        ("left ", "MIDDLE", "right", "[old] ", "left MIDDLE right"),
        # the selection ended a paragraph: the paragraph break stays though the rewrite dropped it
        ("One.", " Two, rewritten.", "Three.", " Two.\n\n", "One. Two, rewritten.\n\nThree."),
        # the selection began with a paragraph break
        ("One.", " Two again.", "", "\n\nTwo.", "One.\n\nTwo again."),
        # CJK: no spaces invented between ideographs
        ("海", "바다", "", "", "海바다"),
        # the start of the document has no leading space
        ("", " First words.", "", "", "First words."),
    ],
)
def test_joins_read_like_a_person_wrote_them(left, text, right, original, expected):
    assert region(left, text, right, original) == expected


def test_partial_join_separates_from_the_following_word_and_keeps_the_paragraph_break():
    joined = join("t", " alpha", "r", complete=False)
    assert (joined.lead, joined.core, joined.trail) == (" ", "alpha", " ")
    joined = join(".", " She", "N", original=" He counted.\n\n", complete=False)
    assert joined.core == "She" and joined.trail == "\n\n"


def test_needs_space_and_units():
    assert needs_space("a", "b") and needs_space(".", "S") and not needs_space("(", "a")
    assert not needs_space("a", ",") and not needs_space("海", "a") and not needs_space("a", "")
    assert units("a👋🏽b") == 1 + 2 + 2 + 1
