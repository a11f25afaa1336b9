"""`python -m engine.tools.steps_sweep`: quality and speed of the demo model's drafts per denoising-step
budget.

Why: every step is one forward; a draft that stops at 16 steps settles three times sooner than one that runs
to 48. This runs the same held-out drafts (engine/training/evaluate.py's prompts and English-word measure, the
app's draft length and alternatives) at each step budget and prints the English-word share, mean steps used
and seconds per draft, so the default can be picked where quality stops improving.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def sweep(
    model: Path,
    budgets: list[int],
    drafts: int,
    tokens: int,
    candidates: int,
    seed: int,
    corpus: str = "sample",
) -> list[dict]:
    from engine.api import DenoiseSettings, DraftRequest
    from engine.session import Session
    from engine.training.evaluate import held_out_prompts, load_words, word_stats

    words = load_words()
    session = Session()
    session.load(model, device="cpu")
    prompts = [before for before, _, _ in held_out_prompts(drafts, seed, corpus)]
    rows = []
    for steps in budgets:
        texts, seconds, used = [], [], []
        for i, before in enumerate(prompts):
            settings = DenoiseSettings(max_steps=steps, candidates=candidates, seed=seed + i)
            start = time.perf_counter()
            result = session.run(DraftRequest(before=before, max_new_tokens=tokens, settings=settings))
            seconds.append(time.perf_counter() - start)
            texts.append(result.text)
            used.append(result.stats.steps)
        real, total = word_stats(texts, words)
        rows.append(
            {
                "max_steps": steps,
                "english_word_fraction": round(real / max(1, total), 4),
                "words": total,
                "steps_used_mean": round(statistics.mean(used), 1),
                "seconds_mean": round(statistics.mean(seconds), 3),
                "seconds_max": round(max(seconds), 3),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    from engine.__main__ import default_model_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=default_model_dir())
    parser.add_argument("--steps", default="8,12,16,24,32,48")
    parser.add_argument("--drafts", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=64, help="draft length (the app's default)")
    parser.add_argument("--candidates", type=int, default=3, help="alternatives (the app's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--corpus",
        choices=["sample", "web"],
        default="sample",
        help="held-out prompts: the bundled sample passages, or the web corpus (sword-text-web)",
    )
    args = parser.parse_args(argv)
    rows = sweep(
        args.model,
        [int(s) for s in args.steps.split(",")],
        args.drafts,
        args.tokens,
        args.candidates,
        args.seed,
        args.corpus,
    )
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
