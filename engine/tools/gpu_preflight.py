"""The first step of a GPU run (`gpu-check`, `engine.training.gpu_recipe`): read the machine's versions and
name every missing or unusable piece in one sentence, before any model work.

Why: on the lent machine's image (Python 3.12, torch 2.11 for CUDA 13, transformers 5.17, triton 3.6, no
bitsandbytes, no platformdirs) an earlier gpu-check ran 8 s, said its environment was "ok", and then reported
the real-shape model as damaged. Nothing can be fetched there, so what is missing must be known here, carried
as wheels (`engine.tools.gpu_carry`, `gpu-check --prepare DIR`) and checked there first.

Versions are read from the installed distributions' metadata (nothing heavy is imported), and the same rules
(`REQUIREMENTS`) are evaluated against the lent image's recorded package set (`LENT_IMAGE`) to decide what to
carry.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version


@dataclass(frozen=True)
class Requirement:
    """A distribution the GPU run needs, the versions it works with, and what it is needed for."""

    name: str
    spec: str
    why: str


# What the engine's GPU path imports (pyproject's pins where it has them).
REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("torch", ">=2.6", "the model"),
    Requirement(
        "transformers", "==5.23.*", "DiffusionGemma's modelling code at the version the engine is tested on"
    ),
    Requirement("safetensors", ">=0.4", "checkpoints"),
    Requirement("tokenizers", ">=0.21", "the tokenizer"),
    Requirement("accelerate", ">=1.0", "loading on the device"),
    Requirement("bitsandbytes", ">=0.50.2", "NF4 quantization and its CUDA 4-bit GEMM"),
    Requirement("platformdirs", ">=4.0", "the quantized cache's folder"),
    Requirement("jinja2", ">=3.0", "the chat template"),
    Requirement("numpy", ">=1.17", "tensors to and from the host"),
    Requirement("triton", ">=3.6", "the fused kernels (engine/kernels)"),
)
PYTHON = ">=3.11"

# The lent nvidia-h200 image as recorded (/work/.library/device/KINDS.md, read 2026-11): what is not listed is
# not there.
LENT_IMAGE: dict[str, str] = {
    "python": "3.12.3",
    "torch": "2.11.0",
    "transformers": "5.17.0",
    "triton": "3.6.0",
    "safetensors": "0.8.0",
    "tokenizers": "0.23.2",
    "accelerate": "1.15.0",
    "numpy": "2.5.2",
    "jinja2": "3.1.6",
    "huggingface_hub": "1.33.0",
    "packaging": "25.0",
}
LENT_CUDA = "13.0"


@dataclass(frozen=True)
class Problem:
    """One missing or unusable distribution."""

    name: str
    found: str | None
    spec: str
    why: str

    def words(self) -> str:
        if self.name == "cuda":
            return "torch sees no CUDA device (use --dry-run on a machine without one)"
        if self.found is None:
            return f"{self.name} is not installed (needs {self.spec}, for {self.why})"
        return f"{self.name} {self.found} is unusable (needs {self.spec}, for {self.why})"


def installed_versions() -> dict[str, str]:
    """{distribution: version} of this interpreter's requirements (absent ones left out), and `python`."""
    found = {"python": sys.version.split()[0]}
    for req in REQUIREMENTS:
        try:
            found[req.name] = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _base(version: str) -> Version:
    return Version(Version(version).base_version)  # "2.13.0+cpu" -> 2.13.0: local tags do not matter here


def problems(versions: dict[str, str]) -> list[Problem]:
    """What `versions` (installed_versions() or LENT_IMAGE) lacks or has at a version the engine cannot
    use."""
    out = []
    python = versions.get("python")
    if python is None or _base(python) not in SpecifierSet(PYTHON):
        out.append(Problem("python", python, PYTHON, "the engine"))
    for req in REQUIREMENTS:
        found = versions.get(req.name)
        if found is None or _base(found) not in SpecifierSet(req.spec):
            out.append(Problem(req.name, found, req.spec, req.why))
    return out


def sentence(found: list[Problem], *, carried: bool) -> str:
    """Every problem in one sentence, with what to do."""
    if not found:
        return "preflight: every package the GPU run needs is there"
    fix = (
        "the carry folder did not supply them: rebuild it with `python -m engine gpu-check --prepare DIR`"
        if carried
        else "build the carry folder where pip works (`python -m engine gpu-check --prepare DIR`) and start "
        "the run with DIR/run.sh"
    )
    return f"preflight: {'; '.join(p.words() for p in found)}: {fix}."


def preflight(*, need_cuda: bool) -> dict[str, Any]:
    """The preflight check's result for this interpreter: the versions read, the problems, one sentence, and
    `ok` (no problem; and a CUDA device when `need_cuda`)."""
    versions = installed_versions()
    found = problems(versions)
    carried = bool(os.environ.get("LETTERPRESS_CARRY"))
    cuda: dict[str, Any] = {}
    if not found:
        import torch

        cuda = {"cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda}
        if need_cuda and not torch.cuda.is_available():
            found.append(Problem("cuda", None, "a device", "a GPU run"))
    return {
        "ok": not found,
        "rule": "every requirement installed at a usable version"
        + (", and torch sees a CUDA device" if need_cuda else ""),
        "versions": versions,
        "carried": carried,
        **cuda,
        "missing": [p.words() for p in found],
        "line": sentence(found, carried=carried),
    }
