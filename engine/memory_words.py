"""The words for memory, by the device that ran short: GPU memory on a GPU, RAM on the CPU.

Why: every refusal said "close other programs using the GPU", also on a CPU-only machine short of RAM, where
it names a device the machine does not have and hides the fix (free RAM, fewer alternatives, 4-bit weights).
Every memory message in the engine (the load-time fit, the load, the per-request budget, a run that ran out)
takes its words from here, given the device it talks about.
"""

from __future__ import annotations

HOST_OOM_MARKERS = ("DefaultCPUAllocator", "can't allocate memory", "cannot allocate memory")


def is_gpu(device: object) -> bool:
    """Whether `device` ("cuda", "cuda:0", "cuda:0 (name)", a torch.device) is a GPU."""
    return str(device).strip().lower().startswith(("cuda", "gpu"))


def memory_name(device: object) -> str:
    """ "GPU memory" or "memory (RAM)": what ran short on `device`."""
    return "GPU memory" if is_gpu(device) else "memory (RAM)"


def free_memory_advice(device: object) -> str:
    """The clause that frees memory on `device` (no capital, no full stop)."""
    if is_gpu(device):
        return "close other programs using the GPU"
    return "close other programs to free RAM"


def is_host_out_of_memory(exc: BaseException) -> bool:
    """A host allocation failure as torch reports it (a RuntimeError naming its CPU allocator), or a
    MemoryError."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(m in text for m in HOST_OOM_MARKERS)


__all__ = ["free_memory_advice", "is_gpu", "is_host_out_of_memory", "memory_name"]
