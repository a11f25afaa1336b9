"""`python -m engine.tools.kernel_mutations`: plant one bug of each class in the fused NF4 kernel and check
that the fast kernel tests catch every one.

Why: a review planted three bugs (absmax2 from group 0, `pid_n` ignored, the K loop keeping only its last
tile) and all three passed the fast lane, because the CPU ran one N tile and one K iteration and never reached
a second double-quantization group. This script keeps that from coming back: each plant is an exact text
substitution in `engine/kernels/triton_src.py` (it must match exactly once, so a renamed line makes the script
fail instead of planting nothing), applied to a copy of the project in a temporary folder, where the fast
kernel tests run (`pytest -x -m "not slow"`, under the interpreter). A plant that passes them is a hole in the
tests: the script prints which and exits 1. Plants run side by side (`--jobs`, default the CPU count). Also
run by CI (.ci/run); a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path("engine/kernels/triton_src.py")
TESTS = ["tests/engine/test_kernels_moe.py"]


@dataclass(frozen=True)
class Plant:
    """One bug: the class it stands for, and the text it replaces in the kernel source."""

    name: str
    kind: str
    before: str
    after: str


PLANTS = (
    # the vector path (rows of whole blocks: the model's shapes, gate_up in the gpu_tiles cases, the exact
    # fp32 case)
    Plant(
        "absmax2-group-0",
        "wrong group",
        "return tl.load(code2_ptr + qa) * tl.load(s2base + blk // 256, mask=m, other=0.0)",
        "return tl.load(code2_ptr + qa) * tl.load(s2base + blk * 0, mask=m, other=0.0)",
    ),
    Plant(
        "pid-n-ignored",
        "ignored program id",
        "pid_n = tl.program_id(1)\n    e = tl.load(",
        "pid_n = tl.program_id(1) * 0\n    e = tl.load(",
    ),
    Plant(
        "k-loop-last-tile-only",
        "K-loop tail",
        "acc = mma(a, w, acc, DOT_BF16)\n                if GATED:",
        "acc = mma(a, w, acc * 0.0, DOT_BF16)\n                if GATED:",
    ),
    Plant(
        "chunk-drops-last-block",
        "K-loop tail",
        "for j in range(0, tl.minimum(kb_row - c0, CHUNK)):",
        "for j in range(0, tl.minimum(kb_row - c0, CHUNK) - 1):",
    ),
    Plant(
        "scale-chunk-from-block-0",
        "offset",
        "s_gate = nf4_scales(sbase, s2base, code2_ptr, off, cols, c0, kb_row, col_ok, CHUNK)",
        "s_gate = nf4_scales(sbase, s2base, code2_ptr, off, cols, 0, kb_row, col_ok, CHUNK)",
    ),
    Plant("expert-0-offset", "offset", "off = tl.load(offset_ptr + e64)", "off = tl.load(offset_ptr)"),
    Plant(
        "nibbles-swapped",
        "offset",
        "tl.join(byte >> 4, byte & 15)",
        "tl.join(byte & 15, byte >> 4)",
    ),
    Plant(
        "absmax-block-128",
        "absmax block",
        "blk = cols[:, None] * KB + bi[None, :]",
        "blk = cols[:, None] * KB + bi[None, :] // 2",
    ),
    Plant(
        "scale-of-the-chunk-s-first-block",
        "absmax block",
        "pick = tl.full((BLOCK_N, 1), j, tl.int32)",
        "pick = tl.full((BLOCK_N, 1), 0, tl.int32)",
    ),
    Plant(
        "gelu-without-cubic",
        "activation",
        "tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))",
        "tanh(0.7978845608028654 * x)",
    ),
    Plant("activation-on-up", "activation", "h = activate(g, ACT)", "h = activate(u, ACT)"),
    Plant(
        "route-weight-of-row-0",
        "offset",
        "r = tl.load(route_ptr + safe, mask=valid, other=0.0)",
        "r = tl.load(route_ptr + safe * 0, mask=valid, other=0.0)",
    ),
    # the gather path (rows that end inside a block: down in the gpu_tiles cases, K = 160)
    Plant(
        "gather-k-loop-drops-partial-tile",
        "K-loop tail",
        "for k0 in range(0, K, BLOCK_K):\n            ks = k0 + tl.arange(0, BLOCK_K)\n"
        "            k_ok = ks < K\n            a = tl.load(\n                a_ptr + arow",
        "for k0 in range(0, K - BLOCK_K + 1, BLOCK_K):\n            ks = k0 + tl.arange(0, BLOCK_K)\n"
        "            k_ok = ks < K\n            a = tl.load(\n                a_ptr + arow",
    ),
    Plant(
        "gather-absmax-block-128",
        "absmax block",
        "blk = flat // 64",
        "blk = flat // 128",
    ),
)


class PlantDidNotApply(RuntimeError):
    """The kernel source changed under a plant: update the plant's `before` text to the new line."""


def planted(source: str, plant: Plant) -> str:
    """`source` with `plant` applied; raises `PlantDidNotApply` unless its text occurs exactly once."""
    found = source.count(plant.before)
    if found != 1:
        raise PlantDidNotApply(
            f"plant {plant.name!r} matches {found} places in {SOURCE} (must be exactly 1): update its text "
            "in engine/tools/kernel_mutations.py to the kernel as it is now"
        )
    return source.replace(plant.before, plant.after)


def _copy_project(dest: Path) -> None:
    for name in ("engine", "tests"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")


def run_tests(project: Path, timeout: float) -> tuple[int, str]:
    """(pytest's exit code, the last lines of its output) of the fast kernel tests in `project`."""
    env = {**os.environ, "PYTHONPATH": str(project), "TRITON_INTERPRET": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider", *TESTS]
    try:
        proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s"
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    return proc.returncode, "; ".join(lines[:1] + last)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.tools.kernel_mutations", description=__doc__)
    parser.add_argument(
        "--only", action="append", choices=[p.name for p in PLANTS], help="run only this plant"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds per plant (default 600)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="plants tested at once (default: the CPU count)"
    )
    args = parser.parse_args(argv)
    chosen = [p for p in PLANTS if not args.only or p.name in args.only]
    original = (ROOT / SOURCE).read_text(encoding="utf-8")
    for plant in chosen:
        planted(original, plant)  # every plant applies before any test runs
    holes = []

    def one(plant: Plant, tmp: Path) -> tuple[Plant, int, str, float]:
        project = tmp / plant.name
        _copy_project(project)
        (project / SOURCE).write_text(planted(original, plant), encoding="utf-8")
        t0 = time.monotonic()
        code, tail = run_tests(project, args.timeout)
        return plant, code, tail, time.monotonic() - t0

    with (
        tempfile.TemporaryDirectory(prefix="letterpress-mutants-") as tmp,
        ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool,
    ):
        for plant, code, tail, seconds in pool.map(lambda p: one(p, Path(tmp)), chosen):
            caught = code == 1  # tests ran and one failed (not a collection error, a crash or a timeout)
            verdict = "caught" if caught else ("MISSED" if code == 0 else f"ERROR (pytest exit {code})")
            print(f"{verdict:<8} {plant.name:<26} [{plant.kind}] {seconds:5.0f} s  {tail}", flush=True)
            if not caught:
                holes.append(plant.name)
    if holes:
        print(f"kernel_mutations: {len(holes)} of {len(chosen)} plants not caught: {', '.join(holes)}")
        return 1
    print(f"kernel_mutations: all {len(chosen)} plants caught by the fast kernel tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
