"""What a model's answer becomes before it reaches the document: greetings, labels and notes dropped, the
rewrite held to its length window without cutting a sentence in the middle, an infill joined to both sides."""

from __future__ import annotations

from engine.remote import text_answers as ta
from engine.remote.text_prompts import word_window


def test_greetings_labels_quotes_and_trailing_notes_are_dropped():
    answer = 'Sure! Here is the revised text:\n\n"The harbour woke slowly."\n\nNote: I made it shorter.'
    assert ta.clean(answer, "The harbour was waking up slowly.") == "The harbour woke slowly."
    assert ta.clean("Rewritten text: The sea was calm.", "x") == "The sea was calm."
    assert ta.clean('"Quoted," she said.', '"Quoted," she said.') == '"Quoted," she said.'  # it was quoted


def test_a_rewrite_keeps_the_selections_own_surrounding_whitespace():
    assert ta.rewrite_text("The sea was calm.", "  the sea is calm \n", None) == "  The sea was calm. \n"


def test_the_window_follows_the_local_engines_factors():
    selection = " ".join(["word"] * 20)
    shorter, same, longer = (word_window(selection, i) for i in ("Make it shorter.", "Formal.", "Longer."))
    assert shorter.high < 20 < longer.low and same.low <= 20 <= same.high
    assert max(w.high for w in (shorter, same, longer)) <= 40  # never past twice the selection


def test_a_long_rewrite_is_cut_at_a_sentence_end_and_never_mid_sentence_within_twice_the_selection():
    selection = "one two three four five six"
    words = word_window(selection, "Formal.")
    two = "Alpha beta gamma delta epsilon. Zeta eta theta iota kappa lambda mu."
    assert ta.rewrite_text(two, selection, words) == "Alpha beta gamma delta epsilon."
    no_end = "alpha beta gamma delta epsilon zeta eta theta"  # 8 words, no sentence end: kept whole
    assert ta.rewrite_text(no_end, selection, words) == no_end
    runaway = " ".join(["word"] * 30)
    assert len(ta.rewrite_text(runaway, selection, words).split()) == 12  # cut at twice the selection


def test_an_infill_drops_the_repeated_ending_and_the_repeated_start():
    assert ta.infill_text("over the lazy dog.", "The fox jumped", "dog.") == " over the lazy "
    joined = ta.infill_text(
        "The storm broke at midnight, and rain fell. By morning the",
        "The storm broke at midnight.",
        " By morning the harbour was calm.",
    )
    assert joined == " and rain fell."
    assert (
        ta.infill_text("The storm broke at midnight.", "The storm broke at midnight. ", " By morning.") == ""
    )


def test_a_draft_joins_the_text_before_it_with_one_space():
    assert ta.draft_text(" and then", "It rained", cleaned=False) == " and then"
    assert ta.draft_text("and then", "It rained", cleaned=False) == " and then"
    assert ta.draft_text(" and then", "It rained ", cleaned=False) == "and then"
