"""Which ops of a code path would make a CUDA device wait for the host (or the host for the device)?

`torch.cuda.set_sync_debug_mode("error")` answers that on a GPU. On the CPU nothing synchronises, so this
audit lists every ATen op a block runs (a `TorchDispatchMode`) and flags the ones known to synchronise on
CUDA: scalar reads (`.item()`, `bool(t)`: `_local_scalar_dense`, `is_nonzero`, `equal`), ops whose output size
depends on the data (`nonzero`, `masked_select`, `unique`, `bincount`, `repeat_interleave` without
`output_size`, boolean indexing, which decomposes to `nonzero`), device->host copies, `multinomial` (its
argument checks read values) and `_grouped_mm` on compute capability < 9 (PyTorch's fallback copies `offs` to
the host).

Limits of the stand-in, stated where it is used: it sees ATen ops only, not what a custom kernel does inside
(a Triton launch is asynchronous, so a kernel launch is no sync; the interpreter's own host work while it
emulates a kernel on the CPU is left out), and `.cpu()`/`.tolist()` of a CPU tensor dispatch nothing, so
`source_reads` checks the path's source for them.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

SYNCING_OPS = frozenset(
    {
        "_local_scalar_dense",
        "item",
        "is_nonzero",
        "equal",
        "allclose",
        "nonzero",
        "argwhere",
        "masked_select",
        "masked_scatter",
        "unique",
        "_unique",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "unique_dim_consecutive",
        "bincount",
        "histogram",
        "multinomial",
        "_assert_scalar",
        "tolist",
    }
)
GROUPED_MM_OPS = frozenset(
    {"_grouped_mm", "grouped_mm", "grouped_mm_fallback"}
)  # sync on compute capability < 9
HOST_READS = ("cpu", "item", "tolist", "numpy")


@dataclass
class Audit:
    ops: Counter[str] = field(default_factory=Counter)
    syncing: Counter[str] = field(default_factory=Counter)

    @property
    def total_syncs(self) -> int:
        return sum(self.syncing.values())


def _is_sync(name: str, args: Any, kwargs: dict[str, Any], capability: tuple[int, int]) -> bool:
    if name in SYNCING_OPS:
        return True
    if name in GROUPED_MM_OPS:
        return capability[0] < 9
    if name == "repeat_interleave":
        return kwargs.get("output_size") is None
    if name == "_to_copy":  # an explicit host destination: on the GPU path that is a device->host copy
        dev = kwargs.get("device")
        return dev is not None and str(dev).startswith("cpu")
    return False


@contextmanager
def auditing(
    capability: tuple[int, int] = (8, 6), quiet: Callable[[], bool] = lambda: False
) -> Iterator[Audit]:
    """Record the ops run in the block and the ones that would synchronise on a CUDA device of `capability`.
    `quiet()` true means "inside a kernel launch being emulated": its ops are not the path's."""
    from torch.utils._python_dispatch import TorchDispatchMode

    audit = Audit()

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if not quiet():
                name = func.overloadpacket.__name__
                audit.ops[name] += 1
                if _is_sync(name, args, kwargs, capability):
                    audit.syncing[name] += 1
            return func(*args, **kwargs)

    with Mode():
        yield audit


def source_reads(*functions: Callable[..., Any]) -> list[str]:
    """`.cpu()`, `.item()`, `.tolist()`, `.numpy()` calls in the functions' source ("name:line: call")."""
    found = []
    for fn in functions:
        source = textwrap.dedent(inspect.getsource(fn))
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in HOST_READS
            ):
                found.append(f"{fn.__qualname__}:{node.lineno}: .{node.func.attr}()")
    return found
