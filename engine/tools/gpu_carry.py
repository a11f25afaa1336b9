"""`python -m engine gpu-check --prepare DIR`: the folder to carry to the lent GPU machine (at most 60 MiB).

Why: nothing can be fetched there and at most 64 MiB travel per run. The folder holds the project (engine/,
the engine's tests, pyproject.toml), the wheels the lent image lacks or has at a version the engine cannot use
(`engine.tools.gpu_preflight.problems(LENT_IMAGE)`: transformers, bitsandbytes, platformdirs), downloaded with
pip for that image's Python and platform, and `run.sh`, which installs them into a private folder, puts it
first on the path and starts `python -m engine gpu-check` (or any `python -m` module given with `--module`).
bitsandbytes' wheel holds a library per CUDA and ROCm version (~125 MB unpacked); only the CPU one and the
image's CUDA one are kept.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from engine.tools.gpu_preflight import LENT_CUDA, LENT_IMAGE, problems

ROOT = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 60 * 1024 * 1024
PROJECT = (
    "engine",
    "tests/engine",
    "tests/helpers",
    "tests/__init__.py",
    "tests/conftest.py",
    "pyproject.toml",
)
PLATFORMS = (*(f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34, 35)), "manylinux2014_x86_64")
NOT_WHEELS = {"python", "cuda", "torch"}  # not carried: the image's own CUDA torch is the one to use

RUN_SH = """#!/usr/bin/env bash
# Installs the carried wheels into a private folder, puts it and the project first on the path, and runs
# `python -m engine gpu-check "$@"` (or `--module NAME` first: `python -m NAME "$@"`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-python3}"
site="${LETTERPRESS_CARRY_SITE:-/tmp/letterpress-carry-site}"
module=(engine gpu-check)
if [[ "${1:-}" == "--module" ]]; then module=("$2"); shift 2; fi
if compgen -G "$here/wheels/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \\
    "$here"/wheels/*.whl
fi
export PYTHONPATH="$here/project:$site${PYTHONPATH:+:$PYTHONPATH}" LETTERPRESS_CARRY="$here"
# The demo judge's word list (Debian's wamerican; the lent image has none), when it was carried.
if [[ -f "$here/american-english" && -z "${LETTERPRESS_WORDLIST:-}" ]]; then
  export LETTERPRESS_WORDLIST="$here/american-english"
fi
cd "$here/project"
exec "$py" -m "${module[@]}" "$@"
"""


class CarryDownloadFailed(RuntimeError):
    """pip could not fetch a wheel to carry."""


class CarryTooLarge(RuntimeError):
    """The carry folder is over the 60 MiB a run can take: leave something out or trim a wheel."""


def to_carry(image: dict[str, str] | None = None) -> dict[str, str]:
    """{distribution: version to carry}: each the image lacks or cannot use, at the version installed here
    (the one the project's tests ran with)."""
    wanted = {}
    for problem in problems(LENT_IMAGE if image is None else image):
        if problem.name in NOT_WHEELS:
            continue
        wanted[problem.name] = importlib.metadata.version(problem.name)
    return wanted


def download(wanted: dict[str, str], dest: Path, python_version: str = "3.12") -> list[Path]:
    """pip-download each wheel for the image's Python and platform (no dependencies: the image has them)."""
    dest.mkdir(parents=True, exist_ok=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        *platforms,
        "-d",
        str(dest),
        *(f"{name}=={version}" for name, version in sorted(wanted.items())),
    ]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CarryDownloadFailed(
            f"pip could not download {', '.join(f'{k}=={v}' for k, v in sorted(wanted.items()))} for Python "
            f"{python_version} on manylinux x86-64 ({proc.stderr.strip().splitlines()[-1:]}): check the "
            "registry is reachable, or pass --wheels-from a folder holding them"
        )
    return sorted(dest.glob("*.whl"))


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def trim_bitsandbytes(wheel: Path, cuda: str = LENT_CUDA) -> int:
    """Rewrite bitsandbytes' wheel keeping only its CPU library and the one for `cuda` ("13.0" ->
    libbitsandbytes_cuda130.so), with a RECORD that matches; returns the bytes saved."""
    keep = {"libbitsandbytes_cpu.so", f"libbitsandbytes_cuda{cuda.replace('.', '')}.so"}
    before = wheel.stat().st_size
    tmp = wheel.with_suffix(".trimmed")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        names = [
            n
            for n in src.namelist()
            if not (Path(n).name.startswith("libbitsandbytes_") and Path(n).name not in keep)
        ]
        if not any(Path(n).name in keep - {"libbitsandbytes_cpu.so"} for n in names):
            raise RuntimeError(
                f"{wheel.name} has no library for CUDA {cuda}: carry another bitsandbytes version"
            )
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        lines = []
        for name in names:
            if name == record:
                continue
            data = src.read(name)
            out.writestr(src.getinfo(name), data)
            lines.append(_record_line(name, data))
        out.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")
    tmp.replace(wheel)
    return before - wheel.stat().st_size


def copy_project(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for rel in PROJECT:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, ignore=ignore)
        elif src.exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def prepare(out: Path, *, wheels_from: Path | None = None) -> dict[str, Any]:
    """Build the carry folder at `out` (emptied first) and return its manifest; raises `CarryTooLarge` past
    60 MiB. `wheels_from`: take the wheels from this folder instead of downloading (CI's pip cache)."""
    if out.exists():
        shutil.rmtree(out)
    (out / "project").mkdir(parents=True)
    copy_project(out / "project")
    wanted = to_carry()
    wheels_dir = out / "wheels"
    if wheels_from is not None:
        wheels_dir.mkdir()
        for name in wanted:
            for wheel in Path(wheels_from).glob(f"{name.replace('-', '_')}-{wanted[name]}-*.whl"):
                shutil.copy2(wheel, wheels_dir / wheel.name)
        wheels = sorted(wheels_dir.glob("*.whl"))
    else:
        wheels = download(wanted, wheels_dir)
    saved = 0
    for wheel in wheels:
        if wheel.name.startswith("bitsandbytes-"):
            saved += trim_bitsandbytes(wheel)
    from engine.training.evaluate import wordlist

    words = wordlist()
    if words.is_file():  # ~1 MB: the GPU recipe's real-word share needs it and the image has none
        shutil.copy2(words, out / "american-english")
    run_sh = out / "run.sh"
    run_sh.write_text(RUN_SH, encoding="utf-8")
    run_sh.chmod(0o755)
    manifest: dict[str, Any] = {
        "carried": wanted,
        "wheels": {w.name: w.stat().st_size for w in sorted(wheels_dir.glob("*.whl"))},
        "bitsandbytes_trimmed_bytes": saved,
        "project_bytes": folder_bytes(out / "project"),
        "word_list": (out / "american-english").is_file(),
        "limit_bytes": LIMIT_BYTES,
    }
    total = folder_bytes(out) + 2048  # and the manifest itself
    manifest["total_bytes"] = total
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    if total > LIMIT_BYTES:
        raise CarryTooLarge(
            f"the carry folder {out} is {total / 2**20:.1f} MiB, over the 60 MiB a run can "
            "take: leave a wheel out or trim it"
        )
    return manifest
