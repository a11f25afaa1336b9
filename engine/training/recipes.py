"""Seeded prompts for the teacher: TinyStories-style random words, topics and registers (all a function of a seed).

Why: a tiny model learns fluent English from simple, varied, modern text (TinyStories, Eldan & Li 2023: random
words + features in every prompt give diversity that a fixed prompt cannot). The app's writers also write letters,
reports, notes and articles, so besides children's stories a share of prompts asks for everyday registers, always
"in simple words" (a capped vocabulary keeps a 10 M-parameter model's job learnable).

`text_recipe(seed, index)` -> what to ask for a base text; `rewrite_recipe(seed, index, text)` -> which span of a
base text to rewrite with which preset of `engine.api.REWRITE_PRESETS`, and the teacher's instruction for it. The
teacher never sees the app's prompt format; `engine.training.story_examples` turns its outputs into the app's
formats (`engine.prompts`).
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass
from typing import Any

NOUNS = [
    "boat",
    "rain",
    "dog",
    "cat",
    "tree",
    "ball",
    "sun",
    "cake",
    "friend",
    "box",
    "garden",
    "river",
    "bird",
    "house",
    "car",
    "train",
    "book",
    "hat",
    "door",
    "window",
    "apple",
    "bread",
    "cup",
    "kite",
    "flower",
    "park",
    "school",
    "teacher",
    "shop",
    "market",
    "bike",
    "road",
    "hill",
    "farm",
    "horse",
    "cow",
    "fish",
    "beach",
    "shell",
    "star",
    "moon",
    "cloud",
    "snow",
    "wind",
    "lamp",
    "key",
    "map",
    "bag",
    "phone",
    "letter",
    "gift",
    "song",
    "drum",
    "toy",
    "bear",
    "rabbit",
    "mouse",
    "frog",
    "duck",
    "baker",
    "doctor",
    "nurse",
    "family",
    "brother",
    "sister",
    "mother",
    "father",
    "grandma",
    "neighbor",
    "village",
    "city",
    "bridge",
    "forest",
    "field",
    "kitchen",
    "table",
    "chair",
    "bed",
    "blanket",
    "coat",
    "shoe",
    "sock",
    "button",
    "clock",
    "picture",
    "paint",
    "pencil",
    "paper",
    "library",
    "museum",
    "garden",
    "bench",
    "bus",
    "ticket",
    "storm",
    "lighthouse",
    "island",
    "mountain",
    "cave",
    "rock",
    "leaf",
    "seed",
    "basket",
    "soup",
    "pie",
    "cookie",
    "robot",
    "computer",
    "camera",
    "photo",
    "office",
    "meeting",
    "report",
    "plan",
    "project",
    "team",
    "coffee",
    "tea",
    "lunch",
    "dinner",
    "breakfast",
    "holiday",
    "birthday",
    "party",
    "game",
    "race",
    "prize",
    "ladder",
    "fence",
    "gate",
    "nest",
    "egg",
    "honey",
    "bee",
    "butterfly",
    "pond",
    "wave",
    "ship",
]
VERBS = [
    "run",
    "jump",
    "play",
    "find",
    "help",
    "share",
    "build",
    "paint",
    "sing",
    "read",
    "write",
    "draw",
    "climb",
    "swim",
    "cook",
    "bake",
    "plant",
    "grow",
    "fix",
    "carry",
    "open",
    "close",
    "look",
    "listen",
    "learn",
    "teach",
    "visit",
    "wait",
    "walk",
    "ride",
    "fly",
    "catch",
    "throw",
    "laugh",
    "smile",
    "cry",
    "hide",
    "search",
    "clean",
    "wash",
    "fold",
    "count",
    "pick",
    "call",
    "ask",
    "answer",
    "remember",
    "forget",
    "start",
    "finish",
    "explore",
    "dance",
    "sleep",
    "dream",
]
ADJECTIVES = [
    "happy",
    "sad",
    "big",
    "small",
    "red",
    "blue",
    "green",
    "yellow",
    "kind",
    "brave",
    "quiet",
    "loud",
    "soft",
    "warm",
    "cold",
    "bright",
    "dark",
    "old",
    "new",
    "tiny",
    "tall",
    "short",
    "fast",
    "slow",
    "funny",
    "shy",
    "proud",
    "careful",
    "busy",
    "sunny",
    "rainy",
    "windy",
    "clean",
    "dirty",
    "shiny",
    "gentle",
    "hungry",
    "sleepy",
    "curious",
    "friendly",
    "lucky",
    "strong",
    "tired",
    "excited",
    "calm",
    "wet",
    "dry",
    "sweet",
    "fresh",
]
FEATURES = (
    "",
    "",
    "The story should have some dialogue.",
    "The story should have a happy ending.",
    "The story should have a surprising twist.",
    "The story should teach a small lesson.",
    "Something goes wrong in the middle and is fixed at the end.",
    "Tell it in the past tense.",
)
REGISTERS = (
    ("a short simple story for children", 0.40),
    ("a short story", 0.12),
    ("a short letter to a friend", 0.06),
    ("a short diary entry", 0.05),
    ("a short news report for a town newspaper", 0.06),
    ("a short paragraph that explains", 0.07),
    ("a short email to a colleague", 0.05),
    ("a short description of a place", 0.05),
    ("simple step-by-step instructions", 0.04),
    ("a short opinion paragraph", 0.04),
    ("a short review", 0.03),
    ("a short report", 0.03),
)
TOPICS = (
    "a rainy day",
    "a lost dog",
    "a school trip",
    "a new neighbor",
    "a birthday party",
    "a garden in spring",
    "a visit to the beach",
    "a broken bike",
    "a storm at night",
    "the first day at a new job",
    "a small town market",
    "a walk in the forest",
    "learning to swim",
    "a family dinner",
    "a trip on a train",
    "a library book",
    "making bread",
    "a football game",
    "a snowy morning",
    "an old lighthouse",
    "a science project",
    "saving money",
    "a picnic in the park",
    "moving to a new house",
    "a power cut",
    "a music lesson",
    "planting a tree",
    "a lost key",
    "a long bus ride",
    "a cooking mistake",
    "a village festival",
    "a quiet evening at home",
    "a team meeting",
    "a kind stranger",
    "a museum visit",
    "fixing a leaky tap",
    "a camping trip",
    "a new phone",
    "a summer holiday",
)
EXPLAIN_TOPICS = (
    "how bees make honey",
    "why sleep matters",
    "how rain forms",
    "why we recycle",
    "how a library works",
    "how to care for a dog",
    "why breakfast matters",
    "how a seed grows",
    "how to stay safe in a storm",
    "why friends matter",
    "how bread is made",
)
PLACES = (
    "a busy market",
    "an old lighthouse",
    "a quiet beach",
    "a small kitchen",
    "a school playground",
    "a city park",
    "a farm in summer",
    "a train station",
    "a village square",
    "a forest path",
    "a classroom",
    "a garden at night",
    "a harbour in the morning",
    "a corner shop",
    "a library",
    "a mountain lake",
)
PRESET_WEIGHTS = {
    "shorter": 0.2,
    "longer": 0.18,
    "formal": 0.16,
    "casual": 0.14,
    "simplify": 0.16,
    "freely": 0.16,
}
TEACHER_REWRITE = {
    "shorter": "Rewrite this text so that it is shorter, in one or two sentences, keeping its meaning.",
    "longer": "Rewrite this text so that it is a little longer, adding one or two relevant details.",
    "formal": "Rewrite this text in a more formal style.",
    "casual": "Rewrite this text in a more casual, friendly style.",
    "simplify": "Rewrite this text using simpler words and shorter sentences.",
    "freely": "Rewrite this text in new words, keeping its meaning.",
}
HELD_OUT_EVERY = (
    20  # item index % 20 == HELD_OUT_AT is held out from training (judge prompts come from these)
)
HELD_OUT_AT = 7


@dataclass(frozen=True)
class TextRecipe:
    index: int
    register: str
    words: tuple[str, ...]
    topic: str
    feature: str
    message: str


@dataclass(frozen=True)
class RewriteRecipe:
    index: int
    source: int  # the base text's index
    preset: str
    span: str
    message: str


def is_held_out(index: int) -> bool:
    return index % HELD_OUT_EVERY == HELD_OUT_AT


def _rng(seed: int, kind: str, index: int) -> random.Random:
    return random.Random(f"{seed}:{kind}:{index}")


def text_recipe(seed: int, index: int) -> TextRecipe:
    """The teacher's prompt for base text `index` (a pure function of seed and index)."""
    rng = _rng(seed, "text", index)
    register = rng.choices([r for r, _ in REGISTERS], weights=[w for _, w in REGISTERS])[0]
    words = (rng.choice(NOUNS), rng.choice(VERBS), rng.choice(ADJECTIVES))
    topic = rng.choice(TOPICS)
    feature = ""
    if "story" in register:
        feature = rng.choice(FEATURES)
        message = (
            f"Write {register} that uses the words {words[0]}, {words[1]} and {words[2]}. "
            f"Use simple words. {feature}"
        ).strip()
    elif register.endswith("explains"):
        topic = rng.choice(EXPLAIN_TOPICS)
        message = f"Write {register} {topic}. Use simple words and the word {words[0]}."
    elif "place" in register:
        topic = rng.choice(PLACES)
        message = f"Write a short description of {topic}. Use simple words and the word {words[0]}."
    else:
        message = f"Write {register} about {topic}. Use simple words and the word {words[0]}."
    return TextRecipe(index, register, words, topic, feature, message)


def usable_sentences(text: str) -> list[str]:
    from engine.training.corpus import sentences

    return [s for s in sentences(clean_output(text)) if 3 <= len(s.split()) <= 40]


def rewrite_recipe(seed: int, index: int, text: str) -> RewriteRecipe | None:
    """Which span of base text `index` to rewrite with which preset (None if the text has no usable span)."""
    rng = _rng(seed, "rewrite", index)
    sents = usable_sentences(text)
    if len(sents) < 2:
        return None
    preset = rng.choices(list(PRESET_WEIGHTS), weights=list(PRESET_WEIGHTS.values()))[0]
    lo, hi = (2, 3) if preset == "shorter" else (1, 2)
    n = min(len(sents), rng.randint(lo, hi))
    start = rng.randrange(0, len(sents) - n + 1)
    span = " ".join(sents[start : start + n])
    message = f"{TEACHER_REWRITE[preset]} Reply with only the rewritten text.\n\nText: {span}"
    return RewriteRecipe(index, index, preset, span, message)


_MARKUP = re.compile(r"[*#_`]+")


def clean_output(text: str) -> str:
    """The teacher's answer as plain prose: no markdown, titles, list bullets or quote marks around it all."""
    lines = []
    for line in text.replace("\r", "").split("\n"):
        line = _MARKUP.sub("", line).strip()
        if not line:
            continue
        if re.match(r"^(title|subject|dear diary)\s*:", line, re.IGNORECASE):
            continue
        if len(line.split()) <= 6 and not re.search(r"[.!?,:]$", line):  # a heading
            continue
        line = re.sub(r"^(\d+[.)]|[-•])\s+", "", line)
        lines.append(line)
    text = " ".join(lines)
    text = text.translate(str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "—": " - ", "\u00a0": " "}))
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > 2 and text[0] == text[-1] == '"' and text.count('"') == 2:
        text = text[1:-1]
    return text


def record_of(recipe: TextRecipe | RewriteRecipe) -> dict[str, Any]:
    return asdict(recipe)
