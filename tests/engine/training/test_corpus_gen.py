"""The teacher corpus: seeded recipes, resumable reproducible chunks, honest filters, and training on it.

A scripted teacher stands in for SmolLM2 (the real one is 90 MB and minutes of CPU); it answers from its seed
and the message only, as the real backends do, so what is tested is the generator's bookkeeping around the
teacher.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from engine.api import REWRITE_PRESETS
from engine.prompts import DRAFT_HEADER, INFILL_HEADER, REWRITE_HEADER
from engine.tools.tiny import train_tokenizer
from engine.training import corpus_gen, recipes, story_corpus, story_examples
from engine.training.teacher import Sampling

SENTENCES = [
    "Once there was a little boat with a big red sail.",
    "Every day it went out on the water with the old fisherman.",
    "One morning the rain came down and the wind was strong.",
    "The boat was scared, but the fisherman held the rope tight.",
    "When the sun came back, they went home together.",
    "The children on the beach waved and laughed.",
    "That night the boat slept in the quiet harbour, happy and dry.",
]


class ScriptedTeacher:
    backend = "scripted"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def generate(self, messages: list[str], sampling: Sampling, seed: int) -> list[str]:
        self.calls.append(len(messages))
        out = []
        for i, message in enumerate(messages):
            rng = random.Random(f"{seed}:{i}:{message}")
            if "Text:" in message:
                span = message.split("Text: ", 1)[1]
                first = span.split(". ")[0].rstrip(".") + "."
                out.append(first if "shorter" in message else f"{span} It was a fine day.")
            else:
                n = rng.randint(4, 7)
                out.append("**The Boat**\n\n" + " ".join(SENTENCES[:n]) + " And then the")
        return out


def _generate(out: Path, chunks: int = 2, seed: int = 0) -> ScriptedTeacher:
    teacher = ScriptedTeacher()
    out.mkdir(parents=True, exist_ok=True)
    for c in range(chunks):
        corpus_gen.write_chunk(
            out, c, corpus_gen.generate_chunk(teacher, seed, c, chunk_size=20, batch_size=8)
        )
    return teacher


def test_recipes_are_a_function_of_seed_and_index() -> None:
    assert recipes.text_recipe(0, 5) == recipes.text_recipe(0, 5)
    assert recipes.text_recipe(0, 5) != recipes.text_recipe(1, 5)
    messages = {recipes.text_recipe(0, i).message for i in range(200)}
    assert len(messages) > 190  # varied: random words, registers, topics
    assert any("story" in m for m in messages) and any("letter" in m or "email" in m for m in messages)
    assert [i for i in range(40) if recipes.is_held_out(i)] == [7, 27]


def test_chunks_are_reproducible_byte_for_byte_and_batched_as_asked(tmp_path: Path) -> None:
    teacher = _generate(tmp_path / "a", chunks=1)
    _generate(tmp_path / "b", chunks=1)
    a = (tmp_path / "a" / "chunk-00000.jsonl.gz").read_bytes()
    assert a == (tmp_path / "b" / "chunk-00000.jsonl.gz").read_bytes()
    assert max(teacher.calls) <= 8 and sum(teacher.calls) > 20  # texts in batches of 8, then rewrites
    records = corpus_gen.read_chunk(tmp_path / "a" / "chunk-00000.jsonl.gz")
    texts = [r for r in records if r["kind"] == "text"]
    assert [r["index"] for r in texts] == list(range(20))
    assert all(r["message"] == recipes.text_recipe(0, r["index"]).message for r in texts)
    rewrites = [r for r in records if r["kind"] == "rewrite"]
    assert rewrites and all(r["preset"] in REWRITE_PRESETS and r["span"] in r["message"] for r in rewrites)


def test_the_command_resumes_and_refuses_other_settings(tmp_path: Path, monkeypatch) -> None:
    gguf = tmp_path / "teacher.gguf"
    gguf.write_bytes(b"x")
    monkeypatch.setattr(corpus_gen.teacher_mod, "verify", lambda path: "ok")
    monkeypatch.setattr(corpus_gen.teacher_mod, "load_teacher", lambda *a: ScriptedTeacher())
    out = tmp_path / "corpus"
    args = ["--out", str(out), "--teacher", str(gguf), "--chunk-size", "10", "--batch-size", "5"]
    assert corpus_gen.main([*args, "--chunks", "2"]) == 0
    first = (out / "chunk-00001.jsonl.gz").read_bytes()
    assert corpus_gen.main([*args, "--chunks", "3"]) == 0  # resumes: chunk 2 only
    progress = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert [p["chunk"] for p in progress] == [0, 1, 2]
    assert (out / "chunk-00001.jsonl.gz").read_bytes() == first
    assert corpus_gen.main([*args, "--verify", "1"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sha256"] and manifest["licence"].startswith("Apache-2.0") and manifest["seed"] == 0
    with pytest.raises(SystemExit, match="other settings"):
        corpus_gen.main([*args[:-1], "6", "--chunks", "4"])


def test_reading_drops_cut_off_sentences_and_wrong_length_rewrites(tmp_path: Path) -> None:
    assert story_corpus.clean_story("Title: A\n\nShort one.") is None
    story = story_corpus.clean_story("**The Boat**\n\n" + " ".join(SENTENCES) + " And then the")
    assert story is not None and story.endswith("happy and dry.") and "**" not in story
    assert story_corpus.clean_story(" ".join([SENTENCES[0]] * 8)) is None  # a loop
    src = " ".join(SENTENCES[:2])
    assert story_corpus.clean_rewrite(SENTENCES[0], src, "shorter") == SENTENCES[0]
    assert story_corpus.clean_rewrite(src + " " + SENTENCES[2], src, "shorter") is None  # not shorter
    assert story_corpus.clean_rewrite(src, src, "formal") is None  # an echo is no rewrite
    assert story_corpus.clean_rewrite("Here is the rewritten text: " + src, src, "freely") is None
    _generate(tmp_path, chunks=2)
    train, held = story_corpus.load([tmp_path])
    assert train.stories and held.stories
    assert {s.index for s in held.stories} <= {7, 27}
    assert not {s.index for s in train.stories} & {s.index for s in held.stories}
    assert all(len(r.target.split()) < len(r.source.split()) for r in train.rewrites if r.preset == "shorter")


def test_examples_use_the_apps_prompt_formats_and_keep_correct_text(tmp_path: Path) -> None:
    _generate(tmp_path, chunks=2)
    train, _ = story_corpus.load([tmp_path])
    rng = random.Random(0)
    by_preset: dict = {}
    for p in train.rewrites:
        by_preset.setdefault(p.preset, []).append(p)
    turns = [
        story_examples.make_turn(train, by_preset, rng, task) for task in ["draft", "infill", "rewrite"] * 200
    ]
    heads = {t.message.split("\n", 1)[0].split(".")[0] + "." for t in turns if t}
    assert {DRAFT_HEADER, INFILL_HEADER, REWRITE_HEADER} <= heads
    grammar = [t for t in turns if t and REWRITE_PRESETS["grammar"] in t.message]
    unchanged = [t for t in grammar if t.message.split("\n\n")[1] == t.answer]
    assert grammar and 0.2 < len(unchanged) / len(grammar) < 0.7  # correct text must come back as it is
    infills = [t for t in turns if t and t.frozen_tail]
    assert infills and all(t.message.startswith(INFILL_HEADER) for t in infills)
    tokenizer = train_tokenizer(train.texts() * 3, 400)
    examples = story_examples.sample_examples(train, tokenizer, 16, 256, random.Random(1), 12)
    assert len(examples) == 12 and all(len(e.target) == 16 for e in examples)


def test_training_on_the_teacher_corpus_runs_and_records_it(tmp_path: Path) -> None:
    from engine.training.train import Hyper, run

    _generate(tmp_path / "corpus", chunks=2)
    (tmp_path / "corpus" / "manifest.json").write_text(json.dumps({"seed": 0, "backend": "scripted"}))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        h = Hyper(
            steps=3,
            seed=1,
            batch_size=4,
            warmup=1,
            vocab_size=400,
            canvas_length=16,
            hidden_size=32,
            layers=2,
            experts=2,
            top_k=1,
            max_prefix=256,
            eval_examples=4,
            corpus="teacher",
            corpus_dirs=str(tmp_path / "corpus"),
            dtype="float32",
        )
        run(tmp_path / "run", h, log_every=1, eval_every=100, save_every=1, max_minutes=0.0, quiet=True)
        run(tmp_path / "run", h, log_every=1, eval_every=100, quiet=True)  # resumes
    finally:
        torch.set_num_threads(threads)
    record = json.loads((tmp_path / "run" / "model" / "training.json").read_text())
    assert record["metrics"]["step"] == 3
    assert "SmolLM2" in record["corpus"]["source"] and record["corpus"]["generation"][0]["seed"] == 0
    assert "--corpus teacher" in record["command"]


@pytest.mark.slow
@pytest.mark.parametrize("word_list", ["carried", "missing"])
def test_the_gpu_recipe_dry_run_writes_its_figures_in_one_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, word_list: str
) -> None:
    """The lent GPU image has no wamerican: with the carried copy (`LETTERPRESS_WORDLIST`) the real-word share
    is measured; with none the run still writes its model and every other figure, and says why that one is
    missing (it used to end in WordListMissingError after the training)."""
    from engine.training import gpu_recipe

    words = tmp_path / "words.txt"
    if word_list == "carried":
        words.write_text("the\nboat\nsea\nonce\nupon\na\ntime\n", encoding="utf-8")
    monkeypatch.setenv("LETTERPRESS_WORDLIST", str(words))
    _generate(tmp_path / "corpus", chunks=2)
    (tmp_path / "corpus" / "manifest.json").write_text(json.dumps({"seed": 0, "backend": "scripted"}))
    out = tmp_path / "gpu"
    threads = torch.get_num_threads()
    try:
        code = gpu_recipe.main(
            [
                "--out",
                str(out),
                "--minutes",
                "1",
                "--dry-run",
                "--no-generate",
                "--corpus-dir",
                str(tmp_path / "corpus"),
            ]
        )
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    figures = json.loads((out / "figures.json").read_text())
    assert figures["device"] == "cpu" and figures["train"]["steps"] >= 4
    assert str(out / "run" / "model") in figures["judge"]
    judged = figures["judge"][str(out / "run" / "model")]
    assert "grammar_unchanged" in judged and "rewrite_length_ok" in judged["targets_met"]
    if word_list == "carried":
        assert 0 <= judged["english_word_share"] <= 1 and "english_word_share" in judged["targets_met"]
    else:
        assert judged["english_word_share"] is None and "english_word_share" not in judged["targets_met"]
        assert "wamerican" in figures["judge_note"]
    assert (out / "run" / "model" / "model.safetensors").is_file() and (out / "recipe.log").is_file()


def test_the_judges_figures_count_what_a_writer_notices() -> None:
    import math

    from engine.training import judge

    class FlatTeacher:
        def score(self, pairs):
            return [(float(len(text.split())), len(text.split())) for _, text in pairs]  # 1 nat a word

    result = {
        "drafts": [
            {"opening": "A.", "draft": "The boat sailed home."},
            {"opening": "B.", "draft": "Zqx vrrb the."},
        ],
        "grammar": [{"unchanged": True}, {"unchanged": True}, {"unchanged": False}, {"unchanged": True}],
        "rewrites": [{"ratio": 1.0, "ok": True}, {"ratio": 5.9, "ok": False}],
        "draft_seconds_mean": 0.5,
        "draft_seconds_max": 0.7,
    }
    words = {"the", "boat", "sailed", "home"}
    fig = judge.figures(result, FlatTeacher(), words, reference_ppl=math.e / 2)
    assert fig["english_word_share"] == round(5 / 7, 4)
    assert fig["grammar_unchanged"] == 0.75 and fig["rewrite_length_ok"] == 0.5
    assert fig["teacher_ppl_drafts"] == round(math.e, 2) and fig["ppl_ratio"] == 2.0
    assert fig["targets_met"] == {
        "ppl_ratio": True,
        "english_word_share": False,
        "grammar_unchanged": False,
        "rewrite_length_ok": False,
    }
