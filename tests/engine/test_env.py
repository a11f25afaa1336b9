"""Environment values that cannot be used are ignored with a sentence naming the value, the reason and the
default used, never a failed load (issue 27: LETTERPRESS_PREFIX_CACHE_MB=nan/inf stopped the model loading,
LETTERPRESS_THREADS=99999999999 reached torch as a thread count)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import env
from tests.helpers.engine_cli import engine_env, run_engine


@pytest.fixture(autouse=True)
def _fresh_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env, "_notices", {})


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "-5", "lots", "1e30"])
def test_a_prefix_cache_size_that_is_not_an_amount_uses_the_default_with_a_reason(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    from engine.session import prefix_cache_bytes

    monkeypatch.setenv("LETTERPRESS_PREFIX_CACHE_MB", raw)
    assert prefix_cache_bytes() == 1024 << 20
    (notice,) = env.notices()
    assert (
        notice.startswith(f"LETTERPRESS_PREFIX_CACHE_MB={raw} is ignored: ") and "default (1024 MB)" in notice
    )


def test_a_good_prefix_cache_size_and_zero_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.session import prefix_cache_bytes

    monkeypatch.setenv("LETTERPRESS_PREFIX_CACHE_MB", "0")
    assert prefix_cache_bytes() == 0
    monkeypatch.setenv("LETTERPRESS_PREFIX_CACHE_MB", "8.5")
    assert prefix_cache_bytes() == int(8.5 * (1 << 20)) and env.notices() == []


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("LETTERPRESS_THREADS", "99999999999"),
        ("LETTERPRESS_THREADS", "-3"),
        ("LETTERPRESS_THREADS", "two"),
        ("OMP_NUM_THREADS", "99999999999"),
        ("OMP_NUM_THREADS", "1.5"),
    ],
)
def test_an_absurd_thread_count_is_ignored_with_a_reason(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    from engine.threads import MAX_FORCED_THREADS, plan_threads

    monkeypatch.delenv("LETTERPRESS_THREADS", raising=False)
    monkeypatch.setenv(name, raw)
    plan = plan_threads(64 << 20, usable=4, busy=0.0, reserve_ui=False)
    assert 1 <= plan.threads <= 4 <= MAX_FORCED_THREADS and raw not in plan.reason
    (notice,) = env.notices()
    assert f"{name}={raw} is ignored" in notice and "the thread policy decides" in notice


def test_a_sane_forced_thread_count_still_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.threads import plan_threads

    monkeypatch.setenv("LETTERPRESS_THREADS", "3")
    assert plan_threads(64 << 20, usable=2, busy=0.0, reserve_ui=False).threads == 3 and env.notices() == []


@pytest.mark.parametrize(
    ("name", "raw"), [("LETTERPRESS_FASTPATH", "sure"), ("LETTERPRESS_LOG_DIR", "maybe")]
)
def test_on_off_switches_name_the_values_they_take(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    monkeypatch.setenv(name, raw)
    assert env.env_choice(name, "off", {"on": "on", "off": "off"}) == "off"
    (notice,) = env.notices()
    assert f"{name}={raw} is ignored: use one of on, off" in notice


@pytest.mark.slow
def test_the_command_line_loads_and_drafts_with_a_nan_prefix_cache(tiny_dir: Path, tmp_path: Path) -> None:
    before = tmp_path / "before.txt"
    before.write_text("In the morning", encoding="utf-8")
    run = run_engine(
        *("generate", "--model", str(tiny_dir), "--before-file", str(before)),
        *("--steps", "2", "--max-new-tokens", "8", "--jsonl"),
        env=engine_env(LETTERPRESS_PREFIX_CACHE_MB="nan", LETTERPRESS_THREADS="99999999999"),
    )
    assert run.returncode == 0, run.stdout[-500:] + run.stderr[-500:]
    assert json.loads(run.stdout.splitlines()[-1])["event"] == "done"
    assert "LETTERPRESS_PREFIX_CACHE_MB=nan is ignored" in run.stderr
    assert "LETTERPRESS_THREADS=99999999999 is ignored" in run.stderr


def test_the_app_says_why_it_ignores_a_log_level_from_the_environment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.__main__ import _log_level

    assert _log_level("chatty", lenient=True) == "WARNING"
    assert "LETTERPRESS_LOG_LEVEL=chatty is ignored" in capsys.readouterr().err
