"""The demo-model trainer stays alive: a few steps on a tiny config, resume, export, and the objective learns.

Self-contained: the built-in sample corpus, no Debian corpus package, runs in seconds on one CPU thread.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from engine.prompts import chat_ids, draft_message
from engine.tools.tiny import tiny_config, train_tokenizer
from engine.training import corpus, examples
from engine.training.evaluate import word_stats
from engine.training.objective import collate, diffusion_loss, noise
from engine.training.train import Hyper, run

TINY = Hyper(
    steps=3,
    seed=3,
    batch_size=4,
    lr=3e-3,
    warmup=1,
    vocab_size=400,
    canvas_length=16,
    hidden_size=32,
    layers=2,
    experts=2,
    top_k=1,
    max_positions=512,
    max_prefix=256,
    eval_examples=8,
    corpus="sample",
    dtype="float32",
)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def test_a_short_run_exports_a_loadable_model_with_its_recipe(tmp_path: Path) -> None:
    from engine.weights.loader import load_model

    run(tmp_path, TINY, log_every=1, eval_every=100, quiet=True)

    losses = [r["loss"] for r in _log(tmp_path) if "loss" in r]
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))
    loaded = load_model(tmp_path / "model", device="cpu")
    assert loaded.model.config.canvas_length == 16
    prompt = torch.tensor([chat_ids(loaded.tokenizer, draft_message("The king called his servants."))])
    out = loaded.model.generate(prompt, max_new_tokens=16, max_denoising_steps=4)
    out = getattr(out, "sequences", out)
    assert out.shape[1] == prompt.shape[1] + 16
    record = json.loads((tmp_path / "model" / "training.json").read_text())
    assert record["hyperparameters"]["seed"] == 3 and record["metrics"]["step"] == 3
    assert "heldout_acc_t0.5" in record["metrics"] and "unigram_acc_t0.5" in record["metrics"]


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    run(tmp_path, replace(TINY, steps=5), log_every=1, eval_every=100, max_minutes=0.0, quiet=True)
    assert not [r for r in _log(tmp_path) if "loss" in r]  # stopped before its first step
    run(tmp_path, replace(TINY, steps=5), log_every=1, save_every=2, eval_every=100, quiet=True)
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    assert state["step"] == 5
    assert [r["step"] for r in _log(tmp_path) if "loss" in r] == [1, 2, 3, 4, 5]


def test_resuming_with_other_hyperparameters_is_refused(tmp_path: Path) -> None:
    run(tmp_path, replace(TINY, steps=1), eval_every=100, quiet=True)
    with pytest.raises(SystemExit, match="other hyperparameters"):
        run(tmp_path, replace(TINY, steps=1, lr=1.0), eval_every=100, quiet=True)


def test_a_finished_run_can_be_extended_with_more_steps(tmp_path: Path) -> None:
    run(tmp_path, replace(TINY, steps=2), log_every=1, eval_every=100, quiet=True)
    run(tmp_path, replace(TINY, steps=4), log_every=1, eval_every=100, quiet=True)
    assert [r["step"] for r in _log(tmp_path) if "loss" in r] == [1, 2, 3, 4]
    config = json.loads((tmp_path / "model" / "generation_config.json").read_text())
    assert config["max_denoising_steps"] == 12  # every export declares the demo's measured steps


def test_the_objective_learns_a_fixed_batch() -> None:
    from transformers import DiffusionGemmaForBlockDiffusion

    torch.manual_seed(0)
    tok = train_tokenizer([c.text for c in corpus.sample_passages()], 300)
    model = DiffusionGemmaForBlockDiffusion(
        tiny_config(len(tok), canvas_length=16, hidden_size=32, experts=2, top_k=1)
    )
    rng = random.Random(0)
    batch = collate(
        examples.sample_examples(corpus.sample_passages(), tok, 16, 256, rng, 4), tok.pad_token_id
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with torch.no_grad():
        first = diffusion_loss(model, batch).item()
    for _ in range(25):
        loss = diffusion_loss(model, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < first * 0.6


def test_noise_never_touches_frozen_positions_and_scales_with_t() -> None:
    ex = examples.Example(
        prefix=[2, 7, 8], target=[10] * 32, noisable=[True] * 16 + [False] * 16, task="infill"
    )
    batch = collate([ex] * 64, pad_id=0)
    clean = noise(batch, torch.zeros(64), vocab_size=500)
    assert torch.equal(clean, batch.target)
    noisy = noise(batch, torch.ones(64), vocab_size=500)
    assert torch.equal(noisy[:, 16:], batch.target[:, 16:])
    assert (noisy[:, :16] != 10).float().mean() > 0.9


def test_left_padding_does_not_change_what_an_example_sees() -> None:
    from transformers import DiffusionGemmaForBlockDiffusion

    from engine.training.objective import decode, encode_prefix

    torch.manual_seed(0)
    model = DiffusionGemmaForBlockDiffusion(tiny_config(300, canvas_length=8, hidden_size=32)).eval()
    short = examples.Example([2, 30, 31, 32], list(range(40, 48)), [True] * 8, "draft")
    long = examples.Example([2, *list(range(50, 70))], list(range(40, 48)), [True] * 8, "draft")
    alone, together = collate([short], 0), collate([short, long], 0)
    with torch.no_grad():
        a = decode(model, alone, alone.target, encode_prefix(model, alone))[0]
        b = decode(model, together, together.target, encode_prefix(model, together))[0]
    assert torch.allclose(a, b, atol=1e-4)


def test_draft_examples_use_the_engines_prompt_format() -> None:
    tok = train_tokenizer([c.text for c in corpus.sample_passages()], 300)
    rng = random.Random(1)
    turn = examples.make_turn(corpus.sample_passages()[0], rng, "draft")
    assert turn is not None and turn.message.startswith("Continue this text.\n\n")
    (ex,) = examples.turn_to_examples(turn, tok, 256, 1000, rng, "draft")
    assert ex.prefix == chat_ids(tok, turn.message)
    end_of_turn = tok.convert_tokens_to_ids("<end_of_turn>")
    assert end_of_turn in ex.target and ex.target[-1] == tok.pad_token_id


def test_word_fraction_counts_real_words_only() -> None:
    words = {"the", "king", "called", "his", "servants"}
    assert word_stats(["The king called, his servants!", "xqzt king"], words) == (6, 7)
