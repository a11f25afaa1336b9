"""The fused NF4 MoE kernel against today's dequantize-then-matmul path, under the Triton interpreter on the
CPU.

Tolerance (stated in engine.kernels.nf4_moe and docs/performance.md): fp32 compute, max |err| <= 1e-5 x the
output's largest magnitude; bf16 compute, <= 2**-6 x it (the same bf16-rounded weights and intermediates, only
the order of the fp32 accumulation and of the k-way sum differs). No floor: small outputs get a small bar.

The kernels run at the GPU's own tiles (16 x 64 x 64, engine.kernels.configs) under the interpreter, and the
shapes of the `gpu_tiles` cases are chosen so a wrong kernel shows: N and K larger than a tile (K with a
partial last tile), more than one block of 16 assignments per expert, and weights whose scale doubles from one
double-quantization group (256 blocks of 64) to the next, so absmax2 differs in every group. `python -m
engine.tools.kernel_mutations` plants one bug of each class in the kernel and checks that these tests fail.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.kernels import DEVICE, count_syncs

pytest.importorskip("triton")

from transformers.activations import ACT2FN

from engine.kernels.nf4_moe import align, fused_moe, nf4_linear, reference_moe
from engine.weights.quantize import NF4Weight

GELU = ACT2FN["gelu_pytorch_tanh"]
TOL = {torch.float32: 1e-5, torch.bfloat16: 2**-6}


def stacks(
    experts: int, hidden: int, inter: int, dtype: torch.dtype, seed: int = 0
) -> tuple[NF4Weight, NF4Weight]:
    gen = torch.Generator().manual_seed(seed)
    gate_up = NF4Weight((2 * inter, hidden), experts, device="cpu", dtype=dtype)
    down = NF4Weight((hidden, inter), experts, device="cpu", dtype=dtype)
    for e in range(experts):
        gate_up.store(grouped(torch.randn(2 * inter, hidden, generator=gen) * hidden**-0.5, e), e)
        down.store(grouped(torch.randn(hidden, inter, generator=gen) * inter**-0.5, e), e)
    return gate_up.to(DEVICE), down.to(DEVICE)


GROUP = 64 * 256  # weights per double-quantization group (absmax2 entry)


def grouped(weight: torch.Tensor, expert: int = 0) -> torch.Tensor:
    """`weight` with its scale doubling from one absmax2 group to the next (and differing per expert), so
    reading the wrong group's or the wrong expert's scale changes the result."""
    flat = weight.reshape(-1).clone()
    for g, start in enumerate(range(0, flat.numel(), GROUP)):
        flat[start : start + GROUP] *= 2.0 ** (g % 4) * (1.0 + 0.25 * expert)
    return flat.view(weight.shape)


def routing(
    tokens: int, experts: int, top_k: int, dtype: torch.dtype, *, only: list[int] | None = None, seed: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    pool = only if only is not None else list(range(experts))
    picks = torch.stack(
        [torch.tensor(pool)[torch.randperm(len(pool), generator=gen)[:top_k]] for _ in range(tokens)]
    )
    weights = torch.softmax(torch.randn(tokens, top_k, generator=gen), -1).to(dtype)
    return picks.to(DEVICE), weights.to(DEVICE)


def check(
    hidden: torch.Tensor, index: torch.Tensor, weights: torch.Tensor, gate_up: NF4Weight, down: NF4Weight
) -> float:
    ours = fused_moe(hidden, index, weights, gate_up, down, act=1)
    ref = reference_moe(hidden, index, weights, gate_up, down, GELU)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    scale = ref.float().abs().max().item()
    assert scale > 0
    err = (ours.float() - ref.float()).abs().max().item()
    assert err <= TOL[gate_up.compute_dtype] * scale, (err, scale)
    return err


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_gpu_tiles_several_n_and_k_tiles_blocks_and_scale_groups_per_expert(dtype) -> None:
    """4 experts, hidden 192 (three K tiles of gate_up, three N tiles of down), expert width 160 (three N
    tiles of each half of gate_up; down's K ends in a half tile); 40 tokens top-2: 20 assignments per expert
    on average, more than one M block of 16; gate_up holds 4 absmax2 groups, down 2."""
    gate_up, down = stacks(4, 192, 160, dtype, seed=11)
    assert gate_up.absmax2.shape[-1] == 4 and down.absmax2.shape[-1] == 2
    x = torch.randn(40, 192, generator=torch.Generator().manual_seed(12)).to(dtype).to(DEVICE)
    index, weights = routing(40, 4, 2, dtype, seed=13)
    counts = torch.bincount(index.reshape(-1).cpu(), minlength=4)
    assert int(counts.min()) > 16, counts
    check(x, index, weights, gate_up, down)


def test_gpu_tiles_dequantize_every_weight_exactly_in_fp32() -> None:
    """x = the identity: each output row is one column of W, one product with 1.0 and zeros elsewhere, so the
    kernel must give the dequantized weights bit for bit (N 160 and K 192: three tiles each way, two absmax2
    groups)."""
    weight = NF4Weight((160, 192), None, device="cpu", dtype=torch.float32)
    weight.store(grouped(torch.randn(160, 192, generator=torch.Generator().manual_seed(14))))
    weight = weight.to(DEVICE)
    assert weight.absmax2.shape[-1] == 2
    ours = nf4_linear(torch.eye(192, device=DEVICE), weight)
    assert torch.equal(ours, weight.dequantize().float().t())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize(
    ("experts", "tokens", "top_k", "hidden", "inter"),
    [(1, 5, 1, 64, 32), (3, 7, 2, 64, 48), (8, 33, 4, 128, 64), (5, 1, 2, 64, 32), (6, 19, 3, 40, 24)],
    ids=["one-expert", "three", "eight", "one-token", "odd-shapes"],
)
def test_fused_moe_matches_the_dequantize_path(dtype, experts, tokens, top_k, hidden, inter) -> None:
    gate_up, down = stacks(experts, hidden, inter, dtype)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(tokens, hidden, generator=gen).to(dtype).to(DEVICE)
    index, weights = routing(tokens, experts, top_k, dtype)
    check(x, index, weights, gate_up, down)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_empty_experts_and_all_tokens_to_one_expert(dtype) -> None:
    gate_up, down = stacks(6, 64, 32, dtype)
    x = torch.randn(21, 64, generator=torch.Generator().manual_seed(3)).to(dtype).to(DEVICE)
    index, weights = routing(21, 6, 2, dtype, only=[1, 4])  # experts 0, 2, 3, 5 get nothing
    check(x, index, weights, gate_up, down)
    index, weights = routing(21, 6, 1, dtype, only=[5])  # every token to the last expert
    check(x, index, weights, gate_up, down)


def test_group_larger_than_a_tile_and_odd_group_sizes() -> None:
    gate_up, down = stacks(3, 64, 32, torch.float32)
    x = torch.randn(37, 64, generator=torch.Generator().manual_seed(4)).to(DEVICE)
    index = torch.tensor([[0, 2] if t % 5 else [1, 2] for t in range(37)], device=DEVICE)  # groups 30, 7, 37
    weights = torch.rand(37, 2, generator=torch.Generator().manual_seed(5)).to(DEVICE)
    check(x, index, weights, gate_up, down)


def test_the_kernel_never_dequantizes_a_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    gate_up, down = stacks(4, 64, 32, torch.bfloat16)
    x = torch.randn(9, 64).to(torch.bfloat16).to(DEVICE)
    index, weights = routing(9, 4, 2, torch.bfloat16)
    ref = reference_moe(x, index, weights, gate_up, down, GELU)

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the fused kernel made a dense copy of an expert")

    monkeypatch.setattr(NF4Weight, "dequantize", refuse)
    ours = fused_moe(x, index, weights, gate_up, down, act=1)
    assert (ours.float() - ref.float()).abs().max().item() <= TOL[torch.bfloat16] * ref.abs().max().item()


def test_grouping_by_expert_reads_nothing_back_to_the_host() -> None:
    index = torch.tensor([[3, 0], [3, 1], [0, 3], [3, 2]], device=DEVICE)
    with count_syncs() as seen:
        sorted_ids, block_expert = align(index, 5, 4)
    assert seen == []
    # groups: expert 0 {1, 4}, 1 {3}, 2 {7}, 3 {0, 2, 5, 6}, 4 none; each padded to 4 with -1
    assert sorted_ids.tolist() == [1, 4, -1, -1, 3, -1, -1, -1, 7, -1, -1, -1, 0, 2, 5, 6] + [-1] * 8
    assert block_expert.tolist() == [0, 1, 2, 3, 5, 5]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_nf4_dense_linear_matches_dequantize_then_matmul(dtype) -> None:
    weight = NF4Weight((48, 80), None, device="cpu", dtype=dtype)
    weight.store(torch.randn(48, 80, generator=torch.Generator().manual_seed(6)))
    weight = weight.to(DEVICE)
    x = torch.randn(2, 3, 80, generator=torch.Generator().manual_seed(7)).to(dtype).to(DEVICE)
    ref = torch.nn.functional.linear(x, weight.dequantize().to(dtype))
    ours = nf4_linear(x, weight)
    assert ours.shape == ref.shape
    assert (ours.float() - ref.float()).abs().max().item() <= TOL[dtype] * ref.abs().max().item()


@pytest.mark.slow
def test_real_expert_shapes_with_fewer_experts() -> None:
    """The 26B-A4B's hidden 2816 and expert width 704 (3 experts instead of 128, one empty; 8 tokens
    top-2)."""
    gate_up, down = stacks(3, 2816, 704, torch.bfloat16)
    x = torch.randn(8, 2816, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16).to(DEVICE)
    index, weights = routing(8, 3, 2, torch.bfloat16, only=[0, 2])  # expert 1 empty
    check(x, index, weights, gate_up, down)


def test_scales_decoded_in_several_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The vector path decodes a row's scales `SCALE_CHUNK` blocks at a time (32 for gate_up on the GPU: the
    model's 44 blocks per row are two chunks; half that for one matrix); at 2, K = 192 (3 blocks) is a full
    chunk and a partial one for gate_up and three chunks of one for the others, so a chunk read at the wrong
    blocks shows, exactly in fp32 and through the gated and routed paths."""
    from engine.kernels import nf4_moe

    monkeypatch.setattr(nf4_moe, "SCALE_CHUNK", 2)
    assert nf4_moe.scale_chunk(192, gated=True) == 2 and nf4_moe.scale_chunk(192, gated=False) == 1
    weight = NF4Weight((160, 192), None, device="cpu", dtype=torch.float32)
    weight.store(grouped(torch.randn(160, 192, generator=torch.Generator().manual_seed(15))))
    weight = weight.to(DEVICE)
    assert torch.equal(nf4_linear(torch.eye(192, device=DEVICE), weight), weight.dequantize().float().t())
    gate_up, down = stacks(3, 192, 128, torch.float32, seed=16)
    x = torch.randn(20, 192, generator=torch.Generator().manual_seed(17)).to(DEVICE)
    index, weights = routing(20, 3, 2, torch.float32, seed=18)
    check(x, index, weights, gate_up, down)
