"""The folder carried to the lent GPU machine (engine.tools.gpu_carry) and the preflight that checks its
versions there (engine.tools.gpu_preflight)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from engine.tools import gpu_carry, gpu_preflight


def test_the_lent_image_lacks_transformers_at_its_version_bitsandbytes_and_platformdirs() -> None:
    found = {p.name: p for p in gpu_preflight.problems(gpu_preflight.LENT_IMAGE)}
    assert set(found) == {"transformers", "bitsandbytes", "platformdirs"}
    assert found["transformers"].found == "5.17.0"
    assert gpu_carry.to_carry().keys() == {"transformers", "bitsandbytes", "platformdirs"}


def test_this_environment_passes_the_preflight_without_a_gpu() -> None:
    pytest.importorskip("triton")  # the test extra installs it on Linux x86-64 only
    result = gpu_preflight.preflight(need_cuda=False)
    assert result["ok"], result["line"]
    assert result["rule"] and result["versions"]["torch"]


def test_a_gpu_run_without_a_device_is_named_in_the_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = gpu_preflight.preflight(need_cuda=True)
    assert not result["ok"] and "no CUDA device" in result["line"]


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("bitsandbytes-0.50.2.dist-info/RECORD", "stale\n")
    return path


def test_bitsandbytes_is_trimmed_to_its_cpu_and_cuda_13_libraries_with_a_matching_record(
    tmp_path: Path,
) -> None:
    libs = {
        f"bitsandbytes/libbitsandbytes_{v}.so": os.urandom(4096)
        for v in ("cpu", "cuda128", "cuda130", "rocm72")
    }
    wheel = _wheel(
        tmp_path / "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl",
        {"bitsandbytes/__init__.py": b"", **libs},
    )
    saved = gpu_carry.trim_bitsandbytes(wheel, cuda="13.0")
    assert saved > 0
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        record = z.read("bitsandbytes-0.50.2.dist-info/RECORD").decode()
        assert {Path(n).name for n in names if ".so" in n} == {
            "libbitsandbytes_cpu.so",
            "libbitsandbytes_cuda130.so",
        }
        for line in record.splitlines()[:-1]:
            name, digest, size = line.split(",")
            data = z.read(name)
            expect = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expect}" and int(size) == len(data)


def test_a_bitsandbytes_without_the_images_cuda_library_is_refused(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path / "bitsandbytes-0.1-py3-none-any.whl", {"bitsandbytes/libbitsandbytes_cuda118.so": b"x"}
    )
    with pytest.raises(RuntimeError, match=r"no library for CUDA 13\.0"):
        gpu_carry.trim_bitsandbytes(wheel, cuda="13.0")


def test_prepare_builds_a_folder_of_at_most_60_mib_with_the_project_the_wheels_and_run_sh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wanted = gpu_carry.to_carry()
    source = tmp_path / "cache"
    source.mkdir()
    for name, version in wanted.items():
        files = {f"{name}/__init__.py": b""}
        if name == "bitsandbytes":
            files |= {
                "bitsandbytes/libbitsandbytes_cpu.so": b"c",
                "bitsandbytes/libbitsandbytes_cuda130.so": b"g",
            }
        _wheel(source / f"{name}-{version}-py3-none-any.whl", files)
    words = tmp_path / "american-english"
    words.write_text("boat\nsea\n", encoding="utf-8")
    monkeypatch.setenv(
        "LETTERPRESS_WORDLIST", str(words)
    )  # the judge's word list travels (the image has none)
    manifest = gpu_carry.prepare(tmp_path / "carry", wheels_from=source)
    carry = tmp_path / "carry"
    assert manifest["word_list"] and (carry / "american-english").read_text(encoding="utf-8") == "boat\nsea\n"
    assert 'LETTERPRESS_WORDLIST="$here/american-english"' in (carry / "run.sh").read_text(encoding="utf-8")
    assert manifest["total_bytes"] <= gpu_carry.LIMIT_BYTES
    assert sorted(manifest["wheels"]) == sorted(f"{n}-{v}-py3-none-any.whl" for n, v in wanted.items())
    assert (carry / "project" / "engine" / "__main__.py").exists()
    assert (carry / "project" / "tests" / "engine" / "tools" / "test_gpu_carry.py").exists()
    assert not (carry / "project" / "app").exists()  # the GPU run never needs the editor
    assert os.access(carry / "run.sh", os.X_OK)
    assert json.loads((carry / "manifest.json").read_text())["carried"] == wanted


def test_prepare_refuses_a_folder_over_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_carry, "LIMIT_BYTES", 1024)
    with pytest.raises(gpu_carry.CarryTooLarge, match="over the 60 MiB"):
        gpu_carry.prepare(tmp_path / "carry", wheels_from=tmp_path)
