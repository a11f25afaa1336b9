"""The README's first minute (issue 34, case 10): what Letterpress is, the two commands, what the demo really
writes and the three ways to real sentences come before the installers, which say how they are made."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
HEADINGS = [line for line in README.splitlines() if line.startswith("## ")]


def _section(title: str) -> str:
    start = README.index(f"\n{title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else len(README)]


def test_the_quick_start_comes_first_and_the_installers_after_it():
    assert HEADINGS[0] == "## Quick start: the first minute"
    assert HEADINGS.index("## Installers") == 1
    first = _section("## Quick start: the first minute")
    assert "# 1. set up and run the app" in first and "# 2. set up and run the tests" in first


def test_the_installers_say_no_file_is_published_and_how_they_are_built():
    installers = _section("## Installers")
    assert "Download the file for your system" not in README
    assert "No release has been published" in installers
    assert "python packaging/build.py" in installers


def test_the_three_ways_to_real_sentences_link_where_they_are_explained():
    first = _section("## Quick start: the first minute")
    ways = first[first.index("### Real sentences: three ways") :]
    assert "24 GB" in ways
    for anchor in ("#getting-the-model", "#use-a-server", "#no-gpu-use-the-model-server-you-already-run"):
        assert f"]({anchor})" in ways, anchor
    assert "## Getting the model" in README and "## Use a server" in README


def test_the_readme_and_pyproject_say_the_same_where_it_runs():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "on your own machine" in pyproject and "on your own machine" in README
    assert "on your own GPU" not in pyproject
    assert "works at once" not in README


def _demo_sample() -> tuple[str, str]:
    """(before.txt, the demo's draft) as the README quotes them."""
    demo = _section("## Quick start: the first minute")
    demo = demo[demo.index("### What the demo writes") :]
    blocks = re.findall(r"```\n(.*?)\n```", demo, flags=re.S)
    return blocks[0], blocks[1]


def test_the_demo_sample_is_what_the_shipped_demo_writes(tmp_path):
    """The quoted draft is verbatim: running the README's command on the shipped demo prints it again."""
    before, draft = _demo_sample()
    (tmp_path / "before.txt").write_text(before, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = ["-m", "engine", "generate", "--task", "draft", "--before-file", "before.txt"]
    done = subprocess.run(
        [sys.executable, *command, "--seed", "0", "--device", "cpu"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip("\n") == draft
