"""`python -m engine bench`: our engine side by side with `model.generate()`, and the real-shape forward.

Method (see docs/performance.md): one process, one loaded model object, the same requests with the same seeds
and sampler settings. Every request runs first as a warm-up, then `--repeats` times, alternating which side
goes first, and we keep each side's median. Our side is `Session.run` with a listener (what the editor gets:
display decoding and event delivery included); the reference is `model.generate()` on the very prompt ids our
session built. Both sides run with the same forward recorder (a wrapper around the decoder and encoder
forwards) so "model forward" and "everything else" are cut at the same place. Host/device synchronisations are
counted in a separate, untimed pass with a dispatch mode (see `SyncCounter`). `engine_vs_reference` (sum of
our medians / sum of the reference's) is the last key of `--json`.

`--real-shape --layers N` builds N decoder layers with the exact 26B-A4B shapes (random weights, NF4 as the
app stores them), times one 256-token canvas forward after 2K and 8K prefixes, extrapolates to 30 layers and
prints it next to the device's roofline; see `engine.tools.realbench`.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.api import DenoiseSettings, DraftRequest, InfillRequest, Request, RewriteRequest, StepEvent

BEFORE_SHORT = "It was the best of times, it was the worst of times,"
BEFORE_LONG = (
    "In the morning the harbour was quiet, and the boats rested on the grey water until the wind came. "
    "The writer sat at the window with a cup of tea and a page that would not fill itself. "
) * 6
SELECTION_SHORT = "The quick brown fox jumps over the lazy dog."
SELECTION_LONG = (
    "Letterpress refines a whole block of text in parallel, the way a printing press sets a page at once. "
    "A writer drafts, rewrites and fills gaps in a document, and the text settles word by word. "
) * 3
AFTER = " The boats rested on the grey water until the wind came."


@dataclass(frozen=True)
class Case:
    """One benchmark request: what it is, how to build it (a fresh request id each run) and its seed."""

    name: str
    kind: str
    build: Callable[[DenoiseSettings], Request]
    seed: int


def default_cases(canvas: int) -> list[Case]:
    """Draft, rewrite and infill at a few prompt and output lengths, each with its own fixed seed."""
    return [
        Case(
            "draft-short-1blk",
            "draft",
            lambda s: DraftRequest(BEFORE_SHORT, max_new_tokens=canvas, settings=s),
            11,
        ),
        Case(
            "draft-long-2blk",
            "draft",
            lambda s: DraftRequest(BEFORE_LONG, max_new_tokens=2 * canvas, settings=s),
            12,
        ),
        Case(
            "rewrite-short",
            "rewrite",
            lambda s: RewriteRequest(
                SELECTION_SHORT, "Make it more formal.", max_new_tokens=canvas, settings=s
            ),
            13,
        ),
        Case(
            "rewrite-long-ctx",
            "rewrite",
            lambda s: RewriteRequest(
                SELECTION_LONG,
                "Make it shorter.",
                before=BEFORE_SHORT,
                after=AFTER,
                max_new_tokens=canvas,
                settings=s,
            ),
            14,
        ),
        Case(
            "infill-half",
            "infill",
            lambda s: InfillRequest(BEFORE_SHORT, AFTER, middle_tokens=max(1, canvas // 2), settings=s),
            15,
        ),
    ]


# ------------------------------------------------------------------------------------------------------------
# Measuring instruments


class ForwardRecorder:
    """Wraps the model's decoder forward (`model.forward`) and encoder forward as instance attributes, so both
    samplers are cut the same way. Records (kind, start, end) per call; on CUDA also events for device
    time."""

    def __init__(self, model: Any, cuda: bool, enabled: bool = True) -> None:
        # Disabled under --fastpath: a wrapper on `forward` would be compiled into the CUDA graphs of both
        # sides.
        self.enabled = enabled
        self.model = model
        self.encoder = model.model.encoder
        self.cuda = cuda
        self.calls: list[tuple[str, float, float, Any, Any]] = []

    def _wrap(self, kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        def timed(*args: Any, **kwargs: Any) -> Any:
            e0 = e1 = None
            if self.cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            t1 = time.perf_counter()
            if e1 is not None:
                e1.record()
            self.calls.append((kind, t0, t1, e0, e1))
            return result

        return timed

    @contextmanager
    def installed(self) -> Iterator[ForwardRecorder]:
        if not self.enabled:
            yield self
            return
        with (
            _wrapped_forward(self.model, lambda f: self._wrap("decoder", f)),
            _wrapped_forward(self.encoder, lambda f: self._wrap("encoder", f)),
        ):
            yield self

    def reset(self) -> None:
        self.calls = []

    def split(self, end: float) -> dict[str, float]:
        """Per-step wall time (from one decoder forward's start to the next one's, or to the next encoder call
        / the end of the request) and the decoder forward's share of it."""
        import torch

        if self.cuda:
            torch.cuda.synchronize()
        steps = forward = step_wall = encoder = 0.0
        calls = self.calls
        for i, (kind, t0, t1, e0, e1) in enumerate(calls):
            took = e0.elapsed_time(e1) / 1000.0 if self.cuda else t1 - t0
            if kind == "encoder":
                encoder += took
                continue
            nxt = calls[i + 1][1] if i + 1 < len(calls) else end
            steps += 1
            forward += took
            step_wall += nxt - t0
        return {"steps": steps, "forward_s": forward, "step_s": step_wall, "encoder_s": encoder}


class SyncCounter:
    """Counts host/device synchronisations in a block: every op that must read a device value back to the
    host.

    A `TorchDispatchMode` sees scalar reads (`.item()`, `bool(t)`, `int(t)`: `_local_scalar_dense`, or
    `is_nonzero` / `item` whole under inference mode), device->host copies,
    and ops whose output size depends on the data (`nonzero`, `masked_select`, `unique`, `bincount`, ...). It
    cannot see inside a kernel, so `torch.multinomial` is counted as the two `.item()` checks its source
    performs (`(max < inf) & (min >= 0)` and `sum == 0`). On the CPU, copies of CPU tensors are not ops at
    all, so our loop's own one-per-step copy is added from its own count (`DenoiseOutput.syncs`), and our loop
    is counted on its device code path (`engine.denoise.device_code_path`): the host shortcuts it takes on the
    CPU read tensor values that are no synchronisation there and never run on a GPU. Calls inside the decoder
    forward are counted apart (the model's own syncs, the same on both sides).
    """

    DATA_DEPENDENT = ("nonzero", "masked_select", "unique", "_unique", "bincount", "repeat_interleave")
    SCALAR_READS = (
        "_local_scalar_dense",
        "is_nonzero",
        "item",
        "equal",
    )  # under inference mode some stay whole

    def __init__(self) -> None:
        self.total = 0
        self.in_forward = 0
        self.depth = 0
        self.marks: list[tuple[int, int]] = []  # (total, in_forward) at each decoder forward's start

    def per_step(self) -> tuple[float, float]:
        """Steady-state syncs per step outside and inside the decoder forward: counted from the first decoder
        forward to the last, so once-per-request work (prompt, final checks) is not spread over the steps."""
        if len(self.marks) < 2:
            return float(self.total - self.in_forward), float(self.in_forward)
        (t0, f0), (t1, f1) = self.marks[0], self.marks[-1]
        steps = len(self.marks) - 1
        return ((t1 - t0) - (f1 - f0)) / steps, (f1 - f0) / steps

    @contextmanager
    def counting(self, model: Any) -> Iterator[SyncCounter]:
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = kwargs or {}
                counter._see(func.overloadpacket.__name__, args, kwargs)
                return func(*args, **kwargs)

        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def forward(*a: Any, **k: Any) -> Any:
                self.marks.append((self.total, self.in_forward))
                self.depth += 1
                try:
                    return original(*a, **k)
                finally:
                    self.depth -= 1

            return forward

        with _wrapped_forward(model, wrap), Mode():
            yield self

    def _see(self, name: str, args: Any, kwargs: dict[str, Any]) -> None:
        if name == "multinomial":
            hit = 2
        elif name in self.SCALAR_READS or name.startswith(self.DATA_DEPENDENT):
            hit = 1
        elif name in ("_to_copy", "copy_"):
            hit = int(_device_to_host(name, args, kwargs))
        else:
            hit = 0
        self.total += hit
        if self.depth:
            self.in_forward += hit


@contextmanager
def _wrapped_forward(module: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """Put `wrap(current forward)` on the instance (nn.Module.__call__ reads `self.forward`); restore on
    exit."""
    previous = module.__dict__.get("forward")
    module.forward = wrap(module.forward)
    try:
        yield
    finally:
        if previous is None:
            del module.forward
        else:
            module.forward = previous


def _device_to_host(name: str, args: Any, kwargs: dict[str, Any]) -> bool:
    if name == "_to_copy":
        src = args[0] if args else None
        dev = kwargs.get("device")
        return src is not None and src.device.type != "cpu" and dev is not None and str(dev).startswith("cpu")
    dst, src = ((*args, None, None))[:2]
    return dst is not None and src is not None and src.device.type != "cpu" and dst.device.type == "cpu"


# ------------------------------------------------------------------------------------------------------------
# One run of each side


@dataclass
class Run:
    wall_s: float
    steps: int
    forward_s: float
    step_s: float
    encoder_s: float
    forwards: int
    blocks: int
    new_tokens: int
    first_draft_s: float
    ids: list[int] = field(default_factory=list)
    draw_s: float = 0.0  # ours only: drawing the sampler's random numbers
    deliver_s: float = 0.0  # ours only: display decoding + event delivery (the listener)


def _trim(ids: list[int], pad: int) -> list[int]:
    while ids and ids[-1] == pad:
        ids.pop()
    return ids


def run_engine(session: Any, case: Case, settings: DenoiseSettings, recorder: ForwardRecorder) -> Run:
    """Our side: `Session.run` with a listener that keeps the latest event, as the editor's engine thread
    does."""
    latest: list[StepEvent] = []
    first = [0.0]
    start = time.perf_counter()

    def on_step(event: StepEvent) -> None:
        if not first[0]:
            first[0] = time.perf_counter() - start
        latest[:] = [event]

    recorder.reset()
    result = session.run(case.build(settings), on_step=on_step)
    end = time.perf_counter()
    out = session.last_output
    if recorder.enabled:
        split = recorder.split(end)
    else:  # the loop's own timing: CUDA events around each decoder forward
        split = {
            "forward_s": out.forward_seconds,
            "step_s": sum(s for _, s in out.step_log),
            "encoder_s": 0.0,
        }
    best = result.candidates[0]
    return Run(
        wall_s=end - start,
        steps=out.steps,
        forward_s=split["forward_s"],
        step_s=split["step_s"],
        encoder_s=split["encoder_s"],
        forwards=out.forwards,
        blocks=out.blocks,
        new_tokens=len(best.token_ids),
        first_draft_s=first[0],
        ids=list(best.token_ids),
        draw_s=out.draw_seconds,
        deliver_s=out.deliver_seconds,
    )


def run_reference(
    model: Any,
    prompt: Any,
    max_new: int,
    settings: DenoiseSettings,
    seed: int,
    recorder: ForwardRecorder,
    pad: int,
    extra: dict[str, Any] | None = None,
) -> Run:
    """The reference: `torch.manual_seed(seed)` then `model.generate()` with the same sampler settings."""
    import torch
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    recorder.reset()
    start = time.perf_counter()
    torch.manual_seed(seed)
    out = model.generate(
        prompt,
        max_new_tokens=max_new,
        max_denoising_steps=settings.max_steps,
        t_min=settings.t_min,
        t_max=settings.t_max,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=settings.entropy_bound),
        stability_threshold=settings.stability_threshold,
        confidence_threshold=settings.confidence_threshold,
        **(extra or {}),
    )
    ids = out.sequences[0, prompt.shape[1] :].tolist()
    end = time.perf_counter()
    ids = _trim(ids, pad)
    if not recorder.enabled:  # no split: wall time, and forwards from generate()'s own tokens-per-forward
        tpf = float(out.tokens_per_forward[0]) if out.tokens_per_forward is not None else 0.0
        forwards = round(len(ids) / tpf) if tpf else 0
        blocks = max(1, -(-(len(out.sequences[0]) - prompt.shape[1]) // int(model.config.canvas_length)))
        return Run(
            wall_s=end - start,
            steps=forwards,
            forward_s=0.0,
            step_s=0.0,
            encoder_s=0.0,
            forwards=forwards,
            blocks=blocks,
            new_tokens=len(ids),
            first_draft_s=0.0,
            ids=ids,
        )
    split = recorder.split(end)
    decoder_calls = [c for c in recorder.calls if c[0] == "decoder"]
    first = (decoder_calls[0][2] - start) if decoder_calls else 0.0
    blocks = sum(1 for c in recorder.calls if c[0] == "encoder")
    return Run(
        wall_s=end - start,
        steps=int(split["steps"]),
        forward_s=split["forward_s"],
        step_s=split["step_s"],
        encoder_s=split["encoder_s"],
        forwards=len(decoder_calls),
        blocks=blocks,
        new_tokens=len(ids),
        first_draft_s=first,
        ids=ids,
    )


def _summarise(runs: list[Run], canvas: int) -> dict[str, Any]:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    steps = med([r.steps for r in runs]) or 1
    step_ms = med(
        [r.step_s / max(1, r.steps) * 1e3 for r in runs]
    )  # 0 when not split (reference, --fastpath)
    fwd_ms = med([r.forward_s / max(1, r.steps) * 1e3 for r in runs])
    last = runs[-1]
    draws_ms = med([r.draw_s / max(1, r.steps) * 1e3 for r in runs])
    deliver_ms = med([r.deliver_s / max(1, r.steps) * 1e3 for r in runs])
    detail = (
        {}
        if not any(r.draw_s for r in runs)
        else {
            "draws_ms_per_step": round(draws_ms, 4),
            "deliver_ms_per_step": round(deliver_ms, 4),
            "overhead_share_excluding_draws": round((step_ms - fwd_ms - draws_ms) / step_ms, 4)
            if step_ms
            else 0.0,
        }
    )
    return {
        "wall_ms": round(med([r.wall_s for r in runs]) * 1e3, 3),
        "wall_ms_all": [round(r.wall_s * 1e3, 3) for r in runs],
        "steps": int(steps),
        "blocks": last.blocks,
        "forwards_per_canvas": round(last.forwards / max(1, last.blocks), 2),
        "forwards_per_256_tokens": round(last.forwards / max(1, last.blocks) * 256 / canvas, 2),
        "new_tokens": last.new_tokens,
        "tokens_per_forward": round(last.new_tokens / max(1, last.forwards), 3),
        "first_draft_ms": round(med([r.first_draft_s for r in runs]) * 1e3, 3),
        "step_ms": round(step_ms, 4),
        "forward_ms_per_step": round(fwd_ms, 4),
        "overhead_ms_per_step": round(step_ms - fwd_ms, 4),
        "overhead_share": round((step_ms - fwd_ms) / step_ms, 4) if step_ms else None,
        "encoder_ms": round(med([r.encoder_s for r in runs]) * 1e3, 3),
        "outside_steps_ms": round(med([(r.wall_s - r.step_s - r.encoder_s) for r in runs]) * 1e3, 3),
        **detail,
    }


# ------------------------------------------------------------------------------------------------------------
# The side-by-side benchmark


def bench_model(
    model_dir: str | Path,
    *,
    device: str = "auto",
    repeats: int = 5,
    warmup: int = 1,
    max_steps: int = 48,
    cases: list[Case] | None = None,
    count_syncs: bool = True,
    fastpath: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every case through both samplers and return the report (see the module docstring for the
    method)."""
    import torch
    import transformers

    from engine.session import Session

    session = Session()
    info = session.load(model_dir, device=device)  # type: ignore[arg-type]
    model = session.model
    canvas = info.canvas_length
    cuda = info.device == "cuda"
    pad = session.pad_id
    cases = cases if cases is not None else default_cases(canvas)
    settings_base = DenoiseSettings(max_steps=max_steps)
    recorder = ForwardRecorder(model, cuda, enabled=not fastpath)
    ref_extra: dict[str, Any] = {}
    if fastpath:
        if not cuda:
            from engine.api import EngineError

            raise EngineError(
                "--fastpath needs a CUDA device (the fast path is CUDA graphs and a static cache)."
            )
        import os

        os.environ["LETTERPRESS_FASTPATH"] = "1"
        ref_extra = {"cache_implementation": "static"}  # the reference's own compiled mode
        count_syncs = False  # a dispatch mode around compiled graphs would measure the mode, not the engine
    report_cases = []
    eng_total = ref_total = 0.0
    with recorder.installed(), torch.inference_mode():
        for case in cases:
            settings = DenoiseSettings(**{**settings_base.__dict__, "seed": case.seed})
            first = run_engine(session, case, settings, recorder)  # warm-up; also gives the prompt ids
            out = session.last_output
            assert out is not None  # run_engine just ran
            prompt = out.sequences[:1, : out.prompt_length].to(model.device)
            max_new = (
                out.blocks * canvas if case.kind == "infill" else _max_new(session, case, settings, canvas)
            )
            for _ in range(max(0, warmup - 1)):
                run_engine(session, case, settings, recorder)
            for _ in range(max(1, warmup)):
                run_reference(model, prompt, max_new, settings, case.seed, recorder, pad, ref_extra)
            eng_runs: list[Run] = []
            ref_runs: list[Run] = []
            for rep in range(repeats):
                order = ("engine", "reference") if rep % 2 == 0 else ("reference", "engine")
                for side in order:
                    if side == "engine":
                        eng_runs.append(run_engine(session, case, settings, recorder))
                    else:
                        ref_runs.append(
                            run_reference(
                                model, prompt, max_new, settings, case.seed, recorder, pad, ref_extra
                            )
                        )
            eng = _summarise(eng_runs, canvas)
            ref = _summarise(ref_runs, canvas)
            identical: bool | None = None
            compared = "unconstrained: identical token ids expected"
            if case.kind == "infill":
                compared = (
                    "infill pins the text after the gap, which generate() cannot: the reference denoises one "
                    "unconstrained canvas after the same prompt (same work per step, different text)"
                )
            else:
                identical = eng_runs[-1].ids == ref_runs[-1].ids and first.ids == ref_runs[-1].ids
            entry: dict[str, Any] = {
                "name": case.name,
                "kind": case.kind,
                "seed": case.seed,
                "prompt_tokens": int(prompt.shape[1]),
                "max_new_tokens": max_new,
                "engine": eng,
                "reference": ref,
                "identical_ids": identical,
                "compared": compared,
                "ratio": round(eng["wall_ms"] / ref["wall_ms"], 4) if ref["wall_ms"] else None,
            }
            if count_syncs:
                entry["engine"]["syncs_per_step"], entry["engine"]["model_syncs_per_step"] = (
                    _count_engine_syncs(session, model, case, settings)
                )
                entry["reference"]["syncs_per_step"], entry["reference"]["model_syncs_per_step"] = (
                    _count_ref_syncs(model, prompt, max_new, settings, case.seed, pad, ref_extra)
                )
            eng_total += eng["wall_ms"]
            ref_total += ref["wall_ms"]
            report_cases.append(entry)
            if log:
                log(_row(entry))
    draft = [c for c in report_cases if c["kind"] == "draft"]
    same = [c for c in report_cases if c["identical_ids"] is not None]
    same_ref = sum(c["reference"]["wall_ms"] for c in same)
    summary = {
        # draft/rewrite only: the cases where both sides produce the same output (infill does more work than
        # the unpinned reference); the headline engine_vs_reference below counts every case
        "engine_vs_reference_same_output": round(sum(c["engine"]["wall_ms"] for c in same) / same_ref, 4)
        if same_ref
        else None,
        "identical_ids_all": all(c["identical_ids"] for c in report_cases if c["identical_ids"] is not None),
        "engine_wall_ms_total": round(eng_total, 3),
        "reference_wall_ms_total": round(ref_total, 3),
        "draft_overhead_share": _median_of(draft, "engine", "overhead_share"),
        "draft_reference_overhead_share": _median_of(draft, "reference", "overhead_share"),
        "draft_overhead_share_excluding_draws": round(
            statistics.median(c["engine"]["overhead_share_excluding_draws"] for c in draft), 4
        )
        if draft
        else None,
        "draft_draws_share": round(
            statistics.median(c["engine"]["draws_ms_per_step"] / c["engine"]["step_ms"] for c in draft), 4
        )
        if draft
        else None,
        "draft_deliver_share": round(
            statistics.median(c["engine"]["deliver_ms_per_step"] / c["engine"]["step_ms"] for c in draft), 4
        )
        if draft
        else None,
    }
    return {
        "benchmark": "engine-vs-reference",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "model": str(model_dir),
        "device": info.device,
        "device_name": torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "canvas_length": canvas,
        "vocab_size": int(model.config.text_config.vocab_size),
        "repeats": repeats,
        "warmup": warmup,
        "max_steps": max_steps,
        "fastpath": fastpath,
        "cases": report_cases,
        "summary": summary,
        "engine_vs_reference": round(eng_total / ref_total, 4) if ref_total else None,
    }


def _median_of(cases: list[dict[str, Any]], side: str, key: str) -> float | None:
    values = [c[side][key] for c in cases if c[side].get(key) is not None]
    return round(statistics.median(values), 4) if values else None


def _pct(value: float | None, width: int) -> str:
    return f"{value * 100:>{width}.1f}" if value is not None else f"{'n/a':>{width}}"


def _max_new(session: Any, case: Case, settings: DenoiseSettings, canvas: int) -> int:
    import math

    from engine.plan import max_new_tokens

    wanted = max_new_tokens(case.build(settings), session.model_facts)
    return math.ceil(wanted / canvas) * canvas


def _count_engine_syncs(
    session: Any, model: Any, case: Case, settings: DenoiseSettings
) -> tuple[float, float]:
    from engine.denoise import device_code_path

    counter = SyncCounter()
    with counter.counting(model), device_code_path():  # what a GPU runs (see `device_code_path`)
        session.run(case.build(settings), on_step=lambda e: None)
    out = session.last_output
    outside, inside = counter.per_step()
    if (
        model.device.type == "cpu"
    ):  # our per-step host copy is no op on the CPU: add it from the loop's own count
        outside += out.syncs / max(1, out.steps)
    return round(outside, 3), round(inside, 3)


def _count_ref_syncs(
    model: Any,
    prompt: Any,
    max_new: int,
    settings: DenoiseSettings,
    seed: int,
    pad: int,
    extra: dict[str, Any],
) -> tuple[float, float]:
    counter = SyncCounter()
    recorder = ForwardRecorder(model, False)
    with counter.counting(model), recorder.installed():
        run_reference(model, prompt, max_new, settings, seed, recorder, pad, extra)
    outside, inside = counter.per_step()
    return round(outside, 3), round(inside, 3)


# ------------------------------------------------------------------------------------------------------------
# Output


HEADER = (
    f"{'case':<18} {'ours ms':>9} {'ref ms':>9} {'ratio':>6} {'fwd/can':>7} {'tok/fwd':>7} {'1st ms':>7} "
    f"{'step ms':>8} {'fwd ms':>7} {'ovh %':>6} {'ref ovh %':>9} {'sync/st':>7} {'ref s/st':>8} same"
)


def _row(c: dict[str, Any]) -> str:
    e, r = c["engine"], c["reference"]
    same = {True: "yes", False: "NO", None: "n/a"}[c["identical_ids"]]
    return (
        f"{c['name']:<18} {e['wall_ms']:>9.1f} {r['wall_ms']:>9.1f} {c['ratio']:>6.3f} "
        f"{e['forwards_per_canvas']:>7.1f} {e['tokens_per_forward']:>7.2f} {e['first_draft_ms']:>7.1f} "
        f"{e['step_ms']:>8.3f} {e['forward_ms_per_step']:>7.3f} {_pct(e['overhead_share'], 6)} "
        f"{_pct(r['overhead_share'], 9)} {e.get('syncs_per_step', float('nan')):>7.2f} "
        f"{r.get('syncs_per_step', float('nan')):>8.2f} {same}"
    )


def format_table(report: dict[str, Any]) -> str:
    lines = [
        f"device {report['device']} ({report['device_name']}), torch {report['torch']}, "
        f"transformers {report['transformers']}, {report['threads']} thread(s), canvas "
        f"{report['canvas_length']}, {report['repeats']} repeats (medians)",
        HEADER,
    ]
    lines += [_row(c) for c in report["cases"]]
    s = report["summary"]
    same = "yes" if s["identical_ids_all"] else "NO"
    if s["draft_overhead_share"] is None or s["draft_reference_overhead_share"] is None:
        lines.append(f"identical ids (draft/rewrite): {same}")
    else:
        lines.append(
            f"identical ids (draft/rewrite): {same}; draft overhead outside the forward: "
            f"{s['draft_overhead_share'] * 100:.1f}% (reference "
            f"{s['draft_reference_overhead_share'] * 100:.1f}%); of ours, random draws "
            f"{s['draft_draws_share'] * 100:.1f}%, display + delivery {s['draft_deliver_share'] * 100:.1f}%, "
            f"excluding the draws {s['draft_overhead_share_excluding_draws'] * 100:.1f}%"
        )
    lines.append(f"engine_vs_reference {report['engine_vs_reference']}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine bench", description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: the shipped demo model)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (engine_vs_reference last)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=48, help="max denoising steps per canvas")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--no-syncs", action="store_true", help="skip the synchronisation-counting pass")
    parser.add_argument(
        "--fastpath",
        action="store_true",
        help="CUDA: our fast path vs generate() with a static cache (both compiled)",
    )
    parser.add_argument("--plot", help="write a PNG of time per step (forward vs overhead) here")
    parser.add_argument("--out", help="also write the JSON report to this file")
    lg = parser.add_argument_group("long-document benchmark (prefix reuse)")
    lg.add_argument(
        "--long",
        action="store_true",
        help="time to first visible step vs document length: first "
        "request, repeat, small edit near the end (see engine.tools.longbench)",
    )
    lg.add_argument("--lengths", default="1024,4096,16384", help="prefix lengths in tokens, comma-separated")
    lg.add_argument(
        "--candidates", type=int, default=1, help="rows per request (prefill once shares the prompt)"
    )
    sm = parser.add_argument_group("step memory (engine.tools.step_memory)")
    sm.add_argument(
        "--step-memory",
        action="store_true",
        help="measure one denoising step's peak memory per canvas x vocabulary cell: the real "
        "vocabulary (262,144) and canvas (256), a tiny bf16 body, the loop's device code path",
    )
    sm.add_argument(
        "--step-memory-candidates",
        default="1,3,8",
        help="candidate counts for --step-memory, comma-separated",
    )
    parser.add_argument(
        "--quant-quality",
        action="store_true",
        help="NF4 and nf4-mixed vs full precision on --model (default: the demo model): logit KL, "
        "argmax agreement, steps to finish a draft",
    )
    parser.add_argument(
        "--traffic",
        action="store_true",
        help="bytes, FLOPs and predicted time per op of one "
        "forward on named cards, today's path vs the fused kernels (--context, --alternatives)",
    )
    parser.add_argument(
        "--kernels",
        action="store_true",
        help="time the fused Triton kernels on the GPU against "
        "today's path (says so when there is no CUDA device)",
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="the same draft alone and beside a CPU hog on every "
        "core, per thread configuration (see `python -m engine bench --busy --help`)",
    )
    rs = parser.add_argument_group("real-shape forward benchmark")
    rs.add_argument("--real-shape", action="store_true", help="time 26B-A4B-shaped layers instead")
    rs.add_argument("--layers", type=int, default=2)
    rs.add_argument(
        "--vocab",
        type=int,
        default=None,
        help="vocabulary of the built model (default: 262144 on CUDA, 4096 on the CPU)",
    )
    rs.add_argument("--prefixes", default="2048,8192", help="prefix lengths, comma-separated")
    rs.add_argument("--quantize", choices=["nf4", "none"], default="nf4")
    rs.add_argument(
        "--experts",
        choices=["loop", "grouped"],
        default="loop",
        help="quantized-experts forward: the per-expert loop or the grouped fast path",
    )
    rs.add_argument("--iters", type=int, default=3)
    rs.add_argument("--bandwidth-gbs", type=float, default=None, help="device bandwidth if not in our table")
    rs.add_argument("--peak-tflops", type=float, default=None, help="device bf16 peak if not in our table")
    return parser


def main_bench(argv: list[str]) -> int:
    if "--busy" in argv:  # the CPU thread policy under load: engine.tools.busybench
        from engine.tools.busybench import main_busy

        return main_busy([a for a in argv if a != "--busy"])
    if "--traffic" in argv:  # the per-op traffic model: engine.tools.traffic
        from engine.tools.traffic import main_traffic

        return main_traffic([a for a in argv if a != "--traffic"])
    if "--kernels" in argv:  # the fused kernels' GPU timings: engine.tools.kernel_timing
        from engine.tools.kernel_timing import main_kernels

        return main_kernels([a for a in argv if a != "--kernels"])
    args = build_parser().parse_args(argv)
    from engine.api import EngineError

    try:
        if args.long:
            from engine.tools.longbench import HEADER as LONG_HEADER
            from engine.tools.longbench import format_long, run_long

            if not args.json:
                _stderr(LONG_HEADER)
            report = run_long(
                args.model,
                lengths=tuple(int(n) for n in args.lengths.split(",") if n),
                repeats=args.repeats if args.repeats != 5 else 3,
                device="cpu" if args.device == "auto" else args.device,
                candidates=args.candidates,
                log=None if args.json else _stderr,
            )
            text = format_long(report)
        elif args.quant_quality:
            from engine.__main__ import default_model_dir
            from engine.tools.quant_quality import compare, format_quality

            report = compare(
                args.model or default_model_dir(),
                device="cpu" if args.device == "auto" else args.device,
                steps=args.steps,
            )
            text = format_quality(report)
        elif args.step_memory:
            report = run_step_memory(
                [int(k) for k in args.step_memory_candidates.split(",") if k],
                log=None if args.json else _stderr,
            )
            text = format_step_memory(report)
        elif args.real_shape:
            from engine.tools.realbench import format_real_shape, run_real_shape

            report = run_real_shape(
                layers=args.layers,
                device=args.device,
                vocab=args.vocab,
                prefixes=[int(p) for p in args.prefixes.split(",") if p],
                quantize=args.quantize,
                experts=args.experts,
                iters=args.iters,
                bandwidth_gbs=args.bandwidth_gbs,
                peak_tflops=args.peak_tflops,
                log=None if args.json else _stderr,
            )
            text = format_real_shape(report)
        else:
            from engine.__main__ import default_model_dir

            cases = None
            if args.cases:
                wanted = set(args.cases.split(","))
                cases = [
                    c
                    for c in default_cases(_canvas_of(args.model or default_model_dir()))
                    if c.name in wanted
                ]
            report = bench_model(
                args.model or default_model_dir(),
                device=args.device,
                repeats=args.repeats,
                warmup=args.warmup,
                max_steps=args.steps,
                cases=cases,
                count_syncs=not args.no_syncs,
                fastpath=args.fastpath,
                log=None if args.json else _stderr_table(),
            )
            text = format_table(report)
            if args.plot:
                try:
                    from engine.tools.benchplot import plot_steps

                    plot_steps(report, args.plot)
                except ImportError:
                    print(
                        "error: --plot draws with Pillow: pip install "
                        "Pillow (the figures above are complete)",
                        file=sys.stderr,
                    )
    except EngineError as exc:
        print(
            json.dumps({"error": exc.kind, "message": exc.message}) if args.json else f"error: {exc.message}",
            file=sys.stdout if args.json else sys.stderr,
        )
        return 2
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report) if args.json else text)
    return 0


def run_step_memory(
    candidates: list[int], *, vocab: int | None = None, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The step-memory figures (see `engine.tools.step_memory` for the method), draft and infill, per
    candidate count."""
    import torch

    from engine.tools.step_memory import REAL_VOCAB, measure_step_memory, tiny_body_model

    model = tiny_body_model(vocab=vocab or REAL_VOCAB, dtype=torch.bfloat16)
    rows = []
    for k in candidates:
        for frozen in (False, True):
            result = measure_step_memory(k, model=model, frozen=frozen)
            rows.append(result.as_dict())
            if log:
                log(result.line())
    worst3 = max((r["bytes_per_cell"] for r in rows if r["candidates"] == 3), default=None)
    return {
        "benchmark": "step-memory",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "method": "peak of live tensor storage bytes (TorchDispatchMode + weakref.finalize) over a 2-step "
        "denoising run on engine.denoise.device_code_path(), tiny bf16 body, weights excluded",
        "torch": torch.__version__,
        "runs": rows,
        "bytes_per_cell_at_3": worst3,
    }


def format_step_memory(report: dict[str, Any]) -> str:
    lines = [f"step memory ({report['method']})"]
    for r in report["runs"]:
        kind = "infill" if r["frozen"] else "draft"
        lines.append(
            f"  {r['candidates']} candidate(s) {kind:<6} {r['peak_bytes'] / 1e9:7.3f} GB  "
            f"{r['bytes_per_cell']:5.2f} bytes per cell ({r['canvas']} x {r['vocab']:,}, {r['dtype']})"
        )
    if report["bytes_per_cell_at_3"] is not None:
        lines.append(f"bytes_per_cell_at_3 {report['bytes_per_cell_at_3']}")
    return "\n".join(lines)


def _canvas_of(model_dir: str | Path) -> int:
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    return int(config.get("canvas_length", 256))


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _stderr_table() -> Callable[[str], None]:
    printed = [False]

    def log(line: str) -> None:
        if not printed[0]:
            _stderr(HEADER)
            printed[0] = True
        _stderr(line)

    return log
