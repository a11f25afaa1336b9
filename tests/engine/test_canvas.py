"""Warm-started canvases (engine.canvas): pins hold at every step, the noise share is honoured, and a warm
canvas that changes nothing is exactly a cold one."""

from __future__ import annotations

import pytest
import torch

from engine import canvas as warm_canvas
from engine.api import DenoiseSettings, DraftRequest, RewriteRequest, WarmStart
from engine.canvas import CanvasError, plan, start_step
from engine.denoise import denoise

TEXT = "the people went out into the field and gathered the grain before night."


def _eos(session) -> list[int]:
    gen = session.model.generation_config
    return list(gen.eos_token_id) if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]


def _plan(session, warm: WarmStart, rows: int = 1, seed: int = 0):
    gen = session.model.generation_config
    eos = _eos(session)
    return plan(
        session.tokenizer,
        warm,
        rows=rows,
        canvas_length=int(session.model.config.canvas_length),
        eos_id=eos[0],
        pad_id=gen.pad_token_id,
        stop_ids=sorted({*eos, gen.pad_token_id}),
        seed=seed,
        decode=session._text.text,
    )


def _run(session, warm, *, seed: int = 0, rows: int = 1, max_steps: int = 48, inputs=None, steps=None):
    model, tok = session.model, session.tokenizer
    ids = tok("In the morning", return_tensors="pt").input_ids.repeat(rows, 1)
    gen = model.generation_config
    return denoise(
        model,
        ids,
        DenoiseSettings(max_steps=max_steps),
        max_new_tokens=warm.blocks * warm.canvas_length if warm is not None else 32,
        eos_token_ids=_eos(session),
        pad_token_id=gen.pad_token_id,
        seed=seed,
        warm=warm,
        on_decoder_input=(lambda b, s, c: inputs.append((b, s, c.clone()))) if inputs is not None else None,
        on_step=steps.append if steps is not None else None,
    )


def test_a_warm_canvas_of_pure_noise_without_pins_is_generate(session) -> None:
    warm = _plan(session, WarmStart(TEXT, noise=1.0))
    assert warm.blocks >= 1 and not warm.pinned.any()
    for seed in (0, 5):
        ours = _run(session, warm, seed=seed)
        cold = _run(session, None, seed=seed) if warm.blocks * warm.canvas_length == 32 else None
        model, tok = session.model, session.tokenizer
        ids = tok("In the morning", return_tensors="pt").input_ids
        torch.manual_seed(seed)
        reference = model.generate(ids, max_new_tokens=warm.blocks * warm.canvas_length).sequences
        assert torch.equal(ours.sequences, reference), seed
        if cold is not None:
            assert torch.equal(ours.sequences, cold.sequences)
    assert warm_canvas.cold(WarmStart(TEXT, noise=1.0)) and not warm_canvas.cold(WarmStart(TEXT, noise=0.5))


def test_pinned_tokens_are_identical_at_every_step_and_in_the_result(session) -> None:
    pins = ((4, 10), (30, 36))  # "people", "ield a"
    warm = _plan(session, WarmStart(TEXT, pins=pins, noise=1.0), rows=2, seed=3)
    inputs: list = []
    steps: list = []
    out = _run(session, warm, seed=3, rows=2, inputs=inputs, steps=steps)
    L = warm.canvas_length
    assert inputs and steps
    for block, _step, canvas in inputs:
        if block < warm.blocks:
            mask = warm.pinned[:, block * L : (block + 1) * L]
            assert torch.equal(canvas[mask], warm.ids[:, block * L : (block + 1) * L][mask])
    for state in steps:
        if state.block < warm.blocks:
            mask = warm.pinned[:, state.block * L : (state.block + 1) * L]
            assert torch.equal(state.argmax[mask], warm.ids[:, state.block * L : (state.block + 1) * L][mask])
    generated = out.sequences[:, out.prompt_length :]
    total = warm.ids.shape[1]
    assert torch.equal(generated[:, :total][warm.pinned], warm.ids[warm.pinned])
    # No end of text (or padding) before the last pinned token: the pins cannot be cut off.
    last = int(warm.pinned[0].nonzero().max())
    stops = {*_eos(session), session.model.generation_config.pad_token_id}
    for row in generated[:, :last].tolist():
        assert not stops & set(row)


def test_pinned_words_come_back_exactly_through_the_session(session) -> None:
    pins = ((4, 10), (40, 48))
    request = DraftRequest(
        before="In the morning",
        canvas=WarmStart(TEXT, pins=pins),
        settings=DenoiseSettings(seed=1, candidates=2),
        max_new_tokens=32,
    )
    events: list = []
    result = session.run(request, on_step=events.append)
    for cand in result.candidates:
        pos = 0
        for s, e in pins:
            found = cand.text.find(TEXT[s:e], pos)
            assert found >= 0, (TEXT[s:e], cand.text)
            pos = found + e - s
    pinned_spans = ["".join(sp.text for sp in view.spans if sp.pinned) for view in events[-1].candidates]
    assert all(p == TEXT[4:10] + TEXT[40:48] for p in pinned_spans), pinned_spans


@pytest.mark.parametrize("noise", [0.0, 0.2, 0.5, 0.8])
def test_the_noise_share_is_honoured_and_the_schedule_starts_at_the_matching_point(
    session, noise: float
) -> None:
    pins = ((11, 15),)
    warm = _plan(session, WarmStart(TEXT, pins=pins, noise=noise), rows=3, seed=7)
    free = int((~warm.pinned[0]).sum())
    for r in range(3):
        assert int(warm.noised[r].sum()) == round(noise * free)
        assert not (warm.noised[r] & warm.pinned[r]).any()
    inputs: list = []
    steps: list = []
    _run(session, warm, seed=7, rows=3, inputs=inputs, steps=steps)
    L = warm.canvas_length
    block0 = [c for b, _s, c in inputs if b == 0]
    first = block0[0]
    kept = ~warm.pinned[:, :L] & ~warm.noised[:, :L]
    assert torch.equal(first[kept], warm.ids[:, :L][kept]), "un-noised positions start as the given tokens"
    expected = start_step(noise, 48)
    assert expected == max(1, -(-int(noise * 48 * 1000) // 1000))
    block0_steps = [s for s in steps if s.block == 0]
    assert block0_steps[0].step == 48 - expected + 1
    assert len(block0_steps) <= expected
    # The rows drew different positions to noise (each its own seed).
    if 0 < noise < 1:
        assert not torch.equal(warm.noised[0], warm.noised[1])


def test_kept_positions_hold_their_token_until_the_model_accepts_one(session) -> None:
    warm = _plan(session, WarmStart(TEXT, noise=0.5), seed=2)
    inputs: list = []
    _run(session, warm, seed=2, inputs=inputs)
    L = warm.canvas_length
    kept = (~warm.pinned[:, :L] & ~warm.noised[:, :L])[0]
    block0 = [c[0] for b, _s, c in inputs if b == 0]
    # A kept position changes only to a token it then holds; it never turns back into fresh noise each step
    # the way a free position of a cold canvas does.
    changes = [(block0[i] != block0[i + 1])[kept].sum().item() for i in range(len(block0) - 1)]
    assert sum(changes) <= kept.sum().item() * 3


def test_rewrite_strength_one_is_todays_rewrite(session) -> None:
    a = session.run(RewriteRequest(selection=TEXT, instruction="Fix it.", settings=DenoiseSettings(seed=4)))
    b = session.run(
        RewriteRequest(selection=TEXT, instruction="Fix it.", strength=1.0, settings=DenoiseSettings(seed=4))
    )
    assert a.candidates == b.candidates
    events: list = []
    session.run(
        RewriteRequest(selection=TEXT, instruction="Fix it.", strength=0.2, settings=DenoiseSettings(seed=4)),
        on_step=events.append,
    )
    first_block = [e.step for e in events if e.block == 0]
    assert first_block[0] == 48 - start_step(0.2, 48) + 1 and len(first_block) <= start_step(0.2, 48)


def test_bad_pins_and_strengths_are_typed_errors(session) -> None:
    with pytest.raises(ValueError):
        WarmStart("abc", pins=((2, 9),))
    with pytest.raises(ValueError):
        RewriteRequest(selection="x", instruction="y", strength=0.05)
    with pytest.raises(CanvasError):
        warm_canvas.merge_ranges([(3, 2)], 10)
    assert warm_canvas.merge_ranges([(5, 8), (0, 2), (1, 4)], 10) == [(0, 4), (5, 8)]
    ids, flags = warm_canvas.segment_ids(session.tokenizer, TEXT, [(4, 10)], session._text.text)
    pinned = [i for i, f in zip(ids, flags, strict=True) if f]
    assert session._text.text(pinned) == TEXT[4:10]
    assert session._text.text(ids) == TEXT


def test_a_warm_canvas_adds_no_synchronisation_and_matches_on_the_device_code_path(session) -> None:
    from engine.denoise import device_code_path
    from engine.tools.bench import SyncCounter

    # One canvas, so that the count covers the steps alone: the plan of each further canvas is made from host
    # tensors (no synchronisation on a GPU), but a CPU run cannot tell those reads from device ones.
    warm = _plan(session, WarmStart("the people went out.", pins=((4, 10),), noise=0.6), rows=2, seed=5)
    assert warm.blocks == 1
    host = _run(session, warm, seed=5, rows=2)
    per_step = {}
    for name, w in (("warm", warm), ("cold", None)):
        counter = SyncCounter()
        with counter.counting(session.model), device_code_path():
            out = _run(session, w, seed=5, rows=2)
        per_step[name] = counter.per_step()[0]
        if name == "warm":
            assert torch.equal(out.sequences, host.sequences), "the device code path gives the same tokens"
    assert per_step["warm"] <= per_step["cold"], per_step


def test_an_infill_middle_can_start_warm_with_pins_and_keeps_its_ending(session) -> None:
    from engine.api import InfillRequest

    middle = " and the people went out"
    pins = ((4, 8), (20, 24))  # " the", " out"
    request = InfillRequest(
        before="In the morning",
        after=" into the field.",
        canvas=WarmStart(middle, pins=pins),
        settings=DenoiseSettings(seed=3, candidates=2),
    )
    events: list = []
    result = session.run(request, on_step=events.append)
    assert result.candidates
    for cand in result.candidates:
        assert "the" in cand.text and cand.text.rstrip().endswith("out"), cand.text
    pinned = ["".join(s.text for s in view.spans if s.pinned) for view in events[0].candidates]
    assert all(p == " the out" for p in pinned), pinned
    assert session.last_output.blocks == 1


def test_warm_text_longer_than_a_canvas_is_never_dropped_by_an_early_end(session) -> None:
    """A rewrite at strength 0.5 of a selection spanning several canvases, with a model that wants to end
    everywhere (end-of-text pushed up in every logit row): kept text lies in every canvas, so no row may end
    before its last kept token. Before, the rows ended in the first canvas and the kept text of the later
    canvases was silently dropped (4 of 4 runs)."""
    import torch

    from engine.api import DenoiseSettings, RewriteRequest

    tok = session.tokenizer
    canvas = session.info.canvas_length
    selection = (
        " It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of"
        " foolishness. In the morning the harbour was quiet, and the boats rested on the grey water until"
        " the wind came. The quick brown fox jumps over the lazy dog."
    )
    selected = len(tok(selection, add_special_tokens=False)["input_ids"])
    assert selected > 2 * canvas  # the kept text spans three canvases
    stops = sorted({*session.eos_ids, session.pad_id})

    def wants_to_end(module, args, kwargs, output):
        output.logits[..., stops] += 60.0
        return output

    handle = session.model.register_forward_hook(wants_to_end, with_kwargs=True)
    try:
        request = RewriteRequest(
            selection,
            "Make it formal.",
            strength=0.5,
            settings=DenoiseSettings(seed=5, max_steps=6, candidates=2),
        )
        session.run(request)
    finally:
        handle.remove()
    warm = session.last_request_plan.warm  # the warm canvas the run started from
    assert warm is not None
    out = session.last_output
    generated = out.sequences[:, out.prompt_length :]
    positions = torch.arange(warm.ids.shape[1])
    for row in range(generated.shape[0]):
        kept = ~warm.pinned[row] & ~warm.noised[row] & (positions < warm.text_tokens)
        last_kept = int(positions[kept].max())
        assert last_kept >= canvas  # kept text beyond the first canvas
        ids = generated[row].tolist()
        first_stop = next((i for i, t in enumerate(ids) if t in stops), len(ids))
        assert first_stop > last_kept, (
            f"row {row} ended at {first_stop}, before its kept token at {last_kept}"
        )
