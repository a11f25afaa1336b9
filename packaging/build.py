"""Build the Letterpress bundle and this platform's installers:  python packaging/build.py

Run from the repository root with the project's environment active (`pip install -e .[packaging]`). Writes
    dist/letterpress/                          the one-folder bundle (dist/Letterpress.app too on macOS)
    dist/letterpress_<ver>_<arch>.deb          Linux: installs under /opt/letterpress
    dist/letterpress-<ver>-linux-<arch>.tar.gz Linux: the bundle with the same desktop files
    dist/Letterpress-<ver>.dmg                 macOS (installer/macos/make_dmg.sh)
    dist/Letterpress-<ver>-setup.exe           Windows, when Inno Setup's iscc is on PATH
    dist/build-info.json                       version, torch, GPU back end, bundle size, excluded modules
The bundle is audited before any installer is made: no pickle files, none of the excluded Qt modules.
The torch in the environment decides the build: install a CUDA torch wheel first for a CUDA build.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def load_by_path(name: str, path: Path) -> ModuleType:
    """Import a helper by file path (packaging/ must not become an importable `packaging` package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_bundle_module() -> ModuleType:
    return load_by_path("letterpress_bundle", HERE / "bundle.py")


def run_pyinstaller(dist: Path, work: Path, *, clean: bool) -> None:
    if importlib.util.find_spec("PyInstaller") is None:
        raise SystemExit("PyInstaller is not installed: pip install -e '.[packaging]'")
    cmd = [
        sys.executable,
        "-m",
        "PyInstaller",
        str(HERE / "letterpress.spec"),
        "--noconfirm",
        "--distpath",
        str(dist),
        "--workpath",
        str(work),
        "--log-level",
        "WARN",
    ]
    if clean:
        cmd.append("--clean")
    subprocess.run(cmd, check=True, cwd=ROOT)


def torch_flavour() -> dict[str, str | None]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, torch; print(json.dumps({'torch': torch.__version__, "
            "'cuda': torch.version.cuda, 'hip': getattr(torch.version, 'hip', None)}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def make_installers(bundle: ModuleType, dist: Path, version: str, *, fast: bool) -> list[Path]:
    bundle_dir = dist / bundle.APP_NAME
    if sys.platform.startswith("linux"):
        linux = load_by_path("letterpress_build_linux", ROOT / "installer" / "linux" / "build_linux.py")
        return [
            linux.build_deb(
                bundle_dir, dist, version, compression="gzip" if fast else "xz", level=1 if fast else 6
            ),
            linux.build_tarball(bundle_dir, dist, version, level=1 if fast else 6),
        ]
    if sys.platform == "darwin":
        subprocess.run(
            ["sh", str(ROOT / "installer" / "macos" / "make_dmg.sh"), version], check=True, cwd=ROOT
        )
        return [dist / f"{bundle.DISPLAY_NAME}-{version}.dmg"]
    if sys.platform == "win32":
        iscc = shutil.which("iscc") or shutil.which("ISCC")
        if not iscc:
            print(
                "Inno Setup's iscc is not on PATH: install Inno Setup 6, then run\n"
                f"  iscc /DAppVersion={version} installer\\windows\\letterpress.iss"
            )
            return []
        subprocess.run(
            [iscc, f"/DAppVersion={version}", str(ROOT / "installer" / "windows" / "letterpress.iss")],
            check=True,
            cwd=ROOT,
        )
        return [dist / f"{bundle.DISPLAY_NAME}-{version}-setup.exe"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the Letterpress bundle and installers.")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder (default: dist)")
    parser.add_argument(
        "--work",
        type=Path,
        default=ROOT / "build" / "pyinstaller",
        help="PyInstaller's cache; kept between builds so a rebuild is quicker",
    )
    parser.add_argument("--clean", action="store_true", help="empty PyInstaller's cache first")
    parser.add_argument("--no-installers", action="store_true", help="only the bundle")
    parser.add_argument(
        "--fast-compression",
        action="store_true",
        help="gzip -1 instead of xz for the .deb and .tar.gz (CI smoke builds: bigger, minutes faster)",
    )
    args = parser.parse_args(argv)

    bundle = load_bundle_module()
    version = bundle.project_version()
    dist = args.dist.resolve()
    started = time.monotonic()
    run_pyinstaller(dist, args.work.resolve(), clean=args.clean)
    bundle_dir = dist / bundle.APP_NAME
    problems = bundle.audit_bundle(bundle_dir)
    if problems:
        print("The bundle must not ship as built:\n  " + "\n  ".join(problems[:50]), file=sys.stderr)
        return 1
    bundle_seconds = time.monotonic() - started
    installers = (
        [] if args.no_installers else make_installers(bundle, dist, version, fast=args.fast_compression)
    )

    info = {
        "version": version,
        "platform": f"{sys.platform}-{platform.machine()}",
        **torch_flavour(),
        "bundle": str(bundle_dir),
        "bundle_bytes": bundle.tree_size(bundle_dir),
        "bundle_seconds": round(bundle_seconds, 1),
        "total_seconds": round(time.monotonic() - started, 1),
        "installers": {p.name: p.stat().st_size for p in installers if p.exists()},
        "excluded": {
            "qt_modules": len(bundle.QT_EXCLUDES),
            "python_packages": list(bundle.PY_EXCLUDES),
            "transformers_model_families": len(bundle.transformers_model_excludes()),
            "data_prefixes": list(bundle._DROP_DATA_PREFIXES),
        },
    }
    (dist / "build-info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    print(f"bundle {bundle_dir}: {info['bundle_bytes'] / 2**20:,.0f} MiB in {bundle_seconds:.0f} s")
    for name, size in info["installers"].items():
        print(f"{dist / name}: {size / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
