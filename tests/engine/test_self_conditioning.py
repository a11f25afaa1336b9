"""The self-conditioning input in row chunks: bit-identical to transformers' full-size softmax, and without
its full-size fp32 arrays (measured as the process sees it: under `no_grad`, not `inference_mode`)."""

from __future__ import annotations

import pytest
import torch

from engine.self_conditioning import ChunkedSelfConditioning
from engine.tools.step_memory import LiveTensorBytes, tiny_body_model

VOCAB = 16_384


@pytest.fixture(scope="module")
def body():
    return tiny_body_model(vocab=VOCAB, canvas=256, dtype=torch.bfloat16)


def _decoder_inputs(model, rows: int):
    from transformers import DynamicCache

    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(10, 400, (rows, 8), generator=gen)
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    with torch.no_grad():
        model.model.encoder(input_ids=prompt, past_key_values=cache)
    canvas = torch.randint(10, 400, (rows, 256), generator=gen)
    logits = (torch.randn(rows, 256, VOCAB, generator=gen) * 3).to(torch.bfloat16)
    return cache, canvas, logits


def test_chunked_soft_embeddings_are_bit_identical_to_transformers(body) -> None:
    cache, canvas, logits = _decoder_inputs(body, 2)
    with torch.no_grad():
        reference = body(
            decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=logits
        ).logits
        chunked = ChunkedSelfConditioning(body)
        try:
            chunked.put(logits.clone())
            out = body(decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=None).logits
        finally:
            chunked.remove()
    assert torch.equal(out, reference)


def _soft_moment_peak(body, rows: int, chunked: bool) -> float:
    """Peak live bytes per cell while the decoder body turns the incoming logits into its input (the logits
    included), under no_grad: what the process allocates."""
    cache, canvas, logits = _decoder_inputs(body, rows)
    sc = body.model.decoder.self_conditioning
    stop = RuntimeError("body input computed")
    handle = sc.register_forward_hook(lambda m, a, o: (_ for _ in ()).throw(stop))
    feeder = ChunkedSelfConditioning(body) if chunked else None
    tracker = LiveTensorBytes()
    try:
        with torch.no_grad():
            held = [logits]
            del logits
            tracker.__enter__()
            tracker._track(held[0])  # the incoming logits are live at this moment
            try:
                if feeder is not None:
                    feeder.put(held.pop())
                    body.model.decoder(decoder_input_ids=canvas, past_key_values=cache)
                else:
                    body.model.decoder(
                        decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=held.pop()
                    )
            except RuntimeError as exc:
                assert exc is stop
            finally:
                tracker.__exit__(None, None, None)
    finally:
        handle.remove()
        if feeder is not None:
            feeder.remove()
    return tracker.peak / (rows * 256 * VOCAB)


@pytest.mark.parametrize("rows", [1, 3])
def test_the_self_conditioning_moment_stays_below_8_bytes_per_cell(body, rows: int) -> None:
    plain = _soft_moment_peak(body, rows, chunked=False)
    chunked = _soft_moment_peak(body, rows, chunked=True)
    assert plain >= 9.9  # logits 2 + fp32 copy of the input 4 + fp32 softmax 4 (then its bf16 copy)
    # logits 2 + bf16 probabilities 2 + one chunk of 32 rows (1 B/cell at one candidate, less at more)
    assert chunked <= 5.1, f"{chunked:.2f} B/cell"
