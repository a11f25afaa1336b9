"""The pure parts of issue 16's editing: the word diff, pin ranges, the pin set, strength memory."""

from __future__ import annotations

from app.assist.diff_view import word_diff
from app.assist.pins import PinSet, confident, pin_ranges, reroll_request
from app.assist.strength import CUSTOM, StrengthMemory
from engine.api import REWRITE_PRESETS, DraftRequest, RewriteRequest, Span


def spans_of(text: str, trailing: bool = True) -> tuple[Span, ...]:
    import re

    parts = re.findall(r"\S+\s*", text) if trailing else re.findall(r"\s*\S+", text)
    return tuple(Span(p, 0.9) for p in parts)


def test_word_diff_marks_deleted_and_inserted_words_and_keeps_the_rest():
    for trailing in (True, False):  # the real engine's words end with their space, the fake's start with it
        new = spans_of("the cat sat down on a mat", trailing)
        diff = word_diff("the cat sat on the mat", new)
        merged = "".join(s.text for s in diff.spans)
        assert [s.text.strip() for s, st in zip(diff.spans, diff.styles, strict=True) if st == "deleted"] == [
            "the"
        ]
        assert [
            s.text.strip() for s, st in zip(diff.spans, diff.styles, strict=True) if st == "inserted"
        ] == ["down", "a"]
        assert (diff.deleted, diff.inserted) == (1, 2)
        assert "  " not in merged.strip() and all(w for w in merged.split(" ") if w), merged
        kept = [diff.spans[i] for i, src in enumerate(diff.sources) if src >= 0]
        assert "".join(s.text for s in kept) == "".join(s.text for s in new)


def test_pin_ranges_cover_each_word_with_the_space_before_it():
    spans = (Span("The ", 1), Span("quick ", 1), Span("brown ", 1), Span("fox.", 1))
    text = "".join(s.text for s in spans)
    ranges = pin_ranges(spans, [1, 3])
    assert [text[s:e] for s, e in ranges] == [" quick", " fox."]
    assert pin_ranges(spans, [0, 1]) == ((0, 9),), "neighbours merge into one pinned run"
    lead = (Span(" The", 1), Span(" fox", 1))
    assert ["".join(s.text for s in lead)[s:e] for s, e in pin_ranges(lead, [1])] == [" fox"]


def test_pin_set_follows_the_text_and_extends_and_shrinks():
    spans = (Span("a ", 0.9, True), Span("b ", 0.3), Span("c ", 0.95), Span("d", 0.2))
    pins = PinSet()
    assert pins.sync(1, spans) == {0}, "the engine's pinned spans start pinned"
    pins.toggle(2)
    assert pins.sync(1, spans) == {0, 2}, "same text: pins kept"
    assert pins.extend(spans) == 3 and pins.shrink() == 3
    assert pins.sync(2, spans) == {0}, "another suggestion: pins reset"
    assert confident(spans, 0.8) == {0, 2}


def test_reroll_request_pins_the_words_and_noises_the_rest():
    spans = (Span("Old ", 0.9), Span("Marta ", 0.4), Span("waited.", 0.95))
    draft = DraftRequest(before="x")
    again = reroll_request(draft, spans, {0, 2})
    assert again.request_id != draft.request_id and again.canvas.noise == 1.0
    assert [again.canvas.text[s:e] for s, e in again.canvas.pins] == ["Old", " waited."]
    rewrite = RewriteRequest(selection="y", instruction="z", strength=0.3)
    assert reroll_request(rewrite, spans, {1}).warm_start().pins == ((3, 9),)


def test_a_reroll_starts_from_the_shown_tokens_and_keeps_the_start():
    """Issue 34 case 7: the canvas is the shown suggestion as it was: its own token ids (re-tokenizing its
    text moved every later pin), its start joined as it was (a rewrite that began "The" came back " The")."""
    spans = (
        Span(" Old ", 0.9, ids=(7, 8)),
        Span("Marta ", 0.4, ids=(9,)),
        Span("waited.", 0.95, ids=(10, 11)),
    )
    warm = reroll_request(DraftRequest(before="x"), spans, {1}).canvas
    assert warm.ids == (7, 8, 9, 10, 11) and warm.keep_lead and warm.text == " Old Marta waited."
    assert not reroll_request(DraftRequest(before="x"), (Span("a ", 0.9), Span("b", 0.2)), {0}).canvas.ids


def test_a_kept_last_word_keeps_the_whitespace_after_it():
    """The end is pinned with the whitespace the shown text ended with (it was cut off: a rewrite whose
    selection ended its paragraph lost the line break on re-roll)."""
    spans = (Span("Old ", 0.9), Span("Marta ", 0.4), Span("waited.\n", 0.95))
    warm = reroll_request(RewriteRequest(selection="y", instruction="z"), spans, {2}).canvas
    assert warm.text == "Old Marta waited.\n" and warm.pin_end
    assert [warm.text[s:e] for s, e in warm.pins] == [" waited.\n"]


def test_strength_memory_defaults_light_for_grammar_and_full_for_free_rewrites():
    memory = StrengthMemory(None, dict(REWRITE_PRESETS))
    assert memory.key_for(REWRITE_PRESETS["grammar"]) == "grammar" and memory.get("grammar") == 0.2
    assert (
        memory.get("freely") == 1.0 and memory.key_for("my own words") == CUSTOM and memory.get(CUSTOM) == 1.0
    )
    memory.set("grammar", 0.04)
    assert memory.get("grammar") == 0.1, "clamped to the dial's range"
