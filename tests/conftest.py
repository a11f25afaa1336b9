"""Shared test setup: Qt renders offscreen, so GUI tests run without a display; user folders are temporary."""

import inspect
import os
import re
import tempfile

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Settings, recovery files, recent files and logs of windows built by tests never touch the real home folder.
_user_dirs = tempfile.mkdtemp(prefix="letterpress-test-")
for _name in ("CONFIG", "DATA", "LOG"):
    os.environ.setdefault(f"LETTERPRESS_{_name}_DIR", os.path.join(_user_dirs, _name.lower()))


# --- the fast lane: `pytest -m "not slow"` ---------------------------------------------------------------
# A test is `slow` when it, a module helper it calls, or a fixture it uses (directly or through other
# fixtures) starts a subprocess, builds a tiny checkpoint or a real-shaped model, or loads the demo model.
# Marked here, automatically, so a new test cannot forget the marker; @pytest.mark.slow by hand still works.
SLOW_SIGNS = re.compile(
    r"\bsubprocess\b|\brun_engine\b|\bdemo_model_dir\b|\bdemo_window\b|letterpress-demo"  # processes, demo
    r"|\bmake_tiny\b|\btiny_checkpoint(_in)?\b"  # tiny checkpoints (tests/helpers/checkpoints.py)
    r"|\bSession\(|\brun_real_shape\b|\btiny_body_model\b|\btiny_config\("  # real models built in-process
    r"|\bsimulate\(|\breal_meta_model\b|\brun_step_memory\b|\btorch\.compile\("  # real shapes, compiling
    r"|from engine\.training\.train import [^\n]*\brun\b"  # a training run
)
# The same, for functions a test module imports at its top and calls by their bare name (`run(...)`).
SLOW_CALLS = {
    "engine.training.train.run",  # trains a model
    "engine.tools.memory_sim.simulate",  # the real 30-layer config on the meta device
    "engine.tools.memory_sim.real_meta_model",
    "engine.tools.bench.run_step_memory",  # denoising steps at a real-sized vocabulary
}
_slow_source_cache: dict[object, bool] = {}


def _qualified(obj: object) -> str:
    """`module.qualname` of a function or class ("" for anything else)."""
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return ""
    return f"{obj.__module__}.{obj.__qualname__}"


def _source_is_slow(obj: object, module: object, depth: int = 2) -> bool:
    """Whether `obj`'s source, or a function of `module` it names (`depth` hops), shows a slow sign."""
    key = (obj, depth)
    if key in _slow_source_cache:
        return _slow_source_cache[key]
    _slow_source_cache[key] = False  # recursion guard
    try:
        source = inspect.getsource(obj)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False
    slow = bool(SLOW_SIGNS.search(source))
    called = set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", source))
    if not slow and module is not None:
        slow = any(_qualified(getattr(module, name, None)) in SLOW_CALLS for name in called)
    if not slow and depth > 0 and module is not None:
        for name in called:
            helper = getattr(module, name, None)
            local = inspect.isfunction(helper) and helper.__module__ == getattr(module, "__name__", None)
            if local and helper is not obj and _source_is_slow(helper, module, depth - 1):
                slow = True
                break
    _slow_source_cache[key] = slow
    return slow


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        if item.get_closest_marker("slow") is not None or not isinstance(item, pytest.Function):
            continue
        module = item.module
        if _source_is_slow(item.function, module):
            item.add_marker(slow)
            continue
        for defs in item._fixtureinfo.name2fixturedefs.values():
            fixture = defs[-1].func
            if _source_is_slow(fixture, inspect.getmodule(fixture)):
                item.add_marker(slow)
                break
