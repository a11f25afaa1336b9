"""How much memory one denoising step needs, measured, and the per-cell figure the fit estimate uses.

Method (allocator-agnostic, so it runs on the CPU and means the same on a GPU): a `TorchDispatchMode` sees
every aten op of a denoising run; each tensor an op returns is traced to its storage, and a storage counts as
live from the op that first returned it until the last Python tensor viewing it dies (`weakref.finalize`). The
peak of the sum of live storage bytes is the step's peak. It counts what the loop and the model's forward
allocate (logits, probabilities, draws, self-conditioning, activations, KV cache of the request) and not what
existed before (the weights). It cannot see scratch memory a single kernel allocates and frees inside itself
(small on these ops), nor allocator rounding/fragmentation, which the fit's overhead term covers.

`measure_step_memory` runs the loop's device code path (`engine.denoise.device_code_path`) on a model with the
real vocabulary (262,144) and canvas (256) but a tiny body, so what is measured is the vocabulary-sized part;
`bytes_per_cell` is peak / (candidates x canvas x vocabulary).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

REAL_VOCAB = 262_144
REAL_CANVAS = 256


class LiveTensorBytes(TorchDispatchMode):
    """Tracks the bytes of live tensor storages created by ops under it, and their peak.

    A storage is found again by `_key`: here its `data_ptr()`, which real tensors have and meta tensors lack
    (they are skipped). `engine.tools.memory_sim.LiveStorageBytes` keys by the storage object instead, so the
    meta device counts too; the bookkeeping is this one class for both.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._storages: dict[int, list[int]] = {}  # storage key -> [nbytes, live tensor count]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._track(leaf)
        return out

    def _key(self, tensor: torch.Tensor, storage: torch.UntypedStorage) -> int | None:
        """The storage's identity, or None for a storage that is not counted (meta, or no data)."""
        key = storage.data_ptr()
        if key == 0 or tensor.device.type == "meta":
            return None
        return key

    def _track(self, tensor: torch.Tensor) -> None:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        key = self._key(tensor, storage)
        if key is None:
            return
        entry = self._storages.get(key)
        if entry is None:
            entry = self._storages[key] = [storage.nbytes(), 0]
            self.live += entry[0]
            self.peak = max(self.peak, self.live)
        entry[1] += 1
        weakref.finalize(tensor, self._release, key)

    def _release(self, key: int) -> None:
        entry = self._storages.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            self.live -= entry[0]
            del self._storages[key]

    def reset_peak(self) -> None:
        self.peak = self.live


@dataclass(frozen=True)
class StepMemory:
    candidates: int
    canvas: int
    vocab: int
    dtype: str
    frozen: bool
    peak_bytes: int
    steps: int

    @property
    def cells(self) -> int:
        return self.candidates * self.canvas * self.vocab

    @property
    def bytes_per_cell(self) -> float:
        return self.peak_bytes / self.cells

    def line(self) -> str:
        kind = "infill (pinned)" if self.frozen else "draft"
        return (
            f"{self.candidates} candidate(s) x {self.canvas} canvas x {self.vocab:,} vocabulary, "
            f"{self.dtype}, {kind}: peak {self.peak_bytes / 1e9:.3f} "
            f"GB = {self.bytes_per_cell:.2f} bytes per cell"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "canvas": self.canvas,
            "vocab": self.vocab,
            "dtype": self.dtype,
            "frozen": self.frozen,
            "peak_bytes": self.peak_bytes,
            "bytes_per_cell": round(self.bytes_per_cell, 3),
            "steps": self.steps,
        }


def tiny_body_model(
    vocab: int = REAL_VOCAB, canvas: int = REAL_CANVAS, dtype: torch.dtype = torch.bfloat16
) -> Any:
    """A DiffusionGemma with the real vocabulary and canvas and the smallest body (hidden 64, 2 layers)."""
    from transformers import DiffusionGemmaForBlockDiffusion

    from engine.tools.tiny import tiny_config

    torch.manual_seed(0)
    config = tiny_config(vocab, canvas_length=canvas)
    # transformers' `to` wrapper is typed as the unbound function (self: PreTrainedModel), not the method
    return DiffusionGemmaForBlockDiffusion(config).to(dtype).eval()  # type: ignore[arg-type]


def measure_step_memory(
    candidates: int,
    *,
    model: Any = None,
    dtype: torch.dtype = torch.bfloat16,
    steps: int = 2,
    frozen: bool = False,
    prompt_tokens: int = 16,
) -> StepMemory:
    """Peak live tensor bytes of a `steps`-step denoising run (one canvas) on the loop's device code path.

    Two steps are enough to see every moment of the steady state (the second step's forward takes the first
    step's self-conditioning logits). `frozen` pins the second half of each row (infill).
    """
    from engine.api import DenoiseSettings
    from engine.denoise import Frozen, denoise, device_code_path

    model = model if model is not None else tiny_body_model(dtype=dtype)
    canvas = int(model.config.canvas_length)
    vocab = int(model.config.text_config.vocab_size)
    prompt = torch.randint(10, 400, (1, prompt_tokens)).repeat(candidates, 1)
    pins = None
    if frozen:
        mask = torch.zeros(candidates, canvas, dtype=torch.bool)
        mask[:, canvas // 2 :] = True
        pins = Frozen(mask, torch.randint(10, 400, (candidates, canvas)))
    settings = DenoiseSettings(max_steps=steps, candidates=candidates)
    tracker = LiveTensorBytes()
    with (
        torch.no_grad(),
        device_code_path(),
        tracker,
    ):  # not inference_mode: every allocation the process makes
        out = denoise(
            model,
            prompt,
            settings,
            max_new_tokens=canvas,
            eos_token_ids=[1],
            pad_token_id=0,
            seed=0,
            frozen=pins,
            max_blocks=1,
        )
    name = str(model.dtype).removeprefix("torch.")
    return StepMemory(candidates, canvas, vocab, name, frozen, tracker.peak, out.steps)
