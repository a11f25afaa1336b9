"""DiffusionGemma's RMSNorm in one kernel against the module's forward, under the Triton interpreter."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.kernels import DEVICE

pytest.importorskip("triton")

from transformers.models.diffusion_gemma.modeling_diffusion_gemma import DiffusionGemmaRMSNorm

from engine.kernels.install import install
from engine.kernels.rmsnorm import rms_norm


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("with_scale", [True, False], ids=["scaled", "scale-free"])
@pytest.mark.parametrize("dim", [64, 2816, 100])
def test_rms_norm_matches_the_module(dtype, with_scale: bool, dim: int) -> None:
    norm = DiffusionGemmaRMSNorm(dim, eps=1e-6, with_scale=with_scale)
    if with_scale:
        with torch.no_grad():
            norm.weight.copy_(torch.randn(dim, generator=torch.Generator().manual_seed(dim)))
    norm = norm.to(device=DEVICE, dtype=dtype)
    x = (torch.randn(3, 5, dim, generator=torch.Generator().manual_seed(1)) * 4).to(dtype).to(DEVICE)
    ref = norm(x)
    ours = rms_norm(x, norm.weight if with_scale else None, norm.eps)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    rtol = 1e-6 if dtype == torch.float32 else 2**-7
    torch.testing.assert_close(ours.float(), ref.float(), rtol=rtol, atol=1e-6)


def test_installed_norms_follow_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    model = torch.nn.Sequential(DiffusionGemmaRMSNorm(64), DiffusionGemmaRMSNorm(64, with_scale=False))
    assert install(model) == 2 and install(model) == 0
    x = torch.randn(4, 64)
    import engine.kernels.rmsnorm as module

    calls = []
    real = module.rms_norm
    monkeypatch.setattr(module, "rms_norm", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setenv("LETTERPRESS_KERNELS", "off")
    off = model(x)
    assert calls == []
    monkeypatch.setenv("LETTERPRESS_KERNELS", "triton")
    on = model(x)
    assert len(calls) == 2
    torch.testing.assert_close(on, off, rtol=1e-6, atol=1e-6)
