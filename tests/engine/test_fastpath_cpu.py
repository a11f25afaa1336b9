"""The GPU fast path's pieces, executed on the CPU: the one-kernel stack dequantisation the real stacks take,
the bitsandbytes fake-kernel fix that `torch.compile` needs at the real shapes, and the Triton grouped GEMM of
the compute-capability-8.x experts path (under Triton's interpreter).

Stand-in limits: the CPU kernel of `dequantize_4bit.out` dequantizes into a temporary and copies (the CUDA
kernel writes in place), so this proves the branch's arguments, layout and values, not its memory; the
real-shape compile runs on the meta device with the `aot_eager` backend (tracing, fake tensors and the AOT
graph are real; Inductor's code generation needs a device and is run by `python -m engine gpu-check`); the
Triton kernel runs under the interpreter in float32 (NumPy has no bfloat16).
"""

from __future__ import annotations

import pytest
import torch

from engine import fastpath
from engine.weights.quantize import NF4Weight


def _stack(count: int, out_f: int, in_f: int, seed: int = 0) -> NF4Weight:
    gen = torch.Generator().manual_seed(seed)
    weight = NF4Weight((out_f, in_f), count, dtype=torch.float32)
    for e in range(count):
        weight.store(torch.randn(out_f, in_f, generator=gen) * 0.05, e)
    return weight


def test_the_one_kernel_stack_branch_runs_on_the_cpu_and_equals_expert_by_expert() -> None:
    """(128, 256) matrices are 512 blocks of 64, a multiple of 256: the branch the 26B-A4B's stacks take
    (their 61,952 and 30,976 blocks are too), which no CPU test executed before (no CPU kernel for
    dequantize_4bit.out)."""
    weight = _stack(3, 128, 256)
    assert (128 * 256 // 64) % 256 == 0
    expected = torch.stack([weight.dequantize(e) for e in range(3)])
    fastpath.free_stack_buffers()
    assert torch.equal(fastpath.reused_stack(weight, "gate_up"), expected)
    assert torch.equal(fastpath.dequantize_stack(weight), expected)
    again = fastpath.reused_stack(weight, "gate_up")  # the buffer is reused, not reallocated
    assert again.data_ptr() == fastpath.reused_stack(weight, "gate_up").data_ptr()
    fastpath.free_stack_buffers()


def test_the_dequantize_out_fake_kernel_accepts_the_real_stack_shape() -> None:
    """bitsandbytes 0.50.2 compares out.shape (torch.Size) with the int[] shape (a list): always unequal. On
    meta tensors the fake kernel runs, so the real gate_up stack (128 x 1408 x 2816) shows it without
    memory."""
    from engine.weights import bnb_fixes

    bnb_fixes.install()
    assert not bnb_fixes.fake_kernel_is_broken()
    count, out_f, in_f = 128, 1408, 2816
    A = torch.empty(count * out_f * in_f // 2, 1, dtype=torch.uint8, device="meta")
    absmax = torch.empty(count * out_f * in_f // 64, dtype=torch.float32, device="meta")
    out = torch.empty(count * out_f, in_f, dtype=torch.bfloat16, device="meta")
    torch.ops.bitsandbytes.dequantize_4bit.out(
        A, absmax, 64, "nf4", [count * out_f, in_f], torch.bfloat16, out=out
    )
    wrong = torch.empty(count * out_f, in_f + 2, dtype=torch.bfloat16, device="meta")
    with pytest.raises(RuntimeError, match=r"out\.shape"):  # the check itself still works
        torch.ops.bitsandbytes.dequantize_4bit.out(
            A, absmax, 64, "nf4", [count * out_f, in_f], torch.bfloat16, out=wrong
        )


def _real_experts():
    from transformers import DiffusionGemmaConfig
    from transformers.models.diffusion_gemma.modeling_diffusion_gemma import DiffusionGemmaTextExperts

    from engine.tools.real_shape import real_config_dict
    from engine.weights.quantize import _convert_experts

    config = DiffusionGemmaConfig(**real_config_dict()).text_config
    with torch.device("meta"):
        experts = DiffusionGemmaTextExperts(config)
    _convert_experts(
        experts, torch.bfloat16
    )  # NF4 stacks on meta: 128 x (1408 x 2816) and 128 x (2816 x 704)
    return config, experts


@pytest.mark.parametrize("outer", ["inference_mode", "no_grad"])
def test_torch_compile_of_the_real_shape_nf4_experts_forward(outer: str) -> None:
    """What `LETTERPRESS_FASTPATH=1` compiles on the real model: the sync-free NF4 experts forward at the real
    shapes (a 256-token canvas), eager and compiled writing the same reused buffers."""
    config, experts = _real_experts()
    tokens, top_k = 256, config.top_k_experts
    hidden = torch.empty(tokens, config.hidden_size, dtype=torch.bfloat16, device="meta")
    index = torch.empty(tokens, top_k, dtype=torch.long, device="meta")
    weights = torch.empty(tokens, top_k, dtype=torch.bfloat16, device="meta")
    fastpath.free_stack_buffers()
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda h, i, w: fastpath.sync_free_nf4_experts_forward(experts, h, i, w), backend="aot_eager"
    )
    ctx = torch.inference_mode() if outer == "inference_mode" else torch.no_grad()
    try:
        with ctx:
            eager = fastpath.sync_free_nf4_experts_forward(experts, hidden, index, weights)
            out = compiled(hidden, index, weights)
            out = compiled(hidden, index, weights)
    finally:
        fastpath.free_stack_buffers()
        torch._dynamo.reset()
    assert out.shape == eager.shape == (tokens, config.hidden_size) and out.dtype == torch.bfloat16


def test_triton_grouped_gemm_equals_per_expert_matmuls() -> None:
    from engine.kernels.grouped_gemm import grouped_mm_nt

    gen = torch.Generator().manual_seed(1)
    counts = torch.tensor(
        [5, 0, 33, 1, 0, 70, 2]
    )  # empty experts, one tile, several tiles, a partial last tile
    rows = int(counts.sum())
    x = torch.randn(rows, 40, generator=gen)
    w = torch.randn(len(counts), 72, 40, generator=gen)
    offsets = torch.cumsum(counts, 0).to(torch.int32)
    out = grouped_mm_nt(x, w, offsets)
    expected = torch.cat(
        [
            x[s:e] @ w[i].T
            for i, (s, e) in enumerate(zip([0, *offsets[:-1].tolist()], offsets.tolist(), strict=True))
        ]
    )
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_the_8x_experts_path_equals_torchs_grouped_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compute-capability-8.x forward (Triton kernel, offsets on the device) gives transformers' grouped
    forward's result on a small NF4 stack (fp32)."""
    from transformers import DiffusionGemmaConfig
    from transformers.models.diffusion_gemma.modeling_diffusion_gemma import DiffusionGemmaTextExperts

    from engine.tools.real_shape import real_config_dict
    from engine.weights.quantize import _convert_experts

    text = dict(
        real_config_dict(layers=1, vocab_size=512)["text_config"],
        hidden_size=64,
        moe_intermediate_size=32,
        num_experts=8,
        top_k_experts=2,
    )
    config = DiffusionGemmaConfig(text_config=text).text_config
    experts = DiffusionGemmaTextExperts(config)
    _convert_experts(experts, torch.float32)
    gen = torch.Generator().manual_seed(2)
    for e in range(8):
        experts.gate_up_proj.store(torch.randn(64, 64, generator=gen) * 0.1, e)
        experts.down_proj.store(torch.randn(64, 32, generator=gen) * 0.1, e)
    hidden = torch.randn(48, 64, generator=gen)
    index = torch.randint(0, 8, (48, 2), generator=gen)
    weights = torch.rand(48, 2, generator=gen)
    fastpath.free_stack_buffers()
    monkeypatch.setenv(fastpath.GROUPED_MM_ENV, "torch")
    reference = fastpath.sync_free_nf4_experts_forward(experts, hidden, index, weights)
    monkeypatch.setenv(fastpath.GROUPED_MM_ENV, "triton")
    triton_out = fastpath.sync_free_nf4_experts_forward(experts, hidden, index, weights)
    fastpath.free_stack_buffers()
    torch.testing.assert_close(triton_out, reference, rtol=1e-4, atol=1e-5)
