"""A generated corpus of broken model folders (tests/helpers/broken_folders.py) through the model manager's
check, the loader and both command lines: each is refused with a sentence that fits the case, no traceback, in
bounded time, under a memory cap (RLIMIT_AS in the subprocess that runs it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.broken_folders import GOOD, KINDS, Kind, build_corpus
from tests.helpers.engine_cli import run_engine, without_root_override

ROOT = Path(__file__).resolve().parents[2]
BY_NAME = {k.name: k for k in KINDS}
CHECK_MB = 2048  # the check imports torch to list the devices for the fit estimate (~650 MB of address space)
CLI_MB = 512  # a refused folder never gets as far as importing torch
PER_FOLDER_SECONDS = 2.0  # "well under a second" on an idle machine; this one is shared by several test runs


@pytest.fixture(scope="module")
def corpus(tiny_dir: Path):
    root = Path(tempfile.mkdtemp(prefix="letterpress-broken-"))
    build_corpus(tiny_dir, root / "c")
    yield root / "c"
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            p = Path(dirpath) / d
            if not p.is_symlink():
                os.chmod(p, 0o755)
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            os.chmod(p, 0o644)
    shutil.rmtree(root, ignore_errors=True)


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", QT_QPA_PLATFORM="offscreen")


def _limited(mb: int):
    def pre() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (mb * 1024**2, mb * 1024**2))

    return pre


def _run_stage(stage: str, corpus: Path, names: list[str], mb: int, *, unprivileged: bool = False) -> dict:
    prefix = without_root_override() if unprivileged else []
    out = subprocess.run(
        [*prefix, sys.executable, "-m", "tests.helpers.broken_folders", stage, str(corpus), str(mb), *names],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return {r["name"]: r for r in map(json.loads, out.stdout.splitlines())}


def _assert_sentence(kind: Kind, got_kind: str, message: str) -> None:
    assert got_kind == kind.error, f"{kind.name}: {got_kind} ({message})"
    for word in kind.words:
        assert word.lower() in message.lower(), f"{kind.name}: {word!r} not in {message!r}"
    assert message.rstrip().endswith((".", ")")), f"{kind.name}: not a sentence: {message!r}"
    assert "Traceback" not in message and "Errno" not in message and "\n" not in message.strip()


def _privileged_ok(kind: Kind) -> bool:
    """A permission case cannot be made for root (root reads a chmod-000 file); it runs without that override
    in its own test below."""
    return not kind.unprivileged or os.geteuid() != 0


CHECKED = [k for k in KINDS if k.stage == "check" and _privileged_ok(k)]
ALL = [k for k in KINDS if _privileged_ok(k)]


def test_the_corpus_covers_every_kind_named_in_the_issue() -> None:
    assert len(KINDS) >= 60 and len({k.name for k in KINDS}) == len(KINDS)
    from_issue = [k for k in KINDS if k.issue]
    assert len(from_issue) >= 20


def test_model_manager_check_refuses_each_kind_with_a_sentence_in_bounded_time_and_memory(
    corpus: Path,
) -> None:
    results = _run_stage("check", corpus, [k.name for k in ALL], CHECK_MB)
    assert results[GOOD]["kind"] == "passed", results[GOOD]
    for kind in ALL:
        r = results[kind.name]
        if kind.stage == "loader":  # passes the check (the loader's full shape comparison catches it)
            assert r["kind"] == "passed", r
        else:
            _assert_sentence(kind, r["kind"], r["message"])
        assert r["seconds"] < PER_FOLDER_SECONDS, r
    assert max(r["peak_rss"] for r in results.values()) < CHECK_MB * 1024**2


def test_validation_pass_alone_is_fast_and_small(corpus: Path) -> None:
    results = _run_stage(
        "validate", corpus, [k.name for k in ALL], 256
    )  # torch-free: 256 MB of address space
    for kind in CHECKED:
        _assert_sentence(kind, results[kind.name]["kind"], results[kind.name]["message"])
        assert results[kind.name]["seconds"] < PER_FOLDER_SECONDS
    assert max(r["peak_rss"] for r in results.values()) < 200 * 1024**2


def test_loader_refuses_each_kind_with_a_sentence_under_a_memory_cap(corpus: Path) -> None:
    results = _run_stage("loader", corpus, [k.name for k in ALL], CHECK_MB)
    assert results[GOOD]["kind"] == "passed", results[GOOD]
    for kind in ALL:
        _assert_sentence(kind, results[kind.name]["kind"], results[kind.name]["message"])
        assert results[kind.name]["seconds"] < PER_FOLDER_SECONDS, results[kind.name]


def _cli(args: list[str], mb: int = CLI_MB, unprivileged: bool = False):
    prefix = without_root_override() if unprivileged else []
    return run_engine(*args, prefix=prefix, env=_env(), timeout=120, preexec_fn=_limited(mb))


@pytest.mark.parametrize("command", ["generate", "inspect"])
def test_both_command_lines_print_one_sentence_and_exit_2_for_each_kind(corpus: Path, command: str) -> None:
    for kind in CHECKED:
        out = _cli([command, "--model", str(corpus / kind.name)])
        assert out.returncode == 2, (kind.name, out.returncode, out.stderr[-2000:])
        assert "Traceback" not in out.stderr and out.stdout.strip() == "", (kind.name, out.stderr[-2000:])
        line = out.stderr.strip()
        assert line.startswith("error: ") and "\n" not in line, (kind.name, line)
        for word in kind.words:
            assert word.lower() in line.lower(), (kind.name, word, line)


def test_generate_jsonl_reports_the_kind_for_each_kind(corpus: Path) -> None:
    for kind in CHECKED[::4]:
        out = _cli(["generate", "--jsonl", "--model", str(corpus / kind.name)])
        event = json.loads(out.stdout.strip().splitlines()[-1])
        assert out.returncode == 2 and event["event"] == "error" and event["kind"] == kind.error, (
            kind.name,
            out,
        )


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_permission_problems_say_permission_when_permissions_apply(corpus: Path) -> None:
    kinds = [k for k in KINDS if k.unprivileged]
    results = _run_stage("validate", corpus, [k.name for k in kinds], 256, unprivileged=True)
    for kind in kinds:
        _assert_sentence(kind, results[kind.name]["kind"], results[kind.name]["message"])
        out = _cli(["generate", "--model", str(corpus / kind.name)], unprivileged=True)
        assert out.returncode == 2 and "Traceback" not in out.stderr and "permission" in out.stderr, (
            out.stderr
        )


def test_a_folder_deleted_after_the_check_says_it_does_not_exist(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load re-checks when a library fails after the check passed (it used to say "Repo id must be in the
    form 'repo_name'...", transformers' words for a path that is not there)."""
    from engine.api import ModelNotFoundError
    from engine.weights import loader

    folder = tmp_path / "m"
    shutil.copytree(tiny_dir, folder)
    info = loader.validate_checkpoint(folder)
    shutil.rmtree(folder)
    monkeypatch.setattr(loader, "validate_checkpoint", lambda _d, *_a, **_k: info)
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        loader.load_model(folder, device="cpu", quantization="none")


def test_fit_estimate_is_constant_time_and_memory_for_absurd_configs() -> None:
    import resource
    import time

    from engine.tools.real_shape import real_config_dict
    from engine.weights import fit

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for layers in (10**6, 10**12, 2**62):
        config = real_config_dict()
        config["text_config"]["num_hidden_layers"] = layers
        config["text_config"].pop("layer_types", None)
        start = time.perf_counter()
        est = fit.estimate(config, "nf4", available_bytes=24 * 1024**3)
        assert time.perf_counter() - start < 0.1 and est.verdict == "wont_fit"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 * 1024  # KiB: < 50 MB grown


def test_a_session_keeps_its_model_when_a_load_fails(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine swaps models only once the new one has loaded; when the new one needs the memory the old one
    holds, the old one is released for the attempt and loaded again if the attempt fails."""
    import engine.session
    from engine.api import DenoiseSettings, DraftRequest, ModelDamagedError, WontFitError
    from engine.session import Session

    folders = build_corpus(
        tiny_dir, tmp_path / "c", tuple(k for k in KINDS if k.name == "transposed_global_weight")
    )
    session = Session()
    session.load(tiny_dir, device="cpu")
    with pytest.raises(ModelDamagedError, match="transposed"):
        session.load(folders["transposed_global_weight"], device="cpu")
    assert session.info is not None and session.info.path == str(tiny_dir)
    draft = DraftRequest(before="Once", max_new_tokens=8, settings=DenoiseSettings(max_steps=2, seed=1))
    assert len(session.run(draft).candidates[0].token_ids) <= 8  # still usable, and no more tokens than asked

    real = engine.session.load_model
    calls: list[str] = []

    def needs_the_memory(model_dir, **kw):
        calls.append(str(model_dir))
        if str(model_dir) != str(tiny_dir):
            raise WontFitError("It will not fit.")
        return real(model_dir, **kw)

    monkeypatch.setattr(engine.session, "load_model", needs_the_memory)
    with pytest.raises(WontFitError, match="loaded again"):
        session.load(tmp_path / "big", device="cpu")
    assert calls == [
        str(tmp_path / "big"),
        str(tmp_path / "big"),
        str(tiny_dir),
    ]  # tried, freed + retried, restored
    assert session.info is not None and session.info.path == str(tiny_dir)
