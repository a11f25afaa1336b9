"""The engine's public vocabulary: requests in, step events and results out, typed errors.

Everything here is a frozen dataclass or an exception, importable without torch, so the GUI, the fake engine
and the command line share one contract. A request carries its own id; every event and result names the id it
belongs to, which is how the GUI drops events of a request it no longer cares about.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def new_request_id() -> int:
    """A process-wide increasing id, so "newer request" is a plain integer comparison."""
    with _ids_lock:
        return next(_ids)


# ------------------------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class DenoiseSettings:
    """Sampler knobs; the defaults are the reference sampler's (`DiffusionGemmaGenerationConfig`)."""

    max_steps: int = 48
    t_max: float = 0.8
    t_min: float = 0.4
    entropy_bound: float = 0.1
    stability_threshold: int = 1
    confidence_threshold: float = 0.005
    candidates: int = 1
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if not 0 <= self.t_min < self.t_max:
            raise ValueError("the temperature schedule needs 0 <= t_min < t_max")
        if self.entropy_bound <= 0:
            raise ValueError("entropy_bound must be positive")
        if self.candidates < 1:
            raise ValueError("candidates must be at least 1")

    @classmethod
    def from_generation_config(cls, gen: object | None) -> DenoiseSettings:
        """The checkpoint's sampler settings (`generation_config.json`: max_denoising_steps, t_min, t_max,
        sampler_config.entropy_bound, stability_threshold, confidence_threshold); the reference's defaults for
        any that is absent or unusable."""
        base = cls()
        if gen is None:
            return base
        sampler = getattr(gen, "sampler_config", None)
        bound = (
            sampler.get("entropy_bound")
            if isinstance(sampler, dict)
            else getattr(sampler, "entropy_bound", None)
        )
        found = {
            "max_steps": getattr(gen, "max_denoising_steps", None),
            "t_min": getattr(gen, "t_min", None),
            "t_max": getattr(gen, "t_max", None),
            "entropy_bound": bound,
            "stability_threshold": getattr(gen, "stability_threshold", None),
            "confidence_threshold": getattr(gen, "confidence_threshold", None),
        }
        values = {k: type(getattr(base, k))(v) for k, v in found.items() if isinstance(v, (int, float))}
        try:
            return cls(**{**base.__dict__, **values})
        except ValueError:
            return base

    def resolved(self, checkpoint: DenoiseSettings) -> DenoiseSettings:
        """These settings with every sampler knob left at the reference default taken from `checkpoint` (the
        loaded model's own settings): what the writer changed wins, the rest follows the checkpoint."""
        base = DenoiseSettings()
        knobs = (
            "max_steps",
            "t_max",
            "t_min",
            "entropy_bound",
            "stability_threshold",
            "confidence_threshold",
        )
        changed = {k: getattr(checkpoint, k) for k in knobs if getattr(self, k) == getattr(base, k)}
        if not changed:
            return self
        try:
            return DenoiseSettings(**{**self.__dict__, **changed})
        except (
            ValueError
        ):  # e.g. the writer's t_max below the checkpoint's t_min: keep the writer's settings whole
            return self


# ------------------------------------------------------------------------------------------------------------
# Requests

RewritePreset = Literal["shorter", "longer", "formal", "casual", "grammar", "simplify", "freely"]


@dataclass(frozen=True)
class Preset:
    """A built-in rewrite preset, declared once: the instruction the model reads, how much of the selection it
    re-noises by default (1.0 = rewrite from pure noise; see `WarmStart`) and what the writer sees."""

    key: RewritePreset
    instruction: str
    strength: float
    label: str


PRESETS: tuple[Preset, ...] = (
    Preset("shorter", "Make it shorter while keeping its meaning.", 0.7, "Shorter"),
    Preset("longer", "Make it longer, adding relevant detail.", 0.7, "Longer"),
    Preset("formal", "Make it more formal.", 0.5, "More formal"),
    Preset("casual", "Make it more casual.", 0.5, "More casual"),
    Preset("grammar", "Fix the grammar and spelling without changing the meaning.", 0.2, "Fix grammar"),
    Preset("simplify", "Simplify it so it is easier to read.", 0.5, "Simplify"),
    Preset("freely", "Rewrite it freely, in new words, keeping its meaning.", 1.0, "Rewrite freely"),
)

# Views of `PRESETS` by key, for the settings (which the writer may extend) and the training recipes.
REWRITE_PRESETS: dict[str, str] = {p.key: p.instruction for p in PRESETS}
PRESET_STRENGTHS: dict[str, float] = {p.key: p.strength for p in PRESETS}
PRESET_LABELS: dict[str, str] = {p.key: p.label for p in PRESETS}
MIN_STRENGTH = 0.1
MAX_STRENGTH = 1.0


@dataclass(frozen=True)
class WarmStart:
    """A canvas that starts from existing text instead of pure noise (see `engine.canvas` for the design).

    `text` is placed in the canvas; `pins` are character ranges of it that are never resampled (they come back
    exactly); `noise` is the share of the other positions that start as noise, which also sets where the
    temperature schedule starts (1.0: all noise, the full schedule). `pin_end` also pins the end of the text
    (its end-of-text and the padding after it), so the result ends exactly where `text` ends: a re-roll in
    place whose last word was kept must not grow past it.

    `ids` are the token ids `text` was decoded from (a re-roll of a shown suggestion, from its spans'
    `Span.ids`): the canvas lays out these tokens, so every pinned word keeps its token position and the
    canvas its length (re-tokenizing the text can give other, fewer tokens than the model wrote: an infill's
    " topasts" written as 4 tokens re-tokenizes as 3, and every later pin moved one position). They are used
    only when they decode to exactly `text` and every pin falls on token edges; otherwise `text` is tokenized.
    `keep_lead` makes the result start as `text` does: with a line break, with a space, or with neither (a
    re-roll in place joins the document where the shown suggestion joined it; a noised first position let a
    rewrite that began "The" come back as " The", and a draft that began " the" come back glued, "es,").
    """

    text: str
    pins: tuple[tuple[int, int], ...] = ()
    noise: float = 1.0
    pin_end: bool = False
    ids: tuple[int, ...] = ()
    keep_lead: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.noise <= 1.0:
            raise ValueError("the noise share must be between 0 and 1")
        for start, end in self.pins:
            if not 0 <= start < end <= len(self.text):
                raise ValueError(f"pin {start}..{end} is outside the canvas text (0..{len(self.text)})")


@dataclass(frozen=True)
class DraftRequest:
    """Write new text at the cursor, continuing `before` (optionally steered by an instruction)."""

    before: str
    instruction: str = ""
    after: str = ""
    max_new_tokens: int = 128
    settings: DenoiseSettings = field(default_factory=DenoiseSettings)
    request_id: int = field(default_factory=new_request_id)
    brief: str = (
        ""  # the document brief (style, audience, names, facts), part of every prompt for the document
    )
    document: str = (
        ""  # which document it comes from: the engine's prefix cache keeps a few prompts per document
    )
    kind: Literal["draft"] = "draft"
    canvas: WarmStart | None = None  # start from this continuation (re-roll, pins) instead of noise


@dataclass(frozen=True)
class RewriteRequest:
    """Rewrite `selection` following `instruction`; `before`/`after` are the surrounding document, for
    context.

    `strength` (0.1..1.0) is the share of the selection re-noised: the canvas starts as the selection with
    that share of its positions as noise, and the schedule starts at the matching point; 1.0 is a rewrite from
    pure noise. `canvas`, when given, is the starting canvas instead of the selection (re-rolling a
    suggestion).
    """

    selection: str
    instruction: str
    before: str = ""
    after: str = ""
    max_new_tokens: int | None = None
    settings: DenoiseSettings = field(default_factory=DenoiseSettings)
    request_id: int = field(default_factory=new_request_id)
    brief: str = (
        ""  # the document brief (style, audience, names, facts), part of every prompt for the document
    )
    document: str = (
        ""  # which document it comes from: the engine's prefix cache keeps a few prompts per document
    )
    kind: Literal["rewrite"] = "rewrite"
    strength: float = 1.0
    canvas: WarmStart | None = None

    def __post_init__(self) -> None:
        if not MIN_STRENGTH <= self.strength <= MAX_STRENGTH:
            raise ValueError(f"rewrite strength must be between {MIN_STRENGTH} and {MAX_STRENGTH}")

    def warm_start(self) -> WarmStart | None:
        """The canvas this rewrite starts from: the given one, else the selection at `strength` (None:
        cold)."""
        if self.canvas is not None:
            return self.canvas
        if self.strength >= MAX_STRENGTH:
            return None
        return WarmStart(self.selection, noise=self.strength)


@dataclass(frozen=True)
class InfillRequest:
    """Fill the gap between `before` and `after` so that it joins both; `after` comes back unchanged.

    `middle_tokens=None` lets the engine search the length; an int fixes it.
    """

    before: str
    after: str
    instruction: str = ""
    middle_tokens: int | None = None
    settings: DenoiseSettings = field(default_factory=DenoiseSettings)
    request_id: int = field(default_factory=new_request_id)
    brief: str = (
        ""  # the document brief (style, audience, names, facts), part of every prompt for the document
    )
    document: str = (
        ""  # which document it comes from: the engine's prefix cache keeps a few prompts per document
    )
    kind: Literal["infill"] = "infill"
    canvas: WarmStart | None = (
        None  # start the middle from this text (re-roll, pins); fixes the middle length
    )


Request = DraftRequest | RewriteRequest | InfillRequest


# ------------------------------------------------------------------------------------------------------------
# Events and results


@dataclass(frozen=True)
class Span:
    """A piece of ghost text and how sure the model is of it (0..1), for shading."""

    text: str
    confidence: float
    pinned: bool = False  # the position was pinned: it came back exactly as given
    # The token ids this piece was decoded from (each token goes with the span its first character is in), so
    # a row's spans together hold its ids too: a re-roll lays out the very tokens that were shown instead of
    # re-tokenizing their text (`WarmStart.ids`). Provenance, not content: not compared, not shown in repr.
    ids: tuple[int, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class CandidateView:
    """One alternative as it looks at one denoising step: plain, immutable data, made on the engine's thread
    (the UI thread only paints it and never calls back into the engine).

    `row` is the engine's row this alternative comes from; a `Candidate` of the result carries the same row,
    so the app keeps a row's words, confidences and pins from the first step to the result without matching
    texts.
    """

    spans: tuple[Span, ...]
    row: int = 0

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.spans)

    def __repr__(self) -> str:
        return f"CandidateView({self.text!r}, row={self.row})"


@dataclass(frozen=True)
class StepEvent:
    """The current best text of every alternative after one denoising step."""

    request_id: int
    step: int
    max_steps: int
    block: int
    candidates: tuple[CandidateView, ...]
    elapsed: float = 0.0

    @property
    def text(self) -> str:
        return self.candidates[0].text if self.candidates else ""


@dataclass(frozen=True)
class Candidate:
    """A finished alternative: the text to insert (draft), to replace the selection with (rewrite) or to put
    in the gap (infill)."""

    text: str
    token_ids: tuple[int, ...]
    confidence: float
    row: int = -1  # the engine row it finished in (the `CandidateView.row` of its steps); -1: not known


@dataclass(frozen=True)
class Stats:
    forwards: int = 0
    new_tokens: int = 0
    seconds: float = 0.0
    first_draft_seconds: float = 0.0
    steps: int = 0
    blocks: int = 0
    prompt_tokens: int = 0  # tokens in the prompt
    reused_tokens: int = 0  # of which came from the prefix cache (not encoded again)

    @property
    def tokens_per_forward(self) -> float:
        return self.new_tokens / self.forwards if self.forwards else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Result:
    request_id: int
    candidates: tuple[Candidate, ...]
    stats: Stats = field(default_factory=Stats)
    cancelled: bool = False
    notice: str = ""

    @property
    def text(self) -> str:
        return self.candidates[0].text if self.candidates else ""


@dataclass(frozen=True)
class LoadProgress:
    """Loading progress: tensors and bytes done out of the total, and what is happening now.

    `stage` names the phase: "starting" (importing torch), "preparing" (checkpoint, tokenizer, empty model),
    "loading"/"reading cache" (reading weights), "quantizing", "moving to the GPU", "warming up", "ready". A
    phase without a measurable share has `total == 0` (`measurable` is False): show it as "Preparing…", not as
    0%.
    """

    done: int
    total: int
    bytes_done: int = 0
    bytes_total: int = 0
    stage: str = "loading"

    @property
    def measurable(self) -> bool:
        return self.bytes_total > 0 or self.total > 0

    @property
    def fraction(self) -> float:
        """The share done, by bytes where known (a tensor count runs ahead on small tensors and stalls on big
        ones)."""
        if self.bytes_total:
            return min(1.0, self.bytes_done / self.bytes_total)
        return self.done / self.total if self.total else 0.0


@dataclass(frozen=True)
class ModelInfo:
    name: str
    path: str
    device: str
    dtype: str
    quantization: str
    parameters: int
    canvas_length: int
    context_length: int
    notice: str = ""
    # The most characters of a document brief this model reads beside a request
    # (`engine.prompts.brief_limit`); 0: not known. A longer brief would leave no room for the writer's text,
    # so the app keeps briefs within it.
    brief_chars: int = 0


@dataclass(frozen=True)
class Capabilities:
    """What the engine behind the interface can do, so the app enables only what works (and says why not).

    The local engine can do everything; a remote server is probed at connect (see `engine.remote.probe`).
    `where` is the sentence for the status bar ("this computer", or "Server: host · model"). A `*_reason` is
    the tooltip of a control that is off because of it.
    """

    backend: Literal["local", "remote"] = "local"
    where: str = "this computer"
    canvas_control: bool = True  # seeded canvases with pinned positions: true infill, strength, pins, re-roll
    canvas_control_reason: str = ""
    live_steps: bool = True  # every denoising step is streamed (a server streams committed canvases only)
    seeds: bool = True  # a seed makes output repeatable
    max_candidates: int = 8
    context_length: int = 0  # tokens the model reads at once (0: unknown until loaded)
    server_version: str = ""
    # "diffusion": DiffusionGemma (local or served); "text": an ordinary model on a server (the text tier,
    # `engine.remote.text_backend`), which writes left to right: no canvas, strength, pins or live steps.
    model_kind: Literal["diffusion", "text"] = "diffusion"


LOCAL_CAPABILITIES = Capabilities()


StepCallback = Callable[[StepEvent], None]
ProgressCallback = Callable[[LoadProgress], None]
Device = Literal["auto", "cpu", "cuda"]
Quantization = Literal["auto", "nf4", "nf4-mixed", "none"]


@runtime_checkable
class Engine(Protocol):
    """What the GUI's engine thread drives: the backend seam. `engine.session.Session` (the local model),
    `engine.remote.RemoteEngine` (a DiffusionGemma server) and `engine.fake.FakeEngine` implement it.

    All calls are synchronous and made from one thread. `cancel` is checked at every step (a remote backend
    closes its stream). `capabilities` says what this backend can do; the app reads nothing else about which
    one it is.
    """

    @property
    def info(self) -> ModelInfo | None: ...

    @property
    def capabilities(self) -> Capabilities: ...

    def load(
        self,
        model_dir: str | Path,
        *,
        device: Device = "auto",
        quantization: Quantization = "auto",
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelInfo: ...

    def unload(self) -> None: ...

    def run(
        self, request: Request, on_step: StepCallback | None = None, cancel: threading.Event | None = None
    ) -> Result: ...


# ------------------------------------------------------------------------------------------------------------
# Errors: each says what happened and what the writer can do about it.


class EngineError(Exception):
    """Base of every error the engine reports on purpose. `kind` is stable (used in JSON output)."""

    kind = "engine_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ModelNotFoundError(EngineError):
    kind = "model_not_found"


class ModelIncompleteError(EngineError):
    kind = "model_incomplete"


class UnsupportedModelError(EngineError):
    kind = "unsupported_model"


class NotAModelFolderError(ModelNotFoundError):
    """The folder exists but holds no model at all (an empty folder, /tmp): choose another one."""

    kind = "not_a_model_folder"


class ModelDamagedError(ModelIncompleteError):
    """A file is there but lies about itself (bad JSON, a header that does not match the data): download it
    again."""

    kind = "model_damaged"


class ModelUnreadableError(ModelNotFoundError):
    """The operating system refuses to let Letterpress read a file or folder (permissions, I/O error)."""

    kind = "model_unreadable"


class ModelNotLoadedError(EngineError):
    kind = "model_not_loaded"


class EmptyRequestError(EngineError):
    kind = "empty_request"


class PromptTooLongError(EngineError):
    kind = "prompt_too_long"


class OutOfMemoryError(EngineError):
    kind = "out_of_memory"


class WontFitError(EngineError):
    kind = "wont_fit"


class LoadCancelledError(EngineError):
    kind = "load_cancelled"


class GenerationError(EngineError):
    kind = "generation_error"


# Errors of a remote backend (a server): each names the host and what the writer can do.


class ServerError(EngineError):
    kind = "server_error"


class ServerUnreachableError(ServerError):
    kind = "server_unreachable"


class ServerTLSError(ServerError):
    kind = "server_tls"


class ServerAuthError(ServerError):
    kind = "server_auth"


class ServerModelNotFoundError(ServerError):
    kind = "server_unknown_model"


class ServerRejectedError(ServerError):
    """HTTP 400: the server refused a field of the request; `field` names it (empty when it did not say)."""

    kind = "server_rejected"

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class ServerFailedError(ServerError):
    kind = "server_failed"


class ServerDiedError(ServerError):
    kind = "server_died"


class ServerTimeoutError(ServerError):
    kind = "server_timeout"


class ServerAddressError(ServerError):
    """The server address cannot be used (a port out of range, a broken bracket): refused before any
    connection."""

    kind = "server_address"


class ServerKeyError(ServerAuthError):
    """The API key cannot travel in an HTTP header (a line break, a space, a non-ASCII character)."""

    kind = "server_bad_key"


class ServerRedirectError(ServerError):
    """The server tried to send the request to another origin (scheme, host, port); it was not followed."""

    kind = "server_redirect"


class ServerAnswerError(ServerError):
    """The server answered in a shape its endpoint never has (a list where an object belongs, a word where a
    number belongs)."""

    kind = "server_bad_answer"


class ServerTooLargeError(ServerError):
    """The server sent more than the request could need (tokens asked x a bound per token); reading
    stopped."""

    kind = "server_too_large"


# The words for memory, by the device that ran short: GPU memory on a GPU, RAM on the CPU. Every refusal used
# to say "close other programs using the GPU", also on a CPU-only machine short of RAM, where it names a
# device the machine does not have and hides the fix. Every memory message (the load-time fit, the load, the
# per-request budget, a run that ran out, the app's model manager) takes its words from here, given the device
# it talks about; they live in the API because the weights room, the session and the app all say them.

HOST_OOM_MARKERS = ("DefaultCPUAllocator", "can't allocate memory", "cannot allocate memory")


def is_gpu(device: object) -> bool:
    """Whether `device` ("cuda", "cuda:0", "cuda:0 (name)", a torch.device) is a GPU."""
    return str(device).strip().lower().startswith(("cuda", "gpu"))


def memory_name(device: object) -> str:
    """ "GPU memory" or "memory (RAM)": what ran short on `device`."""
    return "GPU memory" if is_gpu(device) else "memory (RAM)"


def free_memory_advice(device: object) -> str:
    """The clause that frees memory on `device` (no capital, no full stop)."""
    if is_gpu(device):
        return "close other programs using the GPU"
    return "close other programs to free RAM"


def is_host_out_of_memory(exc: BaseException) -> bool:
    """A host allocation failure as torch reports it (a RuntimeError naming its CPU allocator), or a
    MemoryError."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(m in text for m in HOST_OOM_MARKERS)
