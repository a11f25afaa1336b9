"""Training examples from the teacher's corpus, in exactly the formats `engine.prompts` sends.

Same canvases as `engine.training.examples` (one user turn, the model turn cut into block-aligned canvases,
`<end_of_turn>` then pads), different sources:
- draft:   a story's first sentences (or words) -> its next two to five sentences;
- rewrite: the teacher's checked rewrite of a span for shorter / longer / formal / casual / simplify / freely
           (`story_corpus.clean_rewrite`), with the story around the span as context half of the time; Fix
           grammar is made here: the span with injected typos -> the span, and in `GRAMMAR_IDENTITY` of the
           cases the span is already correct and comes back unchanged (a writer's correct sentence must
           survive Fix grammar); a preset the teacher has no pair for yet falls back to `examples`' mechanical
           targets;
- infill:  the story before a gap -> the missing sentence(s) then the text after the gap, pinned (frozen).
"""

from __future__ import annotations

import random
from typing import Any

from engine.api import REWRITE_PRESETS
from engine.prompts import draft_message, infill_message, rewrite_message
from engine.training.corpus import sentences
from engine.training.examples import (
    Example,
    Turn,
    _contract,
    _expand,
    _simplify,
    _typos,
    turn_to_examples,
)
from engine.training.story_corpus import StoryCorpus

TASK_WEIGHTS = {"draft": 0.5, "rewrite": 0.3, "infill": 0.2}
GRAMMAR_SHARE = 0.25  # of rewrites
GRAMMAR_IDENTITY = 0.4  # of grammar examples: already correct, returned as it is


def pick_task(rng: random.Random) -> str:
    return rng.choices(list(TASK_WEIGHTS), weights=list(TASK_WEIGHTS.values()))[0]


def _draft(sents: list[str], rng: random.Random) -> Turn:
    b = rng.randint(1, max(1, len(sents) - 2))
    before = " ".join(sents[:b])
    answer = " " + " ".join(sents[b : b + rng.randint(2, 5)])
    if rng.random() < 0.35:
        words = before.split(" ")
        if len(words) > 6:
            cut = rng.randint(3, len(words) - 1)
            answer = " " + " ".join(words[cut:]) + answer
            before = " ".join(words[:cut])
    return Turn(draft_message(before), answer)


def _infill(sents: list[str], rng: random.Random) -> Turn:
    b = rng.randint(1, max(1, len(sents) - 2))
    mid_end = min(len(sents) - 1, b + rng.randint(1, 2))
    before = " ".join(sents[:b])
    middle = " " + " ".join(sents[b:mid_end])
    after = " " + " ".join(sents[mid_end : mid_end + rng.randint(1, 3)])
    return Turn(infill_message(before), middle, frozen_tail=after)


def _context(story: str, span: str, rng: random.Random) -> tuple[str, str]:
    if rng.random() >= 0.5 or span not in story:
        return "", ""
    head, _, tail = story.partition(span)
    before = " ".join(sentences(head)[-rng.randint(1, 3) :])
    after = " ".join(sentences(tail)[: rng.randint(1, 3)])
    return before, after


def _grammar(sents: list[str], story: str, rng: random.Random) -> Turn:
    n = rng.randint(1, 2)
    a = rng.randrange(0, max(1, len(sents) - n + 1))
    text = " ".join(sents[a : a + n])
    broken = text if rng.random() < GRAMMAR_IDENTITY else _typos(text, rng)
    before, after = _context(story, text, rng)
    return Turn(rewrite_message(broken, REWRITE_PRESETS["grammar"], before, after), text)


def _mechanical(kind: str, sents: list[str], story: str, rng: random.Random) -> Turn:
    """A preset the teacher has no pair for: `examples`' mechanical targets on a story span."""
    a = rng.randrange(0, max(1, len(sents) - 2))
    text = " ".join(sents[a : a + 2])
    answer = {
        "shorter": sents[a],
        "longer": " ".join(sents[a : a + 3]),
        "formal": _expand(text),
        "casual": _contract(text),
        "simplify": _simplify(text),
    }.get(kind, text)
    if kind == "formal":
        text = _contract(text)
    before, after = _context(story, text, rng)
    return Turn(rewrite_message(text, REWRITE_PRESETS[kind], before, after), answer)


def make_turn(
    corpus: StoryCorpus, by_preset: dict[str, list[Any]], rng: random.Random, task: str
) -> Turn | None:
    story = rng.choice(corpus.stories)
    sents = sentences(story.text)
    if len(sents) < 3:
        return None
    if task == "draft":
        return _draft(sents, rng)
    if task == "infill":
        return _infill(sents, rng)
    if rng.random() < GRAMMAR_SHARE:
        return _grammar(sents, story.text, rng)
    kind = rng.choice([k for k in REWRITE_PRESETS if k != "grammar"])
    pairs = by_preset.get(kind) or []
    if not pairs:
        return _mechanical(kind, sents, story.text, rng)
    pair = rng.choice(pairs)
    before, after = _context(pair.story, pair.source, rng)
    return Turn(rewrite_message(pair.source, REWRITE_PRESETS[kind], before, after), pair.target)


def sample_examples(
    corpus: StoryCorpus, tokenizer: Any, canvas_length: int, max_prefix: int, rng: random.Random, count: int
) -> list[Example]:
    """`count` examples drawn from random stories, pairs and tasks (a pure function of `rng`'s state)."""
    if not corpus.stories:  # e.g. the held-out part of a corpus whose first chunks are still being written
        return []
    by_preset: dict[str, list[Any]] = {}
    for pair in corpus.rewrites:
        by_preset.setdefault(pair.preset, []).append(pair)
    out: list[Example] = []
    attempts = 0
    while len(out) < count and attempts < count * 20:
        attempts += 1
        task = pick_task(rng)
        turn = make_turn(corpus, by_preset, rng, task)
        if turn is not None:
            out.extend(turn_to_examples(turn, tokenizer, canvas_length, max_prefix, rng, task))
    return out[:count]
