"""The kernels launch on every card they are built for, and where a card cannot take them the engine says so
and takes the torch path (engine.kernels.configs, engine.kernels.compile_check)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine import kernels
from engine.kernels import configs

ROOT = Path(__file__).resolve().parents[2]
CONSUMER = 101_376  # sm_86/89/120: opt-in shared memory per block
HOPPER = 232_448


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch):
    """A CUDA device of chosen limits without one: `device_limits` answers for it and the switch is on."""
    monkeypatch.setenv(kernels.ENV_SWITCH, "triton")
    monkeypatch.setattr(kernels, "triton_installed", lambda: True)
    monkeypatch.setattr(configs, "_DISABLED", {})
    monkeypatch.setattr(configs, "_SAID", set())

    def limits(shared: int, capability: int) -> torch.device:
        monkeypatch.setattr(configs, "device_limits", lambda device: (shared, capability))
        return torch.device("cuda:0")

    return limits


def test_a_4090_gets_configurations_that_fit_it_and_an_h100_the_staged_ones() -> None:
    for key in configs.CONFIGS:
        small = configs.select(key, CONSUMER, 89)
        big = configs.select(key, HOPPER, 90)
        assert small is not None and small.shared_bound <= CONSUMER, key
        assert big is not None and big.shared_bound <= HOPPER, key
    gated_4090 = configs.select(configs.NF4_GATED_BF16, CONSUMER, 89)
    gated_h100 = configs.select(configs.NF4_GATED_BF16, HOPPER, 90)
    assert gated_4090 is not None and gated_h100 is not None
    # the NF4 loop is unstaged everywhere: staged, Triton copies its codes in 8-byte pieces (test_kernels_ptx)
    assert gated_4090.num_stages == gated_h100.num_stages == 1
    assert configs.why_not(CONSUMER, 89) is None and configs.why_not(HOPPER, 90) is None


def test_every_target_has_a_configuration_for_every_kernel() -> None:
    for target in configs.TARGETS.values():
        assert configs.why_not(target.shared_optin, target.capability) is None, target


def test_a_card_that_fits_no_configuration_takes_the_torch_path_and_says_why(
    fake_gpu, caplog: pytest.LogCaptureFixture
) -> None:
    device = fake_gpu(16 * 1024, 86)  # a hypothetical card with 16 KB per block
    with caplog.at_level(logging.WARNING, logger="engine.kernels.configs"):
        assert kernels.kernels_for(device) is False
        assert kernels.kernels_for(device) is False
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said  # said once, not per step
    assert "16,384 B of shared memory" in said[0] and "torch path" in said[0]


def test_a_card_older_than_ampere_takes_the_torch_path(fake_gpu) -> None:
    device = fake_gpu(HOPPER, 75)
    assert kernels.kernels_for(device) is False
    reason = configs.unavailable_reason(device)
    assert reason is not None and "compute capability 8.0" in reason and "7.5" in reason


def test_a_launch_the_card_refuses_turns_the_kernels_off_and_the_layer_runs_its_own_forward(
    fake_gpu, monkeypatch: pytest.MonkeyPatch
) -> None:
    device = fake_gpu(CONSUMER, 89)
    assert kernels.kernels_for(device) is True

    class OutOfResources(Exception):  # Triton's own class name; raised at the launch's module load
        pass

    class Refusing:
        def __getitem__(self, grid: tuple[int, ...]):
            def run(*args: object, **kwargs: object) -> None:
                raise OutOfResources(
                    "out of resource: shared memory, Required: 204800, Hardware limit: 101376"
                )

            return run

    with pytest.raises(configs.KernelsUnavailable, match="torch path"):
        configs.launch(Refusing(), (1,), configs.NF4_GATED_BF16, device)
    assert kernels.kernels_for(device) is False  # later layers and steps take the torch path at once

    from engine.kernels import install

    monkeypatch.setattr(install, "kernels_for", lambda device: True)  # as on the GPU, before the refusal
    layer = torch.nn.Linear(4, 3, bias=False)
    expected = layer(torch.ones(2, 4))

    def kernel(x: torch.Tensor) -> torch.Tensor:
        raise configs.KernelsUnavailable("refused")

    install._wrap(layer, kernel)
    assert torch.equal(layer(torch.ones(2, 4)), expected)  # the refusal is answered by the module's forward


def test_other_launch_errors_are_not_hidden(fake_gpu) -> None:
    device = fake_gpu(CONSUMER, 89)

    class Broken:
        def __getitem__(self, grid: tuple[int, ...]):
            def run(*args: object, **kwargs: object) -> None:
                raise ValueError("a real bug")

            return run

    with pytest.raises(ValueError, match="a real bug"):
        configs.launch(Broken(), (1,), configs.INT8, device)
    assert kernels.kernels_for(device) is True


def test_every_kernel_compiles_for_every_target_within_its_shared_memory_and_without_spills() -> None:
    """sm_80/86/89/90/100/120, each variant at the configuration chosen for that target, compiled on the CPU
    (a subprocess: the interpreter, which other kernel tests turn on, replaces the kernels by Python
    functions). Minutes the first time, seconds from Triton's cache."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "engine.kernels.compile_check"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=ROOT,
    )
    lines = [line for line in out.stdout.splitlines() if re.match(r"(ok|FAIL) +sm_", line)]
    from engine.kernels.compile_check import variants

    assert len(lines) == len(variants()) * len(configs.TARGETS), out.stdout[-3000:] + out.stderr[-3000:]
    assert out.returncode == 0, "\n".join(line for line in lines if line.startswith("FAIL"))
    for line in lines:
        shared, limit = (
            int(n.replace(",", "")) for n in re.findall(r"shared ([\d,]+) B .*limit ([\d,]+)", line)[0]
        )
        assert shared <= limit, line
        assert " 0 B spilled" in line, line


def test_every_triton_version_has_a_configuration_for_every_kernel_and_target() -> None:
    """Configurations may differ by Triton version (`Config.triton`); the vector NF4 kernel needs none: the
    lent image's Triton 3.6 and 3.9 both compile gate_up at 4 warps without a spill on sm_89/sm_90 (3.6 is
    compiled by `.ci/gpu-standin`, which spilled 64-72 B at the 8 warps the old gather kernel took there)."""
    on_36 = configs.select(configs.NF4_GATED_BF16, CONSUMER, 89, triton=(3, 6))
    on_39 = configs.select(configs.NF4_GATED_BF16, CONSUMER, 89, triton=(3, 9))
    assert on_36 is not None and on_39 is not None
    assert (on_36.num_warps, on_39.num_warps) == (4, 4)
    for version in ((3, 6), (3, 9), (3, 10)):
        for target in configs.TARGETS.values():
            for key in configs.CONFIGS:
                assert configs.select(key, target.shared_optin, target.capability, triton=version), (
                    key,
                    version,
                )
