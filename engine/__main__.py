"""`python -m engine`: make-tiny, generate, inspect, bench — for tests, benchmarks and people who script.

Every failure is reported as one line (or one JSON object with --jsonl) and a non-zero exit, never a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from engine.api import (
    MAX_STRENGTH,
    MIN_STRENGTH,
    DenoiseSettings,
    DraftRequest,
    EmptyRequestError,
    EngineError,
    InfillRequest,
    Request,
    RewriteRequest,
    StepEvent,
    UnsupportedModelError,
    WarmStart,
)
from engine.declared import REFERENCE_STEPS, default_steps
from engine.resources import demo_model_dir

MAX_NEW_TOKENS = 1_048_576  # far beyond any context; the session refuses what does not fit with a sentence
MAX_STEPS = 10_000
MAX_CANDIDATES = 64
DEFAULT_MODEL = demo_model_dir()


def default_model_dir() -> Path:
    """The model shipped in resources/ (the demo), used when no --model is given."""
    return DEFAULT_MODEL


MAX_INPUT_BYTES = 64 * 1024**2  # an input file larger than this is not a prompt (the context is ~128K tokens)


class OutputClosedError(EngineError):
    """Whoever reads standard output closed it (`| head -c 1`): the command stops quietly (exit 141)."""

    kind = "output_closed"


class InputFileError(EngineError):
    """An input file that cannot be used: missing, a folder, unreadable, too big, or not UTF-8 text."""

    kind = "input_error"


def _read(path: str | None) -> str:
    """An input file's text: read with a cap, decoded as UTF-8, every failure a sentence naming the file."""
    if not path:
        return ""
    file = Path(path).expanduser()
    try:
        if file.is_dir():
            raise InputFileError(f"{file} is a folder; give a text file.")
        with file.open("rb") as fh:  # in chunks: a pipe or a growing file is read up to the cap, never beyond
            chunks: list[bytes] = []
            total = 0
            while total <= MAX_INPUT_BYTES and (chunk := fh.read(1 << 20)):
                chunks.append(chunk)
                total += len(chunk)
            raw = b"".join(chunks)
    except FileNotFoundError:
        raise InputFileError(f"The input file {file} does not exist.") from None
    except PermissionError:
        raise InputFileError(f"The input file {file} cannot be read (permission denied).") from None
    except OSError as exc:
        raise InputFileError(
            f"The input file {file} cannot be read ({exc.strerror or type(exc).__name__})."
        ) from None
    if len(raw) > MAX_INPUT_BYTES:
        raise InputFileError(
            f"The input file {file} is larger than {MAX_INPUT_BYTES // 1024**2} MB; give a shorter "
            "text (the model reads at most about 128K tokens)."
        )
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"The input file {file} is not UTF-8 text (byte {exc.start} is 0x{raw[exc.start]:02x}); it looks "
            f"like {_guess_encoding(raw)}. Save it as UTF-8 (for example: iconv -f {_iconv_name(raw)} -t "
            f"UTF-8 '{file}' > fixed.txt) and try again."
        ) from None


def _guess_encoding(raw: bytes) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text (it starts with a UTF-16 byte-order mark)"
    if raw.count(b"\0") > len(raw) // 4:
        return "UTF-16 text, or binary data"
    try:
        raw.decode("cp1252")
        return "Windows-1252 / Latin-1 text"
    except UnicodeDecodeError:
        return "binary data or an 8-bit encoding"


def _iconv_name(raw: bytes) -> str:
    return (
        "UTF-16"
        if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or raw.count(b"\0") > len(raw) // 4
        else "CP1252"
    )


def _bounded_int(low: int, high: int) -> Any:
    """An argparse type: a whole number from `low` to `high`, refused with a sentence otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; give a number from {low} to {high:,}")
        return value

    parse.__name__ = "number"
    return parse


def cmd_make_tiny(args: argparse.Namespace) -> int:
    from engine.tools.tiny import make_tiny

    out = make_tiny(args.dir, seed=args.seed, canvas_length=args.canvas_length)
    print(f"wrote a tiny DiffusionGemma checkpoint to {out}")
    return 0


def build_request(args: argparse.Namespace) -> Request:
    check_combination(args)
    settings = DenoiseSettings(
        max_steps=args.steps if args.steps is not None else DenoiseSettings().max_steps,
        candidates=args.candidates,
        seed=args.seed if args.seed is not None else 0,
    )
    warm = warm_start_from_args(args)
    strength = getattr(args, "strength", None)
    if args.task == "draft":
        return DraftRequest(
            before=_read(args.before_file),
            instruction=args.instruction or "",
            max_new_tokens=args.max_new_tokens or 128,
            settings=settings,
            canvas=warm,
        )
    if args.task == "rewrite":
        selection = _read(args.selection_file)
        if not selection.strip():
            raise EmptyRequestError(
                f"The selection file {args.selection_file} holds no text; --task rewrite "
                "rewrites the text in --selection-file."
            )
        return RewriteRequest(
            selection=selection,
            instruction=args.instruction or "Rewrite it.",
            before=_read(args.before_file),
            after=_read(args.after_file),
            max_new_tokens=args.max_new_tokens,
            settings=settings,
            strength=strength if strength is not None else MAX_STRENGTH,
            canvas=warm,
        )
    return InfillRequest(
        before=_read(args.before_file),
        after=_read(args.after_file),
        instruction=args.instruction or "",
        middle_tokens=args.max_new_tokens,
        settings=settings,
        canvas=warm,
    )


def check_combination(args: argparse.Namespace) -> None:
    """Refuse, with a sentence, every combination of options that cannot do what was asked, before any file or
    model is read (an option that would be silently ignored is such a combination)."""
    task = args.task
    strength = getattr(args, "strength", None)
    if strength is not None:
        if task != "rewrite":
            raise EngineError(
                "--strength works with --task rewrite only (it is the share of the selection re-noised)."
            )
        if getattr(args, "init_file", None):
            raise EngineError(
                "--strength and --init-file both set the starting canvas, so one would be ignored; "
                "use --strength alone, or --init-file with --noise (the share of it re-noised)."
            )
        if not MIN_STRENGTH <= strength <= MAX_STRENGTH:
            raise EngineError(
                f"--strength must be between {MIN_STRENGTH} and {MAX_STRENGTH} (1.0 rewrites from "
                "pure noise)."
            )
    if task == "rewrite" and not args.selection_file:
        raise EmptyRequestError("--task rewrite needs --selection-file (the text to rewrite).")
    if task != "rewrite" and args.selection_file:
        raise EngineError(f"--selection-file works with --task rewrite only; --task {task} would ignore it.")
    if task == "infill" and not args.after_file:
        raise EngineError(
            "--task infill needs --after-file (the text after the gap, kept as it is); to continue "
            "a text with no fixed ending, use --task draft."
        )
    if task == "draft" and args.after_file:
        raise EngineError(
            "--after-file works with --task infill or rewrite; a draft continues --before-file and "
            "would ignore it (use --task infill to fill the gap before it)."
        )


def check_device(device: str) -> None:
    """`--device cuda` on a machine without a CUDA GPU is refused with the option that works, before the model
    loads (imports torch, which the load does anyway)."""
    if device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise UnsupportedModelError(
            "No CUDA GPU is available on this machine; run with --device cpu (slow for the "
            "full model, fine for the demo) or --device auto."
        )


def warm_start_from_args(args: argparse.Namespace) -> WarmStart | None:
    """`--init-file F [--pin-file P] [--noise S] [--pin-end]` as a warm start (None without --init-file)."""
    init = getattr(args, "init_file", None)
    pin_file = getattr(args, "pin_file", None)
    noise = getattr(args, "noise", None)
    pin_end = bool(getattr(args, "pin_end", False))
    if not init:
        if pin_file or noise is not None or pin_end:
            raise EngineError(
                "--pin-file, --noise and --pin-end need --init-file (the canvas text they refer to)."
            )
        return None
    share = 1.0 if noise is None else noise
    if not 0.0 <= share <= 1.0:
        raise EngineError(
            "--noise must be between 0 and 1 (the share of unpinned positions that start as noise)."
        )
    text = _read(init)
    pins = parse_pins(_read(pin_file), len(text)) if pin_file else ()
    return WarmStart(text, pins=pins, noise=share, pin_end=pin_end)


_PIN_LINE = re.compile(r"(\d+)(?:\s*[,:]\s*|\s+|-)(\d+)")
MAX_PIN_JSON_DEPTH = 2  # a list of [start, end] pairs


def parse_pins(spec: str, length: int) -> tuple[tuple[int, int], ...]:
    """Character ranges to pin, end exclusive: a JSON list of [start, end] pairs of whole numbers, or one
    range per line written `start end`, `start-end`, `start:end` or `start,end` (blank lines and lines
    starting with # are skipped). Anything else is refused with a sentence naming it: a negative or fractional
    number, Infinity, a number too large to be a position, a nested list; nothing is guessed (`3 -5` is not
    read as 3..5)."""
    spec = spec.strip()
    how = "write one 'start end' per line, end exclusive, or a JSON list such as [[4, 10]]"
    pairs: list[tuple[int, int]] = []
    if spec.startswith("["):
        pairs = _json_pins(spec, how)
    else:
        for number, raw in enumerate(spec.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            found = _PIN_LINE.fullmatch(line)
            if not found:
                raise EngineError(
                    f"Line {number} of the pin file, '{line[:40]}', is not two whole numbers from 0 "
                    f"up; {how}."
                )
            if max(len(found.group(1)), len(found.group(2))) > 12:
                raise EngineError(
                    f"Line {number} of the pin file holds a number too large to be a character "
                    f"position; {how}."
                )
            pairs.append((int(found.group(1)), int(found.group(2))))
    for a, b in pairs:
        if max(a, b) > 10**12:
            raise EngineError(f"The pin file holds a number too large to be a character position; {how}.")
        if not 0 <= a < b <= length:
            raise EngineError(f"The pin {a}..{b} is outside the canvas text (0..{length} characters).")
    return tuple(pairs)


def _json_pins(spec: str, how: str) -> list[tuple[int, int]]:
    depth = 0
    for char in spec:  # json.loads recurses once per '[': bound the nesting before parsing
        depth += (char == "[") - (char == "]")
        if depth > MAX_PIN_JSON_DEPTH:
            raise EngineError(f"The pin file nests lists more than two deep; {how}.")

    def no_constant(name: str) -> Any:
        raise EngineError(f"The pin file holds {name}, which is not a character position; {how}.")

    try:
        data = json.loads(spec, parse_constant=no_constant, parse_float=lambda text: no_constant(text))
    except ValueError as exc:
        raise EngineError(f"The pin file is not valid JSON ({exc}); {how}.") from None
    if not isinstance(data, list):
        raise EngineError(f"The pin file is not a list of ranges; {how}.")
    pairs = []
    for item in data:
        ok = isinstance(item, list) and len(item) == 2 and all(type(v) is int for v in item)
        if not ok:
            raise EngineError(f"The pin {json.dumps(item)[:40]} is not a pair of whole numbers; {how}.")
        pairs.append((item[0], item[1]))
    return pairs


def cmd_generate(args: argparse.Namespace) -> int:
    emit = _jsonl_printer() if args.jsonl else _live_printer()
    with emit if isinstance(emit, _LivePrinter) else contextlib.nullcontext():
        return _generate(args, emit)


def _generate(args: argparse.Namespace, emit: Any) -> int:
    try:
        from engine.weights.validate import validate_folder

        if args.raw_prompt_file and args.task != "draft":
            raise InputFileError("--raw-prompt-file works with --task draft only.")
        request = (
            None if args.raw_prompt_file else build_request(args)
        )  # input files are checked before loading
        if args.raw_prompt_file:
            _read(args.raw_prompt_file)
        if getattr(args, "server", None):
            if request is None:
                raise EngineError(
                    "--raw-prompt-file works with a local model only (a server's prompt always "
                    "goes through the chat template)."
                )
            session: Any = _connect_server(args, emit)
        else:
            # a broken folder is refused before torch is imported
            validate_folder(args.model or default_model_dir())
            check_device(args.device)
            if isinstance(emit, _LivePrinter):
                emit.status("starting the engine (importing torch)")
            from engine.session import Session

            session = Session()
            session.load(
                args.model or default_model_dir(),
                device=args.device,
                quantization=args.quantize,
                on_progress=emit.on_load if isinstance(emit, _LivePrinter) else None,
            )
        if request is None:
            result = _raw_draft(session, args, emit)
        else:
            if isinstance(emit, _LivePrinter) and getattr(args, "server", None):
                emit.status(f"waiting on the server ({session.capabilities.where})")
            outcome = session.run(request, on_step=emit)
            result = {
                "candidates": [
                    {"text": c.text, "token_ids": list(c.token_ids), "confidence": round(c.confidence, 4)}
                    for c in outcome.candidates
                ],
                "forwards": outcome.stats.forwards,
                "new_tokens": outcome.stats.new_tokens,
                "seconds": round(outcome.stats.seconds, 4),
                "notice": outcome.notice,
            }
    except OutputClosedError:
        raise
    except EngineError as exc:
        if args.jsonl:
            print(json.dumps({"event": "error", "kind": exc.kind, "message": exc.message}), flush=True)
        else:
            print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise  # the reader of stdout went away: not an input problem (see main)
    except OSError as exc:
        if exc.errno in (errno.EBADF, errno.ENOSPC, errno.EIO) and not exc.filename:
            raise  # writing the output failed (see main), not reading an input file
        message = f"Cannot read an input file: {exc}"
        if args.jsonl:
            print(json.dumps({"event": "error", "kind": "input_error", "message": message}), flush=True)
        else:
            print(f"error: {message}", file=sys.stderr)
        return 2
    if args.jsonl:
        print(json.dumps({"event": "done", **result}, ensure_ascii=False), flush=True)
    else:
        if getattr(emit, "interactive", False):
            sys.stdout.write("\n")  # end the line the steps were redrawn on
        for i, cand in enumerate(result["candidates"]):
            label = f"[{i + 1}/{len(result['candidates'])}] " if len(result["candidates"]) > 1 else ""
            print(f"{label}{cand['text']}")
        print(
            f"-- {result['new_tokens']} tokens, {result['forwards']} forwards, {result['seconds']:.2f} s",
            file=sys.stderr,
        )
    return 0


def _connect_server(args: argparse.Namespace, emit: Any) -> Any:
    """`--server URL [--server-model NAME]`: the remote engine, connected and probed; the API key comes from
    LETTERPRESS_API_KEY (never a command-line argument, which other users of the machine can read)."""
    import os

    from engine.remote import RemoteEngine, ServerConfig
    from engine.remote.client import Timeouts, host_label, is_plain_http_to_another_machine

    shown = host_label(args.server)  # never the user:password@ of the address
    if is_plain_http_to_another_machine(args.server):
        print(
            f"warning: {shown} is plain http:// to another machine: your text crosses the network "
            "unencrypted.",
            file=sys.stderr,
        )
    if args.seed is not None:
        print(
            "note: a DiffusionGemma server takes no seed (vLLM refuses one), so --seed is not sent.",
            file=sys.stderr,
        )
    if isinstance(emit, _LivePrinter):
        emit.status(f"connecting to {shown}")
    timeouts = Timeouts(read=float(args.server_timeout))
    key = os.environ.get("LETTERPRESS_API_KEY") or None
    context = getattr(args, "server_context", None)
    engine = RemoteEngine(ServerConfig(args.server, args.server_model, key, timeouts, context_length=context))
    engine.connect()
    return engine


def _raw_draft(session: Any, args: argparse.Namespace, emit: Any) -> dict[str, Any]:
    """A draft from an untemplated prompt (`tokenizer(text)`), the same input `model.generate()` would get."""
    import torch

    from engine.denoise import denoise

    tok, model = session.tokenizer, session.model
    ids = tok(_read(args.raw_prompt_file), return_tensors="pt").input_ids.to(model.device)
    settings = DenoiseSettings(
        max_steps=args.steps or default_steps(args.model or default_model_dir()), seed=args.seed or 0
    )
    start = time.perf_counter()
    gen = model.generation_config
    # null in generation_config.json (what save_pretrained writes when unset): the tokenizer's, as in session
    stop = gen.eos_token_id if gen.eos_token_id is not None else tok.eos_token_id
    eos = list(stop) if isinstance(stop, (list, tuple)) else [stop]
    pad = gen.pad_token_id if gen.pad_token_id is not None else (tok.pad_token_id or 0)

    def on_step(state: Any) -> None:
        ids_now = session.token_text.visible_ids(state.argmax[0].tolist())
        emit(
            StepEvent(0, state.step, settings.max_steps, state.block, ()),
            text=session.token_text.text(ids_now),
        )

    with torch.inference_mode():
        out = denoise(
            model,
            ids,
            settings,
            max_new_tokens=args.max_new_tokens or 256,
            eos_token_ids=eos,
            pad_token_id=pad,
            seed=settings.seed or 0,
            on_step=on_step,
        )
    new = out.sequences[0, out.prompt_length :].tolist()[
        : args.max_new_tokens or 256
    ]  # what was asked, not a canvas
    while new and new[-1] == pad:
        new.pop()
    text = tok.decode(session.token_text.visible_ids(new), skip_special_tokens=True)
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
            try:
                print(json.dumps(line, ensure_ascii=False), flush=True)
            except BrokenPipeError as exc:  # the reader stopped (`| head`): stop generating, quietly
                raise OutputClosedError("The reader of the output stopped reading.") from exc

    return emit


class _LivePrinter:
    """Human-readable progress. On a terminal each step's text is redrawn in place, like the ghost text in the
    editor, cut to the terminal's width, and before the first step the load's status is redrawn there every
    interval. Otherwise (a pipe, a log file) stdout gets only the final text, and stderr a progress line at
    least once a second from a ticker thread, so a slow load or a slow step never looks like a hang."""

    def __init__(self, interactive: bool | None = None, interval: float = 1.0) -> None:
        import threading

        self.interactive = sys.stdout.isatty() if interactive is None else interactive
        self.interval = interval
        self._status = "starting"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._began = time.monotonic()
        self._drawn = False  # a step's text is on the terminal line (the load status gives way to it)

    def _redraw(self, prefix: str, text: str) -> None:
        """Replace the terminal's current line. The line is cut to the terminal's width: a wrapped line cannot
        be cleared with one \\x1b[2K, so every redraw on an 80-column terminal left a stale half line
        behind."""
        import shutil

        room = max(10, shutil.get_terminal_size((80, 24)).columns - 1 - len(prefix))
        sys.stdout.write("\x1b[2K\r" + prefix + text[-room:])
        sys.stdout.flush()

    def __call__(self, event: StepEvent, text: str | None = None) -> None:
        shown = text if text is not None else event.text
        if self.interactive:
            with self._lock:
                self._drawn = True
                self._redraw(f"[step {event.step:>2}] ", shown.replace("\n", " "))
            return
        block = f", block {event.block + 1}" if event.block else ""
        words = len(shown.split())
        with self._lock:
            self._status = f"denoising: step {event.step}/{event.max_steps}{block}, {words} words so far"

    def on_load(self, progress: Any) -> None:
        """A `LoadProgress` callback: the phase and, where it has one, its fraction."""
        share = f" {round(100 * progress.fraction)}%" if progress.total else ""
        with self._lock:
            self._status = f"loading the model: {progress.stage}{share}"

    def status(self, text: str) -> None:
        with self._lock:
            self._status = text

    def __enter__(self) -> _LivePrinter:
        import threading

        self._thread = threading.Thread(target=self._tick, name="progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                line = f"[{time.monotonic() - self._began:6.1f} s] {self._status}"
                if (
                    self.interactive
                ):  # on a terminal the load's status is redrawn in place until the first step
                    if not self._drawn:
                        self._redraw("", line)
                    continue
            sys.stderr.write(line + "\n")
            sys.stderr.flush()


def _live_printer() -> Any:
    """Redraw the current best text in place, like the ghost text in the editor (see `_LivePrinter`)."""
    return _LivePrinter()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    tiny = sub.add_parser("make-tiny", help="write a tiny random-weight DiffusionGemma checkpoint")
    tiny.add_argument("dir", help="folder to write the checkpoint into")
    tiny.add_argument("--seed", type=_bounded_int(0, 2**31 - 1), default=0, help="random seed of the weights")
    tiny.add_argument(
        "--canvas-length", type=_bounded_int(1, 4096), default=32, help="canvas length in tokens"
    )
    tiny.set_defaults(func=cmd_make_tiny)

    gen = sub.add_parser(
        "generate",
        help="draft, rewrite or infill with a local checkpoint",
        description="Draft, rewrite or infill with a local checkpoint. Input files must be UTF-8.",
    )
    gen.add_argument(
        "--model",
        metavar="DIR",
        default=None,
        help="checkpoint folder (default: the shipped demo model); checked before anything is loaded",
    )
    gen.add_argument(
        "--task",
        choices=["draft", "rewrite", "infill"],
        default="draft",
        help="draft: continue the text; rewrite: rewrite the selection; infill: fill the gap "
        "between before and after (default: draft)",
    )
    gen.add_argument("--before-file", metavar="FILE", help="UTF-8 text before the cursor, selection or gap")
    gen.add_argument("--selection-file", metavar="FILE", help="UTF-8 text to rewrite (--task rewrite)")
    gen.add_argument(
        "--after-file", metavar="FILE", help="UTF-8 text after the selection or gap (kept as it is)"
    )
    gen.add_argument("--instruction", help="what to do, in words (e.g. 'Make it shorter.')")
    gen.add_argument(
        "--raw-prompt-file",
        metavar="FILE",
        help="draft from this UTF-8 text without the chat template (--task draft only)",
    )
    gen.add_argument(
        "--max-new-tokens",
        metavar="N",
        type=_bounded_int(1, MAX_NEW_TOKENS),
        default=None,
        help="at most N new tokens (draft default 128; rewrite: sized to the selection; infill: the "
        "gap length, searched when not given)",
    )
    gen.add_argument(
        "--steps",
        metavar="N",
        type=_bounded_int(1, MAX_STEPS),
        default=None,
        help="most denoising steps per canvas (default: the model's own; "
        f"{default_steps(DEFAULT_MODEL)} for the demo model, {REFERENCE_STEPS} for a checkpoint "
        "that declares none)",
    )
    gen.add_argument(
        "--candidates",
        metavar="K",
        type=_bounded_int(1, MAX_CANDIDATES),
        default=1,
        help="alternatives generated in one batched run (default 1)",
    )
    gen.add_argument(
        "--seed",
        metavar="N",
        type=_bounded_int(0, 2**31 - 1),
        default=None,
        help="sampling seed, for repeatable output (default 0)",
    )
    gen.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where to run: auto picks the GPU when there is one (default auto)",
    )
    gen.add_argument(
        "--quantization",
        "--quantize",
        dest="quantize",
        choices=["auto", "nf4", "nf4-mixed", "none"],
        default="auto",
        help="nf4: 4-bit weights; none: full precision; auto: 4-bit unless full "
        "precision fits comfortably (default auto; --quantize is the old spelling)",
    )
    gen.add_argument("--jsonl", action="store_true", help="print one JSON object per step and a final one")
    gen.add_argument(
        "--strength",
        metavar="S",
        type=float,
        default=None,
        help="rewrite strength 0.1..1.0: the share of the selection re-noised (1.0: from pure noise)",
    )
    gen.add_argument(
        "--init-file",
        metavar="FILE",
        help="start the canvas from this UTF-8 text (a draft, a rewrite, or the middle of an infill)",
    )
    gen.add_argument(
        "--pin-file",
        metavar="FILE",
        help="character ranges of the --init-file text to pin, end exclusive (one 'start end' a line, "
        "or a JSON list of pairs)",
    )
    gen.add_argument(
        "--noise",
        metavar="S",
        type=float,
        default=None,
        help="with --init-file: share of the unpinned positions that start as noise (default 1.0)",
    )
    gen.add_argument(
        "--pin-end",
        action="store_true",
        help="with --init-file: pin the end of the text too, so the result ends exactly where it ends",
    )
    gen.add_argument(
        "--server",
        metavar="URL",
        default=None,
        help="send the request to a model server instead of a local model: DiffusionGemma on vLLM, or any "
        "model on an OpenAI-compatible server (Ollama http://127.0.0.1:11434/v1, LM Studio "
        "http://127.0.0.1:1234/v1, llama.cpp http://127.0.0.1:8080/v1); API key from LETTERPRESS_API_KEY",
    )
    gen.add_argument(
        "--server-model",
        metavar="NAME",
        default=None,
        help="with --server: the served model to use (default: the first one it lists)",
    )
    gen.add_argument(
        "--server-timeout",
        metavar="S",
        type=_bounded_int(1, 3600),
        default=120,
        help="with --server: give up after S seconds without a byte from the server (default 120)",
    )
    gen.add_argument(
        "--server-context",
        metavar="N",
        type=_bounded_int(256, 1_048_576),
        default=None,
        help="with --server: the tokens its model reads at once, for a server that does not say (Ollama, "
        "LM Studio, llama.cpp's Python server); default: what the server says, else 2048",
    )
    gen.set_defaults(func=cmd_generate)

    for name, module, func, help_text in (
        (
            "inspect",
            "engine.tools.inspect_report",
            "main_inspect",
            "load a checkpoint as the app would and report memory",
        ),
        ("bench", "engine.tools.bench", "main_bench", "benchmark the engine against model.generate()"),
        (
            "make-real-shape",
            "engine.tools.real_shape",
            "main_make_real_shape",
            "write a checkpoint with 26B-A4B shapes",
        ),
        (
            "gpu-check",
            "engine.tools.gpu_check",
            "main_gpu_check",
            "the one unattended GPU run (<= 8 minutes): JSON report + summary; --dry-run on the CPU",
        ),
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
    """Run a command; anything unexpected is one line on stderr and exit 1, never a traceback."""
    from engine.threads import prepare_openmp

    closed = _prepare_streams()
    if closed:
        print(f"error: {closed}", file=sys.stderr)
        return 2
    prepare_openmp()  # before any command imports torch: OpenMP threads sleep, not spin, while they wait
    try:
        code = _main(argv)
        _flush_stdout()
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OutputClosedError:
        return _reader_went_away()
    except EngineError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _reader_went_away()
    except OSError as exc:
        if exc.errno in (errno.EBADF, errno.ENOSPC, errno.EIO, errno.EDQUOT):
            print(
                f"error: the output could not be written ({exc.strerror or type(exc).__name__}); write it "
                "to "
                "a file on a disk with space (> out.txt).",
                file=sys.stderr,
            )
            return 1
        return _unexpected(exc)
    except Exception as exc:  # noqa: BLE001 - the command line never prints a traceback
        return _unexpected(exc)


def _unexpected(exc: BaseException) -> int:
    detail = str(exc)
    try:  # an HTTP library's error can quote a request's header: no key, token or password is printed
        from engine.remote.redact import scrub

        detail = scrub(detail)
    except Exception:  # noqa: BLE001 - without the remote room there is no secret to hide
        pass
    print(
        f"error: an unexpected {type(exc).__name__} stopped the command ({detail[:200]}). Please "
        "report it; run with PYTHONDEVMODE=1 for details.",
        file=sys.stderr,
    )
    return 1


def _prepare_streams() -> str:
    """Make the outputs unable to fail on a character: a cp1252 pipe or file (Windows), or an ASCII locale,
    writes what it cannot hold as a \\uXXXX escape (exact JSON with --jsonl, readable in text), so the
    generated text is never lost to a UnicodeEncodeError after all the work is done. Returns a sentence when
    standard output is closed (`>&-`): the result would have nowhere to go, so nothing is started."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")
    if sys.stdout is None:
        return (
            "standard output is closed, so the result would have nowhere to go; send it to a file "
            "(> out.txt) or to /dev/null."
        )
    try:
        fd = sys.stdout.fileno()
    except (ValueError, OSError, AttributeError):
        return ""  # not a real file (a test's capture): nothing to check
    try:
        os.fstat(fd)
    except OSError:
        return (
            "standard output is closed, so the result would have nowhere to go; send it to a file "
            "(> out.txt) or to /dev/null."
        )
    return ""


def _flush_stdout() -> None:
    """Flush now, inside the error handling, rather than at interpreter exit (where a closed pipe prints an
    'Exception ignored' traceback)."""
    if sys.stdout is not None:
        sys.stdout.flush()


def _reader_went_away() -> int:
    """The reader closed the pipe (`| head -c 1`): what it wanted it has; stop quietly, as Unix tools do (exit
    141 = killed by SIGPIPE), with stdout pointed at /dev/null so the exit-time flush cannot complain."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141


def _main(argv: list[str] | None = None) -> int:
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
