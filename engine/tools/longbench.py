"""`python -m engine bench --long`: time to the first visible step against document length, with prefix reuse.

For each prefix length (default 1K, 4K and 16K tokens of document before the cursor) the same draft request
runs three ways through `Session.run`, as the editor runs it (prompt building and tokenization included):

- **first**: the prefix cache is empty, so the whole prompt is encoded (in chunks, once for all rows);
- **repeat**: the same request again at the same place (another alternative, a retry): nothing to encode;
- **edit**: a small edit near the end of the document (a word inserted ~200 characters before the cursor): the
  prompt is encoded again only from the chunk boundary before the edit.

"Time to first visible step" is from the call to the first step event (what the writer waits for before ghost
text appears). Each measurement is the median of `--repeats` rounds; the round order is first, repeat, edit
with the cache cleared before each round. The printed ratios are repeat/first and edit/first (target on the
CPU: repeat/first <= 0.2 at 16K tokens). Without `--model` a tiny random checkpoint with a 20K-token context
is built in a temporary folder (the figures are about the encoder's share, not about text quality).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.api import DenoiseSettings, DraftRequest, StepEvent

DEFAULT_LENGTHS = (1024, 4096, 16384)
EDIT_FROM_END = 200  # characters


def document_of(tokenizer: Any, tokens: int) -> str:
    """Plain prose of about `tokens` tokens (numbered paragraphs, so no two are alike)."""
    from engine.tools.tiny import SAMPLE_TEXT

    parts: list[str] = []
    count = 0
    i = 0
    while count < tokens:
        para = f"{i}. {SAMPLE_TEXT[i % len(SAMPLE_TEXT)]} {SAMPLE_TEXT[(i * 7 + 3) % len(SAMPLE_TEXT)]}\n"
        parts.append(para)
        count += len(tokenizer(para, add_special_tokens=False)["input_ids"])
        i += 1
    text = "".join(parts)
    ids = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if len(ids["input_ids"]) > tokens:
        text = text[: ids["offset_mapping"][tokens][0]]
    return text


def edited(text: str) -> str:
    """A one-word insertion near the end, at a word boundary."""
    at = text.rfind(" ", 0, max(0, len(text) - EDIT_FROM_END)) + 1
    return text[:at] + "very " + text[at:]


def time_to_first_step(session: Any, request: DraftRequest) -> tuple[float, Any]:
    """Seconds from `Session.run` to its first step event; the run is cancelled right after that step."""
    cancel = threading.Event()
    first: list[float] = []
    start = time.perf_counter()

    def on_step(event: StepEvent) -> None:
        if not first:
            first.append(time.perf_counter() - start)
        cancel.set()

    result = session.run(request, on_step=on_step, cancel=cancel)
    return (first[0] if first else time.perf_counter() - start), result


def run_long(
    model_dir: str | Path | None = None,
    *,
    lengths: tuple[int, ...] = DEFAULT_LENGTHS,
    repeats: int = 3,
    device: str = "cpu",
    candidates: int = 1,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    import torch

    from engine.session import Session

    tmp: tempfile.TemporaryDirectory[str] | None = None
    if model_dir is None:
        from engine.tools.tiny import make_tiny

        tmp = tempfile.TemporaryDirectory(prefix="letterpress-long-")
        model_dir = make_tiny(
            Path(tmp.name) / "tiny-long", seed=0, canvas_length=32, max_positions=max(lengths) + 4096
        )
    try:
        session = Session()
        info = session.load(model_dir, device=device)  # type: ignore[arg-type]
        assert session.prefix_cache is not None
        settings = DenoiseSettings(seed=1, candidates=candidates)
        rows: list[dict[str, Any]] = []
        warm = DraftRequest(
            before=document_of(session.tokenizer, 256),
            max_new_tokens=info.canvas_length,
            settings=settings,
            document="warm-up",
        )
        time_to_first_step(session, warm)
        for length in lengths:
            doc = document_of(session.tokenizer, length)
            later = edited(doc)
            times: dict[str, list[float]] = {"first": [], "repeat": [], "edit": []}
            reused: dict[str, int] = {}
            prompt_tokens = 0
            for _ in range(repeats):
                session.prefix_cache.clear()
                for name, text in (("first", doc), ("repeat", doc), ("edit", later)):
                    request = DraftRequest(
                        before=text, max_new_tokens=info.canvas_length, settings=settings, document="bench"
                    )
                    seconds, result = time_to_first_step(session, request)
                    times[name].append(seconds)
                    reused[name] = result.stats.reused_tokens
                    if name == "first":
                        prompt_tokens = result.stats.prompt_tokens
            med = {k: statistics.median(v) for k, v in times.items()}
            row = {
                "prefix_tokens": length,
                "prompt_tokens": prompt_tokens,
                "first_ms": round(med["first"] * 1000, 1),
                "repeat_ms": round(med["repeat"] * 1000, 1),
                "edit_ms": round(med["edit"] * 1000, 1),
                "reused_tokens_repeat": reused["repeat"],
                "reused_tokens_edit": reused["edit"],
                "repeat_over_first": round(med["repeat"] / med["first"], 3),
                "edit_over_first": round(med["edit"] / med["first"], 3),
            }
            rows.append(row)
            if log is not None:
                log(_row(row))
        return {
            "model": info.name,
            "device": info.device,
            "threads": torch.get_num_threads(),
            "context_length": info.context_length,
            "chunk": session.prefix_cache.chunk,
            "candidates": candidates,
            "repeats": repeats,
            "lengths": rows,
        }
    finally:
        if tmp is not None:
            tmp.cleanup()


HEADER = (
    f"{'prefix':>7} {'prompt':>7} {'first ms':>9} {'repeat ms':>10} {'edit ms':>8} {'reused r/e':>13} "
    f"{'repeat/first':>12} {'edit/first':>10}"
)


def _row(r: dict[str, Any]) -> str:
    return (
        f"{r['prefix_tokens']:>7} {r['prompt_tokens']:>7} {r['first_ms']:>9.1f} {r['repeat_ms']:>10.1f} "
        f"{r['edit_ms']:>8.1f} {r['reused_tokens_repeat']:>6}/{r['reused_tokens_edit']:<6} "
        f"{r['repeat_over_first']:>12.3f} {r['edit_over_first']:>10.3f}"
    )


def format_long(report: dict[str, Any]) -> str:
    lines = [
        f"time to first visible step, {report['model']} on {report['device']} ({report['threads']} threads), "
        f"chunk {report['chunk']}, {report['candidates']} candidate(s), median of {report['repeats']}",
        HEADER,
    ]
    lines += [_row(r) for r in report["lengths"]]
    return "\n".join(lines)


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report)
