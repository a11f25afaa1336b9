"""The demo model's corpus: the World English Bible (public domain), as Debian's `sword-text-web` ships it.

Why this text: it is the largest modern-English prose that the project's package registries carry under a
licence that allows redistributing a model trained on it ("The World English Bible is in the Public Domain",
see /usr/share/doc/sword-text-web/copyright). `diatheke` (Debian package `diatheke`) exports it as plain text.

Chapters are the unit of the train/held-out split (every `HELD_OUT_EVERY`-th chapter is held out), so held-out
prompts are passages the model never saw. Tests and CI never need the package: `sample_passages()` is built
in.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MODULE = "engWEB2015eb"
PACKAGES = ("sword-text-web", "diatheke")
SOURCE = "World English Bible (2015 edition with Deuterocanon), Debian package sword-text-web, via diatheke"
LICENCE = (
    'Public domain. "The World English Bible is in the Public Domain. That means that it is not '
    'copyrighted." (eBible.org, quoted in /usr/share/doc/sword-text-web/copyright). '
    '"World English Bible" is a trademark of '
    "eBible.org; this model's outputs are not the World English Bible."
)
HELD_OUT_EVERY = 20
_VERSE = re.compile(
    r"^\s*(?P<book>(?:I{1,3}V? )?[A-Z][A-Za-z ]*?) (?P<chapter>\d+):(?P<verse>\d+): (?P<text>.*)$"
)
_NOTE = re.compile(r"\[[^\[\]]*\]")


class CorpusUnavailableError(RuntimeError):
    """The corpus package is not installed; say how to install it."""


@dataclass(frozen=True)
class Chapter:
    book: str
    number: int
    text: str


def export_text() -> str:
    """The whole text as diatheke prints it (one verse a line, footnotes in brackets)."""
    if shutil.which("diatheke") is None:
        raise CorpusUnavailableError(
            "The training corpus needs Debian's packages: apt-get install -y " + " ".join(PACKAGES)
        )
    result = subprocess.run(
        ["diatheke", "-b", MODULE, "-o", "f", "-f", "plain", "-k", "Genesis 1:1-Revelation 22:21"],
        capture_output=True,
        text=True,
        check=True,
    )
    if len(result.stdout) < 1_000_000:
        raise CorpusUnavailableError(f"diatheke returned too little text; is {PACKAGES[0]} installed?")
    return result.stdout


def parse_chapters(raw: str) -> list[Chapter]:
    """Group verse lines into chapters of running prose: footnotes, verse numbers and line breaks removed."""
    chapters: list[Chapter] = []
    key: tuple[str, int] | None = None
    parts: list[str] = []
    for line in raw.splitlines():
        match = _VERSE.match(line)
        if match:
            new_key = (match["book"].strip(), int(match["chapter"]))
            if new_key != key:
                if key is not None and parts:
                    chapters.append(Chapter(key[0], key[1], _dedupe(clean(" ".join(parts)))))
                key, parts = new_key, []
            parts.append(match["text"])
        elif key is not None and line.strip() and not line.startswith("("):
            parts.append(line)
    if key is not None and parts:
        chapters.append(Chapter(key[0], key[1], _dedupe(clean(" ".join(parts)))))
    return [c for c in chapters if len(c.text) > 200]


def clean(text: str) -> str:
    """Drop footnotes and stray markup, normalise quotes and whitespace (so the tokenizer sees plain
    prose)."""
    previous = None
    while previous != text:
        previous, text = text, _NOTE.sub(" ", text)
    text = text.replace("[", " ").replace("]", " ")
    table: dict[str, str | int | None] = {"“": '"', "”": '"', "‘": "'", "’": "'", "—": " - ", "\u00a0": " "}
    text = text.translate(str.maketrans(table))
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r" ([,.;:!?])", r"\1", text)
    return text


def _dedupe(text: str) -> str:
    """Keep the first copy of a repeated sentence (the export repeats psalm headings on every verse)."""
    seen: set[str] = set()
    kept = []
    for sentence in sentences(text):
        if len(sentence) < 60 and sentence in seen:
            continue
        seen.add(sentence)
        kept.append(sentence)
    return " ".join(kept)


def split(chapters: list[Chapter]) -> tuple[list[Chapter], list[Chapter]]:
    """(train, held_out): every HELD_OUT_EVERY-th chapter is held out, deterministically."""
    train = [c for i, c in enumerate(chapters) if i % HELD_OUT_EVERY != HELD_OUT_EVERY // 2]
    held = [c for i, c in enumerate(chapters) if i % HELD_OUT_EVERY == HELD_OUT_EVERY // 2]
    return train, held


def load_chapters(cache: Path | None = None) -> list[Chapter]:
    """Export and parse the corpus (the raw export is cached in `cache` when given)."""
    if cache is not None and cache.is_file():
        raw = cache.read_text(encoding="utf-8")
    else:
        raw = export_text()
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(raw, encoding="utf-8")
    return parse_chapters(raw)


def sample_passages() -> list[Chapter]:
    """A built-in stand-in corpus (a few paragraphs of plain prose) so tests never need the Debian package."""
    paragraphs = [
        "The morning was cold and clear. The farmer went out to the field and looked at the long rows of "
        "wheat. He knew that the harvest would come soon, and "
        "he was glad. His sons followed him with their tools.",
        "When the rain came, the river rose over its banks. The people of the town carried their goods to "
        "the hill. They waited there for three days until "
        "the water went down again, and then they came home.",
        "A good letter says what it means in a few plain words. Write the first sentence last, when you know "
        "what the letter is about. Read it aloud before you send it, and cut every word you do not need.",
        "The king called his servants and said to them, go into the city and find the man who built the "
        "wall. They searched every street and every house, but "
        "they could not find him, so they returned to the king.",
    ]
    return [
        Chapter("Sample", i + 1, " ".join(paragraphs[i:] + paragraphs[:i])) for i in range(len(paragraphs))
    ]


def sentences(text: str) -> list[str]:
    """Split prose into sentences (good enough for building examples; not a linguistic tool)."""
    pieces = re.split(r'(?:(?<=[.!?])|(?<=[.!?]["\'])) (?=["\']?[A-Z])', text)
    return [p.strip() for p in pieces if p.strip()]
