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


def _run(code: str, tmp_path: Path) -> dict:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    for name in ("CONFIG", "DATA", "LOG"):
        env[f"LETTERPRESS_{name}_DIR"] = str(tmp_path / name.lower())
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_every_app_module_and_running_the_fake_window_never_loads_torch(tmp_path):
    code = """
import importlib, json, pkgutil, sys, time
import app
names = [m.name for m in pkgutil.iter_modules(app.__path__, "app.") if m.name != "app.__main__"]
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
window.actionDraft.trigger()
while window.editor.property("ghostState") != "ready" and time.time() < end:
    qapp.processEvents()
state = window.editor.property("ghostState")
window.close()
print(json.dumps({"state": state, "modules": names,
                  "heavy": sorted(m for m in sys.modules if m.split(".")[0] in %r)}))
""" % (sorted(HEAVY),)
    report = _run(code, tmp_path)
    assert report["state"] == "ready"
    assert "app.assist" in report["modules"] and "app.engine_host" in report["modules"]
    assert report["heavy"] == []


def test_importing_engine_modules_never_loads_qt(tmp_path):
    code = """
import importlib, json, pkgutil, sys
import engine
names = [m.name for m in pkgutil.iter_modules(engine.__path__, "engine.") if m.name != "engine.__main__"]
for name in names:
    importlib.import_module(name)
print(json.dumps({"modules": names, "qt": sorted(m for m in sys.modules if m.split(".")[0] in %r)}))
""" % (sorted(QT),)
    report = _run(code, tmp_path)
    assert "engine.fake" in report["modules"]
    assert report["qt"] == []


def test_the_installed_qt_binding_is_not_a_known_broken_release():
    from app import qt_binding_problem

    assert qt_binding_problem() == ""
