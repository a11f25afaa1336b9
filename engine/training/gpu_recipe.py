"""One unattended GPU run: `python -m engine.training.gpu_recipe --out DIR --minutes 10`.

Why one command: a GPU is lent to a session now and then, for minutes, with nobody watching. In `--minutes`:
1. generate (about 40% of the time, when the teacher's GGUF is found): `corpus_gen` on the GPU in bfloat16,
   large batches, seed 1 (new items, never the CPU corpus's), into DIR/corpus;
2. train (about 45%): `train.run` on the committed corpus (`engine/training/teacher_corpus/*`, or
   --corpus-dir) plus what step 1 wrote, a larger demo (hidden 512, 6 layers), the step count fitted to the
   time left after a measured probe so the cosine schedule ends when the time does;
3. judge: `engine.training.judge` on the new model beside today's demo (teacher figures when it was found).
Everything goes to DIR: corpus/, run/ (state, log, model/), judge.json, figures.json (the summary, with the
time each phase took), recipe.log. Rerunning with the same DIR resumes (the corpus and the run are resumable).
`--dry-run` does the same on the CPU with a tiny model and a few minutes, to prove the path before a GPU
comes.

On the lent machine (engine.training.gpu_recipe_envelope): gpu-check's preflight runs first and stops the
recipe with its one sentence when a package is missing; `--minutes` is at most 8 (default 6: the whole call);
DIR/return holds what the machine can send back (figures, judge, log, the model as tar.gz parts). Carry it
with `python -m engine gpu-check --prepare CARRY` and start it there with
`bash CARRY/run.sh --module engine.training.gpu_recipe --out DIR`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

TEACHER_CORPUS = (
    Path(__file__).resolve().parent / "teacher_corpus"
)  # the committed chunks, one folder a backend
TODAYS_DEMO = Path("resources/models/letterpress-demo")


def _log(out: Path, message: str) -> None:
    line = f"{time.strftime('%H:%M:%S')} {message}"
    print(line, flush=True)
    with (out / "recipe.log").open("a") as handle:
        handle.write(line + "\n")


def generate(out: Path, teacher: Path, minutes: float, device: str, dry_run: bool) -> dict[str, Any]:
    from engine.training import corpus_gen

    args = [
        "--out",
        str(out / "corpus"),
        "--seed",
        "1",
        "--teacher",
        str(teacher),
        "--device",
        device,
        "--max-minutes",
        str(minutes),
    ]
    args += (
        ["--chunk-size", "2", "--batch-size", "2", "--chunks", "1"]
        if dry_run
        else ["--chunk-size", "256", "--batch-size", "256"]
    )
    t0 = time.time()
    corpus_gen.main(args)
    chunks = len(list((out / "corpus").glob("chunk-*.jsonl.gz")))
    return {"seconds": round(time.time() - t0), "chunks": chunks}


def fitted_steps(out: Path, h: Any, minutes: float, device: str) -> tuple[int, float]:
    """Steps that fit in `minutes`, from the time of a short probe run (thrown away)."""
    from engine.training.train import run

    probe = replace(h, steps=6, eval_examples=4)
    t0 = time.time()
    run(out / "probe", probe, log_every=100, eval_every=10_000, save_every=10_000, quiet=True, device=device)
    per_step = max(1e-3, (time.time() - t0) / probe.steps)
    return max(4, int(minutes * 60 / per_step * 0.9)), per_step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=6, help="the whole call's budget (at most 8)")
    parser.add_argument("--corpus-dir", type=Path, action="append", default=[])
    parser.add_argument("--teacher", help="the teacher's GGUF (default: found as corpus_gen finds it)")
    parser.add_argument("--no-generate", action="store_true")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model: prove the path")
    args = parser.parse_args(argv)
    from engine.training.gpu_recipe_envelope import (
        RecipeEnvelopeError,
        check_minutes,
        pack_return,
        preflight_or_reason,
    )

    try:
        check_minutes(args.minutes)
    except RecipeEnvelopeError as exc:
        parser.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    first, reason = preflight_or_reason(dry_run=args.dry_run)
    if reason is not None:
        (args.out / "figures.json").write_text(json.dumps({"preflight": first}, indent=2) + "\n")
        sys.stderr.write(reason + "\n")
        return 2

    import torch

    from engine.training import judge
    from engine.training.teacher import TeacherUnavailableError, find_teacher
    from engine.training.train import Hyper, run

    started = time.time()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    torch.set_num_threads(1 if device == "cpu" else max(1, torch.get_num_threads()))
    figures: dict[str, Any] = {
        "device": device,
        "minutes": args.minutes,
        "dry_run": args.dry_run,
        "preflight": first["line"],
    }
    if device == "cuda":
        figures["gpu"] = torch.cuda.get_device_name(0)
    _log(out, f"device {device}, {args.minutes} minutes")
    corpus_dirs = args.corpus_dir or sorted(p.parent for p in TEACHER_CORPUS.glob("*/manifest.json"))
    teacher = None
    try:
        teacher = find_teacher(args.teacher, cache=out / "teacher")
    except TeacherUnavailableError as exc:
        _log(out, f"no teacher: {exc} (training on the committed corpus only)")
    if teacher is not None and not args.no_generate:
        figures["generate"] = generate(out, teacher, args.minutes * 0.4, device, args.dry_run)
        _log(out, f"generated: {figures['generate']}")
    if (out / "corpus" / "manifest.json").is_file():
        corpus_dirs = [*corpus_dirs, out / "corpus"]

    if args.dry_run:
        h = Hyper(
            seed=0,
            batch_size=4,
            warmup=2,
            vocab_size=600,
            hidden_size=64,
            layers=2,
            experts=2,
            top_k=1,
            eval_examples=8,
            corpus="teacher",
            corpus_dirs=",".join(map(str, corpus_dirs)),
        )
    else:
        h = Hyper(
            seed=0,
            batch_size=64,
            lr=1e-3,
            warmup=200,
            hidden_size=512,
            layers=6,
            eval_examples=256,
            corpus="teacher",
            corpus_dirs=",".join(map(str, corpus_dirs)),
        )
    state = out / "run" / "state.pt"
    if state.is_file():  # resuming: keep the planned steps
        h = replace(h, steps=torch.load(state, weights_only=True, map_location="cpu")["hyper"]["steps"])
    else:
        left = args.minutes - (time.time() - started) / 60
        steps, per_step = fitted_steps(out, h, left * 0.75, device)
        h = replace(h, steps=steps)
        figures["probe_seconds_per_step"] = round(per_step, 4)
    _log(out, f"training {h.steps} steps: {asdict(h)}")
    t0 = time.time()
    left = args.minutes - (time.time() - started) / 60
    metrics = run(
        out / "run",
        h,
        log_every=50,
        eval_every=max(50, h.steps // 4),
        save_every=100,
        max_minutes=max(0.2, left * 0.8),
        quiet=True,
        device=device,
    )
    figures["train"] = {"seconds": round(time.time() - t0), "steps": h.steps, "metrics": metrics}
    _log(out, f"trained: {figures['train']}")

    models = [out / "run" / "model", TODAYS_DEMO] if TODAYS_DEMO.is_dir() else [out / "run" / "model"]
    count = 3 if args.dry_run else None
    results = [judge.run_model(m, *((count, count) if count else ())) for m in models]
    report = judge.judge(models, corpus_dirs, None if args.dry_run else teacher, results=results)
    (out / "judge.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    figures["judge"] = {m: r["figures"] for m, r in report["models"].items()}
    if report.get("note"):  # e.g. no word list on the machine: the figure it gives is left out, and why
        figures["judge_note"] = report["note"]
        _log(out, f"judge: {report['note']}")
    figures["seconds"] = round(time.time() - started)
    (out / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    _log(out, f"done in {figures['seconds']} s: {json.dumps(figures['judge'])}")
    returned = pack_return(out)
    _log(out, f"written back: {', '.join(p.name for p in returned)} in {out / 'return'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
