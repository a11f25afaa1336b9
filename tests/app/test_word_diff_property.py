"""The word diff never splits a word (issue 27): over many random word-level edits of a sentence, cut into
spans at any character (as re-rolls around pins and the engine's tokens cut them), every styled run of the
diff starts and ends on a word boundary, a word is never half inserted and half kept, and the "−d +i words"
count is the number of whole words removed and added."""

from __future__ import annotations

import difflib
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from app.assist.diff_view import word_diff, word_diff_after
from engine.api import Span

WORDS = ["water", "a", "the", "river", "ran", "cold,", "and", "Ships.", "grey", "wat", "er", "sea"]


@st.composite
def rewrites(draw):
    """(original, new spans): a sentence, a word-level edit of it, the edit's text cut into spans anywhere."""
    original = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12))
    new: list[str] = []
    for word in original:
        op = draw(st.sampled_from(["keep", "keep", "replace", "delete", "insert", "glue"]))
        if op == "keep":
            new.append(word)
        elif op == "replace":
            new.append(draw(st.sampled_from(WORDS)))
        elif op == "insert":
            new += [word, draw(st.sampled_from(WORDS))]
        elif op == "glue":  # a pinned word with letters glued on ("water" -> "watera")
            new.append(word + draw(st.sampled_from(["a", "s", ","])))
    if not new:
        new = [draw(st.sampled_from(WORDS))]
    lead = draw(st.sampled_from(["", " "]))
    text = lead + " ".join(new) + draw(st.sampled_from(["", " "]))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=len(text)))))
    bounds = [0, *[c for c in cuts if 0 < c < len(text)], len(text)]
    pinned = draw(st.lists(st.booleans(), min_size=len(bounds), max_size=len(bounds)))
    spans = tuple(
        Span(text[a:b], 0.5 + 0.5 * (i % 2), pinned[i]) for i, (a, b) in enumerate(itertools.pairwise(bounds))
    )
    return " ".join(original), spans


def word_runs(diff):
    """Each non-deleted word of the diff's new text with the set of styles its characters are drawn in."""
    text, styles = "", []
    for span, style, src in zip(diff.spans, diff.styles, diff.sources, strict=True):
        if src < 0:
            continue
        text += span.text
        styles += [style] * len(span.text)
    words, pos = [], 0
    for word in text.split():
        start = text.index(word, pos)
        pos = start + len(word)
        words.append((word, set(styles[start:pos])))
    return text, words


def expected_counts(original: str, new_text: str) -> tuple[int, int]:
    a, b = original.split(), new_text.split()
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    deleted = sum(i2 - i1 for op, i1, i2, _j1, _j2 in ops if op in ("delete", "replace"))
    inserted = sum(j2 - j1 for op, _i1, _i2, j1, j2 in ops if op in ("insert", "replace"))
    return deleted, inserted


@settings(max_examples=400, deadline=None)
@given(rewrites())
def test_the_word_diff_never_splits_a_word_and_counts_whole_words(case):
    original, spans = case
    new_text = "".join(s.text for s in spans)
    diff = word_diff(original, spans)
    shown, words = word_runs(diff)
    assert shown == new_text, "the kept and inserted spans are the new text, unchanged"
    for word, styles in words:
        assert len(styles) == 1, f"“{word}” is drawn half in one style and half in another: {styles}"
    deleted_words = [
        s.text.strip() for s, st_ in zip(diff.spans, diff.styles, strict=True) if st_ == "deleted"
    ]
    assert all(w and " " not in w for w in deleted_words), deleted_words
    assert all(w in original.split() for w in deleted_words)
    inserted = sum(1 for _w, styles in words if styles == {"inserted"})
    assert (diff.deleted, diff.inserted) == expected_counts(original, new_text)
    assert (len(deleted_words), inserted) == (diff.deleted, diff.inserted), "the badge counts what is drawn"
    kept = [w for w, styles in words if styles == {""}]
    assert len(kept) == len(original.split()) - diff.deleted == len(new_text.split()) - diff.inserted
    for i, src in enumerate(diff.sources):  # a click on a drawn word maps back to a span of the suggestion
        assert src == -1 or diff.spans[i].text in spans[src].text
        assert src == -1 or diff.spans[i].pinned == spans[src].pinned


@settings(max_examples=200, deadline=None)
@given(rewrites(), st.integers(0, 6))
def test_the_diff_left_after_a_partial_accept_keeps_words_whole_too(case, taken):
    original, spans = case
    new_text = "".join(s.text for s in spans)
    words = new_text.split()
    taken = min(taken, len(words) - 1)
    if taken <= 0:
        return
    cut = 0
    for w in words[:taken]:
        cut = new_text.index(w, cut) + len(w)
    while cut < len(new_text) and new_text[cut] == " ":
        cut += 1
    accepted, rest = new_text[:cut], new_text[cut:]
    rest_spans = tuple(Span(w, 0.7) for w in rest.split(" ") for w in (w + " ",) if w.strip()) or (
        Span(rest, 0.7),
    )
    diff = word_diff_after(original, accepted, rest_spans)
    _shown, drawn = word_runs(diff)
    for word, styles in drawn:
        assert len(styles) == 1, (word, styles)
