"""Read the teacher's corpus (`engine.training.corpus_gen` chunks) into clean stories and checked rewrite
pairs.

Why filter here and not in the generator: the chunks keep the teacher's raw output, so they stay reproducible
bit for bit; what counts as usable can change without regenerating anything. A story is kept when it is plain
English prose of at least three whole sentences (the cut-off last sentence of a long answer is dropped, and so
is a text that repeats itself); a rewrite pair is kept when its target really is the preset: shorter is
shorter, longer is longer, the others stay within 0.5-1.8x the words, and nothing is an echo of the teacher's
prompt. Held-out items (`recipes.is_held_out`) go to the held-out corpus, never into training.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.training.corpus import sentences
from engine.training.corpus_gen import read_chunk
from engine.training.recipes import clean_output

LENGTH_BOUNDS = {"shorter": (0.3, 0.9), "longer": (1.15, 2.0)}
DEFAULT_BOUNDS = (0.5, 1.8)
_REFUSAL = re.compile(
    r"\b(as an ai|i'm sorry|i cannot|i can't help|language model|here is|here's|rewritten)\b", re.IGNORECASE
)
_PREAMBLE = re.compile(r"^(sure[,!.]?|certainly[,!.]?|okay[,!.]?)\s*", re.IGNORECASE)
_ODD = re.compile(r"[^A-Za-z0-9 .,;:!?'\"()\-]")


@dataclass(frozen=True)
class Story:
    index: int
    text: str
    register: str


@dataclass(frozen=True)
class RewritePair:
    index: int
    preset: str
    source: str
    target: str
    story: str  # the cleaned story the span came from (for context before/after)


@dataclass
class StoryCorpus:
    stories: list[Story] = field(default_factory=list)
    rewrites: list[RewritePair] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)

    def texts(self) -> list[str]:
        return [s.text for s in self.stories] + [r.target for r in self.rewrites]


def clean_story(raw: str) -> str | None:
    """The story as whole sentences of plain prose, or None when it is not usable."""
    text = _PREAMBLE.sub("", clean_output(raw))
    sents = sentences(text)
    if sents and not re.search(r"[.!?][\"')]?$", sents[-1]):
        sents = sents[:-1]  # the answer hit the token limit mid-sentence
    if len(sents) < 3 or sum(len(s.split()) for s in sents) < 30:
        return None
    if len(set(sents)) < len(sents) * 0.8:  # the teacher looped
        return None
    text = " ".join(sents)
    if len(_ODD.findall(text)) > len(text) * 0.01 or _REFUSAL.search(text):
        return None
    return text


def clean_rewrite(raw: str, source: str, preset: str) -> str | None:
    text = _PREAMBLE.sub("", clean_output(raw))
    text = re.sub(r"^(text|rewritten text|new version)\s*:\s*", "", text, flags=re.IGNORECASE).strip()
    if not text or _REFUSAL.search(text) or "Text:" in text or len(_ODD.findall(text)) > len(text) * 0.01:
        return None
    sents = sentences(text)
    if len(sents) > 1 and not re.search(r"[.!?][\"')]?$", sents[-1]):
        text = " ".join(sents[:-1])
    if not re.search(r"[.!?][\"')]?$", text):
        return None
    ratio = len(text.split()) / max(1, len(source.split()))
    lo, hi = LENGTH_BOUNDS.get(preset, DEFAULT_BOUNDS)
    if not lo <= ratio <= hi or text.strip() == source.strip():
        return None
    return text


def chunk_files(dirs: list[Path]) -> list[Path]:
    return sorted(p for d in dirs for p in d.glob("chunk-*.jsonl.gz"))


def load(dirs: list[Path], limit_chunks: int | None = None) -> tuple[StoryCorpus, StoryCorpus]:
    """(train, held_out) from every chunk in `dirs` (the first `limit_chunks` of each, when given)."""
    train, held = StoryCorpus(), StoryCorpus()
    for d in dirs:
        files = chunk_files([d])[: limit_chunks if limit_chunks is not None else None]
        for path in files:
            stories: dict[int, str] = {}
            for rec in read_chunk(path):
                part = held if rec["held_out"] else train
                if rec["kind"] == "text":
                    text = clean_story(rec["output"])
                    if text is None:
                        part.dropped["story"] += 1
                        continue
                    stories[rec["index"]] = text
                    part.stories.append(Story(rec["index"], text, rec["recipe"]["register"]))
                else:
                    target = clean_rewrite(rec["output"], rec["span"], rec["preset"])
                    story = stories.get(rec["index"])
                    if target is None or story is None or rec["span"] not in story:
                        part.dropped[f"rewrite:{rec['preset']}"] += 1
                        continue
                    part.rewrites.append(RewritePair(rec["index"], rec["preset"], rec["span"], target, story))
    return train, held
