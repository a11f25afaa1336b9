"""The README's install lines do what they say on machines CI is not (issue 27): the Debian line runs as root
(no sudo in a container) and through sudo otherwise, refreshes the package lists and never stops to ask;
command 1 chooses the torch wheel explicitly and still completes when PyTorch's index cannot be reached (then
torch comes from PyPI, with a sentence), without paying the unreachable index's retries for every other
package.

Each line is read from the README exactly as `.ci/bare-machine` reads it and run by `sh` with stand-in `id`,
`sudo`, `apt-get`, `pip` and `python` commands that record their arguments (`.ci/bare-machine` runs the real
thing on a bare Debian root)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _debian_line() -> str:  # the same grep/sed as .ci/bare-machine
    line = next(row for row in README.splitlines() if re.search(r"apt-get install -y .*# Debian", row))
    return re.sub(r" *# Debian.*$", "", line)


def _command(number: int) -> str:  # the same grep -A1 '^# N\. ' as .ci/bare-machine and .ci/run
    lines = README.splitlines()
    return next(lines[i + 1] for i, row in enumerate(lines) if row.startswith(f"# {number}. "))


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> "$LOG"\n{body}\n', encoding="utf-8")
    path.chmod(0o755)


def _run(line: str, tmp_path: Path, stubs: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in stubs.items():
        _stub(bin_dir, name, body)
    log = tmp_path / "log"
    log.write_text("", encoding="utf-8")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(log), "HOME": str(tmp_path)}
    run = subprocess.run(
        ["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return run, log.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("uid", ["0", "1000"])
def test_the_debian_line_runs_as_root_and_through_sudo_and_never_asks(tmp_path: Path, uid: str) -> None:
    stubs = {"id": f"echo {uid}", "apt-get": "exit 0", "sudo": '"$@"'}
    run, calls = _run(_debian_line(), tmp_path, stubs)
    assert run.returncode == 0, run.stderr
    apt = [c for c in calls if c.startswith("apt-get")]
    assert apt[0] == "apt-get update", calls
    assert apt[1].startswith("apt-get install -y ") and "python3-venv" in apt[1], calls
    sudo = [c for c in calls if c.startswith("sudo")]
    assert (len(sudo) == 2) == (uid != "0"), calls


def _fake_venv(tmp_path: Path, index_reachable: bool) -> str:
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    fail = (
        ""
        if index_reachable
        else 'case "$*" in *--index-url*) echo "ERROR: No matching distribution" >&2; exit 1;; esac'
    )
    _stub(venv_bin, "pip", fail)
    _stub(venv_bin, "python", "exit 0")
    return "true"  # stands in for `python3 -m venv .venv`


@pytest.mark.parametrize("reachable", [True, False])
def test_command_1_picks_the_cpu_wheel_and_completes_without_pytorchs_index(
    tmp_path: Path, reachable: bool
) -> None:
    line = _command(1)
    assert line.startswith("python3 -m venv .venv && ") and line.endswith(".venv/bin/python -m app")
    run, calls = _run(line.replace("python3 -m venv .venv", _fake_venv(tmp_path, reachable), 1), tmp_path, {})
    assert run.returncode == 0, run.stderr
    pips = [c for c in calls if c.startswith("pip ")]
    first, rest = pips[0], pips[1:]
    assert "--index-url https://download.pytorch.org/whl/cpu" in first and "torch==2.13.0" in first
    assert "--no-deps" in first, "an unreachable index would cost its retries for every dependency"
    retries = int(re.search(r"--retries (\d+)", first).group(1))  # type: ignore[union-attr]
    timeout = int(re.search(r"--timeout (\d+)", first).group(1))  # type: ignore[union-attr]
    assert (retries + 1) * timeout <= 30, "the index's give-up time is bounded"
    assert len(rest) == 1 and "torch==2.13.0" in rest[0] and "-e ." in rest[0] and "index-url" not in rest[0]
    assert calls[-1] == "python -m app"
    assert ("PyTorch CPU index not reached" in run.stdout) == (not reachable)


def test_command_2_installs_torch_the_same_way_and_ci_runs_it_from_the_readme() -> None:
    one, two = _command(1), _command(2)
    assert (
        one.split(" && .venv/bin/pip install torch==2.13.0 ")[0]
        == two.split(" && .venv/bin/pip install torch==2.13.0 ")[0]
    )
    assert "python -m pytest" in two
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "grep -A1 '^# 2\\. ' README.md" in ci and 'bash -c "$COMMAND2"' in ci
    bare = (ROOT / ".ci" / "bare-machine").read_text(encoding="utf-8")
    assert "apt-get install -y .*# Debian" in bare and 'in_root sh -c "$DEBIAN_LINE"' in bare


def test_the_readme_states_the_supported_systems_the_python_floor_allows() -> None:
    assert 'requires-python = ">=3.11"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "Ubuntu 22.04+" not in README
    debian_line = next(
        row for row in README.splitlines() if "apt-get install -y" in row and "# Debian" in row
    )
    assert "Ubuntu 24.04+" in debian_line
    assert "Ubuntu 22.04 ships Python 3.10" in README
    assert "1.5 GB" in README and re.search(r"load average \d", README)
