"""Line endings: each line keeps the ending it had on disk, also after edits scattered over a long
document."""

from __future__ import annotations

import random

from app.documents.line_endings import dominant, normalise, restore_endings, split_lines


def _endings(raw: str) -> list[str]:
    return split_lines(raw)[1]


def _mixed(n: int) -> str:
    rng = random.Random(7)
    parts = []
    for i in range(n):
        parts.append(f"line {i} words" if i % 5 else "")  # repeated blank lines are not unique anchors
        parts.append(rng.choice(["\r\n", "\r\n", "\n", "\r", "\u2029"]))
    return "".join(parts)


def test_no_edit_gives_back_the_original_exactly():
    raw = _mixed(2000)
    assert restore_endings(normalise(raw), raw, "\r\n") == raw


def test_replace_all_over_a_long_document_keeps_every_line_s_ending():
    raw = _mixed(40_000)
    text = normalise(raw).replace("words", "phrases")  # every non-blank line edited in place
    out = restore_endings(text, raw, dominant(_endings(raw)))
    assert normalise(out) == text and _endings(out) == _endings(raw)


def test_inserted_and_deleted_lines_far_apart_leave_the_other_endings_alone():
    raw = _mixed(20_000)
    lines = normalise(raw).split("\n")
    old_endings = _endings(raw)
    del lines[15_000]
    del old_endings[15_000]
    lines.insert(100, "a new line")
    out = restore_endings("\n".join(lines), raw, "\r\n")
    endings = _endings(out)
    assert endings[100] == "\r\n"
    assert endings[:100] + endings[101:] == old_endings


def test_dominant_ending():
    assert dominant([]) == "\n"
    assert dominant(["\r\n", "\n", "\r\n"]) == "\r\n"
    assert dominant(["\r", "\n"]) == "\n"  # a tie goes to LF
