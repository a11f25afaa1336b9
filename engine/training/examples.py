"""Instruction-shaped training examples in exactly the message formats `engine.prompts` sends.

Every example is one user turn (built with `engine.prompts.draft_message` / `rewrite_message` /
`infill_message` and the checkpoint's chat template) and one model turn. The model turn is cut into canvases
of `canvas_length` tokens the way the sampler produces them: block-aligned from the start of the model turn,
each canvas seeing the prompt and the earlier canvases as its clean prefix. After the answer come
`<end_of_turn>` and `<pad>`s, which is what the sampler's canvas holds once a short answer is finished.

Tasks (fractions in `TASK_WEIGHTS`):
- draft:   the text before a sentence (or word) boundary -> the next two to six sentences.
- rewrite: the presets of `engine.api.REWRITE_PRESETS`, with targets made mechanically from the corpus:
           shorter (keep the first half of the sentences), longer (add the next sentence), grammar (undo
           injected typos), formal/casual (expand/contract contractions), simplify (split at semicolons), and
           a free instruction ("Rewrite it in your own words.") that keeps the text.
- infill:  the text before the gap -> the middle sentence(s) followed by the text after the gap; the
           after-text tokens are frozen (never noised, not in the loss), as `engine.infill` pins them in the
           canvas.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from engine.api import REWRITE_PRESETS
from engine.prompts import chat_ids, draft_message, infill_message, rewrite_message
from engine.training.corpus import Chapter, sentences

TASK_WEIGHTS = {"draft": 0.55, "rewrite": 0.25, "infill": 0.20}
FREE_INSTRUCTION = "Rewrite it in your own words."
_CONTRACTIONS = [
    ("do not", "don't"),
    ("does not", "doesn't"),
    ("did not", "didn't"),
    ("will not", "won't"),
    ("cannot", "can't"),
    ("is not", "isn't"),
    ("are not", "aren't"),
    ("was not", "wasn't"),
    ("I am", "I'm"),
    ("I will", "I'll"),
    ("you are", "you're"),
    ("it is", "it's"),
    ("we are", "we're"),
    ("they are", "they're"),
    ("I have", "I've"),
    ("that is", "that's"),
    ("there is", "there's"),
]


@dataclass(frozen=True)
class Example:
    """One canvas to learn: its clean prefix, its clean target, and which positions are noised/scored."""

    prefix: list[int]
    target: list[int]  # canvas_length ids
    noisable: list[bool]  # False for frozen positions (infill's after-text)
    task: str


@dataclass(frozen=True)
class Turn:
    message: str
    answer: str
    frozen_tail: str = ""  # infill: the after-text that follows the answer in the canvas, pinned


def make_turn(chapter: Chapter, rng: random.Random, task: str) -> Turn | None:
    """A user message and the model's answer built from one chapter, or None if the chapter is too short."""
    sents = sentences(chapter.text)
    if len(sents) < 6:
        return None
    if task == "draft":
        return _draft(sents, rng)
    if task == "rewrite":
        return _rewrite(sents, rng)
    return _infill(sents, rng)


def _window(sents: list[str], rng: random.Random, lo: int, hi: int) -> tuple[int, int]:
    n = rng.randint(lo, hi)
    start = rng.randrange(0, max(1, len(sents) - n - 6))
    return start, start + n


def _draft(sents: list[str], rng: random.Random) -> Turn:
    a, b = _window(sents, rng, 1, 8)
    before = " ".join(sents[a:b])
    answer_sents = sents[b : b + rng.randint(2, 6)]
    answer = " " + " ".join(answer_sents)
    if rng.random() < 0.35:  # stop mid-sentence, at a word boundary: the writer's cursor is anywhere
        words = before.split(" ")
        if len(words) > 6:
            cut = rng.randint(3, len(words) - 1)
            answer = " " + " ".join(words[cut:]) + answer
            before = " ".join(words[:cut])
    if rng.random() < 0.1:  # the engine marks context it trimmed
        words = before.split(" ")
        before = "…" + " ".join(words[rng.randint(0, max(0, len(words) - 4)) :])
    return Turn(draft_message(before), answer)


def _rewrite(sents: list[str], rng: random.Random) -> Turn:
    kind = rng.choice([*REWRITE_PRESETS, "free"])
    a, b = _window(sents, rng, 1, 3)
    text = " ".join(sents[a:b])
    if kind == "shorter":
        b = max(b, a + 2)
        text = " ".join(sents[a:b])
        answer = " ".join(sents[a : a + (b - a + 1) // 2])
    elif kind == "longer":
        answer = " ".join(sents[a : b + rng.randint(1, 2)])
    elif kind == "grammar":
        answer, text = text, _typos(text, rng)
    elif kind == "formal":
        answer, text = _expand(text), _contract(text)
    elif kind == "casual":
        answer = _contract(text)
    elif kind == "simplify":
        answer = _simplify(text)
    else:
        answer = text
    instruction = FREE_INSTRUCTION if kind == "free" else REWRITE_PRESETS[kind]
    before = after = ""
    if rng.random() < 0.5:
        before = " ".join(sents[max(0, a - rng.randint(1, 3)) : a])
        after = " ".join(sents[b : b + rng.randint(1, 3)])
    return Turn(rewrite_message(text, instruction, before, after), answer)


def _infill(sents: list[str], rng: random.Random) -> Turn:
    a, b = _window(sents, rng, 1, 6)
    middle_end = b + rng.randint(1, 2)
    before = " ".join(sents[a:b])
    middle = " " + " ".join(sents[b:middle_end])
    after = " " + " ".join(sents[middle_end : middle_end + rng.randint(1, 3)])
    return Turn(infill_message(before), middle, frozen_tail=after)


def _typos(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    for i, word in enumerate(words):
        if len(word) > 3 and rng.random() < 0.15:
            j = rng.randrange(1, len(word) - 1)
            op = rng.randrange(3)
            if op == 0:
                word = word[:j] + word[j + 1 :]
            elif op == 1:
                word = word[:j] + word[j + 1] + word[j] + word[j + 2 :]
            else:
                word = word[:j] + word[j] + word[j:]
            words[i] = word
    out = " ".join(words)
    return out[0].lower() + out[1:] if rng.random() < 0.3 else out


def _contract(text: str) -> str:
    for long, short in _CONTRACTIONS:
        text = re.sub(rf"\b{long}\b", short, text)
        text = re.sub(rf"\b{long.capitalize()}\b", short.capitalize(), text)
    return text


def _expand(text: str) -> str:
    for long, short in _CONTRACTIONS:
        text = re.sub(rf"\b{re.escape(short)}\b", long, text)
        text = re.sub(rf"\b{re.escape(short.capitalize())}\b", long.capitalize(), text)
    return text


def _simplify(text: str) -> str:
    parts = [p.strip() for p in re.split(r"[;:] ", text) if p.strip()]
    return " ".join(p[0].upper() + p[1:] + ("" if p[-1] in ".!?\"'" else ".") for p in parts)


def pick_task(rng: random.Random) -> str:
    return rng.choices(list(TASK_WEIGHTS), weights=list(TASK_WEIGHTS.values()))[0]


def turn_to_examples(
    turn: Turn, tokenizer: Any, canvas_length: int, max_prefix: int, rng: random.Random, task: str
) -> list[Example]:
    """Cut one turn into block-aligned canvases (all of them for short answers, a random one for long)."""
    prompt = chat_ids(tokenizer, turn.message)
    end_of_turn = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    pad = tokenizer.pad_token_id
    answer = tokenizer.encode(turn.answer, add_special_tokens=False)
    tail = tokenizer.encode(turn.frozen_tail, add_special_tokens=False) if turn.frozen_tail else []
    body = answer + tail + [end_of_turn]
    noisable_body = [True] * len(answer) + [False] * len(tail) + [True]
    blocks = max(1, -(-len(body) // canvas_length))
    block = rng.randrange(blocks) if task != "infill" else 0
    start = block * canvas_length
    prefix = prompt + body[:start]
    if len(prefix) > max_prefix:
        return []
    target = body[start : start + canvas_length]
    noisable = noisable_body[start : start + canvas_length]
    fill = canvas_length - len(target)
    return [Example(prefix, target + [pad] * fill, noisable + [True] * fill, task)]


def sample_examples(
    chapters: list[Chapter],
    tokenizer: Any,
    canvas_length: int,
    max_prefix: int,
    rng: random.Random,
    count: int,
) -> list[Example]:
    """`count` examples drawn from random chapters and tasks."""
    out: list[Example] = []
    attempts = 0
    while len(out) < count and attempts < count * 20:
        attempts += 1
        task = pick_task(rng)
        turn = make_turn(rng.choice(chapters), rng, task)
        if turn is not None:
            out.extend(turn_to_examples(turn, tokenizer, canvas_length, max_prefix, rng, task))
    return out[:count]
