"""`RemoteEngine`: the `engine.api.Engine` interface over a DiffusionGemma server (vLLM's OpenAI API).

A request becomes: the prompt ids from `engine.prompts` (through the server's chat template), one streaming
`/v1/completions` call with `n` alternatives, and a `StepEvent` per committed canvas as it arrives (a server
streams committed canvases only, never the denoising steps between). Never sent: `seed`, `temperature`,
`suffix` (vLLM answers 400 to each for DiffusionGemma). With canvas control, an infill pins the text after the
gap in a seeded canvas and a rewrite at strength < 1 (or with pins, a re-roll) warm-starts one; without it,
infill and rewrite go by instruction. Cancellation closes the stream from a watcher thread, so a cancel is
honoured while the call waits on the network, not only between events.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import prompts
from engine.api import (
    Candidate,
    CandidateView,
    Capabilities,
    Device,
    DraftRequest,
    EngineError,
    InfillRequest,
    ModelInfo,
    ModelNotLoadedError,
    ProgressCallback,
    PromptTooLongError,
    Quantization,
    Request,
    Result,
    RewriteRequest,
    ServerError,
    ServerTooLargeError,
    Span,
    Stats,
    StepCallback,
    StepEvent,
)
from engine.remote import canvas as canvas_xargs
from engine.remote import shapes, tiers
from engine.remote.client import ServerClient, Timeouts, translate
from engine.remote.probe import Probe, probe
from engine.remote.text_backend import TextEngine
from engine.remote.tokenizer import ServerTokenizer

MAX_CHARS_PER_TOKEN = 128  # no tokenizer's token is longer; a server sending more sends something else
DEFAULT_CANVAS = 256  # DiffusionGemma's canvas; a server may run another (the demo model: 64)
INSTRUCTION_INFILL_TOKENS = 64  # the gap's length asked for when the server cannot pin the ending


@dataclass(frozen=True)
class ServerConfig:
    """Where to send text: the server's URL, the model it serves (None: the first it lists), an API key, and
    the model's context length in tokens where the server does not state it (None: ask the server)."""

    url: str
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeouts: Timeouts = field(default_factory=Timeouts)
    context_length: int | None = None


@dataclass
class _Call:
    """What one request sends; also what a bare `openai` client is given in the overhead benchmark."""

    prompt: list[int]
    max_tokens: int
    n: int
    xargs: dict[str, Any] | None
    notice: str = ""
    middle: int | None = None  # an infill with the ending pinned: the first `middle` canvas slots are the gap


class RemoteEngine:
    """Drives one server. `connect()` (or `load(url)`) probes it; `run()` streams a request.

    A server whose model is not DiffusionGemma (`engine.remote.tiers`) is driven by a `TextEngine` (the text
    tier), to which `info`, `capabilities` and `run` are handed; `text` is that engine (None on the
    DiffusionGemma tier)."""

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config
        self._client: ServerClient | None = None
        self._probe: Probe | None = None
        self._tokenizer: ServerTokenizer | None = None
        self.canvas_length = DEFAULT_CANVAS
        self.vocab_size = 256
        self._stops: set[int] | None = None
        self.last_timings: dict[str, float] = {}
        self.last_call_n = 0  # the `n` of the latest request (what the server was asked for)
        self.text: TextEngine | None = None

    # -- Engine protocol -------------------------------------------------------------------------------------

    @property
    def info(self) -> ModelInfo | None:
        if self.text is not None:
            return self.text.info
        if self._probe is None:
            return None
        m = self._probe.model
        return ModelInfo(
            name=m.id,
            path=self._client.url if self._client else "",  # without credentials
            device="server",
            dtype="",
            quantization="",
            parameters=0,
            canvas_length=self.canvas_length,
            context_length=m.max_model_len,
            notice=f"vLLM {self._probe.version}".strip(),
            brief_chars=prompts.brief_limit(m.max_model_len or 0, self.canvas_length),
        )

    @property
    def capabilities(self) -> Capabilities:
        if self.text is not None:
            return self.text.capabilities
        if self._probe is None:
            return Capabilities(
                backend="remote",
                where="Server: not connected",
                canvas_control=False,
                live_steps=False,
                seeds=False,
            )
        return self._probe.capabilities

    def load(
        self,
        model_dir: str | Path,
        *,
        device: Device = "auto",
        quantization: Quantization = "auto",
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelInfo:
        """Connect; `model_dir` is the server URL when no config was given (device and quantization are the
        server's business)."""
        if self.config is None:
            self.config = ServerConfig(str(model_dir))
        self.connect()
        assert self.info is not None
        return self.info

    def unload(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._probe = self._tokenizer = None
        self._stops = None
        self.text = None

    def connect(self) -> Probe | TextEngine:
        """Probe the server: the DiffusionGemma tier's `Probe`, or the text tier's engine."""
        if self.config is None:
            raise ModelNotLoadedError("No server is configured. Choose one in Model ▸ Use a server….")
        self.unload()
        client = ServerClient(self.config.url, self.config.api_key, self.config.timeouts)
        try:
            models = tiers.served_models(client)
            chosen = tiers.pick(models, self.config.model, client.host)
            canvas_length = tiers.diffusion_canvas(client, chosen)
            if canvas_length is None:
                self._client = client
                self.text = TextEngine(
                    client,
                    chosen,
                    context_length=self.config.context_length,
                    version=tiers.server_version(client, chosen),
                    models=models,
                )
                return self.text
            found = probe(client, self.config.model)
        except BaseException:
            client.close()
            raise
        self._client, self._probe = client, found
        self._tokenizer = ServerTokenizer(client, found.model.id)
        # The canvas length sizes requests and the vocabulary the noise of a seeded canvas; vLLM says both
        # only when it refuses a bad seed canvas (cheap: refused at admission, before any model work).
        self.canvas_length = canvas_length
        if found.capabilities.canvas_control:
            self.vocab_size = canvas_xargs.vocab_size_of(client, found.model.id, 256)
        return found

    def run(
        self, request: Request, on_step: StepCallback | None = None, cancel: threading.Event | None = None
    ) -> Result:
        if self.text is not None:
            return self.text.run(request, on_step, cancel)
        if self._client is None or self._probe is None:
            raise ModelNotLoadedError(
                "Letterpress is not connected to the server. Choose it in Model ▸ Use a "
                "server… and press Test."
            )
        start = time.perf_counter()
        try:
            call = self.plan(request)
        except EngineError:
            raise
        except Exception as exc:
            raise translate(exc, self._client.host, read_timeout=self._client.timeouts.read) from exc
        return self._stream(request, call, on_step, cancel, start)

    # -- planning --------------------------------------------------------------------------------------------

    def plan(self, request: Request) -> _Call:
        """The prompt ids, the length asked for, n, and the canvas-control arguments of `request`."""
        assert self._probe is not None and self._tokenizer is not None
        caps = self._probe.capabilities
        n = max(1, min(request.settings.candidates, caps.max_candidates))
        control = caps.canvas_control
        max_tokens = self._max_tokens(request, control)
        context = caps.context_length or 4096
        budget = context - max_tokens
        if budget < 8:
            raise PromptTooLongError(
                f"Asking for {max_tokens:,} new tokens leaves no room for the text before it "
                f"(the server's model reads {context:,} tokens at once); ask for fewer."
            )
        instruction_infill = isinstance(request, InfillRequest) and not control
        prompt = prompts.build_prompt(
            self._tokenizer, request, budget, infill_after_in_prompt=instruction_infill
        )
        xargs, middle = None, None
        notice = prompt.notice
        if control:
            seed = request.settings.seed if request.settings.seed is not None else secrets.randbelow(2**31)
            xargs, middle = canvas_xargs.for_request(
                self._tokenizer,
                request,
                self.canvas_length,
                self.vocab_size,
                request.settings.max_steps,
                seed,
            )
        elif canvas_xargs.is_warm(request):
            cold = (
                "This server has no canvas control, so the text was rewritten from the instruction alone (no "
                "strength, pins or re-roll)."
            )
            notice = " ".join(n for n in (notice, cold) if n)
        return _Call(prompt.ids, max_tokens, n, xargs, notice, middle=middle)

    def _max_tokens(self, request: Request, control: bool) -> int:
        canvas = self.canvas_length
        if isinstance(request, DraftRequest):
            return max(1, request.max_new_tokens)
        if isinstance(request, RewriteRequest):
            if request.max_new_tokens:
                return request.max_new_tokens
            assert self._tokenizer is not None
            selected = len(self._tokenizer(request.selection, add_special_tokens=False)["input_ids"])
            return max(canvas, math.ceil((selected * 2 + 16) / canvas) * canvas)
        if control:
            return canvas
        return request.middle_tokens or min(INSTRUCTION_INFILL_TOKENS, canvas)

    def _middle_text(self, ids: list[int], middle: int) -> str:
        """The gap's text: its slots up to the first end-of-turn (what follows is not part of it), decoded by
        the server without special tokens."""
        assert self._client is not None
        kept = ids[:middle]
        stops = self._stop_ids()
        for k, t in enumerate(kept):
            if t in stops:
                kept = kept[:k]
                break
        if not kept:
            return ""
        answer = self._client.post_json(
            "/detokenize", {"model": self._probe.model.id if self._probe else "", "tokens": kept}
        )
        return shapes.detokenize(answer, self._client.host)

    def _stop_ids(self) -> set[int]:
        if self._stops is None:
            assert self._tokenizer is not None
            found: set[int] = set()
            for name in ("<end_of_turn>", "<eos>", "<pad>"):
                got = self._tokenizer(name, add_special_tokens=False)["input_ids"]
                if len(got) == 1:
                    found.add(int(got[0]))
            self._stops = found
        return self._stops

    # -- streaming -------------------------------------------------------------------------------------------

    def _stream(
        self,
        request: Request,
        call: _Call,
        on_step: StepCallback | None,
        cancel: threading.Event | None,
        start: float,
    ) -> Result:
        client, model = self._client, self._probe
        assert client is not None and model is not None
        texts = [""] * call.n
        confs: list[list[tuple[str, float]]] = [[] for _ in range(call.n)]
        ids: list[list[int]] = [[] for _ in range(call.n)]
        canvases = 0
        first_canvas = 0.0
        cancelled = False
        stream: Any = None
        stop_watch = threading.Event()

        def watch() -> None:  # closing the response interrupts a read that waits on the network
            assert cancel is not None
            while not stop_watch.is_set():
                if cancel.wait(0.05):
                    with contextlib.suppress(Exception):  # closing a dead stream is fine
                        stream.close()
                    return

        watcher = threading.Thread(target=watch, name="remote-cancel", daemon=True)
        kwargs = completion_kwargs(model.model.id, call)
        self.last_call_n = call.n
        try:
            if cancel is not None and cancel.is_set():
                return Result(request.request_id, (), Stats(seconds=0.0), cancelled=True)
            stream = client.openai.completions.create(**kwargs)
            self.last_timings = {"headers": time.perf_counter() - start}
            if cancel is not None:
                watcher.start()
            for chunk in stream:
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    break
                touched = False
                for choice in shapes.stream_choices(chunk, client.host, call.n):
                    i = choice.index
                    if not choice.text and not choice.tokens:
                        continue
                    if call.middle is not None:  # the canvas holds middle + pinned ending: keep the middle
                        ids[i].extend(shapes.token_ids(choice.tokens, client.host))
                        texts[i] = self._middle_text(ids[i], call.middle)
                    else:
                        texts[i] += choice.text
                        confs[i].extend(_confidences(choice))
                    _check_length(texts[i], call.max_tokens, client.host)
                    touched = True
                if not touched:
                    continue
                canvases += 1
                if canvases > call.max_tokens * call.n + 8:  # each event commits a token at least
                    raise _too_many_events(client.host, call.max_tokens)
                if not first_canvas:
                    first_canvas = time.perf_counter() - start
                    self.last_timings["first_canvas"] = first_canvas
                if on_step is not None:
                    views = tuple(CandidateView(_spans(texts[i], confs[i]), row=i) for i in range(call.n))
                    on_step(
                        StepEvent(
                            request.request_id,
                            canvases,
                            canvases,
                            canvases - 1,
                            views,
                            time.perf_counter() - start,
                        )
                    )
        except ServerError:
            raise
        except Exception as exc:
            if cancel is not None and cancel.is_set():
                cancelled = True
            else:
                raise translate(
                    exc,
                    client.host,
                    streaming=stream is not None,
                    model=model.model.id,
                    read_timeout=client.timeouts.read,
                ) from exc
        finally:
            stop_watch.set()
            if cancel is not None and cancel.is_set():
                cancelled = True  # asked before the end: the writer no longer wants this result
            if stream is not None:
                with contextlib.suppress(Exception):  # closing a dead stream is fine
                    stream.close()
        seconds = time.perf_counter() - start
        self.last_timings["total"] = seconds
        candidates = tuple(
            _candidate(texts[i], confs[i], ids[i][: call.middle] if call.middle else ids[i], row=i)
            for i in range(call.n)
        )
        candidates = _distinct_nonempty(candidates)
        stats = Stats(
            forwards=0,
            new_tokens=sum(len(c) for c in confs[:1]),
            seconds=seconds,
            first_draft_seconds=first_canvas,
            steps=canvases,
            blocks=canvases,
            prompt_tokens=len(call.prompt),
        )
        return Result(request.request_id, candidates, stats, cancelled=cancelled, notice=call.notice)


def completion_kwargs(model: str, call: _Call) -> dict[str, Any]:
    """The `/v1/completions` arguments: token-id prompt, n, streaming with final logprobs (for shading); never
    seed, temperature or suffix."""
    kwargs: dict[str, Any] = {
        "model": model,
        "prompt": call.prompt,
        "max_tokens": call.max_tokens,
        "n": call.n,
        "stream": True,
        "logprobs": 1,
    }
    extra: dict[str, Any] = {}
    if call.xargs:
        extra["vllm_xargs"] = call.xargs
    if call.middle is not None:
        extra["return_tokens_as_token_ids"] = True  # the gap is cut from the canvas by position
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _confidences(choice: shapes.StreamChoice) -> list[tuple[str, float]]:
    out = []
    for tok, value in zip(choice.tokens, choice.logprobs, strict=False):
        out.append((tok, min(1.0, math.exp(min(value, 0.0))) if value is not None else 1.0))
    return out


def _too_many_events(host: str, max_tokens: int) -> ServerTooLargeError:
    return ServerTooLargeError(
        f"The server at {host} sent more pieces of answer than a request of {max_tokens:,} tokens can have, "
        "so Letterpress stopped reading it. Your document was not changed; check that the address is a "
        "DiffusionGemma (or OpenAI-compatible) server."
    )


def _check_length(text: str, max_tokens: int, host: str) -> None:
    """A choice's text may not outgrow what `max_tokens` tokens can spell (`MAX_CHARS_PER_TOKEN` each):
    more is a server answering something else, and showing it would only bury the writer's page."""
    limit = max(1, max_tokens) * MAX_CHARS_PER_TOKEN
    if len(text) > limit:
        raise ServerTooLargeError(
            f"The server at {host} sent more than {limit:,} characters for a request of {max_tokens:,} "
            "tokens, far more than that can hold, so Letterpress stopped reading it. Your document was not "
            "changed; check that the address is a DiffusionGemma (or OpenAI-compatible) server."
        )


def _spans(text: str, confs: list[tuple[str, float]]) -> tuple[Span, ...]:
    """The text as spans shaded by each token's probability (vLLM's final logprobs). Tokens that are not part
    of the text (an end-of-turn the server drops from it) are skipped; plain text at full confidence when the
    server sent no logprobs or its token strings do not add up to the text."""
    spans, pos = [], 0
    for tok, conf in confs:
        if tok and text.startswith(tok, pos):
            spans.append(Span(tok, conf))
            pos += len(tok)
    if confs and pos == len(text):
        return tuple(spans)
    return (Span(text, 1.0),) if text else ()


def _candidate(text: str, confs: list[tuple[str, float]], ids: list[int], *, row: int) -> Candidate:
    spans = _spans(text, confs)
    score = sum(s.confidence for s in spans) / len(spans) if spans else 1.0
    return Candidate(text, tuple(ids), score, row=row)


def _distinct_nonempty(found: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
    seen: set[str] = set()
    kept = []
    for cand in found:
        if cand.text.strip() and cand.text not in seen:
            seen.add(cand.text)
            kept.append(cand)
    return tuple(kept) or found[:1]
