"""Per-request memory budget: fewer alternatives, then less context, with a notice, instead of running out."""

from __future__ import annotations

import pytest

from engine import budget
from engine.api import DenoiseSettings, DraftRequest, InfillRequest, OutOfMemoryError


def _linear_need(rows: int, context: int) -> int:
    return rows * (1000 + 10 * context)


def _plan(free: int | None, rows: int = 3, prompt: int = 500) -> budget.RequestPlan:
    return budget.plan_request(
        {},
        rows=rows,
        prompt_tokens=prompt,
        new_tokens=100,
        min_prompt_tokens=50,
        free_bytes=free,
        device_label="cuda:0",
        need=_linear_need,
    )


def _free_for(usable: int) -> int:
    """The free bytes that leave exactly `usable` after the safety margin."""
    return int((usable + budget.SAFETY_BYTES) / (1 - budget.SAFETY_SHARE)) + 2


def test_a_request_that_fits_is_left_alone() -> None:
    plan = _plan(_free_for(3 * 7000))
    assert (plan.rows, plan.context_tokens, plan.notice) == (3, 500, "")
    assert _plan(None).rows == 3  # unknown free memory: nothing to check


def test_alternatives_are_lowered_first_with_a_notice() -> None:
    plan = _plan(_free_for(2 * 7000))
    assert (plan.rows, plan.context_tokens) == (2, 500)
    assert "3 alternatives" in plan.notice and "generating 2" in plan.notice


def test_context_is_trimmed_when_one_alternative_does_not_fit() -> None:
    plan = _plan(_free_for(1000 + 10 * 400))  # one row with 300 prompt tokens + 100 new
    assert plan.rows == 1 and plan.context_tokens == 300
    assert plan.need_bytes <= _free_for(1000 + 10 * 400)
    assert "generating 1" in plan.notice and "300 of the 500" in plan.notice


def test_a_request_that_cannot_fit_at_all_is_refused_with_numbers() -> None:
    with pytest.raises(OutOfMemoryError) as err:
        _plan(_free_for(1000 + 10 * 100))
    assert "GB" in err.value.message and "cuda:0" in err.value.message


def _need_of(session, rows: int, context: int) -> int:
    return budget.request_bytes(session._config, rows, context)


def test_session_lowers_candidates_when_memory_is_short(session, monkeypatch: pytest.MonkeyPatch) -> None:
    def request() -> DraftRequest:
        return DraftRequest(
            "It was the best of times",
            max_new_tokens=32,
            settings=DenoiseSettings(candidates=3, seed=1, max_steps=4),
        )

    session.run(request())
    context = session.last_output.prompt_length + 32  # the prompt + one canvas
    one, three = _need_of(session, 1, context), _need_of(session, 3, context)
    assert three > one
    monkeypatch.setattr(budget, "free_device_bytes", lambda device: _free_for((one + three) // 2))
    result = session.run(request())
    plan = session.last_plan
    assert plan is not None and plan.rows < 3
    assert session.last_output.sequences.shape[0] == plan.rows
    assert f"generating {plan.rows}" in result.notice


def test_session_infill_search_keeps_the_rows_that_fit(session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "free_device_bytes", lambda device: _free_for(_need_of(session, 2, 100)))
    result = session.run(
        InfillRequest(
            "The harbour was", " and the boats rested.", settings=DenoiseSettings(seed=2, max_steps=3)
        )
    )
    assert session.last_output.sequences.shape[0] <= 2
    assert result.candidates and "alternatives" in result.notice


def test_session_trims_context_then_refuses_and_stays_usable(
    session, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = "In the morning the harbour was quiet, and the boats rested. " * 40
    request = DraftRequest(before, max_new_tokens=32, settings=DenoiseSettings(seed=3, max_steps=3))
    monkeypatch.setattr(budget, "free_device_bytes", lambda device: _free_for(_need_of(session, 1, 120)))
    result = session.run(request)
    assert session.last_output.prompt_length <= 120 - 32
    assert "prompt tokens" in result.notice
    monkeypatch.setattr(budget, "free_device_bytes", lambda device: 1000)
    with pytest.raises(OutOfMemoryError):
        session.run(request)
    monkeypatch.undo()
    assert (
        session.run(
            DraftRequest("It was", max_new_tokens=8, settings=DenoiseSettings(seed=4, max_steps=2))
        ).text
        is not None
    )


def test_oom_in_the_middle_of_a_step_frees_the_hand_off_and_buffers(
    session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An out-of-memory error raised inside the decoder, mid-request, is reported; no self-conditioning logits
    stay parked in the hand-off, the experts' reused buffers are dropped, and the next request runs."""
    import torch

    import engine.fastpath as fastpath

    model = session.model
    real = model.forward
    calls = [0]

    def forward(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.61 GiB")
        return real(*args, **kwargs)

    fastpath._STACK_BUFFERS[("gate_up", "cpu", torch.float32)] = torch.empty(4)
    model.forward = forward
    try:
        with pytest.raises(OutOfMemoryError):
            session.run(DraftRequest("It was the best", max_new_tokens=32, settings=DenoiseSettings(seed=1)))
    finally:
        del model.forward
    assert calls[0] == 3
    assert model._letterpress_sc_handoff._tensor is None
    assert fastpath._STACK_BUFFERS == {}
    assert session.run(
        DraftRequest("It was", max_new_tokens=8, settings=DenoiseSettings(seed=2, max_steps=2))
    ).candidates


def test_a_warm_rewrite_runs_only_the_rows_the_budget_allows(
    session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A light rewrite (warm canvas, one row per candidate) keeps working when memory lowers the row count."""
    from engine.api import RewriteRequest

    def request() -> RewriteRequest:
        return RewriteRequest(
            "The boats rested on the grey water.",
            "Fix the grammar.",
            strength=0.3,
            settings=DenoiseSettings(candidates=3, seed=4, max_steps=6),
        )

    session.run(request())
    context = session.last_output.sequences.shape[1]
    one, three = _need_of(session, 1, context), _need_of(session, 3, context)
    monkeypatch.setattr(budget, "free_device_bytes", lambda device: _free_for((one + three) // 2))
    result = session.run(request())
    plan = session.last_plan
    assert plan is not None and plan.rows < 3
    assert session.last_output.sequences.shape[0] == plan.rows
    assert result.candidates and f"generating {plan.rows}" in result.notice


def test_cached_prefixes_are_given_back_before_alternatives(session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory held by the prefix cache counts as reclaimable: the cache is dropped rather than an
    alternative."""

    def request() -> DraftRequest:
        return DraftRequest(
            "It was the best of times, it was the worst of times",
            max_new_tokens=32,
            settings=DenoiseSettings(candidates=3, seed=5, max_steps=4),
        )

    session.run(request())
    cache = session.prefix_cache
    assert cache is not None and cache.nbytes > 0
    context = session.last_output.prompt_length + 32
    three = _need_of(session, 3, context)
    # Free memory as a device would report it: enough for three rows only once the cached prefixes are gone.
    monkeypatch.setattr(budget, "free_device_bytes", lambda device: _free_for(three) - cache.nbytes)
    result = session.run(request())
    assert session.last_plan is not None and session.last_plan.rows == 3
    assert session.last_output.sequences.shape[0] == 3
    assert "generating" not in result.notice
