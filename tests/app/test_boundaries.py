"""The layering rules: `app/` never imports torch (not even transitively), `engine/` never imports Qt."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "transformers", "bitsandbytes", "accelerate", "safetensors"}
QT = {"PySide6", "PyQt5", "PyQt6", "PySide2", "shiboken6", "qasync", "pytestqt"}


def imported_roots(path: Path, *, top_level_only: bool) -> set[str]:
    """Root package names imported by a module (at import time only, when `top_level_only`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    roots: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_app_modules_do_not_import_torch_at_module_level():
    offenders = {
        str(p.relative_to(ROOT)): sorted(imported_roots(p, top_level_only=True) & HEAVY)
        for p in (ROOT / "app").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_engine_never_imports_qt_anywhere():
    offenders = {
        str(p.relative_to(ROOT)): sorted(imported_roots(p, top_level_only=False) & QT)
        for p in (ROOT / "engine").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


RUNTIME_PATH = (
    "api",
    "prompts",
    "plan",
    "infill",
    "canvas",
    "prefix_cache",
    "denoise",
    "sampling",
    "fastpath",
    "display",
    "session",
    "threads",
    "fake",
    "__main__",
    "lean_step",
    "budget",
    "special_tokens",
)
ROOMS = ("weights", "kernels", "tools", "training", "remote")
RUNTIME_PATH += ("resources",)  # where the shipped resources/ live (the app asks the engine)
RUNTIME_PATH += (
    "declared",
    "env",
    "attention",  # exact grouped-query attention for the 512-dim layers (installed by the session's load)
    "self_conditioning",  # the chunked self-conditioning hand-off
    "lengths",  # the rewrite length window (torch-free; the text tier shares it)
)  # a checkpoint's declared steps (torch-free); environment values, validated


def engine_imports(path: Path) -> set[str]:
    """Every `engine...` module a file imports, anywhere in it (lazy imports count), relative ones
    resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "engine"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] == "engine":
                found.add(base)
                found |= {f"{base}.{a.name}" for a in node.names}
    return found


def test_the_engine_rooms_are_the_documented_ones():
    top = {p.stem for p in (ROOT / "engine").glob("*.py")} - {"__init__"}
    packages = {p.name for p in (ROOT / "engine").iterdir() if (p / "__init__.py").is_file()}
    assert top == set(RUNTIME_PATH)
    assert packages == set(ROOMS)
    for room in ("", *ROOMS):
        doc = ast.get_docstring(
            ast.parse((ROOT / "engine" / room / "__init__.py").read_text(encoding="utf-8"))
        )
        assert doc and "import" in doc, f"engine/{room} says what it is for and what it may import"


def test_the_runtime_path_imports_nothing_from_tools_or_training():
    offenders = {}
    for name in RUNTIME_PATH:
        bad = {
            m
            for m in engine_imports(ROOT / "engine" / f"{name}.py")
            if m.startswith(("engine.tools", "engine.training"))
        }
        if name == "__main__":
            bad = set()  # the command line dispatches to the tools (lazily, by name), by design
        if bad:
            offenders[name] = sorted(bad)
    for path in [*(ROOT / "engine" / "weights").rglob("*.py"), *(ROOT / "engine" / "kernels").rglob("*.py")]:
        bad = {m for m in engine_imports(path) if m.startswith(("engine.tools", "engine.training"))}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


def test_weights_import_no_cycle_and_only_the_api_from_outside():
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "engine" / "weights").glob("*.py"):
        name = f"engine.weights.{path.stem}"
        deps = engine_imports(path)
        outside = {m for m in deps if not m.startswith(("engine.weights", "engine.api"))}
        assert outside <= {"engine"}, f"{name} imports {sorted(outside)}"
        graph[name] = {m for m in deps if m in {f"engine.weights.{p.stem}" for p in path.parent.glob("*.py")}}
        graph[name].discard(name)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False

    cycles = sorted(n for n in graph if reaches(n, n, set()))
    assert cycles == []


def _run(code: str, tmp_path: Path) -> dict:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    for name in ("CONFIG", "DATA", "LOG"):
        env[f"LETTERPRESS_{name}_DIR"] = str(tmp_path / name.lower())
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_every_app_module_and_running_the_fake_window_never_loads_torch(tmp_path):
    code = f"""
import importlib, json, pkgutil, sys, time
import app
names = [m.name for m in pkgutil.walk_packages(app.__path__, "app.") if m.name != "app.__main__"]
for name in names:
    importlib.import_module(name)
import app.__main__
from PySide6.QtWidgets import QApplication
qapp = QApplication.instance() or QApplication([])
window = app.create_window(["--fake-engine", "steps=3,delay=0"])
end = time.time() + 20
while window.model_state != "ready" and time.time() < end:
    qapp.processEvents()
window.editor.setPlainText("Hello")
from PySide6.QtGui import QTextCursor
window.editor.moveCursor(QTextCursor.MoveOperation.End)  # a draft continues the text before the cursor
window.actionDraft.trigger()
while window.editor.property("ghostState") != "ready" and time.time() < end:
    qapp.processEvents()
state = window.editor.property("ghostState")
window.close()
print(json.dumps({{"state": state, "modules": names,
                  "heavy": sorted(m for m in sys.modules if m.split(".")[0] in {sorted(HEAVY)!r})}}))
"""
    report = _run(code, tmp_path)
    assert report["state"] == "ready"
    assert "app.assist.controller" in report["modules"] and "app.assist.engine_host" in report["modules"]
    assert report["heavy"] == []


def test_importing_engine_modules_never_loads_qt(tmp_path):
    code = f"""
import importlib, json, pkgutil, sys
import engine
names = [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")
         if not m.name.endswith("__main__") and not m.name.startswith("engine.training")]
for name in names:
    importlib.import_module(name)
qt = sorted(m for m in sys.modules if m.split(".")[0] in {sorted(QT)!r})
print(json.dumps({{"modules": names, "qt": qt}}))
"""
    report = _run(code, tmp_path)
    assert {"engine.fake", "engine.weights.loader", "engine.tools.bench"} <= set(report["modules"])
    assert report["qt"] == []


def test_the_installed_qt_binding_is_not_a_known_broken_release():
    from app import qt_binding_problem

    assert qt_binding_problem() == ""


# ------------------------------------------------------------------------------------------------------------
# The app's layers and import circles (the contracts live in pyproject.toml's [tool.importlinter])


def import_cycles(package: str) -> list[list[str]]:
    """The groups of `package`'s modules that import each other in a circle (lazy imports count)."""
    import grimp

    graph = grimp.build_graph(package, cache_dir=None)
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in modules:
        if module not in index:
            visit(module)
    return sorted(cycles)


def test_the_app_has_no_import_circle():
    assert import_cycles("app") == []


def test_the_engine_has_no_import_circle():
    assert import_cycles("engine") == []


def test_the_app_packages_are_the_documented_layers():
    packages = {p.name for p in (ROOT / "app").iterdir() if (p / "__init__.py").is_file()}
    assert packages == {"platform", "config", "ui", "documents", "assist"}
    assert {p.stem for p in (ROOT / "app").glob("*.py")} == {
        "__init__",
        "__main__",
        "selftest",
        "integration",
        "main_window",
    }
    for name in packages:
        doc = ast.get_docstring(ast.parse((ROOT / "app" / name / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "import" in doc.lower(), f"app/{name} says what it is for and what it may import"


def test_the_import_contracts_hold():
    """pyproject.toml's import-linter contracts: app layers only import downward, engine never imports the app
    or Qt, the app never imports torch or transformers itself."""
    lint = Path(sys.executable).with_name("lint-imports")
    command = (
        [str(lint)]
        if lint.is_file()
        else [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
        ]
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [*command, "--no-cache"], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout
