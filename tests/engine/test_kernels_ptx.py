"""The NF4 kernel's inner loop, read in its compiled PTX (sm_80 and sm_89 at least, Triton compiling for the
target on the CPU): at most one global read instruction per 16 bytes of weights, so the codes come in 128-bit
vectors and nothing else of the stack (scales, tables) is read per K step.

How it is counted (`engine.kernels.compile_check.loop_loads`): the innermost loop that LLVM marks in the PTX
(the label "This Inner Loop Header" to its last branch back), every `ld.global*` and `cp.async ... .global` in
it, split by where its address comes from: a weight read derives from the stack's arguments (qweight, absmax,
absmax2, offset, code2, lut), the rest are the activations. The budget holds the weight reads: instructions x
16 <= the bytes they bring. The gather kernel this replaced read 338 times per K step on sm_89 (128 single
bytes of codes, 202 words of scales and table entries, 8 of activations) for its 32 code bytes.

The fp32 variants (an fp32 model: the CPU's dtype; on CUDA a quantized model computes in bf16,
`engine.weights.loader`) need 8 warps (gate_up also N tiles of 32) not to spill, which cuts a thread's share
of a block's codes to 4-8 bytes: they are compiled and reported, and held to one read per 4 weight bytes (no
scale or table entry read per K step).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
TARGETS = (80, 89, 90, 120)


@pytest.fixture(scope="module")
def loads() -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "engine.kernels.compile_check", "--loads", *map(str, TARGETS)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_every_nf4_variant_is_compiled_for_every_target(loads) -> None:
    labels = {row["label"] for row in loads}
    assert labels == {
        "nf4 gate_up bf16",
        "nf4 down bf16",
        "nf4 linear bf16",
        "nf4 gate_up fp32",
        "nf4 down fp32",
    }
    assert {row["capability"] for row in loads} == set(TARGETS)
    for row in loads:
        assert row["built"], row
        assert len(row["loops"]) == 1, row  # one innermost loop reads weights: the K loop


def test_the_bf16_inner_loop_reads_at_most_once_per_16_weight_bytes(loads) -> None:
    for row in loads:
        if "bf16" not in row["label"]:
            continue
        loop = row["loops"][0]
        assert loop["weight_loads"] * 16 <= loop["weight_bytes"], row
        assert set(loop["kinds"]) == {"ld.global.v4.b32"}, row  # codes and activations: 128-bit loads only


def test_the_fp32_inner_loop_reads_no_scale_or_table_entry(loads) -> None:
    for row in loads:
        if "fp32" not in row["label"]:
            continue
        loop = row["loops"][0]
        assert loop["weight_loads"] * 4 <= loop["weight_bytes"], row
