"""Line endings kept exactly: every line of a document remembers the ending it had on disk.

The editor only knows one kind of line break ("\\n"), but files have four: LF, CRLF, a lone CR (old Mac files,
or one stray CR in an LF file) and U+2029 PARAGRAPH SEPARATOR (Qt turns each of them into a new block).
`split_lines` records which ending each line had; `restore_endings` puts them back when the document is saved:

- text that was not edited comes back byte for byte (mixed endings too);
- after an edit, lines the writer did not touch (matched line by line with difflib, after stripping the common
  head and tail so a 200 MB document with a one-line edit costs one linear pass) keep their own ending, a line
  edited in place keeps its ending, and new lines take the file's dominant ending.

U+2028 LINE SEPARATOR, VT and FF are characters inside a line (the editor keeps them), not endings.
"""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher

ENDINGS = ("\n", "\r\n", "\r", "\u2029")  # order breaks ties in `dominant`
_SEPARATOR = re.compile("\r\n|\r|\n|\u2029")
# Above this many line pairs the middle of an edit is not matched line by line (difflib is quadratic there);
# its lines then take the dominant ending, everything before and after the edit still keeps its own.
MAX_MATCH_PAIRS = 4_000_000


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
    head = 0
    limit = min(len(old), len(new))
    while head < limit and old[head] == new[head]:
        source[head] = head
        head += 1
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        source[len(new) - 1 - tail] = len(old) - 1 - tail
        tail += 1
    a, b = old[head:len(old) - tail], new[head:len(new) - tail]
    if a and b and len(a) * len(b) <= MAX_MATCH_PAIRS:
        for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag in ("equal", "replace"):  # a line edited in place keeps its ending too
                for k in range(min(i2 - i1, j2 - j1)):
                    source[head + j1 + k] = head + i1 + k
    return source
