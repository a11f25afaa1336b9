"""No class in app/ or engine/ grows past 400 lines (issue 35, "the house"): a class that does several jobs is
split by job, a helper class or module per job, before it gets there. Measured as the class statement's
lines, decorators excluded (`end_lineno - lineno + 1`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_CLASS_LINES = 400


def test_no_class_is_over_400_lines() -> None:
    big = []
    for top in ("app", "engine"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                    size = node.end_lineno - node.lineno + 1
                    if size > MAX_CLASS_LINES:
                        big.append(f"{path.relative_to(ROOT).as_posix()}:{node.name} ({size} lines)")
    assert not big, f"classes over {MAX_CLASS_LINES} lines, split them by job: {big}"
