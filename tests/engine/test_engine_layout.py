"""The engine's shape: no import circle between its modules, and one planning stage per request."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine import budget, prompts
from engine.api import DenoiseSettings, DraftRequest, InfillRequest, RewriteRequest

ROOT = Path(__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _engine_graph() -> dict[str, set[str]]:
    """Module -> the engine modules it imports, anywhere in it (a lazy import inside a function counts: it is
    a circle all the same, only hidden)."""
    files = {_module_name(p): p for p in (ROOT / "engine").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                    ).strip(".")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            deps |= {t for t in targets if t in files and t != name and not name.startswith(f"{t}.")}
        graph[name] = deps - {"engine"}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], dict.fromkeys(graph, 0)  # 0 unseen, 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state[dep] == 1:
                found.append([*stack[stack.index(dep) :], dep])
            elif state[dep] == 0:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if state[node] == 0:
            visit(node)
    return found


def test_the_engine_has_no_import_circle() -> None:
    graph = _engine_graph()
    assert "engine.sampling" in graph["engine.denoise"] and "engine.sampling" in graph["engine.lean_step"]
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_loop_keeps_no_test_only_or_dead_kernels() -> None:
    import engine.denoise as denoise_module
    import engine.sampling as sampling_module

    for name in ("_pinned_logits", "sample_one", "sample_with", "_draw_step"):
        assert not hasattr(denoise_module, name) and not hasattr(sampling_module, name), name


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls = [0]
    real: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize(
    "request_",
    [
        RewriteRequest(
            "The boats rested on the grey water.",
            "Make it vivid.",
            before="The harbour was quiet.",
            after=" Night fell.",
            settings=DenoiseSettings(candidates=2, seed=1, max_steps=2),
        ),
        DraftRequest(
            "It was the best of times",
            max_new_tokens=16,
            settings=DenoiseSettings(candidates=3, seed=2, max_steps=2),
        ),
        InfillRequest(
            "The harbour was",
            " and the boats rested.",
            middle_tokens=6,
            settings=DenoiseSettings(candidates=2, seed=3, max_steps=2),
        ),
    ],
    ids=["rewrite", "draft", "infill"],
)
def test_a_request_renders_its_template_once_and_plans_memory_once(session, monkeypatch, request_) -> None:
    renders = _counting(monkeypatch, prompts, "chat_ids")
    plans = _counting(monkeypatch, budget, "plan_request")
    result = session.run(request_)
    assert result.candidates
    assert (renders[0], plans[0]) == (1, 1)


def test_the_plan_is_what_ran_and_its_rows_share_one_prompt(session) -> None:
    request = DraftRequest(
        "It was the best of times",
        max_new_tokens=16,
        settings=DenoiseSettings(candidates=3, seed=4, max_steps=2),
    )
    session.run(request)
    plan = session.last_request_plan
    assert plan is not None and plan.request is request and plan.memory is session.last_plan
    ids = plan.prompt_ids("cpu")
    assert (
        ids.shape == (3, len(plan.prompt.ids)) and ids.stride(0) == 0
    )  # one row, seen three times, not copied
    assert session.last_output.sequences.shape[0] == plan.rows
    assert session.last_output.prompt_length == len(plan.prompt.ids)


def test_planning_alone_runs_nothing_and_says_what_would_run(session) -> None:
    request = RewriteRequest("The boats rested.", "Shorter.", settings=DenoiseSettings(candidates=2, seed=5))
    before = session.last_output
    plan = session.plan(request)
    assert session.last_output is before  # nothing was denoised
    assert plan.rows == 2 and plan.frozen is None and plan.max_new_tokens >= session.info.canvas_length
    assert session.run(request).stats.prompt_tokens == len(plan.prompt.ids)
