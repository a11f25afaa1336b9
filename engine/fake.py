"""A torch-free scripted engine with exactly the `engine.api.Engine` interface, for UI tests and demos.

Every request "settles" from noise to a final text over a fixed number of steps, the way a diffusion model's
canvas does: words appear as random letters with low confidence and lock in one after another. Tests script
what it should do: the final texts, the number of steps, a delay per step (slowness), a Python busy-loop
instead of sleeping (to hold the GIL like real Python-heavy inference), an error at step k or at load.
Cancellation is honoured within one step, because the delay is a wait on the cancel event.

Warm starts behave like the real engine's (`engine.canvas`): a rewrite at strength S < 1, or a request with a
`canvas`, starts from the given text; pinned character ranges come back exactly (and are reported as pinned
spans from the first step on), a share S (the noise share) of the other words is replaced by new words, and
only the last ceil(S x steps) steps run. Scripted `texts` replace the varied words of a warm start without
pins (a rewrite at some strength); a warm start with pins always keeps them.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from engine.api import (
    LOCAL_CAPABILITIES,
    Candidate,
    CandidateView,
    Capabilities,
    Device,
    EmptyRequestError,
    EngineError,
    InfillRequest,
    LoadCancelledError,
    LoadProgress,
    ModelInfo,
    ModelNotFoundError,
    ModelNotLoadedError,
    ProgressCallback,
    Quantization,
    Request,
    Result,
    RewriteRequest,
    Span,
    Stats,
    StepCallback,
    StepEvent,
    WarmStart,
)
from engine.prompts import brief_limit

DRAFT_TEXTS = (
    " The harbour woke slowly, and the first boats slipped out past the breakwater.",
    " By noon the wind had turned, carrying the smell of salt and tar through the streets.",
    " Nobody in the village could remember a morning so still.",
)
INFILL_TEXTS = (
    "Then, quite unexpectedly, the wind turned.",
    "For a while nothing happened at all.",
    "The lighthouse keeper was the first to notice.",
)

TextScript = Sequence[str] | Callable[[Request], Sequence[str]]
REPLACEMENTS = (
    "quietly",
    "harbour",
    "lantern",
    "morning",
    "bright",
    "slowly",
    "river",
    "gentle",
    "stone",
    "window",
    "almost",
    "silver",
    "garden",
    "distant",
    "careful",
    "simple",
    "open",
    "warm",
    "little",
    "clear",
)
Piece = tuple[str, bool]  # a word (with its leading whitespace) and whether it is pinned


def default_texts(request: Request) -> tuple[str, ...]:
    """Plausible final texts for a request kind (three variants, so alternatives differ)."""
    if isinstance(request, RewriteRequest):
        words = request.selection.split()
        short = " ".join(words[: max(1, (len(words) * 2) // 3)]).rstrip(".,;:") + "."
        return (short, "In short: " + short, short.upper()[:1] + short[1:].lower())
    if isinstance(request, InfillRequest):
        return INFILL_TEXTS
    return DRAFT_TEXTS


class FakeEngine:
    """Scripted stand-in for `engine.session.Session`; every knob is a constructor argument.

    `texts`: final texts (one per alternative, cycled) or a function of the request. `steps`: denoising steps.
    `step_delay`: seconds per step. `busy`: spend the delay in a Python loop (holds the GIL) instead of
    waiting. `fail_at_step` + `error`: raise `error` when that step starts. `load_error`: raise it from
    `load`. `hold_at_step`: after reporting that step, wait until `release` is set (or the request is
    cancelled), so a test can look at a mid-denoising state for as long as it likes.
    """

    def __init__(
        self,
        *,
        texts: TextScript | None = None,
        steps: int = 8,
        step_delay: float = 0.0,
        busy: bool = False,
        fail_at_step: int | None = None,
        error: EngineError | None = None,
        load_error: EngineError | None = None,
        load_steps: int = 4,
        load_delay: float = 0.0,
        hold_at_step: int | None = None,
        name: str = "fake-engine",
    ) -> None:
        if steps < 1:
            raise ValueError("steps must be at least 1")
        self.texts = texts
        self.steps = steps
        self.step_delay = step_delay
        self.busy = busy
        self.fail_at_step = fail_at_step
        self.error = error if error is not None else EngineError("The fake engine failed as scripted.")
        self.load_error = load_error
        self.load_steps = load_steps
        self.load_delay = load_delay
        self.hold_at_step = hold_at_step
        self.release = threading.Event()
        self.name = name
        self.requests: list[Request] = []
        self.thread_names: list[str] = []
        self._info: ModelInfo | None = None
        self._scores: list[float] = []

    # -- Engine protocol -------------------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        """The local model can do everything the app offers (see `engine.api.Capabilities`)."""
        return LOCAL_CAPABILITIES

    @property
    def info(self) -> ModelInfo | None:
        return self._info

    def load(
        self,
        model_dir: str | Path,
        *,
        device: Device = "auto",
        quantization: Quantization = "auto",
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelInfo:
        self.thread_names.append(threading.current_thread().name)
        # Like the real engine, the loaded model (if any) stays in use until the new one has loaded.
        for done in range(self.load_steps + 1):
            if cancel is not None and cancel.is_set():
                raise LoadCancelledError("Loading was cancelled.")
            if on_progress:
                on_progress(
                    LoadProgress(done, self.load_steps, done * 1000, self.load_steps * 1000, "loading")
                )
            if done < self.load_steps and self._pause(self.load_delay, cancel):
                raise LoadCancelledError("Loading was cancelled.")
        if self.load_error is not None:
            raise self.load_error
        if str(model_dir) and str(model_dir) != "fake" and not Path(model_dir).exists():
            raise ModelNotFoundError(f"The model folder {model_dir} does not exist. Choose another folder.")
        self._info = ModelInfo(
            name=self.name,
            path=str(model_dir),
            device="cpu" if device == "auto" else device,
            dtype="float32",
            quantization="none" if quantization == "auto" else quantization,
            parameters=0,
            canvas_length=32,
            context_length=4096,
            notice="",
            brief_chars=brief_limit(4096, 32),
        )
        return self._info

    def unload(self) -> None:
        self._info = None

    def run(
        self, request: Request, on_step: StepCallback | None = None, cancel: threading.Event | None = None
    ) -> Result:
        self.requests.append(request)
        self.thread_names.append(threading.current_thread().name)
        if self._info is None:
            raise ModelNotLoadedError("No model is loaded. Load a model from the Model menu first.")
        if isinstance(request, RewriteRequest) and not request.selection.strip():
            raise EmptyRequestError("Select some text to rewrite.")
        seed = request.settings.seed if request.settings.seed is not None else 0
        warm = _warm_start(request)
        if warm is not None and (warm.pins or self.texts is None):
            pieces = [
                _warm_pieces(warm, random.Random(f"{seed}/{i}/{request.request_id}"))
                for i in range(request.settings.candidates)
            ]
        else:
            pieces = [[(w, False) for w in _words(t)] for t in self._finals(request)]
        first_step = 1 if warm is None else self.steps - max(1, math.ceil(warm.noise * self.steps - 1e-9)) + 1
        finals = tuple("".join(w for w, _ in p) for p in pieces)
        orders = [_settle_order(len(p), random.Random(seed * 7919 + i)) for i, p in enumerate(pieces)]
        self._scores = [  # the mean confidence of each finished alternative, as the real engine reports it
            round(
                sum(1.0 if pin else _final_confidence(o) for (_, pin), o in zip(p, order, strict=True))
                / max(1, len(p)),
                4,
            )
            for p, order in zip(pieces, orders, strict=True)
        ]
        start = time.perf_counter()
        first_draft = 0.0
        views: tuple[CandidateView, ...] = ()
        for step in range(first_step, self.steps + 1):
            if cancel is not None and cancel.is_set():
                return self._result(request, finals, start, first_draft, step - 1, cancelled=True)
            if self.fail_at_step is not None and step >= self.fail_at_step:
                raise self.error
            if self._pause(self.step_delay, cancel):
                return self._result(request, finals, start, first_draft, step - 1, cancelled=True)
            rng = random.Random(hash((request.request_id, step)))
            views = tuple(
                _view(p, order, step, self.steps, rng, row)
                for row, (p, order) in enumerate(zip(pieces, orders, strict=True))
            )
            if step == first_step:
                first_draft = time.perf_counter() - start
            if on_step:
                on_step(
                    StepEvent(request.request_id, step, self.steps, 0, views, time.perf_counter() - start)
                )
            if step == self.hold_at_step:
                while not self.release.wait(0.01):
                    if cancel is not None and cancel.is_set():
                        return self._result(request, finals, start, first_draft, step, cancelled=True)
        return self._result(request, finals, start, first_draft, self.steps - first_step + 1, cancelled=False)

    # -- helpers ---------------------------------------------------------------------------------------------

    def _finals(self, request: Request) -> tuple[str, ...]:
        script = self.texts if self.texts is not None else default_texts
        texts = tuple(script(request) if callable(script) else script)
        if not texts:
            raise ValueError("the fake engine needs at least one scripted text")
        return tuple(texts[i % len(texts)] for i in range(request.settings.candidates))

    def _pause(self, seconds: float, cancel: threading.Event | None) -> bool:
        """Wait `seconds` (or spin, when `busy`); True when cancelled meanwhile."""
        if seconds <= 0:
            return bool(cancel is not None and cancel.is_set())
        if not self.busy:
            if cancel is not None:
                return cancel.wait(seconds)
            time.sleep(seconds)
            return False
        end = time.perf_counter() + seconds
        x = 0
        while time.perf_counter() < end:
            for i in range(2000):
                x += i * i
            if cancel is not None and cancel.is_set():
                return True
        return False

    def _result(
        self,
        request: Request,
        finals: tuple[str, ...],
        start: float,
        first: float,
        steps: int,
        *,
        cancelled: bool,
    ) -> Result:
        seconds = time.perf_counter() - start
        tokens = sum(len(_words(t)) for t in finals) if steps else 0
        stats = Stats(
            forwards=steps,
            new_tokens=tokens,
            seconds=seconds,
            first_draft_seconds=first,
            steps=steps,
            blocks=1,
        )
        scores = self._scores if len(self._scores) == len(finals) else [0.97] * len(finals)
        candidates = (
            ()
            if cancelled
            else tuple(
                Candidate(text, tuple(range(len(_words(text)))), score, row=row)
                for row, (text, score) in enumerate(zip(finals, scores, strict=True))
            )
        )
        return Result(request.request_id, candidates, stats, cancelled=cancelled)


def _words(text: str) -> list[str]:
    """Split into pieces that keep their leading whitespace, so joining them gives the text back."""
    pieces: list[str] = []
    current = ""
    for ch in text:
        if ch.isspace() and current.strip():
            pieces.append(current)
            current = ""
        current += ch
    if current:
        pieces.append(current)
    return pieces


def _settle_order(n: int, rng: random.Random) -> list[float]:
    """For each word, the fraction of the run after which it is settled (0..1); a random order, like the
    model."""
    ranks = list(range(n))
    rng.shuffle(ranks)
    return [(r + 1) / (n + 1) for r in ranks]


def _final_confidence(settle: float) -> float:
    """How sure the fake is of a finished word: the last quarter of words to settle stay uncertain (what
    "re-roll the uncertain words" acts on)."""
    return round(0.99 - 0.08 * settle, 3) if settle <= 0.75 else 0.6


def _warm_start(request: Request) -> WarmStart | None:
    warm = request.warm_start() if isinstance(request, RewriteRequest) else getattr(request, "canvas", None)
    return None if warm is None or (warm.noise >= 1.0 and not warm.pins) else warm  # as engine.canvas.cold


def _warm_pieces(warm: WarmStart, rng: random.Random) -> list[Piece]:
    """The final text of a warm start: pinned ranges verbatim, a `noise` share of the other words replaced."""
    pieces: list[Piece] = []
    pos = 0
    for start, end in [*sorted(warm.pins), (len(warm.text), len(warm.text))]:
        start = max(start, pos)
        for word in _words(warm.text[pos:start]):
            if rng.random() < warm.noise:
                lead = word[: len(word) - len(word.lstrip())] or (" " if pieces else "")
                word = lead + rng.choice(REPLACEMENTS) + word[len(word.rstrip()) :]
            pieces.append((word, False))
        if end > start:
            pieces.extend((w, True) for w in _words(warm.text[start:end]))
        pos = max(pos, end)
    return pieces


def _view(
    pieces: list[Piece], order: list[float], step: int, steps: int, rng: random.Random, row: int
) -> CandidateView:
    progress = step / steps
    spans: list[Span] = []
    for (word, pinned), settle in zip(pieces, order, strict=True):
        if pinned:
            spans.append(Span(word, 1.0, True))
        elif progress >= 1.0 or progress >= settle:
            if progress < 1:
                confidence = min(1.0, 0.55 + 0.45 * (progress - settle) / max(1e-6, 1 - settle))
            else:
                confidence = _final_confidence(settle)
            spans.append(Span(word, round(confidence, 3)))
        else:
            lead = word[: len(word) - len(word.lstrip())]
            noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in word.strip())
            spans.append(Span(lead + noise, round(0.1 + 0.3 * progress, 3)))
    return CandidateView(tuple(spans), row=row)
