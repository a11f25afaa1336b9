"""The first-token benchmark (tests/remote/bench_text_stream.py) runs and measures what it says: a figure per
round from the stub's first piece to the window's ghost text. No timing is asserted (benchmarks print)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def test_the_first_token_benchmark_measures_each_round(qtbot):
    path = Path(__file__).with_name("bench_text_stream.py")
    spec = importlib.util.spec_from_file_location("bench_text_stream", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    figures = bench.bench(rounds=2)
    assert len(figures["first_piece_to_ghost_ms"]) == 2 and figures["target_ms"] == 50
    print(figures)
