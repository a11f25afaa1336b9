"""What goes into the one-folder bundle and what must never be in it: shared by the spec, build.py and tests.

Kept free of PyInstaller imports so tests can check the rules without building. This folder is not a Python
package on purpose (a top-level `packaging` package would shadow the PyPI `packaging` that PyInstaller and
transformers import); load this file by path, as `load_bundle_module()` in build.py does.
"""

from __future__ import annotations

import importlib.util
import os
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
APP_NAME = "letterpress"  # executable, bundle folder, .deb package and launcher name
DISPLAY_NAME = "Letterpress"
BUNDLE_ID = "org.letterpress.Letterpress"
RESOURCES = ROOT / "resources"

# Files that can run code when loaded (pickle) or that are weights in a pickle format: never shipped.
PICKLE_SUFFIXES = frozenset({".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib"})

# Qt modules the app never uses. PyInstaller only collects imported modules; this stops a stray transitive
# import from dragging in a 100 MB web engine or the QML runtime.
QT_EXCLUDES = tuple(
    f"PySide6.{m}"
    for m in (
        "QtWebEngineCore",
        "QtWebEngineWidgets",
        "QtWebEngineQuick",
        "QtWebChannel",
        "QtWebSockets",
        "QtWebView",
        "Qt3DCore",
        "Qt3DRender",
        "Qt3DInput",
        "Qt3DLogic",
        "Qt3DAnimation",
        "Qt3DExtras",
        "QtQml",
        "QtQuick",
        "QtQuick3D",
        "QtQuickControls2",
        "QtQuickWidgets",
        "QtQuickTest",
        "QtMultimedia",
        "QtMultimediaWidgets",
        "QtSpatialAudio",
        "QtTextToSpeech",
        "QtCharts",
        "QtDataVisualization",
        "QtGraphs",
        "QtGraphsWidgets",
        "QtPdf",
        "QtPdfWidgets",
        "QtDesigner",
        "QtHelp",
        "QtUiTools",
        "QtSql",
        "QtTest",
        "QtBluetooth",
        "QtNfc",
        "QtPositioning",
        "QtLocation",
        "QtSensors",
        "QtSerialPort",
        "QtSerialBus",
        "QtRemoteObjects",
        "QtScxml",
        "QtStateMachine",
        "QtHttpServer",
        "QtNetworkAuth",
        "QtOpenGLWidgets",
        "QtLabsStyleKit",
    )
)

# Python packages the app never imports at run time (test tools, build tools, GUI toolkits, unused ML stacks).
# `unittest` stays: torch imports it at run time. PIL stays out: transformers only uses it for images.
PY_EXCLUDES = (
    "tkinter",
    "_tkinter",
    "turtle",
    "turtledemo",
    "idlelib",
    "lib2to3",
    "test",
    "pydoc_data",
    "pytest",
    "_pytest",
    "pytestqt",
    "hypothesis",
    "PyInstaller",
    "pip",
    "setuptools",
    "_distutils_hack",
    "IPython",
    "jupyter",
    "notebook",
    "matplotlib",
    "pandas",
    "scipy",
    "sklearn",
    "tensorflow",
    "keras",
    "jax",
    "flax",
    "onnx",
    "onnxruntime",
    "tensorboard",
    "torchvision",
    "torchaudio",
    "triton",
    "PIL",
    "hf_xet",  # the hub's download accelerator: Letterpress never downloads
    "torch.utils.tensorboard",
    "torch.utils.benchmark",
    "torch.utils.bottleneck",
    "transformers.commands",
    "transformers.cli",
    "transformers.pipelines",
    "transformers.trainer",
    "transformers.data",
    "transformers.onnx",
    "transformers.kernels",
    "transformers.benchmark",
    "huggingface_hub.cli",
    "huggingface_hub.commands",
)

# The transformers model families Letterpress runs: DiffusionGemma, the Gemma 4 configs/tokenizer it builds
# on, and the auto classes. Every other `transformers.models.*` (hundreds of families, ~100 MB of source) is
# excluded.
TRANSFORMERS_MODELS_KEPT = ("auto", "diffusion_gemma", "gemma", "gemma4", "encoder_decoder")

# Packages whose submodules are imported lazily (inside functions or through transformers' lazy module), so
# the analysis cannot see them: name them.
HIDDEN_IMPORT_PACKAGES = ("engine", "app")
HIDDEN_IMPORT_MODULES = ("engine.session", "bitsandbytes", "qasync", "platformdirs", "safetensors.torch")

# Data trees shipped inside wheels that the running app never reads (C++ headers and test binaries of torch,
# CMake files, static libraries, type stubs).
_DROP_DATA_PREFIXES = (
    "torch/test/",
    "torch/bin/",
    "torch/include/",
    "torch/share/",
    "torch/utils/model_dump/",
    "caffe2/",
    "torchgen/packaged/",
    "PySide6/Qt/qml/",
    "PySide6/Qt/translations/qtwebengine",
    "PySide6/include/",
    "PySide6/typesystems/",
    "PySide6/glue/",
    "PySide6/scripts/",
)
_DROP_DATA_SUFFIXES = (".a", ".lib", ".h", ".hpp", ".cuh", ".pyi", ".cmake", ".pc")
# ... except what `import torch` checks for: it refuses to start without its shared-memory manager.
_KEEP_ALWAYS = ("torch/bin/torch_shm_manager", "torch/bin/torch_shm_manager.exe")
_DROP_DATA_DIRS = ("__pycache__", "tests")


def project_version() -> str:
    """The version in pyproject.toml: one number for the bundle, the .deb, the .iss and the .app."""
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def transformers_model_excludes() -> list[str]:
    """`transformers.models.<family>` for every family Letterpress does not run."""
    spec = importlib.util.find_spec("transformers.models")
    if spec is None or not spec.submodule_search_locations:
        return []
    models_dir = Path(next(iter(spec.submodule_search_locations)))
    return sorted(
        f"transformers.models.{p.name}"
        for p in models_dir.iterdir()
        if p.is_dir() and (p / "__init__.py").is_file() and p.name not in TRANSFORMERS_MODELS_KEPT
    )


def excludes() -> list[str]:
    return [*QT_EXCLUDES, *PY_EXCLUDES, *transformers_model_excludes()]


def is_pickle_file(path: str | os.PathLike[str]) -> bool:
    return PurePosixPath(str(path).replace("\\", "/")).suffix.lower() in PICKLE_SUFFIXES


def keep_data(dest: str) -> bool:
    """Whether a data file (by its path inside the bundle) is worth shipping."""
    dest = dest.replace("\\", "/")
    if dest in _KEEP_ALWAYS:
        return True
    if is_pickle_file(dest):
        return False
    if dest.startswith(_DROP_DATA_PREFIXES) or dest.endswith(_DROP_DATA_SUFFIXES):
        return False
    return not any(f"/{d}/" in f"/{dest}" for d in _DROP_DATA_DIRS)


def keep_binary(dest: str, *, torch_cuda: str | None, torch_hip: str | None = None) -> bool:
    """Drop the GPU back ends of bitsandbytes this torch cannot use (about 100 MB on a CPU build).

    bitsandbytes picks `libbitsandbytes_cuda<XY>` from `torch.version.cuda`; a CUDA build keeps every CUDA
    variant (the user's driver decides which runs), a CPU build keeps only the CPU library.
    """
    name = PurePosixPath(dest.replace("\\", "/")).name
    if not name.startswith("libbitsandbytes_"):
        dest = dest.replace("\\", "/")
        return dest in _KEEP_ALWAYS or not dest.startswith(_DROP_DATA_PREFIXES)
    variant = name.removeprefix("libbitsandbytes_").split(".")[0]
    if variant.startswith("cpu"):
        return True
    if variant.startswith("cuda"):
        return torch_cuda is not None
    if variant.startswith("rocm"):
        return torch_hip is not None
    return False  # xpu and other back ends Letterpress does not support


def resource_datas(resources: Path = RESOURCES) -> list[tuple[str, str]]:
    """`(source file, destination folder)` pairs for everything under resources/, minus pickles and caches.

    The demo model's folder comes along when it exists; a training leftover such as `training_args.bin` or
    `optimizer.pt` is left out (the loader reads safetensors only).
    """
    pairs: list[tuple[str, str]] = []
    for path in sorted(_walk_files(resources)):
        rel = path.relative_to(resources.parent).as_posix()
        if not keep_data(rel) or path.name.startswith(".") or path.suffix in {".tmp", ".lock", ".partial"}:
            continue
        pairs.append((str(path), str(PurePosixPath(rel).parent)))
    return pairs


def _walk_files(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.startswith(".")]
        for name in filenames:
            yield Path(dirpath) / name


def _forbidden_qt(name: str) -> bool:
    stems = ("WebEngine", "Quick", "Qml", "3DCore", "3DRender", "Multimedia", "Pdf", "Designer", "Charts")
    return name.startswith(("libQt6", "Qt6", "Qt")) and any(s in name for s in stems)


def audit_bundle(bundle_dir: str | os.PathLike[str]) -> list[str]:
    """Every reason the built folder must not ship: pickle files, excluded Qt modules, test or header
    trees."""
    root = Path(bundle_dir)
    if not root.is_dir():
        return [f"{root} does not exist"]
    problems: list[str] = []
    for path in _walk_files(root):
        rel = path.relative_to(root).as_posix()
        if is_pickle_file(rel):
            problems.append(f"pickle file in the bundle: {rel}")
        elif _forbidden_qt(path.name):
            problems.append(f"excluded Qt module in the bundle: {rel}")
        elif path.name.startswith("_tkinter") or "/tkinter/" in f"/{rel}":
            problems.append(f"tkinter in the bundle: {rel}")
    for base in (root, root / "_internal"):
        for tree in ("torch/test", "torch/include"):
            if (base / tree).is_dir():
                problems.append(f"{tree} was not excluded")
        extra = [
            p.name for p in (base / "torch" / "bin").glob("*") if f"torch/bin/{p.name}" not in _KEEP_ALWAYS
        ]
        if extra:
            problems.append(f"torch/bin holds test programs: {', '.join(sorted(extra)[:5])}")
    return problems


def tree_size(paths: Iterable[Path] | Path) -> int:
    """Bytes on disk of a folder (symlinks counted once, not followed)."""
    if isinstance(paths, Path):
        paths = [paths]
    total = 0
    for root in paths:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                p = Path(dirpath) / name
                if not p.is_symlink():
                    total += p.stat().st_size
    return total
