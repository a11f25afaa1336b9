"""How much of the writer's text a rewrite keeps, by rewrite strength: `python -m engine.tools.strength_eval`.

For every selection, seed and strength S it runs the engine's own `Session` (prompt builder, warm-started
canvas, denoising loop, default sampler settings) on a `RewriteRequest(strength=S)` and scores

    kept = LCS(selection words, rewrite words) / selection words

(the longest common subsequence of whitespace-separated words, compared exactly: a word counts as kept only if
it is unchanged, punctuation included, and in order). It prints one JSON object (per-strength mean, median,
min, and the per-selection figures) and, with `--markdown`, a table for the docs. The expectation it checks
(`--check`): kept falls as S rises and stays above 0.6 at S = 0.2.

The selections are short passages written for this measurement (plain English prose, the project's own text);
the instructions cycle through the rewrite presets.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SELECTIONS: tuple[str, ...] = (
    "The committee met on Tuesday and agreed that the budget for next year should be cut by a tenth.",
    "She walked to the station in the rain, because the last bus had already left without her.",
    "Our results show that the new method is faster than the old one on every data set we tried.",
    "He opened the letter slowly, read it twice, and then put it back in the drawer.",
    "The bridge was closed for repairs, so the trucks had to take the long road around the lake.",
    "In the morning the market fills with farmers selling bread, cheese and fresh vegetables.",
    "If you want to change your password, open the settings page and choose a new one.",
    "The old house at the end of the street has been empty for many years.",
    "They planted trees along the river to keep the soil from washing away in the spring floods.",
    "Please send me the report by Friday so that I can read it before the meeting.",
    "The children ran out of the school and into the yard as soon as the bell rang.",
    "After the storm the village was quiet, and the people came out to look at the damage.",
    "The king gave his son a sword and told him to guard the gate of the city.",
    "Water boils at a lower temperature high in the mountains, where the air is thin.",
    "We have decided to move the office to a larger building near the centre of town.",
    "The doctor said that he should rest for a week and drink plenty of water.",
    "A small boat was tied to the dock, rocking gently on the grey water.",
    "The people gathered in the square to hear what the messenger had to say.",
    "Most of the books in the library were donated by families who lived in the town.",
    "The engine failed just after take-off, and the pilot turned back toward the airport.",
    "Nobody knew where the path led, but everyone agreed that it was worth following.",
    "The farmer counted his sheep every evening before he closed the gate for the night.",
    "Her first novel was rejected by six publishers before a small press accepted it.",
    "The lamp in the window burned all night, a sign that someone was still awake.",
)
PRESETS: tuple[str, ...] = ("grammar", "simplify", "formal", "shorter", "freely", "casual")
STRENGTHS: tuple[float, ...] = (0.2, 0.5, 1.0)


def lcs_words(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two word lists (exact word equality)."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def kept_share(selection: str, rewrite: str) -> float:
    """LCS of words / selection words: 1.0 keeps every word in order, 0.0 keeps none."""
    words = selection.split()
    return lcs_words(words, rewrite.split()) / len(words) if words else 0.0


def measure(
    model_dir: str | Path,
    *,
    seeds: int = 3,
    strengths: tuple[float, ...] = STRENGTHS,
    selections: tuple[str, ...] = SELECTIONS,
    device: str = "cpu",
) -> dict[str, Any]:
    from engine.api import REWRITE_PRESETS, DenoiseSettings, RewriteRequest
    from engine.session import Session

    session = Session()
    info = session.load(model_dir, device=device)  # type: ignore[arg-type]
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for i, selection in enumerate(selections):
        preset = PRESETS[i % len(PRESETS)]
        for seed in range(seeds):
            for strength in strengths:
                request = RewriteRequest(
                    selection=selection,
                    instruction=REWRITE_PRESETS[preset],
                    strength=strength,
                    settings=DenoiseSettings(seed=seed),
                )
                result = session.run(request)
                rows.append(
                    {
                        "selection": i,
                        "preset": preset,
                        "seed": seed,
                        "strength": strength,
                        "kept": round(kept_share(selection, result.text), 4),
                        "steps": result.stats.steps,
                        "text": result.text,
                    }
                )
    summary = {}
    for strength in strengths:
        values = [r["kept"] for r in rows if r["strength"] == strength]
        steps = [r["steps"] for r in rows if r["strength"] == strength]
        summary[f"{strength:g}"] = {
            "mean": round(statistics.fmean(values), 4),
            "median": round(statistics.median(values), 4),
            "min": round(min(values), 4),
            "max": round(max(values), 4),
            "runs": len(values),
            "mean_steps": round(statistics.fmean(steps), 1),
        }
    return {
        "model": info.name,
        "model_dir": str(model_dir),
        "device": info.device,
        "selections": len(selections),
        "seeds": seeds,
        "metric": "LCS(selection words, rewrite words) / selection words",
        "summary": summary,
        "seconds": round(time.perf_counter() - start, 1),
        "runs": rows,
    }


def check(report: dict[str, Any]) -> list[str]:
    """What the issue asks of the figures; an empty list when all hold."""
    means = [report["summary"][k]["mean"] for k in sorted(report["summary"], key=float)]
    problems = []
    if any(a <= b for a, b in itertools.pairwise(means)):
        problems.append(f"kept share does not fall as strength rises: {means}")
    light = report["summary"].get("0.2")
    if light is not None and light["mean"] <= 0.6:
        problems.append(f"kept share at 0.2 is {light['mean']}, not above 0.6")
    return problems


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| strength | words kept in order (mean) | median | min | max | mean steps | runs |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(report["summary"], key=float):
        s = report["summary"][key]
        lines.append(
            f"| {key} | {s['mean']:.3f} | {s['median']:.3f} | {s['min']:.3f} | {s['max']:.3f} | "
            f"{s['mean_steps']} | {s['runs']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from engine.__main__ import default_model_dir

    parser = argparse.ArgumentParser(prog="python -m engine.tools.strength_eval", description=__doc__)
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the shipped demo model)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu")
    parser.add_argument("--out", help="also write the JSON report here")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table instead of JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the figures meet the expectation")
    args = parser.parse_args(argv)
    report = measure(args.model or default_model_dir(), seeds=args.seeds, device=args.device)
    text = json.dumps(report, indent=1, ensure_ascii=False)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(
        markdown(report)
        if args.markdown
        else json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1)
    )
    problems = check(report)
    for problem in problems:
        print(f"check failed: {problem}", file=sys.stderr)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
