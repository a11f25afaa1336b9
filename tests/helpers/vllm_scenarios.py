"""The requests the vLLM recordings were made with (tests/remote/record_vllm.py) and the stub tests replay:
the same objects on both sides, so the replayed server sees byte-identical requests."""

from __future__ import annotations

from engine.api import DenoiseSettings, DraftRequest, InfillRequest, RewriteRequest

MODEL = "letterpress-demo"
BEFORE = "The harbour was quiet when the boats came home."


def draft() -> DraftRequest:
    return DraftRequest(before=BEFORE, max_new_tokens=32)


def draft_n3() -> DraftRequest:
    return DraftRequest(before=BEFORE, max_new_tokens=32, settings=DenoiseSettings(candidates=3))


def draft_long() -> DraftRequest:
    """Two canvases of the demo model: two committed-canvas events to cancel or cut between."""
    return DraftRequest(before=BEFORE, max_new_tokens=128)


def rewrite() -> RewriteRequest:
    return RewriteRequest(
        selection="the boats rested on the grey water",
        instruction="Make it shorter.",
        before="In the morning ",
        after=" until the wind came.",
    )


def infill() -> InfillRequest:
    return InfillRequest(
        before="It was the best of times.", after=" It was the age of wisdom.", middle_tokens=8
    )


def window_draft() -> DraftRequest:
    """What the window sends for Draft at the end of a document holding BEFORE, with the default settings
    (draft length 64, three alternatives)."""
    return DraftRequest(before=BEFORE, max_new_tokens=64, settings=DenoiseSettings(candidates=3))


RUNS = {
    "draft": draft,
    "draft_n3": draft_n3,
    "draft_long": draft_long,
    "rewrite": rewrite,
    "infill": infill,
    "window_draft": window_draft,
}
REJECTED = {"seed": {"seed": 1}, "temperature": {"temperature": 0}, "suffix": {"suffix": " the end."}}
