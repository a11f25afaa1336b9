"""The compiler half: never used for code generation (the interpreter runs kernels), present because Triton
pairs every driver with a compiler."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from triton.backends.compiler import BaseBackend, GPUTarget


@dataclass(frozen=True)
class CPUOptions:
    num_warps: int = 1
    num_ctas: int = 1
    num_stages: int = 1
    debug: bool = False
    sanitize_overflow: bool = False
    arch: str = "cpu"
    backend_name: str = "cpu"

    def hash(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()


class CPUBackend(BaseBackend):
    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "cpu"

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        self.binary_ext = "so"

    def hash(self) -> str:
        return "letterpress-cpu-interpreter"

    def parse_options(self, options: dict) -> object:
        known = {k: v for k, v in options.items() if k in CPUOptions.__dataclass_fields__}
        return CPUOptions(**known)

    def add_stages(self, stages: dict, options: object, language: Any = None) -> None:
        raise RuntimeError("the letterpress cpu backend compiles nothing: run with TRITON_INTERPRET=1")

    def load_dialects(self, context: Any) -> None:
        return None

    def get_module_map(self) -> dict[str, ModuleType]:
        return {}

    def pack_metadata(self, metadata: Any) -> Any:
        return metadata

    def get_codegen_implementation(self, options: Any) -> dict:
        return {}
