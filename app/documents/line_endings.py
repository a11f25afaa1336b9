"""Line endings kept exactly: every line of a document remembers the ending it had on disk.

The editor only knows one kind of line break ("\\n"), but files have four: LF, CRLF, a lone CR (old Mac files,
or one stray CR in an LF file) and U+2029 PARAGRAPH SEPARATOR (Qt turns each of them into a new block).
`split_lines` records which ending each line had; `restore_endings` puts them back when the document is saved:

- text that was not edited comes back byte for byte (mixed endings too);
- after an edit, lines the writer did not touch (matched patience-style: common head and tail, lines unique on
  both sides as anchors, difflib inside small gaps; near-linear even for a replace-all over 200 MB) keep their
  own ending, a line edited in place keeps its ending, and new lines take the file's dominant ending.

U+2028 LINE SEPARATOR, VT and FF are characters inside a line (the editor keeps them), not endings.
"""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher

ENDINGS = ("\n", "\r\n", "\r", "\u2029")  # order breaks ties in `dominant`
_SEPARATOR = re.compile("\r\n|\r|\n|\u2029")
# Gaps between anchors up to this many line pairs are matched by difflib (quadratic, so only small ones).
SMALL_GAP_PAIRS = 250_000


def split_lines(raw: str) -> tuple[list[str], list[str]]:
    """(lines, endings): `len(endings) == len(lines) - 1`; the last line has no ending (it may be "")."""
    return _SEPARATOR.split(raw), _SEPARATOR.findall(raw)


def normalise(raw: str) -> str:
    """The text as the editor holds it: every ending becomes "\\n"."""
    return _SEPARATOR.sub("\n", raw)


def dominant(endings: list[str]) -> str:
    """The most common ending ("\\n" for a file without any)."""
    if not endings:
        return "\n"
    counts = Counter(endings)
    return max(ENDINGS, key=lambda e: (counts.get(e, 0), -ENDINGS.index(e)))


def restore_endings(text: str, original: str | None, default: str) -> str:
    """`text` (lines separated by "\\n") with the endings it had in `original` (as read from disk); lines that
    are new take `default`. Without an original every line takes `default`."""
    if original is None:
        return text.replace("\n", default) if default != "\n" else text
    if normalise(original) == text:
        return original
    old, old_endings = split_lines(original)
    new = text.split("\n")
    source = _match_lines(old, new)
    out: list[str] = []
    last = len(new) - 1
    for i, line in enumerate(new):
        out.append(line)
        if i < last:
            j = source[i]
            out.append(old_endings[j] if j is not None and j < len(old_endings) else default)
    return "".join(out)


def _match_lines(old: list[str], new: list[str]) -> list[int | None]:
    """For each new line, the old line it continues (None: a new line)."""
    source: list[int | None] = [None] * len(new)
    _match_range(old, new, 0, len(old), 0, len(new), source)
    return source


def _match_range(
    old: list[str],
    new: list[str],
    a0: int,
    a1: int,
    b0: int,
    b1: int,
    source: list[int | None],
    depth: int = 0,
) -> None:
    """Patience-style matching: common head and tail, then lines that occur once on both sides as anchors
    (their longest increasing run), recursing into the gaps; small gaps go to difflib. Near-linear, so edits
    scattered over a whole long document (replace all) still leave every untouched line its ending."""
    while a0 < a1 and b0 < b1 and old[a0] == new[b0]:
        source[b0] = a0
        a0, b0 = a0 + 1, b0 + 1
    while a0 < a1 and b0 < b1 and old[a1 - 1] == new[b1 - 1]:
        source[b1 - 1] = a1 - 1
        a1, b1 = a1 - 1, b1 - 1
    if a0 == a1 or b0 == b1:
        return
    if (a1 - a0) * (b1 - b0) <= SMALL_GAP_PAIRS:
        matcher = SequenceMatcher(None, old[a0:a1], new[b0:b1], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag in ("equal", "replace"):  # a line edited in place keeps its ending too
                for k in range(min(i2 - i1, j2 - j1)):
                    source[b0 + j1 + k] = a0 + i1 + k
        return
    anchors = _unique_anchors(old, new, a0, a1, b0, b1) if depth < 40 else []
    if not anchors:
        if a1 - a0 == b1 - b0:  # as many lines as before: edited in place, line by line
            for k in range(a1 - a0):
                source[b0 + k] = a0 + k
        return
    pi, pj = a0 - 1, b0 - 1
    for i, j in [*anchors, (a1, b1)]:
        if i < a1:
            source[j] = i
        _match_range(old, new, pi + 1, i, pj + 1, j, source, depth + 1)
        pi, pj = i, j


def _unique_anchors(
    old: list[str], new: list[str], a0: int, a1: int, b0: int, b1: int
) -> list[tuple[int, int]]:
    """Pairs (i, j) of lines that occur exactly once in old[a0:a1] and in new[b0:b1], longest run increasing
    in both (patience sorting, O(k log k))."""
    count_a = Counter(old[a0:a1])
    count_b = Counter(new[b0:b1])
    where_b = {new[j]: j for j in range(b0, b1) if count_b[new[j]] == 1}
    pairs = [(i, where_b[old[i]]) for i in range(a0, a1) if count_a[old[i]] == 1 and old[i] in where_b]
    tails: list[int] = []  # index into pairs of the smallest tail of each run length
    back: list[int] = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pos = _bisect_tails(pairs, tails, j)
        if pos > 0:
            back[k] = tails[pos - 1]
        if pos == len(tails):
            tails.append(k)
        else:
            tails[pos] = k
    run: list[tuple[int, int]] = []
    k = tails[-1] if tails else -1
    while k != -1:
        run.append(pairs[k])
        k = back[k]
    return run[::-1]


def _bisect_tails(pairs: list[tuple[int, int]], tails: list[int], j: int) -> int:
    lo, hi = 0, len(tails)
    while lo < hi:
        mid = (lo + hi) // 2
        if pairs[tails[mid]][1] < j:
            lo = mid + 1
        else:
            hi = mid
    return lo
