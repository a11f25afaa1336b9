"""NF4 loading of the tiny checkpoint: everything 4-bit that should be, shared once, numerically sound,
usable."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from torch import nn

from engine.api import LoadCancelledError, LoadProgress
from engine.weights.loader import load_model
from engine.weights.quantize import (
    NF4Linear,
    NF4Weight,
    is_experts,
    nf4_modules,
    text_stacks,
    unquantized_text_weights,
)

# Tolerances (float32 on CPU):
FORWARD_ATOL = 1e-4  # NF4 forward vs a full-precision forward on the very same (dequantized) weights
EXPERTS_REL = 0.2  # one experts block vs its unquantized weights: 3 NF4 matrices in series (gate, up, down),
# each ~0.09 relative error on Gaussian weights -> about sqrt(3) x 0.09 = 0.16 (measured 0.155)
LOGITS_REL = 0.6  # whole random tiny model vs unquantized: relative L2 of the logits (measured 0.48)


@pytest.fixture(scope="module")
def nf4(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    mp = pytest.MonkeyPatch()
    mp.setenv("LETTERPRESS_CACHE_DIR", str(tmp_path_factory.mktemp("qcache")))
    try:
        yield load_model(tiny_dir, device="cpu", quantization="nf4")
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def full(tiny_dir: Path):
    return load_model(tiny_dir, device="cpu", quantization="none")


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return torch.tensor([[2, 10, 20, 30, 40, 50, 60]]), torch.randint(0, 512, (1, 32), generator=gen)


def _logits(model: nn.Module) -> torch.Tensor:
    ids, canvas = _inputs()
    with torch.no_grad():
        return model(input_ids=ids, decoder_input_ids=canvas).logits


def test_every_linear_and_expert_but_the_router_is_4bit(nf4) -> None:
    model = nf4.model
    assert nf4.info.quantization == "nf4"
    assert unquantized_text_weights(model) == []
    checked = routers = 0
    for _, stack in text_stacks(model):
        for name, module in stack.named_modules():
            if name.endswith("router.proj"):  # the router stays in the compute dtype (engine.weights.plan)
                assert isinstance(module, nn.Linear) and module.weight.dtype == torch.float32, name
                routers += 1
                continue
            assert not isinstance(module, nn.Linear), name
            if is_experts(module):
                assert isinstance(module.gate_up_proj, NF4Weight) and isinstance(module.down_proj, NF4Weight)
                assert not list(module.parameters(recurse=False)), name
            if isinstance(module, NF4Weight):
                assert module.qweight.dtype == torch.uint8
                assert module.qweight.numel() * 2 == module.logical_numel  # two 4-bit codes per byte
                checked += 1
        for name, p in stack.named_parameters():
            # What may stay in higher precision: the (tied) embedding, the router and 1-D norm/scale vectors.
            assert p.dim() == 1 or name.endswith(("embed_tokens.weight", "router.proj.weight")), name
    assert checked > 0 and routers == 4  # 2 layers x (encoder, decoder)
    assert model.lm_head.weight is model.model.decoder.embed_tokens.weight  # tied output head stays shared


def test_shared_encoder_decoder_weights_are_quantized_once(nf4) -> None:
    enc = nf4.model.model.encoder.language_model
    dec = nf4.model.model.decoder
    for e_layer, d_layer in zip(enc.layers, dec.layers, strict=True):
        assert e_layer.experts is d_layer.experts
        assert e_layer.mlp.gate_proj is d_layer.mlp.gate_proj
        assert e_layer.self_attn.q_proj is d_layer.self_attn.q_proj
    # per layer: q,k,(v on the sliding layer),o + 3 MLP + 2 expert stacks (the router stays 16-bit); then 3
    # self-conditioning
    assert len(list(nf4_modules(nf4.model))) == (4 + 3 + 2) + (3 + 3 + 2) + 3


def test_quantized_forward_equals_full_precision_forward_on_the_same_weights(nf4, full) -> None:
    """The NF4 experts/linears forwards do exactly the stock computation on the dequantized weights."""
    import copy

    reference = copy.deepcopy(full.model)
    quantized = dict(nf4.model.named_modules(remove_duplicate=False))
    with torch.no_grad():
        for name, module in reference.named_modules():
            q = quantized.get(name)
            if isinstance(module, nn.Linear) and isinstance(q, NF4Linear):
                module.weight.copy_(q.dequantize())
            elif is_experts(module) and q is not None and isinstance(q.gate_up_proj, NF4Weight):
                for e in range(q.gate_up_proj.count):
                    module.gate_up_proj[e].copy_(q.gate_up_proj.dequantize(e))
                    module.down_proj[e].copy_(q.down_proj.dequantize(e))
    diff = (_logits(nf4.model) - _logits(reference)).abs().max().item()
    assert diff <= FORWARD_ATOL


def test_experts_block_stays_close_to_its_unquantized_weights(nf4, full) -> None:
    q_experts = nf4.model.model.decoder.layers[0].experts
    f_experts = full.model.model.decoder.layers[0].experts
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(64, f_experts.hidden_dim, generator=gen)
    index = torch.randint(0, f_experts.num_experts, (64, 2), generator=gen)
    weights = torch.rand(64, 2, generator=gen)
    with torch.no_grad():
        a = f_experts(hidden, index, weights)
        b = q_experts(hidden, index, weights)
    assert ((b - a).norm() / a.norm()).item() <= EXPERTS_REL


def test_logits_stay_within_tolerance_of_the_unquantized_model(nf4, full) -> None:
    a, b = _logits(full.model), _logits(nf4.model)
    rel = ((b - a).norm() / a.norm()).item()
    assert rel <= LOGITS_REL


def test_quantized_model_generates(nf4) -> None:
    ids = torch.tensor([[2, 10, 20, 30]])
    out = nf4.model.generate(ids, max_new_tokens=32)
    seq = out.sequences if hasattr(out, "sequences") else out
    assert seq.shape[0] == 1 and seq.shape[1] > ids.shape[1]
    assert int(seq.max()) < nf4.model.config.text_config.vocab_size


def test_streaming_full_precision_load_matches_from_pretrained(tiny_dir: Path, full) -> None:
    from transformers import DiffusionGemmaForBlockDiffusion

    ref = DiffusionGemmaForBlockDiffusion.from_pretrained(tiny_dir, dtype=torch.float32).eval()
    assert (_logits(ref) - _logits(full.model)).abs().max().item() <= 1e-5


def test_progress_is_reported_per_tensor_and_cancel_stops_the_load(
    tiny_dir: Path, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("LETTERPRESS_CACHE_DIR", str(tmp_path))
    seen: list[LoadProgress] = []
    load_model(tiny_dir, device="cpu", quantization="nf4", on_progress=seen.append)
    steps = [p for p in seen if p.stage != "ready"]
    assert steps[-1].done == steps[-1].total > 10
    assert [p.done for p in steps] == sorted(p.done for p in steps)
    assert steps[-1].bytes_done == steps[-1].bytes_total > 0

    cancel = threading.Event()

    def on_progress(p: LoadProgress) -> None:
        if p.done >= 3:
            cancel.set()

    with pytest.raises(LoadCancelledError):
        load_model(tiny_dir, device="cpu", quantization="nf4", on_progress=on_progress, cancel=cancel)


@pytest.mark.gpu
def test_nf4_on_cuda_generates_and_stays_close(tiny_dir: Path, monkeypatch, tmp_path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    monkeypatch.setenv("LETTERPRESS_CACHE_DIR", str(tmp_path))
    loaded = load_model(tiny_dir, device="cuda", quantization="nf4")
    assert unquantized_text_weights(loaded.model) == []
    ids = torch.tensor([[2, 10, 20, 30]], device="cuda")
    out = loaded.model.generate(ids, max_new_tokens=32)
    seq = out.sequences if hasattr(out, "sequences") else out
    assert seq.shape[1] > ids.shape[1]


def test_nf4_mixed_keeps_attention_and_dense_mlp_at_8_bits(
    tiny_dir: Path, full, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.tools.inspect_report import observed_plan
    from engine.weights.quantize import Int8Linear

    monkeypatch.setenv("LETTERPRESS_CACHE_DIR", str(tmp_path))
    mixed = load_model(tiny_dir, device="cpu", quantization="nf4-mixed")
    assert mixed.info.quantization == "nf4-mixed"
    dec = mixed.model.model.decoder
    assert isinstance(dec.layers[0].self_attn.q_proj, Int8Linear) and isinstance(
        dec.layers[0].mlp.up_proj, Int8Linear
    )
    assert isinstance(dec.layers[0].experts.gate_up_proj, NF4Weight)
    assert isinstance(dec.layers[0].router.proj, nn.Linear)
    plan = {p["kind"]: p["storage"] for p in observed_plan(mixed.model)}
    assert plan == {
        "router": "float32",
        "attention": "int8",
        "dense_mlp": "int8",
        "experts": "nf4",
        "embedding": "float32",
        "norms": "float32",
    }
    # 8-bit row-wise storage is ~100x closer than 4-bit: the mixed model's logits sit between nf4 and full
    ref = _logits(full.model)
    rel = ((_logits(mixed.model) - ref).norm() / ref.norm()).item()
    assert rel < LOGITS_REL
    again = load_model(tiny_dir, device="cpu", quantization="nf4-mixed")  # from its own cache slot
    assert torch.equal(_logits(again.model), _logits(mixed.model))
