"""Measure a trained demo model: `python -m engine.training.evaluate --model DIR` prints JSON.

- words:   50 drafts (the engine's own Session: prompt builder + denoising loop, default sampler settings)
           from held-out passages; the share of generated whitespace-separated words (punctuation stripped)
           that are in Debian's `wamerican` list (/usr/share/dict/american-english).
- latency: seconds per request for the drafts, and for a few rewrites and infills.
- denoise: held-out denoising accuracy and cross-entropy at noise levels 0.5 and 1.0 (one decoder pass, scored
           on the corrupted non-pad canvas positions) against the unigram baseline (accuracy: always guess the
           most frequent training token; cross-entropy: add-one-smoothed training token frequencies), on the
           same examples; and accuracy over all non-pad canvas positions (noised or not) against the best
           context-free denoiser (the better of "keep every token" and "always the most frequent token"),
           which, unlike the corrupted-only comparison, does not credit the baseline with knowing where the
           noise is.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

WORDLIST = Path("/usr/share/dict/american-english")
_STRIP = "\"'.,;:!?()[]-…“”‘’"


class WordListMissingError(RuntimeError):
    pass


def wordlist() -> Path:
    """The word list in use: `LETTERPRESS_WORDLIST` (the copy a GPU carry folder brings: the lent image has
    no wamerican), else Debian's."""
    override = os.environ.get("LETTERPRESS_WORDLIST", "").strip()
    return Path(override) if override else WORDLIST


def load_words(path: Path | None = None) -> set[str]:
    path = path if path is not None else wordlist()
    if not path.is_file():
        raise WordListMissingError(f"{path} is missing; install it with: apt-get install -y wamerican")
    return {line.strip().lower() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()}


def word_stats(texts: list[str], words: set[str]) -> tuple[int, int]:
    """(real, total) whitespace-separated words, punctuation stripped from both ends; pure punctuation
    skipped."""
    real = total = 0
    for text in texts:
        for raw in text.split():
            word = raw.strip(_STRIP).lower()
            if not word:
                continue
            total += 1
            if word in words or re.fullmatch(r"\d+", word) or (word.endswith("'s") and word[:-2] in words):
                real += 1
    return real, total


def held_out_prompts(count: int, seed: int, corpus: str) -> list[tuple[str, str, str]]:
    """(before, middle, after) triples from held-out chapters: drafts use `before`, infills all three."""
    from engine.training import corpus as corpus_mod

    if corpus == "sample":
        chapters = corpus_mod.sample_passages()
    else:
        chapters = corpus_mod.split(corpus_mod.load_chapters())[1]
    rng = random.Random(seed)
    out: list[tuple[str, str, str]] = []
    while len(out) < count:
        sents = corpus_mod.sentences(rng.choice(chapters).text)
        if len(sents) < 8:
            continue
        a = rng.randrange(0, len(sents) - 6)
        b = a + rng.randint(1, 4)
        out.append((" ".join(sents[a:b]), " " + sents[b], " " + " ".join(sents[b + 1 : b + 3])))
    return out


def run(
    model_dir: Path,
    drafts: int = 50,
    seed: int = 0,
    corpus: str = "web",
    denoise_examples: int = 96,
    words: set[str] | None = None,
) -> dict[str, Any]:
    import torch

    from engine.api import DenoiseSettings, DraftRequest, InfillRequest, RewriteRequest
    from engine.session import Session
    from engine.training.examples import sample_examples
    from engine.training.objective import collate, denoising_scores
    from engine.training.train import Hyper, load_corpus, unigram_mode

    words = words if words is not None else load_words()
    session = Session()
    session.load(model_dir, device="cpu")
    triples = held_out_prompts(drafts, seed, corpus)
    texts, seconds = [], []
    for i, (before, _, _) in enumerate(triples):
        result = session.run(DraftRequest(before=before, settings=DenoiseSettings(seed=seed + i)))
        texts.append(result.text)
        seconds.append(result.stats.seconds)
    real, total = word_stats(texts, words)
    rewrite_s, infill_s, samples = [], [], {}
    for i, (before, middle, after) in enumerate(triples[:5]):
        settings = DenoiseSettings(seed=seed + i)
        rw = session.run(
            RewriteRequest(
                selection=middle.strip(),
                instruction="Make it shorter while keeping its meaning.",
                settings=settings,
            )
        )
        inf = session.run(InfillRequest(before=before, after=after, settings=settings))
        rewrite_s.append(rw.stats.seconds)
        infill_s.append(inf.stats.seconds)
        if i == 0:
            samples = {
                "draft_prompt": before,
                "draft": texts[0],
                "rewrite_selection": middle.strip(),
                "rewrite_shorter": rw.text,
                "infill_before": before,
                "infill": inf.text,
                "infill_after": after,
            }

    # Denoising accuracy on held-out examples built the way training builds them.
    record = (
        json.loads((model_dir / "training.json").read_text())
        if (model_dir / "training.json").is_file()
        else {}
    )
    hyper = Hyper(**{**record.get("hyperparameters", {}), "corpus": corpus})
    model, tok = session.model, session.tokenizer
    train_chapters, held_chapters = (
        load_corpus(hyper, Path("/nonexistent")) if corpus == "sample" else _web_split()
    )
    held = sample_examples(
        held_chapters,
        tok,
        int(model.config.canvas_length),
        hyper.max_prefix,
        random.Random(seed + 101),
        denoise_examples,
    )
    mode = unigram_mode(train_chapters, tok, hyper)
    log_unigram = _unigram_log_probs(train_chapters, tok, hyper)
    denoise: dict[str, float] = {}
    with torch.inference_mode():
        for t in (0.5, 1.0):
            correct = n = 0
            ce = 0.0
            targets: list[int] = []
            whole: Counter[str] = Counter()
            for i in range(0, len(held), 16):
                c, k, tgt, s, counts = denoising_scores(
                    model,
                    collate(held[i : i + 16], tok.pad_token_id),
                    t,
                    tok.pad_token_id,
                    seed=i,
                    mode_id=mode,
                )
                correct, n, ce = correct + c, n + k, ce + s
                targets.extend(tgt.tolist())
                whole.update(counts)
            denoise[f"heldout_acc_all_t{t}"] = round(whole["model"] / max(1, whole["all"]), 4)
            denoise[f"context_free_acc_all_t{t}"] = round(
                max(whole["identity"], whole["mode"]) / max(1, whole["all"]), 4
            )
            denoise[f"heldout_acc_t{t}"] = round(correct / max(1, n), 4)
            denoise[f"unigram_acc_t{t}"] = round(sum(1 for x in targets if x == mode) / max(1, n), 4)
            denoise[f"heldout_ce_t{t}"] = round(ce / max(1, n), 3)
            denoise[f"unigram_ce_t{t}"] = round(-sum(float(log_unigram[x]) for x in targets) / max(1, n), 3)
    return {
        "model": str(model_dir),
        "drafts": len(texts),
        "english_word_fraction": round(real / max(1, total), 4),
        "words_generated": total,
        "draft_seconds_mean": round(statistics.mean(seconds), 3),
        "draft_seconds_max": round(max(seconds), 3),
        "rewrite_seconds_max": round(max(rewrite_s), 3),
        "infill_seconds_max": round(max(infill_s), 3),
        "denoising": denoise,
        "samples": samples,
    }


def _unigram_log_probs(chapters: Any, tokenizer: Any, hyper: Any) -> Any:
    """Add-one-smoothed log-probabilities of non-pad canvas tokens in training examples (the unigram
    model)."""
    import torch

    from engine.training.examples import sample_examples

    counts = torch.ones(len(tokenizer))
    for e in sample_examples(
        chapters, tokenizer, hyper.canvas_length, hyper.max_prefix, random.Random(hyper.seed + 7), 1024
    ):
        for t in e.target:
            if t != tokenizer.pad_token_id:
                counts[t] += 1
    return (counts / counts.sum()).log()


def _web_split():
    from engine.training import corpus as corpus_mod

    return corpus_mod.split(corpus_mod.load_chapters())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Evaluate a demo model (prints JSON).")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--drafts", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", choices=["web", "sample"], default="web")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    print(json.dumps(run(args.model, args.drafts, args.seed, args.corpus), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
