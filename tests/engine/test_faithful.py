"""Faithful by construction: the checkpoint's sampler settings, a loader that refuses mismatched tensors, a
device choice that fits, and equivalence where the early stop and EOS padding really happen."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import engine.denoise as denoise_module
from engine.api import DenoiseSettings, DraftRequest, InfillRequest
from engine.denoise import Frozen, denoise, device_code_path


@contextmanager
def host_path() -> Iterator[None]:
    yield


@contextmanager
def host_all_rows() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(denoise_module, "_SELECTIVE_LIMIT", 0)
        yield


PATHS = (host_path, host_all_rows, device_code_path)


# -- sampler settings from generation_config.json ------------------------------------------------------------


def test_sampler_settings_come_from_generation_config(tiny_dir: Path, tmp_path: Path) -> None:
    from engine.session import Session

    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_dir, ckpt)
    gen_path = ckpt / "generation_config.json"
    gen = json.loads(gen_path.read_text())
    gen.update(
        max_denoising_steps=7,
        t_max=0.9,
        stability_threshold=2,
        sampler_config={"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": 0.25},
    )
    gen_path.write_text(json.dumps(gen))
    s = Session()
    s.load(ckpt, device="cpu")
    assert (
        s.checkpoint_settings.max_steps,
        s.checkpoint_settings.t_max,
        s.checkpoint_settings.entropy_bound,
        s.checkpoint_settings.stability_threshold,
    ) == (7, 0.9, 0.25, 2)
    result = s.run(DraftRequest("It was the best", max_new_tokens=32, settings=DenoiseSettings(seed=1)))
    assert s.last_output.steps <= 7 and result.candidates
    s.run(DraftRequest("It was the best", max_new_tokens=32, settings=DenoiseSettings(seed=1, max_steps=3)))
    assert s.last_output.steps <= 3  # what the writer changed wins
    gen_path.unlink()
    s.load(ckpt, device="cpu")
    assert s.checkpoint_settings == DenoiseSettings()  # absent: the reference's defaults


def test_unusable_generation_config_values_fall_back_to_defaults() -> None:
    class Gen:
        max_denoising_steps = 0  # invalid
        t_min = 0.4
        t_max = 0.8
        sampler_config = None

    assert DenoiseSettings.from_generation_config(Gen()) == DenoiseSettings()
    assert DenoiseSettings.from_generation_config(None) == DenoiseSettings()


# -- the loader refuses tensors that do not match ------------------------------------------------------------


def _rewrite_checkpoint(src: Path, dst: Path, edit) -> Path:
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    tensors = load_file(dst / "model.safetensors")
    edit(tensors)
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


@pytest.mark.parametrize("quantization", ["none", "nf4"])
def test_unexpected_tensor_is_a_typed_error(
    tiny_dir: Path, tmp_path: Path, quantization: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.weights.loader import load_model
    from engine.weights.stream_load import CheckpointMismatchError

    monkeypatch.setenv("LETTERPRESS_QCACHE", "off")
    ckpt = _rewrite_checkpoint(
        tiny_dir,
        tmp_path / "extra",
        lambda t: t.update({"model.decoder.layers.0.bogus.weight": torch.zeros(3)}),
    )
    with pytest.raises(CheckpointMismatchError) as err:
        load_model(ckpt, device="cpu", quantization=quantization)  # type: ignore[arg-type]
    assert (
        err.value.unexpected == ["model.decoder.layers.0.bogus.weight"]
        and err.value.kind == "checkpoint_mismatch"
    )
    assert "download" in err.value.message


def test_missing_persistent_buffer_is_a_typed_error(tiny_dir: Path, tmp_path: Path) -> None:
    from engine.weights.loader import load_model
    from engine.weights.stream_load import CheckpointMismatchError

    def drop(tensors: dict) -> None:
        name = next(k for k in tensors if k.endswith("layer_scalar"))
        del tensors[name]

    ckpt = _rewrite_checkpoint(tiny_dir, tmp_path / "missing", drop)
    with pytest.raises(CheckpointMismatchError) as err:
        load_model(ckpt, device="cpu", quantization="none")
    assert len(err.value.missing) == 1 and err.value.missing[0].endswith("layer_scalar")


# -- --device auto on the CPU never picks what the machine cannot hold ---------------------------------------


def test_auto_on_cpu_picks_a_precision_that_fits_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.tools.real_shape import real_config_dict
    from engine.weights import fit
    from engine.weights.loader import choose_precision

    config = real_config_dict()
    monkeypatch.setattr(
        fit, "devices_found", lambda: [fit.DeviceMemory("cpu", "host RAM", 128 * 10**9, 120 * 10**9)]
    )
    scheme, dtype, notice = choose_precision("auto", "cpu", config)
    assert (scheme, dtype) == ("none", "float32") and notice == ""  # 101 GB fits 120 GB free
    monkeypatch.setattr(
        fit, "devices_found", lambda: [fit.DeviceMemory("cpu", "host RAM", 64 * 10**9, 60 * 10**9)]
    )
    scheme, dtype, notice = choose_precision("auto", "cpu", config)
    assert (scheme, dtype) == ("none", "bfloat16") and "float32" in notice and "GB" in notice
    monkeypatch.setattr(
        fit, "devices_found", lambda: [fit.DeviceMemory("cpu", "host RAM", 32 * 10**9, 30 * 10**9)]
    )
    scheme, dtype, notice = choose_precision("auto", "cpu", config)
    assert scheme in ("nf4", "nf4-mixed") and scheme in notice
    assert fit.estimate(config, scheme, device="cpu", available_bytes=30 * 10**9).verdict != "wont_fit"


# -- equivalence where the stop fires early and EOS padding happens ------------------------------------------


@contextmanager
def confident(model, eos: int, from_slot: int) -> Iterator[None]:
    """Make the tiny model confident: logits sharpened x40 and, from `from_slot` of every canvas on, an
    end-of-text preferred, so the stable-and-confident stop fires after a few steps and EOS padding happens.
    Both samplers call `model.forward`, so both see the same model."""
    original = model.forward

    def forward(*args, **kwargs):
        out = original(*args, **kwargs)
        logits = out.logits * 40.0
        logits[:, from_slot:, eos] += 2000.0
        out.logits = logits
        return out

    model.forward = forward
    try:
        yield
    finally:
        del model.forward


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.__name__)
def test_confident_model_stops_early_and_pads_after_eos_like_generate(session, path) -> None:
    model, tok = session.model, session.tokenizer
    gen = model.generation_config
    eos = gen.eos_token_id[0]
    ids = tok("It was the best of times", return_tensors="pt").input_ids
    with confident(model, eos, from_slot=20), torch.inference_mode():
        torch.manual_seed(5)
        reference = model.generate(ids, max_new_tokens=96).sequences
        with path():
            ours = denoise(
                model,
                ids,
                DenoiseSettings(),
                max_new_tokens=96,
                eos_token_ids=gen.eos_token_id,
                pad_token_id=gen.pad_token_id,
                seed=5,
            )
    assert torch.equal(ours.sequences, reference)
    assert ours.steps < 48, "the stable-and-confident stop did not fire early"
    new = ours.sequences[0, ids.shape[1] :].tolist()
    first_eos = new.index(eos)
    assert first_eos < len(new) - 1 and set(new[first_eos + 1 :]) == {gen.pad_token_id}, (
        "no EOS padding happened"
    )
    assert ours.blocks == 1  # the finished row ended the request after its first canvas


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.__name__)
def test_batched_row_k_equals_a_single_run_with_seed_plus_k(session, path) -> None:
    model, tok = session.model, session.tokenizer
    gen = model.generation_config
    ids = tok("The quick brown fox", return_tensors="pt").input_ids
    settings = DenoiseSettings(
        max_steps=10, confidence_threshold=6.2, stability_threshold=0
    )  # rows stop apart
    kwargs = dict(max_new_tokens=64, eos_token_ids=gen.eos_token_id, pad_token_id=gen.pad_token_id)
    with torch.inference_mode(), path():
        batched = denoise(model, ids.repeat(3, 1), settings, seed=11, **kwargs)
        for k in range(3):
            single = denoise(model, ids, settings, seed=11 + k, **kwargs)
            n = single.sequences.shape[1]  # a single run that ended stops; the batch pads its finished rows
            assert torch.equal(batched.sequences[k, :n], single.sequences[0]), k
            assert set(batched.sequences[k, n:].tolist()) <= {gen.pad_token_id}, k
            # token for token; the confidences to float rounding (a batch-3 matmul blocks differently than
            # batch 1)
            torch.testing.assert_close(batched.confidence[k, : n - ids.shape[1]], single.confidence[0])


def test_infill_feeds_pinned_self_conditioning_at_the_frozen_slots(session) -> None:
    """The decoder sees a one-hot belief in the known token at every frozen slot from the second step on;
    removing the pinning (or pinning the wrong token) fails here."""
    model = session.model
    canvas = model.config.canvas_length
    ids = session.tokenizer("The harbour was", return_tensors="pt").input_ids
    mask = torch.zeros(1, canvas, dtype=torch.bool)
    mask[0, 10:20] = True
    fids = torch.zeros(1, canvas, dtype=torch.long)
    fids[0, 10:20] = torch.arange(100, 110)
    seen: list[torch.Tensor] = []
    # What the decoder's self-conditioning is handed each step (the hand-off is chunked, so it is read where
    # the loop hands it over, not from the body's keyword arguments).
    handoff = denoise_module._handoff_for(model)
    put = handoff.put

    def grab(tensor):
        if tensor is not None:
            seen.append(tensor.clone())
        put(tensor)

    handoff.put = grab  # type: ignore[method-assign]
    try:
        with torch.inference_mode():
            out = denoise(
                model,
                ids,
                DenoiseSettings(max_steps=4),
                max_new_tokens=canvas,
                eos_token_ids=[1],
                pad_token_id=0,
                seed=2,
                frozen=Frozen(mask, fids),
                max_blocks=1,
            )
    finally:
        del handoff.put  # back to the class's method
    assert len(seen) == out.steps - 1 >= 2
    low = torch.finfo(torch.float32).min / 2
    for sc in seen:
        frozen_rows = sc[0, 10:20]
        assert torch.equal(frozen_rows.argmax(-1), torch.arange(100, 110))
        assert torch.all(frozen_rows.gather(-1, torch.arange(100, 110)[:, None]) == 0.0)
        assert torch.all((frozen_rows == 0.0).sum(-1) == 1) and frozen_rows.min() == low
        assert sc[0, :10].max() > low  # free slots keep the model's own belief


def test_session_infill_with_pins_keeps_the_ending(session) -> None:
    result = session.run(
        InfillRequest(
            "The harbour was",
            " and the boats rested.",
            middle_tokens=6,
            settings=DenoiseSettings(seed=3, max_steps=4),
        )
    )
    assert result.candidates
