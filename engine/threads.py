"""The CPU thread policy: how many threads torch may compute with, so a draft never collapses on a busy
machine.

Why: torch starts one OpenMP thread per core and, by default, OpenMP threads spin while they wait for each
other. On a writer's laptop the cores are shared with a browser and more; a spinning thread that has lost its
core holds every other thread of the parallel region at the barrier, and a draft that takes 0.3 s alone takes
10-100 s. The policy therefore

* tells OpenMP to sleep instead of spin while it waits (`OMP_WAIT_POLICY=PASSIVE`; it must be in the
  environment before torch, and with it the OpenMP runtime, is first imported: `prepare_openmp()`),
* picks the intra-op thread count from the model's size (a small model's matrices are too small to share out:
  the fork/join costs more than it saves) and from the cores that are actually free now (measured from
  `/proc/stat`, less this process's own use), within the cores this process may run on (affinity, cgroup
  quota),
* never uses more compute threads than cores beside the UI thread when a UI is running (`reserve_ui_core`).

`LETTERPRESS_THREADS=N` forces N (benchmarks, people who know better); an explicit `OMP_NUM_THREADS` is a
ceiling. Imports no torch at module level, so the app and the CLI can call `prepare_openmp()` before torch
loads.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

FORCE_ENV = "LETTERPRESS_THREADS"
# Weight bytes one compute thread is worth: below this the per-op work is too small to split across cores (the
# 15 MB demo model runs fastest on one thread; a multi-GB model uses every free core).
BYTES_PER_THREAD = 64 * 1024 * 1024
# A core counts as free when less than this share of it is used by other programs.
BUSY_SHARE = 0.5
FIRST_SAMPLE_SECONDS = 0.05

_ui_reserved = False


def prepare_openmp() -> bool:
    """Make OpenMP wait passively (sleep, not spin). Returns False when torch was already imported, in which
    case the runtime has read its settings and this comes too late for this process (the thread count still
    helps)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault(
        "KMP_BLOCKTIME", "0"
    )  # the Intel OpenMP runtime of MKL builds: sleep at once as well
    return "torch" not in sys.modules


def preload_torch_libraries() -> list[str]:
    """Map torch's native libraries into the process without holding the GIL, before `import torch`.

    Why: `import torch` dlopens libtorch_cpu (hundreds of MB, thousands of static initializers) inside the
    import machinery, which holds the GIL throughout: 200-500 ms in which the UI thread cannot run a line of
    Python (a frozen window). Calling the C library's `dlopen` through ctypes releases the GIL for the call,
    so the same work happens while the UI keeps running; the later `import torch` finds the libraries loaded.
    Only libraries that do not call into Python are preloaded. Returns the ones loaded (empty where this does
    not apply)."""
    if "torch" in sys.modules or not sys.platform.startswith("linux"):
        return []
    import ctypes
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return []
    lib = Path(spec.origin).parent / "lib"
    try:
        libc = ctypes.CDLL(None)
        dlopen = libc.dlopen
    except (OSError, AttributeError):
        return []
    dlopen.restype = ctypes.c_void_p
    dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    loaded = []
    for name in ("libgomp.so.1", "libc10.so", "libtorch_cpu.so", "libtorch.so"):
        path = lib / name
        if path.is_file() and dlopen(str(path).encode(), os.RTLD_NOW | os.RTLD_GLOBAL):
            loaded.append(name)
    return loaded


@contextlib.contextmanager
def no_collector_pauses() -> Iterator[None]:
    """Keep Python's cyclic garbage collector from pausing every thread while torch and the model load.

    Why: importing torch and transformers creates a few million Python objects; each full collection walks all
    of them (100-350 ms) with the GIL held, whichever thread triggers it, so the UI froze at random moments of
    the load. The collector is off for the load (process-wide; reference counting still frees everything
    acyclic), and afterwards every object that exists is frozen into the permanent generation (`gc.freeze()`):
    later collections skip the long-lived modules and weights, so the writer never meets one either (a model
    switch unfreezes them so the old model can be freed)."""
    enabled = gc.isenabled()
    gc.disable()
    # A model that is replaced must be collectable again (it holds reference cycles): this costs one full
    # collection when the writer switches models (Session.unload), never on the first load.
    gc.unfreeze()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def reserve_ui_core(reserved: bool = True) -> None:
    """Declare that a UI thread shares this process's cores (the app's engine thread calls this)."""
    global _ui_reserved
    _ui_reserved = reserved


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity, bounded by a cgroup CPU quota (containers)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def _cgroup_quota() -> float | None:
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


@dataclass(frozen=True)
class _Sample:
    at: float
    busy: float  # seconds of non-idle time, summed over the usable CPUs
    own: float  # this process's CPU seconds


def _affinity() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _sample() -> _Sample | None:
    """Busy time of the CPUs we may use (from /proc/stat) and this process's own CPU time, now."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    allowed = _affinity()
    busy = 0
    for line in lines:
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        try:
            cpu = int(name[3:])
            values = [int(v) for v in fields[:8]]
        except ValueError:
            continue
        if allowed is not None and cpu not in allowed:
            continue
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        busy += sum(values) - idle
    times = os.times()
    return _Sample(time.monotonic(), busy / tick, times.user + times.system)


class CpuLoad:
    """How many of the usable cores other programs keep busy, measured between two samples of /proc/stat.

    The window is the time since the previous measurement (the previous request), or a short first sample;
    this process's own CPU time in the window is subtracted, so the engine's own work never reads as someone
    else's.
    """

    def __init__(self) -> None:
        self._last: _Sample | None = None

    def busy_cores(self) -> float | None:
        """Cores' worth of CPU other programs used since the last call (None where /proc/stat is
        unavailable)."""
        first = self._last is None
        if first:
            self._last = _sample()
            if self._last is None:
                return None
            time.sleep(FIRST_SAMPLE_SECONDS)
        now = _sample()
        before, self._last = self._last, now
        if now is None or before is None:
            return None
        wall = now.at - before.at
        if wall <= 0:
            return 0.0
        others = (now.busy - before.busy) - (now.own - before.own)
        return min(float(usable_cores()), max(0.0, others / wall))  # clock ticks are coarse in a short window


@dataclass(frozen=True)
class ThreadPlan:
    """The chosen intra-op thread count and why (shown by benchmarks, logged by the engine)."""

    threads: int  # 0: leave torch's own choice alone
    usable: int
    busy: float | None
    size_limit: int
    reason: str


def plan_threads(
    weight_bytes: int,
    *,
    usable: int | None = None,
    busy: float | None = None,
    reserve_ui: bool | None = None,
) -> ThreadPlan:
    """The thread count for a model of `weight_bytes` on `usable` cores of which `busy` are used by others.

    Pure (no measuring) when `usable` and `busy` are given, so it is easy to test.
    """
    usable = usable_cores() if usable is None else max(1, usable)
    reserve = _ui_reserved if reserve_ui is None else reserve_ui
    size_limit = max(1, math.ceil(weight_bytes / BYTES_PER_THREAD))
    if os.environ.get(FORCE_ENV, "").strip().lower() == "torch":  # benchmarks: torch's own default, untouched
        return ThreadPlan(0, usable, busy, size_limit, f"{FORCE_ENV}=torch (torch's default)")
    forced = _int_env(FORCE_ENV)
    if forced:
        return ThreadPlan(forced, usable, busy, size_limit, f"{FORCE_ENV}={forced}")
    free = usable if busy is None else usable - math.floor(busy + (1 - BUSY_SHARE))
    limits = {"model size": size_limit, "free cores": max(1, free)}
    if reserve and usable > 1:
        limits["cores beside the UI thread"] = usable - 1
    ceiling = _int_env("OMP_NUM_THREADS")
    if ceiling:
        limits["OMP_NUM_THREADS"] = ceiling
    name, threads = min(limits.items(), key=lambda kv: kv[1])
    return ThreadPlan(max(1, threads), usable, busy, size_limit, f"limited by {name}")


MAX_FORCED_THREADS = 1024  # far beyond any core count a writer has; torch refuses or stalls on absurd counts


def _int_env(name: str) -> int:
    """A thread count from the environment; 0 (the policy decides) when unset or unusable, with a notice
    naming the reason for an unusable one (engine/env.py)."""
    from engine.env import env_int

    return env_int(name, 0, low=1, high=MAX_FORCED_THREADS, meaning="the thread policy decides")


class ThreadPolicy:
    """Applies `plan_threads` to torch in the thread that computes, again before each request (load changes).

    Call `apply()` from the thread that runs the model: an OpenMP thread count belongs to the calling thread.
    """

    def __init__(self, weight_bytes: int) -> None:
        self.weight_bytes = weight_bytes
        self._load = CpuLoad()
        self.plan: ThreadPlan | None = None

    def apply(self) -> ThreadPlan:
        import torch

        plan = plan_threads(self.weight_bytes, busy=self._load.busy_cores())
        if plan.threads and torch.get_num_threads() != plan.threads:
            torch.set_num_threads(plan.threads)
        self.plan = plan
        return plan


def model_bytes(model: object) -> int:
    """Bytes of the weights a forward pass reads (parameters and buffers, shared ones once)."""
    seen: set[int] = set()
    total = 0
    tensors = [*model.parameters(), *model.buffers()]  # type: ignore[attr-defined]
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


def limit_interop_threads() -> None:
    """One inter-op thread: Letterpress never runs independent ops in parallel, and each extra pool thread is
    one more runnable thread on a busy machine. Only possible before torch's first parallel work; later it is
    a no-op."""
    import torch

    try:
        if torch.get_num_interop_threads() != 1:
            torch.set_num_interop_threads(1)
    except RuntimeError:
        pass


__all__ = [
    "CpuLoad",
    "ThreadPlan",
    "ThreadPolicy",
    "limit_interop_threads",
    "model_bytes",
    "no_collector_pauses",
    "plan_threads",
    "preload_torch_libraries",
    "prepare_openmp",
    "reserve_ui_core",
    "usable_cores",
]
