"""Judge demo models against the teacher: `python -m engine.training.judge --model DIR [--model DIR2 ...]`.

Why these measures (issue 25): a writer trying the demo notices word salad, drafts that ignore the document,
Fix grammar that damages correct text, and rewrites of the wrong length. So, on prompts no training saw
(`engine.training.judge_prompts`), through the engine's own Session (prompt builder, sampler, default
settings):
- teacher perplexity: the teacher's per-token perplexity of each model's 64-token drafts *given the opening*,
  beside the same measure of held-out corpus text (a held-out story's rest given its first two sentences), and
  their ratio (target <= 3);
- english_word_share: drafted words found in Debian's `wamerican` list (target >= 97%);
- grammar_unchanged: of 30 already-correct sentences, the share Fix grammar at strength 0.2 returns unchanged
  (whitespace-trimmed; target >= 80%);
- rewrite_length_ok: full-strength rewrites (strength 1.0, the length-neutral presets in turn) whose word
  count is 0.5-2x the selection's (target >= 90%);
- draft_seconds: how long a draft takes to settle here (one thread; target <= 1 s).
Prints (and with --out writes) JSON with the figures and verbatim samples per model.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from engine.training.evaluate import WordListMissingError, load_words, word_stats
from engine.training.judge_prompts import CORRECT_SENTENCES, OPENINGS

LENGTH_PRESETS = ("freely", "formal", "casual", "simplify")
DRAFT_TOKENS = 64
TARGETS = {"ppl_ratio": 3.0, "english_word_share": 0.97, "grammar_unchanged": 0.8, "rewrite_length_ok": 0.9}


def run_model(
    model_dir: Path, drafts: int = len(OPENINGS), sentences: int = len(CORRECT_SENTENCES)
) -> dict[str, Any]:
    """Drafts, grammar passes and full-strength rewrites of one model (no teacher needed yet)."""
    from engine.session import Session

    session = Session()
    session.load(model_dir, device="cpu")
    return run_engine(session, str(model_dir), drafts, sentences)


def run_engine(
    engine: Any, name: str, drafts: int, sentences: int, *, canvas_control: bool = True
) -> dict[str, Any]:
    """`run_model`'s record from any engine with `run(request)` (a Session, a server's engine). With
    `canvas_control` each request carries its seed and the grammar pass its low strength; a text-tier server
    takes neither, so its requests go with the defaults."""
    from engine.api import REWRITE_PRESETS, DenoiseSettings, DraftRequest, RewriteRequest

    def settings(i: int) -> dict[str, Any]:
        return {"settings": DenoiseSettings(seed=i)} if canvas_control else {}

    def rewrite(sentence: str, preset: str, strength: float, i: int) -> str:
        extra = {"strength": strength, **settings(i)} if canvas_control else {}
        request = RewriteRequest(selection=sentence, instruction=REWRITE_PRESETS[preset], **extra)
        return str(engine.run(request).text)

    out: dict[str, Any] = {"model": name, "drafts": [], "grammar": [], "rewrites": []}
    seconds = []
    for i, opening in enumerate(OPENINGS[:drafts]):
        t0 = time.perf_counter()
        result = engine.run(DraftRequest(before=opening, max_new_tokens=DRAFT_TOKENS, **settings(i)))
        seconds.append(time.perf_counter() - t0)
        out["drafts"].append({"opening": opening, "draft": result.text})
    for i, sentence in enumerate(CORRECT_SENTENCES[:sentences]):
        fixed = rewrite(sentence, "grammar", 0.2, i)
        out["grammar"].append({"sentence": sentence, "fixed": fixed, "unchanged": fixed.strip() == sentence})
        preset = LENGTH_PRESETS[i % len(LENGTH_PRESETS)]
        rewritten = rewrite(sentence, preset, 1.0, i)
        ratio = len(rewritten.split()) / max(1, len(sentence.split()))
        out["rewrites"].append(
            {
                "preset": preset,
                "selection": sentence,
                "rewrite": rewritten,
                "ratio": round(ratio, 2),
                "ok": 0.5 <= ratio <= 2.0,
            }
        )
    out["draft_seconds_mean"] = round(statistics.mean(seconds), 3)
    out["draft_seconds_max"] = round(max(seconds), 3)
    return out


def perplexity(scores: list[tuple[float, int]]) -> float:
    nll = sum(s for s, _ in scores)
    n = sum(k for _, k in scores)
    return round(math.exp(nll / max(1, n)), 2) if n else float("nan")


def held_out_pairs(corpus_dirs: list[Path], count: int) -> list[tuple[str, str]]:
    """(first two sentences, the rest) of held-out corpus stories; the judge's openings' true continuations
    when the corpus has none yet are not available, so the figure is only as good as the held-out set is
    large."""
    from engine.training import story_corpus
    from engine.training.corpus import sentences

    _, held = story_corpus.load(corpus_dirs)
    pairs = []
    for story in held.stories[:count]:
        sents = sentences(story.text)
        pairs.append((" ".join(sents[:2]), " " + " ".join(sents[2:])))
    return pairs


def figures(
    result: dict[str, Any], teacher: Any, words: set[str] | None, reference_ppl: float | None
) -> dict[str, Any]:
    """A model's figures; the real-word share is None without a word list (`words` None)."""
    drafts = [d["draft"] for d in result["drafts"]]
    real, total = word_stats(drafts, words or set())  # without a list: the same word count, none real
    fig: dict[str, Any] = {
        "english_word_share": round(real / max(1, total), 4) if words is not None else None,
        "words": total,
        "grammar_unchanged": round(
            sum(g["unchanged"] for g in result["grammar"]) / max(1, len(result["grammar"])), 4
        ),
        "rewrite_length_ok": round(
            sum(r["ok"] for r in result["rewrites"]) / max(1, len(result["rewrites"])), 4
        ),
        "rewrite_ratio_median": round(statistics.median([r["ratio"] for r in result["rewrites"]]), 2)
        if result["rewrites"]
        else None,
        "draft_seconds_mean": result["draft_seconds_mean"],
        "draft_seconds_max": result["draft_seconds_max"],
    }
    if teacher is not None:
        scores = teacher.score(
            [(d["opening"], " " + d["draft"].strip()) for d in result["drafts"] if d["draft"].strip()]
        )
        fig["teacher_ppl_drafts"] = perplexity(scores)
        if reference_ppl:
            fig["teacher_ppl_heldout_corpus"] = reference_ppl
            fig["ppl_ratio"] = round(fig["teacher_ppl_drafts"] / reference_ppl, 2)
    fig["targets_met"] = {
        k: (fig[k] <= v if k == "ppl_ratio" else fig[k] >= v)
        for k, v in TARGETS.items()
        if fig.get(k) is not None
    }
    return fig


def judge(
    models: list[Path],
    corpus_dirs: list[Path],
    teacher_path: Path | None,
    held_out: int = 40,
    backend: str = "hf",
    results: list[dict[str, Any]] | None = None,
    drafts: int = len(OPENINGS),
    sentences: int = len(CORRECT_SENTENCES),
) -> dict[str, Any]:
    """Figures for `models` (or for earlier `results`, re-scored without re-running the models)."""
    words: set[str] | None = None
    report_note = ""
    try:
        words = load_words()
    except WordListMissingError as exc:  # the trained models and every other figure are still worth having
        report_note = str(exc)
    results = results if results is not None else [run_model(m, drafts, sentences) for m in models]
    teacher = reference = None
    report: dict[str, Any] = {"models": {}, **({"note": report_note} if report_note else {})}
    if teacher_path is not None:
        from engine.training import teacher as teacher_mod

        teacher = teacher_mod.load_teacher(teacher_path, backend)
        pairs = held_out_pairs(corpus_dirs, held_out) if corpus_dirs else []
        if pairs:
            reference = perplexity(teacher.score(pairs))
            report["heldout_corpus"] = {"stories": len(pairs), "teacher_ppl": reference}
    for result in results:
        entry = {"figures": figures(result, teacher, words, reference), **result}
        record = Path(result["model"]) / "training.json"
        if record.is_file():  # how much it was trained: the x axis of a curve
            rec = json.loads(record.read_text())
            hyper, step = rec.get("hyperparameters", {}), rec.get("metrics", {}).get("step", 0)
            entry["figures"]["step"] = step
            entry["figures"]["canvas_tokens"] = (
                step * hyper.get("batch_size", 0) * hyper.get("canvas_length", 0)
            )
        report["models"][result["model"]] = entry
    return report


def markdown(entry: dict[str, Any], count: int = 10) -> str:
    """A model's figures and `count` verbatim drafts, Fix grammar passes and full-strength rewrites, for a
    README."""
    f = entry["figures"]
    lines = ["| measure | value | target |", "| --- | --- | --- |"]
    if "ppl_ratio" in f:
        lines.append(
            f"| teacher perplexity of drafts / of held-out corpus text | {f['teacher_ppl_drafts']} / "
            f"{f['teacher_ppl_heldout_corpus']} = {f['ppl_ratio']}x | <= 3x |"
        )
    share = f["english_word_share"]
    lines += [
        "| real English words in drafts (wamerican) | "
        f"{'not measured (no word list)' if share is None else f'{share:.1%}'} of {f['words']} | >= 97% |",
        "| Fix grammar at 0.2 returns a correct sentence "
        f"unchanged | {f['grammar_unchanged']:.0%} | >= 80% |",
        (
            f"| full-strength rewrites 0.5-2x the selection's words | {f['rewrite_length_ok']:.0%} "
            f"(median {f['rewrite_ratio_median']}x) | >= 90% |"
        ),
        (
            f"| seconds per 64-token draft here, mean / max | {f['draft_seconds_mean']} / "
            f"{f['draft_seconds_max']} | <= 1 s |"
        ),
        "",
        "Drafts (the opening, then **the model's continuation**):",
        "",
    ]
    for d in entry["drafts"][:count]:
        lines.append(f"- {d['opening']} **{' '.join(d['draft'].split())}**")
    lines += ["", "Fix grammar at strength 0.2 on correct sentences (unchanged = kept):", ""]
    for g in entry["grammar"][:count]:
        lines.append(
            f"- {g['sentence']} -> {' '.join(g['fixed'].split())}" + (" (kept)" if g["unchanged"] else "")
        )
    lines += ["", "Full-strength rewrites (preset, word ratio):", ""]
    for r in entry["rewrites"][:count]:
        lines.append(f"- {r['preset']}, {r['ratio']}x: {r['selection']} -> {' '.join(r['rewrite'].split())}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, action="append", default=[])
    parser.add_argument(
        "--rescore", type=Path, help="a report written by --out: re-score its outputs (teacher)"
    )
    parser.add_argument("--corpus-dir", type=Path, action="append", default=[])
    parser.add_argument("--teacher", help="the teacher's GGUF (default: found as corpus_gen finds it)")
    parser.add_argument("--no-teacher", action="store_true", help="skip the perplexity figures")
    parser.add_argument("--held-out", type=int, default=40, help="held-out corpus stories for the reference")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--drafts", type=int, default=len(OPENINGS))
    parser.add_argument("--sentences", type=int, default=len(CORRECT_SENTENCES))
    parser.add_argument("--curve", type=Path, help="a training run folder: judge each of its exports/step-*")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--markdown", type=Path, help="also write each model's figures and samples as Markdown"
    )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    teacher_path = None
    if not args.no_teacher:
        from engine.training.teacher import find_teacher

        cache = args.corpus_dir[0].parent / "teacher" if args.corpus_dir else None
        teacher_path = find_teacher(args.teacher, cache=cache)
    earlier = None
    if args.rescore:
        old = json.loads(args.rescore.read_text(encoding="utf-8"))["models"]
        earlier = [{k: v for k, v in r.items() if k != "figures"} for r in old.values()]
    if args.curve:
        args.model += sorted((args.curve / "exports").glob("step-*"))
    if not args.model and earlier is None:
        parser.error("give --model DIR (or --rescore REPORT, or --curve RUN)")
    report = judge(
        args.model,
        args.corpus_dir,
        teacher_path,
        args.held_out,
        results=earlier,
        drafts=args.drafts,
        sentences=args.sentences,
    )
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(
            "".join(f"### {m}\n\n{markdown(r)}\n" for m, r in report["models"].items()), encoding="utf-8"
        )
    summary = {m: r["figures"] for m, r in report["models"].items()}
    print(json.dumps({"heldout_corpus": report.get("heldout_corpus"), "figures": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
