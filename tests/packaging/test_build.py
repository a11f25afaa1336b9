"""Packaging: what goes into the bundle, the Linux installers' layout, and (slow) a real build that is
installed into a scratch root and proves itself with `letterpress --self-test`."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

from engine.resources import demo_model_dir
from tests.helpers.checkpoints import tiny_checkpoint, tiny_checkpoint_in

ROOT = Path(__file__).resolve().parents[2]
DEMO_MODEL = demo_model_dir()


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bundle = _load("letterpress_bundle", ROOT / "packaging" / "bundle.py")
linux = _load("letterpress_build_linux", ROOT / "installer" / "linux" / "build_linux.py")

needs_dpkg = pytest.mark.skipif(
    shutil.which("dpkg-deb") is None, reason="dpkg-deb (Debian package 'dpkg') missing"
)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), **extra)
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    return env


def _summary(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON summary on stdout:\n{stdout[-2000:]}"
    return json.loads(lines[-1])


# ------------------------------------------------------------------------------------------------------------
# The rules (fast)


def test_every_hidden_import_exists() -> None:
    """A renamed engine/app module must not silently fall out of the bundle."""
    for name in (*bundle.HIDDEN_IMPORT_MODULES, *bundle.HIDDEN_IMPORT_PACKAGES):
        assert importlib.util.find_spec(name) is not None, name
    for family in bundle.TRANSFORMERS_MODELS_KEPT:
        assert importlib.util.find_spec(f"transformers.models.{family}") is not None, family


def test_excludes_cover_unused_qt_and_model_families_but_not_what_runs() -> None:
    excluded = set(bundle.excludes())
    assert {
        "PySide6.QtWebEngineCore",
        "PySide6.Qt3DCore",
        "PySide6.QtQuick",
        "PySide6.QtMultimedia",
    } <= excluded
    assert {"tkinter", "pytest", "torchvision", "triton"} <= excluded
    assert "transformers.models.llama" in excluded
    for needed in (
        "transformers.models.diffusion_gemma",
        "transformers.models.gemma4",
        "transformers.models.auto",
        "PySide6.QtWidgets",
        "PySide6.QtGui",
        "PySide6.QtSvg",
        "unittest",
        "torch",
        "engine",
        "app",
    ):
        assert needed not in excluded


@pytest.mark.slow
def test_engine_and_app_run_with_every_excluded_module_hidden(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Hide every excluded module the way the frozen importer would (find_spec answers None), then load a tiny
    model with the real Session, run a draft, a rewrite and an infill and import every app module. An exclude
    that the running app needs fails here in seconds instead of in a five-minute build."""
    tiny = tiny_checkpoint(tmp_path_factory)
    script = f"""
import importlib, json, pkgutil, sys
AT_START = set(sys.modules)  # site's own (.pth) imports, not the app's
EXCLUDED = {sorted(bundle.excludes())!r}

def hidden(name):
    return any(name == x or name.startswith(x + ".") for x in EXCLUDED)

class Hide:
    def __init__(self, inner):
        self.inner = inner
    def find_spec(self, name, path=None, target=None):
        if hidden(name):
            return None
        find = getattr(self.inner, "find_spec", None)
        return find(name, path, target) if find else None
    def __getattr__(self, attr):
        return getattr(self.inner, attr)

sys.meta_path[:] = [Hide(f) for f in sys.meta_path]
import app
for info in pkgutil.walk_packages(app.__path__, "app."):
    importlib.import_module(info.name)
from engine.session import Session
from engine.api import DraftRequest, RewriteRequest, InfillRequest, DenoiseSettings
quick = DenoiseSettings(max_steps=2, seed=0)
s = Session()
s.load({str(tiny)!r}, device="cpu")
s.run(DraftRequest(before="Hello", max_new_tokens=8, settings=quick))
s.run(RewriteRequest(selection="a cat sat", instruction="Make it formal.", settings=quick))
s.run(InfillRequest(before="It was ", after=" of times.", middle_tokens=4, settings=quick))
print(json.dumps(sorted(m for m in sys.modules if hidden(m) and m not in AT_START)))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_data_filter_drops_headers_tests_and_pickles_keeps_libraries() -> None:
    for dropped in (
        "torch/include/ATen/ATen.h",
        "torch/test/Dict_test",
        "torch/bin/protoc",
        "torch/bin/TCPStoreTest",
        "torch/lib/libfoo.a",
        "resources/models/x/training_args.bin",
        "resources/models/x/optimizer.pt",
        "foo/bar.pkl",
        "numpy/_core/tests/data/x.csv",
        "PySide6/Qt/qml/QtQuick/qmldir",
    ):
        assert not bundle.keep_data(dropped), dropped
    for kept in (
        "torch/lib/libtorch_cpu.so",
        "torch/bin/torch_shm_manager",
        "resources/models/x/model.safetensors",
        "resources/icons/letterpress.svg",
        "transformers/models/auto/__init__.py",
        "PySide6/Qt/plugins/platforms/libqoffscreen.so",
    ):
        assert bundle.keep_data(kept), kept


def test_bitsandbytes_gpu_libraries_follow_the_torch_build() -> None:
    cuda_lib, cpu_lib = "bitsandbytes/libbitsandbytes_cuda126.so", "bitsandbytes/libbitsandbytes_cpu.so"
    assert bundle.keep_binary(cpu_lib, torch_cuda=None)
    assert not bundle.keep_binary(cuda_lib, torch_cuda=None)
    assert bundle.keep_binary(cuda_lib, torch_cuda="12.6")
    assert not bundle.keep_binary("bitsandbytes/libbitsandbytes_rocm64.so", torch_cuda="12.6")
    assert not bundle.keep_binary("bitsandbytes/libbitsandbytes_xpu2025.so", torch_cuda="12.6")
    assert bundle.keep_binary("torch/lib/libtorch_cpu.so", torch_cuda=None)


def test_resources_ship_the_model_weights_but_never_pickles(tmp_path: Path) -> None:
    res = tmp_path / "resources"
    model = res / "models" / "letterpress-demo"
    model.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "training_args.bin", "optimizer.pt"):
        (model / name).write_bytes(b"x")
    (res / "icons").mkdir()
    (res / "icons" / "letterpress.png").write_bytes(b"x")
    (model / "__pycache__").mkdir()
    (model / "__pycache__" / "x.pyc").write_bytes(b"x")
    shipped = {Path(src).name: dest for src, dest in bundle.resource_datas(res)}
    assert shipped == {
        "config.json": "resources/models/letterpress-demo",
        "model.safetensors": "resources/models/letterpress-demo",
        "tokenizer.json": "resources/models/letterpress-demo",
        "letterpress.png": "resources/icons",
    }


def test_the_real_resources_contain_no_pickles() -> None:
    assert not [src for src, _dest in bundle.resource_datas() if bundle.is_pickle_file(src)]
    names = {Path(src).name for src, _dest in bundle.resource_datas()}
    assert {"letterpress.svg", "letterpress-256.png", "letterpress.ico", "letterpress.icns"} <= names


def test_audit_refuses_pickles_excluded_qt_and_torch_test_trees(tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    (clean / "_internal" / "torch" / "lib").mkdir(parents=True)
    (clean / "_internal" / "torch" / "lib" / "libtorch_cpu.so").write_bytes(b"\x7fELF")
    (clean / "letterpress").write_bytes(b"\x7fELF")
    assert bundle.audit_bundle(clean) == []

    dirty = tmp_path / "dirty"
    shutil.copytree(clean, dirty)
    internal = dirty / "_internal"
    (internal / "weights.pt").write_bytes(b"x")
    (internal / "PySide6" / "Qt" / "lib").mkdir(parents=True)
    (internal / "PySide6" / "Qt" / "lib" / "libQt6WebEngineCore.so.6").write_bytes(b"x")
    (internal / "torch" / "include").mkdir()
    problems = "\n".join(bundle.audit_bundle(dirty))
    assert "weights.pt" in problems and "WebEngine" in problems and "torch/include" in problems


def test_offline_runtime_hook_overrides_the_users_environment() -> None:
    hook = ROOT / "packaging" / "rthooks" / "offline.py"
    code = (
        f"exec(open({str(hook)!r}).read()); import os; "
        "print(os.environ['HF_HUB_OFFLINE'], 'HF_ENDPOINT' in os.environ)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, HF_HUB_OFFLINE="0", HF_ENDPOINT="https://example.invalid"),
    )
    assert out.stdout.split() == ["1", "False"]


# ------------------------------------------------------------------------------------------------------------
# Linux installers from a stand-in bundle (fast)


def _fake_bundle(path: Path) -> Path:
    (path / "_internal").mkdir(parents=True)
    exe = path / "letterpress"
    exe.write_text('#!/bin/sh\necho \'{"ok": true, "args": "\'"$*"\'"}\'\n')
    exe.chmod(0o755)
    (path / "_internal" / "data.txt").write_text("payload")
    return path


@needs_dpkg
def test_deb_installs_bundle_launcher_desktop_entry_and_icons(tmp_path: Path) -> None:
    deb = linux.build_deb(
        _fake_bundle(tmp_path / "letterpress"), tmp_path / "out", "1.2.3", compression="gzip"
    )
    assert deb.name.startswith("letterpress_1.2.3_")
    fields = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "Package: letterpress" in fields and "Version: 1.2.3" in fields and "libxcb-cursor0" in fields
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    assert (root / "opt/letterpress/_internal/data.txt").read_text() == "payload"
    assert os.access(root / "opt/letterpress/letterpress", os.X_OK)
    launcher = (root / "usr/bin/letterpress").read_text()
    assert "exec /opt/letterpress/letterpress" in launcher and os.access(
        root / "usr/bin/letterpress", os.X_OK
    )
    desktop = (root / "usr/share/applications/letterpress.desktop").read_text()
    assert "Exec=/usr/bin/letterpress %F" in desktop and "Icon=letterpress" in desktop and "@" not in desktop
    for size in (16, 32, 48, 128, 256, 512):
        assert (root / f"usr/share/icons/hicolor/{size}x{size}/apps/letterpress.png").is_file()
    assert (root / "usr/share/icons/hicolor/scalable/apps/letterpress.svg").is_file()
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert all(" root/root " in line for line in listing.splitlines())
    if shutil.which("desktop-file-validate"):
        subprocess.run(
            ["desktop-file-validate", str(root / "usr/share/applications/letterpress.desktop")], check=True
        )


def test_tarball_carries_the_bundle_and_the_same_desktop_files(tmp_path: Path) -> None:
    tgz = linux.build_tarball(
        _fake_bundle(tmp_path / "letterpress"), tmp_path / "out", "1.2.3", arch="x86_64"
    )
    assert tgz.name == "letterpress-1.2.3-linux-x86_64.tar.gz"
    with tarfile.open(tgz) as tar:
        names = set(tar.getnames())
        tar.extractall(tmp_path / "x", filter="data")
    top = "letterpress-1.2.3-linux-x86_64"
    assert {
        f"{top}/letterpress",
        f"{top}/install-user.sh",
        f"{top}/share/applications/letterpress.desktop.in",
        f"{top}/share/icons/hicolor/256x256/apps/letterpress.png",
    } <= names
    unpacked = tmp_path / "x" / top
    home = tmp_path / "home"
    subprocess.run(
        ["sh", str(unpacked / "install-user.sh")],
        check=True,
        capture_output=True,
        env=dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / "share")),
    )
    entry = (home / "share/applications/letterpress.desktop").read_text()
    assert f"Exec={unpacked}/letterpress %F" in entry
    assert (home / "share/icons/hicolor/48x48/apps/letterpress.png").is_file()
    assert os.path.realpath(home / ".local/bin/letterpress") == str(unpacked / "letterpress")


# ------------------------------------------------------------------------------------------------------------
# The real build (slow): build.py -> .deb -> dpkg-deb -x into a scratch root -> installed --self-test


def _self_test_model(tmp_path: Path) -> list[str]:
    """The installed bundle's own demo model when it ships one; otherwise a tiny checkpoint made here."""
    if DEMO_MODEL.is_dir():
        return []
    tiny = tiny_checkpoint_in(tmp_path / "tiny")
    return ["--model", str(tiny)]


def _without_network(cmd: list[str]) -> list[str]:
    """Run in a fresh network namespace (no interfaces at all) where the kernel allows it."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0:
        return [unshare, "-rn", *cmd]
    return cmd


@pytest.mark.slow
@needs_dpkg
@pytest.mark.skipif(importlib.util.find_spec("PyInstaller") is None, reason="pip install -e '.[packaging]'")
def test_built_deb_installs_and_passes_its_self_test() -> None:
    # Not pytest's tmp_path: on a shared machine another pytest run may prune old tmp_path folders while the
    # installed app is still running from one.
    with tempfile.TemporaryDirectory(prefix="letterpress-build-test-") as tmp:
        _build_install_and_self_test(Path(tmp))


def _build_install_and_self_test(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "packaging/build.py", "--dist", str(dist), "--fast-compression"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-5000:]
    info = json.loads((dist / "build-info.json").read_text())
    debs = list(dist.glob("letterpress_*.deb"))
    assert len(debs) == 1 and list(dist.glob("letterpress-*-linux-*.tar.gz"))
    assert bundle.audit_bundle(dist / "letterpress") == []
    assert info["bundle_bytes"] > 0

    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(root)], check=True)
    shutil.rmtree(dist / "letterpress")  # the installed copy must work on its own
    installed = root / "opt" / "letterpress" / "letterpress"
    cmd = _without_network([str(installed), "--self-test", "--timeout", "300", *_self_test_model(tmp_path)])
    env = _env()
    env.pop("PYTHONPATH")  # nothing from the checkout or the venv may leak into the frozen app
    env["PATH"] = "/usr/bin:/bin"
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=420)
    summary = _summary(run.stdout)
    assert run.returncode == 0 and summary["ok"], (summary, run.stderr[-4000:])
    assert summary["frozen"] is True
    assert summary["network_attempts"] == []
    assert set(summary["tasks"]) == {"draft", "rewrite", "infill"}
    assert all(task["changed"] for task in summary["tasks"].values())
