"""The int8 linear (nf4-mixed's attention and dense MLP) without the fp32 round trip, against `Int8Linear`'s
dequantize-then-matmul, under the Triton interpreter. Tolerance as the NF4 linear's: fp32 1e-5, bf16 2**-6 of
the output's largest magnitude."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.kernels import DEVICE

pytest.importorskip("triton")

from engine.kernels.install import install
from engine.kernels.int8_gemm import int8_linear
from engine.weights.quantize import Int8Linear


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize(("rows", "n_in", "n_out"), [(1, 64, 32), (37, 80, 48), (5, 200, 130)])
def test_int8_linear_matches_the_fp32_round_trip(dtype, rows: int, n_in: int, n_out: int) -> None:
    gen = torch.Generator().manual_seed(rows)
    layer = Int8Linear(n_in, n_out, device="cpu", dtype=dtype)
    layer.store(torch.randn(n_out, n_in, generator=gen))
    layer = layer.to(DEVICE)
    x = torch.randn(rows, n_in, generator=gen).to(dtype).to(DEVICE)
    ref = torch.nn.functional.linear(x, layer.dequantize().to(dtype))
    ours = int8_linear(x, layer)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    tol = 1e-5 if dtype == torch.float32 else 2**-6
    assert (ours.float() - ref.float()).abs().max().item() <= tol * max(1.0, ref.float().abs().max().item())


def test_the_switch_routes_int8_layers_through_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = Int8Linear(64, 32, device="cpu", dtype=torch.float32)
    layer.store(torch.randn(32, 64))
    x = torch.randn(3, 64)
    assert install(layer) == 1 and install(layer) == 0
    monkeypatch.setenv("LETTERPRESS_KERNELS", "triton")
    calls = []
    real = Int8Linear.dequantize
    monkeypatch.setattr(Int8Linear, "dequantize", lambda self, *a: calls.append(1) or real(self, *a))
    out = layer(x)
    assert calls == []  # no dense copy of the weight
    torch.testing.assert_close(out, torch.nn.functional.linear(x, real(layer)), atol=1e-5, rtol=1e-5)
