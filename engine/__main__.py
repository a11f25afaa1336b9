"""`python -m engine`: make-tiny, generate, inspect, bench — for tests, benchmarks and people who script.

Every failure is reported as one line (or one JSON object with --jsonl) and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.api import (
    DenoiseSettings,
    DraftRequest,
    EngineError,
    InfillRequest,
    Request,
    RewriteRequest,
    StepEvent,
)

DEFAULT_MODEL = Path(__file__).resolve().parent.parent / "resources" / "models" / "letterpress-demo"


def default_model_dir() -> Path:
    """The model shipped in resources/ (the demo), used when no --model is given."""
    return DEFAULT_MODEL


def _read(path: str | None) -> str:
    return Path(path).read_text(encoding="utf-8") if path else ""


def cmd_make_tiny(args: argparse.Namespace) -> int:
    from engine.tools.tiny import make_tiny

    out = make_tiny(args.dir, seed=args.seed, canvas_length=args.canvas_length)
    print(f"wrote a tiny DiffusionGemma checkpoint to {out}")
    return 0


def build_request(args: argparse.Namespace) -> Request:
    settings = DenoiseSettings(
        max_steps=args.steps, candidates=args.candidates, seed=args.seed if args.seed is not None else 0
    )
    if args.task == "draft":
        return DraftRequest(
            before=_read(args.before_file), instruction=args.instruction or "",
            max_new_tokens=args.max_new_tokens or 128, settings=settings,
        )
    if args.task == "rewrite":
        return RewriteRequest(
            selection=_read(args.selection_file), instruction=args.instruction or "Rewrite it.",
            before=_read(args.before_file), after=_read(args.after_file),
            max_new_tokens=args.max_new_tokens, settings=settings,
        )
    return InfillRequest(
        before=_read(args.before_file), after=_read(args.after_file), instruction=args.instruction or "",
        middle_tokens=args.max_new_tokens, settings=settings,
    )


def cmd_generate(args: argparse.Namespace) -> int:
    emit = _jsonl_printer() if args.jsonl else _live_printer()
    try:
        from engine.session import Session

        session = Session()
        session.load(args.model or default_model_dir(), device=args.device, quantization=args.quantize)
        if args.raw_prompt_file:
            if args.task != "draft":
                raise EngineError("--raw-prompt-file works with --task draft only.")
            result = _raw_draft(session, args, emit)
        else:
            request = build_request(args)
            result = session.run(request, on_step=emit)
            result = {
                "candidates": [{"text": c.text, "token_ids": list(c.token_ids)} for c in result.candidates],
                "forwards": result.stats.forwards,
                "new_tokens": result.stats.new_tokens,
                "seconds": round(result.stats.seconds, 4),
                "notice": result.notice,
            }
    except EngineError as exc:
        if args.jsonl:
            print(json.dumps({"event": "error", "kind": exc.kind, "message": exc.message}), flush=True)
        else:
            print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except OSError as exc:
        message = f"Cannot read an input file: {exc}"
        if args.jsonl:
            print(json.dumps({"event": "error", "kind": "input_error", "message": message}), flush=True)
        else:
            print(f"error: {message}", file=sys.stderr)
        return 2
    if args.jsonl:
        print(json.dumps({"event": "done", **result}, ensure_ascii=False), flush=True)
    else:
        sys.stdout.write("\n")
        for i, cand in enumerate(result["candidates"]):
            label = f"[{i + 1}/{len(result['candidates'])}] " if len(result["candidates"]) > 1 else ""
            print(f"{label}{cand['text']}")
        print(
            f"-- {result['new_tokens']} tokens, {result['forwards']} forwards, {result['seconds']:.2f} s",
            file=sys.stderr,
        )
    return 0


def _raw_draft(session: Any, args: argparse.Namespace, emit: Any) -> dict[str, Any]:
    """A draft from an untemplated prompt (`tokenizer(text)`), the same input `model.generate()` would get."""
    import torch

    from engine.denoise import denoise

    tok, model = session.tokenizer, session.model
    ids = tok(_read(args.raw_prompt_file), return_tensors="pt").input_ids.to(model.device)
    settings = DenoiseSettings(max_steps=args.steps, seed=args.seed or 0)
    start = time.perf_counter()
    gen = model.generation_config
    eos = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    pad = gen.pad_token_id if gen.pad_token_id is not None else 0

    def on_step(state: Any) -> None:
        ids_now = session._text.visible_ids(state.argmax[0].tolist())
        emit(StepEvent(0, state.step, settings.max_steps, state.block, ()), text=session._text.text(ids_now))

    with torch.inference_mode():
        out = denoise(
            model, ids, settings, max_new_tokens=args.max_new_tokens or 256, eos_token_ids=eos, pad_token_id=pad,
            seed=settings.seed or 0, on_step=on_step,
        )
    new = out.sequences[0, out.prompt_length :].tolist()
    while new and new[-1] == pad:
        new.pop()
    text = tok.decode(session._text.visible_ids(new), skip_special_tokens=True)
    return {
        "candidates": [{"text": text, "token_ids": new}],
        "forwards": out.forwards,
        "new_tokens": len(new),
        "seconds": round(time.perf_counter() - start, 4),
    }


def _jsonl_printer() -> Any:
    def emit(event: StepEvent, text: str | None = None) -> None:
        views = [text] if text is not None else [c.text for c in event.candidates]
        for i, view in enumerate(views):
            line = {"event": "step", "candidate": i, "step": event.step, "block": event.block, "text": view}
            print(json.dumps(line, ensure_ascii=False), flush=True)

    return emit


def _live_printer() -> Any:
    """Redraw the current best text in place, like the ghost text in the editor."""
    interactive = sys.stdout.isatty()

    def emit(event: StepEvent, text: str | None = None) -> None:
        shown = text if text is not None else event.text
        if interactive:
            sys.stdout.write("\x1b[2K\r" + f"[step {event.step:>2}] " + shown.replace("\n", " ")[-100:])
            sys.stdout.flush()

    return emit


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    tiny = sub.add_parser("make-tiny", help="write a tiny random-weight DiffusionGemma checkpoint")
    tiny.add_argument("dir")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument("--canvas-length", type=int, default=32)
    tiny.set_defaults(func=cmd_make_tiny)

    gen = sub.add_parser("generate", help="draft, rewrite or infill with a local checkpoint")
    gen.add_argument("--model", default=None, help="checkpoint folder (default: the shipped demo model)")
    gen.add_argument("--task", choices=["draft", "rewrite", "infill"], default="draft")
    gen.add_argument("--before-file")
    gen.add_argument("--selection-file")
    gen.add_argument("--after-file")
    gen.add_argument("--instruction")
    gen.add_argument("--raw-prompt-file")
    gen.add_argument("--max-new-tokens", type=int, default=None)
    gen.add_argument("--steps", type=int, default=48)
    gen.add_argument("--candidates", type=int, default=1)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    gen.add_argument("--quantize", choices=["auto", "nf4", "none"], default="auto")
    gen.add_argument("--jsonl", action="store_true")
    gen.set_defaults(func=cmd_generate)

    for name, module, func, help_text in (
        ("inspect", "engine.tools.inspect_report", "main_inspect", "load a checkpoint as the app would and report memory"),
        ("bench", "engine.tools.bench", "main_bench", "benchmark the engine against model.generate()"),
        ("make-real-shape", "engine.tools.real_shape", "main_make_real_shape", "write a checkpoint with 26B-A4B shapes"),
    ):
        p = sub.add_parser(name, help=help_text, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=_delegate(module, func))
    return parser


def _delegate(module: str, func: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(module), func)(args.rest))

    return run


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # Delegated commands parse their own options; argparse's REMAINDER misses a leading "--option", so collect
    # what the top-level parser does not know and hand it on in order.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        if not hasattr(args, "rest"):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.rest = _in_order(list(sys.argv[1:] if argv is None else argv), unknown, args.rest)
    return int(args.func(args))


def _in_order(argv: list[str], unknown: list[str], rest: list[str]) -> list[str]:
    """The delegated command's arguments as typed: everything after the command name (the first word that is
    not an option; the top-level parser has no options of its own besides -h)."""
    for i, item in enumerate(argv):
        if not item.startswith("-"):
            return argv[i + 1 :]
    return unknown + rest


if __name__ == "__main__":
    sys.exit(main())
