"""The driver half: reports an active CPU device so `triton.runtime.driver.active` resolves."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase


def _bench(kernel_call: Callable, *, quantiles: list[float] | None = None, **_: Any) -> Sequence[float]:
    start = time.perf_counter()
    kernel_call()
    ms = (time.perf_counter() - start) * 1e3
    return [ms] * len(quantiles) if quantiles else [ms]


class CPUDriver(DriverBase):
    @classmethod
    def is_active(cls) -> bool:
        try:
            import torch

            return not torch.cuda.is_available()
        except Exception:  # noqa: BLE001
            return True

    def map_python_to_cpp_type(self, ty: str) -> str:
        return (
            "void*"
            if ty.startswith("*")
            else {"i32": "int32_t", "i64": "int64_t", "fp32": "float"}.get(ty, ty)
        )

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cpu", 0, 0)

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cpu

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        return None

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_benchmarker(self) -> Callable:
        return _bench

    def get_empty_cache_for_benchmark(self) -> Any:
        import torch

        return torch.empty(1, dtype=torch.int8)

    def clear_cache(self, cache: Any) -> None:
        cache.zero_()
