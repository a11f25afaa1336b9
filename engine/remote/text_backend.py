"""`TextEngine`: the `engine.api.Engine` interface over a server of any model (Ollama, LM Studio, llama.cpp,
vLLM) through its OpenAI API: the text tier.

A draft continues the text on `/v1/completions` (chat with an instruction where the server has no such
endpoint); a rewrite, an infill by instruction and a draft on a chat-only server go to
`/v1/chat/completions` with the server's own chat template; an infill uses llama.cpp's `/infill` where the
server has it. Every answer streams (`stream: true`), each piece becomes a `StepEvent` at once (the ghost
grows as the model writes), and reading stops where the request's size ends. Alternatives ask for `n`; a
server that answers fewer is asked again one at a time, and they are ranked by the server's own
log-probabilities where it sends them. What a server refuses is learned once and remembered
(`engine.remote.text_features`). Cancellation closes the stream from a watcher thread, as in the
DiffusionGemma tier.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.api import (
    Candidate,
    CandidateView,
    Capabilities,
    Device,
    EngineError,
    ModelInfo,
    ModelNotLoadedError,
    ProgressCallback,
    Quantization,
    Request,
    Result,
    ServerFailedError,
    ServerModelNotFoundError,
    ServerRejectedError,
    Span,
    Stats,
    StepCallback,
    StepEvent,
)
from engine.remote import redact, shapes, text_answers
from engine.remote.client import ServerClient, translate
from engine.remote.shapes import TextModel
from engine.remote.text_features import Features, features_for
from engine.remote.text_prompts import TextPlan, plan
from engine.remote.text_stream import AnswerTooLongError, EventStream, MissingEndpointError

MAX_CANDIDATES = 4  # alternatives offered on this tier: each one is a full answer of an ordinary model
BYTES_PER_TOKEN = 2048  # an SSE event per token with its log-probabilities is well under this
DEFAULT_CONTEXT = 2048  # what is assumed when neither the server nor the writer says (llama.cpp's default)
TEXT_TIER_REASON = (
    "This server runs {model}, an ordinary text model (not DiffusionGemma): strength, pins and re-roll "
    "need DiffusionGemma's canvas, so they are off. Drafts, rewrites, infill and alternatives work."
)
CONTEXT_UNKNOWN = (
    "The server does not say how much text its model reads at once, so Letterpress assumes {tokens:,} "
    "tokens; set the model's context length in Model ▸ Use a server… if it reads more."
)
SERVER_NAMES = {"llamacpp": "llama.cpp", "library": "Ollama", "ollama": "Ollama", "vllm": "vLLM"}


class _OptionBrokeStreamError(Exception):
    """The stream broke before any text on a request with an optional field (llama-cpp-python without
    --logits_all answers 200 to `logprobs`, then fails mid-stream): resend once without it."""

    def __init__(self, option: str, cause: EngineError) -> None:
        super().__init__(option)
        self.option, self.cause = option, cause


@dataclass
class _Answer:
    """One alternative as it streams: the raw text, its log-probabilities, and how many pieces came."""

    raw: str = ""
    logprobs: list[float] = field(default_factory=list)
    pieces: int = 0
    finished: bool = False


class TextEngine:
    """Drives one server of any model. Made by `engine.remote.RemoteEngine` when the probe finds no
    DiffusionGemma; shares its client."""

    def __init__(
        self,
        client: ServerClient,
        model: TextModel,
        *,
        context_length: int | None = None,
        version: str = "",
        models: tuple[TextModel, ...] = (),
    ) -> None:
        self.client = client
        self.model = model
        self.models = models or (model,)  # everything the server offers (the dialog lists them)
        told = context_length or model.context_length
        self.context_length = told or DEFAULT_CONTEXT
        self.context_notice = "" if told else CONTEXT_UNKNOWN.format(tokens=DEFAULT_CONTEXT)
        self.features: Features = features_for(client.url, model.id)
        self.server_name = SERVER_NAMES.get(model.owned_by.lower(), "OpenAI-compatible server")
        self.version = version
        self.last_timings: dict[str, float] = {}
        self.sent: list[
            tuple[str, dict[str, Any]]
        ] = []  # (path, body) of this engine's requests, newest last

    # -- Engine protocol -------------------------------------------------------------------------------------

    @property
    def shown_name(self) -> str:
        """The model's id as sentences and the status bar show it (plain, no secret a server echoed)."""
        return redact.shown(self.model.id, 256, partial=False)

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(
            name=self.model.id,  # the id to ask for again (the app shows it scrubbed)
            path=self.client.url,
            device="server",
            dtype="",
            quantization="",
            parameters=0,
            canvas_length=0,
            context_length=self.context_length,
            notice=f"{self.server_name} {self.version}".strip(),
            brief_chars=max(0, (self.context_length // 4) * 3 // 50 * 50),
        )

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend="remote",
            where=f"Server: {self.client.host} · {self.shown_name}",
            canvas_control=False,
            canvas_control_reason=TEXT_TIER_REASON.format(model=self.shown_name),
            live_steps=False,
            seeds=False,
            max_candidates=MAX_CANDIDATES,
            context_length=self.context_length,
            server_version=self.version,
            model_kind="text",
        )

    def load(
        self,
        model_dir: str | Path,
        *,
        device: Device = "auto",
        quantization: Quantization = "auto",
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelInfo:
        return self.info

    def unload(self) -> None:
        """The client belongs to the `RemoteEngine` that made this engine; it closes it."""

    def run(
        self, request: Request, on_step: StepCallback | None = None, cancel: threading.Event | None = None
    ) -> Result:
        if self.client is None:
            raise ModelNotLoadedError("Letterpress is not connected to the server.")
        start = time.perf_counter()
        the_plan = plan(request, self.context_length, MAX_CANDIDATES)
        notice = " ".join(x for x in (the_plan.notice, self.context_notice) if x)
        answers: list[_Answer] = []
        self.last_timings = {}

        def show(current: list[_Answer]) -> None:
            if on_step is None:
                return
            views = tuple(
                CandidateView((Span(t, 1.0),) if t else (), row=row)
                for row, t in enumerate(self._texts(the_plan, current))
            )
            on_step(StepEvent(request.request_id, len(self.sent), 0, 0, views, time.perf_counter() - start))

        answers, cancelled, notice = self._gather(the_plan, show, cancel, notice)
        texts = self._texts(the_plan, answers)
        if (
            the_plan.kind == "infill"
            and not cancelled
            and not any(t.strip() for t in texts)
            and self.features.completions is not False
        ):
            # The model only repeated the two sides (small chat models do): continue the text before the
            # gap instead, cut at its first sentence end, which joins a gap between sentences.
            the_plan = dataclasses.replace(the_plan, continuation=the_plan.before[-4000:].rstrip())
            answers, cancelled, notice = self._gather(the_plan, show, cancel, notice)
            texts = self._texts(the_plan, answers)
        candidates = _ranked(the_plan, texts, answers)
        seconds = time.perf_counter() - start
        self.last_timings["total"] = seconds
        stats = Stats(
            new_tokens=sum(a.pieces for a in answers[:1]),
            seconds=seconds,
            first_draft_seconds=self.last_timings.get("first_piece", 0.0),
            steps=len(answers),
            blocks=len(answers),
            prompt_tokens=0,
        )
        if not cancelled and not any(c.text.strip() for c in candidates):
            raise ServerFailedError(
                f"The model on the server at {self.client.host} answered with no text for this request; "
                "your document was not changed. Try again, or rephrase the instruction."
            )
        return Result(request.request_id, candidates, stats, cancelled=cancelled, notice=notice)

    # -- one request -----------------------------------------------------------------------------------------

    def _gather(
        self,
        the_plan: TextPlan,
        show: Callable[[list[_Answer]], None],
        cancel: threading.Event | None,
        notice: str,
    ) -> tuple[list[_Answer], bool, str]:
        """The plan's `n` alternatives: one request with `n`, then one at a time for those a server that
        ignores `n` left out."""
        answers: list[_Answer] = []
        cancelled = False
        while len(answers) < the_plan.n:
            if cancel is not None and cancel.is_set():
                cancelled = True
                break
            got, was_cancelled, extra = self._one_call(
                the_plan, the_plan.n - len(answers), answers, show, cancel
            )
            if extra and extra not in notice:
                notice = f"{notice} {extra}".strip()
            if was_cancelled:
                cancelled = True
                break
            answers.extend(got)
            if not got or not any(a.raw.strip() for a in got):
                break  # nothing came back: asking again would get nothing too
        return answers, cancelled, notice

    def _one_call(
        self,
        the_plan: TextPlan,
        want: int,
        earlier: list[_Answer],
        show: Callable[[list[_Answer]], None],
        cancel: threading.Event | None,
    ) -> tuple[list[_Answer], bool, str]:
        """One streamed request for `want` alternatives; falls back (once per refusal, remembered) to what
        the server accepts. Returns the answers, whether it was cancelled, and a notice."""
        for _attempt in range(6):  # each refusal removes one option, so this ends
            path, body = self._request(the_plan, want)
            try:
                return self._read(path, body, the_plan, want, earlier, show, cancel)
            except MissingEndpointError:
                if not self._learn_missing(path):
                    raise
            except ServerRejectedError as exc:
                if not self._learn_rejected(path, body, exc):
                    raise
            except ServerFailedError as exc:
                if not self._learn_template(path, exc):
                    raise
            except _OptionBrokeStreamError as broke:
                if path in self.features.no_logprobs:
                    raise broke.cause from None
                self.features.no_logprobs.add(path)
        raise ServerFailedError(
            f"The server at {self.client.host} refused every form of this request Letterpress can send."
        )

    def _request(self, the_plan: TextPlan, want: int) -> tuple[str, dict[str, Any]]:
        f = self.features
        n = want if f.n is not False else 1
        base: dict[str, Any] = {"model": self.model.id, "max_tokens": the_plan.max_tokens, "stream": True}
        if n > 1:
            base["n"] = n
        if the_plan.kind == "infill" and f.infill is not False and self.model.owned_by == "llamacpp":
            return "/infill", {
                "input_prefix": the_plan.before,
                "input_suffix": the_plan.after,
                "prompt": "",
                "n_predict": the_plan.max_tokens,
                "stream": True,
            }
        use_completions = (bool(the_plan.continuation) and f.completions is not False) or (
            f.chat is False or f.chat_template is False
        )
        if use_completions and f.completions is not False:
            body = {**base, "prompt": the_plan.completion_prompt()}
            if "/v1/completions" not in f.no_logprobs:
                body["logprobs"] = 1
            return "/v1/completions", body
        body = {**base, "messages": the_plan.messages()}
        if "/v1/chat/completions" not in f.no_logprobs:
            body["logprobs"] = True
        return "/v1/chat/completions", body

    def _learn_missing(self, path: str) -> bool:
        f = self.features
        if path == "/infill" and f.infill is not False:
            f.infill = False
            return True
        if path == "/v1/completions" and f.completions is not False:
            f.completions = False
            return f.chat is not False and f.chat_template is not False
        if path == "/v1/chat/completions" and f.chat is not False:
            f.chat = False
            return f.completions is not False
        return False

    def _learn_rejected(self, path: str, body: dict[str, Any], exc: ServerRejectedError) -> bool:
        f = self.features
        if exc.field == "logprobs" and "logprobs" in body and path not in f.no_logprobs:
            f.no_logprobs.add(path)
            return True
        if exc.field == "n" and f.n is not False and "n" in body:
            f.n = False
            return True
        if path == "/infill" and f.infill is not False:
            f.infill = False  # llama.cpp refuses /infill for a model without fill-in-the-middle tokens
            return True
        return self._learn_template(path, exc)

    def _learn_template(self, path: str, exc: EngineError) -> bool:
        text = exc.message.lower()
        if path == "/v1/chat/completions" and "template" in text and self.features.chat_template is not False:
            self.features.chat_template = False
            return self.features.completions is not False
        return False

    def _read(
        self,
        path: str,
        body: dict[str, Any],
        the_plan: TextPlan,
        want: int,
        earlier: list[_Answer],
        show: Callable[[list[_Answer]], None],
        cancel: threading.Event | None,
    ) -> tuple[list[_Answer], bool, str]:
        asked = int(body.get("n", 1))
        answers = [_Answer() for _ in range(asked)]
        limit = the_plan.max_tokens * asked
        stream = EventStream(
            self.client, path, body, max_bytes=limit * BYTES_PER_TOKEN + 64 * 1024, model=self.model.id
        )
        self.sent.append((path, body))
        stop_watch = threading.Event()
        cancelled = False
        notice = ""

        def watch() -> None:
            assert cancel is not None
            while not stop_watch.is_set():
                if cancel.wait(0.02):
                    stream.close()
                    return

        start = time.perf_counter()
        try:
            stream.open()
            if cancel is not None:
                threading.Thread(target=watch, name="remote-cancel", daemon=True).start()
            for event in stream:
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    break
                self._check_model(event)
                if not self._take(event, path, answers):
                    continue
                if "first_piece" not in self.last_timings:
                    self.last_timings["first_piece"] = time.perf_counter() - start
                show(earlier + answers)
                if any(a.pieces > the_plan.max_tokens + 2 for a in answers):
                    notice = "The server wrote past the length asked for; the rest was not read."
                    break
                if the_plan.words is not None and all(
                    text_answers.over_window(
                        text_answers.clean(a.raw, the_plan.selection),
                        the_plan.words,
                        len(the_plan.selection.split()),
                    )
                    or a.finished
                    for a in answers
                ):
                    break  # every alternative is past the rewrite's window: the cut drops the rest
            else:
                if not stream.done and not all(a.finished for a in answers) and not stream.closed:
                    raise ServerFailedError(
                        f"The server at {self.client.host} stopped answering before the end of its answer; "
                        "your document was not changed. Try again."
                    )
        except AnswerTooLongError:
            notice = "The server sent more than the length asked for; the rest was not read."
        except EngineError as exc:
            if cancel is not None and cancel.is_set():
                cancelled = True
            elif (
                "logprobs" in body
                and path not in self.features.no_logprobs
                and not isinstance(exc, (ServerRejectedError, MissingEndpointError, ServerModelNotFoundError))
            ):
                raise _OptionBrokeStreamError("logprobs", exc) from exc
            else:
                raise
        except Exception as exc:
            if cancel is not None and cancel.is_set():
                cancelled = True
            else:
                raise translate(exc, self.client.host, streaming=True, model=self.model.id) from exc
        finally:
            stop_watch.set()
            stream.close()
        if cancel is not None and cancel.is_set():
            cancelled = True
        got = [a for a in answers if a.raw.strip()] or answers[:1]
        if asked > 1 and len([a for a in answers if a.pieces]) < asked and not cancelled:
            self.features.n = False  # `n` ignored: the rest are asked for one at a time
        return got, cancelled, notice

    def _check_model(self, event: dict[str, Any]) -> None:
        """The answer's model is the one the writer chose (a server that swapped models is stopped, so the
        text is never written by a model nobody picked)."""
        name = event.get("model")
        if not isinstance(name, str) or not name:
            return
        f = self.features
        if not f.served_as:
            f.served_as = name
            return
        if name != f.served_as:
            raise ServerModelNotFoundError(
                f"The server at {self.client.host} now answers with the model '{name[:80]}' instead of "
                f"'{f.served_as[:80]}'; Letterpress stopped, and your document was not changed. Press "
                "Test in Model ▸ Use a server… to choose the model again."
            )

    def _take(self, event: dict[str, Any], path: str, answers: list[_Answer]) -> bool:
        """Add one event's pieces (parsed by `engine.remote.shapes`) to the answers; False when it carried
        no text."""
        touched = False
        for piece in shapes.text_pieces(event, self.client.host, path, len(answers)):
            answer = answers[piece.index]
            answer.finished = answer.finished or piece.finished
            if piece.text:
                answer.raw += piece.text
                answer.pieces += 1
                answer.logprobs.extend(piece.logprobs)
                touched = True
        return touched

    def _texts(self, the_plan: TextPlan, answers: list[_Answer]) -> list[str]:
        out = []
        for a in answers:
            if the_plan.kind == "rewrite":
                out.append(text_answers.rewrite_text(a.raw, the_plan.selection, the_plan.words))
            elif the_plan.kind == "infill" and the_plan.continuation:
                first = text_answers.first_sentences(
                    text_answers.drop_repeat_of_before(a.raw.lstrip(), the_plan.before), the_plan.max_tokens
                )
                out.append(text_answers.infill_text(first, the_plan.before, the_plan.after))
            elif the_plan.kind == "infill":
                out.append(text_answers.infill_text(a.raw, the_plan.before, the_plan.after))
            else:
                cleaned = self.features.completions is False
                out.append(text_answers.draft_text(a.raw, the_plan.before, cleaned=cleaned))
        return out


def _ranked(the_plan: TextPlan, texts: list[str], answers: list[_Answer]) -> tuple[Candidate, ...]:
    """Distinct non-empty alternatives, best first: a rewrite inside its window before one outside it, then
    by the mean log-probability the server gave (where it gave them), else in the order they came."""
    seen: set[str] = set()
    scored = []
    for order, (text, answer) in enumerate(zip(texts, answers, strict=False)):
        if not text.strip() or text in seen:
            continue
        seen.add(text)
        mean = sum(answer.logprobs) / len(answer.logprobs) if answer.logprobs else 0.0
        fits = True
        if the_plan.words is not None:
            count = len(text.split())
            fits = the_plan.words.low <= count <= the_plan.words.high
        scored.append((not fits, -mean if answer.logprobs else 0.0, order, text, mean))  # order: the row
    scored.sort()
    return tuple(Candidate(t, (), math.exp(m) if m else 1.0, row=row) for _, _, row, t, m in scored)
