"""`python -m engine inspect`: the report a user runs to see where the memory goes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _inspect(model: Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    code = (
        "import sys; from engine.tools.inspect_report import "
        "main_inspect; sys.exit(main_inspect(sys.argv[1:]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, "--model", str(model), "--device", "cpu", "--json", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "2", **(env or {})},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def test_inspect_reports_counts_bytes_and_fits(tiny_dir: Path, tmp_path: Path) -> None:
    report = _inspect(tiny_dir, "--quantize", "nf4", env={"LETTERPRESS_CACHE_DIR": str(tmp_path)})
    assert report["quantization"] == "nf4"
    assert report["fourbit_fraction"] == 1.0
    kinds = report["params_by_kind"]
    assert set(kinds) == {"experts", "linear", "embedding", "other"} and all(v > 0 for v in kinds.values())
    assert "nf4" in report["bytes_by_dtype"] and report["resident_bytes"] == sum(
        report["bytes_by_dtype"].values()
    )
    assert any(f["device"] == "cpu" and f["verdict"] == "fits" for f in report["fits"])
    full = _inspect(tiny_dir, "--quantize", "none")
    assert full["fourbit_fraction"] == 0.0 and "nf4" not in full["bytes_by_dtype"]
    assert sum(full["params_by_kind"].values()) == sum(kinds.values())


def test_inspect_reports_errors_as_json(tmp_path: Path) -> None:
    code = (
        "import sys; from engine.tools.inspect_report import "
        "main_inspect; sys.exit(main_inspect(sys.argv[1:]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, "--model", str(tmp_path / "nope"), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2 and json.loads(run.stdout)["error"] == "model_not_found"


@pytest.mark.slow
def test_real_shape_layer_is_under_30_percent_of_bf16_and_loads_within_1_5x(tmp_path: Path) -> None:
    """One layer with the exact 26B-A4B shapes (128 experts of 704, hidden 2816), vocabulary 4096."""
    from engine.tools.real_shape import make_real_shape

    model = make_real_shape(tmp_path / "real1", layers=1, vocab_size=4096)
    report = _inspect(model, "--quantize", "nf4", "--no-cache")
    print(
        json.dumps(
            {k: report[k] for k in ("resident_bytes", "quantized_ratio", "peak_load_bytes", "load_seconds")}
        )
    )
    assert report["fourbit_fraction"] == 1.0
    assert report["quantized_ratio"] <= 0.30
    assert report["peak_load_bytes"] < 1.5 * report["resident_bytes"]
