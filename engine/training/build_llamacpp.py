"""Build llama.cpp for the teacher's `llamacpp` backend:
`python -m engine.training.build_llamacpp --dest DIR`.

Why build: no llama.cpp binary wheel installs on this platform (Debian 12, glibc 2.36, GCC 12):
llama-cpp-python ships sdists only, llama-cpp-cffi's wheel needs GCC 13's libstdc++ and llama-cpp-py-sync's
glibc 2.38. The llama-cpp-python sdist (fetched with pip, the ordinary client) vendors llama.cpp and carries
the ctypes bindings `engine.training.teacher_llamacpp` uses; only the `llama` library target is built (about
20 minutes of one CPU core), CPU backend, no OpenMP (one thread is all the generator uses).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
from pathlib import Path

VERSION = "0.3.16"


def build(dest: Path, jobs: int = 1) -> Path:
    """Fetch the sdist into `dest`, unpack it, build `libllama.so`; returns the folder holding the
    libraries."""
    dest.mkdir(parents=True, exist_ok=True)
    sdist = dest / f"llama_cpp_python-{VERSION}.tar.gz"
    if not sdist.is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-binary=:all:",
                "--no-deps",
                f"llama-cpp-python=={VERSION}",
                "-d",
                str(dest),
            ],
            check=True,
        )
    src = dest / f"llama_cpp_python-{VERSION}"
    if not src.is_dir():
        with tarfile.open(sdist) as archive:
            archive.extractall(dest, filter="data")
    cpp = src / "vendor" / "llama.cpp"
    flags = [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=ON",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_TOOLS=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
        "-DLLAMA_CURL=OFF",
        "-DGGML_NATIVE=ON",
        "-DGGML_OPENMP=OFF",
    ]
    subprocess.run(["cmake", "-B", "build", *flags], cwd=cpp, check=True)
    subprocess.run(["cmake", "--build", "build", f"-j{jobs}", "--target", "llama"], cwd=cpp, check=True)
    return cpp / "build" / "bin"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=Path("/work/venvs"))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    lib = build(args.dest, args.jobs)
    src = lib.parents[3]
    print(f"export LLAMA_CPP_LIB_PATH={lib} LETTERPRESS_LLAMACPP_SRC={src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
